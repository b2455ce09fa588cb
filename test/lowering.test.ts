// Before / Expected tests of lowering and the TIR passes on small programs.
import { describe, expect, it } from "vitest"
import { add, c, f32, floordiv, lt, mul, read, showExpr, v } from "../src/ast/te/expr.js"
import { simplify } from "../src/ast/te/simplify.js"
import { at, compute, placeholder } from "../src/ast/te/tensor.js"
import * as S from "../src/ast/schedule/schedule.js"
import { printPrimFunc, seq, type PrimFunc, type Stmt } from "../src/ast/tir/tir.js"
import { lowerSync } from "../src/lowering/lower.js"
import { cpuTirPipeline } from "../src/lowering/tir/cpu-pipeline.js"
import { loopPartition } from "../src/lowering/tir/loop-partition.js"
import { simplifyTir } from "../src/lowering/tir/simplify-tir.js"
import { runTirSync, tirSequential } from "../src/lowering/tir/tir-pass.js"

const A = placeholder("A", [10])
const B = compute("B", [10], (i) => add(at(A, i), f32(1)))

describe("lowering", () => {
  it("a non-divisible split lowers to a guarded loop nest", () => {
    const s = S.split(S.createSchedule([B]), "B", "B.i", { factor: 4 }).schedule
    expect(printPrimFunc(lowerSync(s))).toBe(
      [
        "primfunc main(A: float32[10], B: float32[10]):",
        "  for B.i.o in [0, +3):",
        "    for B.i.i in [0, +4):",
        "      if ((B.i.i + (B.i.o * 4)) < 10):",
        "        B[(B.i.i + (B.i.o * 4))] = (A[(B.i.i + (B.i.o * 4))] + 1.0f)",
      ].join("\n"),
    )
  })

  it("simplify: a loop of one iteration becomes its body at that iteration, or nothing when its guards fail there", () => {
    const i = v("i")
    const j = v("j")
    const store = (cond: ReturnType<typeof lt>): Stmt => ({
      kind: "if",
      cond,
      then: { kind: "store", buffer: "B", indices: [add(i, j)], value: add(read("A", [add(i, j)], "float32"), f32(1)) },
    })
    const once = (body: Stmt): Stmt => ({ kind: "for", var: i, min: c(3), extent: c(1), forKind: "serial", body: { kind: "for", var: j, min: c(0), extent: c(1), forKind: "serial", body } })
    const fn = (body: Stmt): PrimFunc => ({
      name: "main",
      params: [
        { name: "A", dtype: "float32", shape: [10], scope: "global" },
        { name: "B", dtype: "float32", shape: [10], scope: "global" },
      ],
      body,
    })
    expect(printPrimFunc(runTirSync(simplifyTir, fn(seq([once(store(lt(add(i, j), c(4)))), once(store(lt(i, c(3))))]))))).toBe(
      ["primfunc main(A: float32[10], B: float32[10]):", "  B[3] = (A[3] + 1.0f)"].join("\n"),
    )
  })

  it("loop partition peels the guarded tail: neither the main loop nor the tail keeps a guard", () => {
    const s = S.split(S.createSchedule([B]), "B", "B.i", { factor: 4 }).schedule
    const f = runTirSync(tirSequential("lowering.SimplifyThenPartition", [simplifyTir, loopPartition]), lowerSync(s))
    expect(printPrimFunc(f)).toBe(
      [
        "primfunc main(A: float32[10], B: float32[10]):",
        "  for B.i.o in [0, +2):",
        "    for B.i.i in [0, +4):",
        "      B[(B.i.i + (B.i.o * 4))] = (A[(B.i.i + (B.i.o * 4))] + 1.0f)",
        "  for B.i.i in [0, +2):",
        "    B[(B.i.i + 8)] = (A[(B.i.i + 8)] + 1.0f)",
      ].join("\n"),
    )
  })

  it("the default TIR pipeline flattens, unrolls and keeps vector loops", () => {
    let s = S.split(S.createSchedule([B]), "B", "B.i", { factor: 5 }).schedule
    s = S.vectorize(s, "B", "B.i.i")
    s = S.unroll(s, "B", "B.i.o")
    expect(printPrimFunc(runTirSync(cpuTirPipeline(), lowerSync(s)))).toBe(
      [
        "primfunc main(A: float32[10], B: float32[10]):",
        "  for[vectorized] B.i.i in [0, +5):",
        "    B[B.i.i] = (A[B.i.i] + 1.0f)",
        "  for[vectorized] B.i.i in [0, +5):",
        "    B[(B.i.i + 5)] = (A[(B.i.i + 5)] + 1.0f)",
      ].join("\n"),
    )
  })
})

describe("GPU simulation", () => {
  it("a shared-memory tile needs its barriers: without them the simulated threads read a stale tile", async () => {
    const { buildCompute } = await import("../src/ast/te/arbitrary.js")
    const { evaluatePrimFunc } = await import("../src/ast/tir/evaluate.js")
    const { evaluateTE } = await import("../src/ast/te/evaluate.js")
    const { mapStmt, seq } = await import("../src/ast/tir/tir.js")
    const cc = buildCompute("matmul", 12345)
    let s = S.createSchedule(cc.outputs)
    const As = S.cacheRead(s, "A", "shared", ["C"])
    const i = S.split(As.schedule, "C", "C.i", { factor: 2 })
    const j = S.split(i.schedule, "C", "C.j", { factor: 2 })
    const k = S.split(j.schedule, "C", "k", { factor: 2 })
    s = S.reorder(k.schedule, "C", [i.outer, j.outer, i.inner, j.inner, k.outer, k.inner])
    s = S.bind(S.bind(S.bind(S.bind(s, "C", i.outer, "blockIdx.y"), "C", j.outer, "blockIdx.x"), "C", i.inner, "threadIdx.y"), "C", j.inner, "threadIdx.x")
    s = S.computeAt(s, As.stage, "C", k.outer)
    const leaf = s.stages.get(As.stage)!.leaf
    const r = S.split(s, As.stage, leaf[0], { factor: 2 })
    const c2 = S.split(r.schedule, As.stage, leaf[1], { factor: 2 })
    s = S.bind(S.bind(c2.schedule, As.stage, r.inner, "threadIdx.y"), As.stage, c2.inner, "threadIdx.x")
    const f = lowerSync(s)
    const want = Array.from(evaluateTE(cc.outputs, cc.inputs)[0].data)
    const close = (xs: ArrayLike<number>) => Array.from(xs).every((x, n) => Math.abs(x - want[n]) < 1e-4)
    expect(close(evaluatePrimFunc(f, cc.inputs).get("C")!.data)).toBe(true)
    const noBarriers = { ...f, body: mapStmt(f.body, (x) => (x.kind === "barrier" ? seq([]) : undefined)) }
    expect(close(evaluatePrimFunc(noBarriers, cc.inputs).get("C")!.data)).toBe(false)
  })
})

describe("simplify: canonical linear forms (terms ordered by name, constant last)", () => {
  const x = v("x")
  const y = v("y")
  it.each([
    [mul(x, c(4)), "(x * 4)"],
    [mul(c(4), x), "(x * 4)"],
    [mul(floordiv(y, c(3)), c(-2)), "(floordiv(y, 3) * -2)"],
    [mul(x, c(4, "int64")), "(x * 4)"],
    [add(mul(y, c(4)), add(mul(x, c(2)), c(3))), "(((x * 2) + (y * 4)) + 3)"],
    [add(mul(add(x, c(1)), c(4)), mul(x, c(-4))), "4"],
  ])("case %#", (e, expected) => {
    expect(showExpr(simplify(e))).toBe(expected)
  })
  it("a product of a term by a constant of another dtype takes the expression's dtype", () => {
    const s = simplify(mul(x, c(4, "int64")))
    expect(s.kind === "bin" && s.b.dtype).toBe("int32")
  })
})


describe("lowering: a reduce axis that does not start at 0", () => {
  it("sums over [min, min + extent), not over [0, extent)", async () => {
    // reduceAxis(4, "k", 2) is k in [2, 6): lowering looped k over [0, 4) (A[i, 0..3], 6 for row 0,
    // where the TE says A[i, 2..5], 14); rfactor already added the min
    const { fromArray } = await import("../src/ast/graph/tensor.js")
    const { evaluateTE } = await import("../src/ast/te/evaluate.js")
    const { evaluatePrimFunc } = await import("../src/ast/tir/evaluate.js")
    const { reduceAxis, sum } = await import("../src/ast/te/tensor.js")
    const A = placeholder("A", [3, 8])
    const k = reduceAxis(4, "k", 2)
    const R = compute("R", [3], (i) => sum(at(A, i, k.var), [k]))
    const inputs = new Map([["A", fromArray("float32", [3, 8], Array.from({ length: 24 }, (_, q) => q))]])
    expect([...evaluateTE([R], inputs)[0].data]).toEqual([14, 46, 78])
    const s = S.createSchedule([R])
    const sp = S.split(s, "R", "k", { factor: 3 })
    for (const sched of [s, sp.schedule, S.rfactor(sp.schedule, "R", sp.inner).schedule])
      expect([...evaluatePrimFunc(lowerSync(sched), inputs).get("R")!.data]).toEqual([14, 46, 78])
  })
})
