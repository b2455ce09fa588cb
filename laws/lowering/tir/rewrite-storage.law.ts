// lowering.RewriteStorage (on flat storage, as it runs): same meaning; its output verifies — on
// random schedules and on chains of stages all computed at root, whose intermediates' lifetimes
// do not all overlap (so some share a buffer).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { prng } from "../../../src/ast/graph/arbitrary.js"
import { fromArray } from "../../../src/ast/graph/tensor.js"
import * as S from "../../../src/ast/schedule/schedule.js"
import { arbComputeCase } from "../../../src/ast/te/arbitrary.js"
import { add, f32, max, mul } from "../../../src/ast/te/expr.js"
import { at, compute, placeholder, type ComputeTensor } from "../../../src/ast/te/tensor.js"
import type { PrimFunc, Stmt } from "../../../src/ast/tir/tir.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { flattenStorage } from "../../../src/lowering/tir/flatten-storage.js"
import { rewriteStorage } from "../../../src/lowering/tir/rewrite-storage.js"
import { lawParams } from "../../support.js"
import { applyPass, passLaws, type LoweredCase } from "./support.js"

/** X → t1 → … → tL (elementwise, each reading the one before and sometimes X), every stage at root, some split. */
const arbRootChain = (): fc.Arbitrary<LoweredCase> =>
  fc.integer({ min: 0, max: 0x7fffffff }).map((seed) => {
    const rng = prng(seed)
    const [m, n] = [rng.int(1, 4), rng.int(1, 9)]
    const X = placeholder("X", [m, n])
    let prev: ComputeTensor | undefined
    for (let k = 0; k < rng.int(3, 5); k++) {
      const src = prev
      const f = rng.pick([(a: ReturnType<typeof at>) => add(a, f32(1)), (a: ReturnType<typeof at>) => mul(a, f32(0.5)), (a: ReturnType<typeof at>) => max(a, f32(0))])
      const withX = rng.next() < 0.3
      prev = compute(`t${k}`, [m, n], (i, j) => {
        const a = src ? at(src, i, j) : at(X, i, j)
        return withX ? add(f(a), at(X, i, j)) : f(a)
      })
    }
    let s = S.createSchedule([prev!])
    for (const name of s.order)
      if (rng.next() < 0.4) {
        const leaf = s.stages.get(name)!.leaf
        s = S.split(s, name, leaf[leaf.length - 1], { factor: rng.int(1, n) }).schedule
      }
    return { func: lowerSync(s), outputs: [prev!], inputs: new Map([["X", fromArray("float32", [m, n], Array.from({ length: m * n }, () => rng.float(-1, 1)))]]) }
  })

/** The softmax family with every stage at root (rowmax, exp, rowsum, softmax). */
const arbRootSoftmax = (): fc.Arbitrary<LoweredCase> => arbComputeCase(["softmax"]).map((cc) => ({ ...cc, func: lowerSync(S.createSchedule(cc.outputs)) }))

const allocations = (f: PrimFunc): number => {
  const count = (s: Stmt): number => (s.kind === "allocate" ? 1 + count(s.body) : 0)
  return count(f.body)
}

const rooted = fc.oneof(arbRootChain(), arbRootSoftmax())

passLaws(rewriteStorage, { after: [flattenStorage()] })
passLaws(rewriteStorage, { after: [flattenStorage()], cases: rooted, variant: "stages at root" })

describe("lowering.RewriteStorage", () => {
  it("never adds an allocation, and shares one where lifetimes do not overlap", () => {
    let shared = 0
    fc.assert(
      fc.property(rooted, (c) => {
        const { input, output } = applyPass(rewriteStorage, c, [flattenStorage()])
        expect(allocations(output)).toBeLessThanOrEqual(allocations(input))
        if (allocations(output) < allocations(input)) shared++
      }),
      lawParams(30),
    )
    expect(shared).toBeGreaterThan(0)
  })
})
