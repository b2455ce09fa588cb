// The tricky corners of the tensor ops, each on a one-node graph: Slice's clamping and negative
// steps, Reshape's 0 / -1 / allowzero, Pad's reflect / edge / wrap, index errors, and type
// relations that read constant input values.
import { describe, expect, it } from "vitest"
import { attr, type Attrs } from "../src/ast/graph/attrs.js"
import type { DType } from "../src/ast/graph/dtype.js"
import { NodeError } from "../src/ast/graph/errors.js"
import { resolveNode, runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import type { Dim, ValueType } from "../src/ast/graph/op.js"
import { tensor, toNumbers, type Tensor } from "../src/ast/graph/tensor.js"

const INT64_MAX = 2 ** 63 // 9223372036854775807 as decoded into a double
const INT64_MIN = -(2 ** 63)

const f32 = (shape: number[], values?: number[]): Tensor =>
  tensor("float32", shape, Float32Array.from(values ?? Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => i)))
const i64 = (values: number[], shape = [values.length]): Tensor => tensor("int64", shape, Float64Array.from(values))

/** Runs `op` on one node; inputs given as undefined are omitted (""). */
const run1 = (op: string, inputs: (Tensor | undefined)[], attrs: Attrs = {}, opset = 18, outputs = 1): Tensor[] => {
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
const run = (op: string, inputs: (Tensor | undefined)[], attrs: Attrs = {}, opset = 18): Tensor => run1(op, inputs, attrs, opset)[0]

/** The op's type relation on the given input types and known values. */
const inferOf = (op: string, inputs: ValueType[], values: (Tensor | undefined)[] = [], attrs: Attrs = {}, opset = 18): readonly ValueType[] => {
  const { def, attrs: decoded } = resolveNode(node(op, inputs.map((_, k) => `x${k}`), ["y"], attrs, "n"))
  return def.infer({ node: "n", attrs: decoded, opset, inputs, values, outputs: 1 })
}

const shapeAndValues = (t: Tensor) => ({ shape: t.shape, values: toNumbers(t) })

describe("Slice", () => {
  const x = f32([10])
  const slice = (starts: number[], ends: number[], steps?: number[], axes?: number[]) =>
    shapeAndValues(run("Slice", [x, i64(starts), i64(ends), axes ? i64(axes) : undefined, steps ? i64(steps) : undefined]))

  it("reverses with step -1 from the last element to INT64_MIN", () => {
    expect(slice([-1], [INT64_MIN], [-1]).values).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0])
  })
  it("clamps a negative-step start beyond the end to dim-1 and an end below -dim to -1", () => {
    expect(slice([100], [-100], [-3]).values).toEqual([9, 6, 3, 0])
  })
  it("stops before end on a negative step", () => {
    expect(slice([8], [2], [-2]).values).toEqual([8, 6, 4])
  })
  it("clamps INT64_MAX ends forward and gives an empty slice when start passes end", () => {
    expect(slice([-3], [INT64_MAX]).values).toEqual([7, 8, 9])
    expect(slice([7], [3])).toEqual({ shape: [0], values: [] })
    expect(slice([3], [7], [-1])).toEqual({ shape: [0], values: [] })
  })
  it("slices 2-D on negative axes with steps", () => {
    const m = f32([3, 4])
    const y = run("Slice", [m, i64([0, -1]), i64([INT64_MAX, INT64_MIN]), i64([-2, -1]), i64([2, -2])])
    expect(shapeAndValues(y)).toEqual({ shape: [2, 2], values: [3, 1, 11, 9] })
  })
  it("reads starts/ends/axes from attributes before opset 10", () => {
    const y = run("Slice", [f32([3, 4])], { starts: attr.ints([1, 1]), ends: attr.ints([INT64_MAX, 3]), axes: attr.ints([0, 1]) }, 9)
    expect(shapeAndValues(y)).toEqual({ shape: [2, 2], values: [5, 6, 9, 10] })
  })
  it("rejects step 0", () => {
    expect(() => slice([0], [5], [0])).toThrow(NodeError)
  })
})

describe("Reshape", () => {
  it("copies the input dim for 0 and infers -1", () => {
    expect(run("Reshape", [f32([2, 3, 4]), i64([0, -1])]).shape).toEqual([2, 12])
  })
  it("keeps a literal 0 dim with allowzero=1", () => {
    const y = run("Reshape", [f32([0, 3]), i64([3, 0])], { allowzero: attr.int(1) })
    expect(y.shape).toEqual([3, 0])
    expect(() => run("Reshape", [f32([0, 3]), i64([3, 0])])).toThrow(/cannot reshape|copies dim/)
  })
  it("rejects 0 together with -1 under allowzero=1", () => {
    expect(() => run("Reshape", [f32([0, 3]), i64([0, -1])], { allowzero: attr.int(1) })).toThrow(/both 0 and -1/)
  })
  it("infers from a constant shape, and symbolic dims otherwise", () => {
    const x: ValueType = { dtype: "float32", shape: ["N", 3, 4] }
    const s: ValueType = { dtype: "int64", shape: [2] }
    expect(inferOf("Reshape", [x, s], [undefined, i64([0, -1])])[0].shape).toEqual(["N", 12])
    expect(inferOf("Reshape", [x, s], [undefined, i64([-1, 6])])[0].shape).toEqual(["n.out0.d0", 6])
    const unknown = inferOf("Reshape", [x, s])[0].shape
    expect(unknown.length).toBe(2)
    expect(unknown.every((d: Dim) => typeof d === "string")).toBe(true)
  })
})

describe("Pad", () => {
  const x = f32([3], [1, 2, 3])
  const pad = (mode: string, pads: number[]) => toNumbers(run("Pad", [x, i64(pads)], { mode: attr.str(mode) }))

  it("reflects without repeating the edge, periodically beyond one reflection (numpy)", () => {
    expect(pad("reflect", [2, 2])).toEqual([3, 2, 1, 2, 3, 2, 1])
    expect(pad("reflect", [5, 5])).toEqual([2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2])
  })
  it("repeats the edge and wraps around", () => {
    expect(pad("edge", [2, 1])).toEqual([1, 1, 1, 2, 3, 3])
    expect(pad("wrap", [2, 4])).toEqual([2, 3, 1, 2, 3, 1, 2, 3, 1])
  })
  it("fills with constant_value and crops on negative pads", () => {
    expect(toNumbers(run("Pad", [x, i64([1, -1]), tensor("float32", [], Float32Array.of(9))]))).toEqual([9, 1, 2])
  })
  it("pads only the listed axes (opset 18)", () => {
    const y = run("Pad", [f32([2, 2]), i64([1, 0]), undefined, i64([-1])])
    expect(shapeAndValues(y)).toEqual({ shape: [2, 3], values: [0, 0, 1, 0, 2, 3] })
  })
  it("reads pads and value from attributes before opset 11", () => {
    const y = run("Pad", [x], { pads: attr.ints([1, 1]), value: attr.float(-1) }, 2)
    expect(toNumbers(y)).toEqual([-1, 1, 2, 3, -1])
  })
})

describe("indices", () => {
  it("wraps negative indices once", () => {
    expect(toNumbers(run("Gather", [f32([4]), i64([-1, -4, 0])]))).toEqual([3, 0, 0])
  })
  it("fails on an out-of-range index, naming the index and the bound", () => {
    expect(() => run("Gather", [f32([4]), i64([4])])).toThrow(/index on axis 0: 4 out of range \[-4, 3\]/)
    expect(() => run("GatherElements", [f32([2, 2]), i64([0, -3], [1, 2])], { axis: attr.int(1) })).toThrow(/-3 out of range \[-2, 1\]/)
    expect(() => run("ScatterND", [f32([3]), i64([3], [1, 1]), f32([1])])).toThrow(/3 out of range \[-3, 2\]/)
  })
  it("scatters with a reduction over duplicate indices", () => {
    const y = run("ScatterElements", [f32([1, 3], [1, 2, 3]), i64([1, 1], [1, 2]), f32([1, 2], [10, 20])], { axis: attr.int(1), reduction: attr.str("add") })
    expect(toNumbers(y)).toEqual([1, 32, 3])
  })
})

describe("Split", () => {
  it("makes the last chunk smaller with num_outputs (opset 18)", () => {
    const ys = run1("Split", [f32([7])], { num_outputs: attr.int(3) }, 18, 3)
    expect(ys.map((y) => toNumbers(y))).toEqual([[0, 1, 2], [3, 4, 5], [6]])
  })
  it("takes sizes from the attribute before opset 13 and from the input after", () => {
    expect(run1("Split", [f32([5])], { split: attr.ints([2, 3]) }, 11, 2).map((y) => y.shape)).toEqual([[2], [3]])
    expect(run1("Split", [f32([5]), i64([4, 1])], {}, 13, 2).map((y) => y.shape)).toEqual([[4], [1]])
  })
})

describe("type relations without input values", () => {
  const x: ValueType = { dtype: "float32", shape: ["N", 1, 4] }
  it("Expand keeps input dims other than 1 and leaves the rest symbolic", () => {
    expect(inferOf("Expand", [x, { dtype: "int64", shape: [4] }])[0].shape).toEqual(["n.out0.d0", "N", "n.out0.d2", 4])
  })
  it("Slice leaves only the sliced axes symbolic", () => {
    const one: ValueType = { dtype: "int64", shape: [1] }
    expect(inferOf("Slice", [x, one, one, one], [undefined, undefined, undefined, i64([-1])])[0].shape).toEqual(["N", 1, "n.out0.d2"])
    // a whole-axis slice keeps a symbolic dim; a partial one does not
    const whole = inferOf("Slice", [x, one, one, one], [undefined, i64([0]), i64([INT64_MAX]), i64([0])])[0].shape
    expect(whole).toEqual(["N", 1, 4])
    expect(inferOf("Slice", [x, one, one, one], [undefined, i64([1]), i64([INT64_MAX]), i64([0])])[0].shape).toEqual(["n.out0.d0", 1, 4])
  })
  it("Shape is static from the rank; Constant's type comes from its attribute", () => {
    expect(inferOf("Shape", [x], [], { start: attr.int(-2) })[0]).toEqual({ dtype: "int64", shape: [2] })
    expect(inferOf("Constant", [], [], { value_ints: attr.ints([1, 2, 3]) })[0]).toEqual({ dtype: "int64", shape: [3] })
    expect(inferOf("Constant", [], [], { value_float: attr.float(0.5) })[0]).toEqual({ dtype: "float32", shape: [] })
  })
  it("Constant with a string value is unsupported, not wrong", () => {
    expect(() => run("Constant", [], { value_string: attr.str("a") })).toThrow(/string tensors are not supported/)
  })
})

describe("OneHot", () => {
  const onehot = (opset: number) =>
    toNumbers(run("OneHot", [i64([-1, 3]), i64([3], []), f32([2], [0, 1])], {}, opset))
  it("wraps negative indices from opset 11 and gives all-off rows for out-of-range ones", () => {
    expect(onehot(11)).toEqual([0, 0, 1, 0, 0, 0])
  })
  it("treats negative indices as out of range before opset 11", () => {
    expect(onehot(9)).toEqual([0, 0, 0, 0, 0, 0])
  })
})
