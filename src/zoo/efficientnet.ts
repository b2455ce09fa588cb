// EfficientNet-B0 with torchvision's structure and names: MBConv blocks (1×1 expand, k×k
// depthwise, squeeze-excite with SiLU and a Sigmoid gate, 1×1 linear projection), SiLU as
// Sigmoid·Mul everywhere, as the exporter writes it (opset 13).
import type { Graph } from "../ast/graph/graph.js"
import { add, imageInput, linear, logits, NetBuilder, poolFlatten } from "./builder.js"
import { convBnAct, sigmoid, silu, squeezeExcite } from "./layers.js"

/** (expansion, kernel, first stride, output channels, repeats) per stage, as in torchvision. */
const STAGES: readonly (readonly [number, number, number, number, number])[] = [
  [1, 3, 1, 16, 1],
  [6, 3, 2, 24, 2],
  [6, 5, 2, 40, 2],
  [6, 3, 2, 80, 3],
  [6, 5, 1, 112, 3],
  [6, 5, 2, 192, 4],
  [6, 3, 1, 320, 1],
]

/** Scale of the projection's batch norm in blocks with a residual. */
const BRANCH_GAIN = 0.5

export const efficientnetB0 = (seed: number): Graph => {
  const b = new NetBuilder(seed, 13)
  let x = convBnAct(b, imageInput(b), "features.0", { cin: 3, cout: 32, k: 3, stride: 2 }, silu)
  let cin = 32
  STAGES.forEach(([t, k, s, c, n], i) => {
    for (let j = 0; j < n; j++) {
      const p = `features.${i + 1}.${j}.block`
      const stride = j === 0 ? s : 1
      const hidden = cin * t
      const residual = stride === 1 && cin === c
      let y = x
      let m = 0
      if (t !== 1) y = convBnAct(b, y, `${p}.${m++}`, { cin, cout: hidden, k: 1 }, silu)
      y = convBnAct(b, y, `${p}.${m++}`, { cin: hidden, cout: hidden, k, stride, group: hidden }, silu)
      y = squeezeExcite(b, y, `${p}.${m++}`, hidden, Math.max(1, cin >> 2), silu, sigmoid)
      y = convBnAct(b, y, `${p}.${m++}`, { cin: hidden, cout: c, k: 1 }, undefined, { gain: residual ? BRANCH_GAIN : 1 })
      x = residual ? add(b, x, y, `features.${i + 1}.${j}.add`) : y
      cin = c
    }
  })
  x = convBnAct(b, x, "features.8", { cin, cout: 1280, k: 1 }, silu)
  linear(b, poolFlatten(b, x, "avgpool"), "classifier.1", 1280, 1000, { gain: 1, out: "output" })
  return b.build("efficientnet-b0", [logits("output")])
}
