// Counterexamples that the random schedules of the lowering laws found once randomSchedule bound
// vthreads, attached cache stages at them, split attached stages and cached reads into shared
// memory: each bug as a named regression.
import { describe, expect, it } from "vitest"
import * as S from "../src/ast/schedule/schedule.js"
import { buildCompute } from "../src/ast/te/arbitrary.js"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { evaluatePrimFunc } from "../src/ast/tir/evaluate.js"
import { printPrimFunc, type PrimFunc } from "../src/ast/tir/tir.js"
import { lowerSync } from "../src/lowering/lower.js"
import { assertAllClose } from "../laws/support.js"

type Case = ReturnType<typeof buildCompute>

const meaning = (f: PrimFunc, cc: Case) => {
  const outs = evaluatePrimFunc(f, cc.inputs)
  assertAllClose(
    cc.outputs.map((o) => outs.get(o.name)!),
    evaluateTE(cc.outputs, cc.inputs),
  )
}

describe("lowering: an attached stage's buffer", () => {
  it("does not take the name of a cacheWrite stage (D attached in E while D.local, its cache, is at root)", () => {
    // elementwise: C → D → E; cacheWrite(D) makes the stage 'D.local', and D computed at E was
    // allocated as 'D.local' too: D's copy read its own one-element buffer out of bounds
    const cc = buildCompute("elementwise", 5)
    const w = S.cacheWrite(S.createSchedule(cc.outputs), "D", "local")
    const s = S.computeAt(w.schedule, "D", "E", "E.j")
    const f = lowerSync(s)
    expect(printPrimFunc(f)).toMatch(/allocate D\.local1: float32\[1, 1\] @local/)
    meaning(f, cc)
  })
})

