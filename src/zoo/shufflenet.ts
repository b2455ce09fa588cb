// ShuffleNetV2 ×1.0 with torchvision's structure and names: units that split the channels in two
// (Split, as the exporter writes chunk), run one half through 1×1 → 3×3 depthwise → 1×1, concatenate,
// and shuffle the channels (Reshape → Transpose → Reshape); downsampling units run both branches
// on the whole input. The head averages with ReduceMean over H and W (opset 13).
import { attr } from "../ast/graph/attrs.js"
import type { Graph } from "../ast/graph/graph.js"
import { batchNorm, conv, imageInput, linear, logits, maxPool, NetBuilder, relu } from "./builder.js"
import { shape, transpose } from "./layers.js"

const REPEATS = [4, 8, 4]
const CHANNELS = [24, 116, 232, 464, 1024]

export const shufflenetv2 = (seed: number): Graph => {
  const b = new NetBuilder(seed, 13)
  /** conv `p.i`, batch norm `p.(i+1)`, then ReLU when asked */
  const cb = (x: string, p: string, i: number, cin: number, cout: number, k: number, stride = 1, group = 1, act = false): string => {
    const y = batchNorm(b, conv(b, x, `${p}.${i}`, { cin, cout, k, stride, pad: (k - 1) >> 1, group }), `${p}.${i + 1}`, cout)
    return act ? relu(b, y, `${p}.${i + 2}`) : y
  }
  /** branch2 (and branch1's tail): 1×1 + ReLU, 3×3 depthwise, 1×1 + ReLU */
  const branch2 = (x: string, p: string, cin: number, c: number, stride: number): string => {
    const y = cb(x, p, 0, cin, c, 1, 1, 1, true)
    return cb(cb(y, p, 3, c, c, 3, stride, c), p, 5, c, c, 1, 1, 1, true)
  }
  /** channel_shuffle(x, 2) on [1, c, h, w] */
  const shuffle = (x: string, p: string, c: number, hw: number): string => {
    const grouped = b.op("Reshape", [x, shape(b, `shuffle.${c}.grouped`, [1, 2, c / 2, hw, hw])], `${p}.shuffle.reshape`)
    const swapped = transpose(b, grouped, `${p}.shuffle.transpose`, [0, 2, 1, 3, 4])
    return b.op("Reshape", [swapped, shape(b, `shuffle.${c}.merged`, [1, -1, hw, hw])], `${p}.shuffle`)
  }

  let x = relu(b, batchNorm(b, conv(b, imageInput(b), "conv1.0", { cin: 3, cout: 24, k: 3, stride: 2, pad: 1 }), "conv1.1", 24), "conv1.2")
  x = maxPool(b, x, "maxpool", 3, 2, 1)
  let hw = 56
  let cin = CHANNELS[0]
  REPEATS.forEach((n, s) => {
    const c = CHANNELS[s + 1]
    const half = c / 2
    hw /= 2
    for (let i = 0; i < n; i++) {
      const p = `stage${s + 2}.${i}`
      let y: string
      if (i === 0) {
        const left = cb(cb(x, `${p}.branch1`, 0, cin, cin, 3, 2, cin), `${p}.branch1`, 2, cin, half, 1, 1, 1, true)
        y = b.op("Concat", [left, branch2(x, `${p}.branch2`, cin, half, 2)], `${p}.concat`, { axis: attr.int(1) })
      } else {
        const [x1, x2] = b.ops("Split", [x, shape(b, `split.${c}`, [half, half])], `${p}.split`, 2, { axis: attr.int(1) })
        y = b.op("Concat", [x1, branch2(x2, `${p}.branch2`, half, half, 1)], `${p}.concat`, { axis: attr.int(1) })
      }
      x = shuffle(y, p, c, hw)
      cin = c
    }
  })
  x = relu(b, batchNorm(b, conv(b, x, "conv5.0", { cin, cout: 1024, k: 1 }), "conv5.1", 1024), "conv5.2")
  x = b.op("ReduceMean", [x], "mean", { axes: attr.ints([2, 3]), keepdims: attr.int(0) })
  linear(b, x, "fc", 1024, 1000, { gain: 1, out: "output" })
  return b.build("shufflenetv2", [logits("output")])
}
