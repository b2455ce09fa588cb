// The targets the command line compiles for, and one way to get a runnable model from a graph:
// bind → graph passes (instrumented when asked: the CLI owns the clock) → compileGraph → load the
// target's kernels → the executor. `interp` runs the optimized graph through the evaluator, so
// opt levels can be compared on the reference semantics.
import { Effect } from "effect"
import type { Interrupt } from "../ast/graph/errors.js"
import { newRunLimits, runGraph } from "../ast/graph/evaluate.js"
import type { Graph } from "../ast/graph/graph.js"
import { bind } from "../ast/graph/infer.js"
import type { Tensor } from "../ast/graph/tensor.js"
import { isTargetKind, keyOf, TARGET_KINDS, type Target, type TargetKind } from "../ast/target.js"
import { BACKENDS, TargetUnavailableError, type TargetOptions } from "../backend/index.js"
import { hostCpu } from "../device/host.js"
import type { Program } from "../lowering/program.js"
import { logWarnings, readLog } from "./tuning-log.js"
import { backendFor, compileGraph, loadProgram, type TuningReport } from "../pipeline.js"
import { withPassConfig, type PassInstrument } from "../rewrite/index.js"
import { recordsByWorkload, type TuningRecord } from "../search/records.js"
import { UsageError } from "./errors.js"

export { TargetUnavailableError }

/** The kinds a command may name (cuda runs where a GPU is: elsewhere loading it is a NoGpuError, exit 2). */
export const TARGETS: readonly TargetKind[] = TARGET_KINDS

export const parseTarget = (name: string, allowed: readonly TargetKind[] = TARGETS): Effect.Effect<TargetKind, UsageError> =>
  isTargetKind(name) && allowed.includes(name)
    ? Effect.succeed(name)
    : Effect.fail(new UsageError({ flag: "--target", reason: `no target '${name}' here (choose one of: ${allowed.join(", ")})` }))

export const parseOptLevel = (n: number): Effect.Effect<number, UsageError> =>
  Number.isInteger(n) && n >= 0 && n <= 3 ? Effect.succeed(n) : Effect.fail(new UsageError({ flag: "--opt-level", reason: `${n} is not an opt level (0, 1, 2 or 3)` }))

/**
 * The target a command compiles for on this host (its backend's record for this CPU and thread
 * count: the vector lanes of alterLayout's block, the cores the schedules plan for), and the
 * threads its kernels run on. Tuning records are keyed by the same target (`keyOf`), so tune,
 * compile and bench agree.
 */
export interface TargetSettings {
  readonly target: Target
  /** Threads the loaded kernels run on; absent: the device's default (c: the pool's own — OMP_NUM_THREADS, else the CPUs the process may use). */
  readonly threads?: number
}

/** The settings for a kind on this host: `threads` given on the command line, or the device's default. */
export const targetSettings = (kind: TargetKind, threads?: number, options: TargetOptions = {}): TargetSettings => ({
  target: BACKENDS[kind].target(hostCpu(), Math.max(1, threads ?? 1), options),
  ...(threads !== undefined ? { threads: Math.max(1, threads) } : {}),
})

/** Is the target's toolchain here? The reason when not. */
export const targetMissing = (kind: TargetKind): string | undefined => BACKENDS[kind].unavailable()

/** One pass run, as the instruments saw it. */
export interface PassEvent {
  readonly pass: string
  /** Nesting: a pass inside a `sequential` inside another is at depth 1, and so on. */
  readonly depth: number
  readonly ms: number
  readonly nodesBefore: number
  readonly nodesAfter: number
  /** True when no pass ran inside it (its graph is one step of the pipeline). */
  readonly leaf: boolean
  readonly graph: Graph
}

/** Instruments that time each pass and keep its result (the clock is read here, in the CLI). */
/** A graph pass's IR (the instruments see fused graphs and TIR functions too). */
const isGraph = (ir: unknown): ir is Graph => typeof ir === "object" && ir !== null && "nodes" in ir && "valueTypes" in ir && !("groups" in ir)

const recorder = (events: PassEvent[]): PassInstrument => {
  const stack: { pass: string; t0: number; nodes: number; count: number }[] = []
  return {
    before: (pass, ir) => {
      if (isGraph(ir)) stack.push({ pass, t0: performance.now(), nodes: ir.nodes.length, count: events.length })
    },
    after: (pass, g) => {
      if (!isGraph(g)) return
      const top = stack.pop()
      if (!top || top.pass !== pass) return
      const leaf = events.length === top.count
      events.splice(top.count, 0, { pass, depth: stack.length, ms: performance.now() - top.t0, nodesBefore: top.nodes, nodesAfter: g.nodes.length, leaf, graph: g })
    },
  }
}

export interface PrepareOptions {
  readonly settings: TargetSettings
  readonly optLevel: number
  readonly shapes: ReadonlyMap<string, readonly number[]>
  readonly tuned?: ReadonlyMap<string, TuningRecord | readonly TuningRecord[]>
  /** Record each pass (for --report and --dump-ir). */
  readonly trace: boolean
  /** The supervisor's stop flag: checked at every pass, group, node and kernel boundary. */
  readonly interrupt?: Interrupt
  /** Passes not to run, by name (`tessera quantize` measures its QDQ model's float meaning: no rewrite.QdqToInteger). */
  readonly disabled?: ReadonlySet<string>
}

export interface Prepared {
  /** The graph after the passes (interp) or the compiled program's graph. */
  readonly graph: Graph
  readonly program?: Program & { readonly tuning: TuningReport }
  readonly passes: readonly PassEvent[]
  readonly compileMs: number
  readonly run: (feeds: ReadonlyMap<string, Tensor>) => Map<string, Tensor>
  /** Median ms the last run's compiled kernels take on the device alone (no copies, syncs or host kernels), where the device times that (cuda). */
  readonly kernelMs?: () => number
}

/** Compiles a graph for the target (interp: the passes only). */
export const compileFor = Effect.fn("cli.compileFor")(function* (graph: Graph, o: PrepareOptions) {
  const { target } = o.settings
  const backend = backendFor(target)
  const missing = backend.unavailable()
  if (missing) return yield* new TargetUnavailableError({ target: target.kind, reason: missing })
  const events: PassEvent[] = []
  const stop = o.interrupt ? { interrupt: o.interrupt } : {}
  const config = { ...stop, ...(o.disabled ? { disabled: o.disabled } : {}) }
  const t0 = performance.now()
  let optimized = graph
  if (o.trace || !backend.codegen) {
    const bound = yield* bind(graph, o.shapes, { requireStatic: backend.codegen !== undefined, ...stop })
    optimized = yield* backend.graphPasses(target).run(bound).pipe(withPassConfig({ optLevel: o.optLevel, instruments: o.trace ? [recorder(events)] : [], ...config }))
  }
  if (!backend.codegen) return { graph: optimized, passes: events, compileMs: performance.now() - t0, program: undefined }
  // compileGraph runs the passes again on a traced graph: they are idempotent, and its own
  // PassConfig does not carry our instruments
  const program = yield* compileGraph(optimized, target, { optLevel: o.optLevel, shapes: o.shapes, ...(o.tuned ? { tuned: o.tuned } : {}) }).pipe(withPassConfig(stop))
  return { graph: program.graph, passes: events, compileMs: performance.now() - t0, program }
})

/** Compiles and loads: a model ready to run. */
export const prepare = Effect.fn("cli.prepare")(function* (graph: Graph, o: PrepareOptions) {
  const c = yield* compileFor(graph, o)
  if (!c.program) {
    const g = c.graph
    const run = (feeds: ReadonlyMap<string, Tensor>) => {
      const outs = runGraph(g, feeds, undefined, undefined, newRunLimits(o.interrupt))
      return new Map(g.outputs.map((out, k) => [out.name, outs[k]] as const))
    }
    return { ...c, run } satisfies Prepared
  }
  const program = c.program
  const t0 = performance.now()
  const exec = yield* loadProgram(program, o.settings.target, o.settings.threads !== undefined ? { threads: o.settings.threads } : {})
  const timeKernels = exec.timeKernels
  return {
    ...c,
    program,
    compileMs: c.compileMs + (performance.now() - t0),
    run: (feeds: ReadonlyMap<string, Tensor>) => exec.run(feeds, undefined, o.interrupt),
    ...(timeKernels ? { kernelMs: () => timeKernels() * 1000 } : {}),
  } satisfies Prepared
})

/**
 * Reads a tuning log: this target kind's records per workload (compile applies the best of those
 * that fit the template's knobs), and the lines skipped as warnings.
 */
export const readTuned = Effect.fn("cli.readTuned")(function* (file: string, settings: TargetSettings) {
  const log = yield* readLog(file)
  const { target } = settings
  const key = keyOf(target)
  // records name the target kind; their workload key carries lanes and cores (`reduction|js:lanes=4:cores=1|…`)
  const best = recordsByWorkload(log.records, target.kind)
  const keyIn = (workload: string) => workload.split("|")[1] ?? ""
  const otherTargets = [...new Set(log.records.flatMap((r) => (r.target !== target.kind ? [r.target] : keyIn(r.workload) !== key ? [keyIn(r.workload)] : [])))]
  return { best, records: log.records.length, warnings: logWarnings(log), key, otherTargets }
})

/** The tuning report as lines for stderr. */
export const tuningLines = (file: string, t: { readonly records: number; readonly key: string; readonly otherTargets: readonly string[] }, r: TuningReport | undefined): string[] => {
  const lines = [`tuning log ${file}: ${t.records} records; target ${t.key}`]
  if (t.otherTargets.length) lines.push(`  records for other targets are not used: ${t.otherTargets.join(", ")} (tune with the same --target and --threads)`)
  if (r) {
    const ids = (xs: readonly number[]) => (xs.length ? xs.map((x) => `#${x}`).join(" ") : "none")
    lines.push(`  applied: ${r.applied.length} groups (${ids(r.applied)})`)
    lines.push(`  untuned (default schedule, no record): ${r.untuned.length} groups (${ids(r.untuned)})`)
    lines.push(`  skipped: ${r.skipped.length}${r.skipped.map((s) => `\n    #${s.group}: ${s.reason}`).join("")}`)
  }
  return lines
}
