// The pixels-in-lanes form of an int8 conv (QLinearConvPacked's pixel_lanes: op-library-int8-
// blocked.ts's packedConvPixels, and its template int8_dot_px in templates/int8-dot.ts) — 1×1, and
// K×K over the padded rows' grid (strided: over its stride phases' rows; dilated or not): on random
// channels, filters, images, strides and pads, int8 / uint8 activations and weights, random zero
// points and per-channel scales, every configuration of the template's space — the VNNI dot (with
// the pixels in its lanes) kept as the intrinsic (the TIR evaluator runs it by its TE declaration)
// or left as loops — evaluates equal to the plain int32 compute (QUANT_INT_PLAIN's QLinearConv on
// the unpacked weights), exactly; and the compute itself equals it (the TE evaluator). With the
// grid's tap offset read off the output's width instead of the grid's, or the grid form's epilogue
// branch not taken, the K×K law fails (both tried); and with a stride phase's column read at
// floordiv(phase, sh) instead of floormod(phase, sw) (tried: after 8 runs), or a strided 1×1's
// rows read unstrided (tried). A 1×1 conv's activations copy with `activations: pixel_tiles` is
// parallel over the product's pixel tiles (the same loop count, its index a tile's bytes apart):
// that law fails with the copy's loops left over the channels (tried); one that reads rows (strided
// or padded) is split by the output's row, no division of its pixel loop's index (fails with it split
// by the widest vector loop that divides the pixels, its former split: tried). A grid's `epilogue: int32`
// makes the requantized values a root int32 stage (fails with its computeRoot dropped: tried). A
// grid's `sums: channel_tile` computes the sums at the epilogue's channel tile, a local buffer
// inside its loop, never a root one (fails with the knob's value ignored: tried). A grid's
// `compaction: none` reads the grid's sums in the epilogue's rows, no compacted buffer (the knob and
// its default: fails with the knob's value ignored, the compaction always taken — tried: "expected
// true to be false" on a 2×2 dilated grid, and "not to match /allocate y_dotsum/"). A 1×1 conv's tile of
// more than 4 pixel vectors (7 × 16 = 112 pixels: arbPxSpec's [7, 16] output) has its epilogue's
// pixels in vector loops of whole vectors that divide it (fails with the 112-pixel loop vectorized
// whole — tried: "ScheduleError: vectorize on stage 'y' axis 'y.k.y.l.f.i': extent 112 is too long
// to vectorize (split it first)", counterexample dims [1,1,7,16,1,1,0,1]).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { vnniDotPx16x4 } from "../../src/ast/te/intrinsic.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { printPrimFunc } from "../../src/ast/tir/tir.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { baseSchedule } from "../../src/lowering/lower-group.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { templateFor } from "../../src/lowering/templates/template-for.js"
import type { Config, ScheduleTarget } from "../../src/lowering/templates/template.js"
import { cpuTirPipeline } from "../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../support.js"
import { arbGridSpec, arbPxSpec, arbTapsSpec, build, stream, type Spec } from "./int8-cases.js"
import { int8PixelLanes } from "../../src/rewrite/pack-int8.js"
import { int8DotAlongWidth, int8PixelGrid, packInt8Conv, packInt8ConvTaps, unpackInt8Conv } from "../../src/ast/graph/ops/int8-packed.js"
import { fromArray } from "../../src/ast/graph/tensor.js"

const values = (t: { data: unknown }) => Array.from(t.data as ArrayLike<number>)

/**
 * The case's compute equals the plain QLinearConv over the unpacked weights (the same inputs
 * otherwise), and so does its TIR under the template's configuration `picks` chooses (the VNNI dot
 * kept as the intrinsic, which the TIR evaluator runs by its TE declaration, or left as loops).
 */
const checkConfig = (sp: Spec, picks: readonly number[]) => {
  const { outputs, feeds } = build(sp)
  const plain = build({ ...sp, op: "QLinearConv" })
  const want = evaluateTE(plain.outputs, plain.feeds)[0]
  expect(values(evaluateTE(outputs, feeds)[0])).toEqual(values(want))
  const base = baseSchedule(outputs)
  const t = templateFor(base)
  expect(t.name).toBe("int8_dot_px")
  const knobs = t.space(outputs, base)
  const config: Config = Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]]))
  const f = runTirSync(cpuTirPipeline({ keepIntrinsics: new Set([vnniDotPx16x4.name]) }), lowerSync(t.apply(outputs, base, config)))
  const printed = printPrimFunc(f)
  expect(printed.includes(vnniDotPx16x4.name)).toBe(config.dot === "vnni")
  expect(values(evaluatePrimFunc(f, feeds).get(outputs[0].name)!)).toEqual(values(want))
  return { printed, base, outputs, config }
}

describe("int8 template, pixels in the lanes (1×1 convs)", () => {
  it("every configuration, the VNNI dot kept or left as loops, equals the plain int32 compute (exactly)", () => {
    fc.assert(
      fc.property(arbPxSpec, fc.array(fc.nat(), { minLength: 6, maxLength: 6 }), (sp, picks) => {
        const { printed, config } = checkConfig(sp, picks)
        // (the product's tile computed at the requantization's tile)
        expect(printed).not.toMatch(/allocate y_dot:/)
        // (the epilogue knob: with "int32" and a pixel tile under a vector loop's widest the requantized values a root int32 buffer, narrowed after; else none)
        if (config.epilogue !== undefined) expect(/\n {2}allocate y_q: int32/.test(printed)).toBe(config.epilogue === "int32" && 16 * Number(config.tile_pv) < 64)
      }),
      lawParams(12),
    )
  })

  it("a 1×1 conv's knob offers pixel tiles past 4 vectors (28²'s 49: 1 and 7), the default staying at most 4 (1 × 16 there); a grid's at most 4", () => {
    const space = (sp: Spec) => {
      const { outputs } = build(sp)
      const base = baseSchedule(outputs)
      const t = templateFor(base)
      const knobs = t.space(outputs, base)
      return { pv: knobs.find((k) => k.name === "tile_pv")!.candidates, config: t.defaults(knobs, { vectorLanes: 16, cores: 1, int8Dot: "vnni", vectorRegisters: 32, requantizeStores: true }) }
    }
    // (ResNet-18's 28² 1×1 / 2 conv, scaled down in channels: 56² in, 784 pixels out)
    const px = space({ op: "QLinearConvPackedPx", x: "int8", w: "int8", dims: [8, 32, 55, 55, 1, 2, 0, 1], seed: 1 })
    expect(px.pv).toEqual([1, 7])
    expect(px.config).toMatchObject({ tile_pv: 1, tile_o: 16 })
    // (a 3×3 grid at 28²: its 3 × 3 taps over 30-wide rows, pixel tiles up to 4 vectors)
    const grid = space({ op: "QLinearConvPackedGrid", x: "int8", w: "int8", dims: [4, 16, 28, 28, 3, 1, 1, 1], seed: 3 })
    expect(Math.max(...grid.pv.map(Number))).toBeLessThanOrEqual(4)
  })

  it("the product alone (no epilogue to compute it at: a root stage, its tile in a local copy) equals its TE", () => {
    fc.assert(
      fc.property(arbPxSpec, fc.array(fc.nat(), { minLength: 5, maxLength: 5 }), (sp, picks) => {
        const { outputs, feeds } = build(sp)
        const sums = baseSchedule(outputs).stages.get("y_dot")!.op
        const base = baseSchedule([sums])
        const t = templateFor(base)
        expect(t.name).toBe("int8_dot_px")
        const knobs = t.space([sums], base)
        const config: Config = Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]]))
        const f = runTirSync(cpuTirPipeline({ keepIntrinsics: new Set([vnniDotPx16x4.name]) }), lowerSync(t.apply([sums], base, config)))
        expect(printPrimFunc(f).includes(vnniDotPx16x4.name)).toBe(config.dot === "vnni")
        const feedsOf = new Map([...feeds].filter(([k]) => sums.inputs.some(function reads(t): boolean { return t.name === k || (t.kind === "compute" && t.inputs.some(reads)) })))
        expect(values(evaluatePrimFunc(f, feedsOf).get(sums.name)!)).toEqual(values(evaluateTE([sums], feedsOf)[0]))
      }),
      lawParams(6),
    )
  })

  it("activations by pixel tiles: the copy's parallel loop is the product's, over the same tiles of pixels (each thread copies what its dots read)", () => {
    fc.assert(
      fc.property(arbPxSpec, fc.nat(), fc.nat(), fc.constantFrom("pixel_tiles", "channels"), (sp, po, ppv, activations) => {
        const { outputs } = build(sp)
        const base = baseSchedule(outputs)
        const t = templateFor(base)
        const knobs = t.space(outputs, base)
        // (the knob where the copy reads the pixels as one flat run: unstrided, unpadded; a strided copy reads rows)
        const [, , , , , stride, pad] = sp.dims
        const flat = stride === 1 && pad === 0
        if (flat) expect(knobs.map((k) => k.name)).toContain("activations")
        if (!knobs.some((k) => k.name === "activations")) return
        const pick = (name: string, k: number) => { const c = knobs.find((x) => x.name === name)!.candidates; return c[k % c.length] }
        const config: Config = { tile_o: pick("tile_o", po), tile_pv: pick("tile_pv", ppv), unroll: true, dot: "vnni", activations }
        const printed = printPrimFunc(runTirSync(cpuTirPipeline({ keepIntrinsics: new Set([vnniDotPx16x4.name]) }), lowerSync(t.apply(outputs, base, config))))
        const [, , P] = base.stages.get("y_dot")!.op.shape
        const F = 16 * Number(config.tile_pv)
        const copy = /for\[parallel\] (y_u8\S*) in \[0, \+(\d+)\)/.exec(printed)
        // (the product's tiles at the epilogue's: the requantization's, or its int32 stage's where a tile is short of a vector loop)
        const product = /for\[parallel\] y(?:_q)?\.\S* in \[0, \+(\d+)\)/.exec(printed)
        if (activations === "channels" || P / F < 2) return
        // (one parallel loop each, of the tiles' count; the copy's index steps a tile's 4 · F bytes)
        expect(copy?.[2]).toBe(String(P / F))
        expect(product?.[1]).toBe(String(P / F))
        expect(printed).toContain(`(${copy![1]} * ${4 * F})`)
      }),
      lawParams(12),
    )
  })

  it("a copy that reads the input's rows (strided or padded 1×1 convs): split by the output's row, so its pixel's row and column are its loops, not a division of the flat index", () => {
    fc.assert(
      fc.property(arbPxSpec.filter((sp) => sp.dims[5] > 1 || sp.dims[6] > 0), fc.array(fc.nat(), { minLength: 6, maxLength: 6 }), (sp, picks) => {
        const { printed } = checkConfig(sp, picks)
        // (the copy's pixel loop: the split's inner one, over an output row's columns)
        const inner = /\n\s*for (y_u8\.\S+\.i) in \[\d+, \+\d+\):/.exec(printed)
        expect(inner).not.toBeNull()
        const stores = printed.split("\n").filter((l) => /^\s*y_u8\[/.test(l))
        expect(stores.length).toBeGreaterThan(0)
        for (const line of stores) expect(line).not.toMatch(new RegExp(`floor(?:div|mod)\\([^,]*${inner![1].replace(/\./g, "\\.")}\\b`))
      }),
      lawParams(12),
    )
  })

  it("the rule: 1×1 kernels on a target with VNNI, where the output's pixels are whole vectors of 16", () => {
    const w = (k: number, out: [number, number], stride = 1) => ({ kernel: [k, k] as const, strides: [stride, stride] as const, dilations: [1, 1] as const, out })
    expect(int8PixelLanes(w(1, [112, 112]), { int8Dot: "vnni" })).toBe(true)
    expect(int8PixelLanes(w(1, [28, 28], 2), { int8Dot: "vnni" })).toBe(true)
    expect(int8PixelLanes(w(1, [14, 14]), { int8Dot: "vnni" })).toBe(false)
    expect(int8PixelLanes(w(1, [7, 7]), { int8Dot: "vnni" })).toBe(false)
    expect(int8PixelLanes(w(1, [56, 56]), { int8Dot: "simd128" })).toBe(false)
    expect(int8PixelLanes(w(1, [56, 56]), {})).toBe(false)
  })

  it("the rule: K×K kernels (any stride) where the output's rows are a vector of the target and the grid adds at most an eighth", () => {
    const w = (k: number, out: [number, number], stride = 1) => ({ kernel: [k, k] as const, strides: [stride, stride] as const, dilations: [1, 1] as const, out })
    const avx512 = { int8Dot: "vnni" as const, vectorLanes: 16 }
    expect(int8PixelLanes(w(3, [56, 56]), avx512)).toBe(true)
    expect(int8PixelLanes(w(3, [28, 28]), avx512)).toBe(true)
    expect(int8PixelLanes(w(3, [14, 14]), avx512)).toBe(false)
    expect(int8PixelLanes(w(3, [7, 7]), avx512)).toBe(false)
    // strided: the grid over the stride phases' rows (3×3 / 2: OW + 1 wide; a 7×7 / 2 stem: OW + 3)
    expect(int8PixelLanes(w(3, [112, 112], 2), avx512)).toBe(true)
    expect(int8PixelLanes(w(7, [112, 112], 2), avx512)).toBe(true)
    expect(int8PixelLanes(w(3, [28, 28], 2), avx512)).toBe(true)
    expect(int8PixelLanes(w(3, [14, 14], 2), avx512)).toBe(false)
    expect(int8PixelLanes(w(7, [20, 20]), avx512)).toBe(false)
    expect(int8PixelLanes(w(2, [100, 12]), { int8Dot: "vnni", vectorLanes: 8 })).toBe(true)
    expect(int8PixelLanes(w(2, [100, 12]), avx512)).toBe(false)
    expect(int8PixelLanes(w(3, [56, 56]), { int8Dot: "avx2", vectorLanes: 8 })).toBe(false)
    // the grid: rows of OW + 2, the last cut at OW, whole tiles of 4 (or 2) vectors where cheap
    expect(int8PixelGrid([56, 56], [3, 3], [1, 1])).toEqual({ width: 58, size: 3264 })
    expect(int8PixelGrid([28, 28], [3, 3], [1, 1])).toEqual({ width: 30, size: 864 })
    expect(int8PixelGrid([7, 7], [3, 3], [2, 2])).toEqual({ width: 11, size: 80 })
    expect(int8PixelGrid([112, 112], [3, 3], [1, 1], [2, 2])).toEqual({ width: 113, size: 12672 })
    expect(int8PixelGrid([112, 112], [7, 7], [1, 1], [2, 2])).toEqual({ width: 115, size: 12928 })
  })
})

describe("int8 template, pixels in the lanes (K×K convs over the padded rows' grid, or their stride phases')", () => {
  it("the compute, and every configuration with the VNNI dot kept or left as loops, equal the plain int32 compute (exactly)", () => {
    fc.assert(
      fc.property(arbGridSpec, fc.array(fc.nat(), { minLength: 7, maxLength: 7 }), (sp, picks) => {
        const { printed, base, outputs, config } = checkConfig(sp, picks)
        // (where the grid is wider than the output's pixels: the sums compacted a channel tile at a time,
        // or with `compaction: none` read by the epilogue's rows from the grid, no compacted buffer)
        const [, , P] = base.stages.get("y_dot")!.op.shape
        const [, , OH, OW] = outputs[0].shape
        expect(config.compaction !== undefined).toBe(P > OH * OW)
        expect(/allocate y_dotsum/.test(printed)).toBe(P > OH * OW && config.compaction !== "none")
        // (the epilogue knob where the grid is wider; with "int32" the requantized values a root int32 buffer, narrowed after; fused, none —
        // where it is not, the pixels-in-lanes epilogue's knob: the root int32 buffer with "int32" and a pixel tile under a vector loop's widest)
        if (P > OH * OW) expect(config.epilogue).toBeDefined()
        if (config.epilogue !== undefined) expect(/\n {2}allocate y_q: int32/.test(printed)).toBe(config.epilogue === "int32" && (P > OH * OW || 16 * Number(config.tile_pv) < 64))
        // (the sums knob likewise: at root the kernel's own buffer of them; at the epilogue's channel tile a local one of the tile's)
        expect(config.sums !== undefined).toBe(P > OH * OW)
        if (P > OH * OW) expect(/\n {2}allocate y_dot: int32/.test(printed)).toBe(config.sums === "root")
      }),
      lawParams(12),
    )
  })

  it("the epilogue's default: an int32 stage where its vector loop over a channel's pixels is shorter than the widest (28²: 16 of 784), fused where it is the widest (56²: 64), and fused where the emitter vectorizes only innermost loops or renders requantizing stores itself", () => {
    // (C, M, H, W, K, stride, pad; a 3×3 conv over 28² and 56², padded: 784 and 3136 output pixels)
    const defaults = (hw: number, target: ScheduleTarget) => {
      const { outputs } = build({ op: "QLinearConvPackedGrid", x: "int8", w: "int8", dims: [4, 16, hw, hw, 3, 1, 1, 1], seed: 3 })
      const base = baseSchedule(outputs)
      const t = templateFor(base)
      return t.defaults(t.space(outputs, base), target).epilogue
    }
    const avx512: ScheduleTarget = { vectorLanes: 16, cores: 1, int8Dot: "vnni" }
    expect(defaults(28, avx512)).toBe("int32")
    expect(defaults(56, avx512)).toBe("fused")
    expect(defaults(28, { ...avx512, outerLoopVectorizer: false })).toBe("fused")
    // (c rendering the requantizing store in whole 16-lane vectors whatever the stored type, requantize-store.ts: fused)
    expect(defaults(28, { ...avx512, requantizeStores: true })).toBe("fused")
  })

  it("the pixels-in-lanes epilogue's default: the int32 stage (the knob's absent value), fused where c renders requantizing stores itself", () => {
    // (C, M, H, W, K = 1: a 1×1 conv over 28², 784 pixels, 49 vectors: a pixel tile of 16)
    const { outputs } = build({ op: "QLinearConvPackedPx", x: "int8", w: "int8", dims: [16, 16, 28, 28, 1, 1, 0, 1], seed: 5 })
    const base = baseSchedule(outputs)
    const t = templateFor(base)
    expect(t.name).toBe("int8_dot_px")
    const knobs = t.space(outputs, base)
    const knob = knobs.find((k) => k.name === "epilogue")
    expect(knob && knob.kind === "choice" ? [knob.absent, knob.extent] : undefined).toEqual(["int32", undefined])
    const avx512: ScheduleTarget = { vectorLanes: 16, cores: 1, int8Dot: "vnni" }
    const fused = t.defaults(knobs, { ...avx512, requantizeStores: true })
    expect(fused.epilogue).toBe("fused")
    expect(t.defaults(knobs, avx512).epilogue).toBe("int32")
    expect(t.defaults(knobs, { vectorLanes: 4, cores: 1, outerLoopVectorizer: false }).epilogue).toBe("int32")
    const printed = printPrimFunc(runTirSync(cpuTirPipeline({}), lowerSync(t.apply(outputs, base, fused))))
    expect(printed).not.toMatch(/\n {2}allocate y_q: int32/)
  })

  it("the sums' default: at the epilogue's channel tile where the whole grid's exceed half the L2, a tile's fit that half and the epilogue is fused; else at root", () => {
    // (a 3×3 conv, 16 channels over 16² (fused epilogue: 64 divides 256 pixels) or 28² (an int32 stage: 16 of 784))
    const config = (hw: number, l2: (bytes: number) => number) => {
      const { outputs } = build({ op: "QLinearConvPackedGrid", x: "int8", w: "int8", dims: [4, 16, hw, hw, 3, 1, 1, 1], seed: 3 })
      const base = baseSchedule(outputs)
      const t = templateFor(base)
      const knobs = t.space(outputs, base)
      const bytes = knobs.find((k) => k.name === "sums")!.extent!
      expect(bytes).toBe(16 * base.stages.get("y_dot")!.op.shape[2] * 4)
      return { bytes, config: t.defaults(knobs, { vectorLanes: 16, cores: 1, int8Dot: "vnni", l2Bytes: l2(bytes) }) }
    }
    const tiled = config(16, (b) => b)
    expect(tiled.config.epilogue).toBe("fused")
    expect(tiled.config.sums).toBe("channel_tile")
    expect((tiled.bytes / 16) * Number(tiled.config.tile_o)).toBeLessThanOrEqual(tiled.bytes / 2)
    // (the whole within half the L2; a tile's past it)
    expect(config(16, (b) => 2 * b).config.sums).toBe("root")
    expect(config(16, (b) => b / 16).config.sums).toBe("root")
    // (an int32 epilogue stage: at root)
    const wide = config(28, (b) => b).config
    expect(wide.epilogue).toBe("int32")
    expect(wide.sums).toBe("root")
  })

  it("a stem-like grid whose sums exceed the L2, computed at the epilogue's channel tile (its last pixel tile past the region the compaction reads), equals the plain int32 compute", () => {
    // (C, M, H, W, K, stride, pad; 16 × 14² outputs, a grid of 14 × 16 columns and its tail)
    const { printed, config } = checkConfig({ op: "QLinearConvPackedGrid", x: "int8", w: "int8", dims: [4, 16, 14, 14, 3, 1, 1, 1], seed: 11 }, [0, 0, 0, 0, 0, 1])
    expect(config.sums).toBe("channel_tile")
    expect(printed).not.toMatch(/\n {2}allocate y_dot: /)
    expect(printed).toMatch(/\n {4}allocate y_dot\.local\d*: int32\[\d+\] @local/)
  })

  it("a row wider than a vector loop (112 columns: a 3×3 / 2 stem's, its compaction split) equals the plain int32 compute", () => {
    // (C, M, H, W, K, stride, pad; 2 × 112 outputs)
    checkConfig({ op: "QLinearConvPackedGrid", x: "int8", w: "int8", dims: [3, 2, 4, 224, 3, 2, 1, 1], seed: 7 }, [0, 0, 0, 0])
  })

  it("the epilogue by rows (`compaction: none`): a row wider than a vector loop (112 columns) and a stem-like grid's sums at the channel tile, each without the compacted buffer, equal the plain int32 compute", () => {
    // (knobs: tile_o, tile_pv, unroll, dot, epilogue, sums, compaction)
    const wide = checkConfig({ op: "QLinearConvPackedGrid", x: "int8", w: "int8", dims: [3, 2, 4, 224, 3, 2, 1, 1], seed: 7 }, [0, 0, 0, 0, 0, 0, 1])
    expect(wide.config.compaction).toBe("none")
    expect(wide.printed).not.toMatch(/allocate y_dotsum/)
    const tiled = checkConfig({ op: "QLinearConvPackedGrid", x: "int8", w: "int8", dims: [4, 16, 14, 14, 3, 1, 1, 1], seed: 11 }, [0, 0, 0, 0, 0, 1, 1])
    expect([tiled.config.sums, tiled.config.compaction]).toEqual(["channel_tile", "none"])
    expect(tiled.printed).not.toMatch(/allocate y_dotsum|\n {2}allocate y_dot: /)
  })

  it("the compaction's default: none (the epilogue by rows) where c renders requantizing stores and the epilogue is fused; the compaction (the knob's absent value) elsewhere", () => {
    const knobsOf = (hw: number) => {
      const { outputs } = build({ op: "QLinearConvPackedGrid", x: "int8", w: "int8", dims: [4, 16, hw, hw, 3, 1, 1, 1], seed: 3 })
      const base = baseSchedule(outputs)
      const t = templateFor(base)
      return { t, knobs: t.space(outputs, base) }
    }
    const { t, knobs } = knobsOf(28)
    const knob = knobs.find((k) => k.name === "compaction")
    expect(knob && knob.kind === "choice" ? knob.absent : undefined).toBe("tile")
    const avx512: ScheduleTarget = { vectorLanes: 16, cores: 1, int8Dot: "vnni" }
    expect(t.defaults(knobs, { ...avx512, requantizeStores: true }).compaction).toBe("none")
    // (an int32 epilogue stage keeps the compaction; so do js / wasm, which vectorize innermost loops only)
    expect(t.defaults(knobs, avx512)).toMatchObject({ epilogue: "int32", compaction: "tile" })
    expect(t.defaults(knobs, { vectorLanes: 4, cores: 1, outerLoopVectorizer: false }).compaction).toBe("tile")
    const w56 = knobsOf(56)
    expect(w56.t.defaults(w56.knobs, avx512)).toMatchObject({ epilogue: "fused", compaction: "tile" })
  })
})

describe("int8 template, pixels in the lanes, the dot's 4 bytes along the kernel's width (few-channel convs: dot_kw)", () => {
  it("the compute, and every configuration with the VNNI dot kept or left as loops, equal the plain int32 compute (exactly)", () => {
    fc.assert(
      fc.property(arbTapsSpec, fc.array(fc.nat(), { minLength: 6, maxLength: 6 }), (sp, picks) => {
        const { printed } = checkConfig(sp, picks)
        // (the product sums over the channels, the kernel's rows and its groups of 4 taps: a loop where there are two)
        if (sp.dims[4] > 4) expect(printed).toMatch(/y\.rkg/)
      }),
      lawParams(12),
    )
  })

  it("a 7×7 / 2 stem over 3 channels at 112 columns (two groups of 4 taps, the second cut at 3) equals the plain int32 compute", () => {
    // (C, M, H, W, K, stride, pad; 2 × 112 outputs)
    checkConfig({ op: "QLinearConvPackedTaps", x: "int8", w: "int8", dims: [3, 16, 3, 224, 7, 2, 3, 1], seed: 5 }, [0, 0, 0, 0])
  })

  it("the packing: unpacked it is the weights minus their shift, its column sums the channel packing's", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 9 }), fc.boolean(), fc.nat(), (m, ch, kh, kw, u8, seed) => {
        const r = stream(seed)
        const shift = u8 ? 128 : 0
        const w = fromArray(u8 ? "uint8" : "int8", [m, ch, kh, kw], Array.from({ length: m * ch * kh * kw }, () => r(shift - 128, shift + 127)))
        const taps = packInt8ConvTaps(w, shift)
        expect(taps.packed.shape).toEqual([Math.ceil(m / 16), ch, kh, Math.ceil(kw / 4), 16, 4])
        expect(Array.from(unpackInt8Conv(taps.packed, m, ch, kw).data as Int8Array)).toEqual(Array.from(w.data as ArrayLike<number>, (v) => Number(v) - shift))
        expect(Array.from(taps.colsum.data as Int32Array)).toEqual(Array.from(packInt8Conv(w, shift).colsum.data as Int32Array))
      }),
      lawParams(30),
    )
  })

  it("the rule: along the width where that takes fewer dots a pixel and the stride divides 4 taps' reach", () => {
    // (a 7×7 / 2 stem over 3 channels: 42 dots against 49; 3×3 over 3: 9 against 9; 4 channels: none wasted)
    expect(int8DotAlongWidth(3, [7, 7], 1, 2)).toBe(true)
    expect(int8DotAlongWidth(1, [3, 3], 1, 1)).toBe(true)
    expect(int8DotAlongWidth(3, [3, 3], 1, 2)).toBe(false)
    expect(int8DotAlongWidth(4, [7, 7], 1, 2)).toBe(false)
    expect(int8DotAlongWidth(8, [7, 7], 1, 1)).toBe(false)
    expect(int8DotAlongWidth(3, [7, 7], 1, 3)).toBe(false)
    expect(int8DotAlongWidth(3, [1, 1], 1, 1)).toBe(false)
  })
})
