// Transformer encoder layers as the exporter writes them: multi-head self-attention spelled out in
// MatMul / Add / Reshape / Transpose / Softmax, LayerNormalization (opset 17) and the Erf GELU.
// BERT's layer is post-norm with separate query / key / value projections (Hugging Face's names);
// ViT's is pre-norm with one packed in-projection split in three (torchvision's names).
import { attr } from "../ast/graph/attrs.js"
import type { NetBuilder } from "./builder.js"
import { dense, gelu, layerNorm, scalar, shape, transpose } from "./layers.js"

export interface EncoderSpec {
  readonly seq: number
  readonly hidden: number
  readonly heads: number
  readonly intermediate: number
}

/** The shape constants the heads' reshapes share, made once per model (before the first layer's weights). */
const headShapes = (b: NetBuilder, s: EncoderSpec) => ({
  heads: shape(b, "attention.heads_shape", [1, s.seq, s.heads, s.hidden / s.heads]),
  merged: shape(b, "attention.merged_shape", [1, s.seq, s.hidden]),
})

/**
 * Attention over [1, seq, hidden] queries, keys and values (`project(0 | 1 | 2)`): each
 * reshaped to heads ([1, heads, seq, dh]; keys [1, heads, dh, seq]), scores scaled by 1/√dh,
 * Softmax, the weighted values merged back to [1, seq, hidden].
 */
const attention = (b: NetBuilder, project: (i: 0 | 1 | 2) => string, p: string, s: EncoderSpec): string => {
  const dh = s.hidden / s.heads
  const shapes = headShapes(b, s)
  const toHeads = (v: string, name: string, perm: readonly number[]): string =>
    transpose(b, b.op("Reshape", [v, shapes.heads], `${name}.reshape`), `${name}.transpose`, perm)
  // each projection, then its reshape, in turn (the exporter's node order for BERT)
  const q = toHeads(project(0), `${p}.q`, [0, 2, 1, 3])
  const k = toHeads(project(1), `${p}.k`, [0, 2, 3, 1])
  const v = toHeads(project(2), `${p}.v`, [0, 2, 1, 3])
  const scores = b.op("Div", [b.op("MatMul", [q, k], `${p}.scores`), scalar(b, "attention.self.sqrt_dh", Math.sqrt(dh))], `${p}.scaled`)
  const probs = b.op("Softmax", [scores], `${p}.probs`, { axis: attr.int(-1) })
  const ctx = b.op("MatMul", [probs, v], `${p}.context`)
  return b.op("Reshape", [transpose(b, ctx, `${p}.context.transpose`, [0, 2, 1, 3]), shapes.merged], `${p}.context.reshape`)
}

const QKV = ["query", "key", "value"] as const

/**
 * One BERT encoder layer (post-norm) with Hugging Face's names under prefix `p` ("" or
 * "encoder.layer.3."); its last LayerNorm's parameters are named `norm`, its output `out`.
 */
export const bertLayer = (b: NetBuilder, x: string, p: string, s: EncoderSpec, last: { norm?: string; out?: string } = {}): string => {
  const { hidden, intermediate } = s
  const merged = attention(b, (i) => dense(b, x, `${p}attention.self.${QKV[i]}`, hidden, hidden), `${p}attention.self`, s)
  const attnOut = dense(b, merged, `${p}attention.output.dense`, hidden, hidden)
  const h = layerNorm(b, b.op("Add", [attnOut, x], `${p}attention.output.residual`), `${p}attention.output.LayerNorm`, hidden, 1e-12)
  const u = gelu(b, dense(b, h, `${p}intermediate.dense`, hidden, intermediate), `${p}intermediate.gelu`)
  const ffOut = dense(b, u, `${p}output.dense`, intermediate, hidden)
  const norm = last.norm ?? `${p}output.LayerNorm`
  return layerNorm(b, b.op("Add", [ffOut, h], `${p}output.residual`), norm, hidden, 1e-12, last.out ?? norm)
}

/**
 * One ViT encoder block (pre-norm) with torchvision's names under prefix `p`
 * ("encoder.layers.encoder_layer_3."): ln_1, self-attention whose packed in-projection
 * (in_proj, [hidden, 3·hidden]) is split into query, key and value, the residual, ln_2, the MLP
 * (mlp.0, GELU, mlp.3) and its residual. (The exporter writes nn.MultiheadAttention's packed
 * projection as reshapes and Gathers, and scales the queries before their MatMul; Split and the
 * scores' Div compute the same.)
 */
export const vitLayer = (b: NetBuilder, x: string, p: string, s: EncoderSpec): string => {
  const { hidden, intermediate } = s
  const a = `${p}self_attention`
  let qkv: string[] | undefined
  const project = (i: 0 | 1 | 2): string => {
    if (!qkv) {
      const packed = dense(b, layerNorm(b, x, `${p}ln_1`, hidden, 1e-6), `${a}.in_proj`, hidden, 3 * hidden)
      qkv = b.ops("Split", [packed, shape(b, "attention.qkv_split", [hidden, hidden, hidden])], `${a}.split`, 3, { axis: attr.int(-1) })
    }
    return qkv[i]
  }
  const merged = attention(b, project, a, s)
  const y = b.op("Add", [dense(b, merged, `${a}.out_proj`, hidden, hidden), x], `${p}residual1`)
  const u = gelu(b, dense(b, layerNorm(b, y, `${p}ln_2`, hidden, 1e-6), `${p}mlp.0`, hidden, intermediate), `${p}mlp.1`)
  return b.op("Add", [dense(b, u, `${p}mlp.3`, intermediate, hidden), y], `${p}residual2`)
}
