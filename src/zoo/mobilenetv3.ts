// MobileNetV3-Large with torchvision's structure and names: inverted residual blocks with ReLU or
// HardSwish (opset 14's op), squeeze-excite with a ReLU and a HardSigmoid gate (α = 1/6, β = ½,
// PyTorch's Hardsigmoid) where the paper has one; batch norm ε 1e-3 as torchvision sets it.
import type { Graph } from "../ast/graph/graph.js"
import { add, imageInput, linear, logits, NetBuilder, poolFlatten } from "./builder.js"
import { convBnAct, hardSigmoid, hardSwish, reluAct, squeezeExcite, type Act } from "./layers.js"

/** (kernel, expanded, out, squeeze-excite, HardSwish, stride) per block; the input is the last block's out. */
const BLOCKS: readonly (readonly [number, number, number, boolean, boolean, number])[] = [
  [3, 16, 16, false, false, 1],
  [3, 64, 24, false, false, 2],
  [3, 72, 24, false, false, 1],
  [5, 72, 40, true, false, 2],
  [5, 120, 40, true, false, 1],
  [5, 120, 40, true, false, 1],
  [3, 240, 80, false, true, 2],
  [3, 200, 80, false, true, 1],
  [3, 184, 80, false, true, 1],
  [3, 184, 80, false, true, 1],
  [3, 480, 112, true, true, 1],
  [3, 672, 112, true, true, 1],
  [5, 672, 160, true, true, 2],
  [5, 960, 160, true, true, 1],
  [5, 960, 160, true, true, 1],
]

const EPS = 1e-3

/** Scale of the projection's batch norm in blocks with a residual. */
const BRANCH_GAIN = 0.5

/** torchvision's _make_divisible(v, 8): the nearest multiple of 8, never 10% below v. */
const divisible8 = (v: number): number => {
  const n = Math.max(8, Math.floor((v + 4) / 8) * 8)
  return n < 0.9 * v ? n + 8 : n
}

export const mobilenetv3 = (seed: number): Graph => {
  const b = new NetBuilder(seed, 14)
  const eps = { eps: EPS }
  let x = convBnAct(b, imageInput(b), "features.0", { cin: 3, cout: 16, k: 3, stride: 2 }, hardSwish, eps)
  let cin = 16
  BLOCKS.forEach(([k, hidden, c, se, hs, stride], i) => {
    const p = `features.${i + 1}.block`
    const act: Act = hs ? hardSwish : reluAct
    const residual = stride === 1 && cin === c
    let y = x
    let m = 0
    if (hidden !== cin) y = convBnAct(b, y, `${p}.${m++}`, { cin, cout: hidden, k: 1 }, act, eps)
    y = convBnAct(b, y, `${p}.${m++}`, { cin: hidden, cout: hidden, k, stride, group: hidden }, act, eps)
    if (se) y = squeezeExcite(b, y, `${p}.${m++}`, hidden, divisible8(hidden / 4), reluAct, hardSigmoid)
    y = convBnAct(b, y, `${p}.${m++}`, { cin: hidden, cout: c, k: 1 }, undefined, { ...eps, gain: residual ? BRANCH_GAIN : 1 })
    x = residual ? add(b, x, y, `features.${i + 1}.add`) : y
    cin = c
  })
  x = convBnAct(b, x, `features.${BLOCKS.length + 1}`, { cin, cout: 960, k: 1 }, hardSwish, eps)
  x = hardSwish(b, linear(b, poolFlatten(b, x, "avgpool"), "classifier.0", 960, 1280), "classifier.1")
  linear(b, x, "classifier.3", 1280, 1000, { gain: 1, out: "output" })
  return b.build("mobilenetv3", [logits("output")])
}
