// Counterexamples that the random schedules of the lowering laws found once randomSchedule bound
// vthreads, attached cache stages at them, split attached stages and cached reads into shared
// memory: each bug as a named regression.
import { describe, expect, it } from "vitest"
import { allocate } from "../src/ast/graph/dtype.js"
import { fromArray, sizeOf, type Tensor } from "../src/ast/graph/tensor.js"
import * as S from "../src/ast/schedule/schedule.js"
import { buildCompute } from "../src/ast/te/arbitrary.js"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { add, c, f32, lt, mul, read, v, type Expr } from "../src/ast/te/expr.js"
import { evaluatePrimFunc } from "../src/ast/tir/evaluate.js"
import { printPrimFunc, seq, type PrimFunc } from "../src/ast/tir/tir.js"
import { loadWasmModuleSync } from "../src/device/wasm/load.js"
import { emitWasmModule } from "../src/emit/wasm/emit.js"
import { lowerSync } from "../src/lowering/lower.js"
import { injectVirtualThread } from "../src/lowering/tir/inject-virtual-thread.js"
import { runTirSync } from "../src/lowering/tir/tir-pass.js"
import { assertAllClose, assertLowersToTE } from "../laws/support.js"

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
    ["inlining the stage others are attached to", () => S.computeInline(S.computeAt(base(), "C", "D", "D.j"), "D"), /no loops of its own/],
    ["computeRoot of the inlined stage a producer was attached through", () => S.computeRoot(S.computeAt(S.computeInline(base(), "D"), "C", "E", "E.j"), "D"), /does not read it|would not hold its other consumers/],
    ["cacheWrite of the attach target", () => S.cacheWrite(dAtE(), "E", "local"), /does not read it|would not hold its other consumers/],
    ["cacheRead of the attached tensor by its target", () => S.cacheRead(dAtE(), "D", "local", ["E"]), /does not read it|would not hold its other consumers/],
  ]
  for (const [name, f, reason] of cases)
    it(name, () => {
      // each lowered before to a read of a buffer that no longer existed (or one out of bounds)
      expect(f).toThrow(S.ScheduleError)
      expect(f).toThrow(reason)
    })

  it("attaching a stage that others are attached to nests them (refused before nested attachments were lowered), and keeps the meaning", () => {
    const s = S.computeAt(S.computeAt(base(), "C", "D", "D.j"), "D", "E", "E.i")
    expect(s.stages.get("D")!.attach).toEqual({ kind: "at", stage: "E", axis: "E.i" })
    assertLowersToTE(s, cc.inputs, 1e-5)
  })

  it("rfactor of the attach target", () => {
    const mm = buildCompute("matmul", 5)
    const r = S.cacheRead(S.createSchedule(mm.outputs), "A", "local", ["C"])
    const s = S.computeAt(r.schedule, r.stage, "C", "C.j")
    expect(() => S.rfactor(s, "C", "k")).toThrow(/does not read it|would not hold its other consumers/)
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

describe("wasm: a register buffer", () => {
  it("accepts a constant index out of range in an unrolled copy its guard never runs", () => {
    // T (local, 4 floats) lives in one v128 local; the loop that fills its upper half runs 3
    // iterations guarded by i < 2 (a split wider than the region left to it): unrolled, the copy
    // i = 2 writes T[4] under a false guard, which failed emission ("out-of-range index")
    const [i, j] = [v("i"), v("j")]
    const x2 = (k: Expr) => mul(read("X", [k], "float32"), f32(2))
    const f: PrimFunc = {
      name: "k",
      params: [
        { name: "X", dtype: "float32", shape: [4], scope: "global" },
        { name: "Y", dtype: "float32", shape: [4], scope: "global" },
      ],
      body: {
        kind: "allocate",
        buffer: { name: "T", dtype: "float32", shape: [4], scope: "local" },
        body: seq([
          { kind: "for", var: i, min: c(0), extent: c(3), forKind: "serial", body: { kind: "if", cond: lt(i, c(2)), then: { kind: "store", buffer: "T", indices: [add(i, c(2))], value: x2(add(i, c(2))) } } },
          { kind: "for", var: j, min: c(0), extent: c(2), forKind: "serial", body: { kind: "store", buffer: "T", indices: [j], value: x2(j) } },
          { kind: "for", var: j, min: c(0), extent: c(4), forKind: "serial", body: { kind: "store", buffer: "Y", indices: [j], value: read("T", [j], "float32") } },
        ]),
      },
    }
    const inputs = new Map<string, Tensor>([["X", fromArray("float32", [4], [1.5, -3, 0.25, 4])]])
    const em = emitWasmModule([{ name: "k", func: f }])
    expect(em.module.funcs[0].code.some((op) => op.op === "f32x4.replace_lane")).toBe(true) // T is in a register
    const arrays = f.params.map((p) => inputs.get(p.name)?.data.slice() ?? allocate(p.dtype, sizeOf(p.shape)))
    loadWasmModuleSync(em.bytes, em.kernels).get("k")!(...arrays)
    expect([...arrays[1]]).toEqual([...evaluatePrimFunc(f, inputs).get("Y")!.data])
    expect([...arrays[1]]).toEqual([3, -6, 0.5, 8])
  })
})
