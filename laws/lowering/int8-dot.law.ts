// The int8 template (src/lowering/templates/int8-dot.ts) over the VNNI-layout products
// (src/lowering/op-library-int8-blocked.ts): on random shapes, zero points, signedness, strides and
// padding, over weights packed by a stage of the kernel or at compile time (QLinearConvPacked), every
// configuration of its space (a conv's epilogue in the product's lane order where its channels are
// whole blocks, QLinearConvPacked's requantized int32 values then computed at its pixel, a vector of
// channels) — the VNNI dot, its AVX2 form or SIMD128's 4-lane dot kept as the intrinsic (the TIR evaluator
// runs it by its TE declaration) or left as loops — evaluates equal to the TE reference, exactly;
// and the blocked compute itself equals the plain int32 one (QUANT_INT_PLAIN): it fails with a
// strided 1×1 kernel's copy read unstrided (tried). A K×K conv's padded copy is cut on its
// columns (the `loop_partition_hint` the template marks it with): no store of it tests its column.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { avx2Dot16x4, simd128Dot4x4, vnniDot16x4 } from "../../src/ast/te/intrinsic.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { mapStmt, printPrimFunc, type PrimFunc, type Stmt } from "../../src/ast/tir/tir.js"
import { collect } from "../../src/ast/te/expr.js"
import { coef } from "../../src/ast/te/linear-index.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { baseSchedule } from "../../src/lowering/lower-group.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { templateFor } from "../../src/lowering/templates/template-for.js"
import type { Config } from "../../src/lowering/templates/template.js"
import { cpuTirPipeline } from "../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../support.js"
import { arbLanesSpec, arbSpec, build } from "./int8-cases.js"
import { QUANT_INT_PLAIN } from "../../src/lowering/op-library-quant-int.js"

/**
 * The stores of the padded copy `buffer` ([n, C/4, rows, columns, 4], flat): how many there are and
 * how many of them hold a comparison of their column — the loop variable whose coefficient in the
 * flat index is the 4 channels (its row's is 4 × columns, a channel's 1).
 */
const columnTests = (f: PrimFunc, buffer: string): { stores: number; tested: number } => {
  let stores = 0
  let tested = 0
  const loops: string[] = []
  const rec = (st: Stmt): void => {
    if (st.kind === "for") {
      loops.push(st.var.name)
      rec(st.body)
      loops.pop()
      return
    }
    if (st.kind === "store" && st.buffer === buffer) {
      stores++
      const cols = loops.filter((v) => coef(st.indices[st.indices.length - 1], v) === 4)
      const cmps = collect(st.value, (e) => e.kind === "bin" && ["lt", "le", "gt", "ge"].includes(e.op))
      if (cmps.some((e) => cols.some((v) => collect(e, (x) => x.kind === "var" && x.name === v).length > 0))) tested++
      return
    }
    mapStmt(st, (x) => {
      if (x === st) return undefined
      rec(x)
      return x
    })
  }
  rec(f.body)
  return { stores, tested }
}

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
    let padded = 0
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
        // (a K×K conv's padded copy: its column tests cut away by LoopPartition at the template's hint)
        const copy = [...applied.stages.values()].find((st) => st.op.dtype === "uint8" && st.op.shape.length === 5 && st.attach.kind === "root")
        if (copy && sp.op.includes("Conv") && sp.dims[4] > 1 && sp.dims[6] > 0) {
          const { stores, tested } = columnTests(f, copy.op.name)
          expect(stores).toBeGreaterThan(0)
          expect(tested).toBe(0)
          padded++
        }
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
    expect(padded).toBeGreaterThan(0)
  })

  it("the channels-in-lanes conv's requantized values in blocks of 16 (channel_lanes): every configuration equals the plain int32 compute, exactly; the blocks computed at the epilogue's block, its narrowing a tile of a channel's pixels with the block's 16 channels unrolled inside", () => {
    fc.assert(
      fc.property(arbLanesSpec, fc.array(fc.nat(), { minLength: 5, maxLength: 5 }), (sp, picks) => {
        const { outputs, feeds } = build(sp)
        const plain = build({ ...sp, op: "QLinearConv" }, QUANT_INT_PLAIN)
        const want = Array.from(evaluateTE(plain.outputs, plain.feeds)[0].data as ArrayLike<number>)
        const base = baseSchedule(outputs)
        const t = templateFor(base)
        const knobs = t.space(outputs, base)
        const [, , oh, ow] = outputs[0].shape
        expect(knobs.find((k) => k.name === "epilogue_px")?.extent).toBe(oh * ow)
        const config: Config = Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]]))
        const applied = t.apply(outputs, base, config)
        // (the blocked int32 values [n, M / 16, oh, ow, 16] at the output's block, 16 channels their vector; the output's channels unrolled innermost)
        const out = applied.stages.get(outputs[0].name)!
        const wide = out.op.inputs.find((x) => x.kind === "compute" && x.dtype === "int32" && x.shape.length === 5)!
        expect(wide.shape).toEqual([1, sp.dims[1] / 16, oh, ow, 16])
        expect(applied.stages.get(wide.name)!.attach.kind).toBe("at")
        const [tile, lane] = out.leaf.slice(-2)
        expect([out.axes.get(lane)!.extent, out.annotations.get(lane), out.annotations.get(tile)]).toEqual([16, { kind: "unrolled" }, { kind: "vectorized" }])
        expect(out.axes.get(tile)!.extent).toBe(Math.min(Number(config.epilogue_px), oh * ow))
        const f = runTirSync(cpuTirPipeline({ keepIntrinsics: new Set([vnniDot16x4.name, avx2Dot16x4.name, simd128Dot4x4.name]) }), lowerSync(applied))
        const got = evaluatePrimFunc(f, feeds).get(outputs[0].name)!
        expect(Array.from(got.data as ArrayLike<number>)).toEqual(want)
      }),
      lawParams(30),
    )
  })
})
