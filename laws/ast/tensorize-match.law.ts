// Matching a loop nest against a tensor intrinsic, on intrinsics made up here: a random elementwise
// expression over a[x, y] and b[y] (+, -, ·, max, unary calls, casts, constants) as a "store"
// intrinsic over an m×n tile, and a stage that computes the same expression over a larger tensor
// read at constant offsets, split into m×n tiles and reordered so the tile is innermost.
// - The nest matches, and the regions it reports are the tile's: at any outer iteration (io, jo)
//   the output starts at (io·m, jo·n), a at (io·m + oi, jo·n + oj) and b at (jo·n + oj), listed
//   in the intrinsic's input order.
// - Any one change of the stage's expression — another operator, call, constant or cast, an
//   operand read at an index that moves with the wrong loop, one tensor read for both operands —
//   or of the nest (a tile of another extent, a split that leaves a guard, the tile not innermost,
//   another dtype) does not match: matchIntrinsic says why, tensorize is a ScheduleError.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as S from "../../src/ast/schedule/schedule.js"
import { matchIntrinsic, matchIntrinsicRegions } from "../../src/ast/schedule/tensorize-match.js"
import { evalExpr } from "../../src/ast/te/eval-expr.js"
import { add, c, type BinOp, type Expr, type Intrinsic } from "../../src/ast/te/expr.js"
import type { TensorIntrinsic } from "../../src/ast/te/intrinsic.js"
import { at, compute, placeholder, type ComputeTensor } from "../../src/ast/te/tensor.js"
import { lawParams } from "../support.js"

/** An expression tree over two operands, as data: built once for the intrinsic and once for the stage. */
type Shape =
  | { readonly kind: "a" | "b" }
  | { readonly kind: "const"; readonly value: number }
  | { readonly kind: "bin"; readonly op: BinOp; readonly l: Shape; readonly r: Shape }
  | { readonly kind: "call"; readonly fn: Intrinsic; readonly x: Shape }
  | { readonly kind: "cast"; readonly x: Shape }

const BIN_OPS: BinOp[] = ["add", "sub", "mul", "max"]
const CALLS: Intrinsic[] = ["exp", "tanh", "fabs", "neg"]

const arbShape: fc.Arbitrary<Shape> = fc.letrec<{ s: Shape }>((tie) => ({
  s: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom<Shape>({ kind: "a" }, { kind: "b" }),
    fc.integer({ min: 1, max: 5 }).map((value): Shape => ({ kind: "const", value })),
    fc.tuple(fc.constantFrom(...BIN_OPS), tie("s"), tie("s")).map(([op, l, r]): Shape => ({ kind: "bin", op, l, r })),
    fc.tuple(fc.constantFrom(...CALLS), tie("s")).map(([fn, x]): Shape => ({ kind: "call", fn, x })),
    tie("s").map((x): Shape => ({ kind: "cast", x })),
  ),
})).s

/** The shape's nodes, numbered in pre-order (a change picks one by number). */
const size = (s: Shape): number => (s.kind === "bin" ? 1 + size(s.l) + size(s.r) : s.kind === "call" || s.kind === "cast" ? 1 + size(s.x) : 1)

/** How many times the shape reads operand k. */
const count = (s: Shape, k: "a" | "b"): number =>
  s.kind === "bin" ? count(s.l, k) + count(s.r, k) : s.kind === "call" || s.kind === "cast" ? count(s.x, k) : s.kind === k ? 1 : 0

/** Builds the expression; the node numbered `change` (pre-order) built otherwise: another op, call, constant or operand, a cast through another dtype (raw nodes: nothing folds). */
const build = (s: Shape, leaf: { a: () => Expr; b: () => Expr; other: (k: "a" | "b") => Expr }, change = -1): Expr => {
  let n = 0
  const rec = (x: Shape): Expr => {
    const here = n++ === change
    switch (x.kind) {
      case "a":
      case "b":
        return here ? leaf.other(x.kind) : leaf[x.kind]()
      case "const":
        return { kind: "const", value: here ? x.value + 1 : x.value, dtype: "float32" }
      case "bin": {
        const op = here ? BIN_OPS[(BIN_OPS.indexOf(x.op) + 1) % BIN_OPS.length] : x.op
        const l = rec(x.l)
        return { kind: "bin", op, a: l, b: rec(x.r), dtype: "float32" }
      }
      case "call":
        return { kind: "call", fn: here ? CALLS[(CALLS.indexOf(x.fn) + 1) % CALLS.length] : x.fn, args: [rec(x.x)], dtype: "float32" }
      case "cast":
        // (raw nodes: the smart constructors fold a cast of a constant)
        return { kind: "cast", value: { kind: "cast", value: rec(x.x), dtype: here ? "int32" : "float64" }, dtype: "float32" }
    }
  }
  return rec(s)
}

interface Case {
  readonly intrin: TensorIntrinsic
  readonly m: number
  readonly n: number
  readonly tiles: readonly [number, number]
  readonly offsets: readonly [number, number]
  /** The stage's compute from the shape, with node `change` changed (-1: none), a read at a wrong index, rows added. */
  readonly stage: (change: number, wrongIndex?: "a" | "b", extraRows?: number) => ComputeTensor
}

const makeCase = (shape: Shape, m: number, n: number, tm: number, tn: number, oi: number, oj: number): Case => {
  const a = placeholder("a", [m, n])
  const b = placeholder("b", [n])
  const intrinCompute = compute("t", [m, n], (x, y) => build(shape, { a: () => at(a, x, y), b: () => at(b, y), other: () => c(0, "float32") }))
  const intrin: TensorIntrinsic = { name: "made_up", compute: intrinCompute, inputs: [a, b], mode: "store", emit: {} }
  const stage = (change: number, wrongIndex?: "a" | "b", extraRows = 0) => {
    const A = placeholder("A", [m * tm + extraRows + oi + n * tn, n * tn + oj + m * tm])
    const B = placeholder("B", [n * tn + oj + m * tm + oi])
    const A2 = placeholder("A2", A.shape)
    const B2 = placeholder("B2", B.shape)
    return compute("E", [m * tm + extraRows, n * tn], (i, j) => {
      const ai = add(i, c(oi))
      const aj = add(j, c(oj))
      return build(shape, {
        a: () => (wrongIndex === "a" ? at(A, aj, ai) : at(A, ai, aj)),
        b: () => (wrongIndex === "b" ? at(B, ai) : at(B, aj)),
        // another tensor in place of this operand: where the intrinsic reads it more than once, a
        // tensor of its shape (one operand would be two tensors); else the other operand (B for a, A for b)
        other: (k) => (count(shape, k) > 1 ? (k === "a" ? at(A2, ai, aj) : at(B2, aj)) : k === "a" ? at(B, aj) : at(A, ai, aj)),
      }, change)
    })
  }
  return { intrin, m, n, tiles: [tm, tn], offsets: [oi, oj], stage }
}

/** The stage split into fi×fj tiles, the tile innermost (or transposed: j's inner loop before i's); the schedule, the tile's first axis and the outer axes. */
const tiled = (out: ComputeTensor, fi: number, fj: number, transposed = false): { s: S.Schedule; axis: string; io: string; jo: string } => {
  const si = S.split(S.createSchedule([out]), "E", "E.i", { factor: fi })
  const sj = S.split(si.schedule, "E", "E.j", { factor: fj })
  const inner = transposed ? [sj.inner, si.inner] : [si.inner, sj.inner]
  return { s: S.reorder(sj.schedule, "E", [si.outer, sj.outer, ...inner]), axis: inner[0], io: si.outer, jo: sj.outer }
}

const arbCase = fc
  .tuple(arbShape, fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 }), fc.nat(2), fc.nat(2))
  .filter(([shape]) => JSON.stringify(shape).includes('"a"') && JSON.stringify(shape).includes('"b"'))
  .map(([shape, m, n, tm, tn, oi, oj]) => ({ shape, c: makeCase(shape, m, n, tm, tn, oi, oj) }))

describe("tensorize: matching a nest against an intrinsic", () => {
  it("the same expression over a tile matches, with the tile's regions at every outer iteration", () => {
    fc.assert(
      fc.property(arbCase, ({ c: cs }) => {
        const t = tiled(cs.stage(-1), cs.m, cs.n)
        const st = t.s.stages.get("E")!
        const m = matchIntrinsicRegions(st, t.axis, cs.intrin)
        if (typeof m === "string") throw new Error(`no match: ${m}`)
        expect(matchIntrinsic(st, t.axis, cs.intrin)).toBeUndefined()
        const [oi, oj] = cs.offsets
        expect(m.inputs.map((x) => x.tensor)).toEqual(["A", "B"])
        for (let io = 0; io < cs.tiles[0]; io++)
          for (let jo = 0; jo < cs.tiles[1]; jo++) {
            const env = new Map([[t.io, io], [t.jo, jo]])
            const values = (es: readonly Expr[]) => es.map((e) => Number(evalExpr(e, env, () => 0)))
            expect(values(m.output)).toEqual([io * cs.m, jo * cs.n])
            expect(values(m.inputs[0].base)).toEqual([io * cs.m + oi, jo * cs.n + oj])
            expect(values(m.inputs[1].base)).toEqual([jo * cs.n + oj])
          }
        expect(S.tensorize(t.s, "E", t.axis, cs.intrin).stages.get("E")!.tensorize).toEqual({ axis: t.axis, intrin: cs.intrin })
      }),
      lawParams(150),
    )
  })

  it("any one change of the expression, of a read's index, of the tile or of the dtype does not match", () => {
    const CHANGES = ["expr", "index a", "index b", "extent", "guard", "transposed", "dtype"] as const
    fc.assert(
      fc.property(arbCase, fc.nat(), fc.constantFrom(...CHANGES), ({ shape, c: cs }, pick, what) => {
        // (a split by 1 never leaves a guard)
        if (what === "guard" && cs.m === 1) return
        const out =
          what === "expr" ? cs.stage(pick % size(shape))
          : what === "index a" ? cs.stage(-1, "a")
          : what === "index b" ? cs.stage(-1, "b")
          : what === "guard" ? cs.stage(-1, undefined, 1)
          : what === "dtype" ? { ...cs.stage(-1), dtype: "float64" as const }
          : cs.stage(-1)
        const t = tiled(out, what === "extent" ? cs.m + 1 : cs.m, cs.n, what === "transposed")
        const why = matchIntrinsic(t.s.stages.get("E")!, t.axis, cs.intrin)
        expect(typeof why === "string" && why.length > 0, `${JSON.stringify(shape)}, ${what}: matched`).toBe(true)
        expect(() => S.tensorize(t.s, "E", t.axis, cs.intrin)).toThrow(/does not match/)
      }),
      lawParams(300),
    )
  })
})
