// The pattern rules (recognize-patterns.ts) on graphs that plant LayerNorm, Gelu and HardSwish as
// exporters spell them, in every association and operand order, next to near misses
// (arbitrary-patterns.ts): the rules recognise every planted pattern and nothing else — the graph
// is then exactly the expected ops, one node per pattern, the affine tail of a LayerNormalization
// absorbed into it, each near miss node for node — and it evaluates as before.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbPatternCase } from "../../src/ast/graph/arbitrary-patterns.js"
import { eliminateDeadCodeSync } from "../../src/rewrite/eliminate-dead-code.js"
import { recognizePatternRules } from "../../src/rewrite/recognize-patterns.js"
import { rewriteToFixedPoint } from "../../src/rewrite/rules.js"
import { assertAllClose, evalGraph, lawParams } from "../support.js"

describe("recognize-patterns", () => {
  it("recognises every planted LayerNorm / Gelu / HardSwish, absorbs the affine tail, leaves every near miss, keeps the meaning", () => {
    let planted = 0
    let nearMisses = 0
    fc.assert(
      fc.property(arbPatternCase(), ({ graph, inputs, expected, fired, ...counts }) => {
        const report = rewriteToFixedPoint(graph, recognizePatternRules)
        expect(report.stop).toBe("Saturated")
        // each rule fires once per pattern it recognises (an absorbed Mul / Add once each)
        expect(new Map([...report.fired].sort())).toEqual(new Map([...fired].sort()))
        const after = eliminateDeadCodeSync(report.graph)
        expect(after.nodes.map((n) => n.op).sort()).toEqual(expected)
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs))
        planted += counts.planted
        nearMisses += counts.nearMisses
      }),
      lawParams(300),
    )
    // both sides are exercised
    expect(planted).toBeGreaterThan(300)
    expect(nearMisses).toBeGreaterThan(200)
  })
})
