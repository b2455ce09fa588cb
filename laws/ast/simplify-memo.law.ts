// simplify's memo (src/ast/te/simplify.ts: one per lowering, made by the stage that lowers and
// passed to each of its calls) is keyed by content and must never hand one call another's result
// where the two differ in anything simplify carries or reads. Each property passes one memo to
// all its calls, as a lowering does:
// - two TE reads of different tensors (same name, same indices) simplify each to a read of its own
//   tensor — exprKey leaves `tensor` out, so a key built like it would give the second the first's;
// - one expression under two boxes simplifies under each to what is right in that box, whichever
//   came first (a key without the bounds of its variables would give the second box the first's);
// - float constants 0 and -0 stay apart (String(-0) is "0");
// - calls repeating a few objects under changing boxes (the memo writes an object's key once, its
//   bounds apart) give what a memo of each call alone gives.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { bin, c, collect, exprKey, showExpr, v, type BinOp, type Expr, type Read } from "../../src/ast/te/expr.js"
import { evalExpr } from "../../src/ast/te/eval-expr.js"
import { simplify, simplifyMemo, type Interval } from "../../src/ast/te/simplify.js"
import { at, placeholder } from "../../src/ast/te/tensor.js"
import { boxPoints, lawParams } from "../support.js"

const VARS = ["x", "y"]
const OPS: BinOp[] = ["add", "sub", "mul", "floordiv", "floormod", "min", "max", "lt", "ge"]

/** Small integer expressions (within the memo's node limit) over x, y; divisors positive constants. */
const arbExpr: fc.Arbitrary<Expr> = fc.letrec<{ e: Expr }>((tie) => ({
  e: fc.oneof(
    { depthSize: "small", maxDepth: 3 },
    fc.constantFrom(...VARS).map((n) => v(n)),
    fc.integer({ min: -3, max: 6 }).map((k) => c(k)),
    fc
      .tuple(fc.constantFrom(...OPS), tie("e"), tie("e"), fc.integer({ min: 1, max: 4 }))
      .map(([op, a, b, d]) => bin(op, a, op === "floordiv" || op === "floormod" ? c(d) : b)),
  ),
})).e

const arbBox = fc
  .tuple(...VARS.map(() => fc.tuple(fc.integer({ min: -4, max: 4 }), fc.integer({ min: 0, max: 4 }))))
  .map((bs) => new Map<string, Interval>(VARS.map((n, k) => [n, { min: bs[k][0], max: bs[k][0] + bs[k][1] }])))


const reads = (e: Expr) => collect(e, (x) => x.kind === "read") as Read[]

describe("simplify's memo", () => {
  it("two reads of different tensors with one name and the same indices each simplify to a read of their own tensor", () => {
    fc.assert(
      fc.property(arbExpr, arbExpr, (i, j) => {
        const A = placeholder("T", [8, 8])
        const B = placeholder("T", [4, 4])
        const memo = simplifyMemo()
        for (const t of [A, B, A]) {
          const s = simplify(bin("add", at(t, i, j), at(t, j, i)), new Map(), memo)
          const rs = reads(s)
          if (rs.length === 0 || rs.some((r) => r.tensor !== t)) throw new Error(`a read of ${t.shape} simplified to ${showExpr(s)}, reading another tensor`)
        }
      }),
      lawParams(300),
    )
  })

  it("one expression under two boxes simplifies, under the second, to what holds in the second", () => {
    fc.assert(
      fc.property(arbExpr, arbBox, arbBox, (e, first, second) => {
        const memo = simplifyMemo()
        simplify(e, first, memo)
        const s = simplify(e, second, memo)
        for (const p of boxPoints(e, second)) {
          const want = Number(evalExpr(e, p, () => 0))
          const got = Number(evalExpr(s, p, () => 0))
          if (got !== want) throw new Error(`${showExpr(e)} at ${[...p].map(([n, x]) => `${n}=${x}`).join(", ")} is ${want}; simplified to ${showExpr(s)}, ${got}`)
        }
      }),
      lawParams(1000),
    )
  })

  // the memo writes each object's key once (its bounds apart): calls on a few objects, each object
  // again and again under changing boxes, give through one memo what each gives through its own
  it("calls repeating a few objects under changing boxes give through one memo what each gives alone", () => {
    fc.assert(
      fc.property(fc.array(arbExpr, { minLength: 1, maxLength: 3 }), fc.array(fc.tuple(fc.nat(2), arbBox), { minLength: 1, maxLength: 8 }), (pool, calls) => {
        const memo = simplifyMemo()
        for (const [k, box] of calls) {
          const e = pool[k % pool.length]
          const shared = simplify(e, box, memo)
          const alone = simplify(e, box, simplifyMemo())
          if (exprKey(shared) !== exprKey(alone)) throw new Error(`${showExpr(e)}: through the shared memo ${showExpr(shared)}, alone ${showExpr(alone)}`)
        }
      }),
      lawParams(500),
    )
  })

  it("float constants 0 and -0 stay apart", () => {
    const x = v("x", "float32")
    const memo = simplifyMemo()
    for (const k of [0, -0, 0]) {
      const s = simplify(bin("max", x, c(k, "float32")), new Map(), memo)
      const ks = collect(s, (y) => y.kind === "const").map((y) => (y.kind === "const" ? y.value : NaN))
      expect(ks.some((y) => Object.is(y, k))).toBe(true)
    }
  })
})
