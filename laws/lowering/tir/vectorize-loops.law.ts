// lowering.VectorizeLoops: same meaning; its output verifies (every vectorized loop left is of
// constant extent within the lanes, over straight-line code) — on lowered random schedules, and on
// them with loops retagged vectorized (any extent, any body) and bounds made non-constant; and
// what it does, loop by loop: only loop kinds change, a vectorized loop stays vectorized exactly
// when a vector unit can run it, the others become serial, and every other loop keeps its kind.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { isStraightLine } from "../../../src/ast/tir/analysis.js"
import { vectorizeLoops } from "../../../src/lowering/tir/vectorize-loops.js"
import { lawParams } from "../../support.js"
import { applyPass, arbLoweredCase, arbVariedLoops, loopsOf, passLaws } from "./support.js"

const LANES = 8
const varied = arbVariedLoops({ kinds: ["vectorized", "serial"], relax: "plain" })

passLaws(vectorizeLoops(LANES))
passLaws(vectorizeLoops(LANES), { cases: varied, runs: 30, unmet: true, variant: "loops retagged vectorized, some of non-constant bounds" })

describe("lowering.VectorizeLoops", () => {
  it("keeps a vectorized loop exactly when its extent is a constant within the lanes and its body straight-line; the rest become serial; no other loop changes", () => {
    const seen = { kept: 0, serial: 0 }
    fc.assert(
      fc.property(fc.oneof(arbLoweredCase(), varied), fc.nat(), fc.integer({ min: -1, max: 0 }), (c, pick, off) => {
        // the lanes at (or one below) the extent of one of its vectorized loops
        const extents = loopsOf(c.func.body).flatMap((l) => (l.forKind === "vectorized" && l.extent.kind === "const" ? [l.extent.value] : []))
        const lanes = extents.length ? Math.max(1, extents[pick % extents.length] + off) : LANES
        const { input, output } = applyPass(vectorizeLoops(lanes), c)
        const before = loopsOf(input.body)
        const after = loopsOf(output.body)
        expect(after.length).toBe(before.length)
        before.forEach((l, k) => {
          const runs = l.extent.kind === "const" && l.extent.value <= lanes && isStraightLine(l.body)
          const want = l.forKind !== "vectorized" ? l.forKind : runs ? "vectorized" : "serial"
          expect({ ...after[k], body: undefined, forKind: undefined }).toEqual({ ...l, body: undefined, forKind: undefined })
          expect(after[k].forKind).toBe(want)
          if (l.forKind === "vectorized") seen[runs ? "kept" : "serial"]++
        })
      }),
      lawParams(60),
    )
    expect(seen.kept).toBeGreaterThan(0)
    expect(seen.serial).toBeGreaterThan(0)
  })
})
