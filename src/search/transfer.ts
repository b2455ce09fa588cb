// Transfer learning (AutoTVM's): a new task's cost model starts from the measurements of other
// tasks. Their records become training rows — each config lowered under its own task and
// featurized like the new task's candidates (features.ts puts every known knob in a slot of its
// own, so rows of different tasks line up), its throughput normalized by its own task's best — so
// the model knows from the first batch what makes a schedule fast on this machine.
import { InterruptedError } from "../ast/graph/errors.js"
import type { TaskRunner } from "./extract.js"
import { featuresOf } from "./features.js"
import { isTrial, type TuningRecord } from "./records.js"
import { configHash } from "./task.js"

export interface TransferRows {
  readonly xs: readonly (readonly number[])[]
  readonly ys: readonly number[]
}

export interface TransferOptions {
  /** Rows taken per other task: its best records first. */
  readonly perTask: number
  /** Rows in all. */
  readonly max: number
}

export const defaultTransferOptions: TransferOptions = { perTask: 64, max: 1024 }

/**
 * Rows from `records` of the tasks in `runners` other than `task` (same target). `cache` keeps
 * features already computed (keyed by workload and config), so a run that tunes many tasks lowers
 * each record once.
 */
export const transferRows = (
  task: TaskRunner,
  runners: readonly TaskRunner[],
  records: readonly TuningRecord[],
  target: string,
  cache: Map<string, readonly number[]>,
  options: TransferOptions = defaultTransferOptions,
): TransferRows => {
  const xs: (readonly number[])[] = []
  const ys: number[] = []
  for (const r of runners) {
    if (r.task.workload === task.task.workload) continue
    const own = records.filter((x) => x.workload === r.task.workload && x.target === target && isTrial(x))
    const cost = (x: TuningRecord) => (x.costs.length && !x.error ? Math.min(...x.costs) : Infinity)
    const best = Math.min(...own.map(cost))
    if (!Number.isFinite(best)) continue
    const seen = new Set<string>()
    for (const rec of [...own].sort((a, b) => cost(a) - cost(b))) {
      if (seen.size >= options.perTask || xs.length >= options.max) break
      const key = `${r.task.workload}|${configHash(rec.config)}`
      if (seen.has(key)) continue
      seen.add(key)
      let f = cache.get(key)
      if (!f) {
        try {
          f = featuresOf(r.lowerConfig(rec.config), r.task.knobs, rec.config)
        } catch (e) {
          if (e instanceof InterruptedError) throw e // a stop request, not a record that no longer fits
          continue // a record whose knobs no longer fit its template
        }
        cache.set(key, f)
      }
      xs.push(f)
      ys.push(Number.isFinite(cost(rec)) ? best / cost(rec) : 0)
    }
  }
  return { xs, ys }
}
