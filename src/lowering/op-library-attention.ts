// Attention (opset 23+) when only Y is asked for: 3-D or 4-D inputs, grouped-query heads, scale,
// softcap, attn_mask (bool or additive, broadcast, shorter than the keys), is_causal, a KV cache
// (past_key / past_value read before the new keys) and nonpad_kv_seqlen — as the reference
// (rnn-attention.ts) computes it: scores, then a row softmax (a row masked out entirely gives 0),
// then the weighted sum of V, all in float64.
import type { DType } from "../ast/graph/dtype.js"
import { add, c, call, cast, div, eq, floordiv, ge, gt, lt, max, min, mul, or, select, sub, type Expr } from "../ast/te/expr.js"
import { at, compute, maxReduce, reduceAxis, sum, type TeTensor } from "../ast/te/tensor.js"
import { inp, none, num, type OpCompute } from "./op-library-common.js"

const W: DType = "float64"
const NEG_INF = c(-Infinity, W)
/** a ∨ b, dropping a constant false. */
const bin2or = (a: Expr, b: Expr): Expr => (a.kind === "const" && a.value === 0 ? b : or(a, b))

export const attention: OpCompute = (ctx) => {
  if (ctx.node.outputs.slice(1).some((o) => o !== "")) return none("Attention's present_key / present_value / qk_matmul_output outputs")
  const [Q, K, V] = [0, 1, 2].map((k) => inp(ctx, k))
  const [mask, pastK, pastV, nonpad] = [3, 4, 5, 6].map((k) => ctx.inputs[k])
  const rank = Q.shape.length
  if (rank !== 3 && rank !== 4) return none(`Attention of rank ${rank}`)
  if (!pastK !== !pastV) return none("past_key without past_value")
  const B = Q.shape[0]
  const Hq = rank === 4 ? Q.shape[1] : num(ctx.attrs.q_num_heads, 0)
  const Hkv = rank === 4 ? K.shape[1] : num(ctx.attrs.kv_num_heads, 0)
  if (Hq <= 0 || Hkv <= 0 || Hq % Hkv !== 0) return none("Attention head counts")
  const Sq = rank === 4 ? Q.shape[2] : Q.shape[1]
  const Skv = rank === 4 ? K.shape[2] : K.shape[1]
  const D = rank === 4 ? Q.shape[3] : Q.shape[2] / Hq
  const Dv = rank === 4 ? V.shape[3] : V.shape[2] / Hkv
  const P = pastK ? pastK.shape[2] : 0
  const T = P + Skv
  const reps = Hq / Hkv
  const scale = (ctx.attrs.scale as number | undefined) ?? 1 / Math.sqrt(D)
  const softcap = num(ctx.attrs.softcap, 0)
  const causal = num(ctx.attrs.is_causal, 0) !== 0

  /** Element [b, head, s, e] of a [B, H, S, E] view of a 3-D [B, S, H·E] or 4-D input. */
  const view = (t: TeTensor, E: number, b: Expr, head: Expr, s: Expr, e: Expr): Expr =>
    rank === 4 ? at(t, b, head, s, e) : at(t, b, s, add(mul(head, c(E)), e))
  /** K or V at key position j: the cache first, then the new keys. */
  const keyAt = (cur: TeTensor, past: TeTensor | undefined, E: number, b: Expr, kh: Expr, j: Expr, e: Expr): Expr => {
    const fresh = cast(W, view(cur, E, b, kh, P ? max(sub(j, c(P)), c(0)) : j, e))
    return past ? select(lt(j, c(P)), cast(W, at(past, b, kh, min(j, c(P - 1)), e)), fresh) : fresh
  }
  const kvHead = (h: Expr) => (reps === 1 ? h : floordiv(h, c(reps)))

  const re = reduceAxis(D, `${ctx.name()}.e`)
  const dot = compute(ctx.name("qk"), [B, Hq, Sq, T], (b, h, i, j) =>
    sum(mul(cast(W, view(Q, D, b, h, i, re.var)), keyAt(K, pastK, D, b, kvHead(h), j, re.var)), [re]), W)

  const padLen = (b: Expr) => cast("int32", at(nonpad!, b))
  /** The masked, capped logit of query i against key j. */
  const logit = (b: Expr, h: Expr, i: Expr, j: Expr): Expr => {
    let x = mul(at(dot, b, h, i, j), c(scale, W))
    if (softcap > 0) x = mul(c(softcap, W), call("tanh", div(x, c(softcap, W))))
    let masked: Expr = c(0, "bool")
    if (mask) {
      const r = mask.shape.length
      if (r < 2 || r > 4) return none(`attn_mask of rank ${r}`)
      const len = mask.shape[r - 1]
      const target = [b, h, i]
      const idx = mask.shape.slice(0, -1).map((n, k) => (n === 1 ? c(0) : target[3 - (r - 1) + k]))
      const mv = at(mask, ...idx, min(j, c(len - 1)))
      const outside = ge(j, c(len))
      if (mask.dtype === "bool") masked = bin2or(masked, bin2or(outside, eq(mv, c(0, "bool"))))
      else {
        masked = bin2or(masked, outside)
        x = add(x, cast(W, mv))
      }
    }
    if (causal) {
      const offset = pastK ? c(P) : nonpad ? sub(padLen(b), c(Sq)) : c(0)
      masked = bin2or(masked, gt(j, add(i, offset)))
    }
    if (nonpad) masked = bin2or(masked, ge(j, padLen(b)))
    return select(masked, NEG_INF, x)
  }
  const rj1 = reduceAxis(T, `${ctx.name()}.j1`)
  const mx = compute(ctx.name("max"), [B, Hq, Sq], (b, h, i) => maxReduce(logit(b, h, i, rj1.var), [rj1]), W)
  const rj2 = reduceAxis(T, `${ctx.name()}.j2`)
  const weight = (b: Expr, h: Expr, i: Expr, j: Expr) => call("exp", sub(logit(b, h, i, j), at(mx, b, h, i)))
  const sm = compute(ctx.name("sum"), [B, Hq, Sq], (b, h, i) => sum(weight(b, h, i, rj2.var), [rj2]), W)
  const rj3 = reduceAxis(T, `${ctx.name()}.j3`)
  const y = compute(ctx.name("y"), [B, Hq, Sq, Dv], (b, h, i, e) => {
    const p = div(weight(b, h, i, rj3.var), at(sm, b, h, i))
    return sum(mul(p, keyAt(V, pastV, Dv, b, kvHead(h), rj3.var, e)), [rj3])
  }, W)
  const dtype = ctx.outputs[0].dtype
  /** A row masked out entirely (max −∞) gives zeros. */
  const yAt = (b: Expr, h: Expr, i: Expr, e: Expr) => cast(dtype, select(eq(at(mx, b, h, i), NEG_INF), c(0, W), at(y, b, h, i, e)))
  const out =
    rank === 4
      ? compute(ctx.name(), [B, Hq, Sq, Dv], (b, h, i, e) => yAt(b, h, i, e), dtype)
      : compute(ctx.name(), [B, Sq, Hq * Dv], (b, i, he) => yAt(b, floordiv(he, c(Dv)), i, sub(he, mul(floordiv(he, c(Dv)), c(Dv)))), dtype)
  return [dot, mx, sm, y, out]
}

/**
 * RotaryEmbedding: each pair (x1, x2) of the first rotary_embedding_dim features of a head turns
 * by the cached angle of its position: (c·x1 − s·x2, s·x1 + c·x2); pairs are (k, k + half) or,
 * interleaved, (2k, 2k + 1). The cache row comes from position_ids or from (batch, seq).
 */
export const rotaryEmbedding: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const cosC = inp(ctx, 1)
  const sinC = inp(ctx, 2)
  const pos = ctx.inputs[3]
  const rank = x.shape.length
  if (rank !== 3 && rank !== 4) return none(`RotaryEmbedding of rank ${rank}`)
  const H = rank === 4 ? x.shape[1] : num(ctx.attrs.num_heads, 0)
  if (H <= 0) return none("RotaryEmbedding without num_heads")
  const D = rank === 4 ? x.shape[3] : x.shape[2] / H
  const rd = num(ctx.attrs.rotary_embedding_dim, 0) || D
  const half = rd / 2
  const interleaved = num(ctx.attrs.interleaved, 0) !== 0
  const dtype = x.dtype
  return [
    compute(ctx.name(), x.shape, (...i) => {
      const last = i[rank - 1]
      const d = rank === 4 ? last : sub(last, mul(floordiv(last, c(D)), c(D)))
      const [b, s] = rank === 4 ? [i[0], i[2]] : [i[0], i[1]]
      const k = interleaved ? floordiv(d, c(2)) : select(lt(d, c(half)), d, sub(d, c(half)))
      const first = interleaved ? eq(sub(d, mul(floordiv(d, c(2)), c(2))), c(0)) : lt(d, c(half))
      const off = interleaved ? 1 : half
      // a position id clamped into the cache (the executor refuses one outside it before the kernel runs)
      const row = pos ? [min(max(cast("int32", at(pos, b, s)), c(0)), c(cosC.shape[0] - 1))] : [b, s]
      const cs = cast(W, at(cosC, ...row, k))
      const sn = cast(W, at(sinC, ...row, k))
      const read = (e: Expr) => cast(W, at(x, ...i.slice(0, -1), e))
      const v = read(last)
      // the partner index, clamped where this element is not rotated at all
      const partner = read(min(max(select(first, add(last, c(off)), sub(last, c(off))), c(0)), c(x.shape[rank - 1] - 1)))
      const rotated = select(first, sub(mul(cs, v), mul(sn, partner)), add(mul(sn, partner), mul(cs, v)))
      return cast(dtype, select(lt(d, c(rd)), rotated, v))
    }, dtype),
  ]
}

/** SwiGLU: A · sigmoid(α·A) · B. */
export const swiglu: OpCompute = (ctx) => {
  const a = inp(ctx, 0)
  const b = inp(ctx, 1)
  const alpha = num(ctx.attrs.alpha, 1)
  return [
    compute(ctx.name(), a.shape, (...i) => {
      const x = cast(W, at(a, ...i))
      return cast(a.dtype, mul(div(x, add(c(1, W), call("exp", mul(c(-alpha, W), x)))), cast(W, at(b, ...i))))
    }, a.dtype),
  ]
}
