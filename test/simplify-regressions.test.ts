// Counterexamples the box law of the simplifier (laws/ast/simplify.law.ts) found: each bug as a
// named regression.
import { describe, expect, it } from "vitest"
import { add, bin, c, lt, v } from "../src/ast/te/expr.js"
import { evalExpr } from "../src/ast/te/eval-expr.js"
import { intervalOf, simplify } from "../src/ast/te/simplify.js"

describe("intervalOf: truncating integer division", () => {
  it("is the quotient's range, not [0, 1]", () => {
    // `div` fell through to the comparisons' case, [0, 1]
    const box = new Map([["x", { min: -7, max: 9 }]])
    expect(intervalOf(bin("div", v("x"), c(2)), box)).toEqual({ min: -3, max: 4 })
    expect(intervalOf(bin("div", v("x"), c(-2)), box)).toEqual({ min: -4, max: 3 })
    expect(intervalOf(bin("div", v("x"), v("y")), new Map([...box, ["y", { min: -2, max: 3 }]]))).toEqual({ min: -9, max: 9 })
  })

  it("so simplify keeps ((x / 2) < y) + x where x / 2 reaches y", () => {
    // with [0, 1] for x / 2, (x / 2) < 2 was decided true: the sum became x + 1
    const e = add(lt(bin("div", v("x"), c(2)), v("y")), v("x"))
    const box = new Map([["x", { min: 4, max: 4 }], ["y", { min: 2, max: 2 }]])
    const env = new Map([["x", 4], ["y", 2]])
    expect(evalExpr(simplify(e, box), env, () => 0)).toBe(evalExpr(e, env, () => 0))
  })
})

describe("simplify: and / or with a constant operand", () => {
  it("simplifies the x != 0 it makes of an integer operand, so that simplify is idempotent", () => {
    // (-1 && x) became (x != 0), which a second simplify decided to 1 where x is 1
    const box = new Map([["x", { min: 1, max: 1 }]])
    const e = bin("and", c(-1), v("x"))
    expect(simplify(e, box)).toEqual(c(1, "bool"))
    expect(simplify(simplify(e, box), box)).toEqual(simplify(e, box))
  })
})
