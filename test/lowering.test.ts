// Before / Expected tests of lowering and the TIR passes on small programs.
import { describe, expect, it } from "vitest"
import { add, f32 } from "../src/ast/te/expr.js"
import { at, compute, placeholder } from "../src/ast/te/tensor.js"
import * as S from "../src/ast/schedule/schedule.js"
import { printPrimFunc } from "../src/ast/tir/tir.js"
import { lowerSync } from "../src/lowering/lower.js"
import { defaultTirPasses, loopPartition, runTirPasses, simplifyPass } from "../src/lowering/tir-passes.js"

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

  it("loop partition peels the guarded tail: neither the main loop nor the tail keeps a guard", () => {
    const s = S.split(S.createSchedule([B]), "B", "B.i", { factor: 4 }).schedule
    const f = runTirPasses(lowerSync(s), [simplifyPass, loopPartition])
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
    expect(printPrimFunc(runTirPasses(lowerSync(s), defaultTirPasses()))).toBe(
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
