// What a whole-model tune (`tessera tune --time-budget`) keeps in hand before it starts another
// round: the next round and each tried task's confirmation, estimated from what the task's trials
// cost beside the search — lowering configs, building and running candidates — as the CLI measured
// them (it owns the clock; these functions are pure).
import type { CandidateSpent } from "../device/measure.js"
import type { Config } from "../lowering/templates/template.js"
import { configKey } from "../search/task.js"

/**
 * What a task's trials cost beside the search, as measured: lowering configs (`lowered` of them:
 * the tuner's, for their features, and the candidates') and measuring candidates (`calls` calls of
 * the measurer for `candidates` in all: rendering, building, checking and timing).
 */
export interface TrialCosts {
  readonly lowerMs: number
  readonly lowered: number
  readonly measureMs: number
  readonly calls: number
  readonly candidates: number
  /**
   * Where the device tells each candidate's build and runs (c): what measuring the configs a
   * confirmation measures again took in their trials — the default and the fastest, at most
   * `top` + 1 — and the measure calls' time outside their candidates' builds and runs (the
   * reference's outputs, rendering), in all.
   */
  readonly spent?: { readonly confirmed: readonly CandidateSpent[]; readonly outsideMs: number }
}

/**
 * What a task's confirmation costs at most, from what its trials cost: it lowers `top` + 1 configs
 * (the default beside the top ones), then builds them (one gcc run on c) and runs each with
 * `repeatsRatio` times the trials' repeats. Where the device told each candidate's build and runs
 * (`spent`), those configs' own: their builds and their runs scaled by the repeats (a config not
 * among them, from a resumed log, at the trials' mean), and one call's time outside them. Else
 * from the measure calls alone (cuda): the larger of a call's mean — its builds are at least a
 * confirmation's, each candidate its own nvcc run in parallel — and the repeats-scaled measuring
 * per candidate times the configs. Not the task's round: a round is mostly the search (xgb's
 * annealing lowers and featurizes a few hundred configs), which a confirmation does not run.
 */
export const confirmationMs = (c: TrialCosts, top: number, repeatsRatio: number): number => {
  if (c.candidates === 0 || c.calls === 0) return 0
  const configs = top + 1
  const lowering = c.lowered ? (configs * c.lowerMs) / c.lowered : 0
  const perCandidate = (repeatsRatio * c.measureMs) / c.candidates
  if (c.spent && c.spent.confirmed.length > 0) {
    const own = c.spent.confirmed.slice(0, configs).reduce((ms, e) => ms + e.build + repeatsRatio * e.run, 0)
    return lowering + own + Math.max(0, configs - c.spent.confirmed.length) * perCandidate + c.spent.outsideMs / c.calls
  }
  return lowering + Math.max(c.measureMs / c.calls, configs * perCandidate)
}

/**
 * The milliseconds a whole-model tune must keep in hand before it starts another round: that
 * round (the mean round so far) and, with confirmations (`confirm.top` > 0), each tried task's
 * confirmation as `confirmationMs` bounds it from its trials' measured costs. A reserve of a whole
 * round per tried task (the fourteenth session's) kept 100–300 s for a ResNet-18 Winograd task
 * whose confirmation took 0.08–0.5 of that: a 10-minute budget stopped after 3 of 18 tasks.
 */
export const budgetReserveMs = (
  roundMs: ReadonlyMap<number, readonly number[]>,
  costs: ReadonlyMap<number, TrialCosts>,
  confirm: { readonly top: number; readonly repeatsRatio: number },
): number => {
  const all = [...roundMs.values()].flat()
  const next = all.length ? all.reduce((a, b) => a + b, 0) / all.length : 0
  const confirmations = confirm.top > 0 ? [...costs.values()].reduce((ms, c) => ms + confirmationMs(c, confirm.top, confirm.repeatsRatio), 0) : 0
  return next + confirmations
}

/**
 * One task's trial costs as a tune measures them: `lowered` and `measured` note each lowering and
 * measure call (with its results and, where the device told them, each candidate's build and runs);
 * `costs()` gives TrialCosts with the configs a confirmation measures again — the default (its
 * config's key `defaultKey`) and the fastest measured — at most `top` + 1.
 */
export const trialCostLog = (defaultKey: string, top: number) => {
  let lowerMs = 0
  let lowered = 0
  let measureMs = 0
  let calls = 0
  let candidates = 0
  let outsideMs = 0
  let told = false
  const trials: { key: string; cost: number; spent: CandidateSpent | undefined }[] = []
  return {
    lowered: (ms: number) => {
      lowerMs += ms
      lowered++
    },
    measured: (ms: number, results: readonly { readonly config: Config; readonly cost: number | undefined }[], spent: ReadonlyMap<number, CandidateSpent>) => {
      measureMs += ms
      calls++
      candidates += results.length
      let inside = 0
      results.forEach((r, k) => {
        const s = spent.get(k)
        if (s) {
          told = true
          inside += s.build + s.run
        }
        trials.push({ key: configKey(r.config), cost: r.cost ?? Infinity, spent: s })
      })
      outsideMs += Math.max(0, ms - inside)
    },
    costs: (): TrialCosts => {
      const counts = { lowerMs, lowered, measureMs, calls, candidates }
      if (!told) return counts
      // (confirmTask's pick: the default first, then the fastest trials)
      const def = trials.find((t) => t.key === defaultKey)
      const fastest = trials.filter((t) => t !== def && Number.isFinite(t.cost)).sort((a, b) => a.cost - b.cost)
      const picked = [...(def ? [def] : []), ...fastest].slice(0, top + 1)
      const confirmed = picked.flatMap((t) => (t.spent ? [t.spent] : []))
      return { ...counts, spent: { confirmed, outsideMs } }
    },
  }
}
