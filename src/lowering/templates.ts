// Schedule templates: for each kind of fused group (by its anchor op), the schedule as a function
// of knobs declared as data — split factors, reorder choices, unroll / vectorize / parallel — with
// defaults per target. The defaults are the untuned schedules; the auto-tuner searches the knobs.
import type { FusedGroup } from "../rewrite/fuse-ops.js"
import * as S from "../ast/schedule/schedule.js"
import type { ComputeTensor } from "../ast/te/tensor.js"
import type { ScheduleFn } from "./lower-group.js"

export type Knob =
  | { readonly kind: "split"; readonly name: string; readonly extent: number; readonly candidates: readonly number[] }
  | { readonly kind: "choice"; readonly name: string; readonly candidates: readonly (string | number | boolean)[] }

export type Config = Readonly<Record<string, string | number | boolean>>

export interface ScheduleTarget {
  /** fp32 lanes of the vector unit (16 AVX-512, 8 AVX2, 4 SIMD128, 1 scalar). */
  readonly vectorLanes: number
  readonly cores: number
}

export interface Template {
  readonly name: string
  /** The knobs of this group's schedule (depends on its shapes). */
  readonly space: (outputs: readonly ComputeTensor[], base: S.Schedule) => readonly Knob[]
  readonly defaults: (knobs: readonly Knob[], target: ScheduleTarget) => Config
  /** The schedule for a config (every config of the space is legal). */
  readonly apply: (outputs: readonly ComputeTensor[], base: S.Schedule, config: Config) => S.Schedule
}

const divisors = (n: number, max = 64): number[] => {
  const out: number[] = []
  for (let d = 1; d <= Math.min(n, max); d++) if (n % d === 0) out.push(d)
  return out
}

/** The root reduction stage a group is built around (conv, matmul, pooling), if any. */
const anchorStage = (s: S.Schedule): S.Stage | undefined => {
  const roots = s.order.map((n) => s.stages.get(n)!).filter((st) => st.attach.kind === "root")
  return [...roots].reverse().find((st) => st.op.body.kind === "reduce" && st.op.body.axes.length > 0 && st.op.axes.length >= 2)
}

const dataLeaves = (st: S.Stage) => st.leaf.filter((a) => st.axes.get(a)!.type === "data")

/** Parallel over the outermost data loop, vectorize the innermost when it is short: every root stage. */
const parallelize = (s0: S.Schedule, target: { vectorize: boolean; lanes: number }, skip?: string): S.Schedule => {
  let s = s0
  for (const name of s.order) {
    if (name === skip) continue
    const st = s.stages.get(name)!
    if (st.attach.kind !== "root") continue
    const data = dataLeaves(st)
    if (data.length === 0) continue
    const first = data[0]
    if (st.axes.get(first)!.extent > 1) s = S.parallel(s, name, first)
    const last = st.leaf[st.leaf.length - 1]
    const lastAxis = st.axes.get(last)!
    if (target.vectorize && data.length > 1 && lastAxis.type === "data" && last !== first && lastAxis.extent <= target.lanes * 4) s = S.vectorize(s, name, last)
  }
  return s
}

/**
 * The reduction template (conv, matmul, pooling, blocked conv): the innermost data axis split by
 * `tile_inner` and moved inside the reduction (register tiling over output width / columns),
 * the reduce axes in order, the outer data axes parallel, the innermost vectorized.
 */
export const reductionTemplate: Template = {
  name: "reduction",
  space: (_outputs, base) => {
    const st = anchorStage(base)
    if (!st) return []
    const data = dataLeaves(st)
    const inner = st.axes.get(data[data.length - 1])!.extent
    const second = data.length >= 2 ? st.axes.get(data[data.length - 2])!.extent : 1
    return [
      { kind: "split", name: "tile_inner", extent: inner, candidates: divisors(inner, 64) },
      { kind: "split", name: "tile_second", extent: second, candidates: divisors(second, 16) },
      { kind: "choice", name: "vectorize", candidates: [true, false] },
      { kind: "choice", name: "unroll_tile", candidates: [true, false] },
      { kind: "choice", name: "fuse_epilogue", candidates: [true, false] },
    ]
  },
  defaults: (knobs, target) => {
    const cfg: Record<string, string | number | boolean> = {}
    for (const k of knobs) {
      if (k.kind === "split" && k.name === "tile_inner") cfg[k.name] = [...k.candidates].reverse().find((d) => d <= Math.max(target.vectorLanes, 1)) ?? 1
      else if (k.kind === "split") {
        // register rows: up to 4, or up to 8 where nothing in 2..4 divides the axis (7 wide: 7)
        const four = [...k.candidates].reverse().find((d) => d <= 4) ?? 1
        cfg[k.name] = four > 1 ? four : ([...k.candidates].reverse().find((d) => d <= 8) ?? 1)
      }
      else cfg[k.name] = k.name === "vectorize" ? target.vectorLanes > 1 : k.name === "fuse_epilogue" || k.name === "unroll_tile"
    }
    return cfg
  },
  apply: (_outputs, base, config) => {
    const st = anchorStage(base)
    if (!st) return base
    if (config.fuse_epilogue) {
      const fused = fusedEpilogue(base, st, config)
      if (fused) return fused
    }
    let s = base
    const data = dataLeaves(st)
    const red = st.leaf.filter((a) => st.axes.get(a)!.type === "reduce")
    const lastData = data[data.length - 1]
    const ti = Number(config.tile_inner ?? 1)
    const t2 = Number(config.tile_second ?? 1)
    const sp = S.split(s, st.name, lastData, { factor: ti })
    s = sp.schedule
    let outerData = [...data.slice(0, -1), sp.outer]
    let innerTile = [sp.inner]
    if (data.length >= 2 && t2 > 1) {
      const sp2 = S.split(s, st.name, data[data.length - 2], { factor: t2 })
      s = sp2.schedule
      outerData = [...data.slice(0, -2), sp2.outer, sp.outer]
      innerTile = [sp2.inner, sp.inner]
    }
    s = S.reorder(s, st.name, [...outerData, ...red, ...innerTile])
    if (outerData.length && s.stages.get(st.name)!.axes.get(outerData[0])!.extent > 1) s = S.parallel(s, st.name, outerData[0])
    if (config.vectorize && ti > 1) s = S.vectorize(s, st.name, sp.inner)
    if (config.unroll_tile && innerTile.length === 2) s = S.unroll(s, st.name, innerTile[0])
    return parallelize(s, { vectorize: !!config.vectorize, lanes: 16 }, st.name)
  },
}

/**
 * TVM's CPU convolution schedule: the output (the epilogue stage, or a copy of the anchor through
 * cacheWrite when the anchor is the output) is tiled — the innermost data axis by `tile_inner`
 * (vector lanes), the next by `tile_second` (register rows) — and the anchor is computed at the
 * tile, its reduction outside its tile loops: the partial sums stay in a small local buffer.
 */
const fusedEpilogue = (base: S.Schedule, anchor: S.Stage, config: Config): S.Schedule | undefined => {
  let s = base
  let local = anchor.name
  let out: string
  const readers = S.effectiveConsumers(s, anchor.name)
  if (readers.length === 0) {
    const w = S.cacheWrite(s, anchor.name, "local")
    s = w.schedule
    local = w.stage
    out = anchor.name
  } else if (readers.length === 1) {
    out = readers[0]
    const o = s.stages.get(out)!
    if (o.attach.kind !== "root" || o.op.body.kind === "reduce" || o.op.shape.join() !== anchor.op.shape.join()) return undefined
  } else return undefined
  const os = s.stages.get(out)!
  const data = dataLeaves(os)
  if (data.length !== os.leaf.length || data.length < 2) return undefined
  const ti = Number(config.tile_inner ?? 1)
  const t2 = Number(config.tile_second ?? 1)
  const sp = S.split(s, out, data[data.length - 1], { factor: ti })
  const sp2 = S.split(sp.schedule, out, data[data.length - 2], { factor: t2 })
  s = S.reorder(sp2.schedule, out, [...data.slice(0, -2), sp2.outer, sp.outer, sp2.inner, sp.inner])
  const outer = [...data.slice(0, -2), sp2.outer]
  if (s.stages.get(out)!.axes.get(outer[0])!.extent > 1) s = S.parallel(s, out, outer[0])
  if (config.vectorize && ti > 1) s = S.vectorize(s, out, sp.inner)
  s = S.computeAt(s, local, out, sp.outer)
  // the anchor inside the tile: reduction outside, the tile's data loops inside (accumulators)
  const ls = s.stages.get(local)!
  const lred = ls.leaf.filter((a) => ls.axes.get(a)!.type === "reduce")
  const ldata = dataLeaves(ls)
  s = S.reorder(s, local, [...lred, ...ldata])
  // (the schedule knows the full extent; the region this axis covers is tile_inner long)
  if (config.vectorize && ti > 1 && ls.axes.get(ldata[ldata.length - 1])!.extent <= 64) s = S.vectorize(s, local, ldata[ldata.length - 1])
  if (config.unroll_tile && t2 > 1 && ldata.length >= 2) s = S.unroll(s, local, ldata[ldata.length - 2])
  return parallelize(s, { vectorize: !!config.vectorize, lanes: 16 }, out)
}

/** Groups without a reduction anchor (elementwise, injective, layout transforms). */
export const injectiveTemplate: Template = {
  name: "injective",
  space: () => [{ kind: "choice", name: "vectorize", candidates: [true, false] }],
  defaults: (_k, target) => ({ vectorize: target.vectorLanes > 1 }),
  apply: (_outputs, base, config) => parallelize(base, { vectorize: !!config.vectorize, lanes: 16 }),
}

export const templateFor = (base: S.Schedule): Template => (anchorStage(base) ? reductionTemplate : injectiveTemplate)

/** The untuned schedule for a target: each group's template at its defaults. */
export const defaultSchedule =
  (
    target: ScheduleTarget,
    tuned?: (group: FusedGroup, template: Template, knobs: readonly Knob[], outputs: readonly ComputeTensor[]) => Config | undefined,
  ): ScheduleFn =>
  (outputs, base, group) => {
    const t = templateFor(base)
    const knobs = t.space(outputs, base)
    const config = tuned?.(group, t, knobs, outputs) ?? t.defaults(knobs, target)
    return t.apply(outputs, base, config)
  }
