// The index simplifier and its interval analysis, checked at every point of small boxes: random
// integer expressions over x, y, z (+, -, ·, floordiv, floormod, div, min, max, select, comparisons,
// and/or; divisors of either sign, constant or not) under boxes that give each variable a range
// of one to five values — below zero, across it or above it. At every point of the box where e is
// defined (no division by zero):
// - simplify(e, box) evaluates equal to e;
// - e, and each of its sub-expressions, lies within intervalOf(·, box);
// - simplify is idempotent: simplifying simplify(e, box) again under the same box changes nothing.
// (laws/ast/simplify-forms.law.ts: that it simplifies, and to one normal form.)
import * as fc from "fast-check"
import { describe, it } from "vitest"
import { bin, c, collect, select, showExpr, v, type BinOp, type Expr } from "../../src/ast/te/expr.js"
import { evalExpr } from "../../src/ast/te/eval-expr.js"
import { intervalOf, simplify, type Interval } from "../../src/ast/te/simplify.js"
import { boxPoints, lawParams } from "../support.js"

const VARS = ["x", "y", "z"]
const DIVISION: BinOp[] = ["floordiv", "floormod", "div"]
/** Every operator, the divisions (where intervals and canonical forms are subtle) three times over. */
const OPS: BinOp[] = ["add", "sub", "mul", ...DIVISION, ...DIVISION, ...DIVISION, "min", "max", "lt", "le", "eq", "ne", "gt", "ge", "and", "or"]

/** A divisor: mostly a constant of either sign (never 0), else any expression (points where it is 0 are skipped). */
const arbDivisor = (e: fc.Arbitrary<Expr>): fc.Arbitrary<Expr> =>
  fc.oneof({ arbitrary: fc.integer({ min: -4, max: 4 }).filter((k) => k !== 0).map((k) => c(k)), weight: 3 }, { arbitrary: e, weight: 2 })

const arbExpr: fc.Arbitrary<Expr> = fc.letrec<{ e: Expr }>((tie) => ({
  e: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom(...VARS).map((n) => v(n)),
    fc.integer({ min: -6, max: 9 }).map((k) => c(k)),
    fc.tuple(fc.constantFrom(...OPS), tie("e"), tie("e"), arbDivisor(tie("e"))).map(([op, a, b, d]) => bin(op, a, DIVISION.includes(op) ? d : b)),
    fc.tuple(tie("e"), tie("e"), tie("e")).map(([cond, t, f]) => select(bin("ne", cond, c(0)), t, f)),
  ),
})).e

/** Per variable: a range of 1–5 values starting anywhere in [-6, 4]. */
const arbBox = fc.tuple(...VARS.map(() => fc.tuple(fc.integer({ min: -6, max: 4 }), fc.integer({ min: 0, max: 4 })))).map(
  (bs) => new Map<string, Interval>(VARS.map((n, k) => [n, { min: bs[k][0], max: bs[k][0] + bs[k][1] }])),
)


/** e's value at a point, or undefined where it divides by zero (bools as 0/1). */
const valueAt = (e: Expr, env: ReadonlyMap<string, number>): number | undefined => {
  try {
    return Number(evalExpr(e, env, () => 0))
  } catch (err) {
    if (err instanceof RangeError) return undefined
    throw err
  }
}

describe("simplify", () => {
  it("simplify(e) evaluates equal to e at every point of the box where e is defined", () => {
    fc.assert(
      fc.property(arbExpr, arbBox, (e, box) => {
        const s = simplify(e, box)
        for (const p of boxPoints(e, box)) {
          const want = valueAt(e, p)
          if (want === undefined) continue
          const got = valueAt(s, p)
          if (got !== want) throw new Error(`${showExpr(e)} at ${[...p].map(([n, x]) => `${n}=${x}`).join(", ")} is ${want}; simplified to ${showExpr(s)}, ${got}`)
        }
      }),
      lawParams(1000),
    )
  })

  it("intervalOf(e) contains the value of e, and of each of its sub-expressions, at every point of the box", () => {
    fc.assert(
      fc.property(arbExpr, arbBox, (e, box) => {
        for (const sub of collect(e, () => true)) {
          const iv = intervalOf(sub, box)
          for (const p of boxPoints(sub, box)) {
            const x = valueAt(sub, p)
            if (x !== undefined && !(iv.min <= x && x <= iv.max))
              throw new Error(`${showExpr(sub)} at ${[...p].map(([n, y]) => `${n}=${y}`).join(", ")} is ${x}, outside intervalOf = [${iv.min}, ${iv.max}]`)
          }
        }
      }),
      lawParams(1000),
    )
  })

  it("simplify is idempotent: simplify(simplify(e, box), box) is simplify(e, box)", () => {
    fc.assert(
      fc.property(arbExpr, arbBox, (e, box) => {
        const once = simplify(e, box)
        const twice = simplify(once, box)
        if (showExpr(twice) !== showExpr(once)) throw new Error(`${showExpr(e)} simplified to ${showExpr(once)}, and that to ${showExpr(twice)}`)
      }),
      lawParams(1000),
    )
  })
})

// Float expressions that may be NaN: the interval folds of min, max and the comparisons must not
// fold away a NaN. Over float variables f and g taking NaN, ±Infinity, ±0 and a few finite values
// (every pair), with constants from the same set, simplify(e) evaluates to what e does — NaN where
// e is NaN. (Found by the wasm min / max law: max(x, +inf) had folded to +inf and
// min(max(x, 0), 0) to 0, so a NaN input was lost on every target.)
const SPECIAL = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 0, -0, 1.5, -2, 6]
const FLOAT_OPS: BinOp[] = ["add", "sub", "mul", "min", "max", "min", "max"]
const CMP_OPS: BinOp[] = ["lt", "le", "gt", "ge", "eq", "ne"]
const arbFloat: fc.Arbitrary<Expr> = fc.letrec<{ e: Expr }>((tie) => ({
  e: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom("f", "g").map((n) => v(n, "float32")),
    fc.constantFrom(...SPECIAL).map((k) => c(k, "float32")),
    fc.tuple(fc.constantFrom(...FLOAT_OPS), tie("e"), tie("e")).map(([op, a, b]) => bin(op, a, b)),
    fc.tuple(fc.constantFrom(...CMP_OPS), tie("e"), tie("e"), tie("e"), tie("e")).map(([op, a, b, t, f]) => select(bin(op, a, b), t, f)),
  ),
})).e
const sameFloat = (x: number, y: number) => x === y || (Number.isNaN(x) && Number.isNaN(y))

describe("simplify on floats that may be NaN", () => {
  it("simplify(e) is NaN exactly where e is, and equal to it elsewhere, for every value of f and g", () => {
    fc.assert(
      fc.property(arbFloat, (e) => {
        const s = simplify(e)
        for (const f of SPECIAL)
          for (const g of SPECIAL) {
            const p = new Map([["f", f], ["g", g]])
            const [want, got] = [valueAt(e, p)!, valueAt(s, p)!]
            if (!sameFloat(want, got)) throw new Error(`${showExpr(e)} at f=${f}, g=${g} is ${want}; simplified to ${showExpr(s)}, ${got}`)
          }
      }),
      lawParams(1000),
    )
  })
})
