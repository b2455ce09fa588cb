// mapExpr keeps what it does not change: a node whose children come back as they were, and which its
// smart constructor would build as it is, is returned itself instead of a copy (the TIR passes that
// touch a few indices of a large Winograd body no longer copy the rest). The law: on random
// expressions (binary nodes of every operator, selects, casts, calls, reads; some written as raw
// nodes that a constructor would fold, x + 0 and 2 · 3 among them) and random rewrites of their
// variables (none, one, all), the result is the rebuild of every node through its constructor —
// the traversal as it was before — structurally (exprKey), and the unchanged parts are the same
// objects. A node kept although a child changed (a stale one) shows as a different key.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { bin, c, call, cast, exprKey, mapExpr, read, select, v, type BinOp, type Expr } from "../../src/ast/te/expr.js"
import { simplify, simplifyMemo, type Interval } from "../../src/ast/te/simplify.js"
import { lawParams } from "../support.js"

const VARS = ["x", "y", "z"]
const OPS: BinOp[] = ["add", "sub", "mul", "floordiv", "floormod", "div", "min", "max", "lt", "le", "eq", "ne", "gt", "ge", "and", "or"]

/** A binary node as a literal: what bin would fold (constants, x + 0, x · 1) stays unfolded. */
const raw = (op: BinOp, a: Expr, b: Expr): Expr => ({ kind: "bin", op, a, b, dtype: ["eq", "ne", "lt", "le", "gt", "ge", "and", "or"].includes(op) ? "bool" : a.dtype })

const arbExpr: fc.Arbitrary<Expr> = fc.letrec<{ e: Expr }>((tie) => ({
  e: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom(...VARS).map((n) => v(n)),
    fc.integer({ min: -2, max: 3 }).map((k) => c(k)),
    fc.tuple(fc.constantFrom(...OPS), tie("e"), tie("e"), fc.boolean()).map(([op, a, b, literal]) => (literal ? raw(op, a, b) : bin(op, a, b))),
    fc.tuple(tie("e"), tie("e"), tie("e")).map(([cond, t, f]) => select(bin("ne", cond, c(0)), t, f)),
    tie("e").map((x) => cast("float32", x)),
    tie("e").map((x) => call("exp", cast("float32", x))),
    fc.tuple(tie("e"), tie("e")).map(([i, j]) => read("A", [i, j], "float32")),
  ),
})).e

/** mapExpr as it was: every node rebuilt through its constructor (bin, select, cast fold), whether it changed or not. */
const rebuild = (x: Expr, f: (e: Expr) => Expr | undefined): Expr => {
  const r = (y: Expr) => rebuild(y, f)
  const replaced = f(x)
  if (replaced) return replaced
  if (x.kind === "bin") return bin(x.op, r(x.a), r(x.b))
  if (x.kind === "cast") return cast(x.dtype, r(x.value))
  if (x.kind === "call") return { ...x, args: x.args.map(r) }
  if (x.kind === "read") return { ...x, indices: x.indices.map(r) }
  if (x.kind === "select") {
    const cond = r(x.cond)
    return cond.kind === "const" ? r(cond.value ? x.t : x.f) : select(cond, r(x.t), r(x.f))
  }
  if (x.kind === "reduce") return { ...x, source: r(x.source), ...(x.where ? { where: r(x.where) } : {}) }
  return x
}

/** Every sub-expression object of `e`. */
const objects = (e: Expr, into = new Set<Expr>()): Set<Expr> => {
  into.add(e)
  if (e.kind === "bin") [e.a, e.b].forEach((x) => objects(x, into))
  if (e.kind === "select") [e.cond, e.t, e.f].forEach((x) => objects(x, into))
  if (e.kind === "cast") objects(e.value, into)
  if (e.kind === "call") e.args.forEach((x) => objects(x, into))
  if (e.kind === "read") e.indices.forEach((x) => objects(x, into))
  return into
}

const arbRewrite = fc.record({ x: fc.option(fc.integer({ min: -2, max: 3 })), y: fc.option(fc.constantFrom("y", "w")), z: fc.option(fc.integer({ min: 0, max: 1 })) })

describe("mapExpr keeps the nodes it does not change", () => {
  it("equals the rebuild of every node through its constructor, under any rewrite of the variables; what it keeps is the input's own", () => {
    fc.assert(
      fc.property(arbExpr, arbRewrite, (e, r) => {
        const to = new Map<string, Expr>()
        if (r.x !== null) to.set("x", c(r.x))
        if (r.y !== null) to.set("y", v(r.y))
        if (r.z !== null) to.set("z", c(r.z))
        const f = (x: Expr) => (x.kind === "var" ? to.get(x.name) : undefined)
        const got = mapExpr(e, f)
        expect(exprKey(got)).toBe(exprKey(rebuild(e, f)))
        // a kept node is one of the input's, equal to its own rebuild (nothing under it changed)
        const input = objects(e)
        for (const o of objects(got)) if (input.has(o) && o.kind !== "var" && o.kind !== "const") expect(exprKey(rebuild(o, f))).toBe(exprKey(o))
      }),
      lawParams(400),
    )
  })

  it("an expression its constructors built, mapped by nothing, is returned itself", () => {
    const e = select(bin("lt", v("x"), c(3)), read("A", [bin("add", v("x"), v("y")), c(1)], "float32"), call("exp", cast("float32", bin("mul", v("y"), c(2)))))
    expect(mapExpr(e, () => undefined)).toBe(e)
    // and a literal its constructor would fold is folded (x + 0 → x), not kept
    expect(mapExpr(raw("add", v("x"), c(0)), () => undefined)).toEqual(v("x"))
  })

  // simplify keeps a node whose children come back unchanged the same way (rebin): its result is
  // the one it gives for the expression rebuilt node by node through the constructors (where it
  // keeps nothing, as it kept nothing before), float sums included (which it never rewrites)
  it("simplify gives for an expression what it gives for its rebuild through the constructors", () => {
    const asFloat = (e: Expr): Expr => (e.dtype === "float32" ? e : cast("float32", e))
    const arbBounds = fc.array(fc.tuple(fc.constantFrom(...VARS), fc.integer({ min: -2, max: 2 }), fc.integer({ min: 0, max: 3 })), { maxLength: 3 })
    fc.assert(
      fc.property(arbExpr, arbExpr, fc.boolean(), arbBounds, (e, g, float, bs) => {
        const x = float ? raw("add", asFloat(e), raw("mul", asFloat(g), c(1, "float32"))) : e
        const bounds = new Map<string, Interval>(bs.map(([n, lo, w]) => [n, { min: lo, max: lo + w }]))
        expect(exprKey(simplify(x, bounds, simplifyMemo()))).toBe(exprKey(simplify(rebuild(x, () => undefined), bounds, simplifyMemo())))
      }),
      lawParams(400),
    )
  })
})
