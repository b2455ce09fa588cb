// `tessera tune MODEL.onnx --target js|c|vta --log LOG [--threads N]` (vta: vta-tune.ts): compiles the model as compile
// and bench do for that target (same vector lanes and cores, so the records' workload keys are the
// ones they look up), extracts its tuning tasks, tunes each (records appended and fsynced as they
// come, so a killed tuner resumes from its log), draws a progress bar per task on stderr and
// prints a final table on stdout. On c, candidates are built in a temporary folder of this run.
// `tessera tune --report LOG --out curves.svg`: best-so-far GFLOP/s against trials, per task and
// tuner, as an SVG.
import type { Config } from "../lowering/templates/template.js"
import type { Graph } from "../ast/graph/graph.js"
import type { Program } from "../lowering/program.js"
import { Console, Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import cliProgress from "cli-progress"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { cMeasureFlags, defaultCBuildConfig } from "../device/c/build.js"
import { cacheSweepBytes } from "../device/host.js"
import { readModel, writeFileAtomic, FileAccessError } from "../device/files.js"
import { appendRecords, logWarnings, readLog } from "./tuning-log.js"
import { lockFile } from "../device/file-lock.js"
import { compileGraph } from "../pipeline.js"
import { makeXGBoostModel } from "../search/cost-model.js"
import { lowerRecent, tasksOfProgram, type TaskRunner } from "../search/extract.js"
import { featuresOf } from "../search/features.js"
import { curvesOfLog, renderCurvesSvg } from "../search/plot.js"
import { isTrial, withoutRecordsOutside, type TuningRecord } from "../search/records.js"
import { configKey, fitsKnobs, spaceSize } from "../search/task.js"
import { budgetReserveMs, confirmationMs, trialCostLog } from "./tune-budget.js"
import { gaTuner, gridTuner, randomTuner, xgbTuner, type Tuner } from "../search/tuners.js"
import { transferRows, type TransferRows } from "../search/transfer.js"
import { confirmMeasurerOptions, confirmRepeats, DEFAULT_CONFIRM, measurerFor, tuneSession, type Measure, type TaskSession, type TuneResult } from "../search/tune.js"
import type { CandidateSpent } from "../device/measure.js"
import { evoTuner } from "../search/evolutionary.js"
import { scheduleTasks } from "../search/task-scheduler.js"
import { withAttrs, type Target, type TargetKind } from "../ast/target.js"
import { BACKENDS, C_BUILD_FLAGS, TUNABLE_KINDS } from "../backend/index.js"
import { NoGpuError } from "../device/errors.js"
import { UsageError } from "./errors.js"
import { commandInterrupt } from "./supervise.js"
import { checkInterrupt, InterruptedError, type Interrupt } from "../ast/graph/errors.js"
import { withPassConfig } from "../rewrite/index.js"
import * as tty from "node:tty"
import { TargetUnavailableError, targetMissing, targetSettings } from "./targets.js"
import { tuneVtaCommand } from "./vta-tune.js"
import { NETWORK_CHECK_KINDS, NETWORK_CHECK_RUNS, networkCheck } from "./network-check.js"

export { TUNERS, type TunerName, type TuneCommandOptions } from "./tune-options.js"
import { TUNERS, type TunerName, type TuneCommandOptions } from "./tune-options.js"

/** Batches of lowered functions a task keeps (lowerRecent): a round's candidates, lowered for their build, then featurized when the tuner learns them. */
const LOWERED_KEPT = 2

/** c: candidates per gcc run (gcc's own start is ~0.1 s; a big unrolled candidate takes seconds). */
const DEFAULT_CHUNK = 4

/** Targets the tuner can measure on (those whose backend has a measurer). */
export const TUNE_TARGETS = TUNABLE_KINDS


/** A fresh tuner of that kind for a task (xgb with its own XGBoost model, started from `transfer`'s rows). */
export const makeTuner = Effect.fn("cli.makeTuner")(function* (name: TunerName, r: TaskRunner, seed: number, transfer?: TransferRows, seeds: readonly Config[] = []) {
  switch (name) {
    case "random":
      return randomTuner(r.task, seed) as Tuner
    case "grid":
      return gridTuner(r.task)
    case "ga":
      return gaTuner(r.task, seed)
    case "xgb": {
      const model = yield* makeXGBoostModel()
      return xgbTuner(r.task, { seed, model, features: (c) => featuresOf(r.lowerConfig(c), r.task.knobs, c), ...(transfer && transfer.xs.length ? { transfer } : {}) })
    }
    case "evo": {
      const model = yield* makeXGBoostModel()
      return evoTuner(r.task, { seed, model, seeds, features: (c) => featuresOf(r.lowerConfig(c), r.task.knobs, c), ...(transfer && transfer.xs.length ? { transfer } : {}) })
    }
  }
})

/** A record-write failure or a stop request inside the tuning loop, carried out of it as a defect and back. */
const rethrowWrite = <A, E, R>(eff: Effect.Effect<A, E, R>): Effect.Effect<A, E | FileAccessError | InterruptedError, R> =>
  Effect.catchDefect(eff, (d) => (d instanceof FileAccessError || d instanceof InterruptedError ? Effect.fail(d) : Effect.die(d)))

/** The stop flag read every 50 ms, forever: a stop request is an InterruptedError defect. */
const watchStop = (interrupt: Interrupt): Effect.Effect<never> =>
  Effect.forever(Effect.andThen(Effect.sync(() => checkInterrupt(interrupt, () => "the measuring of a batch of trials")), Effect.sleep("50 millis")))

/**
 * `measure` that first checks the stop flag and then races the batch against it: a stop request
 * ends the loop before the next batch or, mid-batch, interrupts the measurement (its compiler's
 * process group killed, its worker ended; the cuda measurer between two candidates) — as a defect
 * `rethrowWrite` turns back. A measurement that held the thread until its batch ended (nvcc run by
 * spawnSync) let tune --target cuda outlive its SIGTERM.
 */
const stoppable = <M extends (candidates: never) => Effect.Effect<unknown, unknown>>(interrupt: Interrupt | undefined, measure: M): M =>
  (interrupt
    ? (candidates: never) =>
        Effect.flatMap(Effect.sync(() => checkInterrupt(interrupt, () => "the start of a batch of trials")), () => Effect.raceFirst(measure(candidates), watchStop(interrupt)))
    : measure) as M

const fmt = (x: number, digits = 3) => (Number.isFinite(x) ? x.toFixed(digits) : "-")

/** The final table: one row per task. */
export const tuneTable = (rows: readonly { readonly runner: TaskRunner; readonly result: TuneResult; readonly resumed: number }[]): string => {
  // a confirmed task shows its confirmation's winner (the record compile --tuned applies) and how
  // much faster than the default it measured there
  const header = ["task", "workload", "space", "trials", "resumed", "errors", "best ms", "best GFLOP/s", "vs default"]
  const body = rows.map(({ runner, result, resumed }) => {
    const best = result.confirmed ?? result.best
    const speedup = result.confirmed?.defaultCost !== undefined ? `${fmt(result.confirmed.defaultCost / result.confirmed.cost, 2)}x` : "-"
    return [
      runner.task.id,
      runner.task.label,
      String(spaceSize(runner.task.knobs)),
      String(result.trials),
      String(resumed),
      String(result.errors),
      best ? fmt(best.cost * 1e3) : "-",
      best ? fmt(runner.task.flops / best.cost / 1e9) : "-",
      speedup,
    ]
  })
  const widths = header.map((h, k) => Math.max(h.length, ...body.map((r) => r[k].length)))
  const line = (cells: readonly string[]) => cells.map((c, k) => (k >= 2 ? c.padStart(widths[k]) : c.padEnd(widths[k]))).join("  ")
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...body.map(line)].join("\n")
}

/** Upper bounds of the numeric flags: past them a value is a typo, not a plan (a usage error). */
const FLAG_MAX = { repeats: 1000, minRepeatMs: 60_000, timeoutMs: 86_400_000, batch: 4096, threads: 1024 } as const

export const tuneCommand = Effect.fn("cli.tune")(function* (o: TuneCommandOptions) {
  // VTA: the simulator's cycles as the measure, its convs' schedules as the tasks (vta-tune.ts)
  if (o.target === "vta") return yield* tuneVtaCommand(o)
  if (!(TUNE_TARGETS as readonly string[]).includes(o.target))
    return yield* new UsageError({ flag: "--target", reason: `cannot tune for target '${o.target}' yet (tunable: ${[...TUNE_TARGETS, "vta"].join(", ")})` })
  const kind = o.target as TargetKind
  if (o.trials < 1) return yield* new UsageError({ flag: "--trials", reason: `must be at least 1, got ${o.trials}` })
  if (o.batch < 1) return yield* new UsageError({ flag: "--batch", reason: `must be at least 1, got ${o.batch}` })
  if (o.chunk !== undefined && o.chunk < 1) return yield* new UsageError({ flag: "--chunk", reason: `must be at least 1, got ${o.chunk}` })
  if (o.buildJobs !== undefined && o.buildJobs < 1) return yield* new UsageError({ flag: "--build-jobs", reason: `must be at least 1, got ${o.buildJobs}` })
  if (!Number.isInteger(o.threads) || o.threads < 1) return yield* new UsageError({ flag: "--threads", reason: `${o.threads} is not a thread count (1 or more)` })
  if (!BACKENDS[kind].parallel && o.threads !== 1) return yield* new UsageError({ flag: "--threads", reason: `the ${kind} target runs on one thread (use --target c for more)` })
  if (o.confirm !== undefined && (!Number.isInteger(o.confirm) || o.confirm < 0)) return yield* new UsageError({ flag: "--confirm", reason: `must be 0 or more, got ${o.confirm}` })
  if (o.earlyStopping !== undefined && o.earlyStopping < 1) return yield* new UsageError({ flag: "--early-stopping", reason: `must be at least 1, got ${o.earlyStopping}` })
  const m = o.measure
  if (!Number.isInteger(m.repeats) || m.repeats < 1 || m.repeats > FLAG_MAX.repeats) return yield* new UsageError({ flag: "--repeats", reason: `must be a whole number from 1 to ${FLAG_MAX.repeats}, got ${m.repeats}` })
  if (!Number.isFinite(m.minRepeatMs) || m.minRepeatMs < 0 || m.minRepeatMs > FLAG_MAX.minRepeatMs)
    return yield* new UsageError({ flag: "--min-repeat-ms", reason: `must be from 0 to ${FLAG_MAX.minRepeatMs} ms, got ${m.minRepeatMs}` })
  if (!Number.isFinite(m.timeoutMs) || m.timeoutMs < 1 || m.timeoutMs > FLAG_MAX.timeoutMs)
    return yield* new UsageError({ flag: "--timeout-ms", reason: `must be from 1 to ${FLAG_MAX.timeoutMs} ms (a limit every trial would run past is no limit), got ${m.timeoutMs}` })
  if (o.timeBudget !== undefined && !(Number.isFinite(o.timeBudget) && o.timeBudget > 0)) return yield* new UsageError({ flag: "--time-budget", reason: `must be a positive duration, got ${o.timeBudget} s` })
  if (o.batch > FLAG_MAX.batch) return yield* new UsageError({ flag: "--batch", reason: `must be at most ${FLAG_MAX.batch}, got ${o.batch}` })
  if (o.threads > FLAG_MAX.threads) return yield* new UsageError({ flag: "--threads", reason: `must be at most ${FLAG_MAX.threads}, got ${o.threads}` })
  if (o.vectorLanes !== undefined && !(Number.isInteger(o.vectorLanes) && o.vectorLanes >= 0 && (o.vectorLanes & (o.vectorLanes - 1)) === 0))
    return yield* new UsageError({ flag: "--vector-lanes", reason: `${o.vectorLanes} is not 0 or a power of two` })
  const missing = targetMissing(kind)
  if (missing) return yield* new TargetUnavailableError({ target: kind, reason: missing })
  // (cuda: its candidates run on a GPU; without one every trial would fail the same way)
  const noDevice = kind === "cuda" ? BACKENDS.cuda.compileOnly?.() : undefined
  if (noDevice) return yield* new NoGpuError({ reason: noDevice })
  // one tuner per log: a second one refuses (FileLockedError) before it compiles anything
  return yield* Effect.acquireUseRelease(
    lockFile(o.log),
    (lock) =>
      Effect.gen(function* () {
        if (lock.broke) yield* Console.error(`tessera tune: ${o.log}: removed a stale lock of ${lock.broke}`)
        return yield* tuneLocked(o, kind)
      }),
    (lock) => Effect.sync(lock.release),
  )
})

/** `tuneCommand` once the flags are checked and the log is ours. */
const tuneLocked = Effect.fn("cli.tuneLocked")(function* (o: TuneCommandOptions, kind: TargetKind) {
  const graph = yield* readModel(o.model)
  const settings = targetSettings(kind, o.threads)
  const target: Target = o.vectorLanes !== undefined && settings.target.kind !== "cuda" ? withAttrs(settings.target, { vectorLanes: o.vectorLanes }) : settings.target
  const program = yield* compileGraph(graph, target).pipe(withPassConfig(o.interrupt ? { interrupt: o.interrupt } : {}))
  const all = tasksOfProgram(program, target, o.interrupt)
  const unknown = o.tasks.filter((id) => !all.some((r) => r.task.id === id))
  if (unknown.length) return yield* new UsageError({ flag: "--task", reason: `no task ${unknown.join(", ")} in this model (its tasks: ${all.map((r) => r.task.id).join(", ")})` })
  const runners = o.tasks.length ? all.filter((r) => o.tasks.includes(r.task.id)) : all
  // a record of this model's tasks outside its task's knob space is skipped like a corrupt line:
  // it never reaches a tuner (which would lower it) or the confirmation
  const knobsOf = new Map(all.map((r) => [r.task.workload, r.task.knobs] as const))
  const log = withoutRecordsOutside(yield* readLog(o.log), kind, (workload, config) => {
    const knobs = knobsOf.get(workload)
    return knobs ? fitsKnobs(knobs, config) : undefined
  })
  for (const w of logWarnings(log)) yield* Console.error(`tessera tune: ${o.log}: ${w}`)
  yield* Console.error(
    `tessera tune: ${runners.length} tasks from ${o.model}; ${kind}, ${o.threads} thread${o.threads > 1 ? "s" : ""}; ${o.tuner}, ${o.trials} trials each; log ${o.log}${log.records.length ? ` (${log.records.length} records already)` : ""}`,
  )
  // candidates are built (c: libraries) in a folder of this run's own, deleted when it ends (a
  // killed run's folder is deleted by the next run)
  return yield* Effect.acquireUseRelease(
    Effect.try({
      try: () => {
        removeDeadRunsFolders()
        return fs.mkdtempSync(path.join(os.tmpdir(), `${BUILD_PREFIX}${process.pid}-`))
      },
      catch: (e) => new FileAccessError({ path: os.tmpdir(), operation: "write", reason: e instanceof Error ? e.message : String(e) }),
    }),
    (buildDir) =>
      Effect.gen(function* () {
        const rows = yield* tuneRunners(o, target, runners, log.records, buildDir)
        if (o.networkCheck !== false && NETWORK_CHECK_KINDS.has(target.kind)) yield* checkInNetwork(o, graph, target, program, runners)
        return tuneTable(rows)
      }),
    (buildDir) => Effect.sync(() => fs.rmSync(buildDir, { recursive: true, force: true })),
  )
})

/**
 * The log's records confirmed in the network (network-check.ts): a confirmation round per tuned
 * workload appended, and a line per workload on stderr.
 */
const checkInNetwork = Effect.fn("cli.checkInNetwork")(function* (o: TuneCommandOptions, graph: Graph, target: Target, untuned: Program, runners: readonly TaskRunner[]) {
  if (o.interrupt) checkInterrupt(o.interrupt, () => "before the network check")
  const t0 = Date.now()
  const log = yield* readLog(o.log)
  // (a stop request is seen between the compile's passes, before each run, and while the libraries build)
  const checking = networkCheck(graph, target, untuned, runners, log.records, { threads: o.threads, seed: o.seed, now: () => new Date().toISOString(), ...(o.interrupt ? { interrupt: o.interrupt } : {}) }).pipe(
    withPassConfig(o.interrupt ? { interrupt: o.interrupt } : {}),
  )
  const check = yield* rethrowWrite(o.interrupt ? Effect.raceFirst(checking, watchStop(o.interrupt)) : checking)
  if (check.records.length) yield* appendRecords(o.log, check.records)
  const reverted = check.rows.filter((r) => r.tuned > r.default)
  yield* Console.error(
    `tessera tune: network check (${((Date.now() - t0) / 1000).toFixed(1)} s, ${NETWORK_CHECK_RUNS} runs each in turns): ${check.rows.length} tuned workloads timed inside the model; ${reverted.length} slower there than the default, which compile now applies instead`,
  )
  for (const r of check.rows)
    yield* Console.error(`  ${r.task} ${r.label}: ${fmt(r.tuned * 1000)} ms tuned, ${fmt(r.default * 1000)} ms default in the network${r.tuned > r.default ? " → default" : ""}`)
})

/** Build folders are `tessera-tune-PID-XXXXXX` under the OS temp folder. */
const BUILD_PREFIX = "tessera-tune-"

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as { code?: string }).code === "EPERM" // someone else's process
  }
}

/** Deletes the build folders of tune runs that were killed (their process is gone). */
const removeDeadRunsFolders = (): void => {
  for (const name of fs.readdirSync(os.tmpdir())) {
    const m = new RegExp(`^${BUILD_PREFIX}(\\d+)-[A-Za-z0-9]{6}$`).exec(name)
    if (!m || alive(Number(m[1]))) continue
    try {
      fs.rmSync(path.join(os.tmpdir(), name), { recursive: true, force: true })
    } catch {
      // not ours to delete (another user's), or gone already: left as it is
    }
  }
}

const tuneRunners = Effect.fn("cli.tuneRunners")(function* (
  o: TuneCommandOptions,
  /** What the program was compiled for: the templates' defaults are measured first, on its device. */
  compiledFor: Target,
  runners: readonly TaskRunner[],
  logged: readonly TuningRecord[],
  buildDir: string,
) {
  const kind = compiledFor.kind
  const rows: { runner: TaskRunner; result: TuneResult; resumed: number }[] = []
  // every record so far (the log's and this run's): xgb's model starts from the other tasks' ones
  const records: TuningRecord[] = [...logged]
  const featureCache = new Map<string, readonly number[]>()
  const start = Date.now()
  // per task: what its trials' lowering and measuring took (the budget's reserve for its
  // confirmation, and the rounds' lines), and what its confirmation took
  const costLogs = new Map<number, ReturnType<typeof trialCostLog>>()
  const confirmMs = new Map<number, number>()
  const sessionOf = (runner0: TaskRunner, k: number, onProgress?: (trials: number, best: number) => void) =>
    Effect.gen(function* () {
      const { task } = runner0
      // (the ScheduleTarget compileGraph sized its defaults from: runner.target, scheduleTargetOf)
      const defaults = task.template.defaults(task.knobs, runner0.target)
      const confirms = o.confirm ?? DEFAULT_CONFIRM
      const costs = trialCostLog(configKey(defaults), confirms)
      costLogs.set(k, costs)
      // one lowering per config for the tuner's features and the session's build (lowerRecent),
      // each timed: a confirmation's share of the budget is estimated from them
      const timedLower = (config: Config) => {
        const t0 = performance.now()
        try {
          return runner0.lowerConfig(config)
        } finally {
          costs.lowered(performance.now() - t0)
        }
      }
      const runner: TaskRunner = { ...runner0, lowerConfig: lowerRecent(timedLower, LOWERED_KEPT * Math.max(o.batch, 8)) }
      // (with its confirmation rounds, which are not trials)
      const done: TuningRecord[] = logged.filter((r) => r.workload === task.workload && r.target === kind)
      const transfer = o.tuner === "xgb" || o.tuner === "evo" ? transferRows(runner, runners, records, kind, featureCache) : undefined
      const tuner = yield* makeTuner(o.tuner, runner, o.seed, transfer, [defaults])
      const measuring = {
        measure: o.measure,
        threads: o.threads,
        chunk: o.chunk ?? DEFAULT_CHUNK,
        buildJobs: o.buildJobs ?? Math.max(1, os.availableParallelism() - o.threads),
        // (the c library's flags: a candidate timed as the network runs it)
        build: { ...defaultCBuildConfig(cMeasureFlags(C_BUILD_FLAGS)), cacheDir: buildDir },
        // the measuring threads take every core: gcc waits until a batch is measured
        overlap: o.threads < os.availableParallelism(),
      }
      // each trial call timed, with what the device says each candidate's build and runs took
      let spent = new Map<number, CandidateSpent>()
      const trialMeasure = stoppable(o.interrupt, measurerFor(compiledFor, runner, { ...measuring, spent: (j, ms) => void spent.set(j, ms) })!)
      const measure: Measure = (candidates) =>
        Effect.suspend(() => {
          const t0 = performance.now()
          spent = new Map()
          return Effect.tap(trialMeasure(candidates), (results) => Effect.sync(() => costs.measured(performance.now() - t0, results, spent)))
        })
      const confirm =
        confirms > 0
          ? { top: confirms, measure: stoppable(o.interrupt, measurerFor(compiledFor, runner, confirmMeasurerOptions(measuring, confirms))!) }
          : undefined
      const session = yield* tuneSession(task, tuner, runner.lowerConfig, measure, {
        trials: o.trials,
        batch: o.batch,
        ...(o.earlyStopping !== undefined ? { earlyStopping: o.earlyStopping } : {}),
        target: kind,
        now: () => new Date().toISOString(),
        done,
        first: [defaults],
        ...(confirm ? { confirm } : {}),
        onProgress: (p) => onProgress?.(p.trials, p.bestGflops),
        onRecords: (rs) =>
          Effect.orDie(appendRecords(o.log, rs)).pipe(
            Effect.tap(() => Effect.sync(() => records.push(...rs))),
          ),
      })
      return { session, resumed: done.filter(isTrial).length }
    })
  const line = (k: number, runner: TaskRunner, result: TuneResult) =>
    `tessera tune: [${k + 1}/${runners.length}] ${runner.task.id} ${runner.task.label}: ${result.trials} trials, best ${result.best ? fmt(runner.task.flops / result.best.cost / 1e9) : "-"} GFLOP/s${result.confirmed ? `, confirmed ${fmt(runner.task.flops / result.confirmed.cost / 1e9)}${result.confirmed.defaultCost !== undefined ? ` (default ${fmt(runner.task.flops / result.confirmed.defaultCost / 1e9)})` : ""}` : ""}`
  if (o.timeBudget !== undefined) {
    // whole-model tuning: the scheduler gives rounds of trials where the model gains most
    const budgetMs = o.timeBudget * 1000
    const sessions: { session: TaskSession<unknown>; weight: number; resumed: number }[] = []
    for (const [k, runner] of runners.entries()) {
      const s = yield* sessionOf(runner, k)
      const session = s.session as TaskSession<unknown>
      // (its confirmation timed: stderr's last lines set it beside what the budget kept for it)
      const finish = (confirm?: boolean) =>
        Effect.suspend(() => {
          const t0 = performance.now()
          return Effect.tap(session.finish(confirm), (r) => Effect.sync(() => r.confirmed && confirmMs.set(k, performance.now() - t0)))
        })
      sessions.push({ session: { ...session, finish }, weight: runner.task.groups.length || 1, resumed: s.resumed })
    }
    // the budget holds the confirmations too: a round starts only while it and the tried tasks'
    // confirmations (each bounded by `confirmationMs` from its trials' measured lowering and
    // measuring) still fit; past the budget the confirmations not yet run are skipped (the task's
    // best trial stands, unconfirmed) — on an H100, where a round is nvcc building 8 candidates
    // (~18 s), a 120 s budget ran 60 s over
    const round = Math.max(o.batch, 8)
    const roundMs = new Map<number, number[]>()
    let lastRoundEnd = Date.now()
    const trialCosts = () => new Map([...costLogs].map(([k, log]) => [k, log.costs()] as const))
    // lowering and measuring ms of every task so far, at the last round's end
    const spent = () => [...trialCosts().values()].reduce((a, c) => ({ lowerMs: a.lowerMs + c.lowerMs, measureMs: a.measureMs + c.measureMs }), { lowerMs: 0, measureMs: 0 })
    let spentBefore = spent()
    const confirms = o.confirm ?? DEFAULT_CONFIRM
    const confirmOpts = { top: confirms, repeatsRatio: confirmRepeats(o.measure.repeats) / o.measure.repeats }
    // each tried task's confirmation as reserved after its last round, against what it took (stderr)
    const reserved = new Map<number, number>()
    const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`
    const results = yield* rethrowWrite(
      scheduleTasks(sessions, {
        round,
        maxTrials: o.trials,
        stop: () => Date.now() - start + budgetReserveMs(roundMs, new Map([...trialCosts()].filter(([k]) => roundMs.has(k))), confirmOpts) >= budgetMs,
        confirmWhile: () => Date.now() - start < budgetMs,
        onSkipped: (tasks) =>
          process.stderr.write(`tessera tune: the time budget is spent: ${tasks.length} task${tasks.length > 1 ? "s" : ""} left unconfirmed (${tasks.map((k) => runners[k].task.id).join(", ")}: their best trial stands)\n`),
        onRound: (r) => {
          const now = Date.now()
          const took = now - lastRoundEnd
          roundMs.set(r.task, [...(roundMs.get(r.task) ?? []), took])
          lastRoundEnd = now
          // the round's time: lowering configs (the tuner's, for their features, and the
          // candidates'), measuring candidates (render, build, check, time), and the rest of the
          // search (features, the model's fits and predictions, the annealing, the records)
          const total = spent()
          const lowerMs = total.lowerMs - spentBefore.lowerMs
          const measureMs = total.measureMs - spentBefore.measureMs
          spentBefore = total
          reserved.set(r.task, confirmationMs(costLogs.get(r.task)!.costs(), confirmOpts.top, confirmOpts.repeatsRatio))
          const runner = runners[r.task]
          const best = sessions[r.task].session.costs().at(-1) ?? Infinity
          process.stderr.write(
            `tessera tune: ${((Date.now() - start) / 1000).toFixed(0)}s/${o.timeBudget}s ${runner.task.id} ${runner.task.label} (weight ${sessions[r.task].weight}): ${r.trials} trials, best ${Number.isFinite(best) ? fmt(runner.task.flops / best / 1e9) : "-"} GFLOP/s; round ${s(took)}: lowering ${s(lowerMs)}, build and measure ${s(measureMs)}, the rest of the search ${s(took - lowerMs - measureMs)}\n`,
          )
        },
      }),
    )
    for (const [k, runner] of runners.entries()) {
      const took = confirmMs.get(k)
      if (!o.progress) yield* Console.error(`${line(k, runner, results[k])}${took !== undefined ? `; confirmation ${s(took)} (${s(reserved.get(k) ?? 0)} kept for it)` : ""}`)
      rows.push({ runner, result: results[k], resumed: sessions[k].resumed })
    }
    return rows
  }
  for (const [k, runner] of runners.entries()) {
    const { task } = runner
    const total = Math.min(o.trials, spaceSize(task.knobs))
    const bar = o.progress
      ? new cliProgress.SingleBar(
          {
            stream: process.stderr,
            format: `[${k + 1}/${runners.length}] ${task.label.padEnd(34)} {bar} {value}/{total} trials | best {best} GFLOP/s | {duration_formatted} elapsed | ETA {eta_formatted}`,
            hideCursor: false,
            clearOnComplete: false,
            etaBuffer: 4 * o.batch,
          },
          cliProgress.Presets.shades_classic,
        )
      : undefined
    const { session, resumed } = yield* sessionOf(runner, k, (trials, best) => bar?.update(Math.min(trials, total), { best: best.toFixed(3) }))
    bar?.start(total, Math.min(resumed, total), { best: "-" })
    yield* rethrowWrite(session.run(o.trials))
    const result = yield* rethrowWrite(session.finish())
    bar?.stop()
    if (!o.progress) yield* Console.error(line(k, runner, result))
    rows.push({ runner, result, resumed })
  }
  return rows
})

export interface TuneReportOptions {
  readonly log: string
  readonly out: string
}

export const tuneReportCommand = Effect.fn("cli.tuneReport")(function* (o: TuneReportOptions) {
  const log = yield* readLog(o.log)
  for (const w of logWarnings(log)) yield* Console.error(`tessera tune: ${o.log}: ${w}`)
  if (log.records.length === 0) return yield* new UsageError({ flag: "--report", reason: `'${o.log}' holds no tuning records` })
  const curves = curvesOfLog(log.records)
  const svg = yield* Effect.promise(() => renderCurvesSvg(curves))
  yield* writeFileAtomic(o.out, new TextEncoder().encode(svg))
  return JSON.stringify({ log: o.log, out: o.out, records: log.records.length, curves: curves.map((c) => ({ task: c.task, tuner: c.tuner, trials: c.best.length, best: c.best.at(-1) ?? 0 })) })
})

/** "90s", "10m", "1.5h" or plain seconds, in seconds; NaN when it is none of those or not positive. */
export const parseDuration = (text: string): number => {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$/.exec(text)
  if (!m) return NaN
  const x = Number(m[1]) * (m[2] === "h" ? 3600 : m[2] === "m" ? 60 : 1)
  return x > 0 && Number.isFinite(x) ? x : NaN
}

/** Renders a command's typed failures as its one stderr line (main.ts's). */
export type Reporter = (command: string, model?: string) => <A, E>(eff: Effect.Effect<A, E>) => Effect.Effect<A, unknown>

/** The `tune` subcommand, its failures rendered by main's reporter; `--deadline` as run's and compile's. */
export const tuneCommandLine = (
  reported: Reporter,
  stop: { readonly deadline: Flag.Flag<Option.Option<string>>; readonly checkDeadline: (d: Option.Option<string>) => Effect.Effect<void, UsageError> },
) =>
  Command.make(
    "tune",
    {
      model: Argument.String("model").pipe(Argument.optional, Argument.withDescription("an ONNX model file (.onnx); not with --report")),
      target: Flag.String("target").pipe(Flag.withDefault("js"), Flag.withDescription(`where candidates run: ${TUNE_TARGETS.join(", ")}, or vta (a quantized model's offloaded convs, the simulator's cycles as the measure)`)),
      trials: Flag.Int("trials").pipe(Flag.withDefault(200), Flag.withDescription("trials per task (records already in the log count)")),
      log: Flag.String("log").pipe(Flag.optional, Flag.withDescription("the JSON-lines tuning log to append to (and resume from)")),
      tuner: Flag.Literals("tuner", TUNERS).pipe(Flag.withDefault("xgb" as const), Flag.withDescription("search strategy: xgb, evo (evolutionary, cost-model guided, on the generated spaces), ga, random or grid")),
      earlyStopping: Flag.Int("early-stopping").pipe(Flag.optional, Flag.withDescription("stop a task after N trials without improvement")),
      batch: Flag.Int("batch").pipe(Flag.withDefault(8), Flag.withDescription("candidates built and measured per batch")),
      chunk: Flag.Int("chunk").pipe(Flag.optional, Flag.withDescription(`c: candidates per gcc run; chunks build ahead while earlier ones are measured (default ${DEFAULT_CHUNK})`)),
      buildJobs: Flag.Int("build-jobs").pipe(Flag.optional, Flag.withDescription("c: gcc runs at once (default: the cores --threads leaves, at least 1)")),
      vectorLanes: Flag.Int("vector-lanes").pipe(
        Flag.optional,
        Flag.withDescription("fp32 vector lanes (the NCHWc block; 0 keeps NCHW); default: what compile uses for the target (records are keyed by it)"),
      ),
      threads: Flag.Int("threads").pipe(Flag.withDefault(1), Flag.withDescription("c: threads the candidates run on and the schedules plan for (records are per thread count)")),
      task: Flag.String("task").pipe(Flag.atLeast(0), Flag.withDescription("tune only this task id (repeatable; ids are in the final table)")),
      repeats: Flag.Int("repeats").pipe(Flag.withDefault(3), Flag.withDescription("timed repeats per candidate (the median counts)")),
      minRepeatMs: Flag.Int("min-repeat-ms").pipe(Flag.withDefault(20), Flag.withDescription("each repeat runs the kernel for at least this long")),
      warmCache: Flag.Boolean("warm-cache").pipe(
        Flag.withDefault(false),
        Flag.withDescription("c: time a candidate's calls back to back on warm caches (default: sweep L1 and L2 before each call, as a layer of a network finds them)"),
      ),
      noNetworkCheck: Flag.Boolean("no-network-check").pipe(
        Flag.withDefault(false),
        Flag.withDescription("c, wasm, js: skip the end's network check (the model run with its records and without, in turns, each tuned kernel timed inside the run; a record slower there than the default is not applied)"),
      ),
      confirm: Flag.Int("confirm").pipe(
        Flag.withDefault(DEFAULT_CONFIRM),
        Flag.withDescription("after a task's trials, measure its N fastest configs and the default again side by side and apply the fastest of them (0: the fastest trial)"),
      ),
      timeoutMs: Flag.Int("timeout-ms").pipe(Flag.withDefault(60_000), Flag.withDescription("time limit per batch (js) or per candidate (c); what runs past it is recorded as errors")),
      seed: Flag.Int("seed").pipe(Flag.withDefault(1), Flag.withDescription("seed of the search")),
      timeBudget: Flag.String("time-budget").pipe(
        Flag.optional,
        Flag.withDescription("whole-model tuning for this long (90s, 10m, 1h), confirmations included: rounds of trials go to the task with the largest expected gain (--trials per task at most) while they and the confirmations still fit; a confirmation the budget has no room for is skipped (its best trial stands)"),
      ),
      report: Flag.String("report").pipe(Flag.optional, Flag.withDescription("LOG: draw its tuning curves instead of tuning")),
      out: Flag.String("out").pipe(Flag.optional, Flag.withDescription("with --report: the SVG file to write")),
      deadline: stop.deadline,
    },
    (c) =>
      Effect.gen(function* () {
        const report = Option.getOrUndefined(c.report)
        if (report !== undefined) {
          const out = Option.getOrUndefined(c.out)
          const line = yield* reported("tune")(
            out === undefined ? Effect.fail(new UsageError({ flag: "--out", reason: "say where to write the curves: --out curves.svg" })) : tuneReportCommand({ log: report, out }),
          )
          return yield* Console.log(line)
        }
        yield* reported("tune")(stop.checkDeadline(c.deadline))
        const interrupt = commandInterrupt()
        const model = Option.getOrUndefined(c.model)
        const log = Option.getOrUndefined(c.log)
        const budgetText = Option.getOrUndefined(c.timeBudget)
        const timeBudget = budgetText === undefined ? undefined : parseDuration(budgetText)
        const table = yield* reported("tune", model)(
          model === undefined
            ? Effect.fail(new UsageError({ flag: "MODEL", reason: "give the model to tune (or --report LOG --out FILE.svg)" }))
            : log === undefined
              ? Effect.fail(new UsageError({ flag: "--log", reason: "say where to write the records: --log tune.jsonl" }))
              : Number.isNaN(timeBudget)
                ? Effect.fail(new UsageError({ flag: "--time-budget", reason: `'${budgetText}' is not a duration (90s, 10m, 1h)` }))
              : tuneCommand({
                  ...(timeBudget !== undefined ? { timeBudget } : {}),
                  ...(interrupt ? { interrupt } : {}),
                  model,
                  target: c.target,
                  trials: c.trials,
                  log,
                  tuner: c.tuner,
                  earlyStopping: Option.getOrUndefined(c.earlyStopping),
                  batch: c.batch,
                  ...Option.match(c.chunk, { onNone: () => ({}), onSome: (chunk) => ({ chunk }) }),
                  ...Option.match(c.buildJobs, { onNone: () => ({}), onSome: (buildJobs) => ({ buildJobs }) }),
                  ...Option.match(c.vectorLanes, { onNone: () => ({}), onSome: (vectorLanes) => ({ vectorLanes }) }),
                  threads: c.threads,
                  seed: c.seed,
                  tasks: c.task,
                  confirm: c.confirm,
                  networkCheck: !c.noNetworkCheck,
                  // (passed as given: tuneCommand refuses what it cannot use, never clamps it)
                  measure: {
                    repeats: c.repeats,
                    minRepeatMs: c.minRepeatMs,
                    timeoutMs: c.timeoutMs,
                    rtol: 1e-3,
                    atol: 1e-4,
                    flushBytes: c.warmCache ? 0 : cacheSweepBytes(),
                  },
                  // (fd 2 itself: on the supervisor's worker thread process.stderr is no TTY stream)
                  progress: tty.isatty(2),
                }),
        )
        yield* Console.log(table)
      }),
  ).pipe(Command.withDescription("Tune a model's operator schedules, appending records to a log; or draw a log's tuning curves (--report)"))
