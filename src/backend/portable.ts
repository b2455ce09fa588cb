// The backends that run in Node and in a browser (interp, js, wasm): pure records whose devices
// are handed in — Node's (worker_threads for wasm's threads and js's measurer: ./index.ts) or a
// page's (src/browser.ts) — so nothing here imports a Node module.
import type { Layer } from "effect"
import { cpuAttrs } from "../ast/target.js"
import { paramsOf } from "../ast/tir/analysis.js"
import type { Device } from "../device/device.js"
import type { WasmDeviceOptions } from "../device/wasm/device.js"
import { emitJsModule } from "../emit/js/emit.js"
import { emitWasmModule } from "../emit/wasm/emit.js"
import { compiledKernels, type Artifact, type KernelEntry, type Program } from "../lowering/program.js"
import { defaultPasses } from "../rewrite/index.js"
import type { Backend } from "./backend.js"
import { cpuGraphPasses, cpuSchedules, cpuTir, scheduleTarget } from "./cpu.js"

/** The devices the portable records run on. */
export interface PortableDevices {
  readonly js: Layer.Layer<Device>
  readonly wasm: (o: WasmDeviceOptions) => Layer.Layer<Device>
}

export const utf8 = (s: string) => new TextEncoder().encode(s)

/** Each compiled kernel's entry: its name and params as a caller passes them. */
export const kernelEntries = (program: Program): KernelEntry[] => compiledKernels(program).map((k) => ({ name: k.name, params: paramsOf(k.func) }))

/** The interp, js and wasm records on these devices. */
export const portableBackends = (devices: PortableDevices): { readonly interp: Backend<"interp">; readonly js: Backend<"js">; readonly wasm: Backend<"wasm"> } => {
  const interp: Backend<"interp"> = {
    kind: "interp",
    summary: "the reference interpreter: the optimized graph run by the evaluator",
    target: (host) => ({ kind: "interp", attrs: { ...host, vectorLanes: 0, cores: 1 } }),
    unavailable: () => undefined,
    parallel: false,
    graphPasses: () => defaultPasses,
  }

  const js: Backend<"js"> = {
    kind: "js",
    summary: "one ES module of plain JavaScript (the portable reference backend), in Node or a browser",
    // the portable targets share wasm's 4-lane blocked layout, so one layout serves both
    target: () => ({ kind: "js", attrs: cpuAttrs({ isa: "scalar", vectorLanes: 4 }) }),
    unavailable: () => undefined,
    parallel: false,
    graphPasses: cpuGraphPasses,
    codegen: {
      schedules: cpuSchedules,
      scheduleTarget,
      tir: cpuTir,
      emit: (program): Artifact => ({
        kind: "js",
        files: new Map([["model.js", utf8(emitJsModule(compiledKernels(program).map((k) => ({ name: k.name, func: k.func }))))]]),
        manifest: { module: "model.js", constants: "constants.bin" },
        kernels: kernelEntries(program),
      }),
      device: () => devices.js,
      // int64 / uint64 as BigInts in BigInt64Arrays / BigUint64Arrays (src/emit/js/expr.ts)
      exactInt64: true,
      exactUint64: true,
      renderCandidates: emitJsModule,
    },
  }

  const wasm: Backend<"wasm"> = {
    kind: "wasm",
    summary: "one WebAssembly module with SIMD128 (threads: workers sharing its memory), in Node or a browser",
    // the schedules plan for one core: workers split a parallel phase's iterations at load
    target: () => ({ kind: "wasm", attrs: cpuAttrs({ isa: "simd128" }) }),
    unavailable: () => undefined,
    parallel: true,
    graphPasses: cpuGraphPasses,
    codegen: {
      schedules: cpuSchedules,
      scheduleTarget,
      tir: cpuTir,
      emit: (program, _target, o): Artifact => {
        // a shared memory when the parallel phases are to run on several threads (the caller asks
        // for threads only where the host has them: wasmThreadsAvailable)
        const sharedMemory = (o.threads ?? 1) > 1
        const em = emitWasmModule(compiledKernels(program).map((k) => ({ name: k.name, func: k.func })), { sharedMemory })
        return {
          kind: "wasm",
          files: new Map([["model.wasm", em.bytes]]),
          manifest: { module: "model.wasm", constants: "constants.bin", imports: { memory: "env.memory", math: "math.*" }, frames: em.kernels, ...(sharedMemory ? { sharedMemory } : {}) },
          kernels: em.kernels.map((k) => ({ name: k.name, params: k.params.map((p) => ({ dtype: p.dtype, elements: p.length, shape: p.shape, written: p.written, copyIn: p.copyIn })), frame: { bytes: k.frameBytes, phases: k.phases } })),
        }
      },
      device: (_target, o) => devices.wasm({ threads: o.threads }),
      // int64 / uint64 as i64 in memory and in the code (src/emit/wasm/convert.ts, binary.ts)
      exactInt64: true,
      exactUint64: true,
    },
  }
  return { interp, js, wasm }
}
