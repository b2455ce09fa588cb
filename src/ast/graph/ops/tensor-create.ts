// Ops that make tensors: Constant (every value_* form), ConstantOfShape, Range and EyeLike.
import { A, attrs } from "../attrs.js"
import { allocate, ONNX_DTYPE, ONNX_DTYPE_NAME, type DType } from "../dtype.js"
import { check, defineOp, fail, unsupported, type AnyOpDef } from "../op.js"
import { exactAt, fromArray, scalar, tensor, type Tensor } from "../tensor.js"
import { isWide } from "../int64.js"
import { rangeCountBig } from "./exact-int64.js"
import { inputType, req } from "./util.js"
import { constInts, filled, intValues, scalarOf, staticLength, symDim, symShape } from "./tensor-common.js"

// ---------------------------------------------------------------------------------------------
// Constant

const constantAttrs = attrs({
  value: A.optTensor(),
  value_float: A.optFloat(),
  value_floats: A.optFloats(),
  value_int: A.optInt(),
  value_ints: A.optInts(),
  value_string: A.optStr(),
  value_strings: A.optStrs(),
})

type ConstantAttrs = (typeof constantAttrs)["_A"]

/** The one value a Constant node's attributes give. */
const constantValue = (a: ConstantAttrs): Tensor => {
  const given = (Object.keys(a) as (keyof ConstantAttrs)[]).filter((k) => a[k] !== undefined)
  check(given.length === 1, () => (given.length ? `has ${given.join(", ")}: exactly one value attribute is allowed` : "needs one of value, value_float(s), value_int(s), value_string(s), sparse_value"))
  if (a.value) return a.value
  if (a.value_float !== undefined) return scalar("float32", a.value_float)
  if (a.value_floats) return fromArray("float32", [a.value_floats.length], a.value_floats)
  if (a.value_int !== undefined) return scalar("int64", a.value_int)
  if (a.value_ints) return fromArray("int64", [a.value_ints.length], a.value_ints)
  return unsupported(`${given[0]}: string tensors are not supported`)
}

const Constant = defineOp({
  attrs: constantAttrs,
  inputs: [0, 0],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const v = constantValue(ctx.attrs)
    return [{ dtype: v.dtype, shape: v.shape }]
  },
  kernel: (ctx) => [constantValue(ctx.attrs)],
})

// ---------------------------------------------------------------------------------------------
// ConstantOfShape

const fillValue = (value: Tensor | undefined): { dtype: DType; v: number } => {
  if (!value) return { dtype: "float32", v: 0 }
  check(value.data.length === 1, () => `value must have one element, got shape [${value.shape.join(", ")}]`)
  return { dtype: value.dtype, v: value.data[0] }
}

const dimsOf = (shape: readonly number[]): number[] => {
  check(shape.every((d) => Number.isInteger(d) && d >= 0), () => `shape [${shape.join(", ")}] has a negative dim`)
  return [...shape]
}

const ConstantOfShape = defineOp({
  attrs: attrs({ value: A.optTensor() }),
  inputs: [1, 1],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const { dtype } = fillValue(ctx.attrs.value)
    const shape = constInts(ctx, 0, "shape")
    if (shape) return [{ dtype, shape: dimsOf(shape) }]
    const n = staticLength(ctx.inputs[0]) ?? unsupported("the shape input's length is not static, so the output rank is unknown")
    return [{ dtype, shape: symShape(ctx, 0, n) }]
  },
  kernel: (ctx) => {
    const { dtype, v } = fillValue(ctx.attrs.value)
    return [filled(dtype, dimsOf(intValues(req(ctx.inputs, 0, "shape"), "shape")), v)]
  },
})

// ---------------------------------------------------------------------------------------------
// Range

const rangeCount = (start: number, limit: number, delta: number): number => {
  check(delta !== 0, "delta must not be 0")
  const n = Math.ceil((limit - start) / delta)
  check(Number.isFinite(n), () => `range(${start}, ${limit}, ${delta}) is not finite`)
  return Math.max(n, 0)
}

const Range = defineOp({
  attrs: attrs({}),
  inputs: [3, 3],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const t = inputType(ctx, 0)
    const [s, l, d] = ctx.values
    // (int64 / uint64 counted exactly, as their kernel does: ops/exact-int64.ts)
    if (s && l && d && isWide(t.dtype) && s.dtype === t.dtype && l.dtype === t.dtype && d.dtype === t.dtype && s.data.length === 1 && l.data.length === 1 && d.data.length === 1)
      return [{ dtype: t.dtype, shape: [Number(rangeCountBig(exactAt(s, 0), exactAt(l, 0), exactAt(d, 0)))] }]
    if (s && l && d) return [{ dtype: t.dtype, shape: [rangeCount(scalarOf(s, "start"), scalarOf(l, "limit"), scalarOf(d, "delta"))] }]
    return [{ dtype: t.dtype, shape: [symDim(ctx, 0, 0)] }]
  },
  kernel: (ctx) => {
    const [s, l, d] = [req(ctx.inputs, 0, "start"), req(ctx.inputs, 1, "limit"), req(ctx.inputs, 2, "delta")]
    check(s.dtype === l.dtype && s.dtype === d.dtype, () => `start, limit and delta have dtypes ${s.dtype}, ${l.dtype}, ${d.dtype}`)
    const start = scalarOf(s, "start")
    const delta = scalarOf(d, "delta")
    const n = rangeCount(start, scalarOf(l, "limit"), delta)
    const out = allocate(s.dtype, n)
    for (let i = 0; i < n; i++) out[i] = start + i * delta
    return [tensor(s.dtype, [n], out)]
  },
})

// ---------------------------------------------------------------------------------------------
// EyeLike

/** A dtype attribute (ONNX TensorProto code) as our DType, unsupported for types we lack. */
const dtypeAttr = (code: number): DType => {
  const d = ONNX_DTYPE[code]
  if (d) return d
  const name = ONNX_DTYPE_NAME[code]
  return name ? unsupported(`dtype ${name} is not supported`) : fail(`dtype code ${code} is not an ONNX tensor type`)
}

const EyeLike = defineOp({
  attrs: attrs({ dtype: A.optInt(), k: A.int(0) }),
  inputs: [1, 1],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    check(x.shape.length === 2, () => `input must have rank 2, got [${x.shape.join(", ")}]`)
    return [{ dtype: ctx.attrs.dtype === undefined ? x.dtype : dtypeAttr(ctx.attrs.dtype), shape: x.shape }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    check(x.shape.length === 2, () => `input must have rank 2, got [${x.shape.join(", ")}]`)
    const dtype = ctx.attrs.dtype === undefined ? x.dtype : dtypeAttr(ctx.attrs.dtype)
    const [n, m] = x.shape
    const k = ctx.attrs.k
    const out = allocate(dtype, n * m)
    for (let i = Math.max(0, -k); i < n && i + k < m; i++) out[i * m + i + k] = 1
    return [tensor(dtype, [n, m], out)]
  },
})

export const tensorCreateOps = {
  Constant,
  ConstantOfShape,
  Range,
  EyeLike,
} satisfies Record<string, AnyOpDef>
