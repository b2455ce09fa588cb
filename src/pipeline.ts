// The one place that knows every stage: decode → bind → graph passes → fusion → memory plan →
// lowering of each group → emission; and, through src/device, loading and running.
import { Effect } from "effect"
import type { Graph } from "./ast/graph/graph.js"
import { bind } from "./ast/graph/infer.js"
import { lowerGroups } from "./lowering/lower-group.js"
import { defaultSchedule, type Knob, type Template } from "./lowering/templates.js"
import type { FusedGroup } from "./rewrite/fuse-ops.js"
import type { ComputeTensor } from "./ast/te/tensor.js"
import type { TuningRecord } from "./search/records.js"
import { configHash, indexOfConfig, targetKey, workloadOf } from "./search/task.js"
import { winogradConv } from "./rewrite/winograd.js"
import { alterLayout, defaultPasses, fuseOps, planMemory, sequential, singletonGroups, PassConfig, type GraphPass } from "./rewrite/index.js"
import type { KernelFn, LoadedKernels, Program } from "./device/executor.js"
import { emitC, type CEmitted } from "./emit/c/emit.js"
import { alignedHostMemory, buildC, loadC, type CBuildConfig } from "./device/c.js"
import { emitWasmModule, type WasmEmitOptions, type WasmEmitted } from "./emit/wasm/emit.js"
import { loadWasmModule, wasmThreadsAvailable } from "./device/wasm.js"
import { emitJsModule } from "./emit/js/emit.js"

export type TargetKind = "interp" | "js" | "c" | "wasm"

export interface CompileOptions {
  readonly target: TargetKind
  readonly optLevel?: number
  /** fp32 vector lanes of the CPU (alterLayout's block); 0 keeps NCHW. */
  readonly vectorLanes?: number
  /** Cores the parallel loops may use. */
  readonly cores?: number
  /** Best tuning record per workload (from `tessera tune` logs). */
  readonly tuned?: ReadonlyMap<string, TuningRecord>
  /** Shapes binding symbolic input dims. */
  readonly shapes?: ReadonlyMap<string, readonly number[]>
}

/**
 * The graph passes for a CPU target with `lanes` fp32 vector lanes: the default passes, then (with
 * lanes) the blocked layout and Winograd convolution. One list for compileGraph, the CLI's traced
 * runs and the compile-time script.
 */
export const targetPasses = (lanes: number): GraphPass =>
  lanes > 1 ? sequential("rewrite.Target", [defaultPasses, alterLayout({ vectorLanes: lanes }), winogradConv]) : defaultPasses

/** Graph-level and operator-level compilation: a Program of kernels for the target. */
export const compileGraph = Effect.fn("tessera.compile")(function* (graph: Graph, options: CompileOptions) {
  const optLevel = options.optLevel ?? 3
  const bound = yield* bind(graph, options.shapes ?? new Map(), { requireStatic: true })
  const lanes = options.vectorLanes ?? 0
  const passes = options.target !== "interp" ? targetPasses(lanes) : defaultPasses
  // the caller's PassConfig (instruments, disabled passes) stays; only the opt level is set here
  const outer = yield* PassConfig
  const optimized = yield* passes.run(bound).pipe(Effect.provideService(PassConfig, { ...outer, optLevel }))
  const fused = optLevel >= fuseOps.optLevel ? yield* fuseOps.run(optimized) : singletonGroups(optimized)
  const memory = planMemory(fused)
  const target = { kind: options.target, vectorLanes: Math.max(lanes, 1), cores: options.cores ?? 1 }
  const tuning: TuningReport = { applied: [], untuned: [], skipped: [] }
  const lookup = options.tuned
    ? (group: FusedGroup, template: Template, knobs: readonly Knob[], outputs: readonly ComputeTensor[]) => {
        if (!template.tunable) return undefined
        const workload = workloadOf(outputs, template, targetKey(target))
        const rec = options.tuned!.get(workload)
        if (!rec) {
          tuning.untuned.push(group.id)
          return undefined
        }
        // a record whose knobs no longer fit the template is skipped, with the reason
        if (indexOfConfig(knobs, rec.config) === undefined) {
          tuning.skipped.push({ group: group.id, reason: `record ${configHash(rec.config)} does not fit the template's knobs (${knobs.map((k) => k.name).join(", ")})` })
          return undefined
        }
        tuning.applied.push(group.id)
        return rec.config
      }
    : undefined
  const kernels = lowerGroups(fused, defaultSchedule(target, lookup))
  return { graph: fused.graph, fused, memory, kernels, tuning } satisfies Program & { tuning: TuningReport }
})

/** Which groups took a tuned schedule, which ran the default, and which records were skipped (why). */
export interface TuningReport {
  readonly applied: number[]
  readonly untuned: number[]
  readonly skipped: { readonly group: number; readonly reason: string }[]
}

/** The js target's artifact: one ES module with a function per compiled kernel. */
export const emitJs = (program: Program): string =>
  emitJsModule(program.kernels.flatMap((k) => (k.kind === "compiled" ? [{ name: k.name, func: k.func }] : [])))

/** Do two args of one compiled kernel share storage (an in-place output)? Then C params may alias. */
export const kernelsAlias = (program: Program): boolean => {
  const storageOf = new Map(program.memory.values.map((v) => [v.value, v.storage] as const))
  return program.kernels.some((k) => {
    if (k.kind !== "compiled") return false
    const ids = k.args.map((a) => storageOf.get(a)).filter((x): x is number => x !== undefined)
    return new Set(ids).size !== ids.length
  })
}

/** The c target's source: one C function per compiled kernel (restrict unless buffers alias). */
export const emitCProgram = (program: Program): CEmitted =>
  emitC(
    program.kernels.flatMap((k) => (k.kind === "compiled" ? [k.func] : [])),
    { restrict: !kernelsAlias(program) },
  )

/** Builds (cached by content) and loads the c target's kernels. */
export const loadCProgram = Effect.fn("tessera.loadC")(function* (program: Program, config?: CBuildConfig) {
  const funcs = program.kernels.flatMap((k) => (k.kind === "compiled" ? [k.func] : []))
  const so = yield* buildC(emitCProgram(program).source, config)
  const mod = yield* loadC(so, funcs)
  // planned blocks and constants in 64-byte aligned memory (vector loads within cache lines): a
  // memory of its own for each executor made from these kernels (each reserves its blocks once)
  const fns = new Map<string, KernelFn>([...mod.kernels].map(([name, fn]) => [name, fn as KernelFn]))
  return Object.defineProperty(fns, "memory", { get: alignedHostMemory, enumerable: true }) as LoadedKernels
})

/** The wasm target's module: one exported function per compiled kernel (SIMD128 where vectorized). */
export const emitWasmProgram = (program: Program, opts: WasmEmitOptions = {}): WasmEmitted =>
  emitWasmModule(program.kernels.flatMap((k) => (k.kind === "compiled" ? [{ name: k.name, func: k.func }] : [])), opts)

/** Validates, instantiates and returns the wasm target's kernels; parallel loops on `threads` where the host has threads. */
export const loadWasmProgram = (program: Program, threads = 1) => {
  const shared = threads > 1 && wasmThreadsAvailable()
  const emitted = emitWasmProgram(program, { sharedMemory: shared })
  return loadWasmModule(emitted.bytes, emitted.kernels, { threads: shared ? threads : 1 })
}
