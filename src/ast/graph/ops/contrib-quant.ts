// onnxruntime's com.microsoft quantized ops (the QOperator format its quantization tool writes for
// CNNs): QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearGlobalAveragePool,
// QLinearAveragePool, QLinearConcat, QLinearWhere, QLinearSoftmax and QGemm (the last two in
// contrib-quant-softmax.ts / contrib-quant-gemm.ts), with the inputs and attributes of
// onnxruntime's docs/ContribOperators.md. Every scale is per tensor (QGemm's B: per tensor or per
// column); the arithmetic is onnxruntime's: scale ratios, dequantized values and products in
// float32, rounded half to even, plus the zero point, saturated.
import { A, attrs } from "../attrs.js"
import { allocate, type DType } from "../dtype.js"
import { check, defineOp, fail, type AnyOpDef, type Dim, type InferCtx, type ValueType } from "../op.js"
import { broadcastIndex, broadcastShapes, sizeOf, tensor, type Tensor } from "../tensor.js"
import {
  applyTable,
  checkParamTypes,
  f32,
  lookupTable,
  permute,
  quantType,
  requantize,
  scaleOf,
  toChannelsFirst,
  toChannelsLast,
  zeroPointOf,
} from "./contrib-quant-common.js"
import { AUTO_PADS, type AutoPad } from "./nn-common.js"
import { check8bit } from "./nn-quant.js"
import { poolOps } from "./nn-pool.js"
import { tensorMoveOps } from "./tensor-move.js"
import { arity, broadcastDims, req } from "./util.js"
import { QGemm } from "./contrib-quant-gemm.js"
import { QLinearSoftmax } from "./contrib-quant-softmax.js"

// ---------------------------------------------------------------------------------------------
// QLinearAdd, QLinearMul: A, A_scale, A_zero_point?, B, B_scale, B_zero_point?, C_scale, C_zero_point?

const binaryInfer = (ctx: InferCtx<unknown>): ValueType[] => {
  const a = quantType(ctx, 0, "A")
  const b = quantType(ctx, 3, "B")
  check(a.dtype === b.dtype, () => `A and B must have the same type, got ${a.dtype} and ${b.dtype}`)
  checkParamTypes(ctx, 1, 2, a.dtype, "A")
  checkParamTypes(ctx, 4, 5, a.dtype, "B")
  checkParamTypes(ctx, 6, 7, a.dtype, "C")
  return [{ dtype: a.dtype, shape: broadcastDims(a.shape, b.shape) }]
}

/** Per-tensor params of a binary op's operands and output. */
export interface BinaryParams {
  readonly sa: number
  readonly za: number
  readonly sb: number
  readonly zb: number
  readonly sc: number
  readonly zc: number
}

/**
 * How onnxruntime walks a broadcast: over spans of the output's innermost dims of size > 1, where
 * an operand whose size there is 1 (or that is a single value) is a scalar for the span. Its
 * QLinearAdd kernel folds a scalar operand's product into the fixed part (see qlinearAddRule);
 * the form is the one onnxruntime 1.30's broadcast helper and MLAS's AVX2 kernel pick, measured
 * bit-exact on the cases of test/contrib-quant.test.ts.
 */
export const spanScalars = (a: readonly number[], b: readonly number[], out: readonly number[]): { aScalar: boolean; bScalar: boolean } => {
  const at = (s: readonly number[], k: number) => (k - (out.length - s.length) >= 0 ? s[k - (out.length - s.length)] : 1)
  let d = out.length - 1
  while (d >= 0 && out[d] === 1) d--
  if (d < 0 || sizeOf(a) === 1) return { aScalar: true, bScalar: false }
  if (sizeOf(b) === 1) return { aScalar: false, bScalar: true }
  return { aScalar: at(a, d) === 1, bScalar: at(b, d) === 1 }
}

/** A binary op's value in output units before rounding (raw 8-bit operands in), and the zero point still to add after rounding. */
type BinaryRule = (p: BinaryParams, span: { aScalar: boolean; bScalar: boolean }) => { readonly value: (a: number, b: number) => number; readonly zp: number }

/** x·y + z rounded once to float32 (x an 8-bit integer, y and z float32: the product is exact in double). */
const fma32 = (x: number, y: number, z: number): number => f32(x * y + z)

/**
 * QLinearAdd's fixed part as onnxruntime's MLAS kernel computes it: C_zp − (r1·z1 + r2·z2) with the
 * first product fused into the sum (the compiler contracts it), where (1, 2) is (A, B) — or (B, A)
 * when A is the scalar of its span, since onnxruntime then swaps the operands for the kernel.
 */
export const qlinearAddFixed = (ra: number, za: number, rb: number, zb: number, zc: number, aScalar: boolean): number =>
  aScalar ? f32(zc - fma32(zb, rb, f32(ra * za))) : f32(zc - fma32(za, ra, f32(rb * zb)))

/**
 * QLinearAdd as onnxruntime's MLAS kernel (AVX2) computes it, on the raw operands: the ratios
 * A_scale / C_scale and B_scale / C_scale in float32, the fixed part (qlinearAddFixed), then
 * a·ra + (b·rb + fixed) as two fused multiply-adds; a scalar operand's product is added to the
 * fixed part first (a plain product and sum). The zero point of C is inside the value. Measured
 * bit-exact against onnxruntime 1.30 on a tie it rounds differently in each form (test/contrib-quant.test.ts).
 */
export const qlinearAddRule: BinaryRule = (p, span) => {
  const ra = f32(p.sa / p.sc)
  const rb = f32(p.sb / p.sc)
  const fixed = qlinearAddFixed(ra, p.za, rb, p.zb, p.zc, span.aScalar)
  if (span.aScalar) return { value: (a, b) => fma32(b, rb, f32(fixed + f32(a * ra))), zp: 0 }
  if (span.bScalar) return { value: (a, b) => fma32(a, ra, f32(fixed + f32(b * rb))), zp: 0 }
  return { value: (a, b) => fma32(a, ra, fma32(b, rb, fixed)), zp: 0 }
}

/** QLinearMul: (a − za)(b − zb) (exact) times A_scale·B_scale/C_scale, in float32; C's zero point after rounding. */
export const qlinearMulRule: BinaryRule = (p) => {
  const r = f32(f32(p.sa * p.sb) / p.sc)
  return { value: (a, b) => f32((a - p.za) * (b - p.zb) * r), zp: p.zc }
}

const binaryOp = (rule: BinaryRule) =>
  defineOp({
    attrs: attrs({}),
    inputs: arity.range(7, 8),
    outputs: arity.one,
    kind: "broadcast",
    infer: binaryInfer,
    kernel: ({ inputs }) => {
      const a = req(inputs, 0, "A")
      const b = req(inputs, 3, "B")
      check8bit(a, "A")
      check(a.dtype === b.dtype, () => `A and B must have the same type, got ${a.dtype} and ${b.dtype}`)
      const shape = broadcastShapes(a.shape, b.shape) ?? fail(`shapes [${a.shape.join(", ")}] and [${b.shape.join(", ")}] do not broadcast`)
      const params: BinaryParams = {
        sa: scaleOf(inputs, 1, "A_scale"),
        za: zeroPointOf(inputs, 2, "A_zero_point", a.dtype),
        sb: scaleOf(inputs, 4, "B_scale"),
        zb: zeroPointOf(inputs, 5, "B_zero_point", a.dtype),
        sc: scaleOf(inputs, 6, "C_scale"),
        zc: zeroPointOf(inputs, 7, "C_zero_point", a.dtype),
      }
      const op = rule(params, spanScalars(a.shape, b.shape, shape))
      const ia = broadcastIndex(a.shape, shape)
      const ib = broadcastIndex(b.shape, shape)
      const ad = a.data as ArrayLike<number>
      const bd = b.data as ArrayLike<number>
      const out = allocate(a.dtype, ia.length)
      for (let i = 0; i < ia.length; i++) out[i] = requantize(op.value(ad[ia[i]], bd[ib[i]]), op.zp, a.dtype)
      return [tensor(a.dtype, shape, out)]
    },
  })

// ---------------------------------------------------------------------------------------------
// QLinearSigmoid, QLinearLeakyRelu: X, X_scale, X_zero_point?, Y_scale, Y_zero_point? — a lookup table

const unaryInfer = (ctx: InferCtx<unknown>): ValueType[] => {
  const x = quantType(ctx, 0, "X")
  checkParamTypes(ctx, 1, 2, x.dtype, "X")
  checkParamTypes(ctx, 3, 4, x.dtype, "Y")
  return [x]
}

/** The table of a unary op: quantize(g(dequantize(x))) for every value of X's type. */
export const unaryTable = (inputs: readonly (Tensor | undefined)[], g: (v: number) => number): Int32Array => {
  const x = req(inputs, 0, "X")
  check8bit(x, "X")
  return lookupTable(x.dtype, scaleOf(inputs, 1, "X_scale"), zeroPointOf(inputs, 2, "X_zero_point", x.dtype), scaleOf(inputs, 3, "Y_scale"), zeroPointOf(inputs, 4, "Y_zero_point", x.dtype), g)
}

export const sigmoidF32 = (v: number): number => f32(1 / (1 + Math.exp(-v)))
export const leakyReluF32 = (alpha: number) => (v: number): number => (v >= 0 ? v : f32(v * f32(alpha)))

const QLinearSigmoid = defineOp({
  attrs: attrs({}),
  inputs: arity.range(4, 5),
  outputs: arity.one,
  kind: "elementwise",
  infer: unaryInfer,
  kernel: ({ inputs }) => [applyTable(req(inputs, 0, "X"), unaryTable(inputs, sigmoidF32))],
})

const QLinearLeakyRelu = defineOp({
  attrs: attrs({ alpha: A.float(0.01) }),
  inputs: arity.range(4, 5),
  outputs: arity.one,
  kind: "elementwise",
  infer: unaryInfer,
  kernel: ({ inputs, attrs: a }) => [applyTable(req(inputs, 0, "X"), unaryTable(inputs, leakyReluF32(a.alpha)))],
})

// ---------------------------------------------------------------------------------------------
// Pools: X, x_scale, x_zero_point, y_scale, y_zero_point; channels_last puts C last (N H W C)

const poolInfer = (ctx: InferCtx<unknown>, optionalZp: boolean): ValueType => {
  const x = quantType(ctx, 0, "X")
  check(x.shape.length >= 3, () => `X must have rank 3 or more (N, C and spatial dims), got rank ${x.shape.length}`)
  if (!optionalZp) check(ctx.inputs[2] !== undefined && ctx.inputs[4] !== undefined, "x_zero_point and y_zero_point are required")
  checkParamTypes(ctx, 1, 2, x.dtype, "x")
  checkParamTypes(ctx, 3, 4, x.dtype, "y")
  return x
}

/**
 * QLinearGlobalAveragePool as onnxruntime's MLAS computes it: the integer sum of each channel's
 * values minus size · x_zero_point, times x_scale / (y_scale · size) in float32, requantized.
 */
export const globalAvgScale = (xs: number, ys: number, size: number): number => f32(xs / f32(ys * size))

const QLinearGlobalAveragePool = defineOp({
  attrs: attrs({ channels_last: A.int(0) }),
  inputs: arity.range(5, 5),
  outputs: arity.one,
  kind: "out-elementwise-fusable",
  infer: (ctx) => {
    const x = poolInfer(ctx, false)
    const r = x.shape.length
    const shape: Dim[] = ctx.attrs.channels_last ? [x.shape[0], ...new Array<number>(r - 2).fill(1), x.shape[r - 1]] : [x.shape[0], x.shape[1], ...new Array<number>(r - 2).fill(1)]
    return [{ dtype: x.dtype, shape }]
  },
  kernel: ({ inputs, attrs: a }) => {
    const x0 = req(inputs, 0, "X")
    check8bit(x0, "X")
    const r = x0.shape.length
    const x = a.channels_last ? permute(x0, toChannelsFirst(r)) : x0
    const planes = x.shape[0] * x.shape[1]
    const size = sizeOf(x.shape.slice(2))
    const xz = zeroPointOf(inputs, 2, "x_zero_point", x.dtype)
    const yz = zeroPointOf(inputs, 4, "y_zero_point", x.dtype)
    const scale = globalAvgScale(scaleOf(inputs, 1, "x_scale"), scaleOf(inputs, 3, "y_scale"), size)
    const d = x.data as ArrayLike<number>
    const out = allocate(x.dtype, planes)
    for (let p = 0; p < planes; p++) {
      let acc = 0
      for (let i = p * size; i < (p + 1) * size; i++) acc += d[i]
      out[p] = requantize(f32((acc - xz * size) * scale), yz, x.dtype)
    }
    const y = tensor(x.dtype, [x.shape[0], x.shape[1], ...new Array<number>(r - 2).fill(1)], out)
    return [a.channels_last ? permute(y, toChannelsLast(r)) : y]
  },
})

const avgPool = poolOps.AveragePool

/** QLinearAveragePool's attributes as AveragePool's (no dilations), for the float pool it wraps. */
const floatPoolAttrs = (a: { auto_pad: AutoPad; ceil_mode: number; count_include_pad: number; kernel_shape: readonly number[]; pads?: readonly number[]; strides?: readonly number[] }) => ({
  auto_pad: a.auto_pad,
  ceil_mode: a.ceil_mode,
  count_include_pad: a.count_include_pad,
  kernel_shape: a.kernel_shape,
  pads: a.pads,
  strides: a.strides,
  dilations: undefined,
})

const QLinearAveragePool = defineOp({
  attrs: attrs({
    auto_pad: A.oneOf(AUTO_PADS, "NOTSET"),
    ceil_mode: A.int(0),
    channels_last: A.int(0),
    count_include_pad: A.int(0),
    kernel_shape: A.ints(),
    pads: A.optInts(),
    strides: A.optInts(),
  }),
  inputs: arity.range(4, 5),
  outputs: arity.one,
  kind: "out-elementwise-fusable",
  infer: (ctx) => {
    const x = poolInfer(ctx, true)
    const r = x.shape.length
    const nchw = ctx.attrs.channels_last ? toChannelsFirst(r).map((p) => x.shape[p]) : x.shape
    const [y] = avgPool.infer({ ...ctx, attrs: floatPoolAttrs(ctx.attrs), inputs: [{ dtype: "float32", shape: nchw }], values: [] })
    const shape = ctx.attrs.channels_last ? toChannelsLast(r).map((p) => y.shape[p]) : y.shape
    return [{ dtype: x.dtype, shape }]
  },
  // Dequantize → AveragePool in float → quantize, as the spec defines it (onnxruntime sums the
  // float32 dequantized values in its own order: at most 1 LSB apart)
  kernel: (ctx) => {
    const { inputs, attrs: a } = ctx
    const x0 = req(inputs, 0, "X")
    check8bit(x0, "X")
    const r = x0.shape.length
    const x = a.channels_last ? permute(x0, toChannelsFirst(r)) : x0
    const xs = scaleOf(inputs, 1, "x_scale")
    const xz = zeroPointOf(inputs, 2, "x_zero_point", x.dtype)
    const ys = scaleOf(inputs, 3, "y_scale")
    const yz = zeroPointOf(inputs, 4, "y_zero_point", x.dtype)
    const deq = new Float32Array(x.data.length)
    const d = x.data as ArrayLike<number>
    for (let i = 0; i < d.length; i++) deq[i] = (d[i] - xz) * xs
    const [pooled] = avgPool.kernel({ ...ctx, attrs: floatPoolAttrs(a), inputs: [tensor("float32", x.shape, deq)] })
    const out = allocate(x.dtype, pooled.data.length)
    for (let i = 0; i < out.length; i++) out[i] = requantize(f32((pooled.data[i] as number) / ys), yz, x.dtype)
    const y = tensor(x.dtype, pooled.shape, out)
    return [a.channels_last ? permute(y, toChannelsLast(r)) : y]
  },
})

// ---------------------------------------------------------------------------------------------
// QLinearConcat: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input

const concat = tensorMoveOps.Concat

const QLinearConcat = defineOp({
  attrs: attrs({ axis: A.int() }),
  inputs: [5, Infinity],
  outputs: arity.one,
  kind: "injective",
  infer: (ctx) => {
    check((ctx.inputs.length - 2) % 3 === 0, () => `takes Y_scale, Y_zero_point and (X, X_scale, X_zero_point) triples, got ${ctx.inputs.length} inputs`)
    const yz = ctx.inputs[1] ?? fail("Y_zero_point (input 1) is required")
    check8bit(yz, "Y_zero_point")
    checkParamTypes(ctx, 0, 1, yz.dtype, "Y")
    const xs: ValueType[] = []
    for (let k = 2; k < ctx.inputs.length; k += 3) {
      const x = quantType(ctx, k, `input ${k}`)
      check(x.dtype === yz.dtype, () => `input ${k} is ${x.dtype}, Y_zero_point ${yz.dtype}`)
      checkParamTypes(ctx, k + 1, k + 2, yz.dtype, `input ${k}`)
      check(ctx.inputs[k + 2] !== undefined, () => `input ${k + 2} (a zero point) is required`)
      xs.push(x)
    }
    return concat.infer({ ...ctx, attrs: { axis: ctx.attrs.axis }, inputs: xs, values: [] })
  },
  kernel: (ctx) => {
    const { inputs } = ctx
    const yz0 = req(inputs, 1, "Y_zero_point")
    check8bit(yz0, "Y_zero_point")
    const dtype: DType = yz0.dtype
    const ys = scaleOf(inputs, 0, "Y_scale")
    const yz = zeroPointOf(inputs, 1, "Y_zero_point", dtype)
    const parts: Tensor[] = []
    for (let k = 2; k < inputs.length; k += 3) {
      const x = req(inputs, k, `input ${k}`)
      check(x.dtype === dtype, () => `input ${k} is ${x.dtype}, Y_zero_point ${dtype}`)
      const xs = scaleOf(inputs, k + 1, `input ${k + 1} (a scale)`)
      const xz = zeroPointOf(inputs, k + 2, `input ${k + 2} (a zero point)`, dtype)
      parts.push(xs === ys && xz === yz ? x : applyTable(x, lookupTable(dtype, xs, xz, ys, yz, (v) => v)))
    }
    return concat.kernel({ ...ctx, attrs: { axis: ctx.attrs.axis }, inputs: parts })
  },
})

// ---------------------------------------------------------------------------------------------
// QLinearWhere: condition, X, x_scale, x_zero_point, Y, y_scale, y_zero_point, z_scale, z_zero_point

const QLinearWhere = defineOp({
  attrs: attrs({}),
  inputs: arity.range(9, 9),
  outputs: arity.one,
  kind: "broadcast",
  infer: (ctx) => {
    const cond = ctx.inputs[0] ?? fail("condition (input 0) is required")
    check(cond.dtype === "bool", () => `condition must be bool, got ${cond.dtype}`)
    const x = quantType(ctx, 1, "X")
    const y = quantType(ctx, 4, "Y")
    check(x.dtype === y.dtype, () => `X and Y must have the same type, got ${x.dtype} and ${y.dtype}`)
    checkParamTypes(ctx, 2, 3, x.dtype, "x")
    checkParamTypes(ctx, 5, 6, x.dtype, "y")
    checkParamTypes(ctx, 7, 8, x.dtype, "z")
    return [{ dtype: x.dtype, shape: broadcastDims(broadcastDims(cond.shape, x.shape), y.shape) }]
  },
  kernel: ({ inputs }) => {
    const cond = req(inputs, 0, "condition")
    const x = req(inputs, 1, "X")
    const y = req(inputs, 4, "Y")
    check8bit(x, "X")
    const dtype = x.dtype
    const zs = scaleOf(inputs, 7, "z_scale")
    const zz = zeroPointOf(inputs, 8, "z_zero_point", dtype)
    const requant = (t: Tensor, s: number, z: number) => (s === zs && z === zz ? t : applyTable(t, lookupTable(dtype, s, z, zs, zz, (v) => v)))
    const xq = requant(x, scaleOf(inputs, 2, "x_scale"), zeroPointOf(inputs, 3, "x_zero_point", dtype))
    const yq = requant(y, scaleOf(inputs, 5, "y_scale"), zeroPointOf(inputs, 6, "y_zero_point", dtype))
    const cx = broadcastShapes(cond.shape, x.shape) ?? fail("condition and X do not broadcast")
    const shape = broadcastShapes(cx, y.shape) ?? fail("condition, X and Y do not broadcast")
    const ic = broadcastIndex(cond.shape, shape)
    const ix = broadcastIndex(x.shape, shape)
    const iy = broadcastIndex(y.shape, shape)
    const out = allocate(dtype, ic.length)
    for (let i = 0; i < ic.length; i++) out[i] = cond.data[ic[i]] ? xq.data[ix[i]] : yq.data[iy[i]]
    return [tensor(dtype, shape, out)]
  },
})

/** The com.microsoft ops Tessera implements; any other op of the domain is an UnsupportedOpError. */
export const contribQuantOps = {
  QLinearAdd: binaryOp(qlinearAddRule),
  QLinearMul: binaryOp(qlinearMulRule),
  QLinearSigmoid,
  QLinearLeakyRelu,
  QLinearGlobalAveragePool,
  QLinearAveragePool,
  QLinearConcat,
  QLinearWhere,
  QLinearSoftmax,
  QGemm,
} satisfies Record<string, AnyOpDef>

