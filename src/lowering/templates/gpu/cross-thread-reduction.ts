// Cross-thread reduction (Ansor's and MetaSchedule's rule for reductions with little spatial
// parallelism: softmax's and norms' row statistics, global pools, a batch-1 dense): the longest
// reduce axis split by the block's threads and factored (rfactor) into partials in shared memory,
// one a thread, each summing a strided share (thread t takes k = ko·T + t, so a warp reads
// contiguous elements); then, after a barrier, each of the block's rows reduced from its partials.
//
// The TIR form (one kernel per reduction, the order lowering gives):
//   for[blockIdx.x] b:                       rows b·R … b·R + R − 1
//     barrier()
//     for[threadIdx.x] t in [0, T):          the partials, in shared memory R.rf[T, rows]
//       R.rf[t, r] = identity; for ko: R.rf[t, r] = R.rf[t, r] ⊕ x[…, ko·T + t]   (guarded where T ∤ K)
//     barrier()
//     for[threadIdx.x] r in [0, R):          the rows' results
//       R[b·R + r] = identity; for k in [0, T): R[…] = R[…] ⊕ R.rf[k, r]
// The second loop's reduction over the T partials carries the pragma `thread_allreduce` when the
// `_shuffle` knob is 1 (the default): lowering.LowerThreadAllreduce (src/lowering/tir) then reduces
// the partials within each warp by __shfl_down_sync and across warps through the partials' own
// shared rows (TVM's lower_thread_allreduce); with 0 the loop stays the serial sum it declares.
import * as S from "../../../ast/schedule/schedule.js"
import { dataLeaves, divisors } from "../common.js"
import { fuseData } from "./auto-bind.js"
import type { GpuLimits } from "./limits.js"
import { THREAD_ALLREDUCE_PRAGMA } from "../../tir/lower-thread-allreduce.js"
import type { Knob } from "../template.js"

/** Whether a root reduction stage takes the cross-thread rule: fewer outputs than the GPU has SMs × warps, a reduction at least a warp long. */
export const wantsCrossThread = (st: S.Stage, l: GpuLimits): boolean => {
  const body = st.op.body
  if (body.kind !== "reduce" || st.op.shape.length === 0) return false
  const outputs = st.op.shape.reduce((a, b) => a * b, 1)
  const longest = Math.max(...body.axes.map((a) => a.dom.extent))
  return outputs < l.sms * l.warp && longest >= l.warp
}

/** The longest reduce axis (the first of the longest). */
const longestReduce = (st: S.Stage): string => {
  const red = st.leaf.filter((a) => st.axes.get(a)!.type === "reduce")
  return red.reduce((best, a) => (st.axes.get(a)!.extent > st.axes.get(best)!.extent ? a : best), red[0])
}

export const crossThreadKnobs = (prefix: string, st: S.Stage, l: GpuLimits): Knob[] => {
  const k = st.axes.get(longestReduce(st))!.extent
  const threads: number[] = []
  for (let t = l.warp; t <= l.maxThreads && (t === l.warp || t / 2 < k); t *= 2) threads.push(t)
  const rows = divisors(st.op.shape.reduce((a, b) => a * b, 1), l.warp)
  return [
    { kind: "choice", name: `${prefix}_threads`, candidates: threads, extent: k },
    { kind: "choice", name: `${prefix}_rows`, candidates: rows },
    { kind: "choice", name: `${prefix}_shuffle`, candidates: [1, 0] },
  ]
}

/** Threads: the largest candidate up to the block's default whose partials each sum at least two elements (a warp at least); one row a block. */
export const crossThreadDefaults = (prefix: string, knobs: readonly Knob[], l: GpuLimits): Record<string, number> => {
  const knob = knobs.find((k) => k.name === `${prefix}_threads`)!
  const threads = knob.candidates as number[]
  const extent = (knob.kind === "choice" ? knob.extent : undefined) ?? 0
  const t = [...threads].reverse().find((x) => x * 2 <= extent && x <= l.blockThreads) ?? threads[0]
  return { [`${prefix}_threads`]: t, [`${prefix}_rows`]: 1, [`${prefix}_shuffle`]: 1 }
}

/** The pragma that marks a reduction over a block's partials for lowering.LowerThreadAllreduce. */
export const THREAD_ALLREDUCE: typeof THREAD_ALLREDUCE_PRAGMA = THREAD_ALLREDUCE_PRAGMA

/** The reduction stage `stage` (at root, unscheduled) reduced across `threads` threads, `rows` rows a block; its partials summed by warp shuffles where `shuffle`. */
export const crossThreadReduce = (s0: S.Schedule, stage: string, threads: number, rows: number, shuffle = true): S.Schedule => {
  const st = s0.stages.get(stage)!
  const sp = S.split(s0, stage, longestReduce(st), { factor: threads })
  const rf = S.rfactor(sp.schedule, stage, sp.inner)
  let s = S.setScope(rf.schedule, rf.stage, "shared")
  // the last data axis split by the rows of a block (its inner part the threads of the final
  // loop), the other data axes fused with its outer part into the block index: the partials'
  // region is then `rows` elements of the last axis (bound inference does not see through a
  // fused index's floormod)
  const data = dataLeaves(s.stages.get(stage)!)
  const o = S.split(s, stage, data[data.length - 1], { factor: rows })
  const f = fuseData(o.schedule, stage, [...data.slice(0, -1), o.outer])
  s = S.bind(S.bind(f.schedule, stage, f.fused!, "blockIdx.x"), stage, o.inner, "threadIdx.x")
  s = S.computeAt(s, rf.stage, stage, f.fused!)
  // the partials' first loop is the factored axis: one a thread
  s = S.bind(s, rf.stage, s.stages.get(rf.stage)!.leaf[0], "threadIdx.x")
  if (!shuffle) return s
  const fin = s.stages.get(stage)!
  const over = fin.leaf.filter((a) => fin.axes.get(a)!.type === "reduce")
  return over.length === 1 ? S.pragma(s, stage, over[0], THREAD_ALLREDUCE, "1") : s
}
