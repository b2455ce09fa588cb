// Scalar expressions of the `c` target: dtypes → C types, casts with the evaluator's conversion
// semantics (src/ast/graph/dtype.ts `converter`), constants, operators and math intrinsics, and
// the prelude of static inline helpers they call. Pure: Expr → C text.
//
// Value types. Every dtype has a storage type (what a buffer of it holds in memory, matching our
// typed arrays) and a value class (the C type its expressions compute in):
//   float32 / float16 / bfloat16 → float   (float16 / bfloat16 are stored as rounded floats)
//   float64                      → double
//   int64 / uint64               → double   (stored as double: our typed storage is Float64Array,
//                                            exact to 2^53; division truncates, stores truncate)
//   int8 … uint32, bool          → integers (loop variables and integer lets are int64_t, so index
//                                            arithmetic never overflows; stores wrap like C, and
//                                            the build passes -fwrapv so wrapping is defined)
// Float arithmetic runs in the value class (float for float32, so loops vectorize at full width);
// the evaluator computes in double and rounds at stores: results agree to float32 rounding.
import { DTYPE_INFO, DTYPES, type DType } from "../ast/graph/dtype.js"
import type { BinOp, Expr, Intrinsic } from "../ast/te/expr.js"
import { intervalOf, type Bounds } from "../ast/te/simplify.js"

/** The C type a buffer of each dtype holds (the same bytes as our typed-array storage). */
export const C_STORAGE: { readonly [D in DType]: string } = Object.fromEntries(DTYPES.map((d) => [d, DTYPE_INFO[d].c])) as { readonly [D in DType]: string }

export type ValueClass = "f32" | "f64" | "int"

export const valueClass = (d: DType): ValueClass =>
  d === "float32" || d === "float16" || d === "bfloat16" ? "f32" : d === "float64" || d === "int64" || d === "uint64" ? "f64" : "int"

/** The C type of a scalar (a let, a temporary) holding a value of `d`. */
export const C_VALUE: { readonly [C in ValueClass]: string } = { f32: "float", f64: "double", int: "int64_t" }

/** A comment-safe rendering of an arbitrary name: quoted, escaped, ASCII only, no `*​/` or `??`. */
export const commentSafe = (s: string): string =>
  JSON.stringify(s)
    .replace(/\*\//g, "*\\/")
    .replace(/\?/g, "\\u003f")
    .replace(/[^\x20-\x7e]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`)

/** The helpers every translation unit starts with (all `static inline`, prefixed `tessera_`). */
export const C_PRELUDE = `#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* floor division and modulo; a zero divisor yields 0 where the evaluator would raise */
static inline int64_t tessera_floordiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t tessera_floormod(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline int64_t tessera_idiv(int64_t a, int64_t b) { return b == 0 ? 0 : a / b; }
static inline float tessera_floormodf(float a, float b) { return a - floorf(a / b) * b; }
static inline double tessera_floormodd(double a, double b) { return a - floor(a / b) * b; }

/* min / max: NaN propagates (as Math.min / Math.max) */
static inline float tessera_minf(float a, float b) { return (a < b || a != a) ? a : b; }
static inline float tessera_maxf(float a, float b) { return (a > b || a != a) ? a : b; }
static inline double tessera_mind(double a, double b) { return (a < b || a != a) ? a : b; }
static inline double tessera_maxd(double a, double b) { return (a > b || a != a) ? a : b; }
/* against a constant bound c (not NaN): one vminps / vmaxps; a NaN a comes out as itself */
static inline float tessera_mincf(float a, float c) { return c < a ? c : a; }
static inline float tessera_maxcf(float a, float c) { return c > a ? c : a; }
static inline double tessera_mincd(double a, double c) { return c < a ? c : a; }
static inline double tessera_maxcd(double a, double c) { return c > a ? c : a; }
static inline int64_t tessera_mini(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t tessera_maxi(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t tessera_absi(int64_t a) { return a < 0 ? -a : a; }

/* float to integer: truncate toward zero, wrap modulo 2^64 (callers narrow, which wraps further);
   NaN and infinities give 0 */
static inline int64_t tessera_f2i(double x) {
  if (!isfinite(x)) return 0;
  double t = trunc(x);
  if (t > -9.2e18 && t < 9.2e18) return (int64_t)t;
  double m = fmod(t, 18446744073709551616.0);
  if (m < 0) m += 18446744073709551616.0;
  return (int64_t)(uint64_t)m;
}
/* float to int64 / uint64 (held as double): truncate, non-finite gives 0 */
static inline double tessera_f2l(double x) { return isfinite(x) ? trunc(x) : 0.0; }

/* float16 / bfloat16 rounding (through float, round half to even), as dtype.ts does */
static inline float tessera_f16(float x) {
  union { float f; uint32_t u; } v = { x };
  uint32_t b = v.u, sign = (b >> 16) & 0x8000u, m = b & 0x7fffffu;
  int32_t e = (int32_t)((b >> 23) & 0xffu);
  uint32_t h;
  if (e == 255) h = sign | 0x7c00u | (m ? 0x200u : 0u);
  else {
    e = e - 127 + 15;
    if (e >= 31) h = sign | 0x7c00u;
    else if (e <= 0) {
      if (e < -10) h = sign;
      else {
        uint32_t full = m | 0x800000u, shift = (uint32_t)(14 - e);
        uint32_t hm = full >> shift, rem = full & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (hm & 1u))) hm++;
        h = sign | hm;
      }
    } else {
      uint32_t hm = m >> 13, rem = m & 0x1fffu;
      h = sign | ((uint32_t)e << 10) | hm;
      if (rem > 0x1000u || (rem == 0x1000u && (hm & 1u))) {
        hm++;
        if (hm == 0x400u) { hm = 0; e++; }
        h = e >= 31 ? (sign | 0x7c00u) : (sign | ((uint32_t)e << 10) | hm);
      }
    }
  }
  int32_t he = (int32_t)((h >> 10) & 0x1fu);
  uint32_t hm2 = h & 0x3ffu;
  float s = (h & 0x8000u) ? -1.0f : 1.0f;
  if (he == 0) return s * (float)hm2 * 5.9604644775390625e-8f;
  if (he == 31) return hm2 ? NAN : s * INFINITY;
  return s * (1.0f + (float)hm2 / 1024.0f) * ldexpf(1.0f, he - 15);
}
static inline float tessera_bf16(float x) {
  if (x != x) return x;
  union { float f; uint32_t u; } v = { x };
  v.u = (v.u + 0x7fffu + ((v.u >> 16) & 1u)) & 0xffff0000u;
  return v.f;
}

/* heap allocations for large buffers: 64-byte aligned; failure is fatal (no status to return).
   Freed blocks are kept per thread (up to 8) and handed out again for a request of up to their
   size: a kernel's scratch buffers (a padded input, Winograd's transforms) are not unmapped and
   faulted in again on every call */
#define TESSERA_KEEP 8
static _Thread_local void* tessera_kept[TESSERA_KEEP];
static _Thread_local size_t tessera_kept_bytes[TESSERA_KEEP];
static inline void* tessera_alloc(size_t bytes) {
  size_t n = (bytes + 63) & ~(size_t)63;
  for (int i = 0; i < TESSERA_KEEP; i++)
    if (tessera_kept[i] && tessera_kept_bytes[i] >= n && tessera_kept_bytes[i] / 2 <= n) {
      void* p = tessera_kept[i];
      tessera_kept[i] = 0;
      return p;
    }
  void* p = aligned_alloc(64, n);
  if (!p) { fprintf(stderr, "tessera: out of memory allocating %zu bytes\\n", bytes); abort(); }
  return p;
}
static inline void tessera_free(void* p, size_t bytes) {
  for (int i = 0; i < TESSERA_KEEP; i++)
    if (!tessera_kept[i]) {
      tessera_kept[i] = p;
      tessera_kept_bytes[i] = (bytes + 63) & ~(size_t)63;
      return;
    }
  free(p);
}
`

const fnum = (x: number): string => {
  const s = String(x)
  return /[.e]/.test(s) ? s : `${s}.0`
}

/** A C literal of `value` in the value class of `dtype`. */
export const constC = (value: number, dtype: DType): string => {
  const cls = valueClass(dtype)
  if (cls === "int") {
    const t = Math.trunc(value)
    if (t === -2147483648) return "(-2147483647 - 1)"
    if (Math.abs(t) <= 2147483647) return t < 0 ? `(${t})` : String(t)
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
    case "uint64":
      return src === "int" ? `((double)(${x}))` : from === "int64" || from === "uint64" ? x : `tessera_f2l(${x})`
    default:
      return src === "int" ? `((${C_STORAGE[to]})(${x}))` : `((${C_STORAGE[to]})tessera_f2i(${x}))`
  }
}

const CMP: Partial<Record<BinOp, string>> = { add: "+", sub: "-", mul: "*", eq: "==", ne: "!=", lt: "<", le: "<=", gt: ">", ge: ">=", and: "&&", or: "||" }

/** Intrinsics that are one libm call (the rest are rendered inline below); a new Intrinsic fails to compile until it is placed. */
type LibmFn = Exclude<Intrinsic, "neg" | "not" | "rsqrt" | "sigmoid">
/** round is half to even: nearbyint in the default rounding mode. */
const F32_FN: { readonly [K in LibmFn]: string } = { exp: "expf", log: "logf", sqrt: "sqrtf", tanh: "tanhf", erf: "erff", floor: "floorf", ceil: "ceilf", round: "nearbyintf", sin: "sinf", cos: "cosf", fabs: "fabsf", pow: "powf" }
const F64_FN: { readonly [K in LibmFn]: string } = { exp: "exp", log: "log", sqrt: "sqrt", tanh: "tanh", erf: "erf", floor: "floor", ceil: "ceil", round: "nearbyint", sin: "sin", cos: "cos", fabs: "fabs", pow: "pow" }

/** How names and buffers are rendered: the statement emitter owns the naming. */
export interface ExprScope {
  readonly variable: (name: string) => string
  /** The C expression of an element of buffer `source` at `indices`. */
  readonly access: (source: string, indices: readonly Expr[]) => string
  /** Known integer ranges of loop variables (for cheaper division where operands are ≥ 0). */
  readonly bounds: Bounds
}

const positiveConst = (e: Expr): boolean => e.kind === "const" && e.value > 0 && Number.isInteger(e.value)

/** A constant that is a number (not NaN): a min / max bound that needs no NaN test of its own. */
const isNumberConst = (e: Expr): boolean => e.kind === "const" && typeof e.value === "number" && !Number.isNaN(e.value)

/** Renders `e` in its value class (see the file header). Reductions must have been lowered. */
export const exprC = (e: Expr, scope: ExprScope): string => {
  const r = (x: Expr) => exprC(x, scope)
  switch (e.kind) {
    case "const":
      return constC(e.value, e.dtype)
    case "var":
      return scope.variable(e.name)
    case "read":
      return scope.access(e.source, e.indices)
    case "select":
      return `(${r(e.cond)} ? ${r(e.t)} : ${r(e.f)})`
    case "cast":
      return castC(e.dtype, e.value.dtype, r(e.value))
    case "reduce":
      throw new Error("a reduction reached the c emitter: lower it first")
    case "call": {
      const a = e.args.map(r)
      const cls = valueClass(e.args[0].dtype)
      switch (e.fn) {
        case "neg":
          return `(-(${a[0]}))`
        case "not":
          return `(!(${a[0]}))`
        case "rsqrt":
          return cls === "f32" ? `(1.0f / sqrtf(${a[0]}))` : `(1.0 / sqrt(${cls === "int" ? `(double)(${a[0]})` : a[0]}))`
        case "sigmoid":
          return cls === "f32" ? `(1.0f / (1.0f + expf(-(${a[0]}))))` : `(1.0 / (1.0 + exp(-(double)(${a[0]}))))`
        default: {
          if (cls === "int") {
            if (e.fn === "fabs") return `tessera_absi(${a[0]})`
            if (e.fn === "floor" || e.fn === "ceil" || e.fn === "round") return a[0]
            return `${F64_FN[e.fn]}(${a.map((x) => `(double)(${x})`).join(", ")})`
          }
          return `${(cls === "f32" ? F32_FN : F64_FN)[e.fn]}(${a.join(", ")})`
        }
      }
    }
    case "bin": {
      const a = r(e.a)
      const b = r(e.b)
      const cls = valueClass(e.a.dtype)
      const int64 = e.a.dtype === "int64" || e.a.dtype === "uint64"
      const nonNegative = () => intervalOf(e.a, scope.bounds).min >= 0
      switch (e.op) {
        case "div":
          if (cls === "int") return positiveConst(e.b) || (e.b.kind === "const" && e.b.value !== 0) ? `(${a} / ${b})` : `tessera_idiv(${a}, ${b})`
          return int64 ? `trunc(${a} / ${b})` : `(${a} / ${b})`
        case "floordiv":
          if (cls === "int") return positiveConst(e.b) && nonNegative() ? `(${a} / ${b})` : `tessera_floordiv(${a}, ${b})`
          return cls === "f32" ? `floorf(${a} / ${b})` : `floor(${a} / ${b})`
        case "floormod":
          if (cls === "int") return positiveConst(e.b) && nonNegative() ? `(${a} % ${b})` : `tessera_floormod(${a}, ${b})`
          return cls === "f32" ? `tessera_floormodf(${a}, ${b})` : `tessera_floormodd(${a}, ${b})`
        case "min":
        case "max": {
          const suffix = cls === "f32" ? "f" : cls === "f64" ? "d" : "i"
          // a float bound that is a constant (Relu's 0, Clip's bounds): the one-instruction form
          // (NaN still propagates; only a -0 against a 0 bound may keep its sign)
          if (suffix !== "i") {
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
    }
  }
}
