// Whole-model tuning (Ansor's task scheduler): trials go, a round at a time, to the task with the
// largest expected end-to-end gain per trial. A task's weight is how many groups of the model run
// its workload; its expected time reduction per trial mixes what its last rounds gained (the
// backward gradient) with an optimistic forward guess (its best time over its trials so far: a
// task tried little still has a lot to find). Every task first gets one round (warm-up, round
// robin). The caller owns the clock: `stop` says when the budget is spent.
import { Effect } from "effect"
import type { CostModelError } from "./cost-model.js"
import type { TaskSession, TuneResult } from "./tune.js"

export interface SchedulerOptions {
  /** Trials per round (a task's slice). */
  readonly round: number
  /** Trials per task at most. */
  readonly maxTrials: number
  /** Weight of the backward gradient against the forward guess (Ansor's α: 0.2). */
  readonly alpha?: number
  /** Called before each round; true ends the tuning (the time budget). */
  readonly stop: () => boolean
  readonly onRound?: (r: { readonly task: number; readonly trials: number; readonly gain: number }) => void
  /**
   * Called before each tried task's confirmation; false: that task finishes with its trials' best,
   * unconfirmed (the time budget is spent). Absent: every tried task is confirmed.
   */
  readonly confirmWhile?: () => boolean
  /** Called with the tasks whose confirmation `confirmWhile` skipped, once, at the end. */
  readonly onSkipped?: (tasks: readonly number[]) => void
}

export interface TaskState {
  /** Best-so-far seconds after each trial (Infinity before the first success). */
  readonly costs: readonly number[]
  /** Groups of the model that run the workload. */
  readonly weight: number
}

/**
 * The expected reduction of the model's time per trial on a task: weight × (α × what the last
 * `window` trials gained per trial + (1 − α) × best / trials). Infinity for a task not tried yet.
 */
export const expectedGain = (s: TaskState, window: number, alpha = 0.2): number => {
  const t = s.costs.length
  if (t === 0) return Infinity
  const now = s.costs[t - 1]
  if (!Number.isFinite(now)) return Infinity // nothing works yet: keep trying it first
  const then = s.costs[Math.max(0, t - 1 - window)]
  const backward = Number.isFinite(then) ? (then - now) / Math.min(window, t) : now / t
  const forward = now / t
  return s.weight * (alpha * backward + (1 - alpha) * forward)
}

/** The task to tune next: the first untried one (warm-up), else the largest expected gain (ties: the lower index). */
export const nextTask = (states: readonly (TaskState & { readonly open: boolean; readonly trials: number })[], window: number, maxTrials: number, alpha?: number): number | undefined => {
  let best: number | undefined
  let bestGain = -Infinity
  states.forEach((s, k) => {
    if (!s.open || s.trials >= maxTrials) return
    const g = s.trials === 0 ? Infinity : expectedGain(s, window, alpha)
    if (best === undefined || g > bestGain) {
      best = k
      bestGain = g
    }
  })
  return best
}

/** Runs rounds until `stop` or every task is done, then each tried task's confirmation (while `confirmWhile`); the results in task order. */
export const scheduleTasks = <E>(sessions: readonly { readonly session: TaskSession<E>; readonly weight: number }[], o: SchedulerOptions): Effect.Effect<TuneResult[], E | CostModelError> =>
  Effect.gen(function* () {
    // tasks whose last round measured nothing (a spent space, a tuner with nothing new)
    const spent = new Set<number>()
    for (;;) {
      if (o.stop()) break
      const states = sessions.map(({ session, weight }, k) => ({ costs: session.costs(), weight, open: session.open() && !spent.has(k), trials: session.costs().length }))
      const k = nextTask(states, o.round, o.maxTrials, o.alpha)
      if (k === undefined) break
      const gain = states[k].trials === 0 ? Infinity : expectedGain(states[k], o.round, o.alpha)
      const before = states[k].trials
      yield* sessions[k].session.run(Math.min(o.maxTrials, before + o.round))
      if (sessions[k].session.costs().length === before) spent.add(k)
      else o.onRound?.({ task: k, trials: sessions[k].session.costs().length, gain })
    }
    const skipped: number[] = []
    const results = yield* Effect.forEach(sessions, ({ session }, k) => {
      const tried = session.costs().length > 0
      const confirm = !tried || o.confirmWhile === undefined || o.confirmWhile()
      if (!confirm) skipped.push(k)
      return session.finish(confirm)
    })
    if (skipped.length) o.onSkipped?.(skipped)
    return results
  })
