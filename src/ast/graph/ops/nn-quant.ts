// Shared pieces of the integer and quantized ops (ConvInteger, QLinearConv, MatMulInteger,
// QLinearMatMul): zero-point shifts, scale products computed as ONNX's reference computes them
// (in the scale's float type), and the saturating round-half-to-even store.
import { isInteger, type DType } from "../dtype.js"
import { check, fail, unsupported } from "../op.js"
import { sizeOf, type Tensor } from "../tensor.js"

/** Checks that `t` is an 8-bit integer tensor (the quantized types these ops take). */
export const check8bit = (t: Tensor | { dtype: DType }, what: string): void => {
  if (t.dtype === "int8" || t.dtype === "uint8") return
  if (isInteger(t.dtype)) return unsupported(`${what} of type ${t.dtype} is not supported (int8/uint8 only)`)
  return fail(`${what} must be int8 or uint8, got ${t.dtype}`)
}

/**
 * The values of an 8-bit `t` minus its zero point: a scalar zero point, or one per slice of `axis`
 * (length `t.shape[axis]`) — per output channel for weights, per row/column for matrices. The
 * differences lie in [-255, 255], exact in float32, so the float32 products apply to them.
 */
export const shifted = (t: Tensor, zp: Tensor | undefined, axis: number, what: string): Float32Array => {
  const out = Float32Array.from(t.data as ArrayLike<number>)
  if (!zp) return out
  const z = zp.data as ArrayLike<number>
  if (z.length === 1) {
    const v = z[0]
    if (v !== 0) for (let i = 0; i < out.length; i++) out[i] -= v
    return out
  }
  check(axis >= 0 && axis < t.shape.length && z.length === t.shape[axis], () =>
    `${what} zero point of shape [${zp.shape.join(", ")}] does not match axis ${axis} of [${t.shape.join(", ")}]`)
  const inner = sizeOf(t.shape.slice(axis + 1))
  const dim = t.shape[axis]
  for (let i = 0; i < out.length; i++) out[i] -= z[Math.floor(i / inner) % dim]
  return out
}

/** Round half to even (numpy's rint). */
export const rint = (x: number): number => {
  const f = Math.floor(x)
  const d = x - f
  if (d > 0.5) return f + 1
  if (d < 0.5) return f
  return f % 2 === 0 ? f : f + 1
}

/** The representable range of an 8-bit type. */
export const range8 = (dtype: DType): [number, number] => (dtype === "int8" ? [-128, 127] : [0, 255])

/** `value` rounded half to even plus the zero point, clamped to `dtype`. */
export const saturate = (value: number, zp: number, lo: number, hi: number): number => {
  const r = rint(value) + zp
  return r < lo ? lo : r > hi ? hi : r
}

/** Scale values widened for arithmetic in their own float type (float16 scales stay float16 values). */
export const scaleValues = (t: Tensor, what: string): Float64Array => {
  check(t.dtype === "float32" || t.dtype === "float16" || t.dtype === "bfloat16" || t.dtype === "float64", () =>
    `${what} must be a float tensor, got ${t.dtype}`)
  return Float64Array.from(t.data as ArrayLike<number>)
}
