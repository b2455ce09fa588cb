// The VTA conv2d lowering (src/lowering/vta/conv2d.ts) on random int8 layers — input and output
// channel blocks, sizes, 1×1 / 3×3 kernels, stride 1 / 2, padding 0 / 1, requantize shift, with or
// without an int32 bias per output channel, the clip's lower bound (0 when absent, or −128..0) — and
// random schedules (output rows and channel blocks per tile, input channel blocks per reduction
// step, loop order, one to four virtual threads, epilogue chunks):
// - the VTA program run on the simulator stores exactly what the TE says (evaluateTE), bit for bit;
// - the same layer's TE, with its inner 1×BLOCK_IN · BLOCK_IN×BLOCK_OUT loop nest tensorized to
//   VTA's GEMM intrinsic (src/ast/vta/intrinsic.ts), lowered and run by the TIR evaluator, gives
//   the same bytes — the intrinsic's declaration is the GEMM core's meaning;
// - one and two virtual threads give the same bytes;
// - the simulator's timing-only mode (the tuner's measure) gives the full run's statistics and timeline.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { fromArray } from "../../src/ast/graph/tensor.js"
import * as S from "../../src/ast/schedule/schedule.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { defaultVtaConfig, deriveVta } from "../../src/ast/vta/config.js"
import { vtaGemmIntrinsic } from "../../src/ast/vta/intrinsic.js"
import { runVtaSync } from "../../src/device/vta/simulator.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { conv2dTE, lowerConv2d, outSize, readOut, withTensors, type VtaConv2d } from "../../src/lowering/vta/conv2d.js"
import { lawParams } from "../support.js"
import { seededInt8 } from "./programs.js"

const d = deriveVta(defaultVtaConfig)

const arbLayer = fc
  .record({
    ci: fc.integer({ min: 1, max: 4 }),
    co: fc.integer({ min: 1, max: 4 }),
    h: fc.integer({ min: 2, max: 7 }),
    w: fc.integer({ min: 2, max: 7 }),
    k: fc.constantFrom(1, 3),
    stride: fc.constantFrom(1, 2),
    pad: fc.constantFrom(0, 1),
    // past 15 a shift takes several SHRs (one SHR's amount is a signed 5-bit operand)
    shift: fc.oneof(fc.integer({ min: 0, max: 10 }), fc.integer({ min: 11, max: 31 })),
    bias: fc.boolean(),
    clipLo: fc.option(fc.integer({ min: -128, max: 0 }), { nil: undefined }),
    seed: fc.nat(),
  })
  .filter((r) => r.h + 2 * r.pad >= r.k && r.w + 2 * r.pad >= r.k)
  .chain((r) => {
    const x: VtaConv2d = { ci: r.ci, co: r.co, h: r.h, w: r.w, kh: r.k, kw: r.k, stride: r.stride, pad: r.pad, shift: r.shift, ...(r.bias ? { bias: true } : {}), ...(r.clipLo === undefined ? {} : { clipLo: r.clipLo }) }
    const { oh } = outSize(x)
    const divs = (n: number) => Array.from({ length: n }, (_, k) => k + 1).filter((m) => n % m === 0)
    return fc.record({
      x: fc.constant(x), seed: fc.constant(r.seed), tileOh: fc.integer({ min: 1, max: oh }), tileCo: fc.constantFrom(...divs(r.co)), tileCi: fc.constantFrom(...divs(r.ci)),
      order: fc.constantFrom("co-oh" as const, "oh-co" as const), vthreads: fc.integer({ min: 1, max: 4 }),
      epilogueChunk: fc.option(fc.integer({ min: 0, max: 40 }), { nil: undefined }),
    })
  })

const tensors = (x: VtaConv2d, seed: number) => {
  const te = conv2dTE(d, x)
  const data = seededInt8(seed, te.data.shape.reduce((a, b) => a * b, 1))
  const kernel = seededInt8(seed + 7, te.kernel.shape.reduce((a, b) => a * b, 1))
  // int32 biases of up to ±8k: past the accumulator's typical range here, so the add moves the output at any shift
  const bytes = seededInt8(seed + 13, 2 * x.co * d.blockOut, -128, 127)
  const bias = te.bias ? Int32Array.from({ length: x.co * d.blockOut }, (_, i) => bytes[2 * i] * 64 + bytes[2 * i + 1]) : undefined
  const feeds = new Map([["data", fromArray("int8", te.data.shape, Array.from(data))], ["kernel", fromArray("int8", te.kernel.shape, Array.from(kernel))]])
  if (te.bias && bias) feeds.set("bias", fromArray("int32", te.bias.shape, Array.from(bias)))
  return { te, data, kernel, bias, feeds, want: Array.from(evaluateTE([te.out], feeds)[0].data) }
}

describe("VTA conv2d", () => {
  it("the simulator stores what the TE says, bit for bit, under any tiles, reduction split, loop order, 1–4 virtual threads and epilogue chunks, with and without bias and clip bound", () => {
    fc.assert(fc.property(arbLayer, ({ x, seed, tileOh, tileCo, tileCi, order, vthreads, epilogueChunk }) => {
      const { data, kernel, bias, want } = tensors(x, seed)
      const p = lowerConv2d(d, x, { tileOh, tileCo, tileCi, order, vthreads, ...(epilogueChunk === undefined ? {} : { epilogueChunk }) })
      const run = runVtaSync(d, p.insns, withTensors(p, data, kernel, bias))
      expect(Array.from(readOut(d, x, p, run.dram))).toEqual(want)
      expect(Object.values(run.stats.tokensLeft)).toEqual([0, 0, 0, 0])
    }), lawParams(30))
  })

  it("a timing-only run (no GEMM/ALU arithmetic) has the full run's statistics and timeline", () => {
    fc.assert(fc.property(arbLayer, ({ x, seed, tileOh, tileCo, tileCi, order, vthreads }) => {
      const { data, kernel, bias } = tensors(x, seed)
      const p = lowerConv2d(d, x, { tileOh, tileCo, tileCi, order, vthreads })
      const full = runVtaSync(d, p.insns, withTensors(p, data, kernel, bias))
      const timing = runVtaSync(d, p.insns, p.dram, undefined, { functional: false })
      expect(timing.stats).toEqual(full.stats)
      expect(timing.timeline).toEqual(full.timeline)
    }), lawParams(20))
  })

  it("tensorized to VTA's GEMM intrinsic, the TIR evaluator gives the TE's bytes", () => {
    fc.assert(fc.property(arbLayer, ({ x, seed }) => {
      const { te, feeds, want } = tensors({ ...x, co: Math.min(x.co, 2), h: Math.min(x.h, 5), w: Math.min(x.w, 5) }, seed)
      const s0 = S.reorder(S.createSchedule([te.out]), "conv", ["conv.i", "conv.j", "conv.k", "rci", "rkh", "rkw", "conv.l", "conv.m", "ric"])
      const s = S.tensorize(s0, "conv", "conv.l", vtaGemmIntrinsic(d))
      expect(Array.from(evaluatePrimFunc(lowerSync(s), feeds).get("out")!.data)).toEqual(want)
    }), lawParams(6))
  })
})
