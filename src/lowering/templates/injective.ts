// The template of groups without a reduction anchor: parallel outer loops, the innermost vectorized
// — its trailing axes fused first where the innermost is not whole vectors and every read runs
// along them (so the fused loop reads and writes contiguously).
import * as S from "../../ast/schedule/schedule.js"
import { collect, type Expr, type Read } from "../../ast/te/expr.js"
import type { ComputeTensor } from "../../ast/te/tensor.js"
import { dataLeaves, divisors, parallelize } from "./common.js"
import type { Template } from "./template.js"

/** The vector widths (lanes) the `whole_vectors` knob may ask the innermost loop's trip count to be a multiple of. */
const WIDTHS = [1, 2, 4, 8, 16, 32, 64]

/**
 * How many trailing axes of `op` every read indexes by the op's own trailing variables, in order,
 * of a tensor whose trailing dims are the op's (an elementwise read: fused, those axes read it
 * contiguously) — through the computes inlined into it, whose reads must do the same.
 */
const elementwiseTrailing = (s: S.Schedule, op: ComputeTensor, k: number): number => {
  let n = k
  for (const e of collect(op.body, (x) => x.kind === "read")) {
    const r = e as Read
    const shape = r.tensor?.shape
    if (!shape) return 0
    let m = 0
    while (m < n && m < r.indices.length && shape[shape.length - 1 - m] === op.shape[op.shape.length - 1 - m] && isVar(r.indices[r.indices.length - 1 - m], op.axes[op.axes.length - 1 - m].var.name)) m++
    n = m
    const t = r.tensor
    if (n > 0 && t?.kind === "compute" && s.stages.get(t.name)?.attach.kind === "inline") n = Math.min(n, elementwiseTrailing(s, t, n))
    if (n === 0) return 0
  }
  return n
}
const isVar = (e: Expr, name: string): boolean => e.kind === "var" && e.name === name

/**
 * A root stage's trailing axes fused until the innermost loop's trip count is a multiple of
 * `width` (a vectorized loop of whole vectors, no scalar tail: ResNet-18 int8's residual
 * QLinearAdds ran rows of 56, 28, 14 and 7 bytes, most of them in the tail), where its reads allow
 * (elementwiseTrailing) — as few as make it a whole vector loop, else as few as make it whole
 * vectors; the fused loop split by the largest multiple of `width` that divides it
 * and fits one vector loop (S.MAX_VECTORIZED). Unchanged where the innermost is whole vectors
 * already, or no fusion makes it so.
 */
const fuseToWholeVectors = (s0: S.Schedule, name: string, width: number): S.Schedule => {
  const st = s0.stages.get(name)!
  const data = dataLeaves(st)
  if (st.attach.kind !== "root" || data.length < 2 || data.length !== st.leaf.length || data.some((a, k) => a !== st.root[k].name)) return s0
  const extents = data.map((a) => st.axes.get(a)!.extent)
  const innermost = extents[extents.length - 1]
  // (whole vectors past one vector loop: split by the largest multiple of `width` that divides it
  // and fits one, so the inner loop is vectorized — a transposed attention context merged back to
  // [rows, heads × 64], innermost 768, ran its flat index's quotients and remainders element by element)
  if (innermost % width === 0 && innermost > S.MAX_VECTORIZED) return S.split(s0, name, data[data.length - 1], { factor: Math.max(...divisors(innermost, S.MAX_VECTORIZED).filter((d) => d % width === 0)) }).schedule
  if (innermost % width === 0) return s0
  const most = elementwiseTrailing(s0, st.op, data.length)
  // the fewest trailing axes whose product is a whole vector loop (the most whole vectors one takes),
  // else the fewest whose product is whole vectors
  const fewest = (unit: number): number => {
    for (let m = 2; m <= most; m++) if (extents.slice(-m).reduce((p, d) => p * d, 1) % unit === 0) return m
    return 0
  }
  const k = fewest(Math.floor(S.MAX_VECTORIZED / width) * width) || fewest(width)
  if (k === 0) return s0
  let s = s0
  let cur = data[data.length - 1]
  for (let m = 2; m <= k; m++) {
    const f = S.fuse(s, name, data[data.length - m], cur)
    s = f.schedule
    cur = f.fused
  }
  const total = extents.slice(-k).reduce((p, d) => p * d, 1)
  if (total <= S.MAX_VECTORIZED) return s
  const factor = Math.max(...divisors(total, S.MAX_VECTORIZED).filter((d) => d % width === 0))
  return S.split(s, name, cur, { factor }).schedule
}

/** Groups without a reduction anchor (elementwise, injective, layout transforms). */
export const injectiveTemplate: Template = {
  name: "injective",
  tunable: false,
  space: () => [
    { kind: "choice", name: "vectorize", candidates: [true, false] },
    { kind: "choice", name: "whole_vectors", candidates: WIDTHS },
  ],
  // the innermost loop's trip count fused up to whole vectors of the target's lanes
  defaults: (_k, target) => ({ vectorize: target.vectorLanes > 1, whole_vectors: WIDTHS.includes(target.vectorLanes) ? target.vectorLanes : 1 }),
  apply: (_outputs, base, config) => {
    let s = base
    const width = Number(config.whole_vectors ?? 1)
    if (config.vectorize && width > 1) for (const name of s.order) s = fuseToWholeVectors(s, name, width)
    return parallelize(s, !!config.vectorize)
  },
}
