// The tuning loop: a tuner proposes batches, the device measures them, records are written as
// they come (so a killed tuner loses at most the batch in flight), the tuner learns, and the loop
// stops at the trial budget, when the space is exhausted, or after `earlyStopping` trials without
// improvement. `measurerFor` takes how candidates are measured on the tuning target from its
// backend record (js: worker threads; c: gcc and a child process).
import { Effect } from "effect"
import { InterruptedError } from "../ast/graph/errors.js"
import type { PrimFunc } from "../ast/tir/tir.js"
import type { Target, TargetKind } from "../ast/target.js"
import { BACKENDS, type Backend } from "../backend/index.js"
import { Device } from "../device/device.js"
import type { Measure, Measured, MeasurerOptions, ReferenceSource } from "../device/measure.js"
import { completeConfig, type Config } from "../lowering/templates/template.js"
import { canonicalConfig } from "../lowering/templates/sketch.js"
import type { CostModelError } from "./cost-model.js"
import { isTrial, RECORD_VERSION, type TuningRecord } from "./records.js"
import { configHash, type Task } from "./task.js"
import type { MeasureResult, Tuner } from "./tuners.js"

export type { Measure, Measured, MeasurerOptions }

/**
 * How a task's candidates are measured on a target: rendered by its backend, measured by its
 * Device (each checked against the task's reference first); undefined where the target is not
 * tunable.
 */
export const measurerFor = (target: Target, source: ReferenceSource, o: MeasurerOptions): Measure | undefined => {
  const codegen = (BACKENDS[target.kind] as Backend<TargetKind>).codegen
  const renderFor = codegen?.renderCandidates
  if (!codegen || !renderFor) return undefined
  const render = (funcs: Parameters<typeof renderFor>[0]): string => renderFor(funcs, target)
  const layer = codegen.device(target, { threads: o.threads })
  return (candidates) =>
    Effect.flatMap(Device, (device) =>
      device.measure ? device.measure({ candidates, source, render, options: o }) : Effect.die(new Error(`the ${target.kind} device has no measurer, though its backend renders candidates`)),
    ).pipe(Effect.provide(layer))
}

export interface TuneProgress {
  readonly task: Task
  readonly trials: number
  readonly total: number
  /** Best GFLOP/s so far (0 before any success). */
  readonly bestGflops: number
  readonly errors: number
}

export interface TuneOptions {
  readonly trials: number
  readonly batch: number
  readonly earlyStopping?: number
  readonly target: string
  /** Timestamps come from the caller (the CLI owns the clock). */
  readonly now: () => string
  readonly onProgress?: (p: TuneProgress) => void
  /** Called with each batch's records before the tuner learns from them. */
  readonly onRecords?: (records: readonly TuningRecord[]) => Effect.Effect<void>
  /** Configs already measured (a resumed log): skipped by the tuner, counted as trials. */
  readonly done?: readonly TuningRecord[]
  /**
   * Configs measured before the tuner's own, even when the log already holds `trials` records:
   * the template's default, so a task's best record is never one that measured slower than the
   * schedule it replaces (a few noisy trials of a large space otherwise can be).
   */
  readonly first?: readonly Config[]
  /**
   * After the trials, a confirmation: the `top` fastest configs measured (this run's and the log's)
   * and the configs of `first` and `with` (the default) measured again by `measure` (all in one
   * process, their repeats taken in turns), recorded with `confirm` set; `bestRecords` then
   * applies the fastest of the last round. The fastest of many trials is partly the luckiest; measured side by side with the
   * default, a config must beat it again. Skipped when nothing was measured since the last round
   * or there are fewer than two configs to compare.
   */
  readonly confirm?: Confirm
}

/** Configs a confirmation re-measures beside the default (`tessera tune --confirm`'s default). */
export const DEFAULT_CONFIRM = 3

/** Repeats per config in a confirmation, at the least (3 times the trials' repeats when more). */
const CONFIRM_REPEATS = 9

/** A confirmation's repeats per config, from the trials' repeats. */
export const confirmRepeats = (repeats: number): number => Math.max(CONFIRM_REPEATS, 3 * repeats)

/**
 * How a confirmation of `top` configs and the default is measured, from the trials' options: the
 * configs in one library, built before any is timed, their repeats in turns, CONFIRM_REPEATS each.
 */
export const confirmMeasurerOptions = (o: MeasurerOptions, top: number): MeasurerOptions => ({
  ...o,
  measure: { ...o.measure, repeats: confirmRepeats(o.measure.repeats), interleave: true },
  chunk: top + 1,
  buildJobs: 1,
  overlap: false,
})

export interface Confirm {
  readonly top: number
  readonly measure: Measure
  /** Configs measured in the confirmation beside the top ones (the first of them: the default). */
  readonly with?: readonly Config[]
}

export interface TuneResult {
  readonly task: Task
  readonly best?: { readonly config: Config; readonly cost: number }
  /** Best-so-far GFLOP/s after each trial. */
  readonly curve: readonly number[]
  readonly trials: number
  readonly errors: number
  /** The confirmation's winner, and the default's time in it (when the default was measured). */
  readonly confirmed?: { readonly config: Config; readonly cost: number; readonly defaultCost?: number }
}

/**
 * A task being tuned, a slice at a time: `run(trials)` measures until the task has that many
 * trials (or its space or patience runs out) and can be called again with more (the task
 * scheduler gives tasks their trials in rounds); `finish` runs the confirmation and the result.
 */
export interface TaskSession<E> {
  readonly task: Task
  readonly run: (trials: number) => Effect.Effect<void, E | CostModelError>
  /** Whether more trials can be measured (the space not exhausted, early stopping not hit). */
  readonly open: () => boolean
  /** Best-so-far seconds after each trial (Infinity before the first success). */
  readonly costs: () => readonly number[]
  /** The result, after the confirmation unless `confirm` is false (a spent time budget: the trials' best stands, unconfirmed). */
  readonly finish: (confirm?: boolean) => Effect.Effect<TuneResult>
}

/**
 * `tuner` with the configs its task's template refuses from the schedule alone drawn past, never
 * proposed (MetaSchedule's postprocessors: a rejected sample is redrawn). A refused config costs
 * no lowering, no build and no trial, so the trial budget goes to configs that can run; the inner
 * tuner has marked each one seen, so the space still runs out. Tasks whose template refuses
 * nothing get `tuner` itself (every CPU template: their seeded sequences are unchanged).
 */
export const skipRefused = (task: Pick<Task, "template" | "outputs" | "base">, tuner: Tuner): Tuner => {
  const refuse = task.template.refuse
  if (refuse === undefined) return tuner
  return {
    ...tuner,
    next: (n) =>
      Effect.gen(function* () {
        const out: Config[] = []
        while (out.length < n && tuner.hasNext()) {
          const drawn = yield* tuner.next(n - out.length)
          // (a tuner may answer nothing this round though its space is not spent: the loop above it asks again)
          if (drawn.length === 0) break
          for (const c of drawn) if (refuse(task.outputs, task.base, c) === undefined) out.push(c)
        }
        return out
      }),
  }
}

export const tuneSession = <E>(
  task: Task,
  tuner0: Tuner,
  lowerConfig: (config: Config) => PrimFunc,
  measure: (candidates: readonly { config: Config; func: PrimFunc }[]) => Effect.Effect<readonly Measured[], E>,
  options: TuneOptions,
): Effect.Effect<TaskSession<E>, CostModelError> =>
  Effect.gen(function* () {
    const tuner = skipRefused(task, tuner0)
    const curve: number[] = []
    const costs: number[] = []
    let best: { config: Config; cost: number } | undefined
    let errors = 0
    let sinceBest = 0
    let stopped = false
    const gflops = (cost: number) => task.flops / cost / 1e9
    const learn = (rs: readonly MeasureResult[]) => tuner.update(rs)
    const note = (cost: number | undefined, config: Config) => {
      if (cost === undefined) errors++
      if (cost !== undefined && (!best || cost < best.cost)) {
        best = { config, cost }
        sinceBest = 0
      } else sinceBest++
      curve.push(best ? gflops(best.cost) : 0)
      costs.push(best ? best.cost : Infinity)
    }
    // a resumed log: what was measured counts, and the tuner learns it
    const logged = (options.done ?? []).filter((r) => r.workload === task.workload)
    const resumed = logged.filter(isTrial)
    const trialRecords: TuningRecord[] = [...resumed]
    if (resumed.length) {
      for (const r of resumed) note(r.costs.length ? Math.min(...r.costs) : undefined, r.config)
      sinceBest = 0
      yield* learn(resumed.map((r) => ({ config: r.config, cost: r.costs.length ? Math.min(...r.costs) : undefined })))
    }
    const key = (c: Config) => scheduleKey(task, c)
    const doneKeys = new Set(resumed.map((r) => key(r.config)))
    let first = (options.first ?? []).filter((c, k, all) => !doneKeys.has(key(c)) && all.findIndex((d) => key(d) === key(c)) === k)
    const run = (trials: number) =>
      Effect.gen(function* () {
        while (!stopped && (first.length > 0 || (curve.length < trials && tuner.hasNext()))) {
          const want = Math.max(1, Math.min(options.batch, trials - curve.length))
          const configs = first.length > 0 ? first : (yield* tuner.next(want)).filter((c) => !doneKeys.has(key(c)))
          first = []
          for (const c of configs) doneKeys.add(key(c))
          if (configs.length === 0) {
            if (!tuner.hasNext()) break
            continue
          }
          const candidates: { config: Config; func: PrimFunc }[] = []
          const failed: Measured[] = []
          for (const config of configs) {
            // (a config the template refuses from its schedule alone — only a `first` one gets here,
            // the tuner's draws skip them: a trial with that error, never built)
            const refused = task.template.refuse?.(task.outputs, task.base, config)
            if (refused !== undefined) {
              failed.push({ config, cost: undefined, error: `rejected: ${refused}` })
              continue
            }
            try {
              candidates.push({ config, func: lowerConfig(config) })
            } catch (e) {
              // a stop request is no trial: it ends the run (the batch's configs unrecorded)
              if (e instanceof InterruptedError) throw e
              failed.push({ config, cost: undefined, error: `build failed: ${e instanceof Error ? e.message : String(e)}` })
            }
          }
          const measured = [...failed, ...(yield* measure(candidates))]
          const records = measured.map((m) => recordOf(task, options, m, { tuner: tuner.name }))
          if (options.onRecords) yield* options.onRecords(records)
          trialRecords.push(...records)
          for (const m of measured) note(m.cost, m.config)
          options.onProgress?.({ task, trials: curve.length, total: options.trials, bestGflops: best ? gflops(best.cost) : 0, errors })
          yield* learn(measured.map((m) => ({ config: m.config, cost: m.cost })))
          if (options.earlyStopping && sinceBest >= options.earlyStopping) stopped = true
        }
      })
    const finish = (confirm = true) =>
      Effect.gen(function* () {
        const confirmed = confirm && options.confirm ? yield* confirmTask(task, lowerConfig, options, options.confirm, logged, trialRecords) : undefined
        return { task, ...(best ? { best } : {}), curve, trials: curve.length, errors, ...(confirmed ? { confirmed } : {}) } satisfies TuneResult
      })
    return { task, run, open: () => !stopped && tuner.hasNext(), costs: () => costs, finish }
  })

export const tuneTask = <E>(
  task: Task,
  tuner: Tuner,
  lowerConfig: (config: Config) => PrimFunc,
  measure: (candidates: readonly { config: Config; func: PrimFunc }[]) => Effect.Effect<readonly Measured[], E>,
  options: TuneOptions,
): Effect.Effect<TuneResult, E | CostModelError> =>
  Effect.gen(function* () {
    const session = yield* tuneSession(task, tuner, lowerConfig, measure, options)
    yield* session.run(options.trials)
    return yield* session.finish()
  })

/**
 * A config's key as a schedule of `task`: the hash of the complete config (a record from before a
 * knob was added is the same schedule as the config with that knob's absent value).
 */
const scheduleKey = (task: Task, c: Config): string => configHash(canonicalConfig(task.knobs, completeConfig(task.knobs, c)))

/** A measurement's record (a trial's carries its tuner, a confirmation's its round). */
const recordOf = (task: Task, options: TuneOptions, m: Measured, extra: Pick<TuningRecord, "tuner" | "confirm">): TuningRecord => ({
  v: RECORD_VERSION,
  task: task.id,
  workload: task.workload,
  target: options.target,
  config: m.config,
  costs: m.cost === undefined ? [] : [m.cost],
  timestamp: options.now(),
  ...extra,
  ...(m.error ? { error: m.error } : {}),
  ...(m.cost ? { gflops: task.flops / m.cost / 1e9 } : {}),
})

/** The confirmation round of `tuneTask` (see `TuneOptions.confirm`). */
const confirmTask = (
  task: Task,
  lowerConfig: (config: Config) => PrimFunc,
  options: TuneOptions,
  confirm: Confirm,
  logged: readonly TuningRecord[],
  trials: readonly TuningRecord[],
): Effect.Effect<TuneResult["confirmed"]> =>
  Effect.gen(function* () {
    const rounds = logged.filter((r) => r.confirm !== undefined)
    const last = Math.max(0, ...rounds.map((r) => r.confirm!))
    // nothing measured since the last round: it stands
    if (last > 0 && trials.length === logged.filter(isTrial).length) return undefined
    const cost = (r: TuningRecord) => (r.error || r.costs.length === 0 ? Infinity : Math.min(...r.costs))
    const seen = new Set<string>()
    const picked: Config[] = []
    const add = (c: Config) => {
      const key = scheduleKey(task, c)
      if (seen.has(key)) return
      seen.add(key)
      picked.push(c)
    }
    for (const c of [...(options.first ?? []), ...(confirm.with ?? [])]) add(c)
    const defaults = picked.length
    for (const r of [...trials].filter((r) => cost(r) < Infinity).sort((a, b) => cost(a) - cost(b))) {
      if (picked.length >= defaults + confirm.top) break
      add(r.config)
    }
    if (picked.length < 2) return undefined
    const candidates: { config: Config; func: PrimFunc }[] = []
    for (const config of picked) {
      try {
        candidates.push({ config, func: lowerConfig(config) })
      } catch (e) {
        // a config that lowered for its trial lowers again; one that no longer does is left out (a stop request ends the confirmation)
        if (e instanceof InterruptedError) throw e
      }
    }
    const measured = yield* confirm.measure(candidates)
    const round = last + 1
    const records = measured.map((m) => recordOf(task, options, m, { confirm: round }))
    if (options.onRecords) yield* options.onRecords(records)
    const ok = measured.filter((m): m is Measured & { cost: number } => m.cost !== undefined)
    if (ok.length === 0) return undefined
    const win = ok.reduce((a, b) => (b.cost < a.cost ? b : a))
    const def = defaults > 0 ? ok.find((m) => scheduleKey(task, m.config) === scheduleKey(task, picked[0])) : undefined
    return { config: win.config, cost: win.cost, ...(def ? { defaultCost: def.cost } : {}) }
  })
