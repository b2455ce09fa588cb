// Exact 64-bit integers. int64 / uint64 tensors keep their plain storage (a Float64Array, so every
// kernel reads numbers and the float paths stay as they are), and carry their exact values beside
// it — `exact`, a BigInt64Array / BigUint64Array — whenever some value is not a double (2^53 + 1,
// 2^62 + 7, 2^63 - 1). Without `exact` every stored double is the value itself; with it, `exact`
// is the value and `data` holds the nearest doubles (what a kernel that only reads numbers sees:
// the evaluator lets only the ops that know `exact` touch such a tensor; see ops/exact-int64.ts).
import type { DType } from "./dtype.js"
import { sizeOf, type Tensor } from "./tensor.js"

export type BigArray = BigInt64Array | BigUint64Array

export const isWide = (d: DType): d is "int64" | "uint64" => d === "int64" || d === "uint64"

/** Wraps a BigInt to the range of `dtype` (int64 or uint64). */
export const wrapWide = (dtype: "int64" | "uint64", v: bigint): bigint => (dtype === "uint64" ? BigInt.asUintN(64, v) : BigInt.asIntN(64, v))

export const allocateBig = (dtype: "int64" | "uint64", n: number): BigArray => (dtype === "uint64" ? new BigUint64Array(n) : new BigInt64Array(n))

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

/**
 * The nearest value with `bits` significant bits to the integer v (round half to even), as a
 * double — exact, since `bits` ≤ 53. How an int64 converts to float32 (24), float16 (11) or
 * bfloat16 (8) in one rounding, as numpy's and C's casts do (Number(v) then Math.fround would round twice).
 */
export const roundBigToBits = (v: bigint, bits: number): number => {
  const neg = v < 0n
  const a = neg ? -v : v
  const len = a.toString(2).length
  if (len <= bits) return Number(v)
  const shift = BigInt(len - bits)
  let q = a >> shift
  const rem = a - (q << shift)
  const half = 1n << (shift - 1n)
  if (rem > half || (rem === half && (q & 1n) === 1n)) q += 1n
  const r = Number(q) * 2 ** Number(shift)
  return neg ? -r : r
}
