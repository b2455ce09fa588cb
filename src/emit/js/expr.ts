// Scalar expressions of the `js` target: every value is a JS number but int64 / uint64 ones, which
// are BigInts (their buffers BigInt64Arrays / BigUint64Arrays: every value exact), wrapped to 64
// bits after every operation as C's int64_t / uint64_t and the evaluator's exact kernels
// (src/ast/graph/ops/exact-int64.ts) wrap. Casts apply the evaluator's conversion
// (src/ast/graph/dtype.ts `converter`, ops/exact-int64.ts `bigToDtype`) with JS's own operators
// (Math.fround, `| 0`, shifts, BigInt.asIntN); comparisons and logic give 0 / 1; floor division,
// modulo, round half to even and erf call the module's prelude. An operator whose operands mix a
// BigInt with an integer number converts the number (BigInt arithmetic); with a float, the BigInt
// (Number). Pure: Expr → JS text.
import type { DType } from "../../ast/graph/dtype.js"
import { isWide } from "../../ast/graph/int64.js"
import { isIntDtype, type BinOp, type Expr } from "../../ast/te/expr.js"
import type { ExprRenderer } from "../c-family/expr.js"

/** The helpers every module starts with (each named with a `$`, which no generated name has). */
export const JS_PRELUDE = `const $floordiv = (a, b) => Math.floor(a / b);
const $floormod = (a, b) => a - Math.floor(a / b) * b;
const $round = (x) => { const r = Math.round(x); return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r; };
const $erf = (x) => {
  const t = 1 / (1 + 0.5 * Math.abs(x));
  const y = 1 - t * Math.exp(-x * x - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return x >= 0 ? y : -y;
};
const $f2i64 = (x) => (Number.isFinite(x) ? BigInt.asIntN(64, BigInt(Math.trunc(x))) : 0n);
const $f2u64 = (x) => (Number.isFinite(x) ? BigInt.asUintN(64, BigInt(Math.trunc(x))) : 0n);
const $bdiv = (a, b) => (b === 0n ? 0n : a / b);
const $bfloordiv = (a, b) => { if (b === 0n) return 0n; const q = a / b; return a % b !== 0n && (a < 0n) !== (b < 0n) ? q - 1n : q; };
const $bfloormod = (a, b) => { if (b === 0n) return 0n; const r = a % b; return r !== 0n && (r < 0n) !== (b < 0n) ? r + b : r; };
const $bmin = (a, b) => (a < b ? a : b);
const $bmax = (a, b) => (a > b ? a : b);
const $babs = (a) => (a < 0n ? -a : a);
const $b2f32 = (v) => {
  const a = v < 0n ? -v : v;
  if (a <= 9007199254740992n) return Math.fround(Number(v));
  const shift = BigInt(a.toString(2).length - 24);
  let q = a >> shift;
  const rem = a - (q << shift), half = 1n << (shift - 1n);
  if (rem > half || (rem === half && (q & 1n) === 1n)) q += 1n;
  const r = Math.fround(Number(q) * 2 ** Number(shift));
  return v < 0n ? -r : r;
};
`

const BIN: Partial<Record<BinOp, string>> = { add: "+", sub: "-", mul: "*", eq: "===", ne: "!==", lt: "<", le: "<=", gt: ">", ge: ">=", and: "&&", or: "||" }

const num = (x: number): string => (Number.isNaN(x) ? "NaN" : x === Infinity ? "Infinity" : x === -Infinity ? "-Infinity" : Object.is(x, -0) ? "-0" : String(x))

/** `e` (a JS number) converted as storing it in `dtype` would convert it. */
export const castJs = (dtype: DType, e: string): string => {
  switch (dtype) {
    case "float32":
      return `Math.fround(${e})`
    case "float64":
    case "float16":
    case "bfloat16":
      return e
    case "bool":
      return `((${e}) ? 1 : 0)`
    case "int32":
      return `((${e}) | 0)`
    case "uint32":
      return `((${e}) >>> 0)`
    case "int8":
      return `((((${e}) | 0) << 24) >> 24)`
    case "uint8":
      return `(((${e}) | 0) & 255)`
    case "int16":
      return `((((${e}) | 0) << 16) >> 16)`
    case "uint16":
      return `(((${e}) | 0) & 65535)`
    case "int64":
    case "uint64":
      return `Math.trunc(${e})`
  }
}

/** A BigInt literal of `value` in int64 / uint64: truncated, NaN as 0, at or past the type's bounds its bounds (Max / Min reductions start from them); a negative uint64 one wrapped (Sub's a + b · -1). */
const bigLit = (value: number, d: "int64" | "uint64"): string => {
  const t = Number.isNaN(value) ? 0 : Math.trunc(value)
  if (d === "uint64") return t >= 2 ** 64 ? "18446744073709551615n" : t < 0 ? `${BigInt.asUintN(64, BigInt(bigLit(t, "int64").slice(0, -1)))}n` : `${BigInt(t)}n`
  return t >= 2 ** 63 ? "9223372036854775807n" : t <= -(2 ** 63) ? "-9223372036854775808n" : `${BigInt(t)}n`
}

/** `x` wrapped to the 64 bits of `d`. */
const wrap = (d: "int64" | "uint64", x: string): string => `BigInt.as${d === "uint64" ? "Uint" : "Int"}N(64, ${x})`

/** An integer number operand as a BigInt (a constant as its literal). */
const toBig = (e: Expr, text: string): string => (e.kind === "const" ? bigLit(e.value, "int64") : `BigInt(${text})`)

/** `x` (a BigInt of dtype `from`) converted as storing it in `to` would convert it (ops/exact-int64.ts `bigToDtype`, `wrapWide`). */
const castFromBig = (to: DType, from: "int64" | "uint64", x: string): string => {
  switch (to) {
    case "int64":
    case "uint64":
      return to === from ? x : wrap(to, x)
    case "float64":
    case "float16":
    case "bfloat16":
      return `Number(${x})`
    case "float32":
      return `$b2f32(${x})`
    case "bool":
      return `((${x}) !== 0n ? 1 : 0)`
    case "int8":
    case "int16":
    case "int32":
      return `Number(BigInt.asIntN(${to.slice(3)}, ${x}))`
    case "uint8":
    case "uint16":
    case "uint32":
      return `Number(BigInt.asUintN(${to.slice(4)}, ${x}))`
  }
}

/** `x` (a number of dtype `from`) converted to int64 / uint64: a float truncated and wrapped (NaN and ±∞ give 0), an integer wrapped. */
const castToBig = (to: "int64" | "uint64", from: DType, x: string): string => {
  if (!isIntDtype(from)) return `${to === "uint64" ? "$f2u64" : "$f2i64"}(${x})`
  return to === "uint64" && from !== "uint8" && from !== "uint16" && from !== "uint32" && from !== "bool" ? wrap(to, `BigInt(${x})`) : `BigInt(${x})`
}

/** A binary operator on BigInts of `d`, its result wrapped; comparisons and logic give 0 / 1 (numbers). */
const bigBin = (op: BinOp, d: "int64" | "uint64", a: string, b: string): string => {
  switch (op) {
    case "add":
    case "sub":
    case "mul":
      return wrap(d, `${a} ${BIN[op]} ${b}`)
    case "div":
      return wrap(d, `$bdiv(${a}, ${b})`)
    case "floordiv":
      return wrap(d, `$bfloordiv(${a}, ${b})`)
    case "floormod":
      return `$bfloormod(${a}, ${b})`
    case "min":
      return `$bmin(${a}, ${b})`
    case "max":
      return `$bmax(${a}, ${b})`
    default:
      return `((${a} ${BIN[op]} ${b}) ? 1 : 0)`
  }
}

/** The js target's expressions: a JS number each, a BigInt where int64 / uint64 (see the file header). */
export const JS_EXPR: ExprRenderer = {
  const: (e) => (isWide(e.dtype) ? bigLit(e.value, e.dtype) : num(e.value)),
  cast: (e, value) => {
    const from = e.value.dtype
    if (isWide(from)) return castFromBig(e.dtype, from, value)
    if (isWide(e.dtype)) return castToBig(e.dtype, from, value)
    return castJs(e.dtype, value)
  },
  call: (e, args) => {
    const wideArgs = e.args.map((x) => isWide(x.dtype))
    if (wideArgs.some(Boolean)) {
      const d = e.args[0].dtype
      if (isWide(d) && e.args.length === 1 && (e.fn === "neg" || e.fn === "fabs" || e.fn === "floor" || e.fn === "ceil" || e.fn === "round" || e.fn === "not")) {
        const x = args[0]
        const v = e.fn === "neg" ? wrap(d, `-(${x})`) : e.fn === "fabs" ? (d === "uint64" ? x : wrap(d, `$babs(${x})`)) : e.fn === "not" ? `((${x}) ? 0 : 1)` : x
        return e.fn === "not" && isWide(e.dtype) ? `BigInt(${v})` : v
      }
      // the rest (exp, pow, sqrt…) in double, as the c target computes them: the operands as numbers, a wide result truncated back
      const numeric = JS_EXPR.call({ ...e, args: e.args.map((x) => ({ ...x, dtype: "float64" as const })) } as typeof e, args.map((x, k) => (wideArgs[k] ? `Number(${x})` : x)), undefined as never)
      return isWide(e.dtype) ? `$f2i64(${numeric})` : numeric
    }
    const a = args
    switch (e.fn) {
      case "exp":
      case "log":
      case "sqrt":
      case "tanh":
      case "floor":
      case "ceil":
      case "sin":
      case "cos":
        return `Math.${e.fn}(${a[0]})`
      case "pow":
        return `Math.pow(${a[0]}, ${a[1]})`
      case "fma":
        // (in float64, rounded once: the fused result where the sum is exact in float64, as the intrinsic's uses show)
        return `Math.fround((${a[0]}) * (${a[1]}) + (${a[2]}))`
      case "rsqrt":
        return `(1 / Math.sqrt(${a[0]}))`
      case "sigmoid":
        return `(1 / (1 + Math.exp(-(${a[0]}))))`
      case "fabs":
        return `Math.abs(${a[0]})`
      case "erf":
        return `$erf(${a[0]})`
      case "round":
        return `$round(${a[0]})`
      case "neg":
        return `(-(${a[0]}))`
      case "not":
        return `((${a[0]}) ? 0 : 1)`
    }
  },
  bin: (e, a, b, scope) => {
    const wa = isWide(e.a.dtype)
    const wb = isWide(e.b.dtype)
    if (wa || wb) {
      const d = wa ? (e.a.dtype as "int64" | "uint64") : (e.b.dtype as "int64" | "uint64")
      // with an integer operand: BigInt arithmetic; with a float one, number arithmetic
      if (isIntDtype(e.a.dtype) && isIntDtype(e.b.dtype)) return bigBin(e.op, d, wa ? a : toBig(e.a, a), wb ? b : toBig(e.b, b))
      return JS_EXPR.bin({ ...e, a: { ...e.a, dtype: "float64" }, b: { ...e.b, dtype: "float64" } } as typeof e, wa ? `Number(${a})` : a, wb ? `Number(${b})` : b, scope)
    }
    const int = isIntDtype(e.a.dtype)
    switch (e.op) {
      case "div":
        return int ? `Math.trunc(${a} / ${b})` : `(${a} / ${b})`
      case "floordiv":
        return int ? `$floordiv(${a}, ${b})` : `Math.floor(${a} / ${b})`
      case "floormod":
        return `$floormod(${a}, ${b})`
      case "min":
        return `Math.min(${a}, ${b})`
      case "max":
        return `Math.max(${a}, ${b})`
      case "eq":
      case "ne":
      case "lt":
      case "le":
      case "gt":
      case "ge":
      case "and":
      case "or":
        return `((${a} ${BIN[e.op]} ${b}) ? 1 : 0)`
      default:
        return `(${a} ${BIN[e.op]} ${b})`
    }
  },
}
