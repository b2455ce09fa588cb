// lowering.PromoteAccumulators (after Simplify, as it runs): same meaning; its output verifies —
// on random schedules and on the nest it is for: a matmul's local accumulator (cacheWrite, computed
// at the output's column tile) split into register tiles under the reduce loops.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { fromArray } from "../../../src/ast/graph/tensor.js"
import * as S from "../../../src/ast/schedule/schedule.js"
import { mul } from "../../../src/ast/te/expr.js"
import { at, compute, placeholder, reduceAxis, sum } from "../../../src/ast/te/tensor.js"
import { printPrimFunc } from "../../../src/ast/tir/tir.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { promoteAccumulators } from "../../../src/lowering/tir/promote-accumulators.js"
import { simplifyTir } from "../../../src/lowering/tir/simplify-tir.js"
import { lawParams } from "../../support.js"
import { applyPass, arbLoweredCase, passLaws, type LoweredCase } from "./support.js"

/** C = A·B into a local accumulator per (mt × nt) output tile, its reduction split by kt outside (rt × ct) register tiles. */
const arbAccumulatorCase = (): fc.Arbitrary<LoweredCase & { readonly tile: readonly number[]; readonly accumulator: number }> =>
  fc
    .tuple(fc.constantFrom(1, 2, 4), fc.constantFrom(2, 4, 8), fc.constantFrom(1, 2), fc.constantFrom(1, 2, 4), fc.constantFrom(1, 2), fc.constantFrom(1, 2, 3), fc.boolean(), fc.integer({ min: 0, max: 1000 }))
    .map(([mt, nt, rt, ct, reps, kt, unroll, seed]) => {
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
    })

passLaws(promoteAccumulators, { after: [simplifyTir] })
passLaws(promoteAccumulators, { after: [simplifyTir], cases: arbAccumulatorCase(), variant: "register tiles of a local accumulator" })

describe("lowering.PromoteAccumulators", () => {
  it("the nest it is for is promoted exactly when its register tile has a loop and is smaller than the accumulator", () => {
    let promoted = 0
    fc.assert(
      fc.property(arbAccumulatorCase(), (c) => {
        const tiled = printPrimFunc(applyPass(promoteAccumulators, c, [simplifyTir]).output).includes("allocate C.local.local.tile0")
        const [rows, cols] = c.tile
        expect(tiled).toBe((rows > 1 || cols > 1) && rows * cols < c.accumulator)
        if (tiled) promoted++
      }),
      lawParams(30),
    )
    expect(promoted).toBeGreaterThan(0)
  })

  it("random schedules: a function with no local buffer is returned as it is", () => {
    fc.assert(
      fc.property(arbLoweredCase(["elementwise", "softmax"]), (c) => {
        const { input, output } = applyPass(promoteAccumulators, c, [simplifyTir])
        if (!printPrimFunc(input).includes("@local")) expect(output).toBe(input)
      }),
      lawParams(20),
    )
  })
})
