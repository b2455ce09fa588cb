// Transformer ops: Attention (opset 23/24: 3-D or 4-D inputs, multi-head / grouped-query,
// attn_mask, is_causal, KV cache, softcap, nonpad_kv_seqlen, the qk_matmul_output modes),
// RotaryEmbedding (opset 23) and SwiGLU (opset 28). Arithmetic is in float64; outputs are stored
// in the input's dtype.
import { A, attrs } from "../attrs.js"
import { allocate, isFloat, isInteger } from "../dtype.js"
import { check, defineOp, fail, type Dim, type InferCtx, type ValueType } from "../op.js"
import { stridesOf, tensor, type Tensor } from "../tensor.js"
import { inputType, req } from "./util.js"

const showShape = (s: readonly Dim[]) => `[${s.join(", ")}]`

const addDims = (a: Dim, b: Dim, name: string): Dim => (typeof a === "number" && typeof b === "number" ? a + b : name)

// ---------------------------------------------------------------------------------------------
// Attention

const attentionAttrs = attrs({
  is_causal: A.int(0),
  kv_num_heads: A.optInt(),
  q_num_heads: A.optInt(),
  qk_matmul_output_mode: A.int(0),
  scale: A.optFloat(),
  softcap: A.float(0),
  softmax_precision: A.optInt(),
})
type AttentionAttrs = (typeof attentionAttrs)["_A"]

/** Q, K, V's sizes in the 4-D view [batch, heads, seq, head_size]. */
interface AttentionDims<D> {
  readonly batch: D
  readonly qHeads: D
  readonly kvHeads: D
  readonly qSeq: D
  readonly kvSeq: D
  readonly headSize: D
  readonly vHeadSize: D
  readonly rank: number
}

const divide = (n: Dim, heads: number | undefined, what: string, name: string): Dim => {
  if (heads === undefined) return fail(`3-D inputs need the ${what === "Q" ? "q_num_heads" : "kv_num_heads"} attribute`)
  check(heads > 0, () => `${what === "Q" ? "q_num_heads" : "kv_num_heads"} must be positive, got ${heads}`)
  if (typeof n !== "number") return name
  check(n % heads === 0, () => `${what}'s hidden size ${n} is not divisible by ${heads} heads`)
  return n / heads
}

const attentionDims = (q: readonly Dim[], k: readonly Dim[], v: readonly Dim[], a: AttentionAttrs, node: string): AttentionDims<Dim> => {
  check(q.length === k.length && k.length === v.length && (q.length === 3 || q.length === 4), () => `Q, K and V must all be 3-D or all 4-D, got ${showShape(q)}, ${showShape(k)}, ${showShape(v)}`)
  if (q.length === 4)
    return { batch: q[0], qHeads: q[1], kvHeads: k[1], qSeq: q[2], kvSeq: k[2], headSize: q[3], vHeadSize: v[3], rank: 4 }
  const qHeads = a.q_num_heads ?? fail("3-D inputs need the q_num_heads attribute")
  const kvHeads = a.kv_num_heads ?? fail("3-D inputs need the kv_num_heads attribute")
  return {
    batch: q[0],
    qHeads,
    kvHeads,
    qSeq: q[1],
    kvSeq: k[1],
    headSize: divide(q[2], qHeads, "Q", `${node}.head_size`),
    vHeadSize: divide(v[2], kvHeads, "V", `${node}.v_head_size`),
    rank: 3,
  }
}

const Attention = defineOp({
  attrs: attentionAttrs,
  inputs: [3, 7],
  outputs: [1, 4],
  kind: "opaque",
  infer: (ctx) => {
    const [Q, K, V] = [inputType(ctx, 0), inputType(ctx, 1), inputType(ctx, 2)]
    check(isFloat(Q.dtype), () => `Q must be a float tensor, got ${Q.dtype}`)
    const d = attentionDims(Q.shape, K.shape, V.shape, ctx.attrs, ctx.node)
    const past = ctx.inputs[4]
    const pastLen = past ? (past.shape.length === 4 ? past.shape[2] : fail(`past_key must be 4-D, got ${showShape(past.shape)}`)) : 0
    const total = addDims(pastLen, d.kvSeq, `${ctx.node}.total_sequence_length`)
    const Y = d.rank === 4 ? [d.batch, d.qHeads, d.qSeq, d.vHeadSize] : [d.batch, d.qSeq, typeof d.vHeadSize === "number" ? d.qHeads as number * d.vHeadSize : `${ctx.node}.out0.d2`]
    return [
      { dtype: Q.dtype, shape: Y },
      { dtype: K.dtype, shape: [d.batch, d.kvHeads, total, d.headSize] },
      { dtype: V.dtype, shape: [d.batch, d.kvHeads, total, d.vHeadSize] },
      { dtype: Q.dtype, shape: [d.batch, d.qHeads, d.qSeq, total] },
    ]
  },
  kernel: (ctx) => attention(ctx.inputs, ctx.attrs, ctx.node),
})

/** A [B, H, S, D] tensor from a 4-D input or a 3-D [B, S, H*D] one. */
const asHeads = (t: Tensor, heads: number, rank: number): Float64Array => {
  if (rank === 4) return Float64Array.from(t.data as ArrayLike<number>)
  const [B, S, HD] = t.shape
  const D = HD / heads
  const out = new Float64Array(t.data.length)
  for (let b = 0; b < B; b++)
    for (let s = 0; s < S; s++)
      for (let h = 0; h < heads; h++) {
        const src = ((b * S + s) * heads + h) * D
        const dst = ((b * heads + h) * S + s) * D
        for (let e = 0; e < D; e++) out[dst + e] = t.data[src + e]
      }
  return out
}

/** past ++ current along the sequence axis of [B, H, S, D] views. */
const withPast = (past: Tensor | undefined, cur: Float64Array, B: number, H: number, S: number, D: number, what: string): { data: Float64Array; len: number } => {
  if (!past) return { data: cur, len: S }
  const [pb, ph, P, pd] = past.shape
  check(past.shape.length === 4 && pb === B && ph === H && pd === D, () => `${what} has shape [${past.shape.join(", ")}], expected [${B}, ${H}, past_sequence_length, ${D}]`)
  const T = P + S
  const out = new Float64Array(B * H * T * D)
  for (let bh = 0; bh < B * H; bh++) {
    for (let i = 0; i < P * D; i++) out[bh * T * D + i] = past.data[bh * P * D + i]
    for (let i = 0; i < S * D; i++) out[bh * T * D + P * D + i] = cur[bh * S * D + i]
  }
  return { data: out, len: T }
}

/** For each (b, h, i), the offset of attn_mask's row broadcast to [B, Hq, Sq, *]; its length. */
const maskRows = (mask: Tensor, B: number, H: number, S: number, T: number): { row: (b: number, h: number, i: number) => number; len: number } => {
  const r = mask.shape.length
  check(r >= 2 && r <= 4, () => `attn_mask must have rank 2 to 4, got [${mask.shape.join(", ")}]`)
  const len = mask.shape[r - 1]
  check(len <= T, () => `attn_mask's last dim ${len} exceeds the total sequence length ${T}`)
  const target = [B, H, S]
  const strides = stridesOf(mask.shape)
  const eff = [0, 0, 0]
  for (let k = 0; k < r - 1; k++) {
    const axis = 3 - (r - 1) + k
    const n = mask.shape[k]
    check(n === 1 || n === target[axis], () => `attn_mask shape [${mask.shape.join(", ")}] does not broadcast to [${B}, ${H}, ${S}, ${T}]`)
    eff[axis] = n === 1 ? 0 : strides[k]
  }
  return { row: (b, h, i) => b * eff[0] + h * eff[1] + i * eff[2], len }
}

const attention = (inputs: readonly (Tensor | undefined)[], a: AttentionAttrs, node: string): Tensor[] => {
  const Q = req(inputs, 0, "Q")
  const K = req(inputs, 1, "K")
  const V = req(inputs, 2, "V")
  const [mask, pastK, pastV, nonpad] = [inputs[3], inputs[4], inputs[5], inputs[6]]
  check(isFloat(Q.dtype), () => `Q must be a float tensor, got ${Q.dtype}`)
  const d = attentionDims(Q.shape, K.shape, V.shape, a, node) as AttentionDims<number>
  const { batch: B, qHeads: Hq, kvHeads: Hkv, qSeq: Sq, kvSeq: Skv, headSize: D, vHeadSize: Dv } = d
  check(K.shape[0] === B && V.shape[0] === B, "Q, K and V must have the same batch size")
  check(d.rank === 3 || (K.shape[3] === D && V.shape[1] === Hkv && V.shape[2] === Skv), () => `K [${K.shape.join(", ")}] and V [${V.shape.join(", ")}] do not match Q [${Q.shape.join(", ")}]`)
  check(d.rank === 4 || (K.shape[2] === Hkv * D && V.shape[1] === Skv), () => `K [${K.shape.join(", ")}] and V [${V.shape.join(", ")}] do not match Q [${Q.shape.join(", ")}] with ${Hq}/${Hkv} heads`)
  check(Hkv > 0 && Hq % Hkv === 0, () => `q_num_heads ${Hq} is not a multiple of kv_num_heads ${Hkv}`)
  check((pastK === undefined) === (pastV === undefined), "past_key and past_value must be given together")
  const mode = a.qk_matmul_output_mode
  check(mode >= 0 && mode <= 3, () => `qk_matmul_output_mode must be 0..3, got ${mode}`)

  const q = asHeads(Q, Hq, d.rank)
  const kNew = asHeads(K, Hkv, d.rank)
  const vNew = asHeads(V, Hkv, d.rank)
  const { data: k, len: T } = withPast(pastK, kNew, B, Hkv, Skv, D, "past_key")
  const { data: v } = withPast(pastV, vNew, B, Hkv, Skv, Dv, "past_value")
  const P = T - Skv

  let padLens: number[] | undefined
  if (nonpad) {
    check(isInteger(nonpad.dtype) && nonpad.data.length === B, () => `nonpad_kv_seqlen must be an integer tensor of ${B} lengths, got ${nonpad.dtype}[${nonpad.shape.join(", ")}]`)
    padLens = Array.from(nonpad.data as ArrayLike<number>)
  }
  const m = mask ? maskRows(mask, B, Hq, Sq, T) : undefined
  const boolMask = mask?.dtype === "bool"
  // causal frontier: query i attends key j iff j <= i + offset(b)
  const causalOffset = (b: number) => (pastK ? P : padLens ? padLens[b] - Sq : 0)
  const scale = a.scale ?? 1 / Math.sqrt(D)
  const softcap = a.softcap

  const Y = new Float64Array(B * Hq * Sq * Dv)
  const qk = new Float64Array(B * Hq * Sq * T)
  const s = new Float64Array(T)
  const reps = Hq / Hkv
  for (let b = 0; b < B; b++)
    for (let h = 0; h < Hq; h++) {
      const kh = Math.floor(h / reps)
      const kBase = (b * Hkv + kh) * T
      for (let i = 0; i < Sq; i++) {
        const qo = ((b * Hq + h) * Sq + i) * D
        const row = ((b * Hq + h) * Sq + i) * T
        const mRow = m ? m.row(b, h, i) : 0
        for (let j = 0; j < T; j++) {
          const ko = (kBase + j) * D
          let acc = 0
          for (let e = 0; e < D; e++) acc += q[qo + e] * k[ko + e]
          let x = acc * scale
          if (mode === 0) qk[row + j] = x
          if (softcap > 0) x = softcap * Math.tanh(x / softcap)
          if (mode === 1) qk[row + j] = x
          let bias = 0
          if (m) {
            if (j >= m.len) bias = -Infinity
            else {
              const mv = mask!.data[mRow + j]
              bias = boolMask ? (mv ? 0 : -Infinity) : mv
            }
          }
          if (a.is_causal && j > i + causalOffset(b)) bias = -Infinity
          if (padLens && j >= padLens[b]) bias = -Infinity
          x += bias
          if (mode === 2) qk[row + j] = x
          s[j] = x
        }
        softmaxInPlace(s, T)
        if (mode === 3) for (let j = 0; j < T; j++) qk[row + j] = s[j]
        const yo = ((b * Hq + h) * Sq + i) * Dv
        for (let j = 0; j < T; j++) {
          const p = s[j]
          if (p === 0) continue
          const vo = (kBase + j) * Dv
          for (let e = 0; e < Dv; e++) Y[yo + e] += p * v[vo + e]
        }
      }
    }

  const yOut = allocate(Q.dtype, Y.length)
  if (d.rank === 4) yOut.set(Y)
  else
    for (let b = 0; b < B; b++)
      for (let h = 0; h < Hq; h++)
        for (let i = 0; i < Sq; i++)
          for (let e = 0; e < Dv; e++) yOut[((b * Sq + i) * Hq + h) * Dv + e] = Y[((b * Hq + h) * Sq + i) * Dv + e]
  const stored = (dtype: Tensor["dtype"], shape: number[], data: Float64Array) => {
    const out = allocate(dtype, data.length)
    out.set(data)
    return tensor(dtype, shape, out)
  }
  return [
    tensor(Q.dtype, d.rank === 4 ? [B, Hq, Sq, Dv] : [B, Sq, Hq * Dv], yOut),
    stored(K.dtype, [B, Hkv, T, D], k),
    stored(V.dtype, [B, Hkv, T, Dv], v),
    stored(Q.dtype, [B, Hq, Sq, T], qk),
  ]
}

/** Softmax of s[0..n); a row masked out entirely (all -inf) gives zeros. */
const softmaxInPlace = (s: Float64Array, n: number): void => {
  let max = -Infinity
  for (let j = 0; j < n; j++) if (s[j] > max) max = s[j]
  if (max === -Infinity) {
    s.fill(0, 0, n)
    return
  }
  let sum = 0
  for (let j = 0; j < n; j++) {
    const e = Math.exp(s[j] - max)
    s[j] = e
    sum += e
  }
  for (let j = 0; j < n; j++) s[j] /= sum
}

// ---------------------------------------------------------------------------------------------
// RotaryEmbedding

const rotaryAttrs = attrs({ interleaved: A.int(0), num_heads: A.int(0), rotary_embedding_dim: A.int(0) })

const RotaryEmbedding = defineOp({
  attrs: rotaryAttrs,
  inputs: [3, 4],
  outputs: [1, 1],
  kind: "opaque",
  infer: (ctx: InferCtx<(typeof rotaryAttrs)["_A"]>): ValueType[] => {
    const X = inputType(ctx, 0)
    check(X.shape.length === 3 || X.shape.length === 4, () => `input must be 3-D or 4-D, got ${showShape(X.shape)}`)
    check(X.shape.length === 4 || ctx.attrs.num_heads > 0, "a 3-D input needs the num_heads attribute")
    return [X]
  },
  kernel: (ctx) => {
    const X = req(ctx.inputs, 0, "input")
    const cos = req(ctx.inputs, 1, "cos_cache")
    const sin = req(ctx.inputs, 2, "sin_cache")
    const pos = ctx.inputs[3]
    const a = ctx.attrs
    check(isFloat(X.dtype), () => `input must be a float tensor, got ${X.dtype}`)
    // the [batch, seq, heads, head_size] view and its strides into X
    let B: number, S: number, H: number, D: number, st: number[]
    if (X.shape.length === 4) {
      ;[B, H, S, D] = X.shape
      st = [H * S * D, D, S * D] // b, s, h
    } else {
      check(X.shape.length === 3 && a.num_heads > 0, () => `input [${X.shape.join(", ")}] must be 4-D, or 3-D with num_heads`)
      ;[B, S] = X.shape
      H = a.num_heads
      check(X.shape[2] % H === 0, () => `hidden size ${X.shape[2]} is not divisible by num_heads ${H}`)
      D = X.shape[2] / H
      st = [S * H * D, H * D, D]
    }
    const rd = a.rotary_embedding_dim || D
    check(rd % 2 === 0 && rd <= D, () => `rotary_embedding_dim ${rd} must be even and at most the head size ${D}`)
    const half = rd / 2
    check(cos.shape[cos.shape.length - 1] === half && sin.shape[sin.shape.length - 1] === half, () => `cos_cache and sin_cache must end in rotary_embedding_dim / 2 = ${half}, got [${cos.shape.join(", ")}] and [${sin.shape.join(", ")}]`)
    check(cos.shape.length === sin.shape.length && cos.shape.every((n, i) => n === sin.shape[i]), "cos_cache and sin_cache must have the same shape")
    // the cache row of (b, s)
    let cacheRow: (b: number, s: number) => number
    if (pos) {
      check(isInteger(pos.dtype) && pos.shape.length === 2 && pos.shape[0] === B && pos.shape[1] === S, () => `position_ids must be an integer [${B}, ${S}] tensor, got ${pos.dtype}[${pos.shape.join(", ")}]`)
      check(cos.shape.length === 2, () => `with position_ids, cos_cache must be [max_position, ${half}], got [${cos.shape.join(", ")}]`)
      const max = cos.shape[0]
      cacheRow = (b, s) => {
        const p = pos.data[b * S + s]
        check(p >= 0 && p < max, () => `position id ${p} is outside the cache's ${max} positions`)
        return p * half
      }
    } else {
      check(cos.shape.length === 3 && cos.shape[0] === B && cos.shape[1] === S, () => `without position_ids, cos_cache must be [${B}, ${S}, ${half}], got [${cos.shape.join(", ")}]`)
      cacheRow = (b, s) => (b * S + s) * half
    }
    const out = allocate(X.dtype, X.data.length)
    out.set(X.data)
    const x = X.data
    for (let b = 0; b < B; b++)
      for (let s = 0; s < S; s++) {
        const cr = cacheRow(b, s)
        for (let h = 0; h < H; h++) {
          const base = b * st[0] + s * st[1] + h * st[2]
          for (let k = 0; k < half; k++) {
            const [i1, i2] = a.interleaved ? [base + 2 * k, base + 2 * k + 1] : [base + k, base + half + k]
            const c = cos.data[cr + k]
            const sn = sin.data[cr + k]
            const x1 = x[i1]
            const x2 = x[i2]
            out[i1] = c * x1 - sn * x2
            out[i2] = sn * x1 + c * x2
          }
        }
      }
    return [tensor(X.dtype, X.shape, out)]
  },
})

// ---------------------------------------------------------------------------------------------
// SwiGLU: Y = A * sigmoid(alpha * A) * B, A and B of one shape

const SwiGLU = defineOp({
  attrs: attrs({ alpha: A.float(1) }),
  inputs: [2, 2],
  outputs: [1, 1],
  kind: "elementwise",
  infer: (ctx) => {
    const [a, b] = [inputType(ctx, 0), inputType(ctx, 1)]
    check(isFloat(a.dtype) && a.dtype === b.dtype, () => `A and B must be float tensors of one dtype, got ${a.dtype} and ${b.dtype}`)
    check(a.shape.length === b.shape.length, () => `A ${showShape(a.shape)} and B ${showShape(b.shape)} must have the same shape`)
    return [{ dtype: a.dtype, shape: a.shape.map((n, i) => (typeof n === "number" ? n : b.shape[i])) }]
  },
  kernel: (ctx) => {
    const a = req(ctx.inputs, 0, "A")
    const b = req(ctx.inputs, 1, "B")
    check(a.shape.length === b.shape.length && a.shape.every((n, i) => n === b.shape[i]), () => `A [${a.shape.join(", ")}] and B [${b.shape.join(", ")}] must have the same shape (SwiGLU does not broadcast)`)
    const alpha = ctx.attrs.alpha
    const out = allocate(a.dtype, a.data.length)
    for (let i = 0; i < out.length; i++) {
      const x = a.data[i]
      out[i] = (x / (1 + Math.exp(-alpha * x))) * b.data[i]
    }
    return [tensor(a.dtype, a.shape, out)]
  },
})

export const attentionOps = { Attention, RotaryEmbedding, SwiGLU }
