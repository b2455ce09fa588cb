// The VTA conv2d lowering (src/lowering/vta/conv2d.ts) on random int8 layers — input and output
// channel blocks, sizes, 1×1 / 3×3 kernels, stride 1 / 2, padding 0 / 1, requantize shift, with or
// without an int32 bias per output channel, the clip's lower bound (0 when absent, or −128..0) — and
// random schedules (output rows and channel blocks per tile, input channel blocks per reduction
// step, loop order, one to four virtual threads, epilogue chunks):
// - the VTA program run on the simulator stores exactly what the TE says (evaluateTE), bit for bit —
//   on random layers, and on each kernel / stride / padding in turn with multi-row tiles at shifts
//   that keep the accumulator's information in the int8 output (laws/vta/conv-cases.ts), through
//   the TIR passes and through the direct generator;
// - the same layer's TE, with its inner 1×BLOCK_IN · BLOCK_IN×BLOCK_OUT loop nest tensorized to
//   VTA's GEMM intrinsic (src/ast/vta/intrinsic.ts), lowered and run by the TIR evaluator, gives
//   the same bytes — the intrinsic's declaration is the GEMM core's meaning;
// - one and two virtual threads give the same bytes;
// - the simulator's timing-only mode (the tuner's measure) gives the full run's statistics and timeline.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as S from "../../src/ast/schedule/schedule.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { defaultVtaConfig, deriveVta } from "../../src/ast/vta/config.js"
import { vtaGemmIntrinsic } from "../../src/ast/vta/intrinsic.js"
import { runVtaSync } from "../../src/device/vta/simulator.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { lowerConv2d, readOut, withTensors, type VtaConv2d, type VtaConv2dPath, type VtaConv2dSchedule } from "../../src/lowering/vta/conv2d.js"
import { lawParams } from "../support.js"
import { arbConvCase, convTensors, GEOMETRIES, informativeShift, teFeeds, teOut } from "./conv-cases.js"

const d = deriveVta(defaultVtaConfig)

const arbLayer = arbConvCase(4, 7)

/** The simulator's stored output of the layer's program under schedule `s` (through the TIR passes, or the direct generator), with no token left. */
const simulated = (x: VtaConv2d, seed: number, s: VtaConv2dSchedule, path: VtaConv2dPath = "passes"): number[] => {
  const { data, kernel, bias } = convTensors(d, x, seed)
  const p = lowerConv2d(d, x, s, path)
  const run = runVtaSync(d, p.insns, withTensors(p, data, kernel, bias))
  expect(Object.values(run.stats.tokensLeft)).toEqual([0, 0, 0, 0])
  return Array.from(readOut(d, x, p, run.dram))
}

describe("VTA conv2d", () => {
  it("the simulator stores what the TE says, bit for bit, under any tiles, reduction split, loop order, 1–4 virtual threads and epilogue chunks, with and without bias and clip bound", () => {
    fc.assert(fc.property(arbLayer, ({ x, seed, s }) => {
      expect(simulated(x, seed, s)).toEqual(teOut(d, x, seed))
    }), lawParams(24))
  })

  // every geometry every run, with multi-row tiles at informative shifts: the random draws above
  // never made a strided unpadded 1×1 layer whose tile held several rows and whose outputs did not
  // all floor to 0 / -1, so its row skipping could read the wrong input rows (or one row too few)
  // unseen; the direct generator (which loads every row of the window) on the same cases
  for (const g of GEOMETRIES)
    it(`the simulator stores what the TE says, through the passes and the generator: ${g.name}`, () => {
      fc.assert(fc.property(arbConvCase(3, 6, g, informativeShift), ({ x, seed, s }) => {
        const want = teOut(d, x, seed)
        expect(simulated(x, seed, s), "passes").toEqual(want)
        expect(simulated(x, seed, s, "generator"), "generator").toEqual(want)
      }), lawParams(3))
    })

  it("a timing-only run (no GEMM/ALU arithmetic) has the full run's statistics and timeline", () => {
    fc.assert(fc.property(arbLayer, ({ x, seed, s }) => {
      const { data, kernel, bias } = convTensors(d, x, seed)
      const p = lowerConv2d(d, x, s)
      const full = runVtaSync(d, p.insns, withTensors(p, data, kernel, bias))
      const timing = runVtaSync(d, p.insns, p.dram, undefined, { functional: false })
      expect(timing.stats).toEqual(full.stats)
      expect(timing.timeline).toEqual(full.timeline)
    }), lawParams(20))
  })

  it("tensorized to VTA's GEMM intrinsic, the TIR evaluator gives the TE's bytes", () => {
    fc.assert(fc.property(arbLayer, ({ x, seed }) => {
      const small = { ...x, co: Math.min(x.co, 2), h: Math.min(x.h, 5), w: Math.min(x.w, 5) }
      const { te, feeds } = teFeeds(d, small, seed)
      const s0 = S.reorder(S.createSchedule([te.out]), "conv", ["conv.i", "conv.j", "conv.k", "rci", "rkh", "rkw", "conv.l", "conv.m", "ric"])
      const s = S.tensorize(s0, "conv", "conv.l", vtaGemmIntrinsic(d))
      expect(Array.from(evaluatePrimFunc(lowerSync(s), feeds).get("out")!.data)).toEqual(teOut(d, small, seed))
    }), lawParams(6))
  })
})
