// The one place that knows every stage: bind → the target's graph passes → fusion → memory plan
// (one pass pipeline) → each group lowered with the target's schedules and TIR passes → the
// target's emitter → its device. Each target is looked up in a backend table (src/backend) handed
// in: Node's every kind (./pipeline.ts), a browser's the portable ones (src/browser.ts); no stage
// here switches on the kind, and nothing here imports a Node module.
import { Effect } from "effect"
import { InterruptedError } from "./ast/graph/errors.js"
import type { Graph } from "./ast/graph/graph.js"
import { bind } from "./ast/graph/infer.js"
import type { ComputeTensor } from "./ast/te/tensor.js"
import { keyOf, type Target, type TargetKind } from "./ast/target.js"
import { TargetUnavailableError, type Backend, type Backends, type Codegen, type RunOptions, type TunedLookup } from "./backend/backend.js"
import { Device } from "./device/device.js"
import { createExecutor } from "./device/executor.js"
import { lowerGroups } from "./lowering/lower-group.js"
import type { Artifact, Program, RunnableProgram } from "./lowering/program.js"
import type { Knob, Template } from "./lowering/templates/template.js"
import type { FusedGroup } from "./rewrite/fuse-ops.js"
import { graphPipeline, PassConfig, tryTyped } from "./rewrite/index.js"
import { EmitError } from "./emit/emit-error.js"
import { GpuLimitError } from "./emit/cuda/verify.js"
import { rankedRecords, type TuningRecord } from "./search/records.js"
import { configHash, fitsKnobs, workloadOf } from "./search/task.js"

export interface CompileOptions {
  readonly optLevel?: number
  /**
   * Tuning records per workload (from `tessera tune` logs): the one to apply (`bestRecords`), or
   * all of them (`recordsByWorkload`), of which the best that fits the template's knobs is applied.
   */
  readonly tuned?: ReadonlyMap<string, TuningRecord | readonly TuningRecord[]>
  /**
   * Each group's config chosen by the caller (gpu-prepare's measured variants: a seeded config of
   * every group's space); it takes the place of `tuned`'s lookup, and a group it answers
   * undefined for takes its default.
   */
  readonly lookup?: TunedLookup
  /** Shapes binding symbolic input dims. */
  readonly shapes?: ReadonlyMap<string, readonly number[]>
}

/** Which groups took a tuned schedule, which ran the default, and which records were skipped (why). */
export interface TuningReport {
  readonly applied: number[]
  readonly untuned: number[]
  readonly skipped: { readonly group: number; readonly reason: string }[]
}

/**
 * The lookup of tuned configs for compileGraph: of the workload's records, those that fit its
 * template's knobs (`fitsKnobs`), and of them the one `rankedRecords` puts first (the fastest of
 * the last confirmation round, else the fastest trial); records that do not fit are passed over
 * and reported, so a stale or planted record never hides a good one.
 */
const tunedLookup = (target: Target, tuned: ReadonlyMap<string, TuningRecord | readonly TuningRecord[]>, report: TuningReport): TunedLookup => (group: FusedGroup, template: Template, knobs: readonly Knob[], outputs: readonly ComputeTensor[]) => {
  if (!template.tunable) return undefined
  const workload = workloadOf(outputs, template, keyOf(target))
  const found = tuned.get(workload)
  const recs: readonly TuningRecord[] = found === undefined ? [] : Array.isArray(found) ? found : [found as TuningRecord]
  const fitting = recs.filter((r) => fitsKnobs(knobs, r.config))
  if (fitting.length < recs.length) {
    const outside = recs.filter((r) => !fitting.includes(r))
    report.skipped.push({
      group: group.id,
      reason: `${outside.length} record${outside.length === 1 ? "" : "s"} (${configHash(outside[0].config)}${outside.length > 1 ? ", …" : ""}) outside the template's knobs (${knobs.map((k) => k.name).join(", ")})`,
    })
  }
  const best = rankedRecords(fitting, target.kind).get(workload)?.[0]
  if (!best) {
    // (no record, or none that ran: the default schedule; all outside the knobs: reported above)
    if (fitting.length > 0 || recs.length === 0) report.untuned.push(group.id)
    return undefined
  }
  report.applied.push(group.id)
  return best.config
}

/** The emitter's typed error (a program its target cannot render); anything else it throws is a bug. */
const isEmitError = (e: unknown): e is EmitError | GpuLimitError => e instanceof EmitError || e instanceof GpuLimitError

/** Loads an artifact on the Device in context and makes the executor of its program. */
export const loadArtifact = Effect.fn("tessera.load")(function* (program: RunnableProgram, artifact: Artifact) {
  const device = yield* Device
  const mod = yield* device.load(artifact)
  return createExecutor(program, mod)
})

/** A table of backend records: every kind (Node's) or some (a browser's: interp, js, wasm). */
export type BackendTable = { readonly [K in keyof Backends]?: Backends[K] }

/** The pipeline's stages over a backend table. */
export const pipelineOf = (table: BackendTable) => {
  /** A target's backend record, typed by the target's own kind, or TargetUnavailableError for a kind this table lacks. */
  const recordOf = <K extends TargetKind>(target: Target<K>): Effect.Effect<Backend<K>, TargetUnavailableError> => {
    const record = table[target.kind] as unknown as Backend<K> | undefined
    return record ? Effect.succeed(record) : Effect.fail(new TargetUnavailableError({ target: target.kind, reason: `this build has the ${Object.keys(table).join(", ")} targets` }))
  }

  /** A target's code generator, or TargetUnavailableError for a target that interprets (interp) or that this table lacks. */
  const codegenFor = <K extends TargetKind>(target: Target<K>): Effect.Effect<Codegen<K>, TargetUnavailableError> =>
    Effect.flatMap(recordOf(target), (record) => record.codegen ? Effect.succeed(record.codegen) : Effect.fail(new TargetUnavailableError({ target: target.kind, reason: "it interprets the graph and compiles nothing" })))

  /** Graph-level and operator-level compilation: a Program of kernels for the target. */
  const compileGraph = Effect.fn("tessera.compile")(function* (graph: Graph, target: Target, options: CompileOptions = {}) {
    const backend = yield* recordOf(target)
    const codegen = yield* codegenFor(target)
    // the caller's PassConfig (instruments, disabled passes, interrupt) stays; only the opt level is set here
    const config = { ...(yield* PassConfig), optLevel: options.optLevel ?? 3 }
    const bound = yield* bind(graph, options.shapes ?? new Map(), { requireStatic: true, ...(config.interrupt ? { interrupt: config.interrupt } : {}) })
    const planned = yield* graphPipeline(backend.graphPasses(target)).run(bound).pipe(Effect.provideService(PassConfig, config))
    const tuning: TuningReport = { applied: [], untuned: [], skipped: [] }
    const schedule = codegen.schedules(target, options.lookup ?? (options.tuned ? tunedLookup(target, options.tuned, tuning) : undefined))
    // the TIR passes under the same config: its opt level, disabled passes and instruments
    const kernels = yield* tryTyped(() => lowerGroups(planned, codegen.tir(target), schedule, config, { int64: codegen.exactInt64 === true, uint64: codegen.exactUint64 === true }), (e): e is InterruptedError => e instanceof InterruptedError)
    return { graph: planned.graph, fused: { graph: planned.graph, groups: planned.groups }, memory: planned.memory, kernels, tuning } satisfies Program & { tuning: TuningReport }
  })

  /** The target's artifact for a program: its emitter's files and kernel entries (pure). */
  const emitArtifact = (program: Program, target: Target, options: RunOptions = {}): Effect.Effect<Artifact, TargetUnavailableError | EmitError | GpuLimitError> =>
    Effect.flatMap(codegenFor(target), (codegen) => tryTyped(() => codegen.emit(program, target, options), isEmitError))

  /** Emits and loads a program on its target's own device: a model ready to run. */
  const loadProgram = Effect.fn("tessera.loadProgram")(function* (program: Program, target: Target, options: RunOptions = {}) {
    const codegen = yield* codegenFor(target)
    const artifact = yield* emitArtifact(program, target, options)
    return yield* loadArtifact(program, artifact).pipe(Effect.provide(codegen.device(target, options)))
  })

  return { recordOf, codegenFor, compileGraph, emitArtifact, loadProgram }
}
