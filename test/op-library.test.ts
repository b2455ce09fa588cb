// The operator library against the reference evaluator: each op as a one-node graph on random
// inputs, compiled for the js target at opt level 0, must compile every group (no fallback, but int64
// arithmetic and uint64, which js computes exactly only on the reference kernels) and
// give runGraph's answer: exactly for integers and bools, allclose for floats.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { attr, type AttrValue } from "../src/ast/graph/attrs.js"
import { prng } from "../src/ast/graph/arbitrary.js"
import { allocate, type DType } from "../src/ast/graph/dtype.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { tensor, type Tensor } from "../src/ast/graph/tensor.js"
import { makeTarget } from "../src/ast/target.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"

const rng = prng(20261123)
const size = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1)
/** Random values in [lo, hi] (integers for integer dtypes, 0/1 for bool). */
const rand = (dtype: DType, shape: readonly number[], lo = -2, hi = 2): Tensor => {
  const data = allocate(dtype, size(shape))
  for (let i = 0; i < data.length; i++) data[i] = dtype === "bool" ? rng.int(0, 1) : dtype.startsWith("float") ? rng.float(lo, hi) : rng.int(Math.ceil(lo), Math.floor(hi))
  return tensor(dtype, shape, data)
}
const ints64 = (xs: readonly number[]) => tensor("int64", [xs.length], Float64Array.from(xs))

interface Case {
  readonly op: string
  /** Runtime inputs (graph inputs); `consts` are initializers at the given input positions. */
  readonly inputs: readonly (Tensor | undefined)[]
  readonly consts?: Readonly<Record<number, Tensor>>
  readonly attrs?: Record<string, AttrValue>
  readonly opset?: number
}

const sameValue = (a: number, b: number, float: boolean): boolean => {
  if (Number.isNaN(a) || Number.isNaN(b)) return Number.isNaN(a) && Number.isNaN(b)
  if (!float) return a === b
  if (a === b) return true
  return Math.abs(a - b) <= 1e-6 + 1e-5 * Math.abs(b)
}

const check = async (c: Case): Promise<void> => {
  const n = Math.max(c.inputs.length, ...Object.keys(c.consts ?? {}).map((k) => Number(k) + 1))
  const names = Array.from({ length: n }, (_, k) => (c.consts?.[k] ? `c${k}` : c.inputs[k] ? `x${k}` : ""))
  const feeds = new Map<string, Tensor>()
  c.inputs.forEach((t, k) => t && !c.consts?.[k] && feeds.set(`x${k}`, t))
  const initializers = new Map(Object.entries(c.consts ?? {}).map(([k, t]) => [`c${k}`, t] as const))
  const inputs = [...feeds].map(([name, t]) => ({ name, type: { dtype: t.dtype, shape: t.shape } }))
  const probe = makeGraph({ opset: c.opset ?? 18, inputs, outputs: [{ name: "y", type: { dtype: "float32", shape: [] } }], initializers, nodes: [node(c.op, names, ["y"], c.attrs ?? {})] })
  const [want] = runGraph(probe, feeds)
  const graph = { ...probe, outputs: [{ name: "y", type: { dtype: want.dtype, shape: want.shape } }] }
  const program = await Effect.runPromise(compileGraph(graph, makeTarget("js"), { optLevel: 0 }))
  const fallbacks = program.kernels.filter((k) => k.kind !== "compiled").map((k) => (k.kind === "fallback" ? k.reason : ""))
  // (what stays on the exact reference kernels for 64-bit integers: uint64 BitShift, whose compute is in doubles; docs/backends.md)
  expect(fallbacks.filter((r) => !/ computes u?int64 \(exact beyond 2\^53 only on the reference kernels|BitShift of uint64/.test(r))).toEqual([])
  const got = (await Effect.runPromise(loadProgram(program, makeTarget("js")))).run(feeds).get("y")!
  expect(got.dtype).toBe(want.dtype)
  expect(got.shape).toEqual(want.shape)
  const float = want.dtype.startsWith("float")
  const bad = Array.from(want.data).findIndex((w, i) => !sameValue(got.data[i], w, float))
  expect(bad < 0 ? "ok" : `element ${bad}: got ${got.data[bad]}, want ${want.data[bad]}`).toBe("ok")
}

const run = (title: string, cases: () => readonly Case[]) =>
  describe(title, () => {
    cases().forEach((c, k) => it(`${c.op} #${k}`, () => check(c)))
  })

const shapes = [[7], [2, 3, 4], [1, 5, 2, 3]]
const unaryFloat = (op: string, lo = -3, hi = 3, attrs?: Record<string, AttrValue>): Case[] =>
  shapes.map((s) => ({ op, inputs: [rand("float32", s, lo, hi)], attrs }))

run("unary math and activations", (): Case[] => [
  ...["Sin", "Cos", "Tan", "Atan", "Sinh", "Cosh", "Asinh", "Sign", "Round", "Softsign", "Softplus", "Mish", "HardSwish", "Selu", "Celu", "Swish", "ThresholdedRelu", "Shrink", "IsNaN", "Gelu"].flatMap((op) => unaryFloat(op)),
  ...["Asin", "Acos", "Atanh"].flatMap((op) => unaryFloat(op, -0.99, 0.99)),
  ...unaryFloat("Acosh", 1, 5),
  ...unaryFloat("Asin", -1.5, 1.5),
  ...unaryFloat("Atan", -1e4, 1e4),
  ...unaryFloat("Celu", -3, 3, { alpha: attr.float(0.5) }),
  ...unaryFloat("Shrink", -3, 3, { bias: attr.float(1.5), lambd: attr.float(1) }),
  ...unaryFloat("Gelu", -3, 3, { approximate: attr.str("tanh") }),
  { op: "Sign", inputs: [rand("int32", [3, 4], -3, 3)] },
  { op: "Round", inputs: [tensor("float32", [6], Float32Array.from([0.5, 1.5, 2.5, -0.5, -2.5, 2.4]))] },
  { op: "IsNaN", inputs: [tensor("float32", [4], Float32Array.from([NaN, 1, Infinity, -0]))] },
  { op: "IsInf", inputs: [tensor("float64", [4], Float64Array.from([NaN, -Infinity, Infinity, 3]))] },
  { op: "IsInf", inputs: [tensor("float32", [4], Float32Array.from([NaN, -Infinity, Infinity, 3]))], attrs: { detect_negative: attr.int(0) } },
  { op: "Not", inputs: [rand("bool", [2, 5])] },
])

run("comparison, logic, Where, variadic", (): Case[] => [
  ...["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"].flatMap((op): Case[] => [
    { op, inputs: [rand("int32", [3, 4], -2, 2), rand("int32", [4], -2, 2)] },
    { op, inputs: [rand("float32", [2, 3, 1]), rand("float32", [3, 4])] },
  ]),
  ...["And", "Or", "Xor"].map((op): Case => ({ op, inputs: [rand("bool", [3, 4]), rand("bool", [1, 4])] })),
  { op: "Where", inputs: [rand("bool", [3, 1]), rand("float32", [3, 4]), rand("float32", [4])] },
  { op: "Where", inputs: [rand("bool", [2, 3]), rand("int64", [2, 3], -9, 9), rand("int64", [1], -9, 9)] },
  { op: "Max", inputs: [rand("float32", [3, 4]), rand("float32", [4]), rand("float32", [3, 1])] },
  { op: "Min", inputs: [rand("int32", [3, 4], -9, 9), rand("int32", [4], -9, 9), rand("int32", [3, 4], -9, 9)] },
  { op: "Sum", inputs: [rand("float32", [2, 3]), rand("float32", [2, 3]), rand("float32", [3]), rand("float32", [1])] },
  { op: "Mean", inputs: [rand("float32", [2, 3]), rand("float32", [3])] },
  { op: "Sum", inputs: [rand("float32", [5])] },
  { op: "Mod", inputs: [rand("int32", [3, 4], -20, 20), tensor("int32", [4], Int32Array.from([3, -3, 7, -5]))] },
  { op: "Mod", inputs: [rand("int64", [3, 4], -20, 20), tensor("int64", [4], Float64Array.from([3, -3, 7, -5]))], attrs: { fmod: attr.int(1) } },
  { op: "Div", inputs: [rand("int32", [3, 4], -20, 20), tensor("int32", [4], Int32Array.from([3, -3, 7, -5]))] },
])

const castValues = tensor("float64", [10], Float64Array.from([1.7, -1.7, 300.5, -300.5, 70000.9, 3e9, -3e9, NaN, Infinity, 0]))
run("Cast", (): Case[] => [
  ...(["float32", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "bool"] as const).map((to): Case => ({
    op: "Cast",
    inputs: [castValues],
    attrs: { to: attr.int({ float32: 1, uint8: 2, int8: 3, uint16: 4, int16: 5, int32: 6, int64: 7, bool: 9, uint32: 12 }[to]) },
  })),
  { op: "Cast", inputs: [rand("int32", [3, 4], -300, 300)], attrs: { to: attr.int(3) } },
  { op: "Cast", inputs: [rand("int64", [3, 4], -300, 300)], attrs: { to: attr.int(1) } },
  { op: "Cast", inputs: [rand("bool", [5])], attrs: { to: attr.int(11) } },
  { op: "CastLike", inputs: [rand("float32", [5], -100, 100), rand("int16", [1])] },
])

run("data movement", (): Case[] => [
  ...["constant", "edge", "reflect", "wrap"].map((mode) => ({ op: "Pad", inputs: [rand("float32", [2, 3, 4]), undefined], consts: { 1: ints64([0, 2, 1, 1, 3, 2]) }, attrs: { mode: attr.str(mode) } })),
  { op: "Pad", inputs: [rand("float32", [2, 3, 4]), undefined, tensor("float32", [], Float32Array.from([7]))], consts: { 1: ints64([1, -1, 0, 0]) , 3: ints64([0, 2]) } },
  { op: "Pad", inputs: [rand("int32", [3, 4], -9, 9)], attrs: { pads: attr.ints([1, 0, 2, 1]), value: attr.float(5) }, opset: 10 },
  { op: "Slice", inputs: [rand("float32", [5, 6, 4]), undefined, undefined, undefined, undefined], consts: { 1: ints64([1, -1]), 2: ints64([4, -7]), 3: ints64([0, 1]), 4: ints64([2, -2]) } },
  { op: "Slice", inputs: [rand("float32", [5, 6])], attrs: { starts: attr.ints([-3]), ends: attr.ints([100]), axes: attr.ints([1]) }, opset: 9 },
  { op: "Gather", inputs: [rand("float32", [5, 4, 3]), tensor("int64", [2, 2], Float64Array.from([0, -1, 3, 2]))], attrs: { axis: attr.int(1) } },
  { op: "Gather", inputs: [rand("int32", [5, 4], -9, 9), undefined], consts: { 1: tensor("int64", [], Float64Array.from([-2])) } },
  { op: "GatherElements", inputs: [rand("float32", [3, 4]), tensor("int64", [2, 4], Float64Array.from([0, 2, -1, 1, 2, 0, 1, -3]))], attrs: { axis: attr.int(0) } },
  { op: "Expand", inputs: [rand("float32", [3, 1]), undefined], consts: { 1: ints64([2, 3, 4]) } },
  { op: "Tile", inputs: [rand("int64", [2, 3], -9, 9), undefined], consts: { 1: ints64([2, 3]) } },
  { op: "DepthToSpace", inputs: [rand("float32", [1, 8, 2, 3])], attrs: { blocksize: attr.int(2) } },
  { op: "DepthToSpace", inputs: [rand("float32", [2, 8, 2, 3])], attrs: { blocksize: attr.int(2), mode: attr.str("CRD") } },
  { op: "SpaceToDepth", inputs: [rand("float32", [2, 3, 4, 6])], attrs: { blocksize: attr.int(2) } },
])

const reduceCase = (op: string, x: Tensor, axes: readonly number[] | undefined, keepdims = 1): Case =>
  axes === undefined
    ? { op, inputs: [x], attrs: { keepdims: attr.int(keepdims) } }
    : { op, inputs: [x, undefined], consts: { 1: ints64(axes) }, attrs: { keepdims: attr.int(keepdims) } }

run("reductions and normalizations", (): Case[] => [
  ...["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"].flatMap((op): Case[] => [
    reduceCase(op, rand("float32", [3, 4, 5], -1, 1), [1]),
    reduceCase(op, rand("float32", [3, 4, 5], -1, 1), [0, -1], 0),
    reduceCase(op, rand("float32", [2, 3]), undefined),
  ]),
  reduceCase("ReduceLogSum", rand("float32", [3, 4, 5], 0.1, 2), [2]),
  reduceCase("ReduceSum", rand("int32", [3, 4], -9, 9), [1], 0),
  { op: "ReduceMax", inputs: [rand("float32", [3, 4])], attrs: { noop_with_empty_axes: attr.int(1) } },
  { op: "ReduceL2", inputs: [rand("float32", [3, 4])], attrs: { noop_with_empty_axes: attr.int(1) } },
  { op: "ReduceSum", inputs: [rand("float32", [3, 4])], attrs: { axes: attr.ints([0]) }, opset: 11 },
  ...["ArgMax", "ArgMin"].flatMap((op): Case[] => [
    { op, inputs: [rand("int32", [3, 5, 2], -2, 2)], attrs: { axis: attr.int(1) } },
    { op, inputs: [rand("int32", [3, 5, 2], -2, 2)], attrs: { axis: attr.int(1), select_last_index: attr.int(1), keepdims: attr.int(0) } },
    { op, inputs: [tensor("float32", [2, 4], Float32Array.from([1, NaN, 3, NaN, 2, 2, -1, 0]))], attrs: { axis: attr.int(-1), select_last_index: attr.int(1) } },
  ]),
  { op: "LayerNormalization", inputs: [rand("float32", [2, 3, 4]), rand("float32", [4]), rand("float32", [4])] },
  { op: "LayerNormalization", inputs: [rand("float32", [2, 3, 4]), rand("float32", [3, 4])], attrs: { axis: attr.int(1), epsilon: attr.float(0.1) } },
  { op: "InstanceNormalization", inputs: [rand("float32", [2, 3, 4, 2]), rand("float32", [3]), rand("float32", [3])] },
  { op: "LRN", inputs: [rand("float32", [2, 5, 3, 3])], attrs: { size: attr.int(3), alpha: attr.float(0.01) } },
  { op: "LRN", inputs: [rand("float32", [1, 6, 2])], attrs: { size: attr.int(4), bias: attr.float(2), beta: attr.float(0.5) } },
])

run("convolutions", (): Case[] => [
  { op: "Conv", inputs: [rand("float32", [2, 4, 9]), rand("float32", [6, 2, 3]), rand("float32", [6])], attrs: { group: attr.int(2), pads: attr.ints([1, 2]), strides: attr.ints([2]) } },
  { op: "Conv", inputs: [rand("float32", [1, 2, 4, 5, 3]), rand("float32", [3, 2, 2, 3, 1])], attrs: { auto_pad: attr.str("SAME_UPPER") } },
  { op: "Conv", inputs: [rand("float32", [1, 3, 10]), rand("float32", [3, 1, 3])], attrs: { group: attr.int(3), dilations: attr.ints([2]) } },
  { op: "ConvTranspose", inputs: [rand("float32", [1, 3, 4, 5]), rand("float32", [3, 2, 3, 3])] },
  { op: "ConvTranspose", inputs: [rand("float32", [2, 4, 3, 3]), rand("float32", [4, 1, 3, 2]), rand("float32", [2])], attrs: { group: attr.int(2), strides: attr.ints([2, 3]), pads: attr.ints([1, 0, 1, 1]), output_padding: attr.ints([1, 0]) } },
  { op: "ConvTranspose", inputs: [rand("float32", [1, 2, 5]), rand("float32", [2, 3, 4])], attrs: { strides: attr.ints([2]), dilations: attr.ints([2]), auto_pad: attr.str("SAME_LOWER") } },
  { op: "ConvTranspose", inputs: [rand("float32", [1, 2, 3, 3]), rand("float32", [2, 2, 3, 3])], attrs: { strides: attr.ints([3, 2]), output_shape: attr.ints([10, 8]) } },
])

const f32s = (xs: readonly number[]) => tensor("float32", [xs.length], Float32Array.from(xs))
const resizeCase = (x: Tensor, scales: readonly number[] | undefined, sizes: readonly number[] | undefined, attrs: Record<string, AttrValue>): Case => ({
  op: "Resize",
  inputs: [x, undefined, undefined, undefined],
  consts: Object.fromEntries([...(scales ? [[2, f32s(scales)] as const] : []), ...(sizes ? [[3, ints64(sizes)] as const] : [])]),
  attrs,
})

run("Resize and Upsample", (): Case[] => [
  ...["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric"].flatMap((ctm): Case[] => [
    resizeCase(rand("float32", [1, 2, 3, 4]), [1, 1, 2, 1.5], undefined, { mode: attr.str("linear"), coordinate_transformation_mode: attr.str(ctm) }),
    resizeCase(rand("float32", [1, 2, 5, 7]), [1, 1, 0.6, 0.5], undefined, { mode: attr.str("linear"), coordinate_transformation_mode: attr.str(ctm) }),
    resizeCase(rand("float32", [1, 1, 4, 4]), undefined, [1, 1, 7, 3], { mode: attr.str("nearest"), coordinate_transformation_mode: attr.str(ctm) }),
  ]),
  ...["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"].map((nm): Case =>
    resizeCase(rand("int32", [1, 1, 3, 5], -9, 9), [1, 1, 2.5, 0.7], undefined, { mode: attr.str("nearest"), nearest_mode: attr.str(nm) }),
  ),
  resizeCase(rand("float32", [2, 3, 4]), undefined, [3, 5], { mode: attr.str("linear"), axes: attr.ints([1, 2]), keep_aspect_ratio_policy: attr.str("not_larger") }),
  { op: "Upsample", inputs: [rand("float32", [1, 2, 3, 3])], attrs: { mode: attr.str("nearest"), scales: attr.floats([1, 1, 2, 3]) }, opset: 8 },
  { op: "Upsample", inputs: [rand("float32", [1, 2, 3, 3]), undefined], consts: { 1: f32s([1, 1, 2, 2]) }, attrs: { mode: attr.str("linear") }, opset: 9 },
  { op: "Resize", inputs: [rand("float32", [1, 2, 3, 3]), undefined], consts: { 1: f32s([1, 1, 2, 0.5]) }, attrs: { mode: attr.str("linear") }, opset: 10 },
])

run("pooling of 1 and 3 spatial dims", (): Case[] => [
  { op: "MaxPool", inputs: [rand("float32", [2, 3, 9])], attrs: { kernel_shape: attr.ints([3]), strides: attr.ints([2]), pads: attr.ints([1, 1]) } },
  { op: "MaxPool", inputs: [rand("float32", [1, 2, 5, 4, 6])], attrs: { kernel_shape: attr.ints([2, 2, 3]), ceil_mode: attr.int(1), strides: attr.ints([2, 2, 2]) } },
  { op: "AveragePool", inputs: [rand("float32", [2, 3, 9])], attrs: { kernel_shape: attr.ints([4]), strides: attr.ints([3]), pads: attr.ints([2, 1]) } },
  { op: "AveragePool", inputs: [rand("float32", [2, 3, 9])], attrs: { kernel_shape: attr.ints([4]), strides: attr.ints([3]), pads: attr.ints([2, 1]), count_include_pad: attr.int(1), ceil_mode: attr.int(1) } },
  { op: "AveragePool", inputs: [rand("float32", [1, 2, 4, 5, 3])], attrs: { kernel_shape: attr.ints([2, 3, 2]), auto_pad: attr.str("SAME_LOWER"), dilations: attr.ints([1, 1, 2]) } },
  { op: "GlobalAveragePool", inputs: [rand("float32", [2, 3, 7])] },
  { op: "GlobalMaxPool", inputs: [rand("float32", [1, 3, 2, 3, 4])] },
])

run("Softmax along any axis", (): Case[] => [
  { op: "Softmax", inputs: [rand("float32", [2, 3, 4])], attrs: { axis: attr.int(1) } },
  { op: "LogSoftmax", inputs: [rand("float32", [2, 3, 4])], attrs: { axis: attr.int(0) } },
  { op: "Softmax", inputs: [rand("float32", [2, 3, 4])], attrs: { axis: attr.int(1) }, opset: 11 },
  { op: "LogSoftmax", inputs: [rand("float32", [2, 3, 4])], attrs: { axis: attr.int(0) }, opset: 11 },
])

run("scans, Lp / mean-variance normalization, Trilu", (): Case[] => [
  ...[0, 1].flatMap((exclusive) =>
    [0, 1].map((reverse): Case => ({ op: "CumSum", inputs: [rand("float32", [3, 4]), undefined], consts: { 1: ints64([1]) }, attrs: { exclusive: attr.int(exclusive), reverse: attr.int(reverse) } })),
  ),
  { op: "CumSum", inputs: [rand("int32", [3, 4], -9, 9), undefined], consts: { 1: tensor("int32", [], Int32Array.from([-2])) } },
  { op: "CumProd", inputs: [rand("float32", [2, 5], 0.5, 1.5), undefined], consts: { 1: ints64([1]) }, attrs: { reverse: attr.int(1) } },
  { op: "LpNormalization", inputs: [rand("float32", [3, 4, 2])], attrs: { axis: attr.int(1), p: attr.int(1) } },
  { op: "LpNormalization", inputs: [tensor("float32", [2, 3], Float32Array.from([0, 0, 0, 1, 2, 3]))] },
  { op: "MeanVarianceNormalization", inputs: [rand("float32", [2, 3, 2, 2])] },
  { op: "MeanVarianceNormalization", inputs: [rand("float32", [2, 3, 4])], attrs: { axes: attr.ints([1]) } },
  { op: "Trilu", inputs: [rand("float32", [2, 4, 5])] },
  { op: "Trilu", inputs: [rand("int64", [4, 5], -9, 9), undefined], consts: { 1: ints64([-1]) }, attrs: { upper: attr.int(0) } },
  { op: "Trilu", inputs: [rand("float32", [3, 5]), ints64([2])] },
])

run("MatMul with batches and 1-D operands", (): Case[] => [
  { op: "MatMul", inputs: [rand("float32", [2, 1, 3, 4, 5]), rand("float32", [3, 5, 2])] },
  { op: "MatMul", inputs: [rand("float32", [5]), rand("float32", [2, 5, 3])] },
  { op: "MatMul", inputs: [rand("float32", [2, 4, 5]), rand("float32", [5])] },
  { op: "MatMul", inputs: [rand("int32", [3, 4], -9, 9), rand("int32", [4, 2], -9, 9)] },
])

run("RMSNormalization, Hardmax, ConstantOfShape, EyeLike", (): Case[] => [
  { op: "RMSNormalization", inputs: [rand("float32", [2, 3, 4]), rand("float32", [4])] },
  { op: "RMSNormalization", inputs: [rand("float32", [2, 3, 4]), rand("float32", [3, 4])], attrs: { axis: attr.int(1) }, opset: 23 },
  { op: "Hardmax", inputs: [tensor("float32", [3, 4, 2], Float32Array.from({ length: 24 }, () => rng.int(-1, 1)))], attrs: { axis: attr.int(1) } },
  { op: "Hardmax", inputs: [tensor("float32", [3, 3], Float32Array.from([NaN, 1, 2, 1, NaN, 2, 3, 3, NaN]))] },
  { op: "Hardmax", inputs: [rand("float32", [2, 3, 4])], attrs: { axis: attr.int(1) }, opset: 11 },
  { op: "ConstantOfShape", inputs: [undefined], consts: { 0: ints64([2, 3]) }, attrs: { value: attr.tensor(tensor("int32", [1], Int32Array.from([7]))) } },
  { op: "EyeLike", inputs: [rand("float32", [3, 5])], attrs: { k: attr.int(1), dtype: attr.int(7) } },
])

run("QuantizeLinear / DequantizeLinear", (): Case[] => [
  { op: "QuantizeLinear", inputs: [rand("float32", [2, 3, 4], -300, 300), tensor("float32", [], Float32Array.from([1.5])), tensor("uint8", [], Uint8Array.from([128]))] },
  { op: "QuantizeLinear", inputs: [tensor("float32", [6], Float32Array.from([0.5, 1.5, 2.5, -0.5, NaN, 1e9])), tensor("float32", [], Float32Array.from([1])), tensor("int8", [], Int8Array.from([0]))] },
  { op: "QuantizeLinear", inputs: [rand("float32", [2, 3, 4], -50, 50), rand("float32", [3], 0.5, 2), tensor("int16", [3], Int16Array.from([-5, 0, 7]))], attrs: { axis: attr.int(1) } },
  { op: "QuantizeLinear", inputs: [rand("float32", [2, 6], -50, 50), rand("float32", [2, 3], 0.5, 2)], attrs: { axis: attr.int(1), block_size: attr.int(2) }, opset: 21 },
  { op: "DequantizeLinear", inputs: [rand("int8", [2, 3, 4], -128, 127), rand("float32", [3], 0.01, 1), tensor("int8", [3], Int8Array.from([-5, 0, 7]))] },
  { op: "DequantizeLinear", inputs: [rand("int32", [5], -1e8, 1e8), tensor("float32", [], Float32Array.from([0.37]))] },
  { op: "DequantizeLinear", inputs: [rand("uint8", [2, 4], 0, 255), rand("float32", [1, 4], 0.01, 1)], attrs: { axis: attr.int(0), block_size: attr.int(2) }, opset: 21 },
])

const t8 = (dtype: "int8" | "uint8" | "int32", shape: readonly number[], xs: readonly number[]) => tensor(dtype, shape, dtype === "int8" ? Int8Array.from(xs) : dtype === "uint8" ? Uint8Array.from(xs) : Int32Array.from(xs))
const f32t = (shape: readonly number[], xs: readonly number[]) => tensor("float32", shape, Float32Array.from(xs))
run("integer and quantized products (op-library-quant-int.ts)", (): Case[] => [
  // per-tensor zero points, padding: a padded tap holds x's zero point (contributes 0)
  { op: "ConvInteger", inputs: [rand("uint8", [1, 3, 5, 5], 0, 255), rand("uint8", [4, 3, 3, 3], 0, 255), t8("uint8", [], [130]), t8("uint8", [], [121])], attrs: { pads: attr.ints([1, 1, 1, 1]) } },
  // per-output-channel weight zero points, grouped, strided
  { op: "ConvInteger", inputs: [rand("int8", [2, 4, 6, 6], -128, 127), rand("int8", [6, 2, 2, 2], -128, 127), t8("int8", [], [-7]), t8("int8", [6], [1, -2, 3, 0, 5, -6])], attrs: { group: attr.int(2), strides: attr.ints([2, 2]) } },
  { op: "MatMulInteger", inputs: [rand("uint8", [2, 3, 7], 0, 255), rand("int8", [7, 5], -128, 127), t8("uint8", [3], [12, 200, 128]), t8("int8", [5], [0, 1, -1, 3, 4])] },
  { op: "MatMulInteger", inputs: [rand("int8", [4, 9], -128, 127), rand("uint8", [2, 9, 3], 0, 255)] },
  {
    op: "QLinearConv",
    inputs: [rand("uint8", [1, 4, 6, 6], 0, 255), f32t([], [0.02]), t8("uint8", [], [121]), rand("int8", [5, 4, 3, 3], -128, 127), rand("float32", [5], 0.002, 0.02), t8("int8", [5], [0, 0, 0, 0, 0]), f32t([], [0.11]), t8("uint8", [], [17]), rand("int32", [5], -3000, 3000)],
    attrs: { pads: attr.ints([1, 1, 1, 1]) },
  },
  {
    op: "QLinearConv",
    inputs: [rand("int8", [1, 6, 5, 5], -128, 127), f32t([], [0.031]), t8("int8", [], [-3]), rand("int8", [6, 1, 3, 3], -128, 127), f32t([], [0.007]), t8("int8", [], [0]), f32t([], [0.05]), t8("int8", [], [4])],
    attrs: { group: attr.int(6), strides: attr.ints([2, 2]), pads: attr.ints([1, 1, 1, 1]) },
  },
  { op: "QLinearMatMul", inputs: [rand("uint8", [2, 3, 8], 0, 255), f32t([], [0.03]), t8("uint8", [], [111]), rand("int8", [8, 6], -128, 127), rand("float32", [6], 0.002, 0.02), t8("int8", [6], [0, 0, 0, 0, 0, 0]), f32t([], [0.09]), t8("uint8", [], [130])] },
  { op: "QLinearMatMul", inputs: [rand("int8", [5, 8], -128, 127), f32t([], [0.03]), t8("int8", [], [2]), rand("int8", [8, 6], -128, 127), f32t([], [0.01]), t8("int8", [], [0]), f32t([], [0.04]), t8("int8", [], [-1])] },
  { op: "DynamicQuantizeLinear", inputs: [rand("float32", [3, 7], -4, 9)] },
  { op: "DynamicQuantizeLinear", inputs: [rand("float32", [10], 1, 3)] },
  { op: "DynamicQuantizeLinear", inputs: [f32t([4], [0, 0, 0, 0])] },
])

const targets = (shape: readonly number[], C: number, ignore?: number) =>
  tensor("int64", shape, Float64Array.from({ length: size(shape) }, () => (ignore !== undefined && rng.next() < 0.3 ? ignore : rng.int(0, C - 1))))
run("losses", (): Case[] => [
  ...["none", "sum", "mean"].flatMap((reduction): Case[] => [
    { op: "NegativeLogLikelihoodLoss", inputs: [rand("float32", [3, 4]), targets([3], 4)], attrs: { reduction: attr.str(reduction) } },
    { op: "NegativeLogLikelihoodLoss", inputs: [rand("float32", [2, 4, 3]), targets([2, 3], 4, 1), rand("float32", [4], 0.1, 1)], attrs: { reduction: attr.str(reduction), ignore_index: attr.int(1) } },
    { op: "SoftmaxCrossEntropyLoss", inputs: [rand("float32", [3, 5, 2]), targets([3, 2], 5, -1)], attrs: { reduction: attr.str(reduction), ignore_index: attr.int(-1) } },
    { op: "SoftmaxCrossEntropyLoss", inputs: [rand("float32", [4, 3]), targets([4], 3), rand("float32", [3], 0.1, 1)], attrs: { reduction: attr.str(reduction) } },
  ]),
])

run("Attention (Y only)", (): Case[] => [
  { op: "Attention", inputs: [rand("float32", [2, 3, 4, 8]), rand("float32", [2, 3, 6, 8]), rand("float32", [2, 3, 6, 5])], opset: 23 },
  { op: "Attention", inputs: [rand("float32", [2, 4, 12]), rand("float32", [2, 5, 6]), rand("float32", [2, 5, 4])], attrs: { q_num_heads: attr.int(4), kv_num_heads: attr.int(2), is_causal: attr.int(1) }, opset: 23 },
  { op: "Attention", inputs: [rand("float32", [1, 2, 3, 4]), rand("float32", [1, 2, 5, 4]), rand("float32", [1, 2, 5, 4]), rand("bool", [3, 4])], attrs: { softcap: attr.float(2), scale: attr.float(0.3) }, opset: 23 },
  { op: "Attention", inputs: [rand("float32", [1, 2, 3, 4]), rand("float32", [1, 2, 3, 4]), rand("float32", [1, 2, 3, 4]), rand("float32", [2, 1, 5]), rand("float32", [1, 2, 2, 4]), rand("float32", [1, 2, 2, 4])], attrs: { is_causal: attr.int(1) }, opset: 23 },
  { op: "Attention", inputs: [rand("float32", [2, 1, 3, 4]), rand("float32", [2, 1, 5, 4]), rand("float32", [2, 1, 5, 4]), undefined, undefined, undefined, tensor("int64", [2], Float64Array.from([3, 5]))], attrs: { is_causal: attr.int(1) }, opset: 24 },
  { op: "Attention", inputs: [rand("float32", [1, 1, 2, 4]), rand("float32", [1, 1, 3, 4]), rand("float32", [1, 1, 3, 4]), tensor("bool", [2, 3], Uint8Array.from([0, 0, 0, 1, 0, 1]))], opset: 23 },
])

run("RotaryEmbedding, SwiGLU", (): Case[] => [
  { op: "RotaryEmbedding", inputs: [rand("float32", [2, 3, 4, 8]), rand("float32", [2, 4, 4]), rand("float32", [2, 4, 4])], opset: 23 },
  { op: "RotaryEmbedding", inputs: [rand("float32", [2, 4, 12]), rand("float32", [2, 4, 2]), rand("float32", [2, 4, 2])], attrs: { num_heads: attr.int(2), rotary_embedding_dim: attr.int(4), interleaved: attr.int(1) }, opset: 23 },
  { op: "RotaryEmbedding", inputs: [rand("float32", [1, 2, 3, 6]), rand("float32", [5, 3]), rand("float32", [5, 3]), tensor("int64", [1, 3], Float64Array.from([4, 0, 2]))], opset: 23 },
  { op: "SwiGLU", inputs: [rand("float32", [3, 4]), rand("float32", [3, 4])], attrs: { alpha: attr.float(1.5) }, opset: 28 },
])

run("LpPool", (): Case[] => [
  { op: "LpPool", inputs: [rand("float32", [1, 2, 5, 5])], attrs: { kernel_shape: attr.ints([2, 3]), p: attr.int(3), pads: attr.ints([1, 0, 1, 1]) } },
  { op: "LpPool", inputs: [rand("float32", [2, 2, 7])], attrs: { kernel_shape: attr.ints([3]), strides: attr.ints([2]) } },
  { op: "GlobalLpPool", inputs: [rand("float32", [2, 3, 4, 2])], attrs: { p: attr.int(1) } },
])

run("GridSample", (): Case[] =>
  ["nearest", "linear", "cubic"].flatMap((mode) =>
    ["zeros", "border", "reflection"].flatMap((pad) =>
      [0, 1].map((align): Case => ({
        op: "GridSample",
        inputs: [rand("float32", [1, 2, 4, 5]), rand("float32", [1, 3, 2, 2], -1.3, 1.3)],
        attrs: { mode: attr.str(mode), padding_mode: attr.str(pad), align_corners: attr.int(align) },
        opset: 20,
      })),
    ),
  ).concat([{ op: "GridSample", inputs: [rand("float32", [2, 1, 3, 4, 2]), rand("float32", [2, 2, 2, 3, 3], -1.2, 1.2)], attrs: { mode: attr.str("linear"), padding_mode: attr.str("reflection") }, opset: 20 }]),
)

run("OneHot, BitwiseNot, BitShift", (): Case[] => [
  { op: "OneHot", inputs: [tensor("int64", [2, 3], Float64Array.from([0, 2, -1, 5, 1, -4])), undefined, tensor("float32", [2], Float32Array.from([-1, 3]))], consts: { 1: tensor("int64", [], Float64Array.from([4])) } },
  { op: "OneHot", inputs: [tensor("int32", [3], Int32Array.from([1, 0, 2])), undefined, tensor("int32", [2], Int32Array.from([0, 1]))], consts: { 1: tensor("float32", [1], Float32Array.from([3.7])) }, attrs: { axis: attr.int(0) } },
  ...(["int8", "int32", "int64", "uint8", "uint16", "uint32"] as const).map((d): Case => ({ op: "BitwiseNot", inputs: [rand(d, [7], d.startsWith("u") ? 0 : -100, 100)] })),
  ...(["uint8", "uint16"] as const).map((d): Case => ({ op: "BitShift", inputs: [rand(d, [9], 0, 255), rand(d, [9], 0, 17)], attrs: { direction: attr.str("LEFT") } })),
  { op: "BitShift", inputs: [tensor("uint32", [4], Uint32Array.from([0xffffffff, 123456789, 1, 3])), tensor("uint32", [4], Uint32Array.from([31, 7, 32, 0]))], attrs: { direction: attr.str("LEFT") } },
  { op: "BitShift", inputs: [tensor("uint64", [3], Float64Array.from([2 ** 52 + 1, 12345, 1])), tensor("uint64", [3], Float64Array.from([20, 40, 64]))], attrs: { direction: attr.str("LEFT") } },
  { op: "BitShift", inputs: [tensor("uint64", [3], Float64Array.from([2 ** 60, 12345, 1])), tensor("uint64", [3], Float64Array.from([20, 3, 64]))], attrs: { direction: attr.str("RIGHT") } },
  ...(["uint8", "uint32"] as const).map((d): Case => ({ op: "BitShift", inputs: [rand(d, [9], 0, 250), rand(d, [9], 0, 9)], attrs: { direction: attr.str("RIGHT") } })),
])

run("bitwise And / Or / Xor", (): Case[] =>
  ["BitwiseAnd", "BitwiseOr", "BitwiseXor"].flatMap((op) =>
    (["int8", "uint8", "int16", "int32", "uint32"] as const).map((d): Case => {
      const [lo, hi] = d === "int8" ? [-128, 127] : d === "uint8" ? [0, 255] : d === "int16" ? [-32768, 32767] : d === "int32" ? [-(2 ** 31), 2 ** 31 - 1] : [0, 2 ** 32 - 1]
      return { op, inputs: [rand(d, [3, 4], lo, hi), rand(d, [4], lo, hi)] }
    }),
  ),
)

run("GroupNormalization, InstanceNormalization", (): Case[] => [
  { op: "GroupNormalization", inputs: [rand("float32", [2, 6, 3, 2]), rand("float32", [6]), rand("float32", [6])], attrs: { num_groups: attr.int(3) }, opset: 21 },
  { op: "GroupNormalization", inputs: [rand("float32", [2, 4, 5]), rand("float32", [2]), rand("float32", [2])], attrs: { num_groups: attr.int(2), epsilon: attr.float(0.01) }, opset: 18 },
  { op: "InstanceNormalization", inputs: [rand("float32", [2, 3, 5]), rand("float32", [1]), rand("float32", [3])] },
])

run("GatherND", (): Case[] => [
  { op: "GatherND", inputs: [rand("float32", [3, 4, 2]), tensor("int64", [2, 2], Float64Array.from([0, 1, 2, -1]))] },
  { op: "GatherND", inputs: [rand("int32", [3, 4], -9, 9), tensor("int64", [2, 1, 2], Float64Array.from([0, 1, 2, 3]))] },
  { op: "GatherND", inputs: [rand("float32", [2, 3, 4]), tensor("int64", [2, 2, 1], Float64Array.from([1, 0, 2, 1]))], attrs: { batch_dims: attr.int(1) } },
])

run("Einsum", (): Case[] => [
  { op: "Einsum", inputs: [rand("float32", [2, 3]), rand("float32", [3, 4])], attrs: { equation: attr.str("ij,jk->ik") } },
  { op: "Einsum", inputs: [rand("float32", [2, 3, 4]), rand("float32", [2, 4, 5])], attrs: { equation: attr.str("bij,bjk->bik") } },
  { op: "Einsum", inputs: [rand("float32", [3, 3])], attrs: { equation: attr.str("ii->i") } },
  { op: "Einsum", inputs: [rand("float32", [3, 3])], attrs: { equation: attr.str("ii") } },
  { op: "Einsum", inputs: [rand("float32", [2, 3, 4])], attrs: { equation: attr.str("...ij->...ji") } },
  { op: "Einsum", inputs: [rand("float32", [2, 1, 4]), rand("float32", [3, 4]), rand("float32", [4])], attrs: { equation: attr.str("...j,kj,j->...k") } },
  { op: "Einsum", inputs: [rand("int32", [3, 4], -5, 5), rand("int32", [4], -5, 5)], attrs: { equation: attr.str("ij,j") } },
])

// Split computes every output (a multi-output op): each one equals the evaluator's, on js and
// through every group fusion makes of it (opt level 3: Split fused with its neighbours)
describe("Split, each output compiled", () => {
  const cases: { readonly x: Tensor; readonly attrs: Record<string, AttrValue>; readonly split?: readonly number[]; readonly outputs: number; readonly opset: number }[] = [
    { x: rand("float32", [7, 3]), attrs: { split: attr.ints([2, 5]) }, outputs: 2, opset: 11 },
    { x: rand("float32", [4, 5]), attrs: { split: attr.ints([1, 3]) }, outputs: 2, opset: 11 },
    { x: rand("float32", [2, 9, 4]), attrs: { axis: attr.int(1) }, split: [4, 1, 4], outputs: 3, opset: 13 },
    { x: rand("float32", [3, 7]), attrs: { axis: attr.int(-1), num_outputs: attr.int(3) }, outputs: 3, opset: 18 },
    { x: rand("int64", [6, 2], -5, 5), attrs: {}, outputs: 3, opset: 13 },
  ]
  cases.forEach((c, k) =>
    it(`Split #${k}`, async () => {
      const ys = Array.from({ length: c.outputs }, (_, j) => `y${j}`)
      const initializers = new Map(c.split ? [["split", ints64(c.split)] as const] : [])
      // a Relu after each float output, so fusion has a neighbour to join
      const float = c.x.dtype === "float32"
      const nodes = [node("Split", ["x", ...(c.split ? ["split"] : [])], ys, c.attrs), ...(float ? ys.map((y) => node("Relu", [y], [`r${y}`], {})) : [])]
      const outs = float ? ys.map((y) => `r${y}`) : ys
      const probe = makeGraph({ opset: c.opset, inputs: [{ name: "x", type: { dtype: c.x.dtype, shape: c.x.shape } }], outputs: outs.map((name) => ({ name, type: { dtype: c.x.dtype, shape: [] } })), initializers, nodes })
      const feeds = new Map([["x", c.x]])
      const want = runGraph(probe, feeds)
      const graph = { ...probe, outputs: outs.map((name, j) => ({ name, type: { dtype: want[j].dtype, shape: want[j].shape } })) }
      for (const optLevel of [0, 3]) {
        const program = await Effect.runPromise(compileGraph(graph, makeTarget("js"), { optLevel }))
        expect(program.kernels.filter((x) => x.kind !== "compiled")).toEqual([])
        const got = (await Effect.runPromise(loadProgram(program, makeTarget("js")))).run(feeds)
        outs.forEach((name, j) => {
          expect(got.get(name)!.shape).toEqual(want[j].shape)
          expect(Array.from(got.get(name)!.data)).toEqual(Array.from(want[j].data))
        })
      }
    }),
  )
})
