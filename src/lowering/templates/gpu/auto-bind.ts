// Auto-bind (MetaSchedule's AutoBind, Ansor's injective rule): a root stage's data loops fused into
// one, split by the threads of a block, the outer part bound to blockIdx.x and the inner to
// threadIdx.x; a reduction's own loops stay serial inside its thread.
import * as S from "../../../ast/schedule/schedule.js"
import { dataLeaves } from "../common.js"
import type { GpuLimits } from "./limits.js"

/** Fuses adjacent loops of a stage (its data loops unless given, outermost first) into one; its name (undefined: none). */
export const fuseData = (s0: S.Schedule, stage: string, axes?: readonly string[]): { schedule: S.Schedule; fused?: string } => {
  const data = axes ?? dataLeaves(s0.stages.get(stage)!)
  if (data.length === 0) return { schedule: s0 }
  let s = s0
  let cur = data[0]
  for (const next of data.slice(1)) {
    const f = S.fuse(s, stage, cur, next)
    s = f.schedule
    cur = f.fused
  }
  return { schedule: s, fused: cur }
}

/** Threads a bound nest of `elements` outputs gets by default: the block's, fewer where the grid would not fill every SM, at least a warp. */
export const bindThreads = (elements: number, l: GpuLimits): number => {
  let t = Math.min(l.blockThreads, l.maxThreads)
  while (t > l.warp && Math.ceil(elements / t) < l.sms) t /= 2
  return Math.max(l.warp, t)
}

/** The stage's data loops fused, split by `threads`, bound to blockIdx.x and threadIdx.x. */
export const autoBind = (s0: S.Schedule, stage: string, threads: number): S.Schedule => {
  const f = fuseData(s0, stage)
  if (!f.fused) return f.schedule
  const sp = S.split(f.schedule, stage, f.fused, { factor: threads })
  return S.bind(S.bind(sp.schedule, stage, sp.outer, "blockIdx.x"), stage, sp.inner, "threadIdx.x")
}

/** Output elements of a stage (its data loops' product). */
export const elementsOf = (st: S.Stage): number => st.op.shape.reduce((a, b) => a * b, 1)
