// A multilayer perceptron for MNIST-sized input: 784-512-256-10, Gemm + Relu, Softmax.
import { attr } from "../ast/graph/attrs.js"
import type { Graph } from "../ast/graph/graph.js"
import { linear, NetBuilder, relu } from "./builder.js"

export const mlp = (seed: number): Graph => {
  const b = new NetBuilder(seed, 13)
  const widths = [784, 512, 256, 10]
  let x = b.input("input", { dtype: "float32", shape: [1, widths[0]] })
  for (let i = 1; i < widths.length; i++) {
    x = linear(b, x, `fc${i}`, widths[i - 1], widths[i], { gain: i === widths.length - 1 ? 1 : Math.SQRT2 })
    if (i < widths.length - 1) x = relu(b, x, `relu${i}`)
  }
  b.op("Softmax", [x], "output", { axis: attr.int(-1) })
  return b.build("mlp", [{ name: "output", type: { dtype: "float32", shape: [1, 10] } }])
}
