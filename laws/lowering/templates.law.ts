// Schedule templates: every configuration of every template's space is a legal schedule that
// computes what the TE says (the auto-tuner may pick any of them).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbComputeCase, blockedConvCase, COMPUTE_FAMILIES, denseRowCase, longReductionCase, matmulCase, matmulPackedCase } from "../../src/ast/te/arbitrary.js"
import { add, call, collect, div, exprKey, f32, mul, sub } from "../../src/ast/te/expr.js"
import { prng } from "../../src/ast/graph/arbitrary.js"
import { mapStmt } from "../../src/ast/tir/tir.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { baseSchedule } from "../../src/lowering/lower-group.js"
import { lowerSync } from "../../src/lowering/lower.js"
import type { Config, Template } from "../../src/lowering/templates/template.js"
import { fromArray, type Tensor } from "../../src/ast/graph/tensor.js"
import type * as S from "../../src/ast/schedule/schedule.js"
import { matmulRegisterTile, matmulTemplate } from "../../src/lowering/templates/matmul.js"
import { candidatesOf, convRegisterTile, divisors, GCC_FOLDED_POSITIONS, mulAddRegisterTile } from "../../src/lowering/templates/common.js"
import { columnTiles, imageBands, inputStaysWeightsStream, projectionBatch, projectionOrder } from "../../src/lowering/templates/conv2d-nchwc.js"
import { innerReductionTemplate, reductionTemplate } from "../../src/lowering/templates/reduction.js"
import { RF_PARTS_BY_DEFAULT } from "../../src/lowering/templates/rfactor.js"
import { at, compute, maxReduce, placeholder, reduceAxis, sum, type ComputeTensor } from "../../src/ast/te/tensor.js"
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

  it("a softmax over its last axis: the exp computed once an element (a row-local buffer read by the sum and the division, every stage at the output's row) and equal to the TE", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 40 }), fc.integer(), (a, b, n, seed) => {
        const rng = prng(seed)
        const X = placeholder("X", [a, b, n])
        const k1 = reduceAxis(n, "k1")
        const k2 = reduceAxis(n, "k2")
        const mx = compute("rowmax", [a, b], (i, j) => maxReduce(at(X, i, j, k1.var), [k1]))
        const ex = compute("exp", [a, b, n], (i, j, k) => call("exp", sub(at(X, i, j, k), at(mx, i, j))))
        const sm = compute("rowsum", [a, b], (i, j) => sum(at(ex, i, j, k2.var), [k2]))
        const out = compute("softmax", [a, b, n], (i, j, k) => div(at(ex, i, j, k), at(sm, i, j)))
        const inputs = new Map([["X", fromArray("float32", [a, b, n], Array.from({ length: a * b * n }, () => rng.float(-4, 4)))]])
        const base = baseSchedule([out])
        const t = templateFor(base)
        expect(t).toBe(innerReductionTemplate)
        const s = t.apply([out], base, { rf_inner: 1, rf_parts: 1 })
        const f = runTirSync(cpuTirPipeline(), lowerSync(s))
        let exps = 0
        mapStmt(f.body, () => undefined, (e) => {
          exps += collect(e, (x) => x.kind === "call" && x.fn === "exp").length
          return e
        })
        expect(exps).toBe(1)
        const outs = evaluatePrimFunc(f, inputs)
        assertAllClose([outs.get("softmax")!], evaluateTE([out], inputs), 1e-5, 1e-6)
      }),
      lawParams(40),
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
        // (a tile of the whole image — its channel blocks inside it — is its buffer: nothing to
        // promote; a tile of columns that leaves a tail keeps its guarded sums in the batch's buffer)
        const whole = Number(config.tile_ow) * Number(config.tile_oh) >= 16
        if (4 % Number(config.tile_ow) === 0) expect(promoted).toBe(!whole)
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

  it("the matmul register tile fits the registers, keeps the FMA pipes busy where any tile can, and loads the fewest operands per FMA among those; with a depth and an L2, its panel of B within half the L2 where a width allows", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 300 }),
        fc.integer({ min: 1, max: 300 }),
        fc.constantFrom(4, 8, 16),
        fc.constantFrom(16, 32),
        fc.integer({ min: 1, max: 2 }),
        fc.integer({ min: 3, max: 6 }),
        fc.option(fc.integer({ min: 1, max: 8192 })),
        fc.option(fc.constantFrom(256 * 1024, 512 * 1024, 1024 * 1024, 2048 * 1024)),
        (rows, cols, lanes, registers, fmaUnits, fmaLatency, depth, l2) => {
          const target = { vectorLanes: lanes, cores: 1, vectorRegisters: registers, fmaUnits, fmaLatency, ...(l2 !== null ? { l2Bytes: l2 } : {}) }
          const t = matmulRegisterTile(target, rows, cols, undefined, depth ?? undefined)
          // every tile the rules allow, enumerated here: columns whole vectors (≤ 4, ≤ 64) covering
          // the axis with ≤ 12.5% extra, else the widest divisor within a vector; rows ≤ 8 with ≤ 5% extra;
          // with a depth and an L2, the whole-vector widths whose fp32 panel (depth × width) is at most
          // half the L2, or where none is, the narrowest
          const wholeWidths = Array.from({ length: 64 }, (_, k) => k + 1).filter((w) => w % lanes === 0 && w <= 4 * lanes && w <= cols && Math.ceil(cols / w) * w <= 1.125 * cols)
          const fitting = depth !== null && l2 !== null ? wholeWidths.filter((w) => depth * w * 4 <= l2 / 2) : wholeWidths
          const fullWidths = fitting.length ? fitting : wholeWidths.slice(0, 1)
          if (depth !== null && l2 !== null && fitting.length) expect(depth * t.cols * 4).toBeLessThanOrEqual(l2 / 2)
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
          const saturating = legal.filter((x) => Math.min(x.acc, need) === saturation)
          const fewest = Math.min(...saturating.map((x) => x.loads))
          expect(chosen!.loads).toBeCloseTo(fewest, 12)
          // then the least extra work (rows and columns a tile computes past the axes), then the widest
          const extra = (x: { rows: number; cols: number }) => (Math.ceil(rows / x.rows) * x.rows * Math.ceil(cols / x.cols) * x.cols) / (rows * cols) - 1
          const frugal = saturating.filter((x) => Math.abs(x.loads - fewest) < 1e-12)
          const least = Math.min(...frugal.map(extra))
          expect(extra(chosen!)).toBeCloseTo(least, 12)
          expect(chosen!.cols).toBe(Math.max(...frugal.filter((x) => Math.abs(extra(x) - least) < 1e-12).map((x) => x.cols)))
        },
      ),
      lawParams(300),
    )
    // this machine's shapes: a Zen 4 (one 512-bit pipe, latency 4) and two 256-bit pipes
    expect(matmulRegisterTile({ vectorLanes: 16, cores: 1, vectorRegisters: 32, fmaUnits: 1, fmaLatency: 4 }, 50, 3072)).toEqual({ rows: 5, cols: 64 })
    expect(matmulRegisterTile({ vectorLanes: 8, cores: 1, vectorRegisters: 16, fmaUnits: 2, fmaLatency: 4 }, 128, 768)).toEqual({ rows: 4, cols: 24 })
    // attention scores, 197 × 197: whole vectors and a tail, not columns of one
    expect(matmulRegisterTile({ vectorLanes: 16, cores: 1, vectorRegisters: 32, fmaUnits: 1, fmaLatency: 4 }, 197, 197).cols).toBe(16)
    // the Zen 5 (two 512-bit pipes, 1 MiB L2): a transformer's MLP up-projection (depth 768) in panels
    // of 64, its down-projection (depth 3072: 768 KiB at 64) in panels of 32
    const zen5 = { vectorLanes: 16, cores: 1, vectorRegisters: 32, fmaUnits: 2, fmaLatency: 4, l2Bytes: 1 << 20 }
    expect(matmulRegisterTile(zen5, 128, 3072, undefined, 768).cols).toBe(64)
    expect(matmulRegisterTile(zen5, 128, 768, undefined, 3072).cols).toBe(32)
  })
})

describe("the matmul rule", () => {
  const arbMatmul = fc.record({
    batch: fc.integer({ min: 0, max: 2 }),
    m: fc.integer({ min: 2, max: 30 }),
    n: fc.oneof(fc.integer({ min: 1, max: 70 }), fc.constantFrom(64, 128)),
    k: fc.integer({ min: 1, max: 6 }),
    epilogue: fc.boolean(),
    seed: fc.nat(),
  })
  /** A config of the rule's space from random picks. */
  const pick = (knobs: readonly { readonly name: string; readonly candidates: readonly (string | number | boolean)[] }[], picks: readonly number[]): Config =>
    Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]]))

  it("every configuration of its space evaluates equal to the TE: tiles that do not divide, batches, epilogues", () => {
    fc.assert(
      fc.property(arbMatmul, fc.array(fc.nat(), { minLength: 4, maxLength: 4 }), (o, picks) => {
        const cc = matmulCase(o.seed, o)
        const base = baseSchedule(cc.outputs)
        expect(templateFor(base)).toBe(matmulTemplate)
        const config = pick(matmulTemplate.space(cc.outputs, base), picks)
        const f = runTirSync(cpuTirPipeline(), lowerSync(matmulTemplate.apply(cc.outputs, base, config)))
        const outs = evaluatePrimFunc(f, cc.inputs)
        assertAllClose(cc.outputs.map((x) => outs.get(x.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
      }),
      lawParams(40),
    )
  })

  it("its schedule is the tiling its config names: column and row tiles of those sizes in that order, the product computed at the inner tile loop with its reduction outside the tile, the columns vectorized and the rows unrolled as asked, the loops outside the tile parallel", () => {
    fc.assert(
      fc.property(arbMatmul, fc.array(fc.nat(), { minLength: 4, maxLength: 4 }), (o, picks) => {
        const cc = matmulCase(o.seed, o)
        const base = baseSchedule(cc.outputs)
        const config = pick(matmulTemplate.space(cc.outputs, base), picks)
        const [tr, tc] = [Number(config.tile_rows), Number(config.tile_cols)]
        const s = matmulTemplate.apply(cc.outputs, base, config)
        const local = [...s.stages.values()].find((st) => st.attach.kind === "at")!
        expect(local.attach.kind).toBe("at")
        const out = s.stages.get((local.attach as { stage: string }).stage)!
        const [rowAxis, colAxis] = out.root.filter((a) => a.type === "data").slice(-2).map((a) => a.name)
        const splitOf = (axis: string) => out.relations.find((r) => r.kind === "split" && r.parent === axis) as { outer: string; inner: string; factor: number }
        const [rows, cols] = [splitOf(rowAxis), splitOf(colAxis)]
        expect([rows.factor, cols.factor]).toEqual([tr, tc])
        // the tile's rows then columns innermost; the column tiles outside the row tiles iff cols_outer
        expect(out.leaf.slice(-2)).toEqual([rows.inner, cols.inner])
        const tiles = config.cols_outer ? [cols.outer, rows.outer] : [rows.outer, cols.outer]
        expect(out.leaf.indexOf(tiles[0])).toBeLessThan(out.leaf.indexOf(tiles[1]))
        expect(out.leaf.indexOf(tiles[1])).toBe(out.leaf.length - 3)
        expect((local.attach as { axis: string }).axis).toBe(tiles[1])
        // the product: every reduce loop outside its data loops (the sums stay in registers)
        const kinds = local.leaf.map((a) => local.axes.get(a)!.type)
        expect(kinds.indexOf("data")).toBeGreaterThan(kinds.lastIndexOf("reduce"))
        const ldata = local.leaf.filter((a) => local.axes.get(a)!.type === "data")
        const kindOf = (st: typeof out, a: string) => st.annotations.get(a)?.kind ?? "serial"
        const vec = !!config.vectorize && tc > 1
        expect(kindOf(out, cols.inner)).toBe(vec ? "vectorized" : "serial")
        // (the product's columns vectorized whole, or, past the vectorizer's 64, split at the tile's width first)
        const lastCol = ldata[ldata.length - 1]
        const colSplit = local.relations.find((r) => r.kind === "split" && r.inner === lastCol) as { factor: number } | undefined
        if (colSplit) expect(colSplit.factor).toBe(tc)
        expect(kindOf(local, lastCol)).toBe(vec ? "vectorized" : "serial")
        expect(kindOf(local, ldata[ldata.length - (colSplit ? 3 : 2)])).toBe(tr > 1 ? "unrolled" : "serial")
        // parallel: the first loop, when the loops outside the tile the product is computed at have
        // more than one iteration; a tile loop that does not divide its axis stays out of it when a
        // batch axis can be parallel instead
        const batchParallel = o.batch > 1
        const divides = config.cols_outer ? o.n % tc === 0 : o.m % tr === 0
        const outside = (divides || !batchParallel ? [...Array(o.batch > 0 ? 1 : 0).fill(o.batch), out.axes.get(tiles[0])!.extent] : [o.batch]).reduce((a, b) => a * b, 1)
        expect(kindOf(out, out.leaf[0])).toBe(outside > 1 ? "parallel" : "serial")
        // the outer tile loop joins the parallel loop (fused away) unless it does not divide and a batch can be parallel
        if (!divides && batchParallel) expect(out.leaf).toContain(tiles[0])
        else if (o.batch > 0 && out.axes.get(tiles[0])!.extent > 1) expect(out.leaf).not.toContain(tiles[0])
        expect(out.leaf.filter((a) => kindOf(out, a) === "parallel").length).toBe(outside > 1 ? 1 : 0)
      }),
      lawParams(60),
    )
  })

  it("its space: rows 1 to 8 (at most the rows), columns every divisor up to 64 and every multiple of 4 up to the columns, then the order and vectorizing; one row or a product read twice gets the reduction template's space", () => {
    fc.assert(
      fc.property(arbMatmul, (o) => {
        const cc = matmulCase(o.seed, o)
        const base = baseSchedule(cc.outputs)
        const cols = Array.from({ length: 64 }, (_, k) => k + 1).filter((w) => (o.n % w === 0 || w % 4 === 0) && w <= o.n)
        expect(matmulTemplate.space(cc.outputs, base)).toEqual([
          { kind: "split", name: "tile_rows", extent: o.m, candidates: Array.from({ length: Math.min(8, o.m) }, (_, k) => k + 1) },
          { kind: "split", name: "tile_cols", extent: o.n, candidates: cols },
          { kind: "choice", name: "cols_outer", candidates: [true, false] },
          { kind: "choice", name: "vectorize", candidates: [true, false] },
        ])
      }),
      lawParams(40),
    )
    const one = matmulCase(1, { batch: 0, m: 1, n: 40, k: 3, epilogue: true })
    const twice = matmulCase(2, { batch: 0, m: 6, n: 40, k: 3, epilogue: false })
    const mm = twice.outputs[0]
    const readers = [compute("r1", [6, 40], (i, j) => add(at(mm, i, j), f32(1))), compute("r2", [6, 40], (i, j) => mul(at(mm, i, j), f32(2)))]
    for (const outputs of [one.outputs, readers]) {
      const base = baseSchedule(outputs)
      const knobs = matmulTemplate.space(outputs, base)
      expect(knobs).toEqual(reductionTemplate.space(outputs, base))
      const target = { vectorLanes: 16, cores: 2 }
      expect(matmulTemplate.defaults(knobs, target)).toEqual(reductionTemplate.defaults(knobs, target))
    }
  })

  it("a target that does not say its FMA pipes, latency or registers is taken as 2 pipes × latency 4 and 16 registers", () => {
    for (const [rows, cols] of [[50, 3072], [197, 64], [8, 40], [3, 7]])
      for (const lanes of [4, 8, 16]) expect(matmulRegisterTile({ vectorLanes: lanes, cores: 1 }, rows, cols)).toEqual(matmulRegisterTile({ vectorLanes: lanes, cores: 1, fmaUnits: 2, fmaLatency: 4, vectorRegisters: 16 }, rows, cols))
  })

  it("its defaults: the register tile for the target, columns outside rows, vectorized where the target has vectors", () => {
    fc.assert(
      fc.property(arbMatmul, fc.constantFrom(1, 4, 8, 16), fc.integer({ min: 1, max: 2 }), (o, lanes, units) => {
        const cc = matmulCase(o.seed, o)
        const base = baseSchedule(cc.outputs)
        const target = { vectorLanes: lanes, cores: 2, fmaUnits: units, fmaLatency: 4, vectorRegisters: lanes === 16 ? 32 : 16 }
        const d = matmulTemplate.defaults(matmulTemplate.space(cc.outputs, base), target)
        const tile = matmulRegisterTile(target, o.m, o.n)
        expect(d).toEqual({ tile_rows: tile.rows, tile_cols: tile.cols, cols_outer: true, vectorize: lanes > 1 })
      }),
      lawParams(40),
    )
  })
})

// The matmul rule over a weight packed in column panels (MatMulPacked, the layout rewrite of a
// constant B): its column tile is the panel, every configuration evaluates equal to the TE (panels
// the columns do not fill, batches, epilogues), its defaults are the register tile at the panel's
// width, and over the panel the packed weight's reads carry no division (a tile reads one
// contiguous panel row per step of the reduction).
describe("the matmul rule over a packed weight", () => {
  const arbPacked = fc.record({
    batch: fc.integer({ min: 0, max: 2 }),
    m: fc.integer({ min: 2, max: 20 }),
    n: fc.integer({ min: 1, max: 150 }),
    k: fc.integer({ min: 1, max: 5 }),
    panel: fc.constantFrom(4, 8, 16, 32, 48, 64),
    epilogue: fc.boolean(),
    seed: fc.nat(),
  })
  const pick = (knobs: readonly { readonly name: string; readonly candidates: readonly (string | number | boolean)[] }[], picks: readonly number[]): Config =>
    Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]]))
  /** The reads of placeholder B in a lowered function whose indices divide (floordiv / floormod). */
  const dividingReads = (f: ReturnType<typeof lowerSync>): number => {
    let count = 0
    mapStmt(f.body, () => undefined, (e) => {
      count += collect(e, (x) => x.kind === "read" && x.source === "B" && x.indices.some((i) => collect(i, (y) => y.kind === "bin" && (y.op === "floordiv" || y.op === "floormod")).length > 0)).length
      return e
    })
    return count
  }

  it("its space: the column tile is the panel; every configuration evaluates equal to the TE", () => {
    fc.assert(
      fc.property(arbPacked, fc.array(fc.nat(), { minLength: 4, maxLength: 4 }), (o, picks) => {
        const cc = matmulPackedCase(o.seed, o)
        const base = baseSchedule(cc.outputs)
        expect(templateFor(base)).toBe(matmulTemplate)
        const knobs = matmulTemplate.space(cc.outputs, base)
        expect(knobs.find((k) => k.name === "tile_cols")).toEqual({ kind: "split", name: "tile_cols", extent: o.n, candidates: [o.panel] })
        const f = runTirSync(cpuTirPipeline(), lowerSync(matmulTemplate.apply(cc.outputs, base, pick(knobs, picks))))
        const outs = evaluatePrimFunc(f, cc.inputs)
        assertAllClose(cc.outputs.map((x) => outs.get(x.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
      }),
      lawParams(40),
    )
  })

  it("its defaults: the register tile at the panel's width; over the panel the packed weight is read without division", () => {
    fc.assert(
      fc.property(arbPacked, fc.constantFrom(4, 8, 16), fc.integer({ min: 1, max: 2 }), (o, lanes, units) => {
        const cc = matmulPackedCase(o.seed, o)
        const base = baseSchedule(cc.outputs)
        const target = { vectorLanes: lanes, cores: 2, fmaUnits: units, fmaLatency: 4, vectorRegisters: lanes === 16 ? 32 : 16 }
        const d = matmulTemplate.defaults(matmulTemplate.space(cc.outputs, base), target)
        const tile = matmulRegisterTile(target, o.m, o.n, o.panel)
        expect(d).toEqual({ tile_rows: tile.rows, tile_cols: o.panel, cols_outer: true, vectorize: true })
        const f = runTirSync(cpuTirPipeline(), lowerSync(matmulTemplate.apply(cc.outputs, base, d)))
        expect(dividingReads(f)).toBe(0)
        const outs = evaluatePrimFunc(f, cc.inputs)
        assertAllClose(cc.outputs.map((x) => outs.get(x.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
      }),
      lawParams(30),
    )
  })
})

describe("the conv rule (conv2d_NCHWc) on grouped convolutions", () => {
  // 2 to 4 groups of 1 or 2 input and output blocks of 1, 2, 4 or 8 lanes, 1×1 or 3×3, stride 1
  // or 2, padding 0 to 2, with or without a bias + relu epilogue
  const arbGrouped = fc.record({
    groups: fc.integer({ min: 2, max: 4 }),
    ib: fc.constantFrom(1, 2, 4, 8),
    ob: fc.constantFrom(1, 2, 4, 8),
    inBlocks: fc.integer({ min: 1, max: 2 }),
    outBlocks: fc.integer({ min: 1, max: 2 }),
    H: fc.integer({ min: 3, max: 7 }),
    W: fc.integer({ min: 3, max: 7 }),
    K: fc.constantFrom(1, 3),
    stride: fc.constantFrom(1, 2),
    pad: fc.integer({ min: 0, max: 2 }),
    epilogue: fc.boolean(),
    seed: fc.nat(),
  })

  it("every configuration of its space evaluates equal to the TE", () => {
    fc.assert(
      fc.property(arbGrouped, fc.array(fc.nat(), { minLength: 12, maxLength: 12 }), (o, picks) => {
        const cc = blockedConvCase(o.seed, { ...o, CB: o.groups * o.inBlocks, OB: o.groups * o.outBlocks })
        const base = baseSchedule(cc.outputs)
        const t = templateFor(base)
        expect(t.name).toBe("conv2d_NCHWc")
        const knobs = t.space(cc.outputs, base)
        const config: Config = Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]]))
        const f = runTirSync(cpuTirPipeline(), lowerSync(t.apply(cc.outputs, base, config)))
        const outs = evaluatePrimFunc(f, cc.inputs)
        assertAllClose(cc.outputs.map((x) => outs.get(x.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
      }),
      lawParams(60),
    )
  })
})

describe("the conv rule's reduction order (conv2d_NCHWc defaults)", () => {
  // blocked convs of 1 to 3 input blocks, 1×1 to 3×3 kernels (non-square too), stride 1 to 3,
  // padding 0 to 2, images 3 to 9 wide, with or without an epilogue; AVX-512 or AVX2 records
  const arbConv = fc.record({
    ib: fc.constantFrom(1, 4, 8),
    ob: fc.constantFrom(4, 8),
    CB: fc.integer({ min: 1, max: 3 }),
    OB: fc.integer({ min: 1, max: 2 }),
    H: fc.integer({ min: 3, max: 9 }),
    W: fc.integer({ min: 3, max: 9 }),
    K: fc.constantFrom(1, 2, 3),
    stride: fc.integer({ min: 1, max: 3 }),
    pad: fc.integer({ min: 0, max: 2 }),
    epilogue: fc.boolean(),
    avx512: fc.boolean(),
    seed: fc.nat(),
  })

  it("reads the stride off the compute, keeps the channel loops outside the unrolled taps only where a row's taps share their input (kernel width / stride ≥ 2), and evaluates equal to the TE", () => {
    fc.assert(
      fc.property(arbConv, (o) => {
        fc.pre(o.W + 2 * o.pad >= o.K && o.H + 2 * o.pad >= o.K)
        const cc = blockedConvCase(o.seed, o)
        const base = baseSchedule(cc.outputs)
        const t = templateFor(base)
        expect(t.name).toBe("conv2d_NCHWc")
        const knobs = t.space(cc.outputs, base)
        const order = knobs.find((k) => k.name === "reduce_order")
        const channels = o.CB * o.ib
        // the order knob exactly where there is an order to choose: channels and taps both
        expect(order !== undefined).toBe(channels > 1 && o.K > 1)
        const target = o.avx512 ? { vectorLanes: 16, cores: 2, vectorRegisters: 32, fmaUnits: 1, fmaLatency: 4 } : { vectorLanes: 8, cores: 2, vectorRegisters: 16, fmaUnits: 2, fmaLatency: 4 }
        const d = t.defaults(knobs, target)
        if (order?.kind === "choice") {
          expect(order.inputStride).toBe(o.stride)
          expect(d.reduce_order).toBe(o.K / o.stride >= 2 ? "ic_only" : "ic_kernel")
        }
        const f = runTirSync(cpuTirPipeline(), lowerSync(t.apply(cc.outputs, base, d)))
        const outs = evaluatePrimFunc(f, cc.inputs)
        assertAllClose(cc.outputs.map((x) => outs.get(x.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
      }),
      lawParams(60),
    )
  })
})

describe("the conv rule's channel tile order (conv2d_NCHWc defaults, oc_order)", () => {
  // 1×1 blocked convs, more input channels than output channels (projections) or fewer; records
  // whose half L2 holds the input, the weights, both or neither
  const arbCase = fc.record({
    ib: fc.constantFrom(4, 8),
    ob: fc.constantFrom(4, 8),
    CB: fc.integer({ min: 1, max: 6 }),
    OB: fc.integer({ min: 2, max: 4 }),
    H: fc.integer({ min: 2, max: 5 }),
    W: fc.integer({ min: 2, max: 5 }),
    stride: fc.integer({ min: 1, max: 2 }),
    l2: fc.constantFrom(256, 512, 1024, 2048, 4096, 1 << 20),
    seed: fc.nat(),
  })

  it("puts a projection's channel tiles inside its image tiles where its weights fit half the L2, outermost where only its input does (each weight then read once, the input kept in L2), inside its row tiles where neither does and a row's input does (the weights streamed once a row, not once an image tile); evaluates equal to the TE", () => {
    let both = 0
    let rows = 0
    fc.assert(
      fc.property(arbCase, (o) => {
        const cc = blockedConvCase(o.seed, { ...o, K: 1, pad: 0, epilogue: false })
        const base = baseSchedule(cc.outputs)
        const t = templateFor(base)
        const knobs = t.space(cc.outputs, base)
        const target = { vectorLanes: o.ob, cores: 2, vectorRegisters: 32, fmaUnits: 2, fmaLatency: 4, l2Bytes: o.l2 }
        const d = t.defaults(knobs, target)
        const [IC, OC] = [o.CB * o.ib, o.OB * o.ob]
        const [OH, OW] = [Math.floor((o.H - 1) / o.stride) + 1, Math.floor((o.W - 1) / o.stride) + 1]
        // the pixels a 1×1 conv reads (IC × OH × OW floats) and its weights (IC × OC floats)
        const stays = IC * OH * OW * 4 <= o.l2 / 2 && IC * OC * 4 > o.l2 / 2
        expect(inputStaysWeightsStream(knobs, o.ob, target)).toBe(stays)
        const projection = IC > OC
        if (projection && stays) both++
        // neither the weights nor the input within half the L2: a row's input (IC × OW floats) decides
        const [weightsFit, rowFits] = [IC * OC * 4 <= o.l2 / 2, IC * OW * 4 <= o.l2 / 2]
        const neither = projection && !weightsFit && !stays
        if (neither && rowFits) rows++
        expect(projectionOrder(knobs, o.ob, target)).toBe(weightsFit ? "inner" : stays ? "outer" : rowFits ? "rows" : "inner")
        // (channel tiles outermost on 2 cores where the weights, a row's input and the row fit the L2: in bands, the band rule's law)
        expect(d.oc_order).toBe(neither ? (rowFits ? "rows" : "inner") : projection && !stays ? "inner" : imageBands(knobs, o.ob, target) ? "rows" : "outer")
        const f = runTirSync(cpuTirPipeline(), lowerSync(t.apply(cc.outputs, base, d)))
        const outs = evaluatePrimFunc(f, cc.inputs)
        assertAllClose(cc.outputs.map((x) => outs.get(x.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
      }),
      lawParams(40),
    )
    expect(both).toBeGreaterThan(0)
    expect(rows).toBeGreaterThan(0)
  })
})

describe("the conv rule's input-channel batches for a projection past the L2 (conv2d_NCHWc defaults, ic_batch)", () => {
  // 1×1 blocked convs of 64–256 input channels (the batch knob's candidates divide them), records
  // whose half L1 and half L2 hold a batch's weights and input or not
  const arbCase = fc.record({
    lanes: fc.constantFrom(8, 16),
    IC: fc.constantFrom(64, 128, 192, 256),
    OB: fc.integer({ min: 1, max: 4 }),
    H: fc.integer({ min: 4, max: 6 }),
    W: fc.integer({ min: 4, max: 6 }),
    l1: fc.constantFrom(1024, 4096, 8192, 16384, 32768, 49152),
    l2: fc.constantFrom(4096, 16384, 65536, 262144, 1 << 20),
    seed: fc.nat(),
  })

  it("runs a projection whose weights and input both exceed half the L2 in the largest batch whose channel tile's weights fit half the L1 and whose input fits half the L2, the channel tiles outermost; the batch's register tile keeps the tile's channel blocks; evaluates equal to the TE", () => {
    let batched = 0
    let l1Bound = 0
    fc.assert(
      fc.property(arbCase, (o) => {
        const cc = blockedConvCase(o.seed, { ib: o.lanes, ob: o.lanes, CB: o.IC / o.lanes, OB: o.OB, H: o.H, W: o.W, K: 1, stride: 1, pad: 0, epilogue: false })
        const base = baseSchedule(cc.outputs)
        const t = templateFor(base)
        const knobs = t.space(cc.outputs, base)
        const target = { vectorLanes: o.lanes, cores: 1, vectorRegisters: 32, fmaUnits: 2, fmaLatency: 4, l1Bytes: o.l1, l2Bytes: o.l2 }
        const d = t.defaults(knobs, target)
        const OC = o.OB * o.lanes
        const candidates = (knobs.find((k) => k.name === "ic_batch")?.candidates ?? []).map(Number)
        // the weights (IC × OC floats) and the input (IC × H × W) both past half the L2
        const past = o.IC > OC && o.IC * OC * 4 > o.l2 / 2 && o.IC * o.H * o.W * 4 > o.l2 / 2
        const blocks = Number(d.tile_oc)
        const inL2 = candidates.filter((b) => b < o.IC && b * o.H * o.W * 4 <= o.l2 / 2)
        const fits = inL2.filter((b) => b * blocks * o.lanes * 4 <= o.l1 / 2)
        const want = past && fits.length ? Math.max(...fits) : undefined
        expect(projectionBatch(knobs, o.lanes, target, blocks)).toBe(fits.length ? Math.max(...fits) : undefined)
        expect(Number(d.ic_batch ?? o.IC)).toBe(want ?? o.IC)
        if (want !== undefined) {
          batched++
          if (Math.max(...inL2) > want) l1Bound++
          expect(d.oc_order).toBe("outer")
        }
        const f = runTirSync(cpuTirPipeline(), lowerSync(t.apply(cc.outputs, base, d)))
        // batched, the tile's sums promoted: every channel block of the tile in it (tile_oc ×
        // tile_oh × tile_ow × lanes), where the tile is not the whole image
        const tiles: number[] = []
        mapStmt(f.body, (x) => {
          if (x.kind === "allocate" && /\.tile\d+$/.test(x.buffer.name)) tiles.push(x.buffer.shape.reduce((a: number, b) => a * Number(b), 1))
          return undefined
        })
        const [tw, th] = [Number(d.tile_ow), Number(d.tile_oh ?? 1)]
        if (want !== undefined && tw * th < o.H * o.W && o.W % tw === 0) expect(tiles).toContain(blocks * th * tw * o.lanes)
        const outs = evaluatePrimFunc(f, cc.inputs)
        assertAllClose(cc.outputs.map((x) => outs.get(x.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
      }),
      lawParams(24),
    )
    expect(batched).toBeGreaterThan(0)
    expect(l1Bound).toBeGreaterThan(0)
  })
})

describe("the conv rule's weight tile (conv2d_NCHWc defaults)", () => {
  // blocked convs of 1 to 3 input blocks, 1×1 or 3×3 kernels, 1 to 4 output blocks; records whose
  // L2 holds from a fraction of one block's weights to all of them (absent: 256 KiB)
  const arbCase = fc.record({
    ib: fc.constantFrom(1, 4, 8),
    ob: fc.constantFrom(4, 8),
    CB: fc.integer({ min: 1, max: 3 }),
    OB: fc.integer({ min: 1, max: 4 }),
    H: fc.integer({ min: 3, max: 6 }),
    W: fc.integer({ min: 3, max: 6 }),
    K: fc.constantFrom(1, 3),
    stride: fc.integer({ min: 1, max: 2 }),
    pad: fc.integer({ min: 0, max: 1 }),
    epilogue: fc.boolean(),
    l2: fc.constantFrom(512, 1024, 2048, 4096, 8192, 16384, 1 << 20, undefined),
    avx512: fc.boolean(),
    seed: fc.nat(),
  })

  it("keeps a tile's output-channel weights within half the record's L2 (one block at least), takes 256 KiB where the record says none, and evaluates equal to the TE", () => {
    fc.assert(
      fc.property(arbCase, (o) => {
        fc.pre(o.W + 2 * o.pad >= o.K && o.H + 2 * o.pad >= o.K)
        const cc = blockedConvCase(o.seed, o)
        const base = baseSchedule(cc.outputs)
        const t = templateFor(base)
        expect(t.name).toBe("conv2d_NCHWc")
        const knobs = t.space(cc.outputs, base)
        const record = o.avx512 ? { vectorLanes: 16, cores: 2, vectorRegisters: 32, fmaUnits: 1, fmaLatency: 4 } : { vectorLanes: 8, cores: 2, vectorRegisters: 16, fmaUnits: 2, fmaLatency: 4 }
        const target = o.l2 === undefined ? record : { ...record, l2Bytes: o.l2 }
        const d = t.defaults(knobs, target)
        // a block's weights: every input channel and tap for the block's lanes, fp32
        const blockBytes = o.CB * o.ib * o.K * o.K * o.ob * 4
        const half = (o.l2 ?? 256 * 1024) / 2
        expect(Number(d.tile_oc) === 1 || Number(d.tile_oc) * blockBytes <= half).toBe(true)
        if (o.l2 === undefined) expect(d).toEqual(t.defaults(knobs, { ...record, l2Bytes: 256 * 1024 }))
        const f = runTirSync(cpuTirPipeline(), lowerSync(t.apply(cc.outputs, base, d)))
        const outs = evaluatePrimFunc(f, cc.inputs)
        assertAllClose(cc.outputs.map((x) => outs.get(x.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
      }),
      lawParams(30),
    )
  })

  it("a record whose L2 holds several blocks' weights lets the register tile take them: the tile of the unbounded cap where its blocks fit", () => {
    fc.assert(
      fc.property(arbCase, (o) => {
        fc.pre(o.W + 2 * o.pad >= o.K && o.H + 2 * o.pad >= o.K)
        const cc = blockedConvCase(o.seed, o)
        const base = baseSchedule(cc.outputs)
        const t = templateFor(base)
        const knobs = t.space(cc.outputs, base)
        const record = o.avx512 ? { vectorLanes: 16, cores: 2, vectorRegisters: 32, fmaUnits: 1, fmaLatency: 4 } : { vectorLanes: 8, cores: 2, vectorRegisters: 16, fmaUnits: 2, fmaLatency: 4 }
        const blockBytes = o.CB * o.ib * o.K * o.K * o.ob * 4
        const free = t.defaults(knobs, { ...record, l2Bytes: 2 ** 40 })
        const d = t.defaults(knobs, { ...record, l2Bytes: o.l2 ?? 256 * 1024 })
        // the cap binds only where the unbounded tile's weights pass half the L2 (the channel tile
        // order reads the L2 too: its own law above)
        if (Number(free.tile_oc) * blockBytes <= (o.l2 ?? 256 * 1024) / 2) expect({ ...d, oc_order: undefined }).toEqual({ ...free, oc_order: undefined })
      }),
      lawParams(60),
    )
  })

  // records of 1 or 2 FMA pipes, latency 3 to 5, at 8 or 16 lanes: the accumulators the pipes want
  // (pipes × lanes / block × latency) from 3 to 40
  // and L2s of 1 to 9 blocks' weights (half of them: 0 to 4 blocks)
  const arbPipes = fc.record({ units: fc.integer({ min: 1, max: 2 }), latency: fc.integer({ min: 3, max: 5 }), l2Blocks: fc.integer({ min: 1, max: 9 }) })
  /** The conv rule's defaults on a record of these pipes and L2, checked; whether they took more blocks than half the L2 holds. */
  const pastHalf = (o: typeof arbCase extends fc.Arbitrary<infer T> ? T : never, p: { units: number; latency: number; l2Blocks: number }) => {
    const cc = blockedConvCase(o.seed, o)
    const base = baseSchedule(cc.outputs)
    const t = templateFor(base)
    const knobs = t.space(cc.outputs, base)
    const blockBytes = o.CB * o.ib * o.K * o.K * o.ob * 4
    const l2 = p.l2Blocks * blockBytes
    const target = { vectorLanes: o.avx512 ? 16 : 8, cores: 2, vectorRegisters: o.avx512 ? 32 : 16, fmaUnits: p.units, fmaLatency: p.latency, l2Bytes: l2 }
    const d = t.defaults(knobs, target)
    // (the row's width: an FMA target's tile takes the widths that divide it, not the tail tiles)
    const ow = Math.floor((o.W + 2 * o.pad - o.K) / o.stride) + 1
    const choices = { cols: candidatesOf(knobs, "tile_ow"), colsExtent: ow, rows: candidatesOf(knobs, "tile_oh"), blocks: candidatesOf(knobs, "tile_oc") }
    const wanted = p.units * Math.max(1, Math.floor(target.vectorLanes / o.ob)) * p.latency
    const acc = (x: { cols: number; rows: number; blocks: number }) => x.cols * x.rows * x.blocks
    // the register tile under a cap of b blocks; the caps of half the L2 (one block at least) and of the whole
    const at = (b: number) => convRegisterTile(target, o.ob, { ...choices, blockCap: b })
    const half = Math.max(1, Math.floor(l2 / 2 / blockBytes))
    const whole = Math.max(1, Math.floor(l2 / blockBytes))
    const toc = Number(d.tile_oc)
    const tile = Number(d.tile_ow) * Number(d.tile_oh ?? 1) * toc
    const past = toc > half && acc(at(half)) < wanted
    if (!past) {
      // within half the L2: the weight tile's rule as before
      expect(toc === 1 || toc * blockBytes <= l2 / 2).toBe(true)
    } else {
      // past half: within the whole L2, the tile holds what the pipes want, and no fewer blocks' cap gives such a tile
      expect(toc * blockBytes).toBeLessThanOrEqual(l2)
      expect(tile).toBeGreaterThanOrEqual(wanted)
      for (const b of choices.blocks.filter((b) => b > half && b < toc)) expect(acc(at(b))).toBeLessThan(wanted)
    }
    // where some cap past half the L2 and within the whole gives a tile that holds them, the default's does
    if (acc(at(half)) < wanted && choices.blocks.some((b) => b > half && b <= whole && acc(at(b)) >= wanted)) expect(tile).toBeGreaterThanOrEqual(wanted)
    return { cc, base, t, d, past }
  }

  it("takes more blocks than half the L2 holds only where every tile within it leaves the FMA pipes short of accumulators: the fewest, their weights within the whole L2, with which a tile holds them", () => {
    let past = 0
    fc.assert(
      fc.property(arbCase, arbPipes, (o, p) => {
        // (one input channel is a depthwise conv to the rule, whose AVX-512 tile is its measured exception)
        fc.pre(o.W + 2 * o.pad >= o.K && o.H + 2 * o.pad >= o.K && o.CB * o.ib > 1)
        if (pastHalf(o, p).past) past++
      }),
      lawParams(400),
    )
    // (the rule fired on some of the cases: the law is not about the first branch alone)
    expect(past).toBeGreaterThan(0)
  })

  it("its tiles past half the L2 evaluate equal to the TE", () => {
    fc.assert(
      fc.property(arbCase, arbPipes, (o, p) => {
        fc.pre(o.W + 2 * o.pad >= o.K && o.H + 2 * o.pad >= o.K && o.CB * o.ib > 1)
        const { cc, base, t, d } = pastHalf(o, p)
        const f = runTirSync(cpuTirPipeline(), lowerSync(t.apply(cc.outputs, base, d)))
        const outs = evaluatePrimFunc(f, cc.inputs)
        assertAllClose(cc.outputs.map((x) => outs.get(x.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
      }),
      lawParams(30),
    )
  })
})

describe("the conv register tile (convRegisterTile)", () => {
  it("lies in the candidates, holds at most half the registers (one block with 16 or fewer), keeps one row where one row holds half the accumulators the FMA pipes want, takes the largest share of the FMA peak its loads and the FMA latency allow, and loads the fewest bytes per FMA among those", () => {
    fc.assert(
      fc.property(
        fc.record({
          lanes: fc.constantFrom(4, 8, 16),
          registers: fc.constantFrom(16, 32),
          fmaUnits: fc.integer({ min: 1, max: 2 }),
          fmaLatency: fc.integer({ min: 3, max: 6 }),
          blockShare: fc.constantFrom(1, 2, 4),
          ow: fc.integer({ min: 1, max: 200 }),
          oh: fc.integer({ min: 1, max: 120 }),
          ocb: fc.integer({ min: 1, max: 64 }),
          blockCap: fc.integer({ min: 1, max: 9 }),
          depthwise: fc.boolean(),
        }),
        (o) => {
          const target = { vectorLanes: o.lanes, cores: 1, vectorRegisters: o.registers, fmaUnits: o.fmaUnits, fmaLatency: o.fmaLatency }
          const block = Math.max(1, o.lanes / o.blockShare)
          const choices = { cols: divisors(o.ow, 32), rows: divisors(o.oh, 8), blocks: divisors(o.ocb, 8), blockCap: o.blockCap }
          const t = convRegisterTile(target, block, choices, o.depthwise)
          expect(choices.cols).toContain(t.cols)
          expect(choices.rows).toContain(t.rows)
          expect(t.blocks === 1 || (choices.blocks.includes(t.blocks) && t.blocks <= o.blockCap && o.registers > 16)).toBe(true)
          // every tile the rule allows, enumerated here: at most half the registers of accumulators
          const legal = choices.blocks
            .filter((b) => b <= o.blockCap && (o.registers > 16 || b === 1))
            .flatMap((b) => choices.rows.flatMap((r) => choices.cols.map((c) => ({ c, r, b, acc: c * r * b }))))
            .filter((x) => x.acc <= o.registers / 2)
          const chosen = legal.find((x) => x.c === t.cols && x.r === t.rows && x.b === t.blocks)
          expect(chosen).toBeDefined()
          // FMAs a cycle at the block's width; a step of the tile: its FMAs over them, its loads
          // (a broadcast per position, or an input vector per FMA when depthwise, and a weight
          // vector per block, or per FMA where gcc folds them) over as many load ports, and the FMA latency
          const rate = o.fmaUnits * (o.lanes / block)
          const need = rate * o.fmaLatency
          // (gcc folds the weights of two or more blocks into every FMA across at most GCC_FOLDED_POSITIONS positions)
          const loads = (x: { c: number; r: number; b: number; acc: number }) => (o.depthwise ? x.acc : x.c * x.r) + (!o.depthwise && x.b > 1 && x.c * x.r <= GCC_FOLDED_POSITIONS ? x.acc : x.b)
          const share = (x: { c: number; r: number; b: number; acc: number }) => x.acc / rate / Math.max(x.acc / rate, loads(x) / rate, o.fmaLatency)
          // one row where a one-row tile holds half the accumulators the pipes want
          const oneRow = legal.some((x) => x.r === 1 && Math.min(x.acc, need) >= need / 2)
          if (oneRow) expect(chosen!.r).toBe(1)
          const allowed = oneRow ? legal.filter((x) => x.r === 1) : legal
          const best = Math.max(...allowed.map(share))
          expect(share(chosen!)).toBeCloseTo(best, 10)
          // (where a tile keeps the pipes busy, neither its loads nor the latency bound the chosen one)
          if (best === 1) {
            expect(loads(chosen!)).toBeLessThanOrEqual(chosen!.acc)
            expect(chosen!.acc).toBeGreaterThanOrEqual(need)
          }
          const pool = allowed.filter((x) => Math.abs(share(x) - best) < 1e-12)
          const bytes = (x: { c: number; r: number; b: number }) => (4 * block) / (x.c * x.r) + (o.depthwise ? 4 * block : 4 / x.b)
          expect(bytes(chosen!)).toBeCloseTo(Math.min(...pool.map(bytes)), 10)
        },
      ),
      lawParams(300),
    )
    // this machine's shapes (Zen 4: 32 registers, one 512-bit FMA pipe of latency 4, two at 256
    // bits): ResNet-18's stem (112 columns, 4 blocks of 16) 8 columns of two blocks — one block
    // would broadcast for every FMA, a load more than its FMAs each step; its Winograd products at
    // 56×56 (196 tiles, 4 blocks) 7 tiles × 2 blocks, at 7×7 (16 tiles, 32 blocks) 8 × 2; RegNet's
    // 440 channels in blocks of 8 on a 7×7 image want 8 accumulators: 7 columns of one block come
    // closest (five blocks would not fit the registers)
    const zen4 = { vectorLanes: 16, cores: 1, vectorRegisters: 32, fmaUnits: 1, fmaLatency: 4 }
    expect(convRegisterTile(zen4, 16, { cols: divisors(112, 32), rows: divisors(112, 8), blocks: divisors(4, 8) })).toEqual({ cols: 8, rows: 1, blocks: 2 })
    expect(convRegisterTile(zen4, 16, { cols: divisors(196, 16), blocks: divisors(4, 8) })).toEqual({ cols: 7, rows: 1, blocks: 2 })
    expect(convRegisterTile(zen4, 16, { cols: divisors(16, 16), blocks: divisors(32, 8) })).toEqual({ cols: 8, rows: 1, blocks: 2 })
    expect(convRegisterTile(zen4, 8, { cols: [1, 7], rows: [1, 7], blocks: [1, 5], blockCap: 9 })).toEqual({ cols: 7, rows: 1, blocks: 1 })
    // few positions of several blocks: gcc folds every weight load into its FMA — MobileNetV2's
    // 144 -> 24 projection at 56×56 in blocks of 8 (3 blocks) and EfficientNet-B0's 1×1 conv to 80
    // channels at 14×14 (5 blocks) keep one block across 14 columns, not 4 × 3 or 2 × 5
    expect(convRegisterTile(zen4, 8, { cols: divisors(56, 32), rows: divisors(56, 8), blocks: [1, 3] })).toEqual({ cols: 14, rows: 1, blocks: 1 })
    expect(convRegisterTile(zen4, 16, { cols: divisors(14, 32), rows: divisors(14, 8), blocks: [1, 5] })).toEqual({ cols: 14, rows: 1, blocks: 1 })
    // AVX2 (16 registers, two pipes of latency 4): one block, 8 columns
    const avx2 = { vectorLanes: 8, cores: 1, vectorRegisters: 16, fmaUnits: 2, fmaLatency: 4 }
    expect(convRegisterTile(avx2, 8, { cols: divisors(56, 32), rows: divisors(56, 8), blocks: divisors(8, 8) })).toEqual({ cols: 8, rows: 1, blocks: 1 })
  })
})

describe("the conv register tile without a fused multiply-add (mulAddRegisterTile: WebAssembly SIMD128)", () => {
  it("lies in the candidates, keeps the accumulators, a broadcast a position, a weight vector a block and the product in the registers the engine allocates, keeps one row where one row holds half the accumulators the adds want, saturates them where a tile can, and loads the fewest operands per product over a row, its last tile cut short where the width does not divide it", () => {
    fc.assert(
      fc.property(
        fc.record({
          lanes: fc.constantFrom(4, 8),
          registers: fc.constantFrom(8, 16, 32),
          fmaUnits: fc.integer({ min: 1, max: 2 }),
          fmaLatency: fc.integer({ min: 3, max: 6 }),
          ow: fc.integer({ min: 1, max: 120 }),
          oh: fc.integer({ min: 1, max: 120 }),
          ocb: fc.integer({ min: 1, max: 64 }),
          blockCap: fc.integer({ min: 1, max: 9 }),
          tails: fc.boolean(),
        }),
        (o) => {
          const target = { vectorLanes: o.lanes, cores: 1, vectorRegisters: o.registers, fmaUnits: o.fmaUnits, fmaLatency: o.fmaLatency, fusedMultiplyAdd: false }
          const choices = { cols: o.tails ? columnTiles(o.ow) : divisors(o.ow, 32), ...(o.tails ? { colsExtent: o.ow } : {}), rows: divisors(o.oh, 8), blocks: divisors(o.ocb, 8), blockCap: o.blockCap }
          const t = convRegisterTile(target, o.lanes, choices)
          expect(t).toEqual(mulAddRegisterTile(target, o.lanes, choices))
          expect(choices.cols).toContain(t.cols)
          expect(choices.rows).toContain(t.rows)
          expect(choices.blocks).toContain(t.blocks)
          // every tile the rule allows, enumerated here: accumulators + a broadcast a position (one,
          // with one block) + a weight vector a block + the product, within the registers less V8's scratch one
          const legal = choices.blocks
            .filter((b) => b <= o.blockCap)
            .flatMap((b) => choices.rows.flatMap((r) => choices.cols.map((c) => ({ c, r, b, acc: c * r * b }))))
            .filter((x) => x.acc + (x.b > 1 ? x.c * x.r : 1) + x.b + 1 <= o.registers - 1 || x.acc === 1)
          const chosen = legal.find((x) => x.c === t.cols && x.r === t.rows && x.b === t.blocks)
          expect(chosen).toBeDefined()
          const need = o.fmaUnits * o.fmaLatency
          const sat = (x: { acc: number }) => Math.min(x.acc, need)
          const oneRow = legal.some((x) => x.r === 1 && sat(x) >= need / 2)
          if (oneRow) expect(chosen!.r).toBe(1)
          const allowed = oneRow ? legal.filter((x) => x.r === 1) : legal
          const best = Math.max(...allowed.map(sat))
          expect(sat(chosen!)).toBe(best)
          // a row's tiles: ⌊ow / c⌋ whole ones and a last one of the rest
          const loads = (x: { c: number; r: number; b: number }) => {
            let sum = 0
            for (let col = 0; col < o.ow; col += x.c) {
              const w = Math.min(x.c, o.ow - col)
              sum += w * x.r + x.b
            }
            return sum / (o.ow * x.r * x.b)
          }
          expect(loads(chosen!)).toBeCloseTo(Math.min(...allowed.filter((x) => sat(x) === best).map(loads)), 10)
        },
      ),
      lawParams(300),
    )
    // WebAssembly SIMD128's record (4 lanes, 16 registers, nominally 1 pipe × latency 4): MobileNetV2's
    // 1×1 convs take 4 columns × 2 blocks at 112 and 56 columns (0.75 loads a product; 8 columns of one
    // block 1.125), 2 columns × 4 blocks at 14, and at 7 columns 4 × 2 with a tail of 3 (0.79; 7
    // columns of one block 1.14); a depthwise conv keeps convRegisterTile's rule, over the divisors
    const simd128 = { vectorLanes: 4, cores: 1, vectorRegisters: 16, fmaUnits: 1, fmaLatency: 4, fusedMultiplyAdd: false }
    expect(convRegisterTile(simd128, 4, { cols: columnTiles(112), colsExtent: 112, rows: divisors(112, 8), blocks: divisors(24, 8), blockCap: 8 })).toEqual({ cols: 4, rows: 1, blocks: 2 })
    expect(convRegisterTile(simd128, 4, { cols: columnTiles(14), colsExtent: 14, rows: divisors(14, 8), blocks: divisors(24, 8), blockCap: 8 })).toEqual({ cols: 2, rows: 1, blocks: 4 })
    expect(convRegisterTile(simd128, 4, { cols: columnTiles(7), colsExtent: 7, rows: divisors(7, 8), blocks: divisors(240, 8), blockCap: 8 })).toEqual({ cols: 4, rows: 1, blocks: 2 })
    const { fusedMultiplyAdd: _, ...withFma } = simd128
    expect(convRegisterTile(simd128, 4, { cols: columnTiles(112), colsExtent: 112, rows: divisors(112, 8), blocks: divisors(24, 8) }, true)).toEqual(convRegisterTile(withFma, 4, { cols: divisors(112, 32), rows: divisors(112, 8), blocks: divisors(24, 8) }, true))
  })

  it("the conv rule's defaults on such a target evaluate equal to the TE (random blocked convs, strides, pads, epilogues)", () => {
    fc.assert(
      fc.property(
        fc.record({
          ib: fc.constantFrom(1, 4),
          ob: fc.constantFrom(4),
          CB: fc.integer({ min: 1, max: 3 }),
          OB: fc.integer({ min: 1, max: 4 }),
          H: fc.integer({ min: 3, max: 9 }),
          W: fc.integer({ min: 3, max: 9 }),
          K: fc.constantFrom(1, 3),
          stride: fc.integer({ min: 1, max: 2 }),
          pad: fc.integer({ min: 0, max: 1 }),
          epilogue: fc.boolean(),
          seed: fc.nat(),
        }),
        (o) => {
          fc.pre(o.W + 2 * o.pad >= o.K && o.H + 2 * o.pad >= o.K)
          const cc = blockedConvCase(o.seed, o)
          const base = baseSchedule(cc.outputs)
          const t = templateFor(base)
          const d = t.defaults(t.space(cc.outputs, base), { vectorLanes: 4, cores: 2, vectorRegisters: 16, fmaUnits: 1, fmaLatency: 4, fusedMultiplyAdd: false })
          const f = runTirSync(cpuTirPipeline(), lowerSync(t.apply(cc.outputs, base, d)))
          const outs = evaluatePrimFunc(f, cc.inputs)
          assertAllClose(cc.outputs.map((x) => outs.get(x.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
        },
      ),
      lawParams(40),
    )
  })
})

describe("the rfactor rule", () => {
  const arbLong = fc.record({
    seed: fc.integer({ min: 0, max: 0x7fffffff }),
    rows: fc.integer({ min: 1, max: 3 }),
    cols: fc.integer({ min: 1, max: 2 }),
    r: fc.integer({ min: 1, max: 300 }),
    max: fc.boolean(),
    mean: fc.boolean(),
  })
  const arbTarget = fc.record({
    vectorLanes: fc.constantFrom(1, 4, 8, 16),
    cores: fc.integer({ min: 1, max: 8 }),
    fmaUnits: fc.integer({ min: 1, max: 2 }),
    fmaLatency: fc.integer({ min: 3, max: 5 }),
  })

  /** A config of the rfactor rule: one rfactor stage per factor it asks for, and the lowered TIR evaluates equal to the TE. */
  const checkRfactorConfig = (t: Template, cc: { readonly outputs: readonly ComputeTensor[]; readonly inputs: ReadonlyMap<string, Tensor> }, base: S.Schedule, config: Config): void => {
    const s = t.apply(cc.outputs, base, config)
    const asked = (Number(config.rf_inner ?? 1) > 1 ? 1 : 0) + (Number(config.rf_parts ?? 1) > 1 ? 1 : 0)
    expect(s.steps.filter((x) => x.prim === "rfactor").length).toBe(asked)
    const outs = evaluatePrimFunc(runTirSync(cpuTirPipeline(), lowerSync(s)), cc.inputs)
    assertAllClose(cc.outputs.map((x) => outs.get(x.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
  }

  it("every configuration of its knobs, and its defaults on random targets, evaluate equal to the TE: partials that do not divide the axis, max and mean too", () => {
    fc.assert(
      fc.property(arbLong, arbTarget, fc.nat(), fc.nat(), fc.boolean(), (o, target, pi, pp, useDefaults) => {
        const cc = longReductionCase(o.seed, o)
        const base = baseSchedule(cc.outputs)
        const t = templateFor(base)
        expect(t).toBe(innerReductionTemplate)
        const knobs = t.space(cc.outputs, base)
        const inner = knobs.find((k) => k.name === "rf_inner")!
        const parts = knobs.find((k) => k.name === "rf_parts")!
        const config: Config = useDefaults ? t.defaults(knobs, target) : { rf_inner: inner.candidates[pi % inner.candidates.length], rf_parts: parts.candidates[pp % parts.candidates.length] }
        checkRfactorConfig(t, cc, base, config)
      }),
      lawParams(60),
    )
  })

  it("a one-row product of few columns (vectors across its outputs, chains of partials unrolled) evaluates equal to the TE at every rfactor knob and at its defaults on random targets", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0x7fffffff }), fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 300 }), arbTarget, fc.nat(), fc.nat(), fc.boolean(), (seed, n, kk, target, pi, pp, useDefaults) => {
        const cc = denseRowCase(seed, n, kk)
        const base = baseSchedule(cc.outputs)
        // (the matmul rule hands one row to the reduction template)
        const t = templateFor(base)
        const knobs = t.space(cc.outputs, base)
        expect(knobs.map((k) => k.name)).toEqual(reductionTemplate.space(cc.outputs, base).map((k) => k.name))
        const inner = knobs.find((k) => k.name === "rf_inner")!
        const parts = knobs.find((k) => k.name === "rf_parts")!
        const defaults = t.defaults(knobs, target)
        const config: Config = useDefaults ? defaults : { ...defaults, rf_inner: inner.candidates[pi % inner.candidates.length], rf_parts: parts.candidates[pp % parts.candidates.length] }
        checkRfactorConfig(t, cc, base, config)
      }),
      lawParams(60),
    )
  })

  it("fires where the outputs leave cores or FMA chains idle, from the target record: partials for the threads where outputs < cores, contiguous partials where a core has fewer sums than pipes × latency", () => {
    fc.assert(
      fc.property(arbLong, arbTarget, (o, target) => {
        // (long enough for any partials: parts and inner partials up to 64 each, twice over)
        const r = (o.r + 128) * 64
        const cc = longReductionCase(o.seed, { ...o, r })
        const base = baseSchedule(cc.outputs)
        const knobs = innerReductionTemplate.space(cc.outputs, base)
        const d = innerReductionTemplate.defaults(knobs, target)
        const outputs = o.rows * o.cols
        const need = target.fmaUnits * target.fmaLatency
        const p = Number(d.rf_parts)
        const f = Number(d.rf_inner)
        // parts exactly where the outputs leave a core idle, then enough for every core
        if (outputs >= target.cores || !RF_PARTS_BY_DEFAULT) expect(p).toBe(1)
        else expect(outputs * p).toBeGreaterThanOrEqual(target.cores)
        // contiguous partials exactly where a core has fewer sums than pipes × latency: whole
        // vectors, as many chains as are missing where the vectorizer's 64 allow
        const perCore = Math.max(1, Math.floor(outputs / target.cores))
        if (perCore >= need) expect(f).toBe(1)
        else {
          expect(f % target.vectorLanes).toBe(0)
          expect(f).toBeGreaterThanOrEqual(Math.min(64, target.vectorLanes * Math.ceil(need / perCore)))
        }
      }),
      lawParams(200),
    )
  })
})
