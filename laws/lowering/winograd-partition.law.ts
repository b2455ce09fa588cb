// The Winograd template's partition over the cores (winograd_NCHWc's `image_parts` knob): split in
// as many parts as the threads, every stage of the conv — the padded copy, the input transform V, the products M, the output —
// hands a core the same part of the image, so no core reads a V or M element another core wrote,
// and of the padded copy only the halo rows (counted by crossCoreReads: the loop nest run as the c
// target's OpenMP static split runs it); by positions, a core reads half of them from the other. The rule reads the record's cores and leaves
// the one-core schedule as it was; every partition evaluates equal to the TE.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attr } from "../../src/ast/graph/attrs.js"
import { prng } from "../../src/ast/graph/arbitrary.js"
import { makeGraph, node, type Graph } from "../../src/ast/graph/graph.js"
import { tensor, type Tensor } from "../../src/ast/graph/tensor.js"
import { makeTarget } from "../../src/ast/target.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { crossCoreReads, staticOwner } from "../../src/ast/tir/cross-core-reads.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import type { PrimFunc } from "../../src/ast/tir/tir.js"
import { baseSchedule, buildGroupTE } from "../../src/lowering/lower-group.js"
import { lowerSync } from "../../src/lowering/lower.js"
import type { Config, ScheduleTarget } from "../../src/lowering/templates/template.js"
import { winogradTemplate } from "../../src/lowering/templates/winograd.js"
import { cpuTirPipeline } from "../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../src/lowering/tir/tir-pass.js"
import { compileGraph } from "../../src/pipeline.js"
import { assertAllClose, lawParams } from "../support.js"

/** A 3×3 stride-1 conv (and Relu) on [1, C, H, H] that the Winograd rewrite takes (F(4×4) from 14×14). */
const convGraph = (C: number, O: number, H: number, seed: number): Graph => {
  const rng = prng(seed)
  const w = tensor("float32", [O, C, 3, 3], Float32Array.from({ length: O * C * 9 }, () => rng.float(-1, 1)))
  return makeGraph({
    opset: 13,
    inputs: [{ name: "x", type: { dtype: "float32", shape: [1, C, H, H] } }],
    outputs: [{ name: "y", type: { dtype: "float32", shape: [] } }],
    initializers: new Map([["w", w]]),
    nodes: [node("Conv", ["x", "w"], ["c"], { kernel_shape: attr.ints([3, 3]), pads: attr.ints([1, 1, 1, 1]) }), node("Relu", ["c"], ["y"])],
  })
}

/** The Winograd group of the compiled conv: its TE, base schedule, space and placeholders' values. */
const winogradGroup = async (C: number, O: number, H: number, lanes: number, seed: number) => {
  const program = await Effect.runPromise(compileGraph(convGraph(C, O, H, seed), makeTarget("js", { vectorLanes: lanes }), { optLevel: 3 }))
  const group = program.fused.groups.find((g) => g.ops.includes("ConvWinogradNCHWc"))!
  const te = buildGroupTE(program.fused, group)
  const base = baseSchedule(te.outputs)
  const knobs = winogradTemplate.space(te.outputs, base)
  const rng = prng(seed + 1)
  const feeds = new Map<string, Tensor>()
  for (const [p, v] of te.placeholders) {
    const shape = program.graph.valueTypes.get(v)!.shape as number[]
    feeds.set(p, program.graph.initializers.get(v) ?? tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1))))
  }
  const lowered = (config: Config): PrimFunc => runTirSync(cpuTirPipeline(), lowerSync(winogradTemplate.apply(te.outputs, base, config)))
  return { te, knobs, feeds, lowered }
}

const record = (cores: number, lanes: number): ScheduleTarget => ({ vectorLanes: lanes, cores, fmaUnits: 2, fmaLatency: 4, vectorRegisters: 32 })
/** Reads of the kernel's global intermediates (the padded copy, V, M): all, and those of another core's elements. */
const intermediateReads = (f: PrimFunc, cores: number): { reads: number; remote: number } => {
  const params = new Set(f.params.map((p) => p.name))
  const r = crossCoreReads(f, cores)
  const sum = (m: ReadonlyMap<string, number>) => [...m].filter(([b]) => !params.has(b)).reduce((a, [, n]) => a + n, 0)
  return { reads: sum(r.reads), remote: sum(r.remote) }
}

describe("the Winograd rule's partition over the cores (image_parts)", () => {
  it("OpenMP's static split: contiguous chunks, the first extent mod cores threads one iteration more", () => {
    expect([0, 1, 2, 3, 4, 5, 6].map((i) => staticOwner(i, 7, 2))).toEqual([0, 0, 0, 0, 1, 1, 1])
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((i) => staticOwner(i, 8, 3))).toEqual([0, 0, 0, 1, 1, 1, 2, 2])
    expect([0, 1].map((i) => staticOwner(i, 2, 4))).toEqual([0, 1])
  })

  it("in as many parts as cores (2 or 4), where its groups of input tiles split evenly over them, a core reads only the V and M elements it wrote and of the padded copy's another core wrote only the halo rows its tiles share (under 2% of the reads); by positions, the defaults, a third or more come from another core; in bands (the defaults on more than one core) a core writes whole rows of the output", async () => {
    // 16 input tiles of 4×4 at 16×16, 36 at 24×24, 64 at 32×32
    for (const [H, cores] of [[16, 2], [24, 2], [32, 4]] as const) {
      const lanes = 4
      const g = await winogradGroup(16, 16, H, lanes, H * cores)
      const defaults = winogradTemplate.defaults(g.knobs, record(cores, lanes))
      expect(defaults.at_tiles).toBe(false)
      expect(defaults.image_parts).toBe(1)
      // (bands on more than one core: the padded copy and the output by rows; one core as it was)
      expect(defaults.bands).toBe(true)
      expect(winogradTemplate.defaults(g.knobs, record(1, lanes)).bands).toBe(false)
      const tiles = g.knobs.find((k) => k.name === "tile_p")!
      expect(tiles.kind === "split" && (tiles.extent / Number(defaults.tile_p)) % cores === 0, `${H}×${H}: tile groups split evenly`).toBe(true)
      const image = intermediateReads(g.lowered({ ...defaults, image_parts: cores }), cores)
      expect(image.reads).toBeGreaterThan(0)
      expect(image.remote / image.reads, `${H}×${H} on ${cores} cores: reads of another core's elements`).toBeLessThan(0.02)
      const positions = intermediateReads(g.lowered(defaults), cores)
      expect(positions.remote / positions.reads).toBeGreaterThan(0.3)
      // (in bands a core writes whole rows of the output, but the row its split falls in; by channel blocks both cores write every row)
      const rowsShared = (f: PrimFunc): number => {
        const out = f.params[f.params.length - 1]
        const [, , OH, OW, ob] = out.view?.shape ?? out.shape
        const byRow = new Map<number, Set<number>>()
        for (const [idx, w] of crossCoreReads(f, cores).writers.get(out.name)!) {
          const at = idx.split(",").map(Number)
          const y = at.length === 5 ? at[2] : Math.floor(at[0] / (OW * ob)) % OH
          byRow.set(y, (byRow.get(y) ?? new Set()).add(w))
        }
        return [...byRow.values()].filter((ws) => ws.size > 1).length
      }
      expect(rowsShared(g.lowered(defaults))).toBeLessThanOrEqual(cores - 1)
      expect(rowsShared(g.lowered({ ...defaults, bands: false }))).toBe(H)
    }
  }, 120_000)

  it("every partition, parts that do not divide the tile groups too, and the bands (copy and output by rows), evaluates equal to the TE", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(14, 18), fc.constantFrom(1, 2, 4, 8), fc.boolean(), fc.nat(1000), async (H, parts, bands, seed) => {
        const g = await winogradGroup(16, 16, H, 4, seed)
        const config = { ...winogradTemplate.defaults(g.knobs, record(1, 4)), image_parts: parts, bands }
        const outs = evaluatePrimFunc(g.lowered(config), g.feeds)
        assertAllClose(g.te.outputs.map((o) => outs.get(o.name)!), evaluateTE(g.te.outputs, g.feeds), 1e-4, 1e-4)
      }),
      lawParams(6),
    )
  }, 120_000)

  it("at_tiles — V, the products and the output transform per row of input tiles, inside the output's loop — evaluates equal to the TE (and bit-equal to the form at root) at every register tile, with and without bands", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(14, 18, 7), fc.nat(100), fc.boolean(), fc.nat(1000), async (H, pick, bands, seed) => {
        const g = await winogradGroup(16, 32, H, 4, seed)
        const tileP = g.knobs.find((k) => k.name === "tile_p")!.candidates
        const tileOc = g.knobs.find((k) => k.name === "tile_oc")!.candidates
        const config = { ...winogradTemplate.defaults(g.knobs, record(2, 4)), tile_p: tileP[pick % tileP.length], tile_oc: tileOc[(pick >> 3) % tileOc.length], bands, at_tiles: true }
        const outs = evaluatePrimFunc(g.lowered(config), g.feeds)
        assertAllClose(g.te.outputs.map((o) => outs.get(o.name)!), evaluateTE(g.te.outputs, g.feeds), 1e-4, 1e-4)
        // (the same sums in the same order as the form at root: equal to it bit for bit)
        const root = evaluatePrimFunc(g.lowered({ ...config, at_tiles: false }), g.feeds)
        for (const o of g.te.outputs) expect(Array.from(outs.get(o.name)!.data as Float32Array)).toEqual(Array.from(root.get(o.name)!.data as Float32Array))
      }),
      lawParams(10),
    )
  }, 120_000)

  it("at_tiles: V and M are each core's own scratch (no whole-image buffer another core wrote); with bands only the padded copy's halo rows cross cores, where by positions a third or more of the intermediates' reads do", async () => {
    for (const [C, H] of [[16, 14], [32, 18]] as const) {
      const g = await winogradGroup(C, C, H, 4, 7)
      const defaults = winogradTemplate.defaults(g.knobs, record(2, 4))
      expect(defaults.at_tiles).toBe(false)
      const f = g.lowered({ ...defaults, at_tiles: true })
      const r = crossCoreReads(f, 2)
      const counted = [...r.reads.keys()].filter((b) => !f.params.some((p) => p.name === b))
      expect(counted.some((b) => /wino_(V|M)/.test(b))).toBe(false)
      const fused = intermediateReads(f, 2)
      const root = intermediateReads(g.lowered(defaults), 2)
      expect(root.remote).toBeGreaterThanOrEqual(root.reads / 3)
      expect(fused.remote).toBeLessThanOrEqual(fused.reads * 0.2)
      expect(fused.remote * 10).toBeLessThan(root.remote)
    }
  }, 120_000)
})
