// Reference kernels of the sequence and control-flow ops against hand computations.
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import type { DType } from "../src/ast/graph/dtype.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node, type Graph, type Node, type ValueInfo } from "../src/ast/graph/graph.js"
import { fromArray, scalar, toNumbers, type Tensor } from "../src/ast/graph/tensor.js"

const vi = (name: string, dtype: DType, shape: (number | string)[]): ValueInfo => ({ name, type: { dtype, shape } })
const f32 = (shape: number[], xs: number[]) => fromArray("float32", shape, xs)
const sigmoid = (x: number) => 1 / (1 + Math.exp(-x))

const run = (g: Graph, feeds: Record<string, Tensor>): Tensor[] => runGraph(g, new Map(Object.entries(feeds)))

const single = (n: Node, inputs: ValueInfo[], outputs: ValueInfo[], opset = 22): Graph =>
  makeGraph({ opset, inputs, outputs, nodes: [n] })

const expectClose = (t: Tensor, want: number[], digits = 6) => {
  const got = toNumbers(t)
  expect(got.length).toBe(want.length)
  got.forEach((g, i) => expect(g).toBeCloseTo(want[i], digits))
}

describe("LSTM", () => {
  it("one step equals the gate equations (iofc order, bias pairs, peepholes)", () => {
    // input size 1, hidden size 1: each gate is one weight, one recurrence, two biases, a peephole
    const W = [0.5, -0.3, 0.8, 0.2] // i o f c
    const R = [0.1, 0.4, -0.2, 0.6]
    const B = [0.05, 0.1, -0.1, 0.2, 0.01, 0.02, 0.03, 0.04]
    const P = [0.3, -0.2, 0.1] // i o f
    const x = 0.7
    const h0 = -0.4
    const c0 = 0.9
    const pre = (k: number) => W[k] * x + R[k] * h0 + B[k] + B[4 + k]
    const i = sigmoid(pre(0) + P[0] * c0)
    const f = sigmoid(pre(2) + P[2] * c0)
    const c = f * c0 + i * Math.tanh(pre(3))
    const o = sigmoid(pre(1) + P[1] * c)
    const h = o * Math.tanh(c)
    const g = single(
      node("LSTM", ["X", "W", "R", "B", "", "h0", "c0", "P"], ["Y", "Y_h", "Y_c"], { hidden_size: attr.int(1) }),
      [vi("X", "float32", [1, 1, 1]), vi("W", "float32", [1, 4, 1]), vi("R", "float32", [1, 4, 1]), vi("B", "float32", [1, 8]), vi("h0", "float32", [1, 1, 1]), vi("c0", "float32", [1, 1, 1]), vi("P", "float32", [1, 3])],
      [vi("Y", "float32", [1, 1, 1, 1]), vi("Y_h", "float32", [1, 1, 1]), vi("Y_c", "float32", [1, 1, 1])],
    )
    const [Y, Yh, Yc] = run(g, {
      X: f32([1, 1, 1], [x]),
      W: f32([1, 4, 1], W),
      R: f32([1, 4, 1], R),
      B: f32([1, 8], B),
      h0: f32([1, 1, 1], [h0]),
      c0: f32([1, 1, 1], [c0]),
      P: f32([1, 3], P),
    })
    expect(Y.shape).toEqual([1, 1, 1, 1])
    expectClose(Y, [h])
    expectClose(Yh, [h])
    expectClose(Yc, [c])
  })
})

describe("GRU", () => {
  it.each([0, 1])("one step with linear_before_reset = %i equals the gate equations (zrh order)", (lbr) => {
    const W = [0.5, -0.3, 0.8] // z r h
    const R = [0.1, 0.4, -0.6]
    const B = [0.05, 0.1, -0.1, 0.2, 0.01, 0.02] // Wb z r h, Rb z r h
    const x = 0.7
    const h0 = -0.4
    const z = sigmoid(W[0] * x + R[0] * h0 + B[0] + B[3])
    const r = sigmoid(W[1] * x + R[1] * h0 + B[1] + B[4])
    const cand = lbr ? Math.tanh(W[2] * x + r * (R[2] * h0 + B[5]) + B[2]) : Math.tanh(W[2] * x + R[2] * (r * h0) + B[2] + B[5])
    const h = (1 - z) * cand + z * h0
    const g = single(
      node("GRU", ["X", "W", "R", "B", "", "h0"], ["Y", "Y_h"], { hidden_size: attr.int(1), linear_before_reset: attr.int(lbr) }),
      [vi("X", "float32", [1, 1, 1]), vi("W", "float32", [1, 3, 1]), vi("R", "float32", [1, 3, 1]), vi("B", "float32", [1, 6]), vi("h0", "float32", [1, 1, 1])],
      [vi("Y", "float32", [1, 1, 1, 1]), vi("Y_h", "float32", [1, 1, 1])],
    )
    const [, Yh] = run(g, { X: f32([1, 1, 1], [x]), W: f32([1, 3, 1], W), R: f32([1, 3, 1], R), B: f32([1, 6], B), h0: f32([1, 1, 1], [h0]) })
    expectClose(Yh, [h])
  })
})

describe("RNN", () => {
  it("bidirectional with sequence_lens: padded steps give zeros, the reverse pass starts at the last valid step", () => {
    // hidden 1, input 1, Relu, W = 1, R = 1: h_t = relu(x_t + h_{t-1})
    const g = single(
      node("RNN", ["X", "W", "R", "", "lens"], ["Y", "Y_h"], { hidden_size: attr.int(1), direction: attr.str("bidirectional"), activations: attr.strs(["Relu", "Relu"]) }),
      [vi("X", "float32", [3, 2, 1]), vi("W", "float32", [2, 1, 1]), vi("R", "float32", [2, 1, 1]), vi("lens", "int32", [2])],
      [vi("Y", "float32", [3, 2, 2, 1]), vi("Y_h", "float32", [2, 2, 1])],
    )
    // batch 0: x = 1, 2, 3 (length 3); batch 1: x = 10, 20, (pad) (length 2)
    const [Y, Yh] = run(g, {
      X: f32([3, 2, 1], [1, 10, 2, 20, 3, 99]),
      W: f32([2, 1, 1], [1, 1]),
      R: f32([2, 1, 1], [1, 1]),
      lens: fromArray("int32", [2], [3, 2]),
    })
    // Y[t, dir, b]: forward 1,3,6 / 10,30,0; reverse 6,5,3 / 30,20,0
    expectClose(Y, [1, 10, 6, 30, 3, 30, 5, 20, 6, 0, 3, 0])
    expectClose(Yh, [6, 30, 6, 30])
  })
})

describe("If", () => {
  const branch = (name: string, out: string, nodes: Node[]): Graph =>
    makeGraph({ name, opset: 13, inputs: [], outputs: [vi(out, "float32", [2])], nodes })
  const g = makeGraph({
    opset: 13,
    inputs: [vi("cond", "bool", []), vi("outer", "float32", [2])],
    outputs: [vi("y", "float32", [2])],
    nodes: [
      node("If", ["cond"], ["y"], {
        then_branch: attr.graph(branch("then", "k", [node("Constant", [], ["k"], { value: attr.tensor(f32([2], [1, 2])) })])),
        // the else branch returns a value of the enclosing graph
        else_branch: attr.graph(branch("else", "outer", [])),
      }),
    ],
  })
  it("runs the then branch when cond is true", () => {
    expectClose(run(g, { cond: scalar("bool", 1), outer: f32([2], [7, 8]) })[0], [1, 2])
  })
  it("runs the else branch, which sees outer values, when cond is false", () => {
    expectClose(run(g, { cond: scalar("bool", 0), outer: f32([2], [7, 8]) })[0], [7, 8])
  })
})

describe("Loop", () => {
  it("carries a growing state and stacks scan outputs along a new first axis", () => {
    // v <- Concat(v, x) three times; scan output: Shape(v) after each iteration
    const body = makeGraph({
      name: "body",
      opset: 13,
      inputs: [vi("i", "int64", []), vi("c_in", "bool", []), vi("v_in", "float32", ["n"])],
      outputs: [vi("c_in", "bool", []), vi("v_out", "float32", ["m"]), vi("len", "int64", [1])],
      nodes: [node("Concat", ["v_in", "x"], ["v_out"], { axis: attr.int(0) }), node("Shape", ["v_out"], ["len"])],
    })
    const g = makeGraph({
      opset: 13,
      inputs: [vi("M", "int64", []), vi("v0", "float32", [1]), vi("x", "float32", [1])],
      outputs: [vi("v", "float32", ["k"]), vi("lens", "int64", [3, 1])],
      nodes: [node("Loop", ["M", "", "v0"], ["v", "lens"], { body: attr.graph(body) })],
    })
    const [v, lens] = run(g, { M: scalar("int64", 3), v0: f32([1], [0]), x: f32([1], [5]) })
    expect(v.shape).toEqual([4])
    expectClose(v, [0, 5, 5, 5])
    expect(lens.shape).toEqual([3, 1])
    expectClose(lens, [2, 3, 4])
  })

  it("stops when the body's condition turns false", () => {
    // cond_out is the iteration number's bool: false on the first iteration (i = 0)
    const body = makeGraph({
      name: "body",
      opset: 13,
      inputs: [vi("i", "int64", []), vi("c_in", "bool", []), vi("v_in", "float32", [1])],
      outputs: [vi("stop", "bool", []), vi("v_in", "float32", [1])],
      nodes: [node("Constant", [], ["stop"], { value: attr.tensor(scalar("bool", 0)) })],
    })
    const g = makeGraph({
      opset: 13,
      inputs: [vi("M", "int64", []), vi("c", "bool", []), vi("v0", "float32", [1])],
      outputs: [vi("v", "float32", [1])],
      nodes: [node("Loop", ["M", "c", "v0"], ["v"], { body: attr.graph(body) })],
    })
    expectClose(run(g, { M: scalar("int64", 100), c: scalar("bool", 1), v0: f32([1], [3]) })[0], [3])
  })
})

describe("Scan", () => {
  it("scans a reversed input and stacks the slices along output axis 1", () => {
    const body = makeGraph({
      name: "body",
      opset: 11,
      inputs: [vi("s_in", "float32", [1]), vi("row", "float32", [2])],
      outputs: [vi("s_in", "float32", [1]), vi("row", "float32", [2])],
      nodes: [],
    })
    const g = makeGraph({
      opset: 11,
      inputs: [vi("s0", "float32", [1]), vi("x", "float32", [3, 2])],
      outputs: [vi("s", "float32", [1]), vi("y", "float32", [2, 3])],
      nodes: [
        node("Scan", ["s0", "x"], ["s", "y"], {
          body: attr.graph(body),
          num_scan_inputs: attr.int(1),
          scan_input_directions: attr.ints([1]),
          scan_output_axes: attr.ints([1]),
        }),
      ],
    })
    const [, y] = run(g, { s0: f32([1], [0]), x: f32([3, 2], [1, 2, 3, 4, 5, 6]) })
    // rows reversed: [5,6], [3,4], [1,2]; stacked on axis 1
    expect(y.shape).toEqual([2, 3])
    expectClose(y, [5, 3, 1, 6, 4, 2])
  })
})
