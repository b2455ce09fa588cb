// Whether a launch's integer arithmetic fits 32 bits: every integer sub-expression of its code —
// indices, loop bounds, lets, conditions — has a range (from the loops' and lets' ranges around
// it) within int32. Then its loop variables and integer lets are `int`, which the GPU multiplies
// and divides by constants in one or two instructions where int64_t takes several; otherwise they
// stay int64_t, as the c target's are. Pure.
import { collect, isIntDtype, type Expr } from "../../ast/te/expr.js"
import { intervalOf, type Interval } from "../../ast/te/simplify.js"
import type { Stmt } from "../../ast/tir/tir.js"

const INT32_MIN = -(2 ** 31)
const INT32_MAX = 2 ** 31 - 1

/** Every integer sub-expression of `e` within int32 under `bounds`. */
const fits = (e: Expr, bounds: ReadonlyMap<string, Interval>): boolean =>
  collect(e, (x) => isIntDtype(x.dtype)).every((x) => {
    const iv = intervalOf(x, bounds)
    return iv.min >= INT32_MIN && iv.max <= INT32_MAX
  })

/** Whether every integer value `s` computes fits int32 (loop variables, lets, indices, conditions). */
export const fitsInt32 = (s: Stmt, bounds: ReadonlyMap<string, Interval> = new Map()): boolean => {
  switch (s.kind) {
    case "for": {
      if (!fits(s.min, bounds) || !fits(s.extent, bounds)) return false
      const lo = intervalOf(s.min, bounds)
      const ext = intervalOf(s.extent, bounds)
      const iv = { min: lo.min, max: lo.max + ext.max - 1 }
      if (!(iv.min >= INT32_MIN && iv.max + 1 <= INT32_MAX)) return false
      return fitsInt32(s.body, new Map(bounds).set(s.var.name, iv))
    }
    case "let": {
      if (!fits(s.value, bounds)) return false
      const inner = new Map(bounds)
      if (isIntDtype(s.var.dtype)) inner.set(s.var.name, intervalOf(s.value, bounds))
      else inner.delete(s.var.name)
      return fitsInt32(s.body, inner)
    }
    case "seq":
      return s.body.every((b) => fitsInt32(b, bounds))
    case "if":
      return fits(s.cond, bounds) && fitsInt32(s.then, bounds) && (s.else === undefined || fitsInt32(s.else, bounds))
    case "allocate":
      return fitsInt32(s.body, bounds)
    case "store":
      return s.indices.every((i) => fits(i, bounds)) && fits(s.value, bounds)
    case "evaluate":
      return fits(s.value, bounds)
    case "barrier":
      return true
    case "shuffle":
      return s.indices.every((i) => fits(i, bounds)) && fits(s.value, bounds)
    case "intrinsic":
      return [s.output, ...s.inputs].every((r) => r.base.every((b) => fits(b, bounds)))
  }
}
