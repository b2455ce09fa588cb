// A small graph of several compiled kernels in a chain, the executor's tests' (executor-fixed-args,
// executor-plan): x → Softmax → Transpose → Add(w) → Softmax → MatMul(x) → y, the input x read
// again by the last kernel and a constant w between them.
import { attr } from "../../src/ast/graph/attrs.js"
import { makeGraph, node, type Graph } from "../../src/ast/graph/graph.js"
import type { Tensor } from "../../src/ast/graph/tensor.js"

/** The chain, its constant `w` made by `rand`. */
export const kernelChain = (rand: (shape: number[]) => Tensor): Graph =>
  makeGraph({
    opset: 13,
    inputs: [{ name: "x", type: { dtype: "float32", shape: [6, 6] } }],
    outputs: [{ name: "y", type: { dtype: "float32", shape: [6, 6] } }],
    initializers: new Map([["w", rand([6, 6])]]),
    nodes: [
      node("Softmax", ["x"], ["s"], { axis: attr.int(1) }),
      node("Transpose", ["s"], ["t"], { perm: attr.ints([1, 0]) }),
      node("Add", ["t", "w"], ["a"]),
      node("Softmax", ["a"], ["b"], { axis: attr.int(0) }),
      node("MatMul", ["b", "x"], ["y"]),
    ],
  })
