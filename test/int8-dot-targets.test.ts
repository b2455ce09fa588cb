// The 8-bit dot chosen by the c target's record (src/backend/cpu.ts's int8DotOf, through
// ScheduleTarget.int8Dot into the int8 template's defaults): VNNI's vpdpbusd where the record has
// VNNI, else AVX2's vpmaddubsw / vpmaddwd (exact: the activation byte split 7 + 1 bits against
// vpmaddubsw's s16 saturation) where its ISA has AVX2, else the loops the C compiler takes. This
// machine runs all three, so each is built (one gcc run for all) and run: the integer products
// (ConvInteger u8 × s8, MatMulInteger s8 × u8: the dot is the same in the QLinear ops) equal their TE exactly
// under every dot — on random values and on the extremes where a plain vpmaddubsw saturates
// (u8 255 · s8 127, twice a pair).
import { describe, expect, it } from "vitest"
import { fromArray, type Tensor } from "../src/ast/graph/tensor.js"
import { makeTarget, type CpuAttrs } from "../src/ast/target.js"
import { avx2Dot16x4, vnniDot16x4 } from "../src/ast/te/intrinsic.js"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { scheduleTarget } from "../src/backend/cpu.js"
import { emitC } from "../src/emit/c/emit.js"
import { baseSchedule } from "../src/lowering/lower-group.js"
import { lowerSync } from "../src/lowering/lower.js"
import { int8DotTemplate } from "../src/lowering/templates/int8-dot.js"
import { cpuTirPipeline } from "../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../src/lowering/tir/tir-pass.js"
import { build, type Spec } from "../laws/lowering/int8-cases.js"
import { buildFuncs, callKernel, HAVE_GCC, NO_GCC } from "../laws/support-c.js"

const c = (attrs: Partial<CpuAttrs>) => makeTarget("c", { fmaUnits: 2, fmaLatency: 4, ...attrs })

describe("the int8 dot chosen by the target record", () => {
  it("VNNI where the record has it, AVX2 where its ISA has AVX2 without VNNI, SIMD128 on wasm, loops elsewhere", () => {
    const spec: Spec = { op: "ConvInteger", x: "uint8", w: "int8", dims: [8, 32, 5, 5, 3, 1, 1, 1], seed: 1 }
    const { outputs } = build(spec)
    const base = baseSchedule(outputs)
    const knobs = int8DotTemplate.space(outputs, base)
    const cases: [ReturnType<typeof scheduleTarget>, string][] = [
      [scheduleTarget(c({ isa: "avx512", vectorLanes: 16, vnni: true })), "vnni"],
      // (an AVX-512 record without VNNI, Skylake-X, and an AVX2 one)
      [scheduleTarget(c({ isa: "avx512", vectorLanes: 16, vnni: false })), "avx2"],
      [scheduleTarget(c({ isa: "avx2", vectorLanes: 8, vnni: false })), "avx2"],
      [scheduleTarget(c({ isa: "sse", vectorLanes: 4, vnni: false })), "loops"],
      [scheduleTarget(makeTarget("js", { isa: "avx512", vectorLanes: 16, vnni: true })), "loops"],
      [scheduleTarget(makeTarget("wasm", { isa: "simd128", vectorLanes: 4 })), "simd128"],
    ]
    for (const [st, dot] of cases) expect(int8DotTemplate.defaults(knobs, st).dot).toBe(dot)
  })

  it.skipIf(!HAVE_GCC)(`VNNI, AVX2 and loops compute the products' TE exactly, on random bytes and on the extremes${NO_GCC}`, async () => {
    const specs: Spec[] = [
      { op: "ConvInteger", x: "uint8", w: "int8", dims: [9, 20, 5, 6, 3, 1, 1, 1], seed: 11 },
      { op: "MatMulInteger", x: "int8", w: "uint8", dims: [13, 33, 0, 0, 0, 0, 0, 5], seed: 13 },
    ]
    const dots = ["vnni", "avx2", "loops"] as const
    const st = scheduleTarget(c({ isa: "avx512", vectorLanes: 16, vnni: true }))
    const keep = new Set([vnniDot16x4.name, avx2Dot16x4.name])
    const made = specs.flatMap((sp, i) => {
      const { outputs, feeds } = build(sp)
      // (the extremes: every activation u8 255, every weight s8 127 — int8 127 / uint8 255 past its zero point 128)
      const top = (t: Tensor) => fromArray(t.dtype, t.shape, new Array(t.data.length).fill(t.dtype === "int8" ? 127 : 255))
      const extreme = new Map([...feeds].map(([k, t]) => [k, k === "x" || k === "w" ? top(t) : t] as const))
      const base = baseSchedule(outputs)
      const knobs = int8DotTemplate.space(outputs, base)
      return dots.map((dot) => {
        const f = runTirSync(cpuTirPipeline({ keepIntrinsics: keep }), lowerSync(int8DotTemplate.apply(outputs, base, { ...int8DotTemplate.defaults(knobs, st), dot })))
        return { name: `${sp.op}_${dot}_${i}`, func: { ...f, name: `k_${sp.op}_${dot}_${i}` }, outputs, feeds: [feeds, extreme] }
      })
    })
    const source = emitC(made.map((m) => m.func)).units.map((u) => u.source).join("\n")
    for (const fn of ["tessera_vnni_dot_16x4(", "tessera_avx2_dot_16x4(", "_mm256_maddubs_epi16"]) expect(source).toContain(fn)
    const mod = await buildFuncs(made.map((m) => m.func))
    for (const m of made)
      for (const feeds of m.feeds) {
        const got = callKernel(mod.kernels.get(m.func.name)!, m.func, feeds).get(m.outputs[0].name)!
        expect(Array.from(got.data as ArrayLike<number>), m.name).toEqual(Array.from(evaluateTE(m.outputs, feeds)[0].data as ArrayLike<number>))
      }
  }, 300_000)
})
