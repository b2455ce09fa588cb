// ResNet-18 and ResNet-50 with torchvision's structure (v1.5: the bottleneck strides in its 3×3
// conv) and parameter names. The last batch norm of every residual branch has a smaller scale,
// like zero_init_residual's spirit, so activations stay O(1) through the depth.
import type { Graph } from "../ast/graph/graph.js"
import { add, batchNorm, conv, imageInput, linear, logits, maxPool, NetBuilder, poolFlatten, relu } from "./builder.js"

/** Scale of the last batch norm in each residual branch. */
const BRANCH_GAIN = 0.4

const downsample = (b: NetBuilder, x: string, p: string, cin: number, cout: number, stride: number): string =>
  batchNorm(b, conv(b, x, `${p}.downsample.0`, { cin, cout, k: 1, stride }), `${p}.downsample.1`, cout)

const basicBlock = (b: NetBuilder, x: string, p: string, cin: number, c: number, stride: number): string => {
  let y = relu(b, batchNorm(b, conv(b, x, `${p}.conv1`, { cin, cout: c, k: 3, stride, pad: 1 }), `${p}.bn1`, c), `${p}.relu1`)
  y = batchNorm(b, conv(b, y, `${p}.conv2`, { cin: c, cout: c, k: 3, pad: 1 }), `${p}.bn2`, c, BRANCH_GAIN)
  const id = stride !== 1 || cin !== c ? downsample(b, x, p, cin, c, stride) : x
  return relu(b, add(b, y, id, `${p}.add`), `${p}.relu2`)
}

const bottleneck = (b: NetBuilder, x: string, p: string, cin: number, c: number, stride: number): string => {
  const cout = c * 4
  let y = relu(b, batchNorm(b, conv(b, x, `${p}.conv1`, { cin, cout: c, k: 1 }), `${p}.bn1`, c), `${p}.relu1`)
  y = relu(b, batchNorm(b, conv(b, y, `${p}.conv2`, { cin: c, cout: c, k: 3, stride, pad: 1 }), `${p}.bn2`, c), `${p}.relu2`)
  y = batchNorm(b, conv(b, y, `${p}.conv3`, { cin: c, cout, k: 1 }), `${p}.bn3`, cout, BRANCH_GAIN)
  const id = stride !== 1 || cin !== cout ? downsample(b, x, p, cin, cout, stride) : x
  return relu(b, add(b, y, id, `${p}.add`), `${p}.relu3`)
}

const resnet = (name: string, seed: number, kind: "basic" | "bottleneck", layers: readonly number[]): Graph => {
  const b = new NetBuilder(seed, 13)
  const block = kind === "basic" ? basicBlock : bottleneck
  const expansion = kind === "basic" ? 1 : 4
  let x = imageInput(b)
  x = relu(b, batchNorm(b, conv(b, x, "conv1", { cin: 3, cout: 64, k: 7, stride: 2, pad: 3 }), "bn1", 64), "relu")
  x = maxPool(b, x, "maxpool", 3, 2, 1)
  let cin = 64
  layers.forEach((n, i) => {
    const c = 64 << i
    for (let j = 0; j < n; j++) {
      x = block(b, x, `layer${i + 1}.${j}`, cin, c, j === 0 && i > 0 ? 2 : 1)
      cin = c * expansion
    }
  })
  x = poolFlatten(b, x, "avgpool")
  linear(b, x, "fc", cin, 1000, { gain: 1, out: "output" })
  return b.build(name, [logits("output")])
}

export const resnet18 = (seed: number): Graph => resnet("resnet18", seed, "basic", [2, 2, 2, 2])
export const resnet50 = (seed: number): Graph => resnet("resnet50", seed, "bottleneck", [3, 4, 6, 3])
