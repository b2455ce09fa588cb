// lowering.PromoteAccumulators (after Simplify, as it runs): same meaning; its output verifies —
// on random schedules and on the nest it is for: a matmul's local accumulator (cacheWrite, computed
// at the output's column tile) split into register tiles under the reduce loops; and what it
// decides: it promotes exactly the register tiles that have a loop, are smaller than their
// accumulator and hold at most 256 elements, copies the tile loops' kinds into the load and
// store-back nests, and returns a function it promotes nothing in as it is.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { fromArray } from "../../../src/ast/graph/tensor.js"
import * as S from "../../../src/ast/schedule/schedule.js"
import { add, c, floordiv, lt, max, mul, read, v, type Expr } from "../../../src/ast/te/expr.js"
import { at, compute, placeholder, reduceAxis, sum } from "../../../src/ast/te/tensor.js"
import { printPrimFunc, printStmt, type Buffer, type PrimFunc, type Stmt } from "../../../src/ast/tir/tir.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { promoteAccumulators } from "../../../src/lowering/tir/promote-accumulators.js"
import { simplifyTir } from "../../../src/lowering/tir/simplify-tir.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"
import { applyPass, arbLoweredCase, passLaws, profileOf, type LoweredCase } from "./support.js"

type AccumulatorCase = LoweredCase & { readonly tile: readonly number[]; readonly accumulator: number }

/** C = A·B into a local accumulator per (mt × nt) output tile, its reduction split by kt outside (rt × ct) register tiles (unrolled or not). */
const accumulatorCase = (mt: number, nt: number, rt: number, ct: number, reps: number, kt: number, unroll: boolean, seed: number): AccumulatorCase => {
  const [M, N, K] = [mt * reps, nt * 2, kt * 3]
  const A = placeholder("A", [M, K])
  const B = placeholder("B", [K, N])
  const k = reduceAxis(K, "k")
  const C = compute("C", [M, N], (i, j) => sum(mul(at(A, i, k.var), at(B, k.var, j)), [k]))
  const w = S.cacheWrite(S.createSchedule([C]), "C", "local")
  const t = S.tile(w.schedule, "C", "C.i", "C.j", mt, nt)
  let s = S.computeAt(t.schedule, w.stage, "C", t.yo)
  const [i, j, kk] = s.stages.get(w.stage)!.leaf
  const si = S.split(s, w.stage, i, { factor: Math.min(rt, mt) })
  const sj = S.split(si.schedule, w.stage, j, { factor: Math.min(ct, nt) })
  const sk = S.split(sj.schedule, w.stage, kk, { factor: kt })
  s = S.reorder(sk.schedule, w.stage, [si.outer, sj.outer, sk.outer, sk.inner, si.inner, sj.inner])
  if (unroll) s = S.unroll(S.unroll(s, w.stage, si.inner), w.stage, sj.inner)
  const vals = (n: number) => Array.from({ length: n }, (_, q) => ((q * 7 + seed) % 11) - 5)
  return {
    func: lowerSync(s),
    tile: [Math.min(rt, mt), Math.min(ct, nt)],
    accumulator: mt * nt,
    outputs: [C],
    inputs: new Map([
      ["A", fromArray("float32", [M, K], vals(M * K))],
      ["B", fromArray("float32", [K, N], vals(K * N))],
    ]),
  }
}

const arbAccumulatorCase = (): fc.Arbitrary<AccumulatorCase> =>
  fc
    .tuple(fc.constantFrom(1, 2, 4), fc.constantFrom(2, 4, 8), fc.constantFrom(1, 2), fc.constantFrom(1, 2, 4), fc.constantFrom(1, 2), fc.constantFrom(1, 2, 3), fc.boolean(), fc.integer({ min: 0, max: 1000 }))
    .map((args) => accumulatorCase(...args))

const isPromoted = (c: LoweredCase) => printPrimFunc(applyPass(promoteAccumulators, c, [simplifyTir]).output).includes("allocate C.local.local.tile0")

passLaws(promoteAccumulators, { after: [simplifyTir] })
passLaws(promoteAccumulators, { after: [simplifyTir], cases: arbAccumulatorCase(), variant: "register tiles of a local accumulator" })

describe("lowering.PromoteAccumulators", () => {
  it("the nest it is for is promoted exactly when its register tile has a loop and is smaller than the accumulator", () => {
    let promoted = 0
    fc.assert(
      fc.property(arbAccumulatorCase(), (c) => {
        const tiled = isPromoted(c)
        const [rows, cols] = c.tile
        expect(tiled).toBe((rows > 1 || cols > 1) && rows * cols < c.accumulator)
        if (tiled) promoted++
      }),
      lawParams(30),
    )
    expect(promoted).toBeGreaterThan(0)
  })

  it("promotes a register tile of up to 256 elements, no larger", () => {
    expect(isPromoted(accumulatorCase(16, 16, 16, 8, 1, 1, false, 0))).toBe(true)
    expect(isPromoted(accumulatorCase(16, 32, 16, 16, 1, 1, false, 0))).toBe(true)
    expect(isPromoted(accumulatorCase(32, 32, 16, 32, 1, 1, false, 0))).toBe(false)
  })

  it("random schedules: a function it promotes nothing in is returned as it is", () => {
    let kept = 0
    fc.assert(
      fc.property(fc.oneof(arbLoweredCase(["elementwise", "softmax", "matmul"]), arbAccumulatorCase()), (c) => {
        const { input, output } = applyPass(promoteAccumulators, c, [simplifyTir])
        if (!printPrimFunc(output).includes(".tile")) {
          expect(output).toBe(input)
          kept++
        }
      }),
      lawParams(30),
    )
    expect(kept).toBeGreaterThan(0)
  })

  it("adds, per tile promoted, a load and a store-back nest whose loops copy the tile loops' kinds (unrolled stays unrolled)", () => {
    fc.assert(
      fc.property(arbAccumulatorCase(), (c) => {
        const { input, output } = applyPass(promoteAccumulators, c, [simplifyTir])
        const tiles = (printPrimFunc(output).match(/allocate \S+\.tile\d+/g) ?? []).length
        const before = profileOf(input.body)
        const after = profileOf(output.body)
        const [rows, cols] = c.tile
        const tileLoops = (rows > 1 ? 1 : 0) + (cols > 1 ? 1 : 0)
        const kind = printPrimFunc(input).includes("for[unrolled]") ? "unrolled" : "serial"
        expect(after.get(kind) ?? 0).toBe((before.get(kind) ?? 0) + 2 * tiles * tileLoops)
        expect(after.get("store") ?? 0).toBe((before.get("store") ?? 0) + 2 * tiles)
      }),
      lawParams(30),
    )
  })
})

// Before / Expected on hand-written nests: what it promotes, and each condition that stops it
describe("lowering.PromoteAccumulators: which nests", () => {
  const A: Buffer = { name: "A", dtype: "float32", shape: [3], scope: "global" }
  const [r, i, n] = [v("r"), v("i"), v("n")]
  const loop = (x: typeof r, extent: Expr, body: Stmt, forKind: "serial" | "parallel" = "serial", min: number | Expr = 0): Stmt => ({ kind: "for", var: x, min: typeof min === "number" ? c(min) : min, extent, forKind, body })
  /** allocate L[8] (scope) { for r < 3: for i < 4: L[idx] = L[readIdx] + A[r] } */
  const nest = (o: { idx?: Expr; readIdx?: Expr | null; scope?: "local" | "global"; outer?: "serial" | "parallel"; tileExtent?: Expr; rInIndex?: boolean; tileMin?: number | Expr } = {}): PrimFunc => {
    const idx = o.idx ?? (o.rInIndex ? add(i, r) : i)
    const value = o.readIdx === null ? read("A", [r], "float32") : add(read("L", [o.readIdx ?? idx], "float32"), read("A", [r], "float32"))
    const body: Stmt = loop(r, c(3), loop(i, o.tileExtent ?? c(4), { kind: "store", buffer: "L", indices: [idx], value }, "serial", o.tileMin), o.outer)
    const alloc: Stmt = { kind: "allocate", buffer: { name: "L", dtype: "float32", shape: [8], scope: o.scope ?? "local" }, body }
    return { name: "f", params: [A], body: o.tileExtent ? { kind: "let", var: n, value: c(4), body: alloc } : alloc }
  }
  const run = (f: PrimFunc) => runTirSync(promoteAccumulators, f, { verify: false })

  it("promotes a reduction into a local buffer under a reduce loop its index does not use", () => {
    expect(printStmt(run(nest()).body)).toBe(
      [
        "  allocate L: float32[8] @local",
        "  allocate L.tile0: float32[4] @local",
        "  for i.in0 in [0, +4):",
        "    L.tile0[i.in0] = L[i.in0]",
        "  for r in [0, +3):",
        "    for i in [0, +4):",
        "      L.tile0[i] = (L.tile0[i] + A[r])",
        "  for i.out0 in [0, +4):",
        "    L[i.out0] = L.tile0[i.out0]",
      ].join("\n"),
    )
  })

  it("promotes a tile whose loop does not start at 0: the tile array is indexed from the loop's min", () => {
    // i in [2, 6): the tile's element i - 2, loaded from and stored back to L[i]
    expect(printStmt(run(nest({ tileMin: 2 })).body)).toBe(
      [
        "  allocate L: float32[8] @local",
        "  allocate L.tile0: float32[4] @local",
        "  for i.in0 in [2, +4):",
        "    L.tile0[(i.in0 + -2)] = L[i.in0]",
        "  for r in [0, +3):",
        "    for i in [2, +4):",
        "      L.tile0[(i + -2)] = (L.tile0[(i + -2)] + A[r])",
        "  for i.out0 in [2, +4):",
        "    L[i.out0] = L.tile0[(i.out0 + -2)]",
      ].join("\n"),
    )
  })

  it("promotes a nest inside a let and inside either arm of a guard", () => {
    const f = nest()
    const alloc = f.body as Extract<Stmt, { kind: "allocate" }>
    const guarded: PrimFunc = { ...f, body: { ...alloc, body: { kind: "let", var: n, value: c(1), body: { kind: "if", cond: lt(n, c(2)), then: alloc.body, else: alloc.body } } } }
    expect((printStmt(run(guarded).body).match(/allocate L\.tile\d/g) ?? []).length).toBe(2)
  })

  it("promotes only the arm of a guard that holds such a nest, the other arm kept as it is", () => {
    const f = nest()
    const alloc = f.body as Extract<Stmt, { kind: "allocate" }>
    const plain = (nest({ readIdx: null }).body as Extract<Stmt, { kind: "allocate" }>).body
    for (const [then, otherwise] of [
      [alloc.body, plain],
      [plain, alloc.body],
    ]) {
      const guarded: PrimFunc = { ...f, body: { ...alloc, body: { kind: "let", var: n, value: c(1), body: { kind: "if", cond: lt(n, c(2)), then, else: otherwise } } } }
      const out = run(guarded).body as Extract<Stmt, { kind: "allocate" }>
      const guard = (out.body as Extract<Stmt, { kind: "let" }>).body as Extract<Stmt, { kind: "if" }>
      const [promoted, kept] = then === plain ? [guard.else!, guard.then] : [guard.then, guard.else!]
      expect(printStmt(promoted)).toContain("allocate L.tile0")
      expect(kept).toBe(plain)
    }
  })

  it("promotes a tile whose index is one to one on the tile's points though not on their reflection (max(i, 0), i in [0, 4))", () => {
    expect(printStmt(run(nest({ idx: max(i, c(0)) })).body)).toContain("allocate L.tile0: float32[4] @local")
  })

  it("leaves a nest as it is whose index is one to one only for some values of an outer loop (L[i·o], o in [0, 2): at o = 0 every i writes L[0])", () => {
    const o = v("o")
    const f = nest({ idx: mul(i, o) })
    const alloc = f.body as Extract<Stmt, { kind: "allocate" }>
    const outer: PrimFunc = { ...f, body: { ...alloc, body: loop(o, c(2), alloc.body) } }
    expect(run(outer)).toBe(outer)
  })

  it("leaves a nest as it is whose value also reads its buffer at another index (L[i] = L[i] + L[i + 4])", () => {
    const f = nest({ readIdx: null })
    const alloc = f.body as Extract<Stmt, { kind: "allocate" }>
    const value = add(read("L", [i], "float32"), read("L", [add(i, c(4))], "float32"))
    const g: PrimFunc = { ...f, body: { ...alloc, body: loop(r, c(3), loop(i, c(4), { kind: "store", buffer: "L", indices: [i], value })) } }
    expect(run(g)).toBe(g)
  })

  it("leaves a nest as it is whose tile has one loop of known extent and one of unknown extent", () => {
    const j = v("j")
    const idx = add(mul(i, c(4)), j)
    const store: Stmt = { kind: "store", buffer: "L", indices: [idx], value: add(read("L", [idx], "float32"), read("A", [r], "float32")) }
    const alloc: Stmt = { kind: "allocate", buffer: { name: "L", dtype: "float32", shape: [8], scope: "local" }, body: loop(r, c(3), loop(i, c(2), loop(j, n, store))) }
    const f: PrimFunc = { name: "f", params: [A], body: { kind: "let", var: n, value: c(4), body: alloc } }
    expect(run(f)).toBe(f)
  })

  it("leaves a nest as it is where its index is not one to one over the tile, not an update, of a global buffer, under a parallel loop, of a tile of unknown extent or start, or with no reduce loop outside the tile", () => {
    for (const f of [
      nest({ idx: floordiv(i, c(2)) }),
      nest({ readIdx: null }),
      nest({ readIdx: add(i, c(1)) }),
      nest({ scope: "global" }),
      nest({ outer: "parallel" }),
      nest({ tileExtent: n }),
      nest({ tileExtent: c(4), tileMin: n }),
      nest({ rInIndex: true }),
    ])
      expect(run(f)).toBe(f)
  })
})
