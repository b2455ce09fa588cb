// The wasm vector planner's invariance test (src/emit/wasm/vector.ts): `invarianceOf` answers for
// every node from its children's remembered answers what `invariant` answers by walking the whole
// subtree — no loop variable, no read of a buffer the loop stores. Law: on random expressions
// (variables, reads with index expressions, arithmetic, selects, casts, calls, reductions, shared
// subtrees asked again in any order), the two agree on every subtree.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { add, c, call, cast, lt, mul, read, select, v, type Expr } from "../../../src/ast/te/expr.js"
import { invariant, invarianceOf } from "../../../src/emit/wasm/vector.js"
import { lawParams } from "../../support.js"

/** A random int32 / float32 expression over variables i, j, k and buffers A, B, C, its subtrees shared. */
const arbExpr: fc.Arbitrary<Expr> = fc.letrec<{ int: Expr; flt: Expr }>((tie) => ({
  int: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom("i", "j", "k").map((n) => v(n)),
    fc.integer({ min: -3, max: 7 }).map((x) => c(x, "int32")),
    fc.tuple(tie("int"), tie("int")).map(([a, b]) => add(a, b)),
    fc.tuple(tie("int"), tie("int")).map(([a, b]) => mul(a, b)),
    fc.tuple(fc.constantFrom("A", "B", "C"), tie("int")).map(([s, i]) => read(s, [i], "int32")),
  ),
  flt: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.tuple(fc.constantFrom("A", "B", "C"), tie("int")).map(([s, i]) => read(s, [i], "float32")),
    fc.double({ min: -2, max: 2, noNaN: true }).map((x) => c(Math.fround(x), "float32")),
    tie("int").map((i) => cast("float32", i)),
    fc.tuple(tie("flt"), tie("flt")).map(([a, b]) => add(a, b)),
    fc.tuple(tie("int"), tie("int"), tie("flt"), tie("flt")).map(([a, b, t, f]) => select(lt(a, b), t, f)),
    tie("flt").map((x) => call("sqrt", x)),
    // the same subtree twice (an unrolled tile's shared operand)
    tie("flt").map((x) => mul(x, x)),
  ),
})).flt

/** Every subtree of `e`, root first (shared ones as often as they occur). */
const subtrees = (e: Expr): Expr[] => {
  const kids = e.kind === "bin" ? [e.a, e.b] : e.kind === "select" ? [e.cond, e.t, e.f] : e.kind === "cast" ? [e.value] : e.kind === "call" ? e.args : e.kind === "read" ? e.indices : []
  return [e, ...kids.flatMap(subtrees)]
}

describe("wasm: invarianceOf is invariant, remembered", () => {
  it("agrees with invariant on every subtree, asked in any order", () => {
    fc.assert(
      fc.property(arbExpr, fc.constantFrom("i", "j", "k"), fc.subarray(["A", "B", "C"]), fc.boolean(), (e, loopVar, stored, reversed) => {
        const storedIdx = new Map(stored.map((s) => [s, "i"] as const))
        const isInvariant = invarianceOf(loopVar, storedIdx)
        const all = subtrees(e)
        for (const x of reversed ? [...all].reverse() : all) expect(isInvariant(x)).toBe(invariant(x, loopVar, storedIdx))
      }),
      lawParams(300),
    )
  })
})
