// Tensors: a dtype, a static shape and row-major storage. Immutable by convention: kernels
// allocate their outputs and never write into their inputs.
import { allocate, converter, type DType, type TypedArray } from "./dtype.js"
import { allocateBig, isWide, wrapWide, type BigArray } from "./int64.js"

export interface Tensor {
  readonly dtype: DType
  readonly shape: readonly number[]
  readonly data: TypedArray
  /**
   * int64 / uint64 only, and only when some value is not a double: the exact values (`data` then
   * holds the nearest doubles). See int64.ts.
   */
  readonly exact?: BigInt64Array | BigUint64Array
}

export const sizeOf = (shape: readonly number[]): number => {
  let n = 1
  for (const d of shape) n *= d
  return n
}

export const stridesOf = (shape: readonly number[]): number[] => {
  const s = new Array<number>(shape.length)
  let acc = 1
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = acc
    acc *= shape[i]
  }
  return s
}

export const tensor = (dtype: DType, shape: readonly number[], data: TypedArray): Tensor => {
  if (data.length !== sizeOf(shape))
    throw new Error(`tensor: ${data.length} elements for shape [${shape.join(", ")}]`)
  return { dtype, shape: [...shape], data }
}

export const zeros = (dtype: DType, shape: readonly number[]): Tensor =>
  ({ dtype, shape: [...shape], data: allocate(dtype, sizeOf(shape)) })

/** A tensor from plain numbers, converted to `dtype` as Cast would. */
export const fromArray = (dtype: DType, shape: readonly number[], values: ArrayLike<number>): Tensor => {
  if (isWide(dtype)) {
    // integers below 2^53 (in the type's range) as they are; else truncated and wrapped exactly
    // (-1 as uint64 is 2^64 - 1, not the double 2^64)
    const data = new Float64Array(values.length)
    let i = 0
    for (; i < values.length; i++) {
      const t = Math.trunc(values[i]) + 0
      if (!(t > -(2 ** 53) && t < 2 ** 53 && (dtype === "int64" || t >= 0))) break
      data[i] = t
    }
    if (i === values.length) return tensor(dtype, shape, data)
    const big = allocateBig(dtype, values.length)
    for (let i = 0; i < values.length; i++) big[i] = Number.isFinite(values[i]) ? wrapWide(dtype, BigInt(Math.trunc(values[i]))) : 0n
    return wideTensor(dtype, shape, big)
  }
  const data = allocate(dtype, values.length)
  const conv = converter(dtype)
  for (let i = 0; i < values.length; i++) data[i] = conv(values[i])
  return tensor(dtype, shape, data)
}

export const scalar = (dtype: DType, value: number): Tensor => fromArray(dtype, [], [value])

/** The values of a (small) tensor as plain numbers — for shape, axes and index inputs. */
export const toNumbers = (t: Tensor): number[] => Array.from(t.data as ArrayLike<number>)

/** A view with another shape over the same data (sizes must agree). */
export const reshapeView = (t: Tensor, shape: readonly number[]): Tensor =>
  t.exact ? { ...tensor(t.dtype, shape, t.data), exact: t.exact } : tensor(t.dtype, shape, t.data)

/** NumPy broadcasting of two shapes; undefined when they do not broadcast. */
export const broadcastShapes = (a: readonly number[], b: readonly number[]): number[] | undefined => {
  const n = Math.max(a.length, b.length)
  const out = new Array<number>(n)
  for (let i = 0; i < n; i++) {
    const da = i < n - a.length ? 1 : a[i - (n - a.length)]
    const db = i < n - b.length ? 1 : b[i - (n - b.length)]
    if (da === db || db === 1) out[i] = da
    else if (da === 1) out[i] = db
    else return undefined
  }
  return out
}

/**
 * For each flat index of `outShape`, the flat index into a tensor of shape `inShape` broadcast to
 * it. Used by broadcasting kernels: `out[i] = f(a[ia[i]], b[ib[i]])`.
 */
export const broadcastIndex = (inShape: readonly number[], outShape: readonly number[]): Int32Array => {
  const n = sizeOf(outShape)
  const idx = new Int32Array(n)
  const rank = outShape.length
  const off = rank - inShape.length
  const inStrides = stridesOf(inShape)
  // effective strides in the output's index space (0 on broadcast dims)
  const eff = new Array<number>(rank).fill(0)
  for (let i = 0; i < inShape.length; i++) eff[i + off] = inShape[i] === 1 ? 0 : inStrides[i]
  const counter = new Array<number>(rank).fill(0)
  let cur = 0
  for (let i = 0; i < n; i++) {
    idx[i] = cur
    for (let d = rank - 1; d >= 0; d--) {
      counter[d]++
      cur += eff[d]
      if (counter[d] < outShape[d]) break
      cur -= eff[d] * counter[d]
      counter[d] = 0
    }
  }
  return idx
}

/** Normalises a possibly negative axis against `rank`; throws on out of range. */
export const normAxis = (axis: number, rank: number): number => {
  const a = axis < 0 ? axis + rank : axis
  if (a < 0 || a >= Math.max(rank, 1)) throw new RangeError(`axis ${axis} out of range for rank ${rank}`)
  return a
}

export const shapeEqual = (a: readonly number[], b: readonly number[]): boolean =>
  a.length === b.length && a.every((d, i) => d === b[i])

export const showShape = (s: readonly (number | string)[]): string => `[${s.join(", ")}]`

// ---------------------------------------------------------------------------------------------
// int64 / uint64 tensors with their exact values (see int64.ts)

/** The exact values of an int64 / uint64 tensor (its `exact`, or its doubles, which are then the values). */
export const exactValues = (t: Tensor): BigArray => {
  if (t.exact) return t.exact
  const d = t.dtype === "uint64" ? "uint64" : "int64"
  const out = allocateBig(d, t.data.length)
  const src = t.data
  for (let i = 0; i < src.length; i++) {
    const x = src[i]
    out[i] = Number.isFinite(x) ? wrapWide(d, BigInt(Math.trunc(x))) : 0n
  }
  return out
}

/** The value at flat index i, exactly (int64 / uint64 tensors; other integer dtypes too). */
export const exactAt = (t: Tensor, i: number): bigint => (t.exact ? t.exact[i] : BigInt(Math.trunc(t.data[i])))

/** Whether `v` is a double (the storage holds it exactly). */
const isDouble = (v: bigint): boolean => BigInt(Number(v)) === v

/**
 * An int64 / uint64 tensor of exact values: `data` the nearest doubles, `exact` kept only when
 * some value is not a double.
 */
export const wideTensor = (dtype: "int64" | "uint64", shape: readonly number[], big: BigArray): Tensor => {
  if (big.length !== sizeOf(shape)) throw new Error(`wideTensor: ${big.length} elements for shape [${shape.join(", ")}]`)
  const data = new Float64Array(big.length)
  let inexact = false
  for (let i = 0; i < big.length; i++) {
    const v = big[i]
    const x = Number(v)
    data[i] = x
    if (!inexact && (x >= 2 ** 53 || x <= -(2 ** 53)) && !isDouble(v)) inexact = true
  }
  const exact = dtype === "uint64" ? (big instanceof BigUint64Array ? big : BigUint64Array.from(big, (v) => BigInt.asUintN(64, v))) : big instanceof BigInt64Array ? big : BigInt64Array.from(big, (v) => BigInt.asIntN(64, v))
  return inexact ? { dtype, shape: [...shape], data, exact } : { dtype, shape: [...shape], data }
}

/** The first value of `t` that its doubles do not hold exactly (for error messages), if any. */
export const firstInexact = (t: Tensor): bigint | undefined => {
  if (!t.exact) return undefined
  for (let i = 0; i < t.exact.length; i++) if (!isDouble(t.exact[i])) return t.exact[i]
  return undefined
}

