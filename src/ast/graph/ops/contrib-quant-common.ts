// Shared pieces of the com.microsoft quantized ops (QOperator format, onnxruntime's contrib
// domain): per-tensor scale / zero-point reads, the float32 arithmetic onnxruntime does them in,
// and the requantizing store (round half to even, plus the zero point, saturated).
import { allocate, type DType } from "../dtype.js"
import { check, fail, type InferCtx, type ValueType } from "../op.js"
import { sizeOf, tensor, type Tensor } from "../tensor.js"
import { check8bit, range8, rint } from "./nn-quant.js"

/** The domain onnxruntime's contrib ops live in. */
export const MICROSOFT_DOMAIN = "com.microsoft"

/** Rounds to float32: onnxruntime computes every scale ratio and dequantized value in float. */
export const f32 = Math.fround

/** A per-tensor scale input: a float32 scalar or one-element tensor. */
export const scaleOf = (inputs: readonly (Tensor | undefined)[], k: number, what: string): number => {
  const t = inputs[k] ?? fail(`${what} (input ${k}) is required`)
  check(t.dtype === "float32", () => `${what} must be float32, got ${t.dtype}`)
  check(t.data.length === 1, () => `${what} must be a scalar (per-tensor quantization), got shape [${t.shape.join(", ")}]`)
  return t.data[0] as number
}

/** A per-tensor zero point of `dtype`: a scalar or one-element tensor; 0 where the optional input is omitted. */
export const zeroPointOf = (inputs: readonly (Tensor | undefined)[], k: number, what: string, dtype: DType): number => {
  const t = inputs[k]
  if (!t) return 0
  check(t.dtype === dtype, () => `${what} must be ${dtype} (the quantized tensor's type), got ${t.dtype}`)
  check(t.data.length === 1, () => `${what} must be a scalar (per-tensor quantization), got shape [${t.shape.join(", ")}]`)
  return t.data[0] as number
}

/** The type checks of a per-tensor quantized input's scale (float32) and zero point (its own type). */
export const checkParamTypes = (ctx: InferCtx<unknown>, scale: number, zp: number | undefined, dtype: DType, what: string): void => {
  const s = ctx.inputs[scale] ?? fail(`${what}_scale (input ${scale}) is required`)
  check(s.dtype === "float32", () => `${what}_scale must be float32, got ${s.dtype}`)
  const z = zp === undefined ? undefined : ctx.inputs[zp]
  if (z) check(z.dtype === dtype, () => `${what}_zero_point must be ${dtype}, got ${z.dtype}`)
}

/** An 8-bit input type (int8 / uint8). */
export const quantType = (ctx: InferCtx<unknown>, k: number, what: string): ValueType => {
  const t = ctx.inputs[k] ?? fail(`${what} (input ${k}) is required`)
  check8bit(t, what)
  return t
}

/** `v` (a float32 value in output units) rounded half to even, plus `zp`, saturated to `dtype`. */
export const requantize = (v: number, zp: number, dtype: DType): number => {
  const [lo, hi] = range8(dtype)
  const r = rint(v) + zp
  return r < lo ? lo : r > hi ? hi : r
}

/**
 * quantize(g(dequantize(x))) for every 8-bit value x: the 256-entry table onnxruntime builds for
 * its lookup-table ops (QLinearSigmoid, QLinearLeakyRelu, requantizing QLinearConcat inputs) —
 * dequantized in float32, g in float32, divided by the output scale in float32.
 */
export const lookupTable = (dtype: DType, xs: number, xz: number, ys: number, yz: number, g: (v: number) => number): Int32Array => {
  const [lo] = range8(dtype)
  const table = new Int32Array(256)
  for (let k = 0; k < 256; k++) {
    const x = lo + k
    table[k] = requantize(f32(g(f32((x - xz) * xs)) / ys), yz, dtype)
  }
  return table
}

/** Applies a lookup table to an 8-bit tensor. */
export const applyTable = (x: Tensor, table: Int32Array): Tensor => {
  const [lo] = range8(x.dtype)
  const out = allocate(x.dtype, x.data.length)
  const d = x.data as ArrayLike<number>
  for (let i = 0; i < d.length; i++) out[i] = table[d[i] - lo]
  return tensor(x.dtype, x.shape, out)
}

/** The permutation moving the channel axis last (NCHW → NHWC) for a rank-`r` tensor, and back. */
export const toChannelsLast = (r: number): number[] => [0, ...Array.from({ length: r - 2 }, (_, k) => k + 2), 1]
export const toChannelsFirst = (r: number): number[] => [0, r - 1, ...Array.from({ length: r - 2 }, (_, k) => k + 1)]

/** A tensor with its axes permuted (out dim k is in dim perm[k]). */
export const permute = (t: Tensor, perm: readonly number[]): Tensor => {
  const shape = perm.map((p) => t.shape[p])
  const inStrides = new Array<number>(t.shape.length)
  let s = 1
  for (let k = t.shape.length - 1; k >= 0; k--) {
    inStrides[k] = s
    s *= t.shape[k]
  }
  const n = sizeOf(shape)
  const out = allocate(t.dtype, n)
  const idx = new Array<number>(shape.length).fill(0)
  const d = t.data as ArrayLike<number>
  for (let i = 0; i < n; i++) {
    let off = 0
    for (let k = 0; k < shape.length; k++) off += idx[k] * inStrides[perm[k]]
    out[i] = d[off]
    for (let k = shape.length - 1; k >= 0; k--) {
      if (++idx[k] < shape[k]) break
      idx[k] = 0
    }
  }
  return tensor(t.dtype, shape, out)
}
