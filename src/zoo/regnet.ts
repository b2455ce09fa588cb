// RegNetY-400MF with torchvision's structure and names: a 3×3 stem, then four stages of
// bottleneck blocks (1×1, 3×3 grouped conv with groups of 8 channels, squeeze-excite with a ReLU and
// a Sigmoid gate, 1×1), a projection shortcut where the shape changes, ReLU after the sum (opset 13).
import type { Graph } from "../ast/graph/graph.js"
import { add, imageInput, linear, logits, NetBuilder, poolFlatten, relu } from "./builder.js"
import { convBnAct, reluAct, sigmoid, squeezeExcite } from "./layers.js"

/** regnet_y_400mf: depth 16, w0 48, wa 27.89, wm 2.09, group width 8, SE ratio ¼, quantized by torchvision's BlockParams. */
const WIDTHS = [48, 104, 208, 440]
const DEPTHS = [1, 3, 6, 6]
const GROUP_WIDTH = 8
const SE_RATIO = 0.25

/** Scale of the last batch norm in each block's transform. */
const BRANCH_GAIN = 0.4

export const regnetY400mf = (seed: number): Graph => {
  const b = new NetBuilder(seed, 13)
  let x = convBnAct(b, imageInput(b), "stem", { cin: 3, cout: 32, k: 3, stride: 2 }, reluAct)
  let cin = 32
  WIDTHS.forEach((w, s) => {
    for (let i = 0; i < DEPTHS[s]; i++) {
      const p = `trunk_output.block${s + 1}.block${s + 1}-${i}`
      const stride = i === 0 ? 2 : 1
      const id = cin !== w || stride !== 1 ? convBnAct(b, x, `${p}.proj`, { cin, cout: w, k: 1, stride }) : x
      let y = convBnAct(b, x, `${p}.f.a`, { cin, cout: w, k: 1 }, reluAct)
      y = convBnAct(b, y, `${p}.f.b`, { cin: w, cout: w, k: 3, stride, group: w / GROUP_WIDTH }, reluAct)
      y = squeezeExcite(b, y, `${p}.f.se`, w, Math.round(SE_RATIO * cin), reluAct, sigmoid)
      y = convBnAct(b, y, `${p}.f.c`, { cin: w, cout: w, k: 1 }, undefined, { gain: BRANCH_GAIN })
      x = relu(b, add(b, id, y, `${p}.add`), `${p}.activation`)
      cin = w
    }
  })
  linear(b, poolFlatten(b, x, "avgpool"), "fc", cin, 1000, { gain: 1, out: "output" })
  return b.build("regnet", [logits("output")])
}
