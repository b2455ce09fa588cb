// The table of backends: one record per target kind, typed over the kind union (a kind without a
// record does not compile). The pipeline, the CLI and the tuner look a target up here; adding a
// target is a folder per stage and one entry below (docs/architecture.md).
import { cpuAttrs, type TargetKind } from "../ast/target.js"
import { paramsOf } from "../ast/tir/analysis.js"
import { cArtifact, defaultCBuildConfig } from "../device/c/build.js"
import { cDeviceLayer, cUnavailable } from "../device/c/device.js"
import { jsDeviceLayer } from "../device/js/device.js"
import { wasmDeviceLayer } from "../device/wasm/device.js"
import { emitC } from "../emit/c/emit.js"
import { emitJsModule } from "../emit/js/emit.js"
import { emitWasmModule } from "../emit/wasm/emit.js"
import { compiledKernels, kernelsAlias, type Artifact, type KernelEntry, type Program } from "../lowering/program.js"
import { defaultPasses } from "../rewrite/index.js"
import type { Backend, Backends } from "./backend.js"
import { cpuGraphPasses, cpuSchedules, cpuTir } from "./cpu.js"
import { cuda } from "./cuda.js"

const utf8 = (s: string) => new TextEncoder().encode(s)

/** Each compiled kernel's entry: its name and params as a caller passes them. */
const kernelEntries = (program: Program): KernelEntry[] => compiledKernels(program).map((k) => ({ name: k.name, params: paramsOf(k.func) }))

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
    tir: cpuTir,
    emit: (program): Artifact => ({
      kind: "js",
      files: new Map([["model.js", utf8(emitJsModule(compiledKernels(program).map((k) => ({ name: k.name, func: k.func }))))]]),
      manifest: { module: "model.js", constants: "constants.bin" },
      kernels: kernelEntries(program),
    }),
    device: () => jsDeviceLayer,
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
    device: (_target, o) => wasmDeviceLayer({ threads: o.threads }),
  },
}

const c: Backend<"c"> = {
  kind: "c",
  summary: "C11 with OpenMP built by gcc into a shared library, called through an FFI",
  target: (host, threads) => ({ kind: "c", attrs: { ...host, cores: Math.max(1, threads) } }),
  unavailable: cUnavailable,
  parallel: true,
  graphPasses: cpuGraphPasses,
  codegen: {
    schedules: cpuSchedules,
    tir: cpuTir,
    emit: (program): Artifact => {
      // restrict unless an in-place kernel passes one block as two params
      const emitted = emitC(compiledKernels(program).map((k) => k.func), { restrict: !kernelsAlias(program) })
      const files = cArtifact(emitted)
      return {
        kind: "c",
        files: new Map([...files].map(([name, text]) => [name, utf8(text)] as const)),
        // the units in build order, each with the kernels it defines (the first's code, the others aliases of it)
        manifest: {
          header: "tessera_kernels.h",
          prelude: emitted.prelude.file,
          units: emitted.units.map((u) => ({ file: u.file, kernels: u.kernels })),
          makefile: "Makefile",
          library: "libtessera_kernels.so",
          constants: "constants.bin",
        },
        kernels: kernelEntries(program),
      }
    },
    device: (_target, o) => cDeviceLayer(defaultCBuildConfig(), o.threads),
    exactInt64: true,
    renderCandidates: (funcs) => emitC(funcs.map((f) => ({ ...f.func, name: f.name }))).source,
  },
}

export const BACKENDS: Backends = { interp, js, wasm, c, cuda }

/** The record of a kind. */
export const backendOf = <K extends TargetKind>(kind: K): Backend<K> => BACKENDS[kind] as Backend<K>

/** The kinds whose candidates the tuner can measure. */
export const TUNABLE_KINDS: readonly TargetKind[] = (Object.keys(BACKENDS) as TargetKind[]).filter((k) => BACKENDS[k].codegen?.renderCandidates !== undefined)

export { TargetUnavailableError, type Backend, type Backends, type BuildReport, type Codegen, type RunOptions, type TargetOptions, type TunedLookup } from "./backend.js"
