// Counterexamples the tensorize laws (laws/lowering/tensorize.law.ts) found: each bug as a named
// regression.
import { describe, expect, it } from "vitest"
import { fromArray } from "../src/ast/graph/tensor.js"
import * as S from "../src/ast/schedule/schedule.js"
import { cast, mul } from "../src/ast/te/expr.js"
import { gemmMicroKernel, vnniDot16x4 } from "../src/ast/te/intrinsic.js"
import { at, compute, placeholder, reduceAxis, sum } from "../src/ast/te/tensor.js"

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
