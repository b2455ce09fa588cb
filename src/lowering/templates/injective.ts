// The template of groups without a reduction anchor: parallel outer loops, the innermost vectorized
// — its trailing axes fused first where the innermost is not whole vectors and every read runs
// along them (so the fused loop reads and writes contiguously).
import * as S from "../../ast/schedule/schedule.js"
import { evalExpr } from "../../ast/te/eval-expr.js"
import { collect, mapExpr, substitute, type Expr, type Read } from "../../ast/te/expr.js"
import type { ComputeTensor } from "../../ast/te/tensor.js"
import { dataLeaves, divisors, PARALLEL_MIN_EXTENT, parallelize } from "./common.js"
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

/**
 * The reads of `op`'s body from memory — the inline stages it reads substituted by their bodies —
 * each with its tensor's shape: what its loops load.
 */
const memoryReads = (s: S.Schedule, op: ComputeTensor): { readonly shape: readonly number[]; readonly indices: readonly Expr[] }[] => {
  const inlined = (body: Expr): Expr =>
    mapExpr(body, (e) => {
      if (e.kind !== "read") return undefined
      const src = s.stages.get(e.source)
      if (!src || src.attach.kind !== "inline") return undefined
      return inlined(substitute(src.op.body, new Map(src.op.axes.map((a, k) => [a.var.name, e.indices[k]]))))
    })
  return collect(inlined(op.body), (x) => x.kind === "read").flatMap((e) => {
    const r = e as Read
    return r.tensor ? [{ shape: r.tensor.shape, indices: r.indices }] : []
  })
}

/**
 * Elements between the addresses a read loads at a point and with `axis` one further (row-major),
 * the same at each of `points`; else (a stride that changes: a guard's edge, a blocked layout's
 * block, a row of a flattened index) undefined.
 */
const strideAlong = (read: { readonly shape: readonly number[]; readonly indices: readonly Expr[] }, points: readonly ReadonlyMap<string, number>[], axis: string): number | undefined => {
  const address = (env: ReadonlyMap<string, number>) => read.indices.reduce((a, e, k) => a * read.shape[k] + evalExpr(e, env, () => NaN), 0)
  const strides = points.map((at) => address(new Map(at).set(axis, at.get(axis)! + 1)) - address(at))
  return strides.every((d) => Number.isFinite(d) && d === strides[0]) ? strides[0] : undefined
}

/**
 * A transpose tiled (the blocked-transpose rule): a root stage, its loops its root axes, whose
 * innermost axis j, longer than a vector, reads some tensor `lanes` elements or more apart (a line a
 * lane) where another axis a reads it contiguously, and reads nothing contiguously along j, has j split by the lanes and a by the most up
 * to them that divide it, a's placed inside j's tiles — each block reads `lanes` lines of the input
 * whole and writes a's rows, a vector each.
 * Untiled, the innermost loop reads a line per element and a row of them evicts the next row's:
 * the attention key's transpose [128, 12·64] → [12, 64, 128] read lines 3 KiB apart, 128 of them
 * in 4 of the L1's sets (BERT-base, Zen 5: 0.116 → 0.021 ms in C).
 */
const blockTranspose = (s0: S.Schedule, name: string, lanes: number): S.Schedule => {
  const st = s0.stages.get(name)!
  const data = dataLeaves(st)
  if (st.attach.kind !== "root" || st.op.body.kind === "reduce" || data.length < 2 || st.relations.length || data.length !== st.leaf.length) return s0
  const j = data[data.length - 1]
  const extent = (a: string) => st.axes.get(a)!.extent
  // (an innermost axis of one vector is a block already: the loop around it walks its lines along)
  if (extent(j) <= lanes) return s0
  // (two points inside the loops: one step short of the end, and the middle)
  const points = [1, 0.5].map((f) => new Map(st.op.axes.map((x) => [x.var.name, Math.max(0, Math.min(Math.floor((x.dom.extent - 2) * f), x.dom.extent - 2))] as const)))
  const reads = memoryReads(s0, st.op)
  const a = data.slice(0, -1).reverse().find((x) => extent(x) >= lanes && reads.some((r) => strideAlong(r, points, x) === 1 && Math.abs(strideAlong(r, points, j) ?? 0) >= lanes))
  // (only where no read runs along j: an elementwise op with one operand across the rows —
  // ConvNeXt-T's layer scale and residual, the residual channels-first — ran its contiguous
  // operands and stores in rows of 16 instead of 96 and took 1.8× as long)
  if (!a || reads.some((r) => strideAlong(r, points, j) === 1)) return s0
  // a's lanes: the most up to a vector that divide it, half a vector at least (a cut tile of a would
  // guard every iteration of the parallel loop it is fused into: ConvNeXt-T's 56- and 28-wide rows
  // take 14, not 16 and a tail)
  const rows = largestDivisor(extent(a), lanes)
  if (rows < 2 || 2 * rows < lanes) return s0
  const outer = data.filter((x) => x !== a && x !== j)
  const before = outer.filter((x) => data.indexOf(x) < data.indexOf(a))
  const after = outer.filter((x) => data.indexOf(x) > data.indexOf(a))
  // (j's tiles cut short only where the parallel loop stops before them: its last tile is then
  // peeled, not guarded in every iteration)
  const parallelBefore = [...before, a, ...after].reduce((p, x) => p * (x === a ? extent(a) / rows : extent(x)), 1)
  if (extent(j) % lanes !== 0 && parallelBefore < PARALLEL_MIN_EXTENT) return s0
  const sa = S.split(s0, name, a, { factor: rows })
  const sj = S.split(sa.schedule, name, j, { factor: lanes })
  return S.reorder(sj.schedule, name, [...before, sa.outer, ...after, sj.outer, sa.inner, sj.inner])
}

/** The largest divisor of n that is at most `max`. */
const largestDivisor = (n: number, max: number): number => Math.max(...divisors(n, max))

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
    if (config.vectorize && width > 1)
      for (const name of s.order) {
        const blocked = blockTranspose(s, name, width)
        s = blocked !== s ? blocked : fuseToWholeVectors(s, name, width)
      }
    return parallelize(s, !!config.vectorize)
  },
}
