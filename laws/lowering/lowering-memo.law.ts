// The identical-kernel memo of a lowering (src/lowering/lower-group.ts, LoweringMemo) and what it
// compares with: it used to key each group by loweringKey — every TE body written out as JSON
// (exprKey) — and now files groups under that key without the bodies, telling the candidates
// apart by sameExprKey, which compares the bodies without writing them. The laws:
// - sameExprKey(a, b) is exactly exprKey(a) === exprKey(b) on random expressions drawn from a
//   small space (so that equal pairs are common): constants 0, -0, NaN, ±Infinity, reads of two
//   tensors of one name (exprKey leaves `tensor` out), nodes written with their keys in another
//   order or with an undefined field, reductions with different combiners' data;
// - a sequence of group programs lowered through one memo gives, for each, the function lowering
//   it alone gives (printed), and reuses an earlier one's function exactly when their loweringKeys
//   are equal (the programs differ in a constant, an op, a shape or nothing).
// (simplify keeping the nodes its children leave unchanged: laws/ast/simplify-memo.law.ts.)
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { bin, c, exprKey, sameExprKey, v, type BinOp, type Expr } from "../../src/ast/te/expr.js"
import * as S from "../../src/ast/schedule/schedule.js"
import { at, compute, placeholder, reduceAxis, sum, type Placeholder } from "../../src/ast/te/tensor.js"
import { printPrimFunc } from "../../src/ast/tir/tir.js"
import { lowerGroupSchedule, loweringKey, type GroupTE, type LoweringMemo } from "../../src/lowering/lower-group.js"
import { cpuTirPipeline } from "../../src/lowering/tir/cpu-pipeline.js"
import type { FusedGroup } from "../../src/rewrite/fuse-ops.js"
import { lawParams } from "../support.js"

const A = placeholder("A", [4, 4])
const A2 = placeholder("A", [4, 4])
const CONSTS = [0, -0, 1, 2, NaN, Infinity, -Infinity]
const OPS: BinOp[] = ["add", "mul", "max", "lt"]

/** A node with its fields in another order (JSON, and so exprKey, sees the order). */
const reordered = (op: BinOp, a: Expr, b: Expr): Expr => ({ dtype: bin(op, a, b).dtype, kind: "bin", op, b, a }) as Expr

const arbExpr: fc.Arbitrary<Expr> = fc.letrec<{ e: Expr }>((tie) => ({
  e: fc.oneof(
    { depthSize: "small", maxDepth: 3 },
    fc.constantFrom(...CONSTS).map((k) => c(k, "float32")),
    fc.constantFrom("x", "y").map((n) => v(n, "float32")),
    fc.tuple(fc.constantFrom(A, A2), fc.constantFrom(0, 1)).map(([t, i]) => at(t, c(i), v("j"))),
    fc.tuple(fc.constantFrom(...OPS), tie("e"), tie("e"), fc.constantFrom("plain", "reordered", "undefined")).map(([op, a, b, how]) => {
      const n = { kind: "bin", op, a, b, dtype: op === "lt" ? "bool" : a.dtype } as Expr
      return how === "reordered" ? reordered(op, a, b) : how === "undefined" ? ({ ...n, note: undefined } as unknown as Expr) : n
    }),
    fc.tuple(tie("e"), fc.constantFrom(4, 5)).map(([e, n]) => {
      const k = reduceAxis(n, "k")
      return sum(bin("add", e, at(A, c(0), k.var)), [k])
    }),
  ),
})).e

describe("sameExprKey", () => {
  it("is exprKey(a) === exprKey(b)", () => {
    let equal = 0
    fc.assert(
      fc.property(arbExpr, arbExpr, (a, b) => {
        const want = exprKey(a) === exprKey(b)
        if (want) equal++
        expect(sameExprKey(a, b)).toBe(want)
        expect(sameExprKey(a, a)).toBe(true)
      }),
      lawParams(2000),
    )
    expect(equal).toBeGreaterThan(50)
  })
})

/** A group program: an elementwise op with constant k on X, then optionally a row sum. */
const program = (k: number, op: BinOp, n: number, reduce: boolean): GroupTE => {
  const X: Placeholder = placeholder("p0", [n, 8])
  const E = compute("k.e", [n, 8], (i, j) => bin(op, at(X, i, j), c(k, "float32")))
  if (!reduce) return { outputs: [E], placeholders: new Map([["p0", "x"]]) }
  const r = reduceAxis(8, "k.r")
  const R = compute("k.s", [n], (i) => sum(at(E, i, r.var), [r]))
  return { outputs: [R], placeholders: new Map([["p0", "x"]]) }
}

const arbProgram = fc.tuple(fc.constantFrom(0, -0, 1, 2.5, NaN), fc.constantFrom<BinOp>("add", "max"), fc.constantFrom(4, 6), fc.boolean())

describe("the identical-kernel memo", () => {
  it("lowers each program to what it lowers to alone, reusing an earlier function exactly when the loweringKeys are equal", () => {
    const tir = cpuTirPipeline()
    fc.assert(
      fc.property(fc.array(arbProgram, { minLength: 2, maxLength: 6 }), (ps) => {
        const memo: LoweringMemo = new Map()
        const seen: { key: string; body: unknown }[] = []
        ps.forEach(([k, op, n, reduce], id) => {
          const te = program(k, op, n, reduce)
          const group = { id, outputs: ["y"] } as unknown as FusedGroup
          const s = S.createSchedule(te.outputs)
          const alone = lowerGroupSchedule(te, group, s, tir)
          const got = lowerGroupSchedule(te, group, s, tir, memo)
          expect(printPrimFunc(got.func)).toBe(printPrimFunc(alone.func))
          const key = loweringKey(te, s)
          const earlier = seen.find((x) => x.key === key)
          expect(got.func.body === earlier?.body).toBe(earlier !== undefined)
          if (!earlier) seen.push({ key, body: got.func.body })
        })
      }),
      lawParams(60),
    )
  })
})
