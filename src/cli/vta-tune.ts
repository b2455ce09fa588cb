// `tessera tune MODEL --target vta --log LOG`: tunes the schedules of a quantized model's
// convolutions offloaded to VTA (src/cli/vta.ts's partition), with the simulator's cycle count as
// the measure (src/search/vta-conv2d.ts: timing-only runs, deterministic, so each candidate is
// simulated once and never timed or confirmed). One task per distinct layer shape (the shift and
// clip bound do not change a program's timing); its first trials are the default schedules with
// 1–4 virtual threads, so a task's best is never slower than what runs without a log. Records go
// to the log as the c tuner's do (keyed by workload and target "vta", cost in seconds at the
// configuration's clock, appended and fsynced a batch at a time, so a stopped tuner resumes from
// its log); `compile / run / inspect --target vta --tuned LOG` apply the fastest.
import cliProgress from "cli-progress"
import { Console, Effect } from "effect"
import { checkInterrupt, InterruptedError } from "../ast/graph/errors.js"
import type { VtaDerived } from "../ast/vta/config.js"
import { lockFile } from "../device/file-lock.js"
import { FileAccessError, readModel } from "../device/files.js"
import { VTA_CYCLE_MODEL } from "../device/vta/cycle-model.js"
import { convLayerOf } from "../lowering/vta/layers.js"
import type { Config } from "../lowering/templates/template.js"
import type { VtaLayer } from "../rewrite/vta-partition.js"
import { makeXGBoostModel } from "../search/cost-model.js"
import { evoTuner } from "../search/evolutionary.js"
import { isTrial, RECORD_VERSION, withoutRecordsOutside, type TuningRecord } from "../search/records.js"
import { fitsKnobs, spaceSize } from "../search/task.js"
import { gaTuner, gridTuner, randomTuner, xgbTuner, type Tuner } from "../search/tuners.js"
import { measureVtaConv2d, memoMeasure, tuneVtaConv2d, vtaConv2dFeatures, vtaConv2dTask, vtaDefaultConfigs, type VtaConv2dTask, type VtaMeasured, type VtaTuneResult } from "../search/vta-conv2d.js"
import { attempt, UsageError } from "./errors.js"
import { planInputs } from "./inputs.js"
import type { TuneCommandOptions } from "./tune-options.js"
import { appendRecords, logWarnings, readLog } from "./tuning-log.js"
import { DEFAULT_CONFIRM } from "../search/tune.js"
import { planVta } from "./vta.js"

/** A task: one distinct conv shape and the offloaded layers that have it. */
export interface VtaTuneTask {
  readonly task: VtaConv2dTask
  readonly layers: readonly string[]
  /** The default schedules (1–4 virtual threads that fit), measured first. */
  readonly defaults: readonly Config[]
}

/** The model's VTA tuning tasks: its offloaded convs grouped by workload, in graph order. */
export const vtaTuneTasks = (d: VtaDerived, offloaded: readonly VtaLayer[]): VtaTuneTask[] => {
  const byWorkload = new Map<string, { task: VtaConv2dTask; layers: string[]; defaults: Config[] }>()
  for (const l of offloaded) {
    if (l.kind !== "conv") continue
    const x = convLayerOf(d, l)
    const shape = `${l.c}x${l.h}x${l.w} k${l.kh} s${l.stride} -> ${l.m}${l.bias ? " +bias" : ""}`
    const task = vtaConv2dTask(d, shape, x, VTA_CYCLE_MODEL, { withDefaults: true })
    const seen = byWorkload.get(task.workload)
    if (seen) seen.layers.push(l.name)
    else byWorkload.set(task.workload, { task, layers: [l.name], defaults: vtaDefaultConfigs(d, x) })
  }
  return [...byWorkload.values()]
}

/** The tuners a VTA task can use (they see only the knobs; xgb and evo learn from the static features of the lowered stream). */
const vtaTuner = (name: TuneCommandOptions["tuner"], d: VtaDerived, t: VtaTuneTask, seed: number): Effect.Effect<Tuner, unknown> =>
  Effect.gen(function* () {
    const features = vtaConv2dFeatures(d, VTA_CYCLE_MODEL, t.task.layer)
    switch (name) {
      case "random":
        return randomTuner(t.task, seed)
      case "grid":
        return gridTuner(t.task)
      case "ga":
        return gaTuner(t.task, seed)
      case "xgb":
        return xgbTuner(t.task, { seed, model: yield* makeXGBoostModel(), features, target: "rank" })
      case "evo":
        return evoTuner(t.task, { seed, model: yield* makeXGBoostModel(), features, seeds: [...t.defaults] })
    }
  })

/** Cycles of a record (its cost is seconds at the configuration's clock). */
const cyclesOf = (d: VtaDerived, r: TuningRecord): number | undefined => (r.error !== undefined || r.costs.length === 0 ? undefined : Math.round(Math.min(...r.costs) * d.config.clockMhz * 1e6))

/** A measured candidate as a record of the log (the c tuner's format; cost in seconds at the clock, gflops: GEMM GOP/s at the clock). */
const recordOf = (d: VtaDerived, t: VtaConv2dTask, m: VtaMeasured, tuner: string, now: string): TuningRecord => {
  const cost = m.cycles !== undefined ? m.cycles / (d.config.clockMhz * 1e6) : undefined
  return {
    v: RECORD_VERSION,
    task: t.id,
    workload: t.workload,
    target: "vta",
    config: m.config,
    costs: cost === undefined ? [] : [cost],
    timestamp: now,
    tuner,
    ...(m.error !== undefined ? { error: m.error } : {}),
    ...(cost !== undefined ? { gflops: (2 * t.macs) / cost / 1e9 } : {}),
  }
}

/** Flags of `tune` that mean nothing for VTA's deterministic, simulated measure: refused, never ignored. */
const refusedFlags = (o: TuneCommandOptions): UsageError | undefined => {
  const why = "VTA's trials are simulated cycle counts (deterministic; nothing is built or timed)"
  if (o.threads !== 1) return new UsageError({ flag: "--threads", reason: `${why}: there are no threads to tune for` })
  if (o.chunk !== undefined) return new UsageError({ flag: "--chunk", reason: `${why}: nothing is built in chunks` })
  if (o.buildJobs !== undefined) return new UsageError({ flag: "--build-jobs", reason: `${why}: nothing is built` })
  if (o.vectorLanes !== undefined) return new UsageError({ flag: "--vector-lanes", reason: `${why}: the configuration's BLOCK sets the layout` })
  if (o.timeBudget !== undefined) return new UsageError({ flag: "--time-budget", reason: `${why}: give the trials per task (--trials) instead` })
  if (o.measure.repeats !== 3) return new UsageError({ flag: "--repeats", reason: `${why}: a repeat gives the same count` })
  if (o.measure.minRepeatMs !== 20) return new UsageError({ flag: "--min-repeat-ms", reason: `${why}: nothing is timed` })
  if (o.measure.timeoutMs !== 60_000) return new UsageError({ flag: "--timeout-ms", reason: `${why}: nothing is timed` })
  if (o.measure.flushBytes === 0) return new UsageError({ flag: "--warm-cache", reason: `${why}: there is no host cache in the measure` })
  if (o.confirm !== undefined && o.confirm !== DEFAULT_CONFIRM) return new UsageError({ flag: "--confirm", reason: `${why}: a second measurement gives the same count, so there is nothing to confirm` })
  return undefined
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`

/** The final table: one row per task. */
export const vtaTuneTable = (rows: readonly { readonly t: VtaTuneTask; readonly result: VtaTuneResult; readonly resumed: number; readonly defaultCycles?: number }[], d: VtaDerived): string => {
  const roof = 2 * d.batch * d.blockIn * d.blockOut
  const header = ["task", "workload", "layers", "space", "trials", "resumed", "errors", "default cycles", "best cycles", "best util", "vs default"]
  const body = rows.map(({ t, result, resumed, defaultCycles }) => {
    const best = result.best?.cycles
    return [
      t.task.id,
      t.task.label,
      String(t.layers.length),
      String(spaceSize(t.task.knobs)),
      String(result.trials),
      String(resumed),
      String(result.errors),
      defaultCycles !== undefined ? String(defaultCycles) : "-",
      best !== undefined ? String(best) : "-",
      best !== undefined ? pct((2 * t.task.macs) / best / roof) : "-",
      best !== undefined && defaultCycles !== undefined ? `${(defaultCycles / best).toFixed(2)}x` : "-",
    ]
  })
  const widths = header.map((h, k) => Math.max(h.length, ...body.map((r) => r[k].length)))
  const line = (cells: readonly string[]) => cells.map((c, k) => (k >= 2 ? c.padStart(widths[k]) : c.padEnd(widths[k]))).join("  ")
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...body.map(line)].join("\n")
}

/** A stop request inside the tuning loop (a defect: it is thrown from the measure) back as a typed failure. */
const stopAsFailure = <A, E, R>(eff: Effect.Effect<A, E, R>): Effect.Effect<A, E | InterruptedError | FileAccessError, R> =>
  Effect.catchDefect(eff, (d) => (d instanceof InterruptedError || d instanceof FileAccessError ? Effect.fail(d) : Effect.die(d)))

/** `tessera tune --target vta` (tune.ts hands it the parsed flags). */
export const tuneVtaCommand = Effect.fn("cli.tuneVta")(function* (o: TuneCommandOptions) {
  if (o.trials < 1) return yield* new UsageError({ flag: "--trials", reason: `must be at least 1, got ${o.trials}` })
  if (o.batch < 1 || o.batch > 4096) return yield* new UsageError({ flag: "--batch", reason: `must be from 1 to 4096, got ${o.batch}` })
  if (o.earlyStopping !== undefined && o.earlyStopping < 1) return yield* new UsageError({ flag: "--early-stopping", reason: `must be at least 1, got ${o.earlyStopping}` })
  const refused = refusedFlags(o)
  if (refused) return yield* refused
  return yield* Effect.acquireUseRelease(
    lockFile(o.log),
    (lock) =>
      Effect.gen(function* () {
        if (lock.broke) yield* Console.error(`tessera tune: ${o.log}: removed a stale lock of ${lock.broke}`)
        return yield* tuneVtaLocked(o)
      }),
    (lock) => Effect.sync(lock.release),
  )
})

const tuneVtaLocked = Effect.fn("cli.tuneVtaLocked")(function* (o: TuneCommandOptions) {
  const graph = yield* readModel(o.model)
  const inputs = yield* attempt(() => planInputs(graph, new Map(), new Map()))
  const plan = yield* attempt(() => planVta(graph, new Map(inputs.map((p) => [p.name, p.shape] as const)), o.interrupt ? { interrupt: o.interrupt } : {}))
  const { d } = plan
  const all = vtaTuneTasks(d, plan.partition.offloaded)
  if (all.length === 0)
    return yield* new UsageError({ flag: "MODEL", reason: `no convolution of ${o.model} runs on VTA (a quantized model's convs after its first pooling; see 'tessera inspect MODEL --target vta')` })
  const unknown = o.tasks.filter((id) => !all.some((t) => t.task.id === id))
  if (unknown.length) return yield* new UsageError({ flag: "--task", reason: `no task ${unknown.join(", ")} in this model (its tasks: ${all.map((t) => t.task.id).join(", ")})` })
  const tasks = o.tasks.length ? all.filter((t) => o.tasks.includes(t.task.id)) : all
  const knobsOf = new Map(all.map((t) => [t.task.workload, t.task.knobs] as const))
  const log = withoutRecordsOutside(yield* readLog(o.log), "vta", (workload, config) => {
    const knobs = knobsOf.get(workload)
    return knobs ? fitsKnobs(knobs, config) : undefined
  })
  for (const w of logWarnings(log)) yield* Console.error(`tessera tune: ${o.log}: ${w}`)
  yield* Console.error(
    `tessera tune: ${tasks.length} tasks (${tasks.reduce((n, t) => n + t.layers.length, 0)} conv layers offloaded) from ${o.model}; vta, the simulator's cycles at ${d.config.clockMhz} MHz; ${o.tuner}, ${o.trials} trials each; log ${o.log}${log.records.length ? ` (${log.records.length} records already)` : ""}`,
  )
  const rows: { t: VtaTuneTask; result: VtaTuneResult; resumed: number; defaultCycles?: number }[] = []
  const roof = 2 * d.batch * d.blockIn * d.blockOut
  for (const [k, t] of tasks.entries()) {
    const { task } = t
    const done: VtaMeasured[] = log.records
      .filter((r) => r.target === "vta" && r.workload === task.workload && isTrial(r))
      .map((r) => {
        const cycles = cyclesOf(d, r)
        return cycles !== undefined ? { config: r.config, cycles } : { config: r.config, error: r.error ?? "failed" }
      })
    const measure = memoMeasure((c) => measureVtaConv2d(d, VTA_CYCLE_MODEL, task.layer, c))
    const defaultCycles = Math.min(...t.defaults.map((c) => measure(c).cycles ?? Infinity))
    const tuner = yield* vtaTuner(o.tuner, d, t, o.seed)
    const total = Math.min(o.trials, spaceSize(task.knobs))
    const bar = o.progress
      ? new cliProgress.SingleBar(
          {
            stream: process.stderr,
            format: `[${k + 1}/${tasks.length}] ${task.label.padEnd(34)} {bar} {value}/{total} trials | best {best} cycles | {duration_formatted} elapsed | ETA {eta_formatted}`,
            hideCursor: false,
            clearOnComplete: false,
            etaBuffer: 4 * o.batch,
          },
          cliProgress.Presets.shades_classic,
        )
      : undefined
    bar?.start(total, Math.min(done.length, total), { best: "-" })
    const result = yield* stopAsFailure(
      tuneVtaConv2d(task, tuner, measure, {
        trials: o.trials,
        batch: o.batch,
        done,
        first: t.defaults,
        ...(o.earlyStopping !== undefined ? { earlyStopping: o.earlyStopping } : {}),
        check: () => checkInterrupt(o.interrupt, () => `task ${task.id} (${task.label}), between two trials`),
        onBatch: (measured, r) =>
          Effect.gen(function* () {
            const now = new Date().toISOString()
            yield* appendRecords(o.log, measured.map((m) => recordOf(d, task, m, tuner.name, now)))
            bar?.update(Math.min(r.trials, total), { best: r.best ? String(r.best.cycles) : "-" })
          }),
      }),
    )
    bar?.stop()
    const best = result.best?.cycles
    if (!o.progress)
      yield* Console.error(
        `tessera tune: [${k + 1}/${tasks.length}] ${task.id} ${task.label} (${t.layers.length} layer${t.layers.length > 1 ? "s" : ""}): ${result.trials} trials, best ${best ?? "-"} cycles${best !== undefined ? ` (${pct((2 * task.macs) / best / roof)} utilization)` : ""}, default ${Number.isFinite(defaultCycles) ? defaultCycles : "-"} cycles`,
      )
    rows.push({ t, result, resumed: done.length, ...(Number.isFinite(defaultCycles) ? { defaultCycles } : {}) })
  }
  return vtaTuneTable(rows, d)
})
