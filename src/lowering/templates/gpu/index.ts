// The cuda target's schedules: a minimal, correct auto-bind. Every stage computed at root (each
// group's outputs, and the reductions the base schedule keeps at root) gets its data axes fused
// into one, split by a block size from the target record, the outer part bound to blockIdx.x and
// the inner to threadIdx.x; a stage's reduction axes stay inside, serial per thread. A stage
// without data axes (a reduction to a scalar) stays unbound: the emitter launches it as one
// thread. Elementwise and injective stages were inlined by the base schedule.
import type { CudaAttrs } from "../../../ast/target.js"
import * as S from "../../../ast/schedule/schedule.js"
import type { ComputeTensor } from "../../../ast/te/tensor.js"
import type { FusedGroup } from "../../../rewrite/fuse-ops.js"
import type { Config, Knob, Template } from "../template.js"
import type { ScheduleFn } from "../../lower-group.js"

/**
 * Threads per block for `elements` independent outputs: an eighth of a multiprocessor's resident
 * threads (so eight blocks fill one, as the Programming Guide's occupancy tables have it), at most
 * the block limit, and no more warps than the outputs need.
 */
export const blockSize = (attrs: CudaAttrs, elements: number): number => {
  const full = Math.max(attrs.warpSize, Math.min(attrs.maxThreadsPerBlock, Math.floor(attrs.maxThreadsPerMultiprocessor / 8)))
  const needed = Math.ceil(elements / attrs.warpSize) * attrs.warpSize
  return Math.max(1, Math.min(full, needed))
}

/** Stage `name`'s data axes fused, split by the block size and bound to blockIdx.x / threadIdx.x. */
const bindStage = (s0: S.Schedule, name: string, attrs: CudaAttrs): S.Schedule => {
  const st = s0.stages.get(name)!
  const data = st.leaf.filter((a) => st.axes.get(a)!.type === "data")
  if (data.length === 0) return s0
  // data axes first, in their order, then the reduction axes
  let s = S.reorder(s0, name, [...data, ...st.leaf.filter((a) => !data.includes(a))])
  let fused = data[0]
  for (const next of data.slice(1)) ({ schedule: s, fused } = S.fuse(s, name, fused, next))
  const elements = s.stages.get(name)!.axes.get(fused)!.extent
  const { schedule, outer, inner } = S.split(s, name, fused, { factor: blockSize(attrs, elements) })
  return S.bind(S.bind(schedule, name, outer, "blockIdx.x"), name, inner, "threadIdx.x")
}

/**
 * Each group's GPU schedule: every root stage auto-bound (a tuned config is not looked up: this rule
 * set has no knobs). `tuned` is src/backend's TunedLookup, written out: lowering imports no backend.
 */
export const cudaSchedules =
  (attrs: CudaAttrs, _tuned?: (group: FusedGroup, template: Template, knobs: readonly Knob[], outputs: readonly ComputeTensor[]) => Config | undefined): ScheduleFn =>
  (_outputs, base) => {
    let s = base
    for (const name of base.order) if (s.stages.get(name)!.attach.kind === "root") s = bindStage(s, name, attrs)
    return s
  }
