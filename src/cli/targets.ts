// The targets the command line compiles for, and one way to get a runnable model from a graph:
// bind → graph passes (instrumented when asked: the CLI owns the clock) → compileGraph → load the
// target's kernels → the executor. `interp` runs the optimized graph through the evaluator, so
// opt levels can be compared on the reference semantics.
import { Data, Effect } from "effect"
import { runGraph } from "../ast/graph/evaluate.js"
import type { Graph } from "../ast/graph/graph.js"
import { bind } from "../ast/graph/infer.js"
import type { Tensor } from "../ast/graph/tensor.js"
import { compilerAvailable } from "../device/c.js"
import { createExecutor, type LoadedKernels, type Program } from "../device/executor.js"
import { loadJsModule } from "../device/js.js"
import { emitWasmModule, type WasmEmitted } from "../emit/wasm/emit.js"
import { readLog } from "../device/records-file.js"
import { hostTarget } from "../device/host.js"
import { compileGraph, emitJs, loadCProgram, loadWasmProgram, targetPasses, type TuningReport } from "../pipeline.js"
import { defaultPasses, withPassConfig, type GraphPass, type PassInstrument } from "../rewrite/index.js"
import { bestRecords, type TuningRecord } from "../search/records.js"
import { targetKey } from "../search/task.js"
import { attempt, UsageError } from "./errors.js"

export const TARGETS = ["interp", "js", "c", "wasm"] as const
export type CliTarget = (typeof TARGETS)[number]

/** A target named on the command line that this build cannot compile for or run here. */
export class TargetUnavailableError extends Data.TaggedError("TargetUnavailableError")<{ readonly target: string; readonly reason: string }> {
  override get message(): string {
    return `the ${this.target} target is not available: ${this.reason}`
  }
}

export const parseTarget = (name: string, allowed: readonly CliTarget[] = TARGETS): Effect.Effect<CliTarget, UsageError> =>
  (allowed as readonly string[]).includes(name)
    ? Effect.succeed(name as CliTarget)
    : Effect.fail(new UsageError({ flag: "--target", reason: `no target '${name}' here (choose one of: ${allowed.join(", ")})` }))

export const parseOptLevel = (n: number): Effect.Effect<number, UsageError> =>
  Number.isInteger(n) && n >= 0 && n <= 3 ? Effect.succeed(n) : Effect.fail(new UsageError({ flag: "--opt-level", reason: `${n} is not an opt level (0, 1, 2 or 3)` }))

/**
 * What compileGraph is told about the machine: fp32 vector lanes (alterLayout's block) and cores.
 * Tuning records are keyed by the same values (`targetKey`), so tune, compile and bench agree.
 */
export interface TargetSettings {
  readonly kind: CliTarget
  readonly vectorLanes: number
  readonly cores: number
  /** Threads the loaded kernels run on (c: the cores compiled for; wasm: workers at load, the schedule unchanged). */
  readonly threads: number
}

export const targetSettings = (kind: CliTarget, threads = 1): TargetSettings => ({
  kind,
  vectorLanes: kind === "c" ? hostTarget().attrs.vectorLanes : kind === "interp" ? 0 : 4,
  cores: kind === "c" ? Math.max(1, threads) : 1,
  threads: Math.max(1, threads),
})

/** The key of tuning records for these settings (as in src/search/task.ts). */
export const settingsKey = (s: TargetSettings): string => targetKey({ kind: s.kind, vectorLanes: Math.max(s.vectorLanes, 1), cores: s.cores })

/** Is the target's toolchain here? The reason when not. */
export const targetMissing = (kind: CliTarget): string | undefined => {
  if (kind === "c" && !compilerAvailable("gcc")) return "gcc was not found on PATH; install gcc (with OpenMP) or use --target js"
  return undefined
}

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

/** The graph passes compileGraph runs for these settings (alterLayout and Winograd when the target has vectors). */
const passesFor = (s: TargetSettings): GraphPass => (s.kind !== "interp" ? targetPasses(s.vectorLanes) : defaultPasses)

export interface PrepareOptions {
  readonly settings: TargetSettings
  readonly optLevel: number
  readonly shapes: ReadonlyMap<string, readonly number[]>
  readonly tuned?: ReadonlyMap<string, TuningRecord>
  /** Record each pass (for --report and --dump-ir). */
  readonly trace: boolean
}

export interface Prepared {
  /** The graph after the passes (interp) or the compiled program's graph. */
  readonly graph: Graph
  readonly program?: Program & { readonly tuning: TuningReport }
  readonly passes: readonly PassEvent[]
  readonly compileMs: number
  readonly run: (feeds: ReadonlyMap<string, Tensor>) => Map<string, Tensor>
}

/** Compiles a graph for the target (interp: the passes only). */
export const compileFor = Effect.fn("cli.compileFor")(function* (graph: Graph, o: PrepareOptions) {
  const missing = targetMissing(o.settings.kind)
  if (missing) return yield* new TargetUnavailableError({ target: o.settings.kind, reason: missing })
  const events: PassEvent[] = []
  const t0 = performance.now()
  let optimized = graph
  if (o.trace || o.settings.kind === "interp") {
    const bound = yield* bind(graph, o.shapes, { requireStatic: o.settings.kind !== "interp" })
    optimized = yield* passesFor(o.settings)
      .run(bound)
      .pipe(withPassConfig({ optLevel: o.optLevel, instruments: o.trace ? [recorder(events)] : [] }))
  }
  if (o.settings.kind === "interp") return { graph: optimized, passes: events, compileMs: performance.now() - t0, program: undefined }
  // compileGraph runs the passes again on a traced graph: they are idempotent, and its own
  // PassConfig does not carry our instruments
  const program = yield* compileGraph(optimized, {
    target: o.settings.kind,
    optLevel: o.optLevel,
    vectorLanes: o.settings.vectorLanes,
    cores: o.settings.cores,
    shapes: o.shapes,
    ...(o.tuned ? { tuned: o.tuned } : {}),
  })
  return { graph: program.graph, passes: events, compileMs: performance.now() - t0, program }
})

/** The target's kernel functions for a compiled program. */
export const loadKernels = Effect.fn("cli.loadKernels")(function* (program: Program, kind: CliTarget, threads = 1) {
  switch (kind) {
    case "js":
      return yield* loadJsModule(emitJs(program))
    case "c":
      return yield* loadCProgram(program)
    case "wasm":
      return yield* loadWasmProgram(program, threads)
    default:
      return yield* new TargetUnavailableError({ target: kind, reason: targetMissing(kind) ?? "it has no loader" })
  }
})

/** The wasm target's module: one exported function per compiled kernel, with its frame layout. */
export const emitWasm = (program: Program): WasmEmitted =>
  emitWasmModule(program.kernels.flatMap((k) => (k.kind === "compiled" ? [{ name: k.name, func: k.func }] : [])))

/** Compiles and loads: a model ready to run. */
export const prepare = Effect.fn("cli.prepare")(function* (graph: Graph, o: PrepareOptions) {
  const c = yield* compileFor(graph, o)
  if (!c.program) {
    const g = c.graph
    const run = (feeds: ReadonlyMap<string, Tensor>) => {
      const outs = runGraph(g, feeds)
      return new Map(g.outputs.map((out, k) => [out.name, outs[k]] as const))
    }
    return { ...c, run } satisfies Prepared
  }
  const program = c.program
  const t0 = performance.now()
  const fns: LoadedKernels = yield* loadKernels(program, o.settings.kind, o.settings.threads)
  const exec = yield* attempt(() => createExecutor(program, fns))
  return { ...c, program, compileMs: c.compileMs + (performance.now() - t0), run: exec.run } satisfies Prepared
})

/** Reads a tuning log: the best record per workload for this target kind, and the log's warnings. */
export const readTuned = Effect.fn("cli.readTuned")(function* (file: string, settings: TargetSettings) {
  const log = yield* readLog(file)
  const key = settingsKey(settings)
  // records name the target kind; their workload key carries lanes and cores (`reduction|js:lanes=4:cores=1|…`)
  const best = bestRecords(log.records, settings.kind)
  const keyOf = (workload: string) => workload.split("|")[1] ?? ""
  const otherTargets = [...new Set(log.records.flatMap((r) => (r.target !== settings.kind ? [r.target] : keyOf(r.workload) !== key ? [keyOf(r.workload)] : [])))]
  return { best, records: log.records.length, warnings: log.warnings, key, otherTargets }
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
