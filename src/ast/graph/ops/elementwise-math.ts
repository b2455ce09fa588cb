// Unary math ops: each a scalar function mapped over its input (computed in float64, stored in
// the input's dtype), plus the predicates IsNaN / IsInf / Not and BitwiseNot.
import { A, attrs } from "../attrs.js"
import { isFloat, isInteger, type DType } from "../dtype.js"
import type { AnyOpDef } from "../op.js"
import { unary, unaryOp, type Run1, type Scalar1 } from "./elementwise-kernels.js"

/** Round half to even (banker's rounding), as ONNX Round and numpy.round. */
export const roundHalfEven: Scalar1 = (x) => {
  const r = Math.round(x) // half up
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r
}

const MID_P = [0.5641884969886701, 8.883149794388376, 66.11919063714163, 298.6351381974, 881.952221241769, 1712.0476126340707, 2051.0783778260716, 1230.339354797997]
const MID_Q = [15.744926110709835, 117.6939508913125, 537.1811018620099, 1621.3895745666903, 3290.7992357334597, 4362.619090143247, 3439.3676741437216, 1230.3393548037495]
const BIG_P = [0.30532663496123236, 0.36034489994980445, 0.12578172611122926, 0.016083785148742275, 6.587491615298378e-4]
const BIG_Q = [2.568520192289822, 1.8729528499234604, 0.5279051029514285, 0.06051834131244132, 0.0023352049762686918]

/**
 * The error function to double precision: W. J. Cody's rational approximations (Math. Comp. 1969),
 * on [0, 0.5), [0.5, 4) and [4, ∞), with exp(-x²) split in two to keep its relative accuracy.
 */
export const erf: Scalar1 = (x) => {
  const ax = Math.abs(x)
  if (ax < 0.5) {
    const t = x * x
    const num = (((0.18577770618460315 * t + 3.1611237438705656) * t + 113.86415415105016) * t + 377.485237685302) * t + 3209.3775891384694
    const den = (((t + 23.601290952344122) * t + 244.02463793444417) * t + 1282.6165260773723) * t + 2844.2368334391704
    return (x * num) / den
  }
  if (Number.isNaN(ax)) return x
  if (ax > 6) return x < 0 ? -1 : 1 // erfc(6) ≈ 2e-17: below half an ulp of 1
  let r: number
  if (ax < 4) {
    let num = 2.1531153547440383e-8 * ax
    let den = ax
    for (let i = 0; i < 7; i++) {
      num = (num + MID_P[i]) * ax
      den = (den + MID_Q[i]) * ax
    }
    r = (num + MID_P[7]) / (den + MID_Q[7])
  } else {
    const t = 1 / (ax * ax)
    let num = 0.016315387137302097 * t
    let den = t
    for (let i = 0; i < 4; i++) {
      num = (num + BIG_P[i]) * t
      den = (den + BIG_Q[i]) * t
    }
    r = (0.5641895835477563 - (t * (num + BIG_P[4])) / (den + BIG_Q[4])) / ax
  }
  // erfc(|x|) = exp(-x²) · r, with x² = z² + (ax - z)(ax + z) for z = ax rounded down to a multiple of 1/16
  const z = Math.floor(ax * 16) / 16
  const erfc = Math.exp(-z * z) * Math.exp(-(ax - z) * (ax + z)) * r
  return x < 0 ? erfc - 1 : 1 - erfc
}

const bitwiseNot = (dtype: DType): Scalar1 => {
  if (dtype === "int64") return (x) => -x - 1
  if (dtype === "uint64") return (x) => Number(BigInt.asUintN(64, ~BigInt(x)))
  return (x) => ~x // 32-bit NOT; the store keeps the low bits of narrower types
}

// the hot ones written out as runs (see Run1)
const EXP: Run1 = (out, x, n) => {
  for (let i = 0; i < n; i++) out[i] = Math.exp(x[i])
}
const TANH: Run1 = (out, x, n) => {
  for (let i = 0; i < n; i++) out[i] = Math.tanh(x[i])
}
const SQRT: Run1 = (out, x, n) => {
  for (let i = 0; i < n; i++) out[i] = Math.sqrt(x[i])
}
const NEG: Run1 = (out, x, n) => {
  for (let i = 0; i < n; i++) out[i] = -x[i]
}
const ERF: Run1 = (out, x, n) => {
  for (let i = 0; i < n; i++) out[i] = erf(x[i])
}

// (the transcendental ops, Sqrt and Reciprocal take float tensors, as ONNX types them: on an
// integer tensor the evaluator rounded each result while a compiled kernel kept the fraction)
export const unaryMathOps = {
  Abs: unary(Math.abs),
  Neg: unary((x) => -x, { run: NEG }),
  Sign: unary(Math.sign),
  Reciprocal: unary((x) => 1 / x, { accepts: isFloat }),
  Floor: unary(Math.floor),
  Ceil: unary(Math.ceil),
  Round: unary(roundHalfEven),
  Sqrt: unary(Math.sqrt, { run: SQRT, accepts: isFloat }),
  Exp: unary(Math.exp, { run: EXP, accepts: isFloat }),
  Log: unary(Math.log, { accepts: isFloat }),
  Sin: unary(Math.sin, { accepts: isFloat }),
  Cos: unary(Math.cos, { accepts: isFloat }),
  Tan: unary(Math.tan, { accepts: isFloat }),
  Asin: unary(Math.asin, { accepts: isFloat }),
  Acos: unary(Math.acos, { accepts: isFloat }),
  Atan: unary(Math.atan, { accepts: isFloat }),
  Sinh: unary(Math.sinh, { accepts: isFloat }),
  Cosh: unary(Math.cosh, { accepts: isFloat }),
  Tanh: unary(Math.tanh, { run: TANH, accepts: isFloat }),
  Asinh: unary(Math.asinh, { accepts: isFloat }),
  Acosh: unary(Math.acosh, { accepts: isFloat }),
  Atanh: unary(Math.atanh, { accepts: isFloat }),
  Erf: unary(erf, { run: ERF, accepts: isFloat }),
  IsNaN: unary((x) => (x !== x ? 1 : 0), { out: "bool" }),
  IsInf: unaryOp({
    attrs: attrs({ detect_negative: A.int(1), detect_positive: A.int(1) }),
    out: "bool",
    fn: (a) => {
      const pos = a.detect_positive !== 0 ? Infinity : NaN
      const neg = a.detect_negative !== 0 ? -Infinity : NaN
      return (x) => (x === pos || x === neg ? 1 : 0)
    },
  }),
  Not: unary((x) => (x !== 0 ? 0 : 1), { accepts: (d) => d === "bool" }),
  BitwiseNot: unaryOp({ attrs: attrs({}), fn: (_, dtype) => bitwiseNot(dtype), accepts: isInteger }),
} satisfies Record<string, AnyOpDef>
