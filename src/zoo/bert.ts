// BERT encoders on hidden states (no embeddings): `bert`, one small layer (hidden 256, 4 heads),
// and `bert-base`, BERT-base's 12 layers (hidden 768, 12 heads, intermediate 3072), both at
// sequence 128. Each layer is transformer.ts's post-norm BERT layer: attention spelled out in
// MatMul / Add / Reshape / Transpose / Softmax, LayerNormalization (opset 17), the Erf GELU.
import type { Graph } from "../ast/graph/graph.js"
import { NetBuilder } from "./builder.js"
import { bertLayer, type EncoderSpec } from "./transformer.js"

export const BERT = { seq: 128, hidden: 256, heads: 4, intermediate: 1024 } as const satisfies EncoderSpec

export const BERT_BASE = { seq: 128, hidden: 768, heads: 12, intermediate: 3072, layers: 12 } as const

const hiddenStates = (b: NetBuilder, s: EncoderSpec): string => b.input("input", { dtype: "float32", shape: [1, s.seq, s.hidden] })

const output = (s: EncoderSpec) => [{ name: "output", type: { dtype: "float32" as const, shape: [1, s.seq, s.hidden] } }]

/** One layer with its parameters unprefixed (`attention.self.query.weight`, …, `output.weight`). */
export const bert = (seed: number): Graph => {
  const b = new NetBuilder(seed, 17)
  bertLayer(b, hiddenStates(b, BERT), "", BERT, { norm: "output" })
  return b.build("bert", output(BERT))
}

/** BERT-base's encoder with Hugging Face's names (`encoder.layer.0.attention.self.query.weight`, …). */
export const bertBase = (seed: number): Graph => {
  const b = new NetBuilder(seed, 17)
  let x = hiddenStates(b, BERT_BASE)
  for (let i = 0; i < BERT_BASE.layers; i++) x = bertLayer(b, x, `encoder.layer.${i}.`, BERT_BASE, i === BERT_BASE.layers - 1 ? { out: "output" } : {})
  return b.build("bert-base", output(BERT_BASE))
}
