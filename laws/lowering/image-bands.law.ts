// The band rule (conv2d_NCHWc's oc_order "rows", winograd_NCHWc's `bands`):
// on more than one core, a conv whose weights fit half the record's L2 splits its parallel loop by
// rows of the image — every channel tile of a band on one core, its padded copy split by rows too —
// so through a chain of such kernels a core reads back the band it wrote (counted by
// crossCoreReads across the kernels' seams, the loop nests run as the c target splits them); with
// the channel tiles outermost, each core writes half the channels of the whole image and the next
// kernel reads half its input from the other core. One core, or weights past half the L2: the
// schedule as it was. Every order evaluates equal to the TE.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { blockedConvCase } from "../../src/ast/te/arbitrary.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { crossCoreReads, type Writers } from "../../src/ast/tir/cross-core-reads.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import type { PrimFunc } from "../../src/ast/tir/tir.js"
import { baseSchedule } from "../../src/lowering/lower-group.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { imageBands } from "../../src/lowering/templates/conv2d-nchwc.js"
import { templateFor } from "../../src/lowering/templates/template-for.js"
import type { Config, ScheduleTarget } from "../../src/lowering/templates/template.js"
import { cpuTirPipeline } from "../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../src/lowering/tir/tir-pass.js"
import { assertAllClose, lawParams } from "../support.js"

const record = (cores: number, l2Bytes: number): ScheduleTarget => ({ vectorLanes: 4, cores, fmaUnits: 2, fmaLatency: 4, vectorRegisters: 32, l2Bytes })

interface Shape { readonly CB: number; readonly OB: number; readonly H: number; readonly W: number; readonly K: number; readonly groups?: number }

/** A blocked conv (4 lanes in and out) of `o`, its template's space, defaults on `target`, and its kernel lowered at a config. */
const convKernel = (seed: number, o: Shape, target: ScheduleTarget) => {
  const cc = blockedConvCase(seed, { ib: 4, ob: 4, ...o, stride: 1, epilogue: false })
  const base = baseSchedule(cc.outputs)
  const t = templateFor(base)
  const knobs = t.space(cc.outputs, base)
  const defaults = t.defaults(knobs, target)
  const lowered = (config: Config): PrimFunc => runTirSync(cpuTirPipeline(), lowerSync(t.apply(cc.outputs, base, config)))
  return { cc, t, knobs, defaults, lowered }
}

/**
 * The fraction of a kernel's reads of what a core wrote — its input `X` (`before`'s output) and its
 * own intermediates (a padded copy) — that another core wrote.
 */
const remoteShare = (before: PrimFunc, after: PrimFunc, cores: number): number => {
  const first = crossCoreReads(before, cores)
  const out = before.params[before.params.length - 1].name
  const given: Writers = new Map([["X", first.writers.get(out)!]])
  const second = crossCoreReads(after, cores, given)
  const total = (m: ReadonlyMap<string, number>) => [...m.values()].reduce((a, b) => a + b, 0)
  return total(second.remote) / Math.max(1, total(second.reads))
}

const arbChain = fc.record({
  CB: fc.integer({ min: 1, max: 3 }),
  OB: fc.constantFrom(2, 4),
  H: fc.constantFrom(4, 6, 8),
  W: fc.integer({ min: 3, max: 6 }),
  K: fc.constantFrom(1, 3),
  K2: fc.constantFrom(1, 3),
  seed: fc.nat(),
})

describe("the band rule (conv2d_NCHWc oc_order rows, winograd_NCHWc bands)", () => {
  it("takes bands on more than one core where the conv's channel tiles would go outermost, its weights, a row's input and the row fit the L2, every channel tile reads the whole input and the input is at least the weights; on one core, past the L2, grouped, or weights over the input, the order it had", () => {
    let bands = 0
    let heavier = 0
    let grouped = 0
    fc.assert(
      fc.property(arbChain, fc.constantFrom(1, 2, 4), fc.constantFrom(512, 2048, 4096, 8192, 1 << 20), fc.constantFrom(1, 1, 2), (o0, cores, l2, g) => {
        // (grouped: the groups divide both block counts)
        const groups = o0.CB % g === 0 && o0.OB % g === 0 ? g : 1
        const o = { ...o0, groups }
        const k = convKernel(o.seed, o, record(cores, l2))
        const one = convKernel(o.seed, o, record(1, l2))
        // (IC·KH·KW × OC weights, IC·KH·KW × OW inputs under a row of outputs, OC × OW outputs; 4 lanes a block, fp32;
        // IC the channels an output reads: a group's)
        const [taps, oc] = [(o.CB / groups) * 4 * o.K * o.K, o.OB * 4]
        const fits = (taps * oc + taps * o.W + oc * o.W) * 4 <= l2
        // (the padded input a tile reads, every channel of it; a 3×3 kernel pads by 1)
        const pad = o.K === 3 ? 1 : 0
        const input = o.CB * 4 * (o.H + 2 * pad) * (o.W + 2 * pad)
        const readsLess = groups === 1 && input >= taps * oc
        const expected = cores > 1 && fits && readsLess
        if (cores > 1 && fits && !readsLess) (groups > 1 ? grouped++ : heavier++)
        if (expected) bands++
        expect(imageBands(k.knobs, 4, record(cores, l2))).toBe(expected)
        if (one.defaults.oc_order !== "outer") expect(k.defaults.oc_order).toBe(one.defaults.oc_order)
        else expect(k.defaults.oc_order).toBe(expected ? "rows" : "outer")
        expect({ ...k.defaults, oc_order: undefined }).toEqual({ ...one.defaults, oc_order: undefined })
      }),
      lawParams(60),
    )
    // (each side of the rule met)
    expect(bands).toBeGreaterThan(0)
    expect(heavier).toBeGreaterThan(0)
    expect(grouped).toBeGreaterThan(0)
  })

  it("a chain of two convs in bands: the second reads at most the halo and one split row of the first's output from the other core, under a third; with the channel tiles outermost, about half", () => {
    let chains = 0
    let outerHalf = 0
    fc.assert(
      fc.property(arbChain, (o) => {
        const target = record(2, 1 << 20)
        const first = convKernel(o.seed, o, target)
        const second = convKernel(o.seed + 1, { CB: o.OB, OB: 2, H: o.H, W: o.W, K: o.K2 }, target)
        fc.pre(first.defaults.oc_order === "rows" && second.defaults.oc_order === "rows")
        chains++
        // (the defaults, and one block a channel tile: 2 or 4 channel tiles, so the conv's loop order decides the split, not its copy's alone)
        const cases = [
          [first.defaults, second.defaults],
          [{ ...first.defaults, tile_oc: 1 }, { ...second.defaults, tile_oc: 1 }],
        ] as const
        for (const [a, b] of cases) {
          const bands = remoteShare(first.lowered(a), second.lowered(b), 2)
          const outer = remoteShare(first.lowered({ ...a, oc_order: "outer" }), second.lowered({ ...b, oc_order: "outer" }), 2)
          // (each core's band: half the rows, one row tile split between the cores where the row tiles are odd, and a 3×3 kernel's halo rows)
          expect(bands).toBeLessThan(1 / 3 + 1e-9)
          expect(bands).toBeLessThanOrEqual(outer)
          // (channel tiles outermost, an even number of them: each core wrote half the channels of every pixel the next reads)
          if ((o.OB / Number(a.tile_oc)) % 2 === 0) {
            expect(outer).toBeGreaterThan(0.4)
            outerHalf++
          }
        }
      }),
      lawParams(20),
    )
    expect(chains).toBeGreaterThan(0)
    expect(outerHalf).toBeGreaterThan(0)
  }, 120_000)

  it("every conv in bands (1×1 and 3×3 with its padded copy, rows in tiles or a column tail) evaluates equal to the TE", () => {
    fc.assert(
      fc.property(arbChain, fc.boolean(), (o, tail) => {
        const k = convKernel(o.seed, o, record(2, 1 << 20))
        const ow = Number(k.defaults.tile_ow)
        const config = { ...k.defaults, oc_order: "rows", ...(tail && o.W > 2 ? { tile_ow: o.W - 1 } : { tile_ow: ow }) }
        const outs = evaluatePrimFunc(k.lowered(config), k.cc.inputs)
        assertAllClose(k.cc.outputs.map((x) => outs.get(x.name)!), evaluateTE(k.cc.outputs, k.cc.inputs), 1e-4, 1e-5)
      }),
      lawParams(20),
    )
  }, 120_000)
})
