// onnxruntime's com.microsoft QLinearSoftmax (QOperator format), computed as onnxruntime computes
// it (not as quantize(softmax(dequantize(x)))): see softmaxConstants and the kernel below.
import { A, attrs } from "../attrs.js"
import { allocate } from "../dtype.js"
import { check, defineOp, unsupported } from "../op.js"
import { sizeOf, tensor } from "../tensor.js"
import { checkParamTypes, f32, quantType, requantize, scaleOf, zeroPointOf } from "./contrib-quant-common.js"
import { check8bit } from "./nn-quant.js"
import { arity, req } from "./util.js"

// QLinearSoftmax: X, X_scale, x_zero_point?, y_scale, y_zero_point? — onnxruntime's table of
// exponentials in float, shifted so each row's maximum reads the table's top; the row's sum in
// float32, in order; nearbyint(e · floor(1 / y_scale) / sum) + y_zero_point, saturated (the
// saturation as onnxruntime 1.30 measures: its int8 store gives 127 for 128)

/** The reduction of a QLinearSoftmax: opset < 13 flattens the dims from `axis` into one, 13+ reduces `axis` alone. */
export const softmaxPlan = (shape: readonly number[], axis0: number | undefined, opset: number) => {
  const r = shape.length
  const a = axis0 ?? (opset < 13 ? 1 : -1)
  const axis = a < 0 ? a + r : a
  check(axis >= 0 && axis < r, () => `axis ${a} is out of range for rank ${r}`)
  const outer = sizeOf(shape.slice(0, axis))
  const D = opset < 13 ? sizeOf(shape.slice(axis)) : shape[axis]
  const inner = opset < 13 ? 1 : sizeOf(shape.slice(axis + 1))
  return { axis, outer, D, inner }
}

/** The constants of onnxruntime's exp table: the row-length headroom shift (in X units) and the output multiplier floor(1 / y_scale). */
export const softmaxConstants = (xs: number, ys: number, D: number) => {
  // log(FLT_MAX / D) (the division in float) less 5 reserved bits, in input units
  const shift = Math.max(0, Math.log(f32(3.4028234663852886e38 / D)) - 5) / xs
  const mult = f32(Math.floor(f32(1 / ys)))
  // a row's largest entry times the multiplier must stay finite: past that (a row of one value
  // with y_scale 1/256, or y_scale under about 1 / (148 · D)) onnxruntime converts an infinite
  // float to an integer, which C leaves undefined — there is no answer to match
  if (!Number.isFinite(f32(softmaxExp(0, shift, xs) * mult)))
    unsupported(`QLinearSoftmax over rows of ${D} value(s) with y_scale ${ys}: onnxruntime's exp table times 1/y_scale overflows float (its result is undefined)`)
  return { shift, mult }
}

/** A table entry: exp((x − max + shift) · x_scale) in double, stored as float. */
export const softmaxExp = (d: number, shift: number, xs: number): number => f32(Math.exp((d + shift) * xs))

export const QLinearSoftmax = defineOp({
  attrs: attrs({ axis: A.optInt(), opset: A.int() }),
  inputs: arity.range(4, 5),
  outputs: arity.one,
  kind: "opaque",
  infer: (ctx) => {
    const x = quantType(ctx, 0, "X")
    checkParamTypes(ctx, 1, 2, x.dtype, "X")
    checkParamTypes(ctx, 3, 4, x.dtype, "y")
    return [x]
  },
  kernel: ({ inputs, attrs: a }) => {
    const x = req(inputs, 0, "X")
    check8bit(x, "X")
    const { outer, D, inner } = softmaxPlan(x.shape, a.axis, a.opset)
    const xs = scaleOf(inputs, 1, "X_scale")
    const { shift, mult } = softmaxConstants(xs, scaleOf(inputs, 3, "y_scale"), D)
    const yz = zeroPointOf(inputs, 4, "y_zero_point", x.dtype)
    const d = x.data as ArrayLike<number>
    const out = allocate(x.dtype, d.length)
    const e = new Float32Array(D)
    for (let o = 0; o < outer; o++)
      for (let i = 0; i < inner; i++) {
        const base = o * D * inner + i
        let m = -Infinity
        for (let k = 0; k < D; k++) m = Math.max(m, d[base + k * inner])
        let total = 0
        for (let k = 0; k < D; k++) {
          e[k] = softmaxExp(d[base + k * inner] - m, shift, xs)
          total = f32(total + e[k])
        }
        for (let k = 0; k < D; k++) out[base + k * inner] = requantize(f32(f32(e[k] * mult) / total), yz, x.dtype)
      }
    return [tensor(x.dtype, x.shape, out)]
  },
})
