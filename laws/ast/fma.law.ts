// The "fma" intrinsic's meaning (src/ast/te/eval-expr.ts fmaFloat32, what the TE and TIR
// evaluators run): x·y + z rounded once to float32, for float32 x, y, z. Checked against the exact
// value in integers (every float32 is a multiple of 2^-149, so x·y + z is an integer times 2^-298)
// rounded half to even at float32's precision: on random triples, triples near one another (long
// cancellations) and float64 midpoint cases — 3 · 6990507·2^-23 is the float32 midpoint 2.5 + 2^-23,
// which a term of ±2^-60 moves off, though float64 cannot hold the sum; it fails without the
// midpoint step (Math.fround of the float64 sum: tried).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { fmaFloat32 } from "../../src/ast/te/eval-expr.js"
import { lawParams } from "../support.js"

/** x·y + z for finite float32 values, rounded once to float32 (half to even), from the exact sum. */
const exactFma = (x: number, y: number, z: number): number => {
  const u = (v: number) => BigInt(v * 2 ** 149)
  const sum = u(x) * u(y) + u(z) * 2n ** 149n
  if (sum === 0n) return 0
  const n = sum < 0n ? -sum : sum
  // float32's unit in the last place at this magnitude, in units of 2^-298 (subnormals: 2^-149)
  const msb = n.toString(2).length - 1
  const shift = BigInt(Math.max(msb - 23, 149))
  const ulp = 1n << shift
  let q = n / ulp
  const r = n % ulp
  const half = ulp / 2n
  if (r > half || (r === half && q % 2n === 1n)) q += 1n
  const mag = Math.fround(Number(q) * 2 ** (Number(shift) - 298))
  return sum < 0n ? -mag : mag
}

const finite = fc.float({ noNaN: true, noDefaultInfinity: true, min: Math.fround(-3e38), max: Math.fround(3e38) })

describe("fmaFloat32: x·y + z rounded once", () => {
  it("equals the exact sum rounded half to even, on random, cancelling and midpoint triples", () => {
    const near = fc.tuple(finite, finite).map(([x, y]) => [x, y, Math.fround(-x * y)] as const).filter(([, , z]) => Number.isFinite(z))
    const midpoint = fc.tuple(fc.constantFrom(1, -1), fc.integer({ min: 40, max: 140 })).map(([s, k]) => [3, 6990507 * 2 ** -23, s * 2 ** -k] as const)
    fc.assert(
      fc.property(fc.oneof(fc.tuple(finite, finite, finite), fc.tuple(fc.integer({ min: -128, max: 255 }), finite, finite), near, midpoint), ([x, y, z]) => {
        const want = exactFma(x, y, z)
        const got = fmaFloat32(x, y, z)
        expect(got === want || (Number.isNaN(got) && Number.isNaN(want)), `fma(${x}, ${y}, ${z}): ${got}, exact ${want}`).toBe(true)
      }),
      lawParams(3000),
    )
  })

  it("takes the midpoint case's neighbour: 3 · 6990507·2^-23 ± 2^-60", () => {
    expect(fmaFloat32(3, 6990507 * 2 ** -23, 2 ** -60)).toBe(2.5 + 2 ** -22)
    expect(fmaFloat32(3, 6990507 * 2 ** -23, -(2 ** -60))).toBe(2.5)
    expect(Math.fround(3 * 6990507 * 2 ** -23 + 2 ** -60)).toBe(2.5)
  })
})
