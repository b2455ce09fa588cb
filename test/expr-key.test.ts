// exprKey (src/ast/te/expr.ts) is the identity of an expression for hoisting, CSE and caches: two
// keys are equal exactly when the expressions are. JSON writes NaN and ±Infinity as null and -0 as
// 0, so the constants NaN and +Infinity had one key, and the wasm emitter hoisted one splat for
// both (min(min(x, +inf), NaN) ran as min(x, +inf): laws/emit/wasm/min-max.law.ts found it).
import { describe, expect, it } from "vitest"
import { bin, c, exprKey, v } from "../src/ast/te/expr.js"

describe("exprKey", () => {
  it("tells apart the float constants JSON cannot (NaN, +Infinity, -Infinity, -0, 0) and keeps equal ones equal", () => {
    const values = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -0, 0, 1, -1]
    const keys = values.map((k) => exprKey(c(k, "float32")))
    expect(new Set(keys).size).toBe(values.length)
    values.forEach((k, i) => expect(exprKey(c(k, "float32"))).toBe(keys[i]))
    const x = v("x", "float32")
    expect(exprKey(bin("min", x, c(Number.NaN, "float32")))).not.toBe(exprKey(bin("min", x, c(Number.POSITIVE_INFINITY, "float32"))))
    expect(exprKey(bin("max", x, c(-0, "float32")))).not.toBe(exprKey(bin("max", x, c(0, "float32"))))
    expect(exprKey(bin("max", x, c(2, "float32")))).toBe(exprKey(bin("max", v("x", "float32"), c(2, "float32"))))
  })

  it("folds an integer product or quotient that is zero to 0, never -0 (integers have one zero: one key); a float -0 stays", () => {
    const x = v("x", "int32")
    for (const dtype of ["int32", "int64"] as const) {
      for (const [op, a, b] of [["mul", 0, -3], ["mul", -3, 0], ["div", -1, 3], ["floordiv", 0, -5], ["floormod", -4, 2], ["sub", 0, 0]] as const) {
        const folded = bin(op, c(a, dtype), c(b, dtype))
        expect(folded.kind).toBe("const")
        expect(Object.is((folded as { value: number }).value, 0), `${op}(${a}, ${b}) in ${dtype}`).toBe(true)
        expect(exprKey(bin("add", x, folded))).toBe(exprKey(bin("add", x, c(0, "int32"))))
      }
    }
    expect(Object.is((bin("mul", c(0, "float32"), c(-3, "float32")) as { value: number }).value, -0)).toBe(true)
  })
})
