// Scalar expressions of the `js` target: every value is a JS number; casts apply the evaluator's
// conversion (src/ast/graph/dtype.ts `converter`) with JS's own operators (Math.fround, `| 0`,
// shifts); comparisons and logic give 0 / 1; floor division, modulo, round half to even and erf
// call the module's prelude. Pure: Expr → JS text.
import type { DType } from "../../ast/graph/dtype.js"
import { isIntDtype, type BinOp } from "../../ast/te/expr.js"
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

/** The js target's expressions, each a JS number. */
export const JS_EXPR: ExprRenderer = {
  const: (e) => num(e.value),
  cast: (e, value) => castJs(e.dtype, value),
  call: (e, a) => {
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
  bin: (e, a, b) => {
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
