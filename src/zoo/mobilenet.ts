// MobileNetV2 with torchvision's structure: inverted residual blocks (1×1 expand, 3×3 depthwise,
// 1×1 linear projection), ReLU6 as Clip(0, 6) with min/max inputs (opset 13).
import type { Graph } from "../ast/graph/graph.js"
import { add, batchNorm, conv, imageInput, linear, logits, NetBuilder, poolFlatten } from "./builder.js"

/** (expansion t, channels c, repeats n, first stride s), as in the paper's Table 2. */
const SETTINGS: readonly (readonly [number, number, number, number])[] = [
  [1, 16, 1, 1],
  [6, 24, 2, 2],
  [6, 32, 3, 2],
  [6, 64, 4, 2],
  [6, 96, 3, 1],
  [6, 160, 3, 2],
  [6, 320, 1, 1],
]

/** Scale of the projection's batch norm in blocks with a residual. */
const BRANCH_GAIN = 0.5

/** Scale of the batch norms before ReLU6: large enough that Clip(0, 6) saturates now and then. */
const ACT_GAIN = 1.4

export const mobilenetv2 = (seed: number): Graph => {
  const b = new NetBuilder(seed, 13)
  const zero = b.scalarF32("relu6.min", 0)
  const six = b.scalarF32("relu6.max", 6)
  const relu6 = (x: string, name: string): string => b.op("Clip", [x, zero, six], name)
  /** conv + bn + ReLU6, torchvision's Conv2dNormActivation at `features.i` */
  const cbr = (x: string, p: string, cin: number, cout: number, k: number, stride = 1, group = 1): string =>
    relu6(batchNorm(b, conv(b, x, `${p}.0`, { cin, cout, k, stride, pad: (k - 1) >> 1, group }), `${p}.1`, cout, ACT_GAIN), `${p}.2`)

  let x = imageInput(b)
  x = cbr(x, "features.0", 3, 32, 3, 2)
  let cin = 32
  let f = 1
  for (const [t, c, n, s] of SETTINGS)
    for (let i = 0; i < n; i++, f++) {
      const p = `features.${f}.conv`
      const stride = i === 0 ? s : 1
      const hidden = cin * t
      const residual = stride === 1 && cin === c
      let y = x
      let k = 0
      if (t !== 1) y = cbr(y, `${p}.${k++}`, cin, hidden, 1)
      y = cbr(y, `${p}.${k++}`, hidden, hidden, 3, stride, hidden)
      y = conv(b, y, `${p}.${k++}`, { cin: hidden, cout: c, k: 1 })
      y = batchNorm(b, y, `${p}.${k++}`, c, residual ? BRANCH_GAIN : 1)
      x = residual ? add(b, x, y, `features.${f}.add`) : y
      cin = c
    }
  x = cbr(x, `features.${f}`, cin, 1280, 1)
  x = poolFlatten(b, x, "avgpool")
  linear(b, x, "classifier.1", 1280, 1000, { gain: 1, out: "output" })
  return b.build("mobilenetv2", [logits("output")])
}
