// The generated search space (src/lowering/templates/sketch.ts): every config of it, on every
// group with a reduction anchor, is a legal schedule that computes what the TE says; its defaults
// are the template's (the untuned schedule is unchanged), and configs that give one schedule are
// one config.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbComputeCase, COMPUTE_FAMILIES } from "../../src/ast/te/arbitrary.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import * as S from "../../src/ast/schedule/schedule.js"
import { baseSchedule } from "../../src/lowering/lower-group.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { anchorStage } from "../../src/lowering/templates/common.js"
import { canonicalConfig, sketchSpace } from "../../src/lowering/templates/sketch.js"
import type { Config } from "../../src/lowering/templates/template.js"
import { searchTemplateFor, templateFor } from "../../src/lowering/templates/template-for.js"
import { cpuTirPipeline } from "../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../src/lowering/tir/tir-pass.js"
import { assertAllClose, lawParams } from "../support.js"

const REDUCING = COMPUTE_FAMILIES.filter((f) => f !== "elementwise" && f !== "softmax")

describe("search.GeneratedSpace", () => {
  it("every config of the generated space evaluates equal to the TE", () => {
    fc.assert(
      fc.property(arbComputeCase(REDUCING), fc.array(fc.nat(), { minLength: 24, maxLength: 24 }), (cc, picks) => {
        const base = baseSchedule(cc.outputs)
        if (!anchorStage(base)) return
        const t = searchTemplateFor(base)
        const knobs = t.space(cc.outputs, base)
        const generated = knobs.filter((k) => k.when?.value === "generated")
        expect(generated.length).toBeGreaterThan(0)
        expect(generated.length).toBeLessThanOrEqual(picks.length)
        const config: Config = canonicalConfig(knobs, {
          ...t.defaults(knobs, { vectorLanes: 8, cores: 2 }),
          sketch: "generated",
          ...Object.fromEntries(generated.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]])),
        })
        const f = runTirSync(cpuTirPipeline(), lowerSync(t.apply(cc.outputs, base, config)))
        const outs = evaluatePrimFunc(f, cc.inputs)
        assertAllClose(cc.outputs.map((o) => outs.get(o.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
      }),
      lawParams(120),
    )
  })

  it("its defaults are the template's defaults and give the template's schedule", () => {
    fc.assert(
      fc.property(arbComputeCase(COMPUTE_FAMILIES), fc.constantFrom(1, 4, 8, 16), (cc, lanes) => {
        const base = baseSchedule(cc.outputs)
        const own = templateFor(base)
        const t = searchTemplateFor(base)
        expect(t.name).toBe(own.name)
        const target = { vectorLanes: lanes, cores: 2 }
        const ownKnobs = own.space(cc.outputs, base)
        const d = t.defaults(t.space(cc.outputs, base), target)
        const od = own.defaults(ownKnobs, target)
        for (const k of ownKnobs) expect(d[k.name]).toEqual(od[k.name])
        expect(S.printSchedule(t.apply(cc.outputs, base, d))).toBe(S.printSchedule(own.apply(cc.outputs, base, od)))
      }),
      lawParams(60),
    )
  })

  it("knobs are data, each generated tile pair divides its axis, and canonical configs are fixed points", () => {
    fc.assert(
      fc.property(arbComputeCase(REDUCING), fc.array(fc.nat(), { minLength: 40, maxLength: 40 }), (cc, picks) => {
        const base = baseSchedule(cc.outputs)
        const knobs = searchTemplateFor(base).space(cc.outputs, base)
        expect(JSON.parse(JSON.stringify(knobs))).toEqual(knobs)
        for (const k of sketchSpace(base))
          if (k.kind === "choice" && k.levels === 2)
            for (const v of k.candidates) {
              const [a, b] = String(v).split(".").map(Number)
              expect(k.extent! % (a * b)).toBe(0)
            }
        const c = Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i % picks.length] % k.candidates.length]]))
        const once = canonicalConfig(knobs, c)
        expect(canonicalConfig(knobs, once)).toEqual(once)
      }),
      lawParams(40),
    )
  })
})
