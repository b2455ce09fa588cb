// A small seeded CNN for the quantization pass's tests (test/quantize*.test.ts).
import { attr } from "../../src/ast/graph/attrs.js"
import { makeGraph, node, type Graph, type Node } from "../../src/ast/graph/graph.js"
import { tensor, type Tensor } from "../../src/ast/graph/tensor.js"
import { fillNormal, fillUniform } from "../../src/zoo/random.js"

const f32 = (shape: number[], seed: number, std = 0.3): Tensor => {
  const d = new Float32Array(shape.reduce((a, b) => a * b, 1))
  fillNormal(seed, d, 0, std)
  return tensor("float32", shape, d)
}
const positive = (shape: number[], seed: number): Tensor => {
  const d = new Float32Array(shape.reduce((a, b) => a * b, 1))
  fillUniform(seed, d, 0.5, 1.5)
  return tensor("float32", shape, d)
}

/**
 * conv(3→8)+BN+ReLU → MaxPool → conv(8→8)+bias → Add (residual with the pooled value) → ReLU →
 * GlobalAveragePool → Flatten → Gemm(8→5), plus `extra` nodes spliced in before the pool.
 */
export const smallCnn = (extra?: (x: string) => { nodes: Node[]; out: string }): Graph => {
  const inits = new Map<string, Tensor>([
    ["w1", f32([8, 3, 3, 3], 1)],
    ["bn.scale", positive([8], 2)],
    ["bn.bias", f32([8], 3, 0.1)],
    ["bn.mean", f32([8], 4, 0.1)],
    ["bn.var", positive([8], 5)],
    ["w2", f32([8, 8, 3, 3], 6, 0.15)],
    ["b2", f32([8], 7, 0.1)],
    ["fc.w", f32([5, 8], 8)],
    ["fc.b", f32([5], 9, 0.1)],
  ])
  const pads = { pads: attr.ints([1, 1, 1, 1]) }
  const nodes: Node[] = [
    node("Conv", ["x", "w1"], ["c1"], pads, "conv1"),
    node("BatchNormalization", ["c1", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["bn1"], {}, "bn1"),
    node("Relu", ["bn1"], ["r1"], {}, "relu1"),
  ]
  let x = "r1"
  if (extra) {
    const e = extra(x)
    nodes.push(...e.nodes)
    x = e.out
  }
  nodes.push(
    node("MaxPool", [x], ["p1"], { kernel_shape: attr.ints([2, 2]), strides: attr.ints([2, 2]) }, "pool1"),
    node("Conv", ["p1", "w2", "b2"], ["c2"], pads, "conv2"),
    node("Add", ["c2", "p1"], ["s"], {}, "add"),
    node("Relu", ["s"], ["r2"], {}, "relu2"),
    node("GlobalAveragePool", ["r2"], ["g"], {}, "gap"),
    node("Flatten", ["g"], ["f"], {}, "flatten"),
    node("Gemm", ["f", "fc.w", "fc.b"], ["y"], { transB: attr.int(1) }, "fc"),
  )
  return makeGraph({
    name: "small_cnn",
    opset: 13,
    inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 3, 8, 8] } }],
    outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 5] } }],
    initializers: inits,
    nodes,
  })
}

