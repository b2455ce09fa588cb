// Broadcasting binary and variadic ops: arithmetic (exact for integers: wrap like C, truncating
// division, Python- or C-signed Mod), comparison, logic, bitwise, BitShift, Max/Min/Sum/Mean and
// Where. Pre-opset-7 models' `broadcast`/`axis` attributes are honoured (see alignLegacy).
import { A, attrs } from "../attrs.js"
import { allocate, isFloat, isInteger, isSigned, type DType } from "../dtype.js"
import { check, defineOp, fail, type AnyOpDef } from "../op.js"
import { broadcastIndex, sizeOf, tensor, type Tensor } from "../tensor.js"
import {
  binaryAttrs,
  binaryOp,
  broadcastOrFail,
  exact64,
  fast2,
  foldBroadcast,
  is64,
  type Binary,
  type Run2,
  type Scalar1,
  type Scalar2,
} from "./elementwise-kernels.js"
import { broadcastDims, inferBroadcast, inputType, req } from "./util.js"

const binaryNoAttrs = binaryAttrs({})

// --- arithmetic --------------------------------------------------------------------------------

const plus: Scalar2 = (x, y) => x + y
const minus: Scalar2 = (x, y) => x - y
const times: Scalar2 = (x, y) => x * y
const over: Scalar2 = (x, y) => x / y

// the hot ones written out as runs (see Run2)
const ADD: Run2 = (out, o, a, ai, sa, b, bi, sb, n) => {
  for (let j = 0; j < n; j++) out[o + j] = a[ai + j * sa] + b[bi + j * sb]
}
const SUB: Run2 = (out, o, a, ai, sa, b, bi, sb, n) => {
  for (let j = 0; j < n; j++) out[o + j] = a[ai + j * sa] - b[bi + j * sb]
}
const MUL: Run2 = (out, o, a, ai, sa, b, bi, sb, n) => {
  for (let j = 0; j < n; j++) out[o + j] = a[ai + j * sa] * b[bi + j * sb]
}
const DIV: Run2 = (out, o, a, ai, sa, b, bi, sb, n) => {
  for (let j = 0; j < n; j++) out[o + j] = a[ai + j * sa] / b[bi + j * sb]
}
const MAX: Run2 = (out, o, a, ai, sa, b, bi, sb, n) => {
  for (let j = 0; j < n; j++) out[o + j] = Math.max(a[ai + j * sa], b[bi + j * sb])
}
const MIN: Run2 = (out, o, a, ai, sa, b, bi, sb, n) => {
  for (let j = 0; j < n; j++) out[o + j] = Math.min(a[ai + j * sa], b[bi + j * sb])
}

// sums and differences of two values up to 2^32 are exact in a double, and the store wraps them
const add = (d: DType): Binary => (is64(d) ? exact64(plus, (x, y) => x + y, d) : fast2(d, ADD, plus))
const sub = (d: DType): Binary => (is64(d) ? exact64(minus, (x, y) => x - y, d) : fast2(d, SUB, minus))
const mul = (d: DType): Binary =>
  is64(d) ? exact64(times, (x, y) => x * y, d) : d === "int32" || d === "uint32" ? Math.imul : fast2(d, MUL, times)

/** Integer division truncates toward zero (C); x/y in float64 is exact enough for |x| < 2^53. */
const div = (d: DType): Binary =>
  isInteger(d) ? (x, y) => (y === 0 ? fail("integer division by zero") : Math.trunc(x / y)) : fast2(d, DIV, over)

/** fmod=1: C's fmod (sign of the dividend); fmod=0 (integers only): the sign of the divisor. */
const mod = (fmod: number, d: DType): Scalar2 => {
  if (isFloat(d)) {
    check(fmod !== 0, "Mod of floating-point inputs needs fmod=1")
    return (x, y) => x % y
  }
  if (fmod !== 0) return (x, y) => (y === 0 ? fail("integer modulo by zero") : x % y)
  return (x, y) => {
    if (y === 0) return fail("integer modulo by zero")
    const r = x % y
    return r !== 0 && r < 0 !== y < 0 ? r + y : r
  }
}

/** C's pow where JS differs: pow(1, y) = pow(x, 0) = 1 even for NaN, pow(-1, ±∞) = 1. */
const cpow: Scalar2 = (x, y) => {
  if (x === 1 || y === 0) return 1
  if (x === -1 && (y === Infinity || y === -Infinity)) return 1
  return Math.pow(x, y)
}

const BITS: Partial<Record<DType, number>> = { int8: 8, int16: 16, int32: 32, int64: 64, uint8: 8, uint16: 16, uint32: 32, uint64: 64 }

/** base^exp modulo 2^bits (two's complement when signed), by squaring. */
const powWrap = (base: number, exp: number, bits: number, signed: boolean): number => {
  const wrap = (v: bigint) => (signed ? BigInt.asIntN(bits, v) : BigInt.asUintN(bits, v))
  let b = wrap(BigInt(base))
  let e = BigInt(exp)
  let r = 1n
  while (e > 0n) {
    if (e & 1n) r = wrap(r * b)
    b = wrap(b * b)
    e >>= 1n
  }
  return Number(r)
}

/** Pow into the base's dtype: integer powers that leave the double's exact range wrap like C. */
const pow = (d: DType): Scalar2 => {
  if (!isInteger(d)) return cpow
  const bits = BITS[d] ?? 64
  const signed = isSigned(d)
  return (x, y) => {
    const r = cpow(x, y)
    return Math.abs(r) < 2 ** 53 || !Number.isInteger(y) || y < 0 ? r : powWrap(x, y, bits, signed)
  }
}

// --- bitwise -----------------------------------------------------------------------------------

const INT32_MIN = -(2 ** 31)
const INT32_END = 2 ** 31

/** A bitwise op: 32-bit JS operators where exact (every type up to 32 bits; 64-bit values in int32 range), else BigInt. */
const bitwise = (f: Scalar2, big: (x: bigint, y: bigint) => bigint) =>
  binaryOp({
    attrs: binaryNoAttrs,
    accepts: isInteger,
    fn: (_, d) => {
      if (!is64(d)) return f
      const wrap = d === "uint64" ? (v: bigint) => BigInt.asUintN(64, v) : (v: bigint) => BigInt.asIntN(64, v)
      return (x, y) =>
        x >= INT32_MIN && x < INT32_END && y >= INT32_MIN && y < INT32_END ? f(x, y) : Number(wrap(big(BigInt(x), BigInt(y))))
    },
  })

const shift = (left: boolean, d: DType): Scalar2 => {
  const bits = d === "uint8" ? 8 : d === "uint16" ? 16 : d === "uint32" ? 32 : d === "uint64" ? 64 : fail(`BitShift takes unsigned integers, not ${d}`)
  if (bits === 64) {
    if (!left) return (x, y) => (y >= 64 ? 0 : Math.floor(x / 2 ** y))
    return (x, y) => {
      if (y >= 64) return 0
      const r = x * 2 ** y
      return r < 2 ** 53 ? r : Number(BigInt.asUintN(64, BigInt(x) << BigInt(y)))
    }
  }
  // 32-bit shifts keep the low bits; the store wraps them to the type
  return left ? (x, y) => (y >= bits ? 0 : x << y) : (x, y) => (y >= bits ? 0 : x >>> y)
}

// --- variadic and Where ------------------------------------------------------------------------

/** Max / Min / Sum / Mean of one or more inputs under NumPy broadcasting (NaN propagates). */
const variadic = (run: Run2, finish?: (count: number) => Scalar1) =>
  defineOp({
    attrs: attrs({}),
    inputs: [1, Infinity],
    outputs: [1, 1],
    kind: "broadcast",
    // (the inputs share one dtype, checked at bind as the kernel checks it: a compiled target ran
    // Max(int8, float32) where the evaluator refused it)
    infer: (ctx) => {
      const ts = ctx.inputs.filter((t) => t !== undefined)
      check(ts.every((t) => t.dtype === ts[0].dtype), () => `inputs have different types: ${ts.map((t) => t.dtype).join(", ")}`)
      return inferBroadcast()(ctx)
    },
    kernel: (ctx) => {
      const xs = ctx.inputs.filter((t): t is Tensor => t !== undefined)
      check(xs.length > 0, "needs at least one input")
      check(xs.every((t) => t.dtype === xs[0].dtype), () => `inputs have different types: ${xs.map((t) => t.dtype).join(", ")}`)
      return [foldBroadcast(xs, { run }, xs[0].dtype, finish?.(xs.length))]
    },
  })

const where = defineOp({
  attrs: attrs({}),
  inputs: [3, 3],
  outputs: [1, 1],
  kind: "broadcast",
  infer: (ctx) => {
    const [c, x, y] = [0, 1, 2].map((k) => inputType(ctx, k))
    return [{ dtype: x.dtype, shape: broadcastDims(broadcastDims(c.shape, x.shape), y.shape) }]
  },
  kernel: (ctx) => {
    const [c, x, y] = [0, 1, 2].map((k) => req(ctx.inputs, k))
    check(x.dtype === y.dtype, () => `X and Y have different types: ${x.dtype} and ${y.dtype}`)
    const shape = broadcastOrFail(broadcastOrFail(c.shape, x.shape), y.shape)
    const n = sizeOf(shape)
    const out = allocate(x.dtype, n)
    const [cd, xd, yd] = [c.data, x.data, y.data]
    if (cd.length === n && xd.length === n && yd.length === n) for (let i = 0; i < n; i++) out[i] = cd[i] ? xd[i] : yd[i]
    else {
      const [ic, ix, iy] = [c, x, y].map((t) => broadcastIndex(t.shape, shape))
      for (let i = 0; i < n; i++) out[i] = cd[ic[i]] ? xd[ix[i]] : yd[iy[i]]
    }
    return [tensor(x.dtype, shape, out)]
  },
})

const bool = (p: boolean): number => (p ? 1 : 0)

export const binaryOps = {
  Add: binaryOp({ attrs: binaryNoAttrs, fn: (_, d) => add(d) }),
  Sub: binaryOp({ attrs: binaryNoAttrs, fn: (_, d) => sub(d) }),
  Mul: binaryOp({ attrs: binaryNoAttrs, fn: (_, d) => mul(d) }),
  Div: binaryOp({ attrs: binaryNoAttrs, fn: (_, d) => div(d) }),
  // the exponent may have another numeric type; the result has the base's
  Pow: binaryOp({ attrs: binaryNoAttrs, mixed: true, fn: (_, d) => pow(d) }),
  Mod: binaryOp({ attrs: binaryAttrs({ fmod: A.int(0) }), fn: (a, d) => mod(a.fmod, d) }),
  Max: variadic(MAX),
  Min: variadic(MIN),
  Sum: variadic(ADD),
  Mean: variadic(ADD, (count) => (v) => v / count),
  Equal: binaryOp({ attrs: binaryNoAttrs, out: "bool", fn: () => (x, y) => bool(x === y) }),
  Greater: binaryOp({ attrs: binaryNoAttrs, out: "bool", fn: () => (x, y) => bool(x > y) }),
  GreaterOrEqual: binaryOp({ attrs: binaryNoAttrs, out: "bool", fn: () => (x, y) => bool(x >= y) }),
  Less: binaryOp({ attrs: binaryNoAttrs, out: "bool", fn: () => (x, y) => bool(x < y) }),
  LessOrEqual: binaryOp({ attrs: binaryNoAttrs, out: "bool", fn: () => (x, y) => bool(x <= y) }),
  And: binaryOp({ attrs: binaryNoAttrs, out: "bool", fn: () => (x, y) => bool(x !== 0 && y !== 0) }),
  Or: binaryOp({ attrs: binaryNoAttrs, out: "bool", fn: () => (x, y) => bool(x !== 0 || y !== 0) }),
  Xor: binaryOp({ attrs: binaryNoAttrs, out: "bool", fn: () => (x, y) => bool((x !== 0) !== (y !== 0)) }),
  BitwiseAnd: bitwise((x, y) => x & y, (x, y) => x & y),
  BitwiseOr: bitwise((x, y) => x | y, (x, y) => x | y),
  BitwiseXor: bitwise((x, y) => x ^ y, (x, y) => x ^ y),
  BitShift: binaryOp({
    attrs: binaryAttrs({ direction: A.oneOf(["LEFT", "RIGHT"], "LEFT") }),
    fn: (a, d) => shift(a.direction === "LEFT", d),
  }),
  Where: where,
} satisfies Record<string, AnyOpDef>
