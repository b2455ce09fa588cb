// What the CPU templates share: the group's anchor stage, its data loops, the parallel and
// vectorized loops every root stage gets, the stages a register tile is made of, and the register
// tile of vector accumulators a target's register file holds.
import * as S from "../../ast/schedule/schedule.js"
import { collect, freeVars, type Expr } from "../../ast/te/expr.js"
import type { Knob } from "./template.js"

export const divisors = (n: number, max = 64): number[] => {
  const out: number[] = []
  for (let d = 1; d <= Math.min(n, max); d++) if (n % d === 0) out.push(d)
  return out
}

/** The root reduction stage a group is built around (conv, matmul, pooling), if any. */
export const anchorStage = (s: S.Schedule): S.Stage | undefined => {
  const roots = s.order.map((n) => s.stages.get(n)!).filter((st) => st.attach.kind === "root")
  return [...roots].reverse().find((st) => st.op.body.kind === "reduce" && st.op.body.axes.length > 0 && st.op.axes.length >= 2)
}

export const dataLeaves = (st: S.Stage) => st.leaf.filter((a) => st.axes.get(a)!.type === "data")

/**
 * Parallel over the leading loops `axes` (adjacent, outermost first): they are fused until the loop
 * has at least `minExtent` iterations, so batch 1 does not leave cores idle and a static split over
 * a few cores stays balanced (9 channel blocks on 2 cores would leave one idle a ninth of the time).
 */
export const parallelOuter = (s0: S.Schedule, stage: string, axes: readonly string[], minExtent = 32): S.Schedule => {
  if (axes.length === 0) return s0
  let s = s0
  let cur = axes[0]
  const extent = (a: string) => s.stages.get(stage)!.axes.get(a)!.extent
  for (const next of axes.slice(1)) {
    if (extent(cur) >= minExtent) break
    const f = S.fuse(s, stage, cur, next)
    s = f.schedule
    cur = f.fused
  }
  return extent(cur) > 1 ? S.parallel(s, stage, cur) : s
}

/**
 * Parallel over the outermost data loop, and (with `vectorize`) the innermost vectorized where it is
 * data and no longer than the vectorize primitive takes: every root stage but `skip`.
 */
export const parallelize = (s0: S.Schedule, vectorize: boolean, skip?: string): S.Schedule => {
  let s = s0
  for (const name of s.order) {
    if (name === skip) continue
    const st = s.stages.get(name)!
    if (st.attach.kind !== "root") continue
    const data = dataLeaves(st)
    if (data.length === 0) continue
    const last = st.leaf[st.leaf.length - 1]
    const lastAxis = st.axes.get(last)!
    const vec = vectorize && data.length > 1 && lastAxis.type === "data" && lastAxis.extent <= S.MAX_VECTORIZED
    const lead: string[] = []
    for (const a of st.leaf) {
      if (st.axes.get(a)!.type !== "data" || (vec && a === last)) break
      lead.push(a)
    }
    s = parallelOuter(s, name, lead)
    if (vec) s = S.vectorize(s, name, last)
  }
  return s
}

/**
 * The stage a tile is made of and the stage computed at it: the anchor's one epilogue stage (root,
 * elementwise, of the anchor's shape) and the anchor; or, when nothing reads the anchor, the anchor
 * itself and a local copy of it (cacheWrite). Undefined for any other reader pattern.
 */
export const tileStages = (s: S.Schedule, anchor: S.Stage): { schedule: S.Schedule; out: string; local: string } | undefined => {
  const readers = S.effectiveConsumers(s, anchor.name)
  if (readers.length === 0) {
    const w = S.cacheWrite(s, anchor.name, "local")
    return { schedule: w.schedule, out: anchor.name, local: w.stage }
  }
  if (readers.length > 1) return undefined
  const o = s.stages.get(readers[0])!
  if (o.attach.kind !== "root" || o.op.body.kind === "reduce" || o.op.shape.join() !== anchor.op.shape.join()) return undefined
  return { schedule: s, out: readers[0], local: anchor.name }
}

/** The knob's candidates (numbers: a split's factors). */
export const candidatesOf = (knobs: readonly Knob[], name: string): number[] => knobs.find((k) => k.name === name)!.candidates as number[]

/** The largest candidate ≤ max (1 when none is). */
export const largest = (xs: readonly number[], max: number): number => [...xs].reverse().find((d) => d <= max) ?? 1

/**
 * A register tile of vector accumulators for `lanes`: `cols` (tile positions: output columns,
 * Winograd tiles) × `blocks` (output channel blocks, at most `blockCap`), from the knobs'
 * candidates. AVX2's 16 vector registers under gcc: one channel block across 7–8 positions (7–8
 * accumulators, the weight vector loaded once per tap) ran at 82–84% of peak in a microkernel;
 * two or more blocks let gcc reload the weights per FMA (1.5 loads per FMA on two load ports:
 * 65–70%), and 14 accumulators spill (45–55%) in a 3×3 conv's tile (a 1×1 conv's fit: see
 * `defaults`). Otherwise 16 accumulators of AVX-512's 32, 8 of SSE / SIMD128's 16, half the
 * budget in positions. `budget` is undefined on AVX2.
 */
export const registerTile = (lanes: number, cols: readonly number[], blocks: readonly number[], blockCap = Infinity): { cols: number; blocks: number; budget?: number } => {
  if (lanes === 8) return { cols: largest(cols, 8), blocks: 1 }
  const budget = lanes >= 16 ? 16 : 8
  const c = largest(cols, budget / 2)
  return { cols: c, blocks: largest(blocks, Math.min(blockCap, Math.max(1, Math.floor(budget / c)))), budget }
}

/**
 * Whether a reduction runs along its inputs' innermost (contiguous) dimension: every read that
 * depends on a reduce variable has one as its last index (a softmax's sum over the last axis, a
 * ReduceSum or LayerNorm's statistics over it) — its sum vectorizes along the reduce loop, which
 * must stay innermost. A matrix product (B[k, j]) or a convolution (x[…, w + kw]) is not one.
 */
export const innerReduction = (st: S.Stage): boolean => {
  const body = st.op.body
  if (body.kind !== "reduce") return false
  const red = new Set(body.axes.map((a) => a.var.name))
  const reads = collect(body.source, (x) => x.kind === "read") as Extract<Expr, { kind: "read" }>[]
  const dependent = reads.filter((r) => r.indices.some((x) => [...freeVars(x)].some((n) => red.has(n))))
  return dependent.length > 0 && dependent.every((r) => {
    const last = r.indices[r.indices.length - 1]
    return last.kind === "var" && red.has(last.name)
  })
}
