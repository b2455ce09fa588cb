// SqueezeNet 1.1 with torchvision's structure: fire modules (1×1 squeeze, then 1×1 and 3×3
// expands concatenated on channels), ceil-mode max pools, a 1×1 conv classifier.
import { attr } from "../ast/graph/attrs.js"
import type { Graph } from "../ast/graph/graph.js"
import { conv, imageInput, logits, maxPool, NetBuilder, poolFlatten, relu } from "./builder.js"

export const squeezenet11 = (seed: number): Graph => {
  const b = new NetBuilder(seed, 13)
  const fire = (x: string, i: number, cin: number, sq: number, e1: number, e3: number): string => {
    const p = `features.${i}`
    const s = relu(b, conv(b, x, `${p}.squeeze`, { cin, cout: sq, k: 1, bias: true }), `${p}.squeeze_activation`)
    const a = relu(b, conv(b, s, `${p}.expand1x1`, { cin: sq, cout: e1, k: 1, bias: true }), `${p}.expand1x1_activation`)
    const c = relu(b, conv(b, s, `${p}.expand3x3`, { cin: sq, cout: e3, k: 3, pad: 1, bias: true }), `${p}.expand3x3_activation`)
    return b.op("Concat", [a, c], `${p}.cat`, { axis: attr.int(1) })
  }
  let x = imageInput(b)
  x = relu(b, conv(b, x, "features.0", { cin: 3, cout: 64, k: 3, stride: 2, bias: true }), "features.1")
  x = maxPool(b, x, "features.2", 3, 2, 0, true)
  x = fire(x, 3, 64, 16, 64, 64)
  x = fire(x, 4, 128, 16, 64, 64)
  x = maxPool(b, x, "features.5", 3, 2, 0, true)
  x = fire(x, 6, 128, 32, 128, 128)
  x = fire(x, 7, 256, 32, 128, 128)
  x = maxPool(b, x, "features.8", 3, 2, 0, true)
  x = fire(x, 9, 256, 48, 192, 192)
  x = fire(x, 10, 384, 48, 192, 192)
  x = fire(x, 11, 384, 64, 256, 256)
  x = fire(x, 12, 512, 64, 256, 256)
  x = relu(b, conv(b, x, "classifier.1", { cin: 512, cout: 1000, k: 1, bias: true, gain: 0.5 }), "classifier.2")
  poolFlatten(b, x, "classifier.3", "output")
  return b.build("squeezenet1.1", [logits("output")])
}
