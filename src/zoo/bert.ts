// One BERT-style encoder layer (post-norm, as in BERT): multi-head self-attention spelled out in
// MatMul / Add / Reshape / Transpose / Softmax, residuals with LayerNormalization (opset 17),
// and a feed-forward block with the exact, Erf-based GELU.
import { attr } from "../ast/graph/attrs.js"
import type { Graph } from "../ast/graph/graph.js"
import { f32, NetBuilder } from "./builder.js"

export const BERT = { seq: 128, hidden: 256, heads: 4, intermediate: 1024 } as const

export const bert = (seed: number): Graph => {
  const { seq, hidden, heads, intermediate } = BERT
  const dh = hidden / heads
  const b = new NetBuilder(seed, 17)
  const x = b.input("input", { dtype: "float32", shape: [1, seq, hidden] })

  /** x @ W + bias with W [fin, fout] (how PyTorch exports Linear on 3-D input). */
  const dense = (v: string, name: string, fin: number, fout: number, gain = 1): string => {
    const w = b.normal(`${name}.weight`, [fin, fout], gain / Math.sqrt(fin))
    const bias = b.uniform(`${name}.bias`, [fout], -0.1, 0.1)
    return b.op("Add", [b.op("MatMul", [v, w], `${name}.matmul`), bias], name)
  }
  const layerNorm = (v: string, name: string): string => {
    const scale = b.uniform(`${name}.weight`, [hidden], 0.8, 1.2)
    const bias = b.normal(`${name}.bias`, [hidden], 0.05)
    return b.op("LayerNormalization", [v, scale, bias], name, { axis: attr.int(-1), epsilon: attr.float(f32(1e-12)) })
  }

  const headsShape = b.int64s("attention.heads_shape", [1, seq, heads, dh])
  const mergedShape = b.int64s("attention.merged_shape", [1, seq, hidden])
  /** [1, seq, hidden] → [1, heads, seq, dh] (or [1, heads, dh, seq] for keys) */
  const split = (v: string, name: string, perm: readonly number[]): string =>
    b.op("Transpose", [b.op("Reshape", [v, headsShape], `${name}.reshape`)], `${name}.transpose`, { perm: attr.ints(perm) })

  const q = split(dense(x, "attention.self.query", hidden, hidden), "attention.self.q", [0, 2, 1, 3])
  const k = split(dense(x, "attention.self.key", hidden, hidden), "attention.self.k", [0, 2, 3, 1])
  const v = split(dense(x, "attention.self.value", hidden, hidden), "attention.self.v", [0, 2, 1, 3])
  const scores = b.op("Div", [b.op("MatMul", [q, k], "attention.self.scores"), b.scalarF32("attention.self.sqrt_dh", Math.sqrt(dh))], "attention.self.scaled")
  const probs = b.op("Softmax", [scores], "attention.self.probs", { axis: attr.int(-1) })
  const ctx = b.op("MatMul", [probs, v], "attention.self.context")
  const merged = b.op(
    "Reshape",
    [b.op("Transpose", [ctx], "attention.self.context.transpose", { perm: attr.ints([0, 2, 1, 3]) }), mergedShape],
    "attention.self.context.reshape",
  )
  const attnOut = dense(merged, "attention.output.dense", hidden, hidden)
  const h = layerNorm(b.op("Add", [attnOut, x], "attention.output.residual"), "attention.output.LayerNorm")

  // GELU(u) = u · 0.5 · (1 + erf(u / √2))
  const u = dense(h, "intermediate.dense", hidden, intermediate)
  const erf = b.op("Erf", [b.op("Div", [u, b.scalarF32("gelu.sqrt2", Math.SQRT2)], "intermediate.gelu.div")], "intermediate.gelu.erf")
  const onePlus = b.op("Add", [erf, b.scalarF32("gelu.one", 1)], "intermediate.gelu.add")
  const gelu = b.op("Mul", [b.op("Mul", [u, onePlus], "intermediate.gelu.mul"), b.scalarF32("gelu.half", 0.5)], "intermediate.gelu")

  const ffOut = dense(gelu, "output.dense", intermediate, hidden)
  layerNorm(b.op("Add", [ffOut, h], "output.residual"), "output")
  return b.build("bert", [{ name: "output", type: { dtype: "float32", shape: [1, seq, hidden] } }])
}
