// VTA's TIR passes (src/lowering/vta/tir/) on random int8 conv2d layers — channel blocks, sizes,
// 1×1 / 3×3 kernels, stride 1 / 2, padding 0 / 1, shift, bias, clip bound — and random schedules
// (tile rows, channel blocks, reduction steps, loop order, 1–4 virtual threads, epilogue chunks):
// - the schedule's TIR, run by the VTA TIR evaluator, stores what the TE says (evaluateTE) — for
//   each kernel / stride / padding in turn (each takes its own path through the schedule: the
//   strided unpadded 1×1 loads only the rows its windows read), at shifts that keep the
//   accumulator's information in the int8 output (past ~2^17 every output floors to 0 or -1 and
//   clips to the same value: a wrong input row would not show);
// - each pass — DMA injection, ALU matching, micro-op folding, virtual-thread expansion — gives a
//   program the evaluator runs to the same output as its input;
// - emission with dependency tokens, run on the simulator, stores the same bytes, with no token left;
// - the same under cycle models that slow compute or memory a hundredfold (the tokens order it);
// - every inserted token is needed: without it (its push and its pop) nothing else orders the two
//   instructions it orders (test/vta-tir.test.ts runs such removals on the simulator).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { fromArray } from "../../src/ast/graph/tensor.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { defaultVtaConfig, deriveVta } from "../../src/ast/vta/config.js"
import { VTA_CYCLE_MODEL, type VtaCycleModel } from "../../src/device/vta/cycle-model.js"
import { runVtaSync } from "../../src/device/vta/simulator.js"
import { conv2dTE, outSize, readOut, withTensors, type VtaConv2d, type VtaConv2dSchedule } from "../../src/lowering/vta/conv2d.js"
import { evaluateVFunc } from "../../src/lowering/vta/tir/evaluate.js"
import { orderedBy, withoutToken } from "../../src/lowering/vta/tir/insert-tokens.js"
import type { VFunc } from "../../src/lowering/vta/tir/ir.js"
import { conv2dTirStages, lowerConv2dTir } from "../../src/lowering/vta/tir/pipeline.js"
import { lawParams } from "../support.js"
import { seededInt8 } from "./programs.js"

const d = deriveVta(defaultVtaConfig)
/** Timings other than the model of record's, to show that what orders the program is its tokens. */
const SLOW_COMPUTE: VtaCycleModel = { ...VTA_CYCLE_MODEL, dmaLatency: 0, padEntryCycles: 0, gemmII: 100, aluII: 100 }
const SLOW_MEMORY: VtaCycleModel = { ...VTA_CYCLE_MODEL, dmaLatency: 10_000, padEntryCycles: 100 }

/** A layer's kernel size, stride and padding: each takes its own path through the schedule. */
interface Geometry {
  readonly k: 1 | 3
  readonly stride: 1 | 2
  readonly pad: 0 | 1
  readonly name: string
}
const GEOMETRIES: readonly Geometry[] = ([1, 3] as const).flatMap((k) => ([1, 2] as const).flatMap((stride) => ([0, 1] as const).map((pad) => ({ k, stride, pad, name: `${k}×${k} kernel, stride ${stride}, padding ${pad}` }))))
/** Shifts around the accumulator's spread (~2^14 for one 16-lane block of int8 products), so that most outputs are neither saturated nor 0 / -1. */
const informativeShift = fc.integer({ min: 5, max: 12 })

/** Heights and widths: of one geometry, at least two output rows and columns (so that a tile can hold several rows: the row-skip's DRAM row step shows only there). */
const arbHW = (maxHW: number, geometry?: Geometry) => {
  const min = geometry ? Math.max(2, geometry.k - 2 * geometry.pad + geometry.stride) : 2
  return fc.integer({ min, max: Math.max(maxHW, min + 1) })
}

/** Random layers and schedules (of one geometry, at the shifts given, where those are). */
const arbCaseOf = (maxC: number, maxHW: number, geometry?: Geometry, shift?: fc.Arbitrary<number>) => fc
  .record({
    ci: fc.integer({ min: 1, max: maxC }),
    co: fc.integer({ min: 1, max: maxC }),
    h: arbHW(maxHW, geometry),
    w: arbHW(maxHW, geometry),
    k: geometry ? fc.constant(geometry.k) : fc.constantFrom(1, 3),
    stride: geometry ? fc.constant(geometry.stride) : fc.constantFrom(1, 2),
    pad: geometry ? fc.constant(geometry.pad) : fc.constantFrom(0, 1),
    // past 15 a shift takes several SHRs (one SHR's amount is a signed 5-bit operand)
    shift: shift ?? fc.oneof(fc.integer({ min: 0, max: 10 }), fc.integer({ min: 11, max: 31 })),
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
      x: fc.constant(x),
      seed: fc.constant(r.seed),
      // the whole height as one tile half the time (multi-row tiles), any tile height else
      s: fc.record({ tileOh: fc.oneof(fc.constant(oh), fc.integer({ min: 1, max: oh })), tileCo: fc.constantFrom(...divs(r.co)), tileCi: fc.constantFrom(...divs(r.ci)), order: fc.constantFrom("co-oh" as const, "oh-co" as const), vthreads: fc.integer({ min: 1, max: 4 }), epilogueChunk: fc.option(fc.integer({ min: 0, max: 40 }), { nil: undefined }) }),
    })
  })
const arbCase = arbCaseOf(3, 6)
/** Smaller layers for the TE reference (its evaluator interprets every multiply-add), of one geometry, at informative shifts. */
const arbSmall = (g: Geometry) => arbCaseOf(2, 4, g, informativeShift)

const tensors = (x: VtaConv2d, seed: number) => {
  const data = seededInt8(seed, x.ci * x.h * x.w * d.blockIn)
  const kernel = seededInt8(seed + 7, x.co * x.ci * x.kh * x.kw * d.blockOut * d.blockIn)
  // int32 biases of up to ±8k: past the accumulator's typical range here, so the add moves the output at any shift
  const bytes = seededInt8(seed + 13, 2 * x.co * d.blockOut, -128, 127)
  const bias = x.bias ? Int32Array.from({ length: x.co * d.blockOut }, (_, i) => bytes[2 * i] * 64 + bytes[2 * i + 1]) : undefined
  const inputs = new Map<string, ArrayLike<number>>([["data", data], ["kernel", kernel], ...(bias ? [["bias", bias] as const] : [])])
  return { data, kernel, bias, inputs }
}

/** The TE's output (evaluateTE), the reference. */
const teOut = (x: VtaConv2d, seed: number): number[] => {
  const te = conv2dTE(d, x)
  const { data, kernel, bias } = tensors(x, seed)
  const feeds = new Map([["data", fromArray("int8", te.data.shape, Array.from(data))], ["kernel", fromArray("int8", te.kernel.shape, Array.from(kernel))]])
  if (te.bias && bias) feeds.set("bias", fromArray("int32", te.bias.shape, Array.from(bias)))
  return Array.from(evaluateTE([te.out], feeds)[0].data)
}

const outOf = (f: VFunc, inputs: ReadonlyMap<string, ArrayLike<number>>) => Array.from(evaluateVFunc(d, f, inputs).get("out")!)

/** A case that fits the buffers (the laws draw small layers; a schedule that does not fit is skipped). */
const fits = (x: VtaConv2d, s: VtaConv2dSchedule): boolean => {
  try {
    lowerConv2dTir(d, x, s)
    return true
  } catch {
    return false
  }
}

describe("VTA TIR passes", () => {
  // every geometry every run: six random draws of all eight missed the strided unpadded 1×1 (its
  // row skipping could read the wrong rows unseen)
  for (const g of GEOMETRIES)
    it(`the schedule's TIR computes what the TE says: ${g.name}`, () => {
      fc.assert(fc.property(arbSmall(g), ({ x, seed, s }) => {
        const { inputs } = tensors(x, seed)
        expect(outOf(conv2dTirStages(d, x, s).schedule, inputs)).toEqual(teOut(x, seed))
      }), lawParams(3))
    })

  it("each pass keeps what its input computes; emitted with tokens, the simulator stores the same bytes, under the cycle model of record and under ones that slow compute or memory a hundredfold (the tokens order it), no token left", () => {
    fc.assert(fc.property(arbCase, ({ x, seed, s }) => {
      const { data, kernel, bias, inputs } = tensors(x, seed)
      const st = conv2dTirStages(d, x, s)
      const want = outOf(st.schedule, inputs)
      expect(outOf(st.dma, inputs), "inject-dma").toEqual(want)
      expect(outOf(st.alu, inputs), "match-alu").toEqual(want)
      expect(outOf(st.folded, inputs), "fold-uops").toEqual(want)
      expect(outOf(st.vthreads, inputs), "inject-vthread").toEqual(want)
      if (!fits(x, s)) return
      const p = lowerConv2dTir(d, x, s)
      for (const model of [VTA_CYCLE_MODEL, SLOW_COMPUTE, SLOW_MEMORY]) {
        const run = runVtaSync(d, p.insns, withTensors(p, data, kernel, bias), model)
        expect(Array.from(readOut(d, x, p, run.dram)), "emitted").toEqual(want)
        expect(Object.values(run.stats.tokensLeft)).toEqual([0, 0, 0, 0])
      }
    }), lawParams(12))
  })

  it("every inserted token is needed: without it, the two instructions it orders are ordered by nothing else", () => {
    fc.assert(fc.property(arbCase, ({ x, s }) => {
      fc.pre(fits(x, s))
      const p = lowerConv2dTir(d, x, s)
      for (const t of p.tokens) {
        expect(orderedBy(p.insns, t.push, t.pop), `token ${t.queue} ${t.push}→${t.pop} with the stream as emitted`).toBe(true)
        expect(orderedBy(withoutToken(p.insns, t), t.push, t.pop), `token ${t.queue} ${t.push}→${t.pop} is redundant`).toBe(false)
      }
    }), lawParams(12))
  })
})
