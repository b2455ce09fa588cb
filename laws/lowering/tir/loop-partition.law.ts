// lowering.LoopPartition: same meaning; its output verifies; and what it is for — where splits do
// not divide, the cut removes every guard (each part's guards are then proven or refuted), so an
// elementwise stage split any way is left with none; on any schedule, it never makes a function
// evaluate more guards (each part of a cut is simplified under narrower bounds, which only drops
// guards), though nested cuts copy a body once per part of each.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as S from "../../../src/ast/schedule/schedule.js"
import { buildCompute } from "../../../src/ast/te/arbitrary.js"
import { mapStmt, type PrimFunc, type Stmt } from "../../../src/ast/tir/tir.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { loopPartition } from "../../../src/lowering/tir/loop-partition.js"
import { simplifyTir } from "../../../src/lowering/tir/simplify-tir.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"
import { arbLoweredCase, assertMeaning, passLaws } from "./support.js"

passLaws(loopPartition)

const guards = (f: PrimFunc) => {
  let n = 0
  mapStmt(f.body, (x) => {
    if (x.kind === "if") n++
    return undefined
  })
  return n
}

/** How many guards a run evaluates, at most: each guard weighted by the iterations of the loops around it. */
const guardEvaluations = (s: Stmt, weight = 1): number => {
  switch (s.kind) {
    case "for":
      return guardEvaluations(s.body, weight * (s.extent.kind === "const" ? Math.max(0, s.extent.value) : 1))
    case "seq":
      return s.body.reduce((n, b) => n + guardEvaluations(b, weight), 0)
    case "if":
      return weight + guardEvaluations(s.then, weight) + (s.else ? guardEvaluations(s.else, weight) : 0)
    case "allocate":
    case "let":
      return guardEvaluations(s.body, weight)
    default:
      return 0
  }
}

/** The elementwise family's output stage (its producers inlined), each axis split by a factor that may not divide it. */
const arbSplitElementwise = () =>
  fc.tuple(fc.integer({ min: 0, max: 0x7fffffff }), fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 2, maxLength: 2 })).map(([seed, factors]) => {
    const cc = buildCompute("elementwise", seed)
    let s = S.createSchedule(cc.outputs)
    for (const name of s.order) if (!cc.outputs.some((o) => o.name === name)) s = S.computeInline(s, name)
    const out = cc.outputs[0].name
    for (const [k, axis] of [...s.stages.get(out)!.leaf].entries()) {
      const extent = s.stages.get(out)!.axes.get(axis)!.extent
      s = S.split(s, out, axis, { factor: Math.min(factors[k], extent) }).schedule
    }
    return { ...cc, func: lowerSync(s) }
  })

describe("lowering.LoopPartition", () => {
  it("an elementwise stage split by factors that do not divide is left without a guard", () => {
    fc.assert(
      fc.property(arbSplitElementwise(), (c) => {
        const f = runTirSync(loopPartition, runTirSync(simplifyTir, c.func))
        expect(guards(f)).toBe(0)
        assertMeaning(f, c)
      }),
      lawParams(40),
    )
  })

  it("never makes a function evaluate more guards", () => {
    let fewer = 0
    fc.assert(
      fc.property(arbLoweredCase(["elementwise", "matmul"]), (c) => {
        const f = runTirSync(simplifyTir, c.func)
        const p = runTirSync(loopPartition, f)
        expect(guardEvaluations(p.body)).toBeLessThanOrEqual(guardEvaluations(f.body))
        if (guardEvaluations(p.body) < guardEvaluations(f.body)) fewer++
      }),
      lawParams(20),
    )
    expect(fewer).toBeGreaterThan(0)
  })
})
