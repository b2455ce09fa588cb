// The 8-bit dot of the `wasm` target (the intrinsic simd128Dot4x4, src/ast/te/intrinsic.ts):
// c[4] (int32) += Σ_{r<4} a[r] (uint8) · b[4×4] (int8), in standard SIMD128 — never relaxed SIMD:
//
//   A  = i16x8.extend_low_i8x16_u(v128.load32_splat(a))   [a0 a1 a2 a3 a0 a1 a2 a3]
//   A' = i8x16.shuffle(A, pairs swapped)                   [a2 a3 a0 a1 a2 a3 a0 a1]
//   B  = i8x16.shuffle(v128.load(b))                       b's [lane][depth] bytes regrouped so that
//   B1 = i16x8.extend_low_i8x16_s(B)                       [l0r0 l0r1 l1r2 l1r3 l2r0 l2r1 l3r2 l3r3]
//   B2 = i16x8.extend_high_i8x16_s(B)                      [l0r2 l0r3 l1r0 l1r1 l2r2 l2r3 l3r0 l3r1]
//   c += i32x4.dot_i16x8_s(B1, A) + i32x4.dot_i16x8_s(B2, A')
//
// (lane j of the first dot holds two of lane j's products, the second dot the other two). Each
// lane of a dot is two products of an i16 in [0, 255] and one in [-128, 127], so every sum is
// exact in int32 and c wraps as the TE's int32 sum does: the declaration's meaning bit for bit.
// Within a straight-line region (a register tile's unrolled dots) the widened activations and
// weights are computed once per address (the region's vector cache): a weight's four lanes serve
// every pixel of the tile, a pixel's activations every lane group. The sums live in the tile's
// v128 locals where registers.ts promoted it, else in memory.
import { exprKey, type Expr } from "../../ast/te/expr.js"
import { simplify } from "../../ast/te/simplify.js"
import type { Region, Stmt } from "../../ast/tir/tir.js"
import type { DType } from "../../ast/graph/dtype.js"
import type { FnBuilder } from "./builder.js"
import { emitAddress, invalidate, type Scope } from "./expr.js"
import { emitRegVecRead, emitRegVecWrite } from "./registers.js"

/** b's 16 bytes [lane][depth 4] regrouped: depth 0–1 of lanes 0 and 2 and depth 2–3 of lanes 1 and 3, then the others. */
const B_PAIRS = [0, 1, 6, 7, 8, 9, 14, 15, 2, 3, 4, 5, 10, 11, 12, 13] as const
/** A's i16 pairs (a0 a1) and (a2 a3) swapped in each 32-bit lane. */
const A_SWAP = [4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11] as const

/** The flat index of a region that covers `shape` densely (row-major, unit inner stride) in a buffer of `dtype`; fails otherwise. */
const denseBase = (fb: FnBuilder, sc: Scope, r: Region, shape: readonly number[], dtype: DType, what: string): Expr => {
  const reg = sc.regs?.get(r.buffer)
  const info = sc.bufs.get(r.buffer)
  const actual = reg ? (reg.lane === "i32" ? "int32" : "float32") : info?.dtype
  if (actual !== dtype) return fb.fail(`the 8-bit dot's ${what} '${r.buffer}' is ${actual ?? "unknown"}, not ${dtype}`)
  if (!r.strides || r.base.length !== 1) return fb.fail(`the 8-bit dot's ${what} '${r.buffer}' is not flat: run lowering.FlattenStorage first`)
  const inner = r.strides.slice(r.strides.length - shape.length)
  const dense = inner.length === shape.length && shape.every((_, k) => inner[k] === shape.slice(k + 1).reduce((a, x) => a * x, 1))
  if (!dense) return fb.fail(`the 8-bit dot's ${what} '${r.buffer}' is not one contiguous run (strides ${r.strides.join(", ")})`)
  return simplify(r.base[0], sc.bounds, sc.simplified)
}

/** The v128 locals cached in the region under `keys`, else those `make` fills (cached under the keys, reading `buf`). */
const cached = (fb: FnBuilder, sc: Scope, keys: readonly string[], buf: string, make: (locals: readonly number[]) => void): readonly number[] => {
  const known = keys.map((k) => sc.vcache?.get(k)?.local)
  if (known.every((l) => l !== undefined)) return known as number[]
  const locals = keys.map(() => fb.local("v128"))
  make(locals)
  keys.forEach((k, i) => sc.vcache?.set(k, { local: locals[i], reads: new Set([buf]) }))
  return locals
}

/** Emits one `dot_u8s8_4x4` intrinsic statement. */
export const emitDot4x4 = (fb: FnBuilder, sc: Scope, s: Stmt & { kind: "intrinsic" }): void => {
  const [ra, rb] = s.inputs
  const aIdx = denseBase(fb, sc, ra, [4], "uint8", "activations")
  const bIdx = denseBase(fb, sc, rb, [4, 4], "int8", "weights")
  const cIdx = denseBase(fb, sc, s.output, [4], "int32", "sums")
  const aKey = `dot.a|${ra.buffer}|${exprKey(aIdx)}`
  const bKey = `dot.b|${rb.buffer}|${exprKey(bIdx)}`
  const [b1, b2] = cached(fb, sc, [`${bKey}|1`, `${bKey}|2`], rb.buffer, ([l1, l2]) => {
    const { offset } = emitAddress(fb, sc, rb.buffer, bIdx, 16)
    fb.op("v128.load", 0, offset)
    const t = fb.temp("v128")
    fb.op("local.tee", t)
    fb.op("local.get", t)
    fb.shuffle(B_PAIRS)
    fb.op("local.tee", t)
    fb.op("i16x8.extend_low_i8x16_s")
    fb.op("local.set", l1)
    fb.op("local.get", t)
    fb.op("i16x8.extend_high_i8x16_s")
    fb.op("local.set", l2)
    fb.release("v128", t)
  })
  const [a, aSwap] = cached(fb, sc, [`${aKey}|a`, `${aKey}|swap`], ra.buffer, ([l, lSwap]) => {
    const { offset } = emitAddress(fb, sc, ra.buffer, aIdx, 4)
    fb.op("v128.load32_splat", 0, offset)
    fb.op("i16x8.extend_low_i8x16_u")
    fb.op("local.tee", l)
    fb.op("local.get", l)
    fb.shuffle(A_SWAP)
    fb.op("local.set", lSwap)
  })
  // c += dot(B1, A) + dot(B2, A')
  const reg = sc.regs?.get(s.output.buffer)
  let offset = 0
  if (reg) emitRegVecRead(fb, reg, s.output.buffer, cIdx)
  else {
    // the address twice: the store's, then the load's
    offset = emitAddress(fb, sc, s.output.buffer, cIdx, 4).offset
    const t = fb.temp("i32")
    fb.op("local.tee", t)
    fb.op("local.get", t)
    fb.release("i32", t)
    fb.op("v128.load", 2, offset)
  }
  for (const [bv, av] of [[b1, a], [b2, aSwap]] as const) {
    fb.op("local.get", bv)
    fb.op("local.get", av)
    fb.op("i32x4.dot_i16x8_s")
    fb.op("i32x4.add")
  }
  if (reg) emitRegVecWrite(fb, reg, s.output.buffer, cIdx)
  else {
    fb.op("v128.store", 2, offset)
    invalidate(sc, [s.output.buffer])
  }
}
