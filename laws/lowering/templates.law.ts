// Schedule templates: every configuration of every template's space is a legal schedule that
// computes what the TE says (the auto-tuner may pick any of them).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbComputeCase, COMPUTE_FAMILIES } from "../../src/ast/te/arbitrary.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { baseSchedule } from "../../src/lowering/lower-group.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { templateFor, type Config } from "../../src/lowering/templates.js"
import { defaultTirPasses, runTirPasses } from "../../src/lowering/tir-passes.js"
import { assertAllClose, lawParams } from "../support.js"

describe("schedule templates", () => {
  it("every configuration of a template's space evaluates equal to the TE", () => {
    fc.assert(
      fc.property(arbComputeCase(COMPUTE_FAMILIES), fc.array(fc.nat(), { minLength: 12, maxLength: 12 }), (cc, picks) => {
        const base = baseSchedule(cc.outputs)
        const t = templateFor(base)
        const knobs = t.space(cc.outputs, base)
        expect(knobs.length).toBeLessThanOrEqual(picks.length) // a pick for every knob (none left at its default)
        const config: Config = Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]]))
        const s = t.apply(cc.outputs, base, config)
        const f = runTirPasses(lowerSync(s), defaultTirPasses())
        const outs = evaluatePrimFunc(f, cc.inputs)
        assertAllClose(cc.outputs.map((o) => outs.get(o.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
      }),
      lawParams(80),
    )
  })

  it("knobs are data: the space serializes and defaults lie in it", () => {
    fc.assert(
      fc.property(arbComputeCase(COMPUTE_FAMILIES), (cc) => {
        const base = baseSchedule(cc.outputs)
        const t = templateFor(base)
        const knobs = t.space(cc.outputs, base)
        expect(JSON.parse(JSON.stringify(knobs))).toEqual(knobs)
        const d = t.defaults(knobs, { vectorLanes: 16, cores: 2 })
        for (const k of knobs) expect(k.candidates).toContain(d[k.name])
      }),
      lawParams(40),
    )
  })
})
