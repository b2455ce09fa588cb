// Evaluation of scalar expressions on numbers: the shared core of the TE and TIR evaluators.
import { converter } from "../graph/dtype.js"
import { applyBin, isIntDtype, type Expr, type Intrinsic } from "./expr.js"

export type Reader = (source: string, indices: readonly number[]) => number

/** erf as the TE/TIR evaluators compute it (targets that import math from JS use this one too). */
export const erf = (x: number): number => {
  // Abramowitz–Stegun 7.1.26 refined with a series near 0 would do; use a high-precision form
  const t = 1 / (1 + 0.5 * Math.abs(x))
  const y =
    1 -
    t *
      Math.exp(
        -x * x -
          1.26551223 +
          t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
      )
  return x >= 0 ? y : -y
}

/**
 * x·y + z rounded once to float32, for float32 values x, y, z: x·y is exact in float64, the sum
 * rounded to float64 with its error (TwoSum) is exact, and the one float32 rounding that the
 * float64 one can get wrong — the sum landing on a float32 midpoint it is not — is taken to the
 * neighbour on the error's side.
 */
export const fmaFloat32 = (x: number, y: number, z: number): number => {
  const p = x * y
  const s = p + z
  const bb = s - p
  const err = p - (s - bb) + (z - bb)
  const r = Math.fround(s)
  if (err === 0 || r === s || !Number.isFinite(s)) return r
  // s a midpoint of r and its other neighbour exactly when that neighbour (2s − r) is a float32
  // (an overflow to ±Infinity counted as ±2^128, where float32's next power of two would be)
  const rr = Number.isFinite(r) ? r : Math.sign(r) * 2 ** 128
  const other = 2 * s - rr
  if (Math.fround(other) !== other) return r
  const pick = err > 0 ? Math.max(rr, other) : Math.min(rr, other)
  return pick === rr ? r : pick
}

const INTRINSICS: { readonly [K in Intrinsic]: (...a: number[]) => number } = {
  exp: Math.exp,
  log: Math.log,
  sqrt: Math.sqrt,
  rsqrt: (x) => 1 / Math.sqrt(x),
  tanh: Math.tanh,
  erf,
  pow: Math.pow,
  fma: fmaFloat32,
  sigmoid: (x) => 1 / (1 + Math.exp(-x)),
  fabs: Math.abs,
  floor: Math.floor,
  ceil: Math.ceil,
  round: (x) => {
    const r = Math.round(x)
    return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r
  },
  sin: Math.sin,
  cos: Math.cos,
  neg: (x) => -x,
  not: (x) => (x ? 0 : 1),
}

/** Evaluates `e` with variables from `env` and tensor reads through `read`. Select is lazy. */
export const evalExpr = (e: Expr, env: ReadonlyMap<string, number>, read: Reader): number => {
  switch (e.kind) {
    case "const":
      return e.value
    case "var": {
      const x = env.get(e.name)
      if (x === undefined) throw new ReferenceError(`variable '${e.name}' is not bound`)
      return x
    }
    case "bin": {
      const a = evalExpr(e.a, env, read)
      const b = evalExpr(e.b, env, read)
      if (isIntDtype(e.a.dtype) && (e.op === "div" || e.op === "floordiv" || e.op === "floormod") && b === 0)
        throw new RangeError(`integer ${e.op} by zero`)
      return applyBin(e.op, a, b, e.a.dtype)
    }
    case "select":
      return evalExpr(e.cond, env, read) ? evalExpr(e.t, env, read) : evalExpr(e.f, env, read)
    case "cast":
      return converter(e.dtype)(evalExpr(e.value, env, read))
    case "call":
      return INTRINSICS[e.fn](...e.args.map((a) => evalExpr(a, env, read)))
    case "read":
      return read(e.source, e.indices.map((i) => evalExpr(i, env, read)))
    case "reduce": {
      const acc = new Map(env)
      let result = e.combiner.identity(e.dtype)
      const axes = e.axes
      const idx = axes.map((a) => a.dom.min)
      if (axes.some((a) => a.dom.extent <= 0)) return result
      for (;;) {
        axes.forEach((a, k) => acc.set(a.var.name, idx[k]))
        if (!e.where || evalExpr(e.where, acc, read)) {
          const x = evalExpr(e.source, acc, read)
          const cenv = new Map([
            [e.combiner.lhs.name, result],
            [e.combiner.rhs.name, x],
          ])
          result = evalExpr(e.combiner.result, cenv, read)
        }
        let k = axes.length - 1
        for (; k >= 0; k--) {
          idx[k]++
          if (idx[k] < axes[k].dom.min + axes[k].dom.extent) break
          idx[k] = axes[k].dom.min
        }
        if (k < 0) break
      }
      return result
    }
  }
}
