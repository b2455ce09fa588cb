// The counted split of a kernel over the c target's threads (src/ast/tir/parallel-balance.ts): the
// pool's chunks claimed as threads come free, work counted iteration by iteration where a loop's
// bounds move with the parallel variable, regions counted each time they are entered.
import { describe, expect, it } from "vitest"
import { add, c, f32, lt, read, v } from "../src/ast/te/expr.js"
import { parallelBalance, poolSpan, spanRatio } from "../src/ast/tir/parallel-balance.js"
import type { PrimFunc, Stmt } from "../src/ast/tir/tir.js"

const out = { name: "Y", dtype: "float32" as const, shape: [64], scope: "global" as const }
const x = { name: "X", dtype: "float32" as const, shape: [64], scope: "global" as const }
const loop = (name: string, extent: number | ReturnType<typeof v> | ReturnType<typeof add>, forKind: "serial" | "parallel", body: Stmt): Stmt => ({
  kind: "for",
  var: v(name),
  min: c(0),
  extent: typeof extent === "number" ? c(extent) : extent,
  forKind,
  body,
})
// Y[j] = X[j] + 1: two operations (a read and an add)
const store = (j: string): Stmt => ({ kind: "store", buffer: "Y", indices: [v(j)], value: add(read("X", [v(j)], "float32"), f32(1)) })
const fn = (body: Stmt): PrimFunc => ({ name: "f", params: [x, out], body })

describe("poolSpan (the c target's pool: min(extent, threads × 4) chunks, home runs first, then the others')", () => {
  it("splits uniform work evenly where the chunks divide, and a chunk more where they do not", () => {
    expect(poolSpan(new Array(8).fill(1), 2)).toBe(4)
    expect(poolSpan(new Array(64).fill(1), 2)).toBe(32)
    // 3 iterations on 2 threads: one thread runs two
    expect(poolSpan([1, 1, 1], 2)).toBe(2)
    // 9 iterations, 8 chunks (one of two iterations): 5 on the busier thread
    expect(poolSpan(new Array(9).fill(1), 2)).toBe(5)
    expect(poolSpan([5, 5, 5], 1)).toBe(15)
  })
  it("lets a free thread take the chunks of another's home", () => {
    // thread 0's first chunk is heavy; thread 1 runs its own four, then three of thread 0's
    expect(poolSpan([10, 1, 1, 1, 1, 1, 1, 1], 2)).toBe(10)
    // a home's chunks run in order: thread 1 reaches its heavy last chunk after three others
    expect(poolSpan([1, 1, 1, 1, 1, 1, 1, 10], 2)).toBe(13)
  })
})

describe("parallelBalance", () => {
  it("counts a uniform parallel loop's work and splits it", () => {
    const b = parallelBalance(fn(loop("i", 8, "parallel", loop("j", 4, "serial", store("j")))), 2)
    expect(b).toMatchObject({ serial: 0, parallel: 64, span: 32, regions: 1 })
    expect(spanRatio(b)).toBe(0.5)
    expect(b.loops).toEqual([{ var: "i", extent: 8, entries: 1, work: 64, span: 32 }])
  })
  it("counts a triangular loop iteration by iteration: the busier thread holds more than half", () => {
    // iteration i runs i + 1 stores: 1 + 2 + … + 8 = 36 stores, 72 operations
    const b = parallelBalance(fn(loop("i", 8, "parallel", loop("j", add(v("i"), c(1)), "serial", store("j")))), 2)
    expect(b.parallel).toBe(72)
    // home 0: i = 0..3 (2 + 4 + 6 + 8 ops), home 1: i = 4..7 (10 + 12 + 14 + 16): thread 0 runs its
    // home, then takes i = 6 from thread 1's while thread 1 runs i = 5 → 34 : 38
    expect(b.span).toBe(38)
    expect(spanRatio(b)).toBeCloseTo(38 / 72)
  })
  it("counts a region each time it is entered, and work outside regions as serial", () => {
    const body: Stmt = {
      kind: "seq",
      body: [loop("o", 3, "serial", loop("i", 2, "parallel", store("i"))), { kind: "if", cond: lt(v("n"), c(0)), then: store("n") }],
    }
    const b = parallelBalance(fn({ kind: "let", var: v("n"), value: c(1), body }), 2)
    expect(b.regions).toBe(3)
    expect(b.serial).toBe(0)
    expect(b.parallel).toBe(12)
    expect(b.span).toBe(6)
    const serial = parallelBalance(fn(loop("o", 3, "serial", store("o"))), 2)
    expect(serial).toMatchObject({ serial: 6, parallel: 0, regions: 0 })
    expect(spanRatio(serial)).toBe(1)
  })
})
