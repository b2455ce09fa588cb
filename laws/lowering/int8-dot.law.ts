// The int8 template (src/lowering/templates/int8-dot.ts) over the VNNI-layout products
// (src/lowering/op-library-int8-blocked.ts): on random shapes, zero points, signedness, strides and
// padding, over weights packed by a stage of the kernel or at compile time (QLinearConvPacked), every
// configuration of its space (a conv's epilogue in the product's lane order where its channels are
// whole blocks, QLinearConvPacked's requantized int32 values then computed at its pixel, a vector of
// channels) — the VNNI dot, its AVX2 form or SIMD128's 4-lane dot kept as the intrinsic (the TIR evaluator
// runs it by its TE declaration) or left as loops — evaluates equal to the TE reference, exactly;
// and the blocked compute itself equals the plain int32 one (QUANT_INT_PLAIN): it fails with a
// strided 1×1 kernel's copy read unstrided (tried).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { avx2Dot16x4, simd128Dot4x4, vnniDot16x4 } from "../../src/ast/te/intrinsic.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { printPrimFunc } from "../../src/ast/tir/tir.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { baseSchedule } from "../../src/lowering/lower-group.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { templateFor } from "../../src/lowering/templates/template-for.js"
import type { Config } from "../../src/lowering/templates/template.js"
import { cpuTirPipeline } from "../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../support.js"
import { arbSpec, build } from "./int8-cases.js"
import { QUANT_INT_PLAIN } from "../../src/lowering/op-library-quant-int.js"

describe("int8 template (VNNI layout)", () => {
  it("the blocked conv compute (QLinearConv, QLinearConvPacked, ConvInteger; strided 1×1 kernels copying only the pixels they read) equals the plain int32 compute, exactly", () => {
    let strided1x1 = 0
    fc.assert(
      fc.property(arbSpec.filter((sp) => sp.op.includes("Conv")), (sp) => {
        const { outputs, feeds } = build(sp)
        // (the plain compute on the unpacked weights: QLinearConvPacked's meaning is QLinearConv's)
        const plain = build({ ...sp, op: sp.op === "QLinearConvPacked" ? "QLinearConv" : sp.op }, QUANT_INT_PLAIN)
        const want = evaluateTE(plain.outputs, plain.feeds)[0]
        expect(Array.from(evaluateTE(outputs, feeds)[0].data as ArrayLike<number>)).toEqual(Array.from(want.data as ArrayLike<number>))
        if (sp.dims[4] === 1 && sp.dims[5] > 1) strided1x1++
      }),
      lawParams(40),
    )
    expect(strided1x1).toBeGreaterThan(0)
  })

  it("every configuration, the VNNI, AVX2 or SIMD128 dot kept or left as loops, evaluates equal to the TE (exactly)", () => {
    let laneOrder = 0
    let narrowed = 0
    fc.assert(
      fc.property(arbSpec, fc.array(fc.nat(), { minLength: 4, maxLength: 4 }), (sp, picks) => {
        const { outputs, feeds } = build(sp)
        const base = baseSchedule(outputs)
        const t = templateFor(base)
        expect(t.name).toBe("int8_dot")
        const knobs = t.space(outputs, base)
        const config: Config = Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]]))
        const keep = new Set([vnniDot16x4.name, avx2Dot16x4.name, simd128Dot4x4.name])
        const applied = t.apply(outputs, base, config)
        const f = runTirSync(cpuTirPipeline({ keepIntrinsics: keep }), lowerSync(applied))
        expect(printPrimFunc(f).includes(vnniDot16x4.name)).toBe(config.dot === "vnni")
        expect(printPrimFunc(f).includes(simd128Dot4x4.name)).toBe(config.dot === "simd128")
        expect(printPrimFunc(f).includes(avx2Dot16x4.name)).toBe(config.dot === "avx2")
        const got = evaluatePrimFunc(f, feeds).get(outputs[0].name)!
        const want = evaluateTE(outputs, feeds)[0]
        expect(Array.from(got.data as ArrayLike<number>)).toEqual(Array.from(want.data as ArrayLike<number>))
        if (sp.op.includes("Conv") && sp.dims[1] % 16 === 0) laneOrder++
        // (QLinearConvPacked's requantized int32 values, the stage its output narrows: computed at
        // the epilogue's pixel, a vector of channels, where the epilogue is in lane order — never inline)
        const out = applied.stages.get(outputs[0].name)!
        const wide = out.op.inputs.find((x) => x.kind === "compute" && x.dtype === "int32" && x.shape.join() === out.op.shape.join())
        if (sp.op === "QLinearConvPacked" && wide && out.op.shape[1] % 16 === 0) {
          expect(applied.stages.get(wide.name)!.attach.kind).not.toBe("inline")
          expect(applied.stages.get(wide.name)!.attach.kind).not.toBe("root")
          narrowed++
        }
      }),
      lawParams(40),
    )
    // (the cases reach conv epilogues in lane order)
    expect(laneOrder).toBeGreaterThan(3)
    expect(narrowed).toBeGreaterThan(0)
  })
})
