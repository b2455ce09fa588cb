// The int8 depthwise template (src/lowering/templates/int8-depthwise.ts) over the depthwise and
// grouped products (src/lowering/op-library-int8-depthwise.ts): on random shapes, groups (one input
// channel a group or more), output channels a group (channel multipliers), kernels,
// strides, dilations and padding, int8 and uint8 on both sides, zero points per tensor or per
// channel (x's per input channel, w's per output channel) and per-channel scales, every
// configuration of its space evaluates equal to the plain int32 compute (QUANT_INT_PLAIN: one
// reduction over the zero-shifted 8-bit values, no blocked form), exactly — QLinearConv's requantized
// bytes and ConvInteger's int32 sums. The same function emitted for wasm (SIMD128: its vector
// loops, the int16 reads widened to int32 of the taps-outside order: src/emit/wasm/widen.ts; the
// requantizing epilogue reading the tile's sums from their v128 locals: vector-wide.ts) and run
// gives the same values.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attr, type AttrValue } from "../../src/ast/graph/attrs.js"
import { resolveNode } from "../../src/ast/graph/evaluate.js"
import { node } from "../../src/ast/graph/graph.js"
import { fromArray, type Tensor } from "../../src/ast/graph/tensor.js"
import type { DType } from "../../src/ast/graph/dtype.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { placeholder, type ComputeTensor } from "../../src/ast/te/tensor.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { mapStmt } from "../../src/ast/tir/tir.js"
import { allocate } from "../../src/ast/graph/dtype.js"
import { depthwiseWindowGrid, packDepthwiseTaps, widenInt8Weights } from "../../src/ast/graph/ops/int8-packed.js"
import { vnniDotChannels16x4, vnniDotWindows } from "../../src/ast/te/intrinsic.js"
import { TESSERA_DOMAIN } from "../../src/ast/graph/ops/index.js"
import { loadWasmModuleSync } from "../../src/device/wasm/load.js"
import { emitWasmModule } from "../../src/emit/wasm/emit.js"
import { baseSchedule } from "../../src/lowering/lower-group.js"
import { lowerSync } from "../../src/lowering/lower.js"
import type { OpCompute } from "../../src/lowering/op-library-common.js"
import { OP_COMPUTES } from "../../src/lowering/op-library.js"
import { QUANT_INT_PLAIN } from "../../src/lowering/op-library-quant-int.js"
import { anchorStage } from "../../src/lowering/templates/common.js"
import { templateFor } from "../../src/lowering/templates/template-for.js"
import type { Config, ScheduleTarget } from "../../src/lowering/templates/template.js"
import { cpuTirPipeline } from "../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../support.js"
import { range, stream } from "./int8-cases.js"

interface Spec {
  readonly op: "QLinearConv" | "ConvInteger"
  readonly x: DType
  readonly w: DType
  /** input channels a group (1: depthwise), groups, output channels a group, H, W, KH, KW, stride h, stride w, pad, dilation */
  readonly dims: readonly number[]
  readonly perChannel: boolean
  readonly seed: number
}


/** Seeded random named tensors: `t` integers in [lo, hi], `f` a float32 scalar; `r` the stream itself. */
const makers = (seed: number) => {
  const r = stream(seed)
  const t = (name: string, dtype: DType, shape: number[], lo: number, hi: number): [string, Tensor] => [name, fromArray(dtype, shape, Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => r(lo, hi)))]
  const f = (name: string, v: number): [string, Tensor] => [name, fromArray("float32", [], [Math.fround(v)])]
  return { r, t, f }
}

/** The op's TE from a compute (the op library's, or the plain one) and random inputs. */
const build = (sp: Spec, computes: Record<string, OpCompute>): { outputs: ComputeTensor[]; feeds: Map<string, Tensor> } => {
  const r = stream(sp.seed)
  const [Cg, G, opg, H, W, KH, KW, sh, sw, pad, dil] = sp.dims
  const C = Cg * G
  const M = opg * G
  const t = (name: string, dtype: DType, shape: number[], lo: number, hi: number): [string, Tensor] => [
    name,
    fromArray(dtype, shape, Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => r(lo, hi))),
  ]
  const f = (name: string, v: number): [string, Tensor] => [name, fromArray("float32", [], [Math.fround(v)])]
  const [xlo, xhi] = range(sp.x)
  const [wlo, whi] = range(sp.w)
  const x = t("x", sp.x, [1, C, H, W], xlo, xhi)
  const w = t("w", sp.w, [M, Cg, KH, KW], wlo, whi)
  const xzp = t("xzp", sp.x, sp.perChannel && sp.op === "ConvInteger" ? [C] : [], xlo, xhi)
  const wzp = t("wzp", sp.w, sp.perChannel ? [M] : [], wlo, whi)
  const q = sp.op === "QLinearConv"
  const order: [string, Tensor][] = q
    ? [x, f("xs", 0.013 + r(0, 9) / 1000), xzp, w, ["ws", fromArray("float32", [M], Array.from({ length: M }, () => Math.fround(0.002 + r(0, 99) / 10000)))], wzp, f("ys", 0.05 + r(0, 20) / 100), t("yzp", sp.x, [], xlo + 20, xhi - 20), t("b", "int32", [M], -3000, 3000)]
    : [x, w, xzp, wzp]
  const span = (k: number) => (k - 1) * dil + 1
  const outDims = [1, M, Math.floor((H + 2 * pad - span(KH)) / sh) + 1, Math.floor((W + 2 * pad - span(KW)) / sw) + 1]
  const attrs: Record<string, AttrValue> = { group: attr.int(G), kernel_shape: attr.ints([KH, KW]), strides: attr.ints([sh, sw]), pads: attr.ints([pad, pad, pad, pad]), dilations: attr.ints([dil, dil]) }
  const n = node(sp.op, order.map(([name]) => name), ["y"], attrs)
  const inputs = order.map(([name, v]) => placeholder(name, v.shape, v.dtype))
  const made = computes[sp.op]({
    node: n,
    attrs: resolveNode(n).attrs as Record<string, unknown>,
    inputs,
    outputs: [{ dtype: q ? sp.x : "int32", shape: outDims }],
    name: (suffix) => (suffix ? `y_${suffix}` : "y"),
    constants: order.map(([name, v]) => (name === "wzp" ? (v.data as ArrayLike<number>) : undefined)),
    opset: 19,
  })
  return { outputs: [made[made.length - 1]], feeds: new Map(order) }
}

const arbSpec: fc.Arbitrary<Spec> = fc
  .record({
    op: fc.constantFrom("QLinearConv" as const, "ConvInteger" as const),
    x: fc.constantFrom<DType>("int8", "uint8"),
    w: fc.constantFrom<DType>("int8", "uint8"),
    dims: fc.tuple(
      fc.constantFrom(1, 1, 2, 3),
      fc.integer({ min: 2, max: 5 }),
      fc.integer({ min: 1, max: 2 }),
      fc.integer({ min: 3, max: 9 }),
      fc.integer({ min: 3, max: 11 }),
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 2 }),
      fc.integer({ min: 0, max: 2 }),
      fc.integer({ min: 1, max: 2 }),
    ),
    perChannel: fc.boolean(),
    seed: fc.nat(),
  })
  // (the window fits the padded input)
  .filter((sp) => {
    const [, , , H, W, KH, KW, , , pad, dil] = sp.dims
    return H + 2 * pad >= (KH - 1) * dil + 1 && W + 2 * pad >= (KW - 1) * dil + 1
  })

describe("int8 depthwise / grouped template", () => {
  it("every configuration evaluates equal to the plain int32 compute (exactly)", () => {
    fc.assert(
      fc.property(arbSpec, fc.array(fc.nat(), { minLength: 7, maxLength: 7 }), (sp, picks) => {
        const { outputs, feeds } = build(sp, OP_COMPUTES)
        const base = baseSchedule(outputs)
        const t = templateFor(base)
        expect(t.name).toBe("int8_depthwise")
        const knobs = t.space(outputs, base)
        expect(knobs.length).toBeLessThanOrEqual(picks.length)
        // (QLinearConv's requantized values: fused into the narrowing, or an int32 stage of their own)
        expect(knobs.some((k) => k.name === "epilogue")).toBe(sp.op === "QLinearConv")
        const config: Config = Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]]))
        const f = runTirSync(cpuTirPipeline({}), lowerSync(t.apply(outputs, base, config)))
        const got = evaluatePrimFunc(f, feeds).get(outputs[0].name)!
        const plain = build(sp, QUANT_INT_PLAIN)
        const want = evaluateTE(plain.outputs, plain.feeds)[0]
        expect(Array.from(got.data as ArrayLike<number>)).toEqual(Array.from(want.data as ArrayLike<number>))
        // wasm: the params in order, the output allocated
        const em = emitWasmModule([{ name: "k", func: f }])
        const fn = loadWasmModuleSync(em.bytes, em.kernels).get("k")!
        const arrays = f.params.map((p) => feeds.get(p.name)?.data.slice() ?? allocate(p.dtype, (p.view?.shape ?? p.shape).reduce((a, b) => a * b, 1)))
        fn(...arrays)
        const wasm = arrays[f.params.findIndex((p) => p.name === outputs[0].name)]
        expect(Array.from(wasm as ArrayLike<number>)).toEqual(Array.from(want.data as ArrayLike<number>))
      }),
      lawParams(40),
    )
  })

  it("a stride's phases copy the padded input computed at root where that fits half the L2, else read the input", () => {
    const spaceOf = (dims: number[]) => {
      const { outputs } = build({ op: "QLinearConv", x: "uint8", w: "int8", dims, perChannel: true, seed: 1 }, OP_COMPUTES)
      const base = baseSchedule(outputs)
      const t = templateFor(base)
      return { t, knobs: t.space(outputs, base) }
    }
    // 8 channels of a 28² input, stride 2: a padded input of 8 · 32 · 30 int16 (15,360 bytes: the phases' 16 rows of 15 a stride apart)
    const { t, knobs } = spaceOf([1, 8, 1, 28, 28, 3, 3, 2, 2, 1, 1])
    const l2 = (l2Bytes: number): ScheduleTarget => ({ vectorLanes: 16, cores: 1, l2Bytes })
    expect(t.defaults(knobs, l2(2 * 15_360)).padded).toBe("root")
    expect(t.defaults(knobs, l2(2 * 15_360 - 2)).padded).toBe("inline")
    // a stride of 1: the padded input is the plane itself, no knob
    expect(spaceOf([1, 8, 1, 28, 28, 3, 3, 1, 1, 1, 1]).knobs.some((k) => k.name === "padded")).toBe(false)
  })

  it("a channel of fewer pixels than whole vectors takes one vector a tile through the C compiler, all its pixels elsewhere", () => {
    const tileOf = (dims: number[], target: ScheduleTarget) => {
      const { outputs } = build({ op: "QLinearConv", x: "int8", w: "int8", dims, perChannel: true, seed: 1 }, OP_COMPUTES)
      const base = baseSchedule(outputs)
      const t = templateFor(base)
      return t.defaults(t.space(outputs, base), target).tile_px
    }
    const c16: ScheduleTarget = { vectorLanes: 16, cores: 1 }
    // 7² (49 pixels: gcc's loop of 49 leaves 17 scalar), 8² (64: whole vectors), 14² (196: the widest whole-vector tile), 3² (9: under a vector)
    expect(tileOf([1, 4, 1, 7, 7, 3, 3, 1, 1, 1, 1], c16)).toBe(16)
    expect(tileOf([1, 4, 1, 8, 8, 3, 3, 1, 1, 1, 1], c16)).toBe(64)
    expect(tileOf([1, 4, 1, 14, 14, 3, 3, 1, 1, 1, 1], c16)).toBe(64)
    expect(tileOf([1, 4, 1, 3, 3, 3, 3, 1, 1, 1, 1], c16)).toBe(9)
    // (wasm: the emitter's own vector loop over all 49)
    expect(tileOf([1, 4, 1, 7, 7, 3, 3, 1, 1, 1, 1], { vectorLanes: 4, cores: 1, outerLoopVectorizer: false })).toBe(49)
  })

  it("through the C compiler: the plane a channel's at that channel, the requantized values an int32 stage (fused where c renders requantizing stores itself); whole first and fused elsewhere", () => {
    const { outputs } = build({ op: "QLinearConv", x: "uint8", w: "int8", dims: [1, 8, 1, 14, 14, 3, 3, 1, 1, 1, 1], perChannel: true, seed: 1 }, OP_COMPUTES)
    const base = baseSchedule(outputs)
    const t = templateFor(base)
    const knobs = t.space(outputs, base)
    const c16 = t.defaults(knobs, { vectorLanes: 16, cores: 1 })
    const wasm = t.defaults(knobs, { vectorLanes: 4, cores: 1, outerLoopVectorizer: false })
    expect([c16.plane, c16.epilogue]).toEqual(["channel", "int32"])
    expect([wasm.plane, wasm.epilogue]).toEqual(["root", "fused"])
    // (c rendering the requantizing store in whole vectors itself, requantize-store.ts: fused, a plane's 196 bytes a channel)
    expect(knobs.find((k) => k.name === "epilogue")?.extent).toBe(196)
    expect(t.defaults(knobs, { vectorLanes: 16, cores: 1, requantizeStores: true }).epilogue).toBe("fused")
  })
})

/**
 * The window form (QLinearConvGrouped with its taps' s8 weights and their sums, 11 and 12: the
 * layout rewrite's choice on a VNNI target, op-library-int8-depthwise.ts's depthwiseWindow): on
 * random depthwise convs that depthwiseWindowGrid takes (stride 1; kernels up to 3 × 4, dilations
 * 1–2, padding, int8 / uint8 activations, int8 weights, zero points per tensor, per-channel scales),
 * every configuration of the template — the window tensorized onto vnniDotWindow (evaluated by its
 * declaration) or as loops — equals the plain int32 compute's requantized bytes exactly.
 */
describe("int8 depthwise template, the window form", () => {
  const arbWindow = fc
    .record({
      x: fc.constantFrom<DType>("int8", "uint8"),
      dims: fc.tuple(fc.integer({ min: 2, max: 3 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 2, max: 7 }), fc.integer({ min: 5, max: 40 }), fc.integer({ min: 0, max: 2 }), fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 2 }), fc.integer({ min: 0, max: 1 })),
      seed: fc.nat(),
    })
    .map(({ x, dims: [C, KH, KW, OH, OW, pad, dil, st, extra], seed }) => ({ x, C, KH, KW, OH, OW, pad, dil, st, seed, H: (OH - 1) * st + (KH - 1) * dil + 1 - 2 * pad + extra * (st - 1), W: (OW - 1) * st + (KW - 1) * dil + 1 - 2 * pad + extra * (st - 1) }))
    .filter((s) => s.H >= 1 && s.W >= 1 && depthwiseWindowGrid([s.OH, s.OW], [s.KH, s.KW], [s.dil, s.dil], [s.st, s.st]) !== undefined)

  it("rows of whole vectors where the output's rows are at least a vector and the rounding adds at most a third; else the grid", () => {
    // 112², 56² under 3×3 (MobileNetV2's stride-1 convs): rows of 128, 64; 28² (a row's tail of 12 of
    // 28 past whole vectors, more than a quarter): no window form (the int16 grid)
    expect(depthwiseWindowGrid([112, 112], [3, 3], [1, 1], [1, 1])).toEqual({ width: 128, size: 112 * 128, rows: true })
    expect(depthwiseWindowGrid([56, 56], [3, 3], [1, 1], [1, 1])).toEqual({ width: 64, size: 56 * 64, rows: true })
    expect(depthwiseWindowGrid([28, 28], [3, 3], [1, 1], [1, 1])).toBeUndefined()
    // 14² and 10² (rows narrower than a vector): the grid rounded up to whole vectors, as before;
    // 20² (rows of 32 add more than a third, the grid past DOT_ROOT_GRID): no window form
    expect(depthwiseWindowGrid([14, 14], [3, 3], [1, 1], [1, 1])).toEqual({ width: 16, size: 224, rows: false })
    expect(depthwiseWindowGrid([10, 10], [3, 3], [1, 1], [1, 1])).toEqual({ width: 12, size: 128, rows: false })
    expect(depthwiseWindowGrid([20, 20], [3, 3], [1, 1], [1, 1])).toBeUndefined()
    expect(depthwiseWindowGrid([16, 16], [1, 1], [1, 1], [1, 1])).toEqual({ width: 16, size: 256, rows: true })
    // strided (MobileNetV2's 56² → 28²): rows of 32 (the plane's rows 64 bytes, in 2 row phases);
    // 112² → 56² (plane rows of 128, two vector loops) and 28² → 14² (rows narrower than a vector): no window form
    expect(depthwiseWindowGrid([56, 56], [3, 3], [1, 1], [2, 2])).toBeUndefined()
    expect(depthwiseWindowGrid([28, 28], [3, 3], [1, 1], [2, 2])).toEqual({ width: 32, size: 28 * 32, rows: true })
    expect(depthwiseWindowGrid([14, 14], [3, 3], [1, 1], [2, 2])).toBeUndefined()
  })

  it("every configuration evaluates equal to the plain int32 compute (exactly)", () => {
    fc.assert(
      fc.property(arbWindow, fc.array(fc.nat(), { minLength: 7, maxLength: 7 }), (s, picks) => {
        const { r, t, f } = makers(s.seed)
        const [xlo, xhi] = range(s.x)
        const w = t("w", "int8", [s.C, 1, s.KH, s.KW], -128, 127)
        const order: [string, Tensor][] = [t("x", s.x, [1, s.C, s.H, s.W], xlo, xhi), f("xs", 0.013 + r(0, 9) / 1000), t("xzp", s.x, [], xlo, xhi), w,
          ["ws", fromArray("float32", [s.C], Array.from({ length: s.C }, () => Math.fround(0.002 + r(0, 99) / 10000)))], t("wzp", "int8", [], 0, 0), f("ys", 0.05 + r(0, 20) / 100), t("yzp", s.x, [], xlo + 20, xhi - 20), t("b", "int32", [s.C], -3000, 3000)]
        const w16 = widenInt8Weights(w[1], undefined)
        const packed = packDepthwiseTaps(w16)!
        const extra: [string, Tensor][] = [["w16", w16], ["taps", packed.taps], ["tapsum", packed.tapsum]]
        const attrs: Record<string, AttrValue> = { group: attr.int(s.C), kernel_shape: attr.ints([s.KH, s.KW]), strides: attr.ints([s.st, s.st]), pads: attr.ints([s.pad, s.pad, s.pad, s.pad]), dilations: attr.ints([s.dil, s.dil]) }
        const make = (op: string, named: [string, Tensor][], computes: Record<string, OpCompute>) => {
          const n = node(op, named.map(([name]) => name), ["y"], attrs, "y", op === "QLinearConv" ? "" : TESSERA_DOMAIN)
          const inputs = named.map(([name, v]) => (name === "" ? undefined : placeholder(name, v.shape, v.dtype)))
          const made = computes[op]({ node: n, attrs: resolveNode(n).attrs as Record<string, unknown>, inputs, outputs: [{ dtype: s.x, shape: [1, s.C, s.OH, s.OW] }], name: (suffix) => (suffix ? `y_${suffix}` : "y"), constants: named.map(() => undefined), opset: 19 })
          return made[made.length - 1]
        }
        const none: [string, Tensor] = ["", fromArray("int32", [], [0])]
        const out = make("QLinearConvGrouped", [...order, none, ...extra], OP_COMPUTES)
        const base = baseSchedule([out])
        const tpl = templateFor(base)
        const knobs = tpl.space([out], base)
        expect(knobs.some((k) => k.name === "dot")).toBe(true)
        // (the product is the rows form, [n, o, oh, width / 16, 16], exactly where the grid says rows)
        const grid = depthwiseWindowGrid([s.OH, s.OW], [s.KH, s.KW], [s.dil, s.dil], [s.st, s.st])!
        expect(anchorStage(base)!.op.shape).toEqual(grid.rows ? [1, s.C, s.OH, grid.width / 16, 16] : [1, s.C, grid.size])
        const config: Config = Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]]))
        const fn = runTirSync(cpuTirPipeline({ keepIntrinsics: new Set(vnniDotWindows.map((d) => d.name)) }), lowerSync(tpl.apply([out], base, config)))
        const feeds = new Map([...order, ...extra])
        const got = evaluatePrimFunc(fn, feeds).get(out.name)!
        const plain = make("QLinearConv", order, QUANT_INT_PLAIN)
        const want = evaluateTE([plain], new Map(order))[0]
        expect(Array.from(got.data as ArrayLike<number>)).toEqual(Array.from(want.data as ArrayLike<number>))
      }),
      lawParams(30),
    )
  })
})

/**
 * The channels-in-lanes form (QLinearConvGrouped with `channel_lanes` L: the layout rewrite's choice
 * where a channel's output rows are at most half the target's vector, op-library-int8-depthwise.ts's
 * depthwiseChannels): on random depthwise convs (blocks of L = 4, 8 or 16 channels, kernels up to
 * 3 × 3, strides and dilations 1–2, padding 0–2, int8 / uint8 activations, x's zero point per tensor
 * or per channel, int8 weights with a zero point, per-channel scales, a bias or none), every
 * configuration of the template equals the plain int32 compute's requantized bytes exactly, evaluated
 * and emitted for wasm.
 */
describe("int8 depthwise template, the channels-in-lanes form", () => {
  const arbChannels = fc
    .record({
      x: fc.constantFrom<DType>("int8", "uint8"),
      dims: fc.tuple(fc.constantFrom(4, 8, 16), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 2 }), fc.integer({ min: 0, max: 2 }), fc.integer({ min: 1, max: 2 })),
      perChannel: fc.boolean(),
      bias: fc.boolean(),
      seed: fc.nat(),
    })
    .map(({ x, dims: [L, blocks, KH, KW, H, W, sh, sw, pad, dil], perChannel, bias, seed }) => ({ x, L, C: L * blocks, KH, KW, H, W, sh, sw, pad, dil, perChannel, bias, seed }))
    .filter((s) => s.H + 2 * s.pad >= (s.KH - 1) * s.dil + 1 && s.W + 2 * s.pad >= (s.KW - 1) * s.dil + 1)

  it("every configuration evaluates equal to the plain int32 compute (exactly), on wasm too", () => {
    fc.assert(
      fc.property(arbChannels, fc.array(fc.nat(), { minLength: 7, maxLength: 7 }), (s, picks) => {
        const { r, t, f } = makers(s.seed)
        const [xlo, xhi] = range(s.x)
        const OH = Math.floor((s.H + 2 * s.pad - (s.KH - 1) * s.dil - 1) / s.sh) + 1
        const OW = Math.floor((s.W + 2 * s.pad - (s.KW - 1) * s.dil - 1) / s.sw) + 1
        const w = t("w", "int8", [s.C, 1, s.KH, s.KW], -128, 127)
        const wzp = t("wzp", "int8", [], -5, 5)
        const order: [string, Tensor][] = [t("x", s.x, [1, s.C, s.H, s.W], xlo, xhi), f("xs", 0.013 + r(0, 9) / 1000), t("xzp", s.x, s.perChannel ? [s.C] : [], xlo, xhi), w,
          ["ws", fromArray("float32", [s.C], Array.from({ length: s.C }, () => Math.fround(0.002 + r(0, 99) / 10000)))], wzp, f("ys", 0.02 + r(0, 20) / 100), t("yzp", s.x, [], xlo + 20, xhi - 20),
          s.bias ? t("b", "int32", [s.C], -3000, 3000) : ["", fromArray("int32", [], [0])]]
        const w16 = widenInt8Weights(w[1], wzp[1])
        const attrs: Record<string, AttrValue> = { group: attr.int(s.C), kernel_shape: attr.ints([s.KH, s.KW]), strides: attr.ints([s.sh, s.sw]), pads: attr.ints([s.pad, s.pad, s.pad, s.pad]), dilations: attr.ints([s.dil, s.dil]) }
        const make = (op: string, named: [string, Tensor][], computes: Record<string, OpCompute>, extra: Record<string, AttrValue> = {}) => {
          const n = node(op, named.map(([name]) => name), ["y"], { ...attrs, ...extra }, "y", op === "QLinearConv" ? "" : TESSERA_DOMAIN)
          const inputs = named.map(([name, v]) => (name === "" ? undefined : placeholder(name, v.shape, v.dtype)))
          const made = computes[op]({ node: n, attrs: resolveNode(n).attrs as Record<string, unknown>, inputs, outputs: [{ dtype: s.x, shape: [1, s.C, OH, OW] }], name: (suffix) => (suffix ? `y_${suffix}` : "y"), constants: named.map(() => undefined), opset: 19 })
          return made[made.length - 1]
        }
        const none: [string, Tensor] = ["", fromArray("int32", [], [0])]
        const out = make("QLinearConvGrouped", [...order, none, ["w16", w16]], OP_COMPUTES, { channel_lanes: attr.int(s.L) })
        const base = baseSchedule([out])
        const tpl = templateFor(base)
        expect(tpl.name).toBe("int8_depthwise")
        const knobs = tpl.space([out], base)
        expect(knobs.some((k) => k.name === "plane")).toBe(false)
        // (its epilogue stores a byte a plane: the int32 stage kept even where c renders requantizing stores itself)
        const epi = knobs.find((k) => k.name === "epilogue")
        if (epi) {
          expect(epi.extent).toBe(1)
          expect(tpl.defaults(knobs, { vectorLanes: 16, cores: 1, requantizeStores: true }).epilogue).toBe("int32")
        }
        const config: Config = Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]]))
        const fn = runTirSync(cpuTirPipeline({}), lowerSync(tpl.apply([out], base, config)))
        // (bound inference: a block's sums hold that block alone — its read at (L·b + l) // L is block b)
        const sums: number[] = []
        mapStmt(fn.body, (st) => {
          if (st.kind === "allocate" && st.buffer.name === "y_dw.local") sums.push(st.buffer.shape.reduce((a, b) => a * b, 1))
          return undefined
        })
        expect(sums).toEqual([OH * OW * s.L])
        const feeds = new Map([...order.filter(([name]) => name !== ""), ["w16", w16] as [string, Tensor]])
        const got = evaluatePrimFunc(fn, feeds).get(out.name)!
        const plain = make("QLinearConv", order, QUANT_INT_PLAIN)
        const want = evaluateTE([plain], new Map(order.filter(([name]) => name !== "")))[0]
        expect(Array.from(got.data as ArrayLike<number>)).toEqual(Array.from(want.data as ArrayLike<number>))
        const em = emitWasmModule([{ name: "k", func: fn }])
        const wasmFn = loadWasmModuleSync(em.bytes, em.kernels).get("k")!
        const arrays = fn.params.map((p) => feeds.get(p.name)?.data.slice() ?? allocate(p.dtype, (p.view?.shape ?? p.shape).reduce((a, b) => a * b, 1)))
        wasmFn(...arrays)
        const wasm = arrays[fn.params.findIndex((p) => p.name === out.name)]
        expect(Array.from(wasm as ArrayLike<number>)).toEqual(Array.from(want.data as ArrayLike<number>))
      }),
      lawParams(40),
    )
  })
})

/**
 * The channels-in-lanes form on the VNNI dot (QLinearConvGrouped with `channel_lanes` 16 and its
 * taps' s8 weights: pack-int8.ts's int8DepthwiseChannelsDot, op-library-int8-depthwise.ts's
 * depthwiseChannelsDot): on random depthwise convs (1–2 blocks of 16 channels, kernels of 1–3 rows
 * and 1–4 taps a row, strides 1–2 each way, dilation 1–2 between rows and 1 along them, padding
 * 0–2, int8 / uint8 activations, x's zero point per tensor or per channel, weights with a zero
 * point, per-channel scales, a bias or none), the product is [1, C / 16, OH, OW, 16] over a u8 plane
 * [1, C / 16, Hp, Wp, 16] and every configuration (the dot tensorized onto vnniDotChannels16x4 and
 * evaluated by its declaration, or loops) equals the plain int32 compute's requantized bytes exactly.
 */
describe("int8 depthwise template, the channels-in-lanes form on the VNNI dot", () => {
  const arbDot = fc
    .record({
      x: fc.constantFrom<DType>("int8", "uint8"),
      dims: fc.tuple(fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 9 }), fc.integer({ min: 1, max: 9 }), fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 2 }), fc.integer({ min: 0, max: 2 }), fc.integer({ min: 1, max: 2 })),
      perChannel: fc.boolean(),
      bias: fc.boolean(),
      seed: fc.nat(),
    })
    .map(({ x, dims: [blocks, KH, KW, H, W, sh, sw, pad, dh], perChannel, bias, seed }) => ({ x, C: 16 * blocks, KH, KW, H, W, sh, sw, pad, dh, perChannel, bias, seed }))
    .filter((s) => s.H + 2 * s.pad >= (s.KH - 1) * s.dh + 1 && s.W + 2 * s.pad >= s.KW)

  it("every configuration evaluates equal to the plain int32 compute (exactly)", () => {
    fc.assert(
      fc.property(arbDot, fc.array(fc.nat(), { minLength: 7, maxLength: 7 }), (s, picks) => {
        const { r, t, f } = makers(s.seed)
        const [xlo, xhi] = range(s.x)
        const OH = Math.floor((s.H + 2 * s.pad - (s.KH - 1) * s.dh - 1) / s.sh) + 1
        const OW = Math.floor((s.W + 2 * s.pad - s.KW) / s.sw) + 1
        // (weights and zero point inside s8 once shifted: the taps' operand holds them)
        const w = t("w", "int8", [s.C, 1, s.KH, s.KW], -120, 120)
        const wzp = t("wzp", "int8", [], -5, 5)
        const order: [string, Tensor][] = [t("x", s.x, [1, s.C, s.H, s.W], xlo, xhi), f("xs", 0.013 + r(0, 9) / 1000), t("xzp", s.x, s.perChannel ? [s.C] : [], xlo, xhi), w,
          ["ws", fromArray("float32", [s.C], Array.from({ length: s.C }, () => Math.fround(0.002 + r(0, 99) / 10000)))], wzp, f("ys", 0.02 + r(0, 20) / 100), t("yzp", s.x, [], xlo + 20, xhi - 20),
          s.bias ? t("b", "int32", [s.C], -3000, 3000) : ["", fromArray("int32", [], [0])]]
        const w16 = widenInt8Weights(w[1], wzp[1])
        const packed = packDepthwiseTaps(w16)!
        const extra: [string, Tensor][] = [["w16", w16], ["taps", packed.taps], ["tapsum", packed.tapsum]]
        const attrs: Record<string, AttrValue> = { group: attr.int(s.C), kernel_shape: attr.ints([s.KH, s.KW]), strides: attr.ints([s.sh, s.sw]), pads: attr.ints([s.pad, s.pad, s.pad, s.pad]), dilations: attr.ints([s.dh, 1]) }
        const make = (op: string, named: [string, Tensor][], computes: Record<string, OpCompute>, more: Record<string, AttrValue> = {}) => {
          const n = node(op, named.map(([name]) => name), ["y"], { ...attrs, ...more }, "y", op === "QLinearConv" ? "" : TESSERA_DOMAIN)
          const inputs = named.map(([name, v]) => (name === "" ? undefined : placeholder(name, v.shape, v.dtype)))
          const made = computes[op]({ node: n, attrs: resolveNode(n).attrs as Record<string, unknown>, inputs, outputs: [{ dtype: s.x, shape: [1, s.C, OH, OW] }], name: (suffix) => (suffix ? `y_${suffix}` : "y"), constants: named.map(() => undefined), opset: 19 })
          return made[made.length - 1]
        }
        const none: [string, Tensor] = ["", fromArray("int32", [], [0])]
        const out = make("QLinearConvGrouped", [...order, none, ...extra], OP_COMPUTES, { channel_lanes: attr.int(16) })
        const base = baseSchedule([out])
        const anchor = anchorStage(base)!
        expect(anchor.op.shape).toEqual([1, s.C / 16, OH, OW, 16])
        expect(anchor.op.inputs.find((x) => x.kind === "compute")?.shape).toEqual([1, s.C / 16, (OH - 1) * s.sh + (s.KH - 1) * s.dh + 1, (OW - 1) * s.sw + 4, 16])
        const tpl = templateFor(base)
        const knobs = tpl.space([out], base)
        expect(knobs.some((k) => k.name === "dot")).toBe(true)
        const config: Config = Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]]))
        const fn = runTirSync(cpuTirPipeline({ keepIntrinsics: new Set([vnniDotChannels16x4.name]) }), lowerSync(tpl.apply([out], base, config)))
        const feeds = new Map([...order.filter(([name]) => name !== ""), ...extra])
        const got = evaluatePrimFunc(fn, feeds).get(out.name)!
        const plain = make("QLinearConv", order, QUANT_INT_PLAIN)
        const want = evaluateTE([plain], new Map(order.filter(([name]) => name !== "")))[0]
        expect(Array.from(got.data as ArrayLike<number>)).toEqual(Array.from(want.data as ArrayLike<number>))
      }),
      lawParams(40),
    )
  })
})
