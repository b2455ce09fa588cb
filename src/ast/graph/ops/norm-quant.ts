// Linear quantization: QuantizeLinear, DequantizeLinear (per tensor, per axis, or blocked along
// one axis) and DynamicQuantizeLinear. Arithmetic follows ONNX's reference, including the float
// type each step is rounded to; quantized values are rounded half to even and saturated.
import { A, attrs } from "../attrs.js"
import { allocate, converter, isFloat, isInteger, ONNX_DTYPE, ONNX_DTYPE_NAME, roundBF16, roundF16, type DType } from "../dtype.js"
import { check, defineOp, fail, unsupported, type AnyOpDef, type ValueType } from "../op.js"
import { normAxis, scalar, showShape, sizeOf, tensor, type Tensor } from "../tensor.js"
import { req } from "./util.js"

/** Round half to even (numpy's rint). */
const rint = (x: number): number => {
  const r = Math.round(x)
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r
}

/** The integer types QuantizeLinear produces, with their ranges. */
const QUANT_RANGE: Partial<Record<DType, readonly [number, number]>> = {
  uint8: [0, 255],
  int8: [-128, 127],
  uint16: [0, 65535],
  int16: [-32768, 32767],
}

/** The dtype an `output_dtype` / `precision` attribute names, or an error naming the type we lack. */
const namedType = (code: number, what: string): DType =>
  ONNX_DTYPE[code] ??
  (ONNX_DTYPE_NAME[code] ? unsupported(`${what} ${ONNX_DTYPE_NAME[code]} (no such element type in Tessera)`) : fail(`${what} ${code} is not an ONNX element type`))

/** Rounding to the float type numpy computes `a op b` in for tensors of dtypes a and b. */
const promoted = (a: DType, b: DType): ((x: number) => number) => {
  if (a === b && a !== "float64" && isFloat(a)) return a === "float16" ? roundF16 : a === "bfloat16" ? roundBF16 : Math.fround
  if (a === "float64" || b === "float64" || !isFloat(a) || !isFloat(b)) return (x) => x
  return Math.fround
}

/**
 * For each element of x, the index into the scale / zero point: per tensor (one value: null),
 * per axis (a 1-D tensor of x.shape[axis] values) or blocked (x's shape with ⌈dim / block⌉ on axis).
 */
const quantIndex = (x: readonly number[], s: Tensor, axisAttr: number, block: number): Int32Array | null => {
  if (s.data.length === 1 && (s.shape.length === 0 || block <= 0)) return null
  const axis = normAxis(axisAttr, x.length)
  const dim = x[axis]
  const inner = sizeOf(x.slice(axis + 1))
  const n = sizeOf(x)
  const idx = new Int32Array(n)
  if (block <= 0) {
    check(s.shape.length === 1 && s.shape[0] === dim, () =>
      `per-axis scale of shape ${showShape(s.shape)} must be 1-D with ${dim} values (axis ${axisAttr} of ${showShape(x)})`)
    for (let i = 0; i < n; i++) idx[i] = Math.floor(i / inner) % dim
    return idx
  }
  const blocks = Math.ceil(dim / block)
  check(s.shape.length === x.length && s.shape.every((d, k) => (k === axis ? d === blocks : d === x[k])), () =>
    `blocked scale of shape ${showShape(s.shape)} does not match ${showShape(x)} in blocks of ${block} along axis ${axis}`)
  for (let i = 0; i < n; i++) {
    const o = Math.floor(i / (inner * dim))
    const a = Math.floor(i / inner) % dim
    idx[i] = (o * blocks + Math.floor(a / block)) * inner + (i % inner)
  }
  return idx
}

const checkZeroPoint = (zp: Tensor | undefined, s: Tensor): void => {
  if (zp)
    check(zp.data.length === s.data.length && (zp.data.length === 1 || zp.shape.join() === s.shape.join()), () =>
      `zero point of shape ${showShape(zp.shape)} does not match the scale's ${showShape(s.shape)}`)
}

/** QuantizeLinear's output type: the zero point's, else output_dtype, else uint8. */
const quantizedType = (zp: ValueType | undefined, outputDtype: number): DType => {
  const named = outputDtype !== 0 ? namedType(outputDtype, "output_dtype") : undefined
  if (zp && named) check(zp.dtype === named, () => `output_dtype ${named} differs from the zero point's type ${zp.dtype}`)
  const t = zp?.dtype ?? named ?? "uint8"
  return QUANT_RANGE[t] ? t : fail(`${t} is not a quantized type (uint8, int8, uint16, int16)`)
}

/** x / scale, rounded as the division's float type, rounded half to even, plus zp, saturated. */
const quantize = (x: Tensor, s: Tensor, zp: Tensor | undefined, out: DType, idx: Int32Array | null, div: (v: number) => number): Tensor => {
  const [lo, hi] = QUANT_RANGE[out] ?? fail(`${out} is not a quantized type`)
  const y = allocate(out, x.data.length)
  for (let i = 0; i < x.data.length; i++) {
    const k = idx ? idx[i] : 0
    const q = rint(div(x.data[i] / s.data[k])) + (zp ? zp.data[k] : 0)
    y[i] = q < lo ? lo : q > hi ? hi : q // NaN stores as 0
  }
  return tensor(out, x.shape, y)
}

export const normQuantOps = {
  QuantizeLinear: defineOp({
    // `saturate` concerns float8 outputs only, which Tessera lacks: integer outputs always saturate
    attrs: attrs({ axis: A.int(1), block_size: A.int(0), output_dtype: A.int(0), precision: A.int(0) }),
    inputs: [2, 3],
    outputs: [1, 1],
    kind: "broadcast",
    infer: (ctx) => {
      const x = ctx.inputs[0] ?? fail("input x is required")
      return [{ dtype: quantizedType(ctx.inputs[2], ctx.attrs.output_dtype), shape: x.shape }]
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const s = req(ctx.inputs, 1, "y_scale")
      const zp = ctx.inputs[2]
      check(isFloat(s.dtype), () => `y_scale must be a float tensor, got ${s.dtype}`)
      check(isFloat(x.dtype) || x.dtype === "int32", () => `x must be a float or int32 tensor, got ${x.dtype}`)
      checkZeroPoint(zp, s)
      const out = quantizedType(zp, ctx.attrs.output_dtype)
      const idx = quantIndex(x.shape, s, ctx.attrs.axis, ctx.attrs.block_size)
      const p = ctx.attrs.precision !== 0 ? namedType(ctx.attrs.precision, "precision") : undefined
      if (p) check(isFloat(p), () => `precision must name a float type, got ${p}`)
      return [quantize(x, s, zp, out, idx, p ? converter(p) : promoted(x.dtype, s.dtype))]
    },
  }),
  DequantizeLinear: defineOp({
    attrs: attrs({ axis: A.int(1), block_size: A.int(0), output_dtype: A.int(0) }),
    inputs: [2, 3],
    outputs: [1, 1],
    kind: "broadcast",
    infer: (ctx) => {
      const x = ctx.inputs[0] ?? fail("input x is required")
      const s = ctx.inputs[1] ?? fail("input x_scale is required")
      return [{ dtype: ctx.attrs.output_dtype !== 0 ? namedType(ctx.attrs.output_dtype, "output_dtype") : s.dtype, shape: x.shape }]
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const s = req(ctx.inputs, 1, "x_scale")
      const zp = ctx.inputs[2]
      check(isInteger(x.dtype), () => `x must be an integer tensor, got ${x.dtype}`)
      check(isFloat(s.dtype), () => `x_scale must be a float tensor, got ${s.dtype}`)
      if (zp) check(zp.dtype === x.dtype, () => `zero point of type ${zp.dtype} differs from x's ${x.dtype}`)
      checkZeroPoint(zp, s)
      const out = ctx.attrs.output_dtype !== 0 ? namedType(ctx.attrs.output_dtype, "output_dtype") : s.dtype
      const idx = quantIndex(x.shape, s, ctx.attrs.axis, ctx.attrs.block_size)
      // as ONNX's reference: x in float32 minus the zero point, times the scale; in float32 unless
      // numpy widens (int32 zero points, float64 scales), then stored in the output type
      const wide = s.dtype === "float64" || x.dtype === "int32" || x.dtype === "uint32" || x.dtype === "int64" || x.dtype === "uint64"
      const conv = converter(out)
      const y = allocate(out, x.data.length)
      for (let i = 0; i < x.data.length; i++) {
        const k = idx ? idx[i] : 0
        const v = (Math.fround(x.data[i]) - (zp ? zp.data[k] : 0)) * s.data[k]
        y[i] = conv(wide ? v : Math.fround(v))
      }
      return [tensor(out, x.shape, y)]
    },
  }),
  DynamicQuantizeLinear: defineOp({
    attrs: attrs({}),
    inputs: [1, 1],
    outputs: [1, 3],
    kind: "opaque",
    infer: (ctx) => {
      const x = ctx.inputs[0] ?? fail("input x is required")
      const outs: ValueType[] = [{ dtype: "uint8", shape: x.shape }, { dtype: x.dtype, shape: [] }, { dtype: "uint8", shape: [] }]
      return outs.slice(0, ctx.outputs)
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      check(isFloat(x.dtype), () => `x must be a float tensor, got ${x.dtype}`)
      check(x.data.length > 0, "DynamicQuantizeLinear needs a non-empty input (its range is min/max of x)")
      // ONNX's reference, step by step in float32: the range [min(0, min x), max(0, max x)] over 0..255
      let max = 0
      let min = 0
      for (let i = 0; i < x.data.length; i++) {
        const v = x.data[i]
        if (v > max || Number.isNaN(v)) max = v
        if (v < min || Number.isNaN(v)) min = v
      }
      const f = Math.fround
      const scale = max === min ? 1 : f(f(f(max) - f(min)) / 255)
      const zpf = f(0 - f(f(min) / scale))
      const zp = rint(Math.max(0, Math.min(255, zpf)))
      const y = new Uint8Array(x.data.length)
      for (let i = 0; i < x.data.length; i++) {
        const q = rint(f(x.data[i] / scale)) + zp
        y[i] = q < 0 ? 0 : q > 255 ? 255 : q
      }
      return [tensor("uint8", x.shape, y), scalar(x.dtype, scale), scalar("uint8", zp)].slice(0, ctx.outputs)
    },
  }),
} satisfies Record<string, AnyOpDef>
