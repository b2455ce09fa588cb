// Tessera's library entry point in a browser (package.json `exports` "browser" condition): every
// pure stage (./library.ts) and the portable backends — js and wasm — on a page's devices: the js
// device imports its module from a data: URL, the wasm device runs on Web Workers sharing its
// memory where the page is cross-origin isolated (and the caller is a worker), else on one thread.
// No Node module is reachable from here (test/browser-entry.test.ts bundles it to check).
import type { Layer } from "effect"
import { portableBackends } from "./backend/portable.js"
import type { Device } from "./device/device.js"
import { jsDeviceCoreLayer } from "./device/js/device.js"
import { wasmDeviceLayerWith, type WasmDeviceOptions } from "./device/wasm/device.js"
import { webThreadHost } from "./device/wasm/web-threads.js"
import { pipelineOf } from "./pipeline-core.js"

export * from "./library.js"
export { TargetUnavailableError, type Backend, type Codegen, type RunOptions } from "./backend/backend.js"
export { loadArtifact, pipelineOf, type BackendTable, type CompileOptions, type TuningReport } from "./pipeline-core.js"
export { jsDeviceCoreLayer as jsDeviceLayer, loadJsModule } from "./device/js/device.js"
export { webThreadHost } from "./device/wasm/web-threads.js"
export { compileModel, type CompileStage, type CompiledModel, type CompileModelOptions } from "./web/compile-model.js"
export { packProgram, unpackProgram, type PackedProgram } from "./web/packed-program.js"
export { loadPackedModel, type LoadedModel } from "./web/runtime.js"
export { fusionSvg } from "./rewrite/fusion-svg.js"

/** The wasm device on a page's workers (one thread where the page is not cross-origin isolated). */
export const wasmDeviceLayer = (o: WasmDeviceOptions = {}): Layer.Layer<Device> => wasmDeviceLayerWith({ threadHost: webThreadHost, ...o })

/** The backends a browser has: the interpreter, js and wasm. */
export const BACKENDS = portableBackends({ js: jsDeviceCoreLayer, wasm: wasmDeviceLayer })

export const { codegenFor, compileGraph, emitArtifact, loadProgram } = pipelineOf(BACKENDS)
