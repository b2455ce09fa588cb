// ViT-B/16 with torchvision's structure and names: a 16×16 stride-16 patch embedding (Conv), the
// patches flattened to a sequence (Reshape, Transpose), the class token concatenated in front
// (Concat), the position embedding added (Add), twelve pre-norm encoder blocks (transformer.ts),
// the final LayerNorm, the class token's row taken (Gather) and the head (Gemm). Opset 17.
import { attr } from "../ast/graph/attrs.js"
import type { Graph } from "../ast/graph/graph.js"
import { fromArray } from "../ast/graph/tensor.js"
import { conv, imageInput, linear, logits, NetBuilder } from "./builder.js"
import { layerNorm, shape, transpose } from "./layers.js"
import { vitLayer, type EncoderSpec } from "./transformer.js"

const PATCH = 16
const PATCHES = (224 / PATCH) ** 2
export const VIT_B16 = { seq: PATCHES + 1, hidden: 768, heads: 12, intermediate: 3072, layers: 12 } as const satisfies EncoderSpec & { layers: number }

export const vitB16 = (seed: number): Graph => {
  const { hidden, seq, layers } = VIT_B16
  const b = new NetBuilder(seed, 17)
  let x = conv(b, imageInput(b), "conv_proj", { cin: 3, cout: hidden, k: PATCH, stride: PATCH, bias: true })
  x = b.op("Reshape", [x, shape(b, "patches_shape", [1, hidden, PATCHES])], "patches")
  x = transpose(b, x, "patches.transpose", [0, 2, 1])
  x = b.op("Concat", [b.normal("class_token", [1, 1, hidden], 0.02), x], "tokens", { axis: attr.int(1) })
  x = b.op("Add", [x, b.normal("encoder.pos_embedding", [1, seq, hidden], 0.02)], "encoder.embedded")
  for (let i = 0; i < layers; i++) x = vitLayer(b, x, `encoder.layers.encoder_layer_${i}.`, VIT_B16)
  x = layerNorm(b, x, "encoder.ln", hidden, 1e-6)
  x = b.op("Gather", [x, b.constant("class_index", fromArray("int64", [], [0]))], "class_row", { axis: attr.int(1) })
  linear(b, x, "heads.head", hidden, 1000, { gain: 1, out: "output" })
  return b.build("vit-b16", [logits("output")])
}
