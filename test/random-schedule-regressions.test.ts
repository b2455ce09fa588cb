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
import { injectVirtualThread } from "../src/lowering/tir/inject-virtual-thread.js"
import { runTirSync } from "../src/lowering/tir/tir-pass.js"
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

describe("schedule: a step that would break an attachment is a ScheduleError", () => {
  const cc = buildCompute("elementwise", 5) // C → D → E
  const base = () => S.createSchedule(cc.outputs)
  const dAtE = () => S.computeAt(base(), "D", "E", "E.j")
  const cases: readonly (readonly [string, () => unknown, RegExp])[] = [
    ["split of the attach axis", () => S.split(dAtE(), "E", "E.j", { factor: 2 }), /not be a leaf axis/],
    ["fuse of the attach axis", () => S.fuse(dAtE(), "E", "E.i", "E.j"), /not be a leaf axis/],
    ["attaching a stage that others are attached to (nesting)", () => S.computeAt(S.computeAt(base(), "C", "D", "D.j"), "D", "E", "E.i"), /attachments do not nest/],
    ["inlining the stage others are attached to", () => S.computeInline(S.computeAt(base(), "C", "D", "D.j"), "D"), /no loops of its own/],
    ["computeRoot of the inlined stage a producer was attached through", () => S.computeRoot(S.computeAt(S.computeInline(base(), "D"), "C", "E", "E.j"), "D"), /not be its one consumer/],
    ["cacheWrite of the attach target", () => S.cacheWrite(dAtE(), "E", "local"), /not be its one consumer/],
    ["cacheRead of the attached tensor by its target", () => S.cacheRead(dAtE(), "D", "local", ["E"]), /not be its one consumer/],
  ]
  for (const [name, f, reason] of cases)
    it(name, () => {
      // each lowered before to a read of a buffer that no longer existed (or one out of bounds)
      expect(f).toThrow(S.ScheduleError)
      expect(f).toThrow(reason)
    })

  it("rfactor of the attach target", () => {
    const mm = buildCompute("matmul", 5)
    const r = S.cacheRead(S.createSchedule(mm.outputs), "A", "local", ["C"])
    const s = S.computeAt(r.schedule, r.stage, "C", "C.j")
    expect(() => S.rfactor(s, "C", "k")).toThrow(/not be its one consumer/)
  })
})

describe("lowering.InjectVirtualThread", () => {
  it("keeps the copies of a vthread apart when a shared-memory cache is filled inside it", () => {
    // A cached in shared memory at the vthread axis: the buffer is allocated once (per block) and
    // filled between barriers; interleaved, the second vthread's fill overwrote the first's tile
    // before the first read it
    const cc = buildCompute("matmul", 11)
    const r = S.cacheRead(S.createSchedule(cc.outputs), "A", "shared", ["C"])
    const sp = S.split(r.schedule, "C", "C.i", { nparts: 2 })
    const s = S.computeAt(S.bind(sp.schedule, "C", sp.outer, "vthread"), r.stage, "C", sp.outer)
    const f = lowerSync(s)
    expect(printPrimFunc(f)).toContain("barrier()")
    meaning(runTirSync(injectVirtualThread, f), cc)
  })
})

