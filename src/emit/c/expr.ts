// Scalar expressions of the `c` target: dtypes → C types, casts with the evaluator's conversion
// semantics (src/ast/graph/dtype.ts `converter`), constants, operators and math intrinsics; the
// helpers they call are the prelude's (prelude.ts). Pure: Expr → C text.
//
// Value types. Every dtype has a storage type (what a buffer of it holds in memory, matching our
// typed arrays) and a value class (the C type its expressions compute in):
//   float32 / float16 / bfloat16 → float   (float16 / bfloat16 are stored as rounded floats)
//   float64                      → double
//   int64                        → int64_t  (stored as int64_t: the c device hands int64 buffers
//                                            as BigInt64Arrays, every value exact; wraps like C)
//   uint64                       → uint64_t (stored as uint64_t: BigUint64Arrays; wraps like C)
//   int8 … uint32, bool          → integers (loop variables and integer lets are int64_t, so index
//                                            arithmetic never overflows; stores wrap like C, and
//                                            the build passes -fwrapv so wrapping is defined)
// Float arithmetic runs in the value class (float for float32, so loops vectorize at full width);
// the evaluator computes in double and rounds at stores: results agree to float32 rounding.
import { DTYPE_INFO, type DType } from "../../ast/graph/dtype.js"
import type { BinOp, Expr, Intrinsic } from "../../ast/te/expr.js"
import { intervalOf } from "../../ast/te/simplify.js"
import type { ExprRenderer } from "../c-family/expr.js"

/** The C type a buffer of `d` holds (the same bytes as our typed-array storage: the dtype table's). */
export const cStorage = (d: DType): string => DTYPE_INFO[d].c

export type ValueClass = "f32" | "f64" | "int" | "u64"

export const valueClass = (d: DType): ValueClass =>
  d === "float32" || d === "float16" || d === "bfloat16" ? "f32" : d === "float64" ? "f64" : d === "uint64" ? "u64" : "int"

/** The C type of a scalar (a let, a temporary) holding a value of `d`. */
export const C_VALUE: { readonly [C in ValueClass]: string } = { f32: "float", f64: "double", int: "int64_t", u64: "uint64_t" }

const fnum = (x: number): string => {
  const s = String(x)
  return /[.e]/.test(s) ? s : `${s}.0`
}

/** A C literal of `value` in the value class of `dtype`. */
export const constC = (value: number, dtype: DType): string => {
  const cls = valueClass(dtype)
  if (cls === "u64") {
    // (NaN as 0, as the conversion makes it; at or past 2^64, the type's bound, which Min reductions
    // start from; a negative one wrapped, as Sub's rewrite to a + b · -1 needs: -1 is 2^64 - 1)
    const t = Number.isNaN(value) ? 0 : Math.trunc(value)
    if (t >= 2 ** 64) return "UINT64_MAX"
    if (t < 0) return `((uint64_t)${constC(t, "int64")})`
    return Number.isSafeInteger(t) ? `UINT64_C(${t})` : `((uint64_t)${fnum(t)})`
  }
  if (cls === "int") {
    const t = Math.trunc(value)
    if (t === -2147483648) return "(-2147483647 - 1)"
    if (Math.abs(t) <= 2147483647) return t < 0 ? `(${t})` : String(t)
    // (a double at or past ±2^63 is no int64_t: the type's bounds, which Max / Min reductions start from)
    if (t >= 2 ** 63) return "INT64_MAX"
    if (t <= -(2 ** 63)) return "INT64_MIN"
    if (!Number.isSafeInteger(t)) return `((int64_t)${fnum(t)})`
    return t < 0 ? `(-INT64_C(${-t}))` : `INT64_C(${t})`
  }
  const suffix = cls === "f32" ? "f" : ""
  if (Number.isNaN(value)) return "NAN"
  if (value === Infinity) return "INFINITY"
  if (value === -Infinity) return "(-INFINITY)"
  if (Object.is(value, -0)) return `(-0.0${suffix})`
  const lit = `${fnum(value)}${suffix}`
  return value < 0 ? `(${lit})` : lit
}

/**
 * `x` (a C expression computing a value of dtype `from`) converted as storing it in `to` would
 * convert it (the evaluator's `converter(to)`). float16 / bfloat16 always round.
 */
export const castC = (to: DType, from: DType, x: string): string => {
  if (to === "float16") return `tessera_f16(${valueClass(from) === "f32" ? x : `(float)(${x})`})`
  if (to === "bfloat16") return `tessera_bf16(${valueClass(from) === "f32" ? x : `(float)(${x})`})`
  if (to === from) return x
  const src = valueClass(from)
  switch (to) {
    case "float32":
      return src === "f32" ? x : `((float)(${x}))`
    case "float64":
      return src === "f64" ? x : `((double)(${x}))`
    case "bool":
      return `((${x}) != 0)`
    case "int64":
      // truncated and wrapped modulo 2^64 (uint64 values past 2^63 come out negative, as BigInt.asIntN)
      return src === "int" || src === "u64" ? `((int64_t)(${x}))` : `tessera_f2i(${x})`
    case "uint64":
      // the same, wrapped into [0, 2^64): -1 is 2^64 - 1, as BigInt.asUintN
      return src === "int" ? `((uint64_t)(${x}))` : `((uint64_t)tessera_f2i(${x}))`
    default:
      return src === "int" || src === "u64" ? `((${cStorage(to)})(${x}))` : `((${cStorage(to)})tessera_f2i(${x}))`
  }
}

const F32_OP: Partial<Record<BinOp, string>> = { add: "+", sub: "-", mul: "*", div: "/" }

/**
 * A float64 sum, difference, product or quotient of two float32 values rounded to float32: the
 * float32 operation itself (float64 has at least 2·24 + 2 bits, so rounding its result again gives
 * the float32 one — Figueroa's double-rounding bound), which vectorizes 16 lanes a vector, not 8.
 * An operand is a float32 value widened, or a float64 constant that is a float32.
 */
const narrowedFloatOp = (e: Extract<Expr, { kind: "cast" }>, render: (x: Expr) => string): string | undefined => {
  const v = e.value
  if (e.dtype !== "float32" || v.kind !== "bin" || v.dtype !== "float64" || !F32_OP[v.op]) return undefined
  const narrow = (x: Expr): string | undefined =>
    x.kind === "cast" && x.value.dtype === "float32" ? render(x.value) : x.kind === "const" && Math.fround(x.value) === x.value ? constC(x.value, "float32") : undefined
  const [a, b] = [narrow(v.a), narrow(v.b)]
  return a !== undefined && b !== undefined ? `((${a}) ${F32_OP[v.op]} (${b}))` : undefined
}

/** Integer types every value of int32's range converts to by wrapping as tessera_f2i's int64 would. */
const NARROW_INT: ReadonlySet<DType> = new Set<DType>(["int8", "uint8", "int16", "uint16", "int32", "uint32"])

/**
 * The range [lo, hi] a float expression is clamped to by min / max against number constants (NaN
 * aside, which they let through), or undefined where it is not clamped on both sides.
 */
export const clampRange = (e: Expr): readonly [number, number] | undefined => {
  if (e.kind !== "bin" || (e.op !== "min" && e.op !== "max")) return undefined
  const [k, other] = isNumberConst(e.b) ? [e.b, e.a] : isNumberConst(e.a) ? [e.a, e.b] : [undefined, undefined]
  if (!k || k.kind !== "const" || !other) return undefined
  const inner = clampRange(other) ?? [-Infinity, Infinity]
  return e.op === "min" ? [Math.min(inner[0], k.value), Math.min(inner[1], k.value)] : [Math.max(inner[0], k.value), Math.max(inner[1], k.value)]
}

/**
 * A float → integer cast whose operand is clamped within int32's range (or NaN): the vectorizable
 * conversion (truncation, NaN → 0, then the narrowing wrap), equal to tessera_f2i's; undefined otherwise.
 */
const clampedF2i = (e: Extract<Expr, { kind: "cast" }>, x: string): string | undefined => {
  const cls = valueClass(e.value.dtype)
  if (cls === "int" || cls === "u64" || !NARROW_INT.has(e.dtype)) return undefined
  const r = clampRange(e.value)
  if (!r || !(r[0] > -2147483649 && r[1] < 2147483648)) return undefined
  const v = `tessera_f2i_in32${cls === "f32" ? "f" : ""}(${x})`
  return e.dtype === "int32" ? v : `((${cStorage(e.dtype)})${v})`
}

/** The 8- and 16-bit integer dtypes: a zero point's, whose float value minus an integer bound is exact in float32. */
const ZP_DTYPES: ReadonlySet<DType> = new Set<DType>(["int8", "uint8", "int16", "uint16"])

/** A requantizing conversion's parts: int(max(lo, min(hi, round(x) + z))), lo ≤ hi integer constants within ±65536, z an 8- or 16-bit zero point cast to the float type. */
export interface RequantizeForm {
  readonly lo: number
  readonly hi: number
  /** The float value rounded. */
  readonly x: Expr
  /** The zero point converted to the float type. */
  readonly z: Extract<Expr, { kind: "cast" }>
}

/** Whether lo ≤ hi are the clamp bounds a requantizing conversion renders: integers within ±65536 (an 8- or 16-bit range with room). */
export const requantizeBounds = (lo: number, hi: number): boolean => Number.isInteger(lo) && Number.isInteger(hi) && lo <= hi && Math.abs(lo) <= 65536 && Math.abs(hi) <= 65536

/** The parts of `e` as a requantizing conversion (whatever its types: each renderer checks its own), or undefined where it is not one. */
export const requantizeForm = (e: Extract<Expr, { kind: "cast" }>): RequantizeForm | undefined => {
  const outer = e.value
  if (outer.kind !== "bin" || outer.op !== "max" || outer.a.kind !== "const") return undefined
  const inner = outer.b
  if (inner.kind !== "bin" || inner.op !== "min" || inner.a.kind !== "const") return undefined
  const [lo, hi] = [outer.a.value, inner.a.value]
  if (!requantizeBounds(lo, hi)) return undefined
  const q = inner.b
  if (q.kind !== "bin" || q.op !== "add" || q.a.kind !== "call" || q.a.fn !== "round") return undefined
  const z = q.b
  if (z.kind !== "cast" || !ZP_DTYPES.has(z.value.dtype)) return undefined
  return { lo, hi, x: q.a.args[0], z }
}

/**
 * The requantizing epilogue's conversion (op-library-quant-int.ts's requantize): int(max(lo, min(hi,
 * round(x) + z))), lo ≤ hi integer constants, z an 8- or 16-bit zero point as a float32 (or all of it
 * in float64: QuantizeLinear's, op-library-quant.ts — round(x) + z then exact up to 2^53, and past it
 * still beyond the bounds), rendered as
 * int(round(max(lo − z, min(hi − z, x))) + z) — MLAS's order, the same value: rounding is monotone and
 * keeps the integer bounds, round(x) + z is exact inside [lo, hi] and monotone outside it, and a NaN
 * x gives 0 both ways. gcc vectorizes this as vminps, vmaxps, vrndscaleps, vaddps and one NaN-masked
 * conversion; the clamp after the sum it fused with the conversion's NaN test into seven mask
 * operations and a blend (laws/lowering/requantize.law.ts). undefined where `e` is not that form.
 */
const requantizeF2i = (e: Extract<Expr, { kind: "cast" }>, render: (x: Expr) => string): string | undefined => {
  const fdt = e.value.dtype
  if (!NARROW_INT.has(e.dtype) || (fdt !== "float32" && fdt !== "float64")) return undefined
  const parts = requantizeForm(e)
  if (!parts) return undefined
  const { lo, hi } = parts
  const [x, zs] = [render(parts.x), render(parts.z)]
  const f = fdt === "float32" ? "f" : ""
  const v = `tessera_f2i_in32${f}(nearbyint${f}(tessera_maxc${f || "d"}(tessera_minc${f || "d"}(${x}, (${constC(hi, fdt)} - ${zs})), (${constC(lo, fdt)} - ${zs}))) + ${zs})`
  return e.dtype === "int32" ? v : `((${cStorage(e.dtype)})${v})`
}

const CMP: Partial<Record<BinOp, string>> = { add: "+", sub: "-", mul: "*", eq: "==", ne: "!=", lt: "<", le: "<=", gt: ">", ge: ">=", and: "&&", or: "||" }

/** Intrinsics that are one call (libm's, or the prelude's where libm's does not vectorize: exp, erf), the rest rendered inline below; a new Intrinsic fails to compile until it is placed. */
type LibmFn = Exclude<Intrinsic, "neg" | "not" | "rsqrt" | "sigmoid">
/** round is half to even: nearbyint in the default rounding mode. */
const F32_FN: { readonly [K in LibmFn]: string } = { exp: "tessera_expf", log: "logf", sqrt: "sqrtf", tanh: "tanhf", erf: "tessera_erff", floor: "floorf", ceil: "ceilf", round: "nearbyintf", sin: "sinf", cos: "cosf", fabs: "fabsf", pow: "powf", fma: "fmaf" }
const F64_FN: { readonly [K in LibmFn]: string } = { exp: "exp", log: "log", sqrt: "sqrt", tanh: "tanh", erf: "erf", floor: "floor", ceil: "ceil", round: "nearbyint", sin: "sin", cos: "cos", fabs: "fabs", pow: "pow", fma: "fma" }

const positiveConst = (e: Expr): boolean => e.kind === "const" && e.value > 0 && Number.isInteger(e.value)

/** A constant that is a number (not NaN): a min / max bound that needs no NaN test of its own. */
const isNumberConst = (e: Expr): boolean => e.kind === "const" && typeof e.value === "number" && !Number.isNaN(e.value)

/** The c target's expressions, each in its value class (see the file header); the scope's bounds make division cheaper where operands are ≥ 0. */
export const C_EXPR: ExprRenderer = {
  const: (e) => constC(e.value, e.dtype),
  cast: (e, value, render) => requantizeF2i(e, render) ?? clampedF2i(e, value) ?? narrowedFloatOp(e, render) ?? castC(e.dtype, e.value.dtype, value),
  call: (e, a) => {
    const cls = valueClass(e.args[0].dtype)
    switch (e.fn) {
      case "neg":
        return `(-(${a[0]}))`
      case "not":
        return `(!(${a[0]}))`
      case "rsqrt":
        return cls === "f32" ? `(1.0f / sqrtf(${a[0]}))` : `(1.0 / sqrt(${cls === "int" ? `(double)(${a[0]})` : a[0]}))`
      case "sigmoid":
        return cls === "f32" ? `tessera_sigmoidf(${a[0]})` : `(1.0 / (1.0 + exp(-(double)(${a[0]}))))`
      default: {
        if (cls === "int" || cls === "u64") {
          if (e.fn === "fabs") return cls === "u64" ? a[0] : `tessera_absi(${a[0]})`
          if (e.fn === "floor" || e.fn === "ceil" || e.fn === "round") return a[0]
          return `${F64_FN[e.fn]}(${a.map((x) => `(double)(${x})`).join(", ")})`
        }
        return `${(cls === "f32" ? F32_FN : F64_FN)[e.fn]}(${a.join(", ")})`
      }
    }
  },
  bin: (e, a, b, scope) => {
    const cls = valueClass(e.a.dtype)
    const int64 = e.a.dtype === "int64"
    const nonNegative = () => intervalOf(e.a, scope.bounds).min >= 0
    switch (e.op) {
      case "div":
        // (an int64 divided by -1 goes through the helper: INT64_MIN / -1 traps)
        if (cls === "int") return positiveConst(e.b) || (e.b.kind === "const" && e.b.value !== 0 && !(int64 && e.b.value === -1)) ? `(${a} / ${b})` : `tessera_idiv(${a}, ${b})`
        if (cls === "u64") return positiveConst(e.b) ? `(${a} / ${b})` : `tessera_udiv(${a}, ${b})`
        return `(${a} / ${b})`
      case "floordiv":
        if (cls === "int") return positiveConst(e.b) && nonNegative() ? `(${a} / ${b})` : `tessera_floordiv(${a}, ${b})`
        if (cls === "u64") return positiveConst(e.b) ? `(${a} / ${b})` : `tessera_udiv(${a}, ${b})`
        return cls === "f32" ? `floorf(${a} / ${b})` : `floor(${a} / ${b})`
      case "floormod":
        if (cls === "int") return positiveConst(e.b) && nonNegative() ? `(${a} % ${b})` : `tessera_floormod(${a}, ${b})`
        if (cls === "u64") return positiveConst(e.b) ? `(${a} % ${b})` : `tessera_umod(${a}, ${b})`
        return cls === "f32" ? `tessera_floormodf(${a}, ${b})` : `tessera_floormodd(${a}, ${b})`
      case "min":
      case "max": {
        const suffix = cls === "f32" ? "f" : cls === "f64" ? "d" : cls === "u64" ? "u" : "i"
        // a float bound that is a constant (Relu's 0, Clip's bounds): the one-instruction form
        // (NaN still propagates; only a -0 against a 0 bound may keep its sign)
        if (suffix === "f" || suffix === "d") {
          if (isNumberConst(e.b)) return `tessera_${e.op}c${suffix}(${a}, ${b})`
          if (isNumberConst(e.a)) return `tessera_${e.op}c${suffix}(${b}, ${a})`
        }
        return `tessera_${e.op}${suffix}(${a}, ${b})`
      }
      case "add":
        // x + (-k) reads as x - k
        return e.b.kind === "const" && e.b.value < 0 && cls === "int" && Number.isSafeInteger(e.b.value) && e.b.value > -2147483648 ? `(${a} - ${-e.b.value})` : `(${a} + ${b})`
      default:
        return `(${a} ${CMP[e.op]} ${b})`
    }
  },
}
