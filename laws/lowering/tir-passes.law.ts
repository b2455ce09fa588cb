// One law per TIR pass: on lowered random schedules, the pass preserves meaning.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbScheduledCase } from "../../src/ast/te/arbitrary.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { mapStmt, type PrimFunc } from "../../src/ast/tir/tir.js"
import { lowerSync } from "../../src/lowering/lower.js"
import {
  defaultTirPasses,
  flattenStorage,
  injectVirtualThread,
  loopPartition,
  promoteAccumulators,
  rewriteStorage,
  runTirPasses,
  simplifyPass,
  unrollLoops,
  vectorizeLoops,
  type TirPass,
} from "../../src/lowering/tir-passes.js"
import { assertAllClose, lawParams } from "../support.js"

const PASSES: readonly (readonly [string, readonly TirPass[]])[] = [
  ["simplify", [simplifyPass]],
  ["loop partition", [loopPartition]],
  ["promote accumulators", [simplifyPass, promoteAccumulators]],
  ["vectorize", [vectorizeLoops(8)]],
  ["unroll", [unrollLoops(8)]],
  ["vthread (inject virtual thread)", [injectVirtualThread]],
  ["storage flatten", [flattenStorage()]],
  ["storage rewrite", [flattenStorage(), rewriteStorage]],
  ["default TIR pipeline", defaultTirPasses()],
]

const guards = (f: PrimFunc) => {
  let n = 0
  mapStmt(f.body, (x) => {
    if (x.kind === "if") n++
    return undefined
  })
  return n
}

describe("TIR passes preserve meaning", () => {
  for (const [name, passes] of PASSES)
    it(`${name}: evalTIR(pass(f)) == evalTE(compute)`, () => {
      fc.assert(
        fc.property(arbScheduledCase(), (sc) => {
          const f = runTirPasses(lowerSync(sc.schedule), passes)
          const outs = evaluatePrimFunc(f, sc.inputs)
          const want = evaluateTE(sc.outputs, sc.inputs)
          assertAllClose(
            sc.outputs.map((o) => outs.get(o.name)!),
            want,
            1e-4,
            1e-5,
          )
        }),
        lawParams(40),
      )
    })

  it("loop partition removes the guard of a non-divisible split from the main loop", () => {
    fc.assert(
      fc.property(arbScheduledCase(["elementwise", "matmul"]), (sc) => {
        const f = lowerSync(sc.schedule)
        const p = loopPartition.run(simplifyPass.run(f))
        // never more guarded stores than before on the hot path: the partitioned function has no more guards per loop nest
        expect(guards(p)).toBeLessThanOrEqual(guards(f) * 2)
      }),
      lawParams(20),
    )
  })
})
