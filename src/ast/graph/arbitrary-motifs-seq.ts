// Motifs of transformers and MLPs for the model-like generator, on tokens [B, T, D] and features
// [N, K]: an attention block (projections, heads, QKᵀ scaled, an optional additive mask, Softmax,
// ·V, output projection, residual), LayerNormalization (the op, or as exporters spell it out), an
// MLP with Gelu (the op or x·½·(1 + erf(x/√2))), Gemm + bias chains (transB, alpha, beta), MatMul
// + Add bias as exporters write a Linear, and token embeddings gathered by int64 ids.
import { attr } from "./attrs.js"
import { randomTensor, type GraphBuilder, type Val } from "./arbitrary-builder.js"
import { NORM_EPSILONS } from "./arbitrary-motifs-image.js"
import { fromArray, sizeOf } from "./tensor.js"

const scalar = (b: GraphBuilder, v: number) => b.constant(fromArray("float32", [], [v]))
const i64 = (b: GraphBuilder, xs: readonly number[], base = "shape") => b.constant(fromArray("int64", [xs.length], xs), base)

/** A Linear as exporters write it: MatMul by a [D, M] weight, then Add a [M] bias. */
export const linear = (b: GraphBuilder, x: Val, M: number, bias = true): Val => {
  const D = x.shape[x.shape.length - 1]
  const w = b.constant(randomTensor(b.rng, [D, M], -1 / Math.sqrt(D), 1 / Math.sqrt(D)), "w")
  const y = b.op1("MatMul", [x, w])
  return bias ? b.op1("Add", [y, b.constant(randomTensor(b.rng, [M], -0.5, 0.5), "b")]) : y
}

/** LayerNormalization over the last axis: the op (scale, bias) or ReduceMean/Sub/Pow/ReduceMean/Add ε/Sqrt/Div then Mul, Add. */
export const layerNorm = (b: GraphBuilder, x: Val): Val => {
  const { rng } = b
  const D = x.shape[x.shape.length - 1]
  const eps = rng.pick(NORM_EPSILONS)
  const scale = b.constant(randomTensor(rng, [D], 0.5, 1.5), "ln")
  const shift = b.constant(randomTensor(rng, [D], -0.5, 0.5), "ln")
  if (rng.next() < 0.6) return b.op1("LayerNormalization", [x, scale, shift], { axis: attr.int(-1), epsilon: attr.float(eps) })
  const axes = i64(b, [-1], "axes")
  const mean = b.op1("ReduceMean", [x, axes], { keepdims: attr.int(1) })
  const d = b.op1("Sub", [x, mean])
  const sq = rng.next() < 0.5 ? b.op1("Pow", [d, scalar(b, 2)]) : b.op1("Mul", [d, d])
  const v = b.op1("ReduceMean", [sq, axes], { keepdims: attr.int(1) })
  const n = b.op1("Div", [d, b.op1("Sqrt", [b.op1("Add", [v, scalar(b, eps)])])])
  return b.op1("Add", [b.op1("Mul", [n, scale]), shift])
}

/** Gelu as the op, or spelled out as x·½·(1 + erf(x/√2)); or Relu. */
const gelu = (b: GraphBuilder, x: Val): Val => {
  const r = b.rng.next()
  if (r < 0.35) return b.op1("Gelu", [x])
  if (r < 0.7) {
    const e = b.op1("Erf", [b.op1("Div", [x, scalar(b, Math.SQRT2)])])
    return b.op1("Mul", [b.op1("Mul", [x, b.op1("Add", [e, scalar(b, 1)])]), scalar(b, 0.5)])
  }
  return b.op1("Relu", [x])
}

/** Self-attention on [B, T, D] with 1 or 2 heads, then the residual Add and a LayerNorm. */
export const attention = (b: GraphBuilder, x: Val): Val => {
  const { rng } = b
  const [B, T, D] = x.shape
  const heads = D % 2 === 0 && rng.next() < 0.5 ? 2 : 1
  const dh = D / heads
  const split = (v: Val) => (heads === 1 ? v : b.op1("Transpose", [b.op1("Reshape", [v, i64(b, [B, T, heads, dh])])], { perm: attr.ints([0, 2, 1, 3]) }))
  const q = split(linear(b, x, D))
  const k = split(linear(b, x, D))
  const v = split(linear(b, x, D))
  const kt = b.op1("Transpose", [k], { perm: attr.ints(heads === 1 ? [0, 2, 1] : [0, 1, 3, 2]) })
  let s = b.op1("MatMul", [q, kt])
  s = rng.next() < 0.5 ? b.op1("Mul", [s, scalar(b, 1 / Math.sqrt(dh))]) : b.op1("Div", [s, scalar(b, Math.sqrt(dh))])
  if (rng.next() < 0.4) {
    // a causal mask, added: 0 on and below the diagonal, -10000 above
    const mask = Array.from({ length: T * T }, (_, i) => (i % T > Math.floor(i / T) ? -10000 : 0))
    s = b.op1("Add", [s, b.constant(fromArray("float32", [T, T], mask), "mask")])
  }
  const p = b.op1("Softmax", [s], { axis: attr.int(-1) })
  let o = b.op1("MatMul", [p, v])
  if (heads > 1) o = b.op1("Reshape", [b.op1("Transpose", [o], { perm: attr.ints([0, 2, 1, 3]) }), i64(b, [B, T, D])])
  return layerNorm(b, b.op1("Add", [x, linear(b, o, D)]))
}

/** An MLP block: Linear (2D) → Gelu → Linear (D) → residual Add → LayerNorm. */
export const mlp = (b: GraphBuilder, x: Val): Val => {
  const D = x.shape[x.shape.length - 1]
  const h = gelu(b, linear(b, x, 2 * D))
  return layerNorm(b, b.op1("Add", [x, linear(b, h, D)]))
}

/** A Gemm with a bias of [M] or [1, M] (transB, alpha, beta drawn), then Relu or nothing; on [N, K]. */
export const gemm = (b: GraphBuilder, x: Val): Val => {
  const { rng } = b
  const K = x.shape[1]
  const M = rng.pick([8, 16, 24, 32, 5])
  const transB = rng.next() < 0.5
  const w = randomTensor(rng, transB ? [M, K] : [K, M], -1 / Math.sqrt(K), 1 / Math.sqrt(K))
  const bias = randomTensor(rng, rng.next() < 0.7 ? [M] : [1, M], -0.5, 0.5)
  const attrs = {
    ...(transB ? { transB: attr.int(1) } : {}),
    ...(rng.next() < 0.3 ? { alpha: attr.float(rng.pick([0.5, 2])) } : {}),
    ...(rng.next() < 0.3 ? { beta: attr.float(rng.pick([0.5, 2])) } : {}),
  }
  const y = b.op1("Gemm", [x, b.constant(w, "w"), b.constant(bias, "b")], attrs)
  return rng.next() < 0.6 ? b.op1("Relu", [y]) : y
}

/** Token features from int64 ids [B, T]: Gather from an embedding table [V, D], plus a position embedding [T, D]. */
export const embed = (b: GraphBuilder, B: number, T: number, D: number): Val => {
  const { rng } = b
  const V = rng.int(T, 3 * T)
  const ids = b.input("ids", fromArray("int64", [B, T], Array.from({ length: B * T }, () => rng.int(0, V - 1))))
  const e = b.op1("Gather", [b.constant(randomTensor(rng, [V, D]), "emb"), ids], { axis: attr.int(0) })
  return b.op1("Add", [e, b.constant(randomTensor(rng, [T, D], -0.5, 0.5), "pos")])
}

/** [B, T, D] → [B, D]: the mean over tokens (keepdims 0). */
export const poolTokens = (b: GraphBuilder, x: Val): Val => b.op1("ReduceMean", [x, i64(b, [1], "axes")], { keepdims: attr.int(0) })

export const fitsTokens = (x: Val): boolean => x.dtype === "float32" && x.shape.length === 3 && x.shape[2] <= 32 && sizeOf(x.shape) <= 2048
export const fitsFeatures = (x: Val): boolean => x.dtype === "float32" && x.shape.length === 2 && x.shape[1] <= 512
