// Tensorize on the nests and forms tensorize-match.law.ts does not draw, each against what the TE
// computes (the lowered program runs the intrinsic by its declaration):
// - Nests that match: the tile behind outer loops fused into one (a batch with a row tile), a
//   reduction whose reduce axis starts away from 0, a tile that reads its operand transposed —
//   each computes what the TE says.
// - Nests that do not: an output the nest writes transposed to the intrinsic's (though its reads
//   match); a reduction (its reduce loop outside the tile) against a store intrinsic, and a store
//   against a reduction; an intrinsic that declares an input it never reads.
// - Operand regions: an intrinsic operand is one region of one tensor. A nest that reads one tensor
//   at two places matches an intrinsic that reads two operands there, each with its own region, and
//   does not match one that reads one operand twice (unless the two places are one).
// - Expression forms, changed after every operand was read (so no unread input gives the mismatch
//   away): another constant, operator, call, a call's second argument, cast, kind of node (a
//   constant where the intrinsic reads an operand, bound or not, or a cast where it has something
//   else), select, or a second read of an operand at another index — no match, with a reason.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as S from "../../src/ast/schedule/schedule.js"
import { matchIntrinsic, matchIntrinsicRegions } from "../../src/ast/schedule/tensorize-match.js"
import { evalExpr } from "../../src/ast/te/eval-expr.js"
import { add, c, f32, mul, type Expr } from "../../src/ast/te/expr.js"
import { gemmMicroKernel, type TensorIntrinsic } from "../../src/ast/te/intrinsic.js"
import { at, compute, placeholder, reduceAxis, sum, type Placeholder } from "../../src/ast/te/tensor.js"
import { assertLowersToTE, lawParams, smallIntInputs } from "../support.js"

/** A store intrinsic over m×n: t[x, y] = body(a[x, y] or a[y, x], b[y]). */
const storeIntrinsic = (name: string, inputs: readonly Placeholder[], body: (x: Expr, y: Expr) => Expr, shape: readonly number[]): TensorIntrinsic => ({
  name,
  compute: compute("t", shape, (...idx) => body(idx[0], idx[1])),
  inputs,
  mode: "store",
  emit: {},
})

const dims = fc.record({ m: fc.integer({ min: 1, max: 3 }), n: fc.integer({ min: 1, max: 3 }), k: fc.integer({ min: 1, max: 3 }), ri: fc.integer({ min: 1, max: 3 }), rj: fc.integer({ min: 1, max: 3 }), rk: fc.integer({ min: 1, max: 3 }) })

describe("tensorize: nests that match compute what the TE says", () => {
  it("a batched matmul whose batch loop is fused with the row tiles' loop (and, or not, the column tiles' loop)", () => {
    fc.assert(
      fc.property(dims, fc.integer({ min: 1, max: 3 }), fc.boolean(), fc.nat(), ({ m, n, k, ri, rj, rk }, nb, twice, seed) => {
        const A = placeholder("A", [nb, m * ri, k * rk])
        const B = placeholder("B", [nb, k * rk, n * rj])
        const r = reduceAxis(k * rk, "r")
        const C = compute("C", [nb, m * ri, n * rj], (b, i, j) => sum(mul(at(A, b, i, r.var), at(B, b, r.var, j)), [r]))
        const [cb, ci, cj] = C.axes.map((x) => x.var.name)
        const si = S.split(S.createSchedule([C]), "C", ci, { factor: m })
        const fb = S.fuse(si.schedule, "C", cb, si.outer)
        const sj = S.split(fb.schedule, "C", cj, { factor: n })
        const sk = S.split(sj.schedule, "C", "r", { factor: k })
        let s = S.reorder(sk.schedule, "C", [fb.fused, sj.outer, sk.outer, si.inner, sj.inner, sk.inner])
        if (twice) s = S.fuse(s, "C", fb.fused, sj.outer).schedule
        s = S.tensorize(s, "C", si.inner, gemmMicroKernel(m, n, k))
        assertLowersToTE(s, smallIntInputs(seed, [A, B]), 0, [C])
      }),
      lawParams(40),
    )
  })

  it("a matmul whose reduce axis starts away from 0", () => {
    fc.assert(
      fc.property(dims, fc.integer({ min: 1, max: 3 }), fc.nat(), ({ m, n, k, ri, rj, rk }, from, seed) => {
        const A = placeholder("A", [m * ri, k * rk + from])
        const B = placeholder("B", [k * rk + from, n * rj])
        const r = reduceAxis(k * rk, "r", from)
        const C = compute("C", [m * ri, n * rj], (i, j) => sum(mul(at(A, i, r.var), at(B, r.var, j)), [r]))
        const si = S.split(S.createSchedule([C]), "C", "C.i", { factor: m })
        const sj = S.split(si.schedule, "C", "C.j", { factor: n })
        const sk = S.split(sj.schedule, "C", "r", { factor: k })
        const s = S.tensorize(S.reorder(sk.schedule, "C", [si.outer, sj.outer, sk.outer, si.inner, sj.inner, sk.inner]), "C", si.inner, gemmMicroKernel(m, n, k))
        assertLowersToTE(s, smallIntInputs(seed, [A, B]), 0, [C])
      }),
      lawParams(40),
    )
  })

  it("an output written transposed: the nest (jo, io, ji, ii) reads A[j, i] as t[x, y] = a[x, y]·2 reads a but writes E[i, j], not t[x, y]: no match; against t[x, y] = a[y, x]·2 the nest (io, jo, ii, ji) matches", () => {
    fc.assert(
      fc.property(dims, fc.nat(), ({ m, n, ri, rj }, seed) => {
        // E[i, j] = A[j, i] · 2 over (n·ri)×(m·rj), tiles of n×m
        const A = placeholder("A", [m * rj, n * ri])
        const E = compute("E", [n * ri, m * rj], (i, j) => mul(at(A, j, i), f32(2)))
        const si = S.split(S.createSchedule([E]), "E", "E.i", { factor: n })
        const sj = S.split(si.schedule, "E", "E.j", { factor: m })
        const a = placeholder("a", [m, n])
        const readStraight = storeIntrinsic("read_straight", [a], (x, y) => mul(at(a, x, y), f32(2)), [m, n])
        const transposed = S.reorder(sj.schedule, "E", [sj.outer, si.outer, sj.inner, si.inner])
        const why = matchIntrinsic(transposed.stages.get("E")!, sj.inner, readStraight)
        expect(why).toMatch(/output dim/)
        expect(() => S.tensorize(transposed, "E", sj.inner, readStraight)).toThrow(/does not match/)
        const readSwapped = storeIntrinsic("read_swapped", [a], (x, y) => mul(at(a, y, x), f32(2)), [n, m])
        const s = S.tensorize(S.reorder(sj.schedule, "E", [si.outer, sj.outer, si.inner, sj.inner]), "E", si.inner, readSwapped)
        assertLowersToTE(s, smallIntInputs(seed, [A]), 0, [E])
      }),
      lawParams(30),
    )
  })
})

describe("tensorize: nests that do not match", () => {
  it("a reduction (its reduce loop outside the tile) against a store intrinsic, and a store against a reduction", () => {
    fc.assert(
      fc.property(dims, ({ m, k, ri, rk }) => {
        // E[i] = Σ_r A[r, i]: with r outermost the tile (ii) reads A[r, io·m + ii], as t[x] = a[x] reads a — but E accumulates
        const A = placeholder("A", [k * rk, m * ri])
        const r = reduceAxis(k * rk, "r")
        const E = compute("E", [m * ri], (i) => sum(at(A, r.var, i), [r]))
        const a = placeholder("a", [m])
        const copy = storeIntrinsic("copy", [a], (x) => at(a, x), [m])
        const si = S.split(S.createSchedule([E]), "E", "E.i", { factor: m })
        const s = S.reorder(si.schedule, "E", ["r", si.outer, si.inner])
        expect(matchIntrinsic(s.stages.get("E")!, si.inner, copy)).toMatch(/reduction/)
        expect(() => S.tensorize(s, "E", si.inner, copy)).toThrow(/does not match/)
        // and the other way: F[i, r'] = A[r', i] · 1 (no reduction) against t[x] = Σ_kk a[x, kk]... its loops (data, data)
        const F = compute("F", [m * ri, k * rk], (i, j) => at(A, j, i))
        const a2 = placeholder("a", [m, k])
        const kk = reduceAxis(k, "kk")
        const red: TensorIntrinsic = { name: "rowsum", compute: compute("t", [m], (x) => sum(at(a2, x, kk.var), [kk])), inputs: [a2], mode: "update", emit: {} }
        const fi = S.split(S.createSchedule([F]), "F", "F.i", { factor: m })
        const fj = S.split(fi.schedule, "F", "F.j", { factor: k })
        const t = S.reorder(fj.schedule, "F", [fi.outer, fj.outer, fi.inner, fj.inner])
        expect(matchIntrinsic(t.stages.get("F")!, fi.inner, red)).toBeTypeOf("string")
      }),
      lawParams(20),
    )
  })

  it("an intrinsic that declares an input its compute never reads matches no nest", () => {
    fc.assert(
      fc.property(dims, ({ m, n, ri, rj }) => {
        const A = placeholder("A", [m * ri, n * rj])
        const E = compute("E", [m * ri, n * rj], (i, j) => mul(at(A, i, j), f32(3)))
        const a = placeholder("a", [m, n])
        const unread = placeholder("z", [m, n])
        const intrin = storeIntrinsic("scale", [a, unread], (x, y) => mul(at(a, x, y), f32(3)), [m, n])
        const t = S.tile(S.createSchedule([E]), "E", "E.i", "E.j", m, n)
        expect(matchIntrinsic(t.schedule.stages.get("E")!, t.xi, intrin)).toMatch(/not read/)
        // (without the unread input it matches)
        expect(matchIntrinsic(t.schedule.stages.get("E")!, t.xi, { ...intrin, inputs: [a] })).toBeUndefined()
      }),
      lawParams(10),
    )
  })
})

describe("tensorize: an operand is one region", () => {
  it("reads of one tensor at two places: two operands, each its own region; one operand read twice only where the places are one", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 3 }), fc.nat(2), fc.nat(2), fc.nat(), (m, reps, p, q, seed) => {
        // E[i] = A[i + p] + 2·A[i + q], split into tiles of m
        const A = placeholder("A", [m * reps + 2])
        const E = compute("E", [m * reps], (i) => add(at(A, add(i, c(p))), mul(at(A, add(i, c(q))), f32(2))))
        const sp = S.split(S.createSchedule([E]), "E", "E.i", { factor: m })
        const st = sp.schedule.stages.get("E")!
        const a = placeholder("a", [m])
        const b = placeholder("b", [m])
        const two = storeIntrinsic("two", [a, b], (x) => add(at(a, x), mul(at(b, x), f32(2))), [m])
        const one = storeIntrinsic("one", [a], (x) => add(at(a, x), mul(at(a, x), f32(2))), [m])
        const regions = matchIntrinsicRegions(st, sp.inner, two)
        if (typeof regions === "string") throw new Error(regions)
        for (let io = 0; io < reps; io++) {
          const base = (k: number) => regions.inputs[k].base.map((e) => Number(evalExpr(e, new Map([[sp.outer, io]]), () => 0)))
          expect([regions.inputs[0].tensor, regions.inputs[1].tensor]).toEqual(["A", "A"])
          expect([base(0), base(1)]).toEqual([[io * m + p], [io * m + q]])
        }
        assertLowersToTE(S.tensorize(sp.schedule, "E", sp.inner, two), smallIntInputs(seed, [A]), 0, [E])
        if (p === q) assertLowersToTE(S.tensorize(sp.schedule, "E", sp.inner, one), smallIntInputs(seed, [A]), 0, [E])
        else expect(() => S.tensorize(sp.schedule, "E", sp.inner, one)).toThrow(/does not match: a would be A at both/)
      }),
      lawParams(40),
    )
  })
})

/** The tail forms: built raw (nothing folds), the same for the intrinsic and the stage unless changed. */
const FORMS = ["const", "op", "call", "call's second argument", "cast", "kind", "select", "const for read", "const for a third operand", "index of a second read", "cast wrapper"] as const

describe("tensorize: a change after every operand was read", () => {
  it("another constant, operator, call, call argument, cast, kind of node, select or index of a second read does not match, with a reason", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 }), fc.constantFrom(...FORMS), fc.integer({ min: 1, max: 5 }), (m, n, form, k) => {
        const x = f32(k)
        const y = f32(k + 1)
        const bin = (op: "add" | "sub", l: Expr, r: Expr): Expr => ({ kind: "bin", op, a: l, b: r, dtype: "float32" })
        const castVia = (e: Expr, via: "float64" | "int32"): Expr => ({ kind: "cast", value: { kind: "cast", value: e, dtype: via }, dtype: "float32" })
        const sel = (i: Expr, bound: number): Expr => ({ kind: "select", cond: { kind: "bin", op: "lt", a: i, b: c(bound), dtype: "bool" }, t: x, f: y, dtype: "float32" })
        // [the intrinsic's tail, the stage's], given a read of the first operand, one at another index
        // (the stage's: transposed), a read of a third operand (the intrinsic's) and the row index
        // (over constants alone the forms would fold: a change of an operator, say, would read as one of a constant)
        const tails = (ra: Expr, rs: Expr, rz: Expr, i: Expr): [Expr, Expr] => {
          switch (form) {
            case "const":
              return [x, y]
            case "op":
              return [bin("add", ra, x), bin("sub", ra, x)]
            case "call":
              return [{ kind: "call", fn: "exp", args: [ra], dtype: "float32" }, { kind: "call", fn: "tanh", args: [ra], dtype: "float32" }]
            case "call's second argument":
              return [{ kind: "call", fn: "pow", args: [ra, x], dtype: "float32" }, { kind: "call", fn: "pow", args: [ra, y], dtype: "float32" }]
            case "cast":
              return [castVia(ra, "float64"), castVia(ra, "int32")]
            case "kind":
              return [{ kind: "call", fn: "exp", args: [ra], dtype: "float32" }, x]
            case "select":
              return [sel(i, 1), sel(i, 2)]
            case "const for read":
              return [ra, x]
            case "const for a third operand":
              return [rz, x]
            case "index of a second read":
              return [ra, rs]
            case "cast wrapper":
              return [bin("add", ra, x), castVia(bin("add", ra, x), "float64")]
          }
        }
        const a = placeholder("a", [m, n])
        const b = placeholder("b", [n])
        const z = placeholder("z", [m, n])
        const intrin = storeIntrinsic("tail", form === "const for a third operand" ? [a, b, z] : [a, b], (i, j) => bin("add", mul(at(a, i, j), at(b, j)), tails(at(a, i, j), at(a, i, j), at(z, i, j), i)[0]), [m, n])
        const A = placeholder("A", [2 * Math.max(m, n), 2 * Math.max(m, n)])
        const B = placeholder("B", [2 * n])
        const E = compute("E", [2 * m, 2 * n], (i, j) => bin("add", mul(at(A, i, j), at(B, j)), tails(at(A, i, j), at(A, j, i), c(0, "float32"), i)[1]))
        const t = S.tile(S.createSchedule([E]), "E", "E.i", "E.j", m, n)
        const why = matchIntrinsic(t.schedule.stages.get("E")!, t.xi, intrin)
        expect(typeof why === "string" && why.length > 0, `${form}: matched`).toBe(true)
        expect(() => S.tensorize(t.schedule, "E", t.xi, intrin)).toThrow(/does not match/)
      }),
      lawParams(80),
    )
  })
})
