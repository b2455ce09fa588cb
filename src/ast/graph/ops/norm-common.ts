// Shared pieces of the normalization ops: stash types, parameter broadcasting, and the
// row-wise statistics (mean and population variance in float64) that every norm is made of.
import { ONNX_DTYPE, ONNX_DTYPE_NAME, type DType } from "../dtype.js"
import { check, fail, unsupported, type Dim } from "../op.js"
import { broadcastIndex, broadcastShapes, showShape, type Tensor } from "../tensor.js"

/** The float type a `stash_type` attribute names (ONNX TensorProto codes). */
export const stashDType = (code: number): DType => {
  const d = ONNX_DTYPE[code]
  if (d === "float32" || d === "float64" || d === "float16" || d === "bfloat16") return d
  return d || ONNX_DTYPE_NAME[code]
    ? unsupported(`stash_type ${d ?? ONNX_DTYPE_NAME[code]} (only float types are stash types)`)
    : fail(`stash_type ${code} is not an ONNX element type`)
}

/** The statistics' shape: the dims before `axis`, then ones. */
export const statShape = <D extends Dim>(shape: readonly D[], axis: number): (D | 1)[] => shape.map((d, i) => (i < axis ? d : 1))

/**
 * For each element of a tensor of `shape`, the index of `p`'s value that applies to it under
 * unidirectional broadcasting (`p` broadcasts to `shape`, never the other way).
 */
export const paramIndex = (p: Tensor, shape: readonly number[], what: string): Int32Array => {
  const b = broadcastShapes(p.shape, shape)
  check(b !== undefined && b.length === shape.length && b.every((d, i) => d === shape[i]), () =>
    `${what} of shape ${showShape(p.shape)} does not broadcast to ${showShape(shape)}`)
  return broadcastIndex(p.shape, shape)
}

/** Per-channel values of a 1-D parameter: its C values, or its one value repeated. */
export const perChannel = (p: Tensor, C: number, what: string): Float64Array => {
  check(p.data.length === C || p.data.length === 1, () => `${what} has ${p.data.length} values for ${C} channels`)
  const out = new Float64Array(C)
  for (let c = 0; c < C; c++) out[c] = p.data.length === 1 ? p.data[0] : p.data[c]
  return out
}

/** Mean and population variance of `n` values of `data` from `start` (two passes, float64). */
export const meanVar = (data: ArrayLike<number>, start: number, n: number): [number, number] => {
  let m = 0
  for (let i = 0; i < n; i++) m += data[start + i]
  m /= n
  let v = 0
  for (let i = 0; i < n; i++) {
    const d = data[start + i] - m
    v += d * d
  }
  return [m, v / n]
}
