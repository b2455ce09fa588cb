// What the index simplifier promises beyond meaning (laws/ast/simplify.law.ts checks that): that it
// simplifies, and to one normal form.
// - Canonical linear forms: any two ways of writing the same Σ coef·atom + k (terms split, merged,
//   reordered, subtracted, scaled from either side) simplify to the same expression, the
//   documented one: the atoms in name order, coefficient 1 left bare, a zero term or constant
//   dropped, the constant last.
// - Floor division by a positive constant: (d·q + r) // d is q and (d·q + r) % d is r wherever the
//   box keeps r in [0, d), the edges of that range included, q a linear form or a constant; a
//   numerator wholly in [0, d) divides to 0 and is its own remainder.
// - Decisions: over independent variables interval analysis is exact, so min / max simplify to an
//   operand exactly when that operand is the value at every point of the box, and a comparison to
//   a constant exactly when it is constant over the box (but x != y, which is decided only when
//   the ranges are disjoint, not when both are the same single value).
// - intervalOf is exact on read-once expressions (each variable at most once) of +, -, ·, min,
//   max, floordiv and div by constants: its bounds are the least and greatest values in the box.
// - (a // d)·k·d + (a % d)·k is a·k (floor division by d > 0): folded in a linear form wherever both
//   terms are there in that ratio, nested splits too, and only there.
// - Idempotence: simplifying a simplified expression changes nothing.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { add, and, bin, c, collect, freeVars, mul, or, select, showExpr, sub, v, type BinOp, type Expr } from "../../src/ast/te/expr.js"
import { evalExpr } from "../../src/ast/te/eval-expr.js"
import { constDifference, intervalOf, simplify, type Interval } from "../../src/ast/te/simplify.js"
import { lawParams } from "../support.js"

type Box = ReadonlyMap<string, Interval>
const NO_BOUNDS: Box = new Map()

/** The atoms of the linear-form law: variables and expressions no rule takes apart without bounds. */
const ATOMS: readonly Expr[] = [v("x"), v("y"), v("z"), bin("min", v("x"), v("y")), bin("floordiv", v("z"), c(3)), bin("mul", v("x"), v("y")), bin("max", v("y"), c(2))]

/** The documented canonical form of Σ coefs[i]·ATOMS[i] + k. */
const canonical = (coefs: readonly number[], k: number): string => {
  const terms = ATOMS.map((atom, i) => ({ key: showExpr(atom), atom, coef: coefs[i] }))
    .filter((t) => t.coef !== 0)
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
  let e: string | undefined
  for (const t of terms) {
    const term = t.coef === 1 ? t.key : `(${t.key} * ${t.coef})`
    e = e === undefined ? term : `(${e} + ${term})`
  }
  if (e === undefined) return String(k)
  return k !== 0 ? `(${e} + ${k})` : e
}

/** One term coef·atom written one of several ways. */
const writeTerm = (atom: Expr, coef: number, how: number): Expr => {
  switch (how % 4) {
    case 0:
      return mul(atom, c(coef))
    case 1:
      return mul(c(coef), atom)
    case 2:
      return coef === 1 ? atom : mul(atom, c(coef))
    default:
      return sub(c(0), mul(atom, c(-coef)))
  }
}

/** A random way of writing Σ coefs·ATOMS + k: coefficients split in parts, parts shuffled, summed in a random tree, some subtracted. */
const arbWriting = (coefs: readonly number[], k: number): fc.Arbitrary<Expr> =>
  fc
    .tuple(
      fc.array(fc.tuple(fc.integer({ min: -3, max: 3 }), fc.nat(3)), { minLength: ATOMS.length, maxLength: ATOMS.length }),
      fc.integer({ min: -5, max: 5 }),
      fc.array(fc.nat(), { minLength: 24, maxLength: 24 }),
    )
    .map(([splits, kPart, picks]) => {
      let p = 0
      const pick = (n: number) => picks[p++ % picks.length] % n
      // each coefficient as one or two parts (part + rest), the constant as two
      const parts: Expr[] = []
      coefs.forEach((coef, i) => {
        const [part, how] = splits[i]
        if (coef === 0 && part === 0) return
        if (part !== 0 && part !== coef) {
          parts.push(writeTerm(ATOMS[i], part, how))
          parts.push(writeTerm(ATOMS[i], coef - part, how + 1))
        } else parts.push(writeTerm(ATOMS[i], coef, how))
      })
      parts.push(c(kPart), c(k - kPart))
      // shuffled, then combined pairwise at random until one expression is left (a random tree)
      for (let i = parts.length - 1; i > 0; i--) {
        const j = pick(i + 1)
        ;[parts[i], parts[j]] = [parts[j], parts[i]]
      }
      while (parts.length > 1) {
        const i = pick(parts.length - 1)
        const [a, b] = [parts[i], parts[i + 1]]
        // a + b, or a - (-b) written as a - (0 - b) ... both are the same sum
        const joined = pick(3) === 0 ? sub(a, sub(c(0), b)) : add(a, b)
        parts.splice(i, 2, joined)
      }
      return parts[0]
    })

const arbLinear = fc
  .tuple(fc.array(fc.oneof(fc.constant(0), fc.constant(1), fc.integer({ min: -4, max: 4 })), { minLength: ATOMS.length, maxLength: ATOMS.length }), fc.oneof(fc.constant(0), fc.integer({ min: -9, max: 9 })))
  .chain(([coefs, k]) => fc.tuple(fc.constant(coefs), fc.constant(k), arbWriting(coefs, k), arbWriting(coefs, k)))

/** Every assignment of the box's variables that `e` uses. */
const points = (e: Expr, box: Box): Map<string, number>[] => {
  let out: Map<string, number>[] = [new Map()]
  for (const n of [...freeVars(e)].sort()) {
    const { min, max } = box.get(n)!
    out = out.flatMap((p) => Array.from({ length: max - min + 1 }, (_, k) => new Map(p).set(n, min + k)))
  }
  return out
}

const valueAt = (e: Expr, p: ReadonlyMap<string, number>): number => Number(evalExpr(e, p, () => 0))

/** A range of 1–5 values starting anywhere in [lo, hi]. */
const arbRange = (lo: number, hi: number): fc.Arbitrary<Interval> => fc.tuple(fc.integer({ min: lo, max: hi }), fc.nat(4)).map(([min, n]) => ({ min, max: min + n }))

describe("simplify: normal forms", () => {
  it("any two writings of one linear form simplify to the same documented canonical form", () => {
    fc.assert(
      fc.property(arbLinear, ([coefs, k, e1, e2]) => {
        const want = canonical(coefs, k)
        expect(showExpr(simplify(e1)), showExpr(e1)).toBe(want)
        expect(showExpr(simplify(e2)), showExpr(e2)).toBe(want)
      }),
      lawParams(300),
    )
  })

  it("(d·q + r) // d is q and (d·q + r) % d is r wherever r stays in [0, d), edges included; a numerator within [0, d) divides to 0", () => {
    const arbCase = fc.tuple(
      fc.integer({ min: 2, max: 6 }),
      fc.integer({ min: -3, max: 3 }).filter((a) => a !== 0),
      fc.integer({ min: -3, max: 3 }),
      fc.integer({ min: -4, max: 4 }),
      arbRange(-6, 4),
      arbRange(-6, 4),
      fc.nat(5),
      fc.boolean(),
      fc.boolean(),
    )
    fc.assert(
      fc.property(arbCase, ([d, a, b, kq, xr, yr, zLen, atZero, constRest]) => {
        // r = z + r0, z in [0, len]: r spans a range in [0, d - 1] that touches its lower or its upper edge
        const len = Math.min(zLen, d - 1)
        const r0 = atZero ? 0 : d - 1 - len
        // (x takes two values or more, so q does: the numerator's range is wider than [0, d))
        const box: Box = new Map([["x", { min: xr.min, max: Math.max(xr.max, xr.min + 1) }], ["y", yr], ["z", { min: 0, max: len }]])
        const q = add(add(mul(v("x"), c(a)), mul(v("y"), c(b))), c(kq))
        const r = constRest ? c(r0) : add(v("z"), c(r0))
        const num = add(mul(q, c(d)), r)
        expect(showExpr(simplify(bin("floordiv", num, c(d)), box)), showExpr(num)).toBe(showExpr(simplify(q)))
        expect(showExpr(simplify(bin("floormod", num, c(d)), box)), showExpr(num)).toBe(showExpr(simplify(r)))
        // a constant quotient: (r + d·kq) // d is kq, its remainder r
        const shifted = add(r, c(d * kq))
        expect(showExpr(simplify(bin("floordiv", shifted, c(d)), box)), showExpr(shifted)).toBe(String(kq))
        expect(showExpr(simplify(bin("floormod", shifted, c(d)), box)), showExpr(shifted)).toBe(showExpr(simplify(r)))
        // a numerator whose whole range is in [0, d)
        const small = add(v("z"), c(r0))
        expect(showExpr(simplify(bin("floordiv", small, c(d)), box))).toBe("0")
        expect(showExpr(simplify(bin("floormod", small, c(d)), box))).toBe(showExpr(simplify(small)))
      }),
      lawParams(300),
    )
  })

  it("(a // d)·k·d + (a % d)·k folds to a·k (nested too: a fused loop's indices read back), beside other terms, and evaluates as before", () => {
    // a = x·p + y·q + r0 (p ≠ 0; any signs: floor division and modulo make the identity exact everywhere),
    // written as the flattening of its split (div, mod) or of a three-level split (div of div, mod of
    // div, mod), scaled by k, plus z·t + k0
    const arbCase = fc.tuple(
      fc.integer({ min: 2, max: 7 }),
      fc.integer({ min: 2, max: 4 }),
      fc.integer({ min: -3, max: 3 }).filter((k) => k !== 0),
      fc.integer({ min: -3, max: 3 }).filter((p) => p !== 0),
      fc.integer({ min: -3, max: 3 }),
      fc.integer({ min: -5, max: 5 }),
      fc.integer({ min: -2, max: 2 }),
      fc.integer({ min: -4, max: 4 }),
      fc.boolean(),
    )
    fc.assert(
      fc.property(arbCase, ([d, e, k, p, q, r0, t, k0, nested]) => {
        const a = add(add(mul(v("x"), c(p)), mul(v("y"), c(q))), c(r0))
        const div = (x: Expr, n: number) => bin("floordiv", x, c(n))
        const mod = (x: Expr, n: number) => bin("floormod", x, c(n))
        // one level: (a // d)·d + a % d; two: ((a // d) // e)·e·d + ((a // d) % e)·d + a % d
        const flat = nested
          ? add(add(mul(div(div(a, d), e), c(e * d)), mul(mod(div(a, d), e), c(d))), mod(a, d))
          : add(mul(div(a, d), c(d)), mod(a, d))
        const rest = add(mul(v("z"), c(t)), c(k0))
        const whole = add(mul(flat, c(k)), rest)
        expect(showExpr(simplify(whole)), showExpr(whole)).toBe(showExpr(simplify(add(mul(a, c(k)), rest))))
        const box: Box = new Map([["x", { min: -3, max: 3 }], ["y", { min: -2, max: 2 }], ["z", { min: 0, max: 1 }]])
        for (const pt of points(whole, box)) expect(valueAt(simplify(whole), pt) + 0).toBe(valueAt(whole, pt) + 0)
        // coefficients that are not in the ratio d : 1 stay as they are (where no other rule divides a by d)
        const off = add(mul(div(a, d), c(k * d + 1)), mul(mod(a, d), c(k)))
        if (p % d !== 0) expect(showExpr(simplify(off))).toContain("floordiv")
      }),
      lawParams(300),
    )
  })

  it("min / max of independent operands simplify to an operand exactly when it is the value everywhere in the box; comparisons to a constant exactly when they are constant", () => {
    const OPS: BinOp[] = ["min", "max", "lt", "le", "gt", "ge", "eq", "ne"]
    fc.assert(
      fc.property(fc.constantFrom(...OPS), arbRange(-4, 4), arbRange(-4, 4), fc.integer({ min: -3, max: 3 }), fc.integer({ min: -3, max: 3 }), (op, xr, yr, p, q) => {
        const box: Box = new Map([["x", xr], ["y", yr]])
        const a = add(v("x"), c(p))
        const b = add(v("y"), c(q))
        const e = bin(op, a, b)
        const s = simplify(e, box)
        const pts = points(e, box)
        const where = `${showExpr(e)} over x ∈ [${xr.min}, ${xr.max}], y ∈ [${yr.min}, ${yr.max}]`
        if (op === "min" || op === "max") {
          const isA = pts.every((pt) => valueAt(e, pt) === valueAt(a, pt))
          const isB = pts.every((pt) => valueAt(e, pt) === valueAt(b, pt))
          const want = isA ? showExpr(simplify(a)) : isB ? showExpr(simplify(b)) : showExpr(bin(op, simplify(a), simplify(b)))
          expect(showExpr(s), where).toBe(want)
        } else {
          const vals = new Set(pts.map((pt) => valueAt(e, pt)))
          const [only] = [...vals]
          // x != y over one equal value each is left undecided (only disjoint ranges decide it)
          const decidable = vals.size === 1 && !(op === "ne" && only === 0)
          expect(showExpr(s), where).toBe(decidable ? String(only) : showExpr(bin(op, simplify(a), simplify(b))))
        }
      }),
      lawParams(400),
    )
  })

  it("and / or with a constant operand simplify to a constant or to the other operand as a bool", () => {
    const others: Expr[] = [bin("lt", v("x"), v("y")), v("x"), sub(v("x"), v("y"))]
    fc.assert(
      fc.property(fc.constantFrom(0, 1, 2, -1), fc.constantFrom(...others), fc.boolean(), fc.boolean(), (k, other, isAnd, constFirst) => {
        const o = simplify(other)
        const e = isAnd ? (constFirst ? and(c(k), other) : and(other, c(k))) : constFirst ? or(c(k), other) : or(other, c(k))
        const asBool = o.dtype === "bool" ? showExpr(o) : `(${showExpr(o)} != 0)`
        const want = isAnd ? (k ? asBool : "0") : k ? "1" : asBool
        expect(showExpr(simplify(e)), showExpr(e)).toBe(want)
      }),
      lawParams(100),
    )
  })

  it("intervalOf is exact on read-once expressions of +, -, ·, min, max, floordiv and div by constants", () => {
    // a tree over the leaves x, y, z, each variable at most once, and constants
    const leaf = (vars: readonly string[]): fc.Arbitrary<Expr> =>
      vars.length ? fc.oneof({ arbitrary: fc.constantFrom(...vars).map((n) => v(n)), weight: 3 }, fc.integer({ min: -4, max: 4 }).map((k) => c(k))) : fc.integer({ min: -4, max: 4 }).map((k) => c(k))
    const tree = (vars: readonly string[], depth: number): fc.Arbitrary<Expr> =>
      depth === 0 || vars.length === 0
        ? leaf(vars)
        : fc.oneof(
            leaf(vars),
            fc.tuple(fc.constantFrom<BinOp>("add", "sub", "mul", "min", "max"), fc.integer({ min: 0, max: vars.length })).chain(([op, cut]) =>
              fc.tuple(tree(vars.slice(0, cut), depth - 1), tree(vars.slice(cut), depth - 1)).map(([a, b]) => bin(op, a, b)),
            ),
            fc.tuple(tree(vars, depth - 1), fc.constantFrom<BinOp>("floordiv", "div"), fc.integer({ min: -4, max: 4 }).filter((k) => k !== 0)).map(([a, op, k]) =>
              bin(op, a, c(op === "floordiv" ? Math.abs(k) : k)),
            ),
            fc.tuple(tree(vars, depth - 1), fc.integer({ min: 2, max: 4 })).map(([a, k]) => bin("floormod", a, c(k))),
          )
    fc.assert(
      fc.property(tree(["x", "y", "z"], 3), arbRange(-6, 4), arbRange(-6, 4), arbRange(-6, 4), (e, xr, yr, zr) => {
        const box: Box = new Map([["x", xr], ["y", yr], ["z", zr]])
        for (const sub0 of collect(e, (x) => x.kind === "bin" || x.kind === "var" || x.kind === "const")) {
          // floormod is exact only where its numerator covers every residue or fits in [0, d): skip the others
          const vals = points(sub0, box).map((pt) => valueAt(sub0, pt))
          const exact = { min: Math.min(...vals), max: Math.max(...vals) }
          if (collect(sub0, (x) => x.kind === "bin" && x.op === "floormod").length) {
            const iv = intervalOf(sub0, box)
            expect(iv.min <= exact.min && exact.max <= iv.max).toBe(true)
            continue
          }
          expect(intervalOf(sub0, box), `${showExpr(sub0)} over ${JSON.stringify([...box])}`).toEqual(exact)
        }
      }),
      lawParams(300),
    )
  })

  it("floormod's interval: the numerator's own where it lies in [0, d), else [0, d - 1]; under an unknown divisor, unknown", () => {
    fc.assert(
      fc.property(arbRange(-6, 6), fc.integer({ min: 1, max: 6 }), (xr, d) => {
        const box: Box = new Map([["x", xr], ["y", { min: 1, max: 3 }]])
        const want = xr.min >= 0 && xr.max < d ? xr : { min: 0, max: d - 1 }
        expect(intervalOf(bin("floormod", v("x"), c(d)), box)).toEqual(want)
        expect(intervalOf(bin("floormod", v("x"), v("y")), box)).toEqual({ min: -Infinity, max: Infinity })
        expect(intervalOf(bin("floordiv", v("x"), v("y")), box)).toEqual({ min: -Infinity, max: Infinity })
        expect(intervalOf(select(bin("lt", v("x"), c(0)), v("x"), c(d)), box)).toEqual({ min: Math.min(xr.min, d), max: Math.max(xr.max, d) })
      }),
      lawParams(60),
    )
  })

  it("intervalOf: a comparison or logical op of int operands is [0, 1]; x / y with y taking both 1 and -1 is [-max |x|, max |x|]; 0 times anything is 0; what it cannot see into is unknown", () => {
    const U = { min: -Infinity, max: Infinity }
    fc.assert(
      fc.property(arbRange(-6, 4), fc.integer({ min: -3, max: -1 }), fc.integer({ min: 1, max: 3 }), fc.constantFrom<BinOp>("lt", "le", "gt", "ge", "eq", "ne", "and", "or"), (xr, ylo, yhi, cmp) => {
        const box: Box = new Map([["x", xr], ["y", { min: ylo, max: yhi }], ["z", { min: 0, max: 0 }]])
        const m = Math.max(Math.abs(xr.min), Math.abs(xr.max))
        expect(intervalOf(bin("div", v("x"), v("y")), box)).toEqual({ min: -m, max: m })
        expect(intervalOf(bin(cmp, add(v("x"), c(xr.min < 0 ? 0 : -xr.min - 1)), v("y")), box)).toEqual({ min: 0, max: 1 })
        expect(intervalOf(mul(v("z"), v("w")), box)).toEqual({ min: 0, max: 0 })
        expect(intervalOf(mul(v("w"), v("z")), box)).toEqual({ min: 0, max: 0 })
        expect(intervalOf(v("w"), box)).toEqual(U)
        expect(intervalOf({ kind: "read", source: "A", indices: [v("x")], dtype: "int32" }, box)).toEqual(U)
        expect(intervalOf({ kind: "cast", value: v("x"), dtype: "int64" }, box)).toEqual(xr)
        expect(intervalOf(bin("div", { kind: "const", value: 1.5, dtype: "float32" }, { kind: "var", name: "f", dtype: "float32" }), box)).toEqual(U)
        expect(intervalOf(bin("add", { kind: "var", name: "f", dtype: "float32" }, { kind: "var", name: "f", dtype: "float32" }), box)).toEqual(U)
      }),
      lawParams(60),
    )
  })

  it("constDifference is the constant a - b where the linear forms say so, else undefined", () => {
    fc.assert(
      fc.property(arbLinear, fc.integer({ min: -9, max: 9 }), ([, , e1, e2], k) => {
        expect(constDifference(add(e1, c(k)), e2)).toBe(k)
        expect(constDifference(e1, add(e2, v("w")))).toBeUndefined()
      }),
      lawParams(60),
    )
  })
})
