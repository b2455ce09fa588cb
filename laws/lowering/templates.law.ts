// Schedule templates: every configuration of every template's space is a legal schedule that
// computes what the TE says (the auto-tuner may pick any of them).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbComputeCase, blockedConvCase, COMPUTE_FAMILIES, denseRowCase } from "../../src/ast/te/arbitrary.js"
import { exprKey } from "../../src/ast/te/expr.js"
import { mapStmt } from "../../src/ast/tir/tir.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { baseSchedule } from "../../src/lowering/lower-group.js"
import { lowerSync } from "../../src/lowering/lower.js"
import type { Config } from "../../src/lowering/templates/template.js"
import { matmulRegisterTile } from "../../src/lowering/templates/matmul.js"
import { templateFor } from "../../src/lowering/templates/template-for.js"
import { cpuTirPipeline } from "../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../src/lowering/tir/tir-pass.js"
import { assertAllClose, lawParams } from "../support.js"

/**
 * The template each family's group must get (the op library's tag on its anchor, or none): a
 * blocked conv the conv template, other reductions the reduction template, groups without a
 * reduction anchor of rank ≥ 2 (elementwise chains, softmax's row statistics) the injective one.
 */
const FAMILY_TEMPLATE: Record<(typeof COMPUTE_FAMILIES)[number], string> = {
  elementwise: "injective",
  matmul: "matmul",
  batch_matmul: "matmul",
  conv2d: "reduction",
  conv2d_nchwc: "conv2d_NCHWc",
  depthwise: "reduction",
  pool: "reduction",
  softmax: "injective",
  reduce: "reduction",
}

describe("schedule templates", () => {
  it("each family's group gets the template its anchor's kind calls for", () => {
    fc.assert(
      fc.property(arbComputeCase(COMPUTE_FAMILIES), (cc) => {
        // a reduction over its input's last axis (X[a, b, r]) is summed along the contiguous loop
        const body = cc.outputs[0].body
        const lastAxis = cc.family === "reduce" && body.kind === "reduce" && body.source.kind === "bin" && body.source.a.kind === "read" && exprKey(body.source.a.indices[2]) === exprKey(body.axes[0].var)
        expect(templateFor(baseSchedule(cc.outputs)).name).toBe(lastAxis ? "inner-reduction" : FAMILY_TEMPLATE[cc.family as (typeof COMPUTE_FAMILIES)[number]])
      }),
      lawParams(60),
    )
  })

  it("every configuration of a template's space evaluates equal to the TE", () => {
    fc.assert(
      fc.property(arbComputeCase(COMPUTE_FAMILIES), fc.array(fc.nat(), { minLength: 12, maxLength: 12 }), (cc, picks) => {
        const base = baseSchedule(cc.outputs)
        const t = templateFor(base)
        const knobs = t.space(cc.outputs, base)
        expect(knobs.length).toBeLessThanOrEqual(picks.length) // a pick for every knob (none left at its default)
        const config: Config = Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]]))
        const s = t.apply(cc.outputs, base, config)
        const f = runTirSync(cpuTirPipeline(), lowerSync(s))
        const outs = evaluatePrimFunc(f, cc.inputs)
        assertAllClose(cc.outputs.map((o) => outs.get(o.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
      }),
      lawParams(80),
    )
  })

  it("a one-row dense layer evaluates equal to the TE at every column tile of its space, those past the vectorizer's 64 too", () => {
    fc.assert(
      fc.property(fc.constantFrom(130, 200, 384), fc.integer({ min: 1, max: 6 }), fc.nat(), fc.array(fc.nat(), { minLength: 8, maxLength: 8 }), (n, kk, seed, picks) => {
        const cc = denseRowCase(seed, n, kk)
        const base = baseSchedule(cc.outputs)
        const t = templateFor(base)
        const knobs = t.space(cc.outputs, base)
        const tile = knobs.find((k) => k.name === "tile_inner")!
        expect(Math.max(...(tile.candidates as number[]))).toBeGreaterThan(64)
        const config: Config = Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]]))
        const f = runTirSync(cpuTirPipeline(), lowerSync(t.apply(cc.outputs, base, config)))
        const outs = evaluatePrimFunc(f, cc.inputs)
        assertAllClose(cc.outputs.map((o) => outs.get(o.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
      }),
      lawParams(30),
    )
  })

  it("a conv whose input channels run in batches outside its tiles (ic_batch) evaluates equal to the TE, its register tiles promoted", () => {
    // 64 input channels in batches of 32, 16 output channels, 4x4 (NCHW8c), a 3x3 conv with its
    // bias and relu and a 1x1 one: any tile, order, unroll
    const cases = [
      blockedConvCase(5, { ib: 8, ob: 8, CB: 8, OB: 2, H: 4, W: 4, K: 3, stride: 1, epilogue: true }),
      blockedConvCase(6, { ib: 8, ob: 8, CB: 8, OB: 2, H: 4, W: 4, K: 1, stride: 1, epilogue: false }),
    ]
    fc.assert(
      fc.property(fc.constantFrom(...cases), fc.array(fc.nat(), { minLength: 12, maxLength: 12 }), (cc, picks) => {
        const base = baseSchedule(cc.outputs)
        const t = templateFor(base)
        expect(t.name).toBe("conv2d_NCHWc")
        const knobs = t.space(cc.outputs, base)
        expect(knobs.find((k) => k.name === "ic_batch")?.candidates).toEqual([64, 32])
        const config: Config = { ...Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]])), ic_batch: 32 }
        const f = runTirSync(cpuTirPipeline(), lowerSync(t.apply(cc.outputs, base, config)))
        let promoted = false
        mapStmt(f.body, (x) => {
          if (x.kind === "allocate" && /\.tile\d+$/.test(x.buffer.name)) promoted = true
          return undefined
        })
        void knobs
        // (a tile of the whole image for one channel block is its buffer: nothing to promote)
        const whole = Number(config.tile_ow) * Number(config.tile_oh) >= 16 && Number(config.tile_oc) === 1
        expect(promoted).toBe(!whole)
        const outs = evaluatePrimFunc(f, cc.inputs)
        assertAllClose(cc.outputs.map((o) => outs.get(o.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
      }),
      lawParams(8),
    )
  })

  it("knobs are data: the space serializes and defaults lie in it", () => {
    fc.assert(
      fc.property(arbComputeCase(COMPUTE_FAMILIES), (cc) => {
        const base = baseSchedule(cc.outputs)
        const t = templateFor(base)
        const knobs = t.space(cc.outputs, base)
        expect(JSON.parse(JSON.stringify(knobs))).toEqual(knobs)
        const d = t.defaults(knobs, { vectorLanes: 16, cores: 2 })
        for (const k of knobs) expect(k.candidates).toContain(d[k.name])
      }),
      lawParams(40),
    )
  })

  it("the matmul register tile fits the registers, keeps the FMA pipes busy where any tile can, and loads the fewest operands per FMA among those", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 300 }),
        fc.integer({ min: 1, max: 300 }),
        fc.constantFrom(4, 8, 16),
        fc.constantFrom(16, 32),
        fc.integer({ min: 1, max: 2 }),
        fc.integer({ min: 3, max: 6 }),
        (rows, cols, lanes, registers, fmaUnits, fmaLatency) => {
          const target = { vectorLanes: lanes, cores: 1, vectorRegisters: registers, fmaUnits, fmaLatency }
          const t = matmulRegisterTile(target, rows, cols)
          // every tile the rules allow, enumerated here: columns whole vectors (≤ 4, ≤ 64) covering
          // the axis with ≤ 12.5% extra, else the widest divisor within a vector; rows ≤ 8 with ≤ 5% extra
          const fullWidths = Array.from({ length: 64 }, (_, k) => k + 1).filter((w) => w % lanes === 0 && w <= 4 * lanes && w <= cols && Math.ceil(cols / w) * w <= 1.125 * cols)
          const widths = fullWidths.length ? fullWidths : [Math.max(...Array.from({ length: lanes }, (_, k) => k + 1).filter((w) => cols % w === 0))]
          const legal = widths.flatMap((w) =>
            Array.from({ length: Math.min(8, rows) }, (_, k) => k + 1)
              .filter((r) => (Math.ceil(rows / r) * r - rows) / rows <= 0.05 && r * Math.ceil(w / lanes) + Math.ceil(w / lanes) + 1 <= registers)
              .map((r) => ({ rows: r, cols: w, acc: r * Math.ceil(w / lanes), loads: (r + Math.ceil(w / lanes)) / (r * Math.ceil(w / lanes)) })),
          )
          const chosen = legal.find((x) => x.rows === t.rows && x.cols === t.cols)
          expect(chosen).toBeDefined()
          const need = fmaUnits * fmaLatency
          const saturation = Math.max(...legal.map((x) => Math.min(x.acc, need)))
          expect(Math.min(chosen!.acc, need)).toBe(saturation)
          const fewest = Math.min(...legal.filter((x) => Math.min(x.acc, need) === saturation).map((x) => x.loads))
          expect(chosen!.loads).toBeCloseTo(fewest, 12)
        },
      ),
      lawParams(300),
    )
    // this machine's shapes: a Zen 4 (one 512-bit pipe, latency 4) and two 256-bit pipes
    expect(matmulRegisterTile({ vectorLanes: 16, cores: 1, vectorRegisters: 32, fmaUnits: 1, fmaLatency: 4 }, 50, 3072)).toEqual({ rows: 5, cols: 64 })
    expect(matmulRegisterTile({ vectorLanes: 8, cores: 1, vectorRegisters: 16, fmaUnits: 2, fmaLatency: 4 }, 128, 768)).toEqual({ rows: 4, cols: 24 })
    // attention scores, 197 × 197: whole vectors and a tail, not columns of one
    expect(matmulRegisterTile({ vectorLanes: 16, cores: 1, vectorRegisters: 32, fmaUnits: 1, fmaLatency: 4 }, 197, 197).cols).toBe(16)
  })
})
