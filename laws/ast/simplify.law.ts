// The index simplifier's law: simplify(e) evaluates equal to e on random environments within
// the bounds it was told (including floor division/modulo and min/max under known ranges).
import * as fc from "fast-check"
import { describe, it } from "vitest"
import { bin, c, v, type BinOp, type Expr } from "../../src/ast/te/expr.js"
import { evalExpr } from "../../src/ast/te/eval-expr.js"
import { simplify, type Interval } from "../../src/ast/te/simplify.js"
import { lawParams } from "../support.js"

const VARS = ["x", "y", "z"]
const OPS: BinOp[] = ["add", "sub", "mul", "floordiv", "floormod", "min", "max", "lt", "le", "eq", "and"]

const arbExpr: fc.Arbitrary<Expr> = fc.letrec<{ e: Expr }>((tie) => ({
  e: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom(...VARS).map((n) => v(n)),
    fc.integer({ min: -6, max: 9 }).map((k) => c(k)),
    fc.tuple(fc.constantFrom(...OPS), tie("e"), tie("e")).map(([op, a, b]) => {
      // division and modulo by a positive constant, as index arithmetic uses them
      if (op === "floordiv" || op === "floormod") return bin(op, a, c(((Math.abs(b.kind === "const" ? b.value : 3) % 7) + 1)))
      if (op === "and" || op === "lt" || op === "le" || op === "eq") return bin(op, a, b)
      return bin(op, a, b)
    }),
  ),
})).e

const arbBounds = fc.tuple(...VARS.map(() => fc.tuple(fc.integer({ min: -5, max: 5 }), fc.integer({ min: 0, max: 8 })))).map(
  (bs) => new Map<string, Interval>(VARS.map((n, k) => [n, { min: bs[k][0], max: bs[k][0] + bs[k][1] }])),
)

describe("simplify", () => {
  it("simplify(e) evaluates equal to e for every environment within the bounds", () => {
    fc.assert(
      fc.property(arbExpr, arbBounds, fc.array(fc.nat(), { minLength: 3, maxLength: 3 }), (e, bounds, picks) => {
        const env = new Map(VARS.map((n, k) => {
          const b = bounds.get(n)!
          return [n, b.min + (picks[k] % (b.max - b.min + 1))] as const
        }))
        const s = simplify(e, bounds)
        const norm = (x: number) => (typeof x === "boolean" ? Number(x) : x)
        const a = norm(evalExpr(e, env, () => 0))
        const b = norm(evalExpr(s, env, () => 0))
        if (a !== b) throw new Error(`e=${JSON.stringify(e)} gave ${a}, simplified gave ${b}`)
      }),
      lawParams(1000),
    )
  })
})
