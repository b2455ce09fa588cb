// The rfactor rule (Ansor's rfactor, MetaSchedule's AddRFactor): a reduction with too few outputs
// to fill the machine (a sum over a long axis to one value, a few rows' statistics) has its reduce
// axis split and factored into partial results — `rf_inner` contiguous partials a thread sums in
// independent vector accumulators, `rf_parts` stretches of the axis the threads take — then the
// partials reduced. How many of each follows from the target record: the machine keeps
// cores × lanes × (FMA pipes × latency) sums in flight; the outputs give a reduction its data
// loops' share of them, rfactor the rest.
import * as S from "../../ast/schedule/schedule.js"
import { dataLeaves } from "./common.js"
import type { Config, Knob, ScheduleTarget } from "./template.js"

/** Contiguous partials a thread may keep (the vectorize primitive's limit). */
const INNER_CANDIDATES = [1, 2, 4, 8, 16, 32, S.MAX_VECTORIZED] as const

/** Stretches of the reduce axis the threads may take. */
const PARTS_CANDIDATES = [1, 2, 4, 8, 16, 32, 64] as const

/** Whether the defaults take the parts the cores want (see rfactorDefaults). */
export const RF_PARTS_BY_DEFAULT = false

const productOf = (xs: readonly number[]) => xs.reduce((a, b) => a * b, 1)

/** The reduce axis the rule factors: the stage's innermost reduce leaf (the contiguous one of an inner reduction). */
const reduceLeaf = (st: S.Stage): string | undefined => [...st.leaf].reverse().find((a) => st.axes.get(a)!.type === "reduce")

/**
 * The rule's knobs for an unscheduled reduction stage: `rf_inner` (its `extent`: the reduce axis
 * it splits) and `rf_parts` (its `extent`: the outputs, the data loops the parts run beside).
 * Absent (1): no rfactor, the schedule records were tuned with.
 */
export const rfactorKnobs = (st: S.Stage): Knob[] => {
  const r = reduceLeaf(st)
  if (!r) return []
  const extent = st.axes.get(r)!.extent
  const outputs = productOf(dataLeaves(st).map((a) => st.axes.get(a)!.extent))
  return [
    { kind: "choice", name: "rf_inner", candidates: INNER_CANDIDATES.filter((f) => f <= extent), extent, absent: 1 },
    { kind: "choice", name: "rf_parts", candidates: PARTS_CANDIDATES.filter((p) => p <= extent), extent: outputs, absent: 1 },
  ]
}

/**
 * The defaults from the target record. The outputs' loops hold vectors of sums: one an output
 * where the emitter vectorizes the reduce loop (an inner reduction: `lanesCovered`), else one a
 * vector of outputs along the last axis; the machine wants cores × pipes × latency of them in flight.
 * - parts: with fewer vectors of sums than cores, enough stretches that each core has one (only
 *   with RF_PARTS_BY_DEFAULT; the knob is always in the space);
 * - inner: with fewer vectors of sums a core than pipes × latency, the missing chains (an inner
 *   reduction's: lanes × chains contiguous partials, up to the vectorizer's 64);
 * - either only where the reduction is at least twice parts × inner long: otherwise the final
 *   reduction is the work.
 */
export const rfactorDefaults = (knobs: readonly Knob[], target: ScheduleTarget, lanesCovered: boolean): Config => {
  const inner = knobs.find((k) => k.name === "rf_inner")
  const parts = knobs.find((k) => k.name === "rf_parts")
  if (inner?.kind !== "choice" || parts?.kind !== "choice" || inner.extent === undefined || parts.extent === undefined) return {}
  const lanes = Math.max(1, target.vectorLanes)
  const need = (target.fmaUnits ?? 2) * (target.fmaLatency ?? 4)
  const cores = Math.max(1, target.cores)
  const vectors = lanesCovered ? parts.extent : Math.ceil(parts.extent / lanes)
  const pick = (cands: readonly (string | number | boolean)[], want: number) => (cands as number[]).find((c) => c >= want) ?? Math.max(...(cands as number[]))
  // (the parts the cores would want: not taken by default — on a 2-core machine shared with other
  // work, a parallel region around a kernel of ~10 µs waited milliseconds at its join for a
  // descheduled thread, where the serial kernel did not; the tuner measures them per thread count)
  const wanted = vectors < cores ? pick(parts.candidates, Math.ceil(cores / vectors)) : 1
  const p = RF_PARTS_BY_DEFAULT ? wanted : 1
  // vectors of sums each core has in flight without rfactor
  const perCore = Math.max(1, Math.floor(vectors / cores))
  const chains = Math.ceil(need / perCore)
  const f = chains > 1 ? pick(inner.candidates, lanesCovered ? Math.min(S.MAX_VECTORIZED, lanes * chains) : chains) : 1
  const fits = inner.extent >= 2 * p * f
  return fits ? { rf_inner: f, rf_parts: p } : { rf_inner: 1, rf_parts: 1 }
}

/**
 * The stage `anchor` rfactored by the config: the reduce axis split by `rf_inner` (the inner half
 * factored into contiguous partials), then what is left of it into `rf_parts` stretches (factored
 * into partials the threads take). The partials' stage runs parts (parallel), outputs, the rest of
 * the reduction, then the inner partials (vectorized) innermost. Undefined where the config asks
 * for neither.
 */
export const applyRfactor = (base: S.Schedule, anchor: string, config: Config, vectorize: boolean, lanesCovered: boolean): S.Schedule | undefined => {
  const f = Number(config.rf_inner ?? 1)
  const p = Number(config.rf_parts ?? 1)
  if (f <= 1 && p <= 1) return undefined
  let s = base
  let work = anchor
  let r = reduceLeaf(s.stages.get(anchor)!)
  if (!r) return undefined
  const innerStage = f > 1
  if (innerStage) {
    const sp = S.split(s, anchor, r, { factor: f })
    const rf = S.rfactor(sp.schedule, anchor, sp.inner)
    s = rf.schedule
    work = rf.stage
    r = reduceLeaf(s.stages.get(work)!)!
  }
  if (p > 1) {
    const sp = S.split(s, work, r, { nparts: p })
    const rf = S.rfactor(sp.schedule, work, sp.outer)
    s = rf.schedule
    work = rf.stage
  }
  // the partials' stage: [parts?, inner?, outputs…] data, the rest of the reduction. Its sums run
  // in a local copy computed at each part and output (cacheWrite): the inner partials a thread
  // keeps are one contiguous row of vector accumulators, outside the others' cache lines
  const w = S.cacheWrite(s, work, "local")
  s = w.schedule
  const local = w.stage
  const ws = s.stages.get(work)!
  const data = dataLeaves(ws)
  const partsAxis = p > 1 ? [data[0]] : []
  const innerAxis = innerStage ? [data[p > 1 ? 1 : 0]] : []
  const outs = data.slice(partsAxis.length + innerAxis.length)
  const at = [...partsAxis, ...outs]
  s = S.reorder(s, work, [...at, ...innerAxis])
  if (p > 1) s = S.parallel(s, work, partsAxis[0])
  // (across the outputs: the local copy holds the whole last axis, its vector)
  const attach = lanesCovered ? at[at.length - 1] : at[at.length - 2]
  if (attach !== undefined) s = S.computeAt(s, local, work, attach)
  const ls = s.stages.get(local)!
  const ldata = dataLeaves(ls)
  const lred = ls.leaf.filter((a) => ls.axes.get(a)!.type === "reduce")
  const linner = innerStage ? [ldata[p > 1 ? 1 : 0]] : []
  const lrest = ldata.filter((a) => !linner.includes(a))
  if (lanesCovered) {
    s = S.reorder(s, local, [...lrest, ...lred, ...linner])
    if (vectorize && innerStage) s = S.vectorize(s, local, linner[0])
  } else {
    // the partials' chains unrolled around a vector of the outputs
    const last = lrest[lrest.length - 1]
    s = S.reorder(s, local, [...lrest.slice(0, -1), ...lred, ...linner, last])
    if (vectorize && ls.axes.get(last)!.extent <= S.MAX_VECTORIZED && ls.axes.get(last)!.extent > 1) s = S.vectorize(s, local, last)
    if (innerStage) s = S.unroll(s, local, linner[0])
  }
  // the stages reducing the partials stay serial: parts × inner × outputs elements, fewer than a
  // parallel loop's start costs
  return s
}
