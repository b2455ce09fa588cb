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
import { defaultVtaConfig, deriveVta } from "../../src/ast/vta/config.js"
import { VTA_CYCLE_MODEL, type VtaCycleModel } from "../../src/device/vta/cycle-model.js"
import { runVtaSync } from "../../src/device/vta/simulator.js"
import { readOut, withTensors, type VtaConv2d, type VtaConv2dSchedule } from "../../src/lowering/vta/conv2d.js"
import { evaluateVFunc } from "../../src/lowering/vta/tir/evaluate.js"
import { orderedBy, withoutToken } from "../../src/lowering/vta/tir/insert-tokens.js"
import type { VFunc } from "../../src/lowering/vta/tir/ir.js"
import { conv2dTirStages, lowerConv2dTir } from "../../src/lowering/vta/tir/pipeline.js"
import { lawParams } from "../support.js"
import { arbConvCase, convTensors, GEOMETRIES, informativeShift, teOut, type Geometry } from "./conv-cases.js"

const d = deriveVta(defaultVtaConfig)
/** Timings other than the model of record's, to show that what orders the program is its tokens. */
const SLOW_COMPUTE: VtaCycleModel = { ...VTA_CYCLE_MODEL, dmaLatency: 0, padEntryCycles: 0, gemmII: 100, aluII: 100 }
const SLOW_MEMORY: VtaCycleModel = { ...VTA_CYCLE_MODEL, dmaLatency: 10_000, padEntryCycles: 100 }

const arbCase = arbConvCase(3, 6)
/** Smaller layers for the TE reference (its evaluator interprets every multiply-add), of one geometry, at informative shifts. */
const arbSmall = (g: Geometry) => arbConvCase(2, 4, g, informativeShift)
const tensors = (x: VtaConv2d, seed: number) => convTensors(d, x, seed)

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
        expect(outOf(conv2dTirStages(d, x, s).schedule, inputs)).toEqual(teOut(d, x, seed))
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
