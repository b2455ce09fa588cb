// The tricky corners of the reductions, softmax family, TopK, Unique and Resize, each on a
// one-node graph: opset-12 vs opset-13 Softmax, empty axes and empty sets, TopK ties, Unique's
// four outputs, and Resize's coordinate modes.
import { describe, expect, it } from "vitest"
import { attr, type Attrs } from "../src/ast/graph/attrs.js"
import type { DType } from "../src/ast/graph/dtype.js"
import { resolveNode, runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import type { ValueType } from "../src/ast/graph/op.js"
import { tensor, toNumbers, type Tensor } from "../src/ast/graph/tensor.js"

const f32 = (shape: number[], values: number[]): Tensor => tensor("float32", shape, Float32Array.from(values))
const i64 = (values: number[], shape = [values.length]): Tensor => tensor("int64", shape, Float64Array.from(values))

/** Runs `op` on one node; inputs given as undefined are omitted (""). */
const runN = (op: string, inputs: (Tensor | undefined)[], attrs: Attrs = {}, opset = 18, outputs = 1): Tensor[] => {
  const names = inputs.map((t, k) => (t ? `x${k}` : ""))
  const outs = Array.from({ length: outputs }, (_, j) => `y${j}`)
  const g = makeGraph({
    opset,
    inputs: inputs.flatMap((t, k) => (t ? [{ name: `x${k}`, type: { dtype: t.dtype, shape: t.shape } }] : [])),
    outputs: outs.map((name) => ({ name, type: { dtype: "float32" as DType, shape: [] } })),
    nodes: [node(op, names, outs, attrs)],
  })
  return runGraph(g, new Map(inputs.flatMap((t, k) => (t ? [[`x${k}`, t] as const] : []))))
}
const run = (op: string, inputs: (Tensor | undefined)[], attrs: Attrs = {}, opset = 18): Tensor => runN(op, inputs, attrs, opset)[0]

const inferOf = (op: string, inputs: ValueType[], values: (Tensor | undefined)[] = [], attrs: Attrs = {}, opset = 18) => {
  const { def, attrs: decoded } = resolveNode(node(op, inputs.map((_, k) => `x${k}`), ["y"], attrs, "n"))
  return def.infer({ node: "n", attrs: decoded, opset, inputs, values, outputs: 1 })
}

const close = (got: Tensor, want: number[], digits = 5) => {
  const g = toNumbers(got)
  expect(g.length).toBe(want.length)
  g.forEach((v, i) => expect(v).toBeCloseTo(want[i], digits))
}

describe("Softmax", () => {
  const x = f32([2, 2], [0, 0, 0, Math.log(3)])
  it("before opset 13 coerces to 2-D at axis 1: each row of the flattened tail sums to 1", () => {
    // axis=0 at opset 12: the whole tensor is one row
    close(run("Softmax", [x], { axis: attr.int(0) }, 12), [1 / 6, 1 / 6, 1 / 6, 1 / 2])
  })
  it("from opset 13 works along one axis only", () => {
    // axis=0 at opset 13: columns
    close(run("Softmax", [x], { axis: attr.int(0) }, 13), [0.5, 0.25, 0.5, 0.75])
  })
  it("defaults to axis 1 before opset 13 and -1 after", () => {
    const y = f32([2, 1, 2], [0, 0, 0, Math.log(3)])
    close(run("Softmax", [y], {}, 11), [0.5, 0.5, 0.25, 0.75])
    close(run("Softmax", [y], {}, 13), [0.5, 0.5, 0.25, 0.75])
    close(run("Softmax", [f32([1, 2, 1], [0, Math.log(3)])], {}, 13), [1, 1])
    close(run("Softmax", [f32([1, 2, 1], [0, Math.log(3)])], {}, 12), [0.25, 0.75])
  })
  it("LogSoftmax stays finite for large inputs and Hardmax marks the first maximum", () => {
    close(run("LogSoftmax", [f32([3], [1000, 1000, 1000])], {}, 13), [-Math.log(3), -Math.log(3), -Math.log(3)])
    expect(toNumbers(run("Hardmax", [f32([4], [1, 3, 3, 2])], {}, 13))).toEqual([0, 1, 0, 0])
  })
})

describe("Reduce*", () => {
  const x = f32([2, 3], [1, 2, 3, 4, 5, 6])
  it("reduces everything when the axes input is empty, and nothing with noop_with_empty_axes", () => {
    expect(toNumbers(run("ReduceSum", [x, i64([])], { keepdims: attr.int(0) }, 13))).toEqual([21])
    const noop = run("ReduceSumSquare", [x, i64([])], { noop_with_empty_axes: attr.int(1) }, 18)
    expect(noop.shape).toEqual([2, 3])
    expect(toNumbers(noop)).toEqual([1, 4, 9, 16, 25, 36])
  })
  it("reads axes from the attribute before opset 18 and from the input after", () => {
    expect(toNumbers(run("ReduceMax", [x], { axes: attr.ints([1]), keepdims: attr.int(0) }, 13))).toEqual([3, 6])
    expect(toNumbers(run("ReduceMax", [x, i64([0])], { keepdims: attr.int(0) }, 18))).toEqual([4, 5, 6])
  })
  it("gives the identity on an empty set", () => {
    const e = f32([2, 0, 4], [])
    const axes = i64([1])
    expect(toNumbers(run("ReduceSum", [e, axes], {}, 18))).toEqual(new Array(8).fill(0))
    expect(toNumbers(run("ReduceProd", [e, axes], {}, 18))).toEqual(new Array(8).fill(1))
    expect(toNumbers(run("ReduceMax", [e, axes], {}, 18))).toEqual(new Array(8).fill(-Infinity))
    expect(toNumbers(run("ReduceMin", [e, axes], {}, 18))).toEqual(new Array(8).fill(Infinity))
    expect(toNumbers(run("ReduceLogSumExp", [e, axes], {}, 18))).toEqual(new Array(8).fill(-Infinity))
    expect(run("ReduceSum", [e, axes], {}, 18).shape).toEqual([2, 1, 4])
  })
  it("gives symbolic dims when the axes are known only at run time", () => {
    const [t] = inferOf("ReduceSum", [{ dtype: "float32", shape: [2, 3] }, { dtype: "int64", shape: [1] }], [], { keepdims: attr.int(0) }, 13)
    expect(t.shape).toEqual(["n.out0.d0"])
  })
  it("ArgMax takes the first maximum, or the last with select_last_index", () => {
    const y = f32([4], [1, 3, 3, 2])
    expect(toNumbers(run("ArgMax", [y], {}, 13))).toEqual([1])
    expect(toNumbers(run("ArgMax", [y], { select_last_index: attr.int(1) }, 13))).toEqual([2])
  })
})

describe("TopK", () => {
  it("breaks ties by the lower index, largest or smallest", () => {
    const x = f32([6], [2, 1, 2, 1, 2, 1])
    const [v, i] = runN("TopK", [x, i64([2])], {}, 11, 2)
    expect(toNumbers(v)).toEqual([2, 2])
    expect(toNumbers(i)).toEqual([0, 2])
    const [vs, is] = runN("TopK", [x, i64([4])], { largest: attr.int(0) }, 11, 2)
    expect(toNumbers(vs)).toEqual([1, 1, 1, 2])
    expect(toNumbers(is)).toEqual([1, 3, 5, 0])
  })
  it("takes k from the attribute before opset 10", () => {
    const [v] = runN("TopK", [f32([3], [1, 3, 2])], { k: attr.int(1) }, 9, 2)
    expect(toNumbers(v)).toEqual([3])
  })
})

describe("Unique", () => {
  it("gives values, first indices, inverse indices and counts, sorted or in first-seen order", () => {
    const x = f32([6], [2, 1, 1, 3, 4, 3])
    const sorted = runN("Unique", [x], {}, 11, 4).map(toNumbers)
    expect(sorted).toEqual([
      [1, 2, 3, 4],
      [1, 0, 3, 4],
      [1, 0, 0, 2, 3, 2],
      [2, 1, 2, 1],
    ])
    const seen = runN("Unique", [x], { sorted: attr.int(0) }, 11, 4).map(toNumbers)
    expect(seen).toEqual([
      [2, 1, 3, 4],
      [0, 1, 3, 4],
      [0, 1, 1, 2, 3, 2],
      [1, 2, 2, 1],
    ])
  })
})

describe("Resize", () => {
  const x = f32([1, 1, 2, 2], [1, 2, 3, 4])
  const scales = f32([4], [1, 1, 2, 2])
  it("linear half_pixel clamps at the edges; align_corners hits the corners", () => {
    const y = run("Resize", [x, undefined, scales], { mode: attr.str("linear") }, 13)
    expect(y.shape).toEqual([1, 1, 4, 4])
    close(y, [1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4])
    const a = run("Resize", [x, undefined, undefined, i64([1, 1, 3, 3])], { mode: attr.str("linear"), coordinate_transformation_mode: attr.str("align_corners") }, 13)
    close(a, [1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4])
  })
  it("nearest asymmetric floor repeats pixels", () => {
    const y = run("Resize", [x, undefined, scales], { coordinate_transformation_mode: attr.str("asymmetric"), nearest_mode: attr.str("floor") }, 13)
    expect(toNumbers(y)).toEqual([1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4])
  })
})

describe("DFT", () => {
  it("irfft (inverse, onesided) undoes rfft, giving a real signal of length 2(n-1)", () => {
    const x = f32([1, 6, 1], [1, -2, 3, 0.5, 4, -1])
    const axis = i64([1], [])
    const spec = run("DFT", [x, undefined, axis], { onesided: attr.int(1) }, 20)
    expect(spec.shape).toEqual([1, 4, 2])
    const back = run("DFT", [spec, undefined, axis], { onesided: attr.int(1), inverse: attr.int(1) }, 20)
    expect(back.shape).toEqual([1, 6, 1])
    close(back, [1, -2, 3, 0.5, 4, -1])
  })
})
