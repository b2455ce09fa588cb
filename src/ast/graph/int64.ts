// Exact 64-bit integers: the BigInt side (the tensors that carry them: tensor.ts `wideTensor`).
// int64 / uint64 tensors keep their plain storage (a Float64Array, so every kernel reads numbers
// and the float paths stay as they are), and carry their exact values beside
// it — `exact`, a BigInt64Array / BigUint64Array — whenever some value is not a double (2^53 + 1,
// 2^62 + 7, 2^63 - 1). Without `exact` every stored double is the value itself; with it, `exact`
// is the value and `data` holds the nearest doubles (what a kernel that only reads numbers sees:
// the evaluator lets only the ops that know `exact` touch such a tensor; see ops/exact-int64.ts).
import type { DType } from "./dtype.js"

export type BigArray = BigInt64Array | BigUint64Array

export const isWide = (d: DType): d is "int64" | "uint64" => d === "int64" || d === "uint64"

/** Wraps a BigInt to the range of `dtype` (int64 or uint64). */
export const wrapWide = (dtype: "int64" | "uint64", v: bigint): bigint => (dtype === "uint64" ? BigInt.asUintN(64, v) : BigInt.asIntN(64, v))

export const allocateBig = (dtype: "int64" | "uint64", n: number): BigArray => (dtype === "uint64" ? new BigUint64Array(n) : new BigInt64Array(n))

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
