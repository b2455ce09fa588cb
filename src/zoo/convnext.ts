// ConvNeXt-T with torchvision's structure and names: a 4×4 patchify stem, stages of CNBlocks
// (7×7 depthwise conv, then channels-last LayerNorm → Linear → GELU → Linear, a per-channel layer
// scale and the residual), LayerNorm2d + 2×2 stride-2 conv between stages. Channels-last is the
// exporter's: Transpose to NHWC, LayerNormalization over C (opset 17), MatMul + Add, Transpose back.
import { attr } from "../ast/graph/attrs.js"
import type { Graph } from "../ast/graph/graph.js"
import { add, conv, imageInput, linear, logits, NetBuilder } from "./builder.js"
import { dense, gelu, layerNorm, transpose } from "./layers.js"

const DIMS = [96, 192, 384, 768]
const DEPTHS = [3, 3, 9, 3]
const EPS = 1e-6

/** The layer scale's range: torchvision starts it at 1e-6; trained networks hold O(0.1–1) values, and such keep each block visible. */
const LAYER_SCALE: readonly [number, number] = [0.2, 0.5]

const NHWC = [0, 2, 3, 1]
const NCHW = [0, 3, 1, 2]

export const convnextTiny = (seed: number): Graph => {
  const b = new NetBuilder(seed, 17)
  /** torchvision's LayerNorm2d: permute to channels-last, LayerNorm over C, permute back. */
  const layerNorm2d = (x: string, p: string, c: number): string =>
    transpose(b, layerNorm(b, transpose(b, x, `${p}.to_nhwc`, NHWC), p, c, EPS, `${p}.norm`), `${p}.to_nchw`, NCHW)
  const block = (x: string, p: string, c: number): string => {
    let y = conv(b, x, `${p}.block.0`, { cin: c, cout: c, k: 7, pad: 3, group: c, bias: true })
    y = layerNorm(b, transpose(b, y, `${p}.block.1`, NHWC), `${p}.block.2`, c, EPS)
    y = dense(b, gelu(b, dense(b, y, `${p}.block.3`, c, 4 * c), `${p}.block.4`), `${p}.block.5`, 4 * c, c)
    y = transpose(b, y, `${p}.block.6`, NCHW)
    const scale = b.uniform(`${p}.layer_scale`, [c, 1, 1], ...LAYER_SCALE)
    return add(b, b.op("Mul", [scale, y], `${p}.scaled`), x, `${p}.add`)
  }

  let x = conv(b, imageInput(b), "features.0.0", { cin: 3, cout: DIMS[0], k: 4, stride: 4, bias: true })
  x = layerNorm2d(x, "features.0.1", DIMS[0])
  DIMS.forEach((c, s) => {
    if (s > 0) {
      const p = `features.${2 * s}`
      x = conv(b, layerNorm2d(x, `${p}.0`, DIMS[s - 1]), `${p}.1`, { cin: DIMS[s - 1], cout: c, k: 2, stride: 2, bias: true })
    }
    for (let i = 0; i < DEPTHS[s]; i++) x = block(x, `features.${2 * s + 1}.${i}`, c)
  })
  x = layerNorm2d(b.op("GlobalAveragePool", [x], "avgpool"), "classifier.0", DIMS[3])
  x = b.op("Flatten", [x], "classifier.1", { axis: attr.int(1) })
  linear(b, x, "classifier.2", DIMS[3], 1000, { gain: 1, out: "output" })
  return b.build("convnext-t", [logits("output")])
}
