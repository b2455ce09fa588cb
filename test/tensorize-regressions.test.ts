// Counterexamples the tensorize laws (laws/lowering/tensorize.law.ts) found: each bug as a named
// regression.
import { describe, expect, it } from "vitest"
import { fromArray } from "../src/ast/graph/tensor.js"
import * as S from "../src/ast/schedule/schedule.js"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { cast, mul } from "../src/ast/te/expr.js"
import { gemmMicroKernel, vnniDot16x4 } from "../src/ast/te/intrinsic.js"
import { at, compute, placeholder, reduceAxis, sum } from "../src/ast/te/tensor.js"
import { evaluatePrimFunc } from "../src/ast/tir/evaluate.js"
import { lowerSync } from "../src/lowering/lower.js"
import { assertAllClose } from "../laws/support.js"

const matmul = (M: number, N: number, K: number, dtype: "float32" | "float64" | "int32" = "float32") => {
  const A = placeholder("A", [M, K], dtype)
  const B = placeholder("B", [K, N], dtype)
  const k = reduceAxis(K, "k")
  const C = compute("C", [M, N], (i, j) => sum(mul(at(A, i, k.var), at(B, k.var, j)), [k]), dtype)
  const vals = (n: number) => Array.from({ length: n }, (_, q) => ((q * 7) % 11) - 5)
  return { C, inputs: new Map([["A", fromArray(dtype, [M, K], vals(M * K))], ["B", fromArray(dtype, [K, N], vals(K * N))]]) }
}

describe("tensorize: dtypes", () => {
  it("a gemm micro-kernel of another dtype than the stage's is a ScheduleError", () => {
    // the match compared the expressions' shapes only: an int32 matmul took the float32 kernel
    // (its C function then read int32 buffers as float*), a float32 one the float64 kernel
    for (const [stage, kernel] of [["int32", "float32"], ["float32", "float64"], ["float64", "float32"]] as const) {
      const { C } = matmul(4, 4, 4, stage)
      expect(() => S.tensorize(S.createSchedule([C]), "C", "C.i", gemmMicroKernel(4, 4, 4, kernel))).toThrow(/does not match: the stage computes/)
    }
  })

  it("VNNI's dot product on a signed first operand is a ScheduleError", () => {
    // vpdpbusd reads its first operand as uint8: an int8 one was accepted
    const A = placeholder("A", [1, 4], "int8")
    const B = placeholder("B", [16, 4], "int8")
    const k = reduceAxis(4, "k")
    const C = compute("C", [1, 16], (i, j) => sum(mul(cast("int32", at(A, i, k.var)), cast("int32", at(B, j, k.var))), [k]), "int32")
    expect(() => S.tensorize(S.createSchedule([C]), "C", "C.j", vnniDot16x4)).toThrow(/A\[C\.i, k\] is int8, the intrinsic's a\[k\] is uint8/)
  })
})

describe("tensorize: a stage computed at an outer loop", () => {
  /** C = A·B into C.local, computed at C's column tile (rows × cols of C), tiled there to the kernel. */
  const accumulatorTile = (M: number, rows: number) => {
    const { C, inputs } = matmul(M, 4, 3)
    const w = S.cacheWrite(S.createSchedule([C]), "C", "local")
    const t = S.tile(w.schedule, "C", "C.i", "C.j", rows, 2)
    let s = S.computeAt(t.schedule, w.stage, "C", t.yo)
    const si = S.split(s, w.stage, "C.local.i", { factor: 1 })
    const sj = S.split(si.schedule, w.stage, "C.local.j", { factor: 2 })
    s = S.reorder(sj.schedule, w.stage, [si.outer, sj.outer, "k", si.inner, sj.inner])
    const sk = S.split(s, w.stage, "k", { factor: 3 })
    s = S.tensorize(S.reorder(sk.schedule, w.stage, [si.outer, sj.outer, sk.outer, si.inner, sj.inner, sk.inner]), w.stage, si.inner, gemmMicroKernel(1, 2, 3))
    return { C, inputs, s }
  }

  it("reads its inputs at the tile's rows and columns, not at the first tile's", () => {
    // the kernel's input bases left out the region's start: every tile read A and B as the first
    const { C, inputs, s } = accumulatorTile(4, 2)
    const outs = evaluatePrimFunc(lowerSync(s), inputs)
    assertAllClose([outs.get("C")!], evaluateTE([C], inputs))
  })

  it("is a LowerError where the region runs past the tensor (the attach loop's split does not divide)", () => {
    // rows tiled by 2 over 3: the last region is rows 2–3, and the kernel (no guards) read row 3 of A
    const { s } = accumulatorTile(3, 2)
    expect(() => lowerSync(s)).toThrow(/runs past the tensor/)
  })
})
