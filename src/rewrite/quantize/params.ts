// Quantization parameters as onnxruntime's quantize_static computes them (quant_utils'
// compute_scale_zp): activations asymmetric int8 over [min(rmin, 0), max(rmax, 0)], scale
// (rmax - rmin) / 255, zero point round(-128 - rmin / scale); weights symmetric int8 over
// [-127, 127], scale absmax / 127, zero point 0, per tensor or per output channel; biases int32
// with scale x_scale · w_scale and zero point 0. Scales are float32; rounding is half to even.
import { tensor, type Tensor } from "../../ast/graph/tensor.js"

/** Round half to even (numpy's rint, what onnxruntime's quantizer rounds with). */
export const rint = (x: number): number => {
  const r = Math.round(x)
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r
}

/** An activation's calibrated range (before it is widened to hold 0). */
export interface Range {
  readonly min: number
  readonly max: number
}

/** One tensor's quantization: int8, per tensor. */
export interface ActivationParams {
  readonly scale: number
  readonly zeroPoint: number
}

export const INT8_MIN = -128
export const INT8_MAX = 127
/** Symmetric int8 weights use [-127, 127], so that -w quantizes to -q (onnxruntime's choice). */
export const WEIGHT_QMAX = 127

/**
 * Asymmetric int8 parameters of a range. A range of one point (only zeros seen) gets scale 1 and
 * the zero point at the bottom, so that a folded ReLU that saw only zeros still clips negative
 * values to 0 (zero point 0 there would let -1 through).
 */
export const activationParams = (r: Range): ActivationParams => {
  const rmin = Math.min(r.min, 0)
  const rmax = Math.max(r.max, 0)
  if (!(rmax > rmin)) return { scale: 1, zeroPoint: INT8_MIN }
  const scale = Math.fround((rmax - rmin) / (INT8_MAX - INT8_MIN))
  const zp = rint(Math.fround(INT8_MIN - Math.fround(rmin / scale))) // float32 arithmetic, as numpy's on float32 ranges
  return { scale, zeroPoint: Math.max(INT8_MIN, Math.min(INT8_MAX, zp)) }
}

/** The float range an int8 tensor with these parameters can hold: what quantizing clips to. */
export const clipRange = (p: ActivationParams): Range => ({
  min: (INT8_MIN - p.zeroPoint) * p.scale,
  max: (INT8_MAX - p.zeroPoint) * p.scale,
})

/** Quantizes x (float32 arithmetic, as QuantizeLinear): rint(x / scale) + zp, saturated. */
export const quantizeValue = (x: number, scale: number, zp: number, lo: number, hi: number): number => {
  const q = rint(Math.fround(x / scale)) + zp
  return q < lo ? lo : q > hi ? hi : q
}

/** A quantized constant: the int8 (or int32) tensor and its scales (one, or one per channel). */
export interface QuantizedConstant {
  readonly values: Tensor
  readonly scales: Float32Array
  /** The channel axis for per-channel scales; undefined: per tensor. */
  readonly axis?: number
}

/** Symmetric int8 quantization of a weight, per tensor or per channel along `axis`. */
export const quantizeWeight = (w: Tensor, axis: number | undefined): QuantizedConstant => {
  const channels = axis === undefined ? 1 : w.shape[axis]
  const inner = axis === undefined ? w.data.length : w.shape.slice(axis + 1).reduce((a, b) => a * b, 1)
  const channelOf = (i: number) => (axis === undefined ? 0 : Math.floor(i / inner) % channels)
  const absmax = new Float64Array(channels)
  for (let i = 0; i < w.data.length; i++) absmax[channelOf(i)] = Math.max(absmax[channelOf(i)], Math.abs(w.data[i]))
  const scales = new Float32Array(channels)
  for (let c = 0; c < channels; c++) scales[c] = absmax[c] > 0 ? Math.fround(absmax[c] / WEIGHT_QMAX) : 1
  const q = new Int8Array(w.data.length)
  for (let i = 0; i < w.data.length; i++) q[i] = quantizeValue(w.data[i], scales[channelOf(i)], 0, -WEIGHT_QMAX, WEIGHT_QMAX)
  return { values: tensor("int8", w.shape, q), scales, ...(axis === undefined ? {} : { axis }) }
}

/**
 * A bias as int32 with scale x_scale · w_scale (per channel when the weight is): what an integer
 * kernel adds to its int32 accumulator.
 */
export const quantizeBias = (b: Tensor, xScale: number, wScales: Float32Array): QuantizedConstant => {
  const perChannel = wScales.length > 1
  const scales = new Float32Array(perChannel ? b.data.length : 1)
  for (let c = 0; c < scales.length; c++) scales[c] = Math.fround(xScale * wScales[c])
  const q = new Int32Array(b.data.length)
  const lim = 2 ** 31 - 1
  for (let i = 0; i < b.data.length; i++) {
    const s = scales[perChannel ? i : 0]
    const v = s > 0 ? rint(Math.fround(b.data[i] / s)) : 0
    q[i] = Math.max(-lim - 1, Math.min(lim, v))
  }
  return { values: tensor("int32", b.shape, q), scales, ...(perChannel ? { axis: 0 } : {}) }
}

/** A float constant quantized with the activation scheme (asymmetric int8 over its own range). */
export const quantizeConstantActivation = (t: Tensor): { readonly values: Tensor; readonly params: ActivationParams } => {
  let min = Infinity
  let max = -Infinity
  for (let i = 0; i < t.data.length; i++) {
    min = Math.min(min, t.data[i])
    max = Math.max(max, t.data[i])
  }
  const params = activationParams(t.data.length ? { min, max } : { min: 0, max: 0 })
  const q = new Int8Array(t.data.length)
  for (let i = 0; i < t.data.length; i++) q[i] = quantizeValue(t.data[i], params.scale, params.zeroPoint, INT8_MIN, INT8_MAX)
  return { values: tensor("int8", t.shape, q), params }
}
