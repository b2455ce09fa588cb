// VTA's TIR passes as lowerConv2d's path, on a ResNet-like layer (14×14, 64 → 64 channels, 3×3):
// the passes and the generator store the same bytes under the same knobs; removing one token of a
// latency-hiding program (its push and its pop) gives a VtaDeadlockError, a VtaRaceError or a wrong
// answer under the default cycle model or one with slower DMA or compute — each queue's tokens on
// a load-bound or a store-bound layer (a token the timing of one makes redundant is needed on the
// other; laws/vta/tir.law.ts checks statically that none is redundant); what a pass cannot lower is
// a VtaTirError naming the pass.
import { describe, expect, it } from "vitest"
import { c, v } from "../src/ast/te/expr.js"
import { defaultVtaConfig, deriveVta } from "../src/ast/vta/config.js"
import { VTA_CYCLE_MODEL, type VtaCycleModel } from "../src/device/vta/cycle-model.js"
import { VtaDeadlockError, VtaRaceError } from "../src/device/vta/errors.js"
import { runVtaSync } from "../src/device/vta/simulator.js"
import { lowerConv2d, readOut, withTensors, type VtaConv2d, type VtaConv2dSchedule } from "../src/lowering/vta/conv2d.js"
import { flattenVFunc } from "../src/lowering/vta/tir/flatten.js"
import { injectDma } from "../src/lowering/vta/tir/inject-dma.js"
import { withoutToken } from "../src/lowering/vta/tir/insert-tokens.js"
import { VtaTirError, type VFunc } from "../src/lowering/vta/tir/ir.js"
import { matchAlu } from "../src/lowering/vta/tir/match-alu.js"
import { conv2dLayout, lowerConv2dTir } from "../src/lowering/vta/tir/pipeline.js"
import { seededInt8 } from "../laws/vta/programs.js"

const d = deriveVta(defaultVtaConfig)
const layer: VtaConv2d = { ci: 4, co: 4, h: 14, w: 14, kh: 3, kw: 3, stride: 1, pad: 1, shift: 7 }
const data = seededInt8(101, layer.ci * layer.h * layer.w * 16, -20, 20)
const kernel = seededInt8(102, layer.co * layer.ci * 9 * 256, -20, 20)

const outOf = (x: VtaConv2d, s: VtaConv2dSchedule, path: "passes" | "generator") => {
  const p = lowerConv2d(d, x, s, path)
  const dram = withTensors(p, data.slice(0, x.ci * x.h * x.w * 16), kernel.slice(0, x.co * x.ci * 9 * 256))
  return Array.from(readOut(d, x, p, runVtaSync(d, p.insns, dram).dram))
}

describe("VTA conv2d through the TIR passes", () => {
  it("stores what the generator stores, serial and with virtual threads", () => {
    const small: VtaConv2d = { ...layer, h: 8, w: 8 }
    for (const s of [{ tileOh: 2, tileCo: 2, vthreads: 1 }, { tileOh: 4, tileCo: 2, tileCi: 1, vthreads: 2 }, { tileOh: 3, tileCo: 1, tileCi: 2, order: "oh-co" as const, vthreads: 3 }])
      expect(outOf(small, s, "passes")).toEqual(outOf(small, s, "generator"))
  })

  it("removing any one token of a latency-hiding program: a deadlock, a race or a wrong answer under some cycle model", () => {
    const models: VtaCycleModel[] = [VTA_CYCLE_MODEL, { ...VTA_CYCLE_MODEL, dmaLatency: 5000 }, { ...VTA_CYCLE_MODEL, gemmII: 8, aluII: 8 }]
    const small: VtaConv2d = { ...layer, h: 8, w: 8 }
    /** The queues of the tokens whose removal no model catches, and of those caught. */
    const removals = (x: VtaConv2d, s: VtaConv2dSchedule) => {
      const p = lowerConv2dTir(d, x, s)
      const dram = withTensors(p, data.slice(0, x.ci * x.h * x.w * 16), kernel.slice(0, x.co * x.ci * 9 * 256))
      const want = Array.from(readOut(d, x, p, runVtaSync(d, p.insns, dram).dram))
      const uncaught = new Set<string>()
      const caught = new Set<string>()
      for (const t of p.tokens) {
        const hit = models.some((m) => {
          try {
            const r = runVtaSync(d, withoutToken(p.insns, t), dram, m)
            return Array.from(readOut(d, x, p, r.dram)).some((b, k) => b !== want[k])
          } catch (e) {
            if (e instanceof VtaDeadlockError || e instanceof VtaRaceError) return true
            throw e
          }
        })
        ;(hit ? caught : uncaught).add(t.queue)
      }
      return { caught, uncaught }
    }
    // Load-bound (4 input blocks, 2 output blocks a tile): the store of tile t−2 is always done
    // before tile t's reset, so only store→compute tokens can go uncaught; store-bound (1 input
    // block, 4 output blocks a tile): the loads run far ahead, only load→compute ones can. Every
    // queue's tokens are caught on one of them.
    const loadBound = removals(small, { tileOh: 2, tileCo: 2, vthreads: 2 })
    expect([...loadBound.uncaught].every((q) => q === "store→compute")).toBe(true)
    const storeBound = removals({ ...small, ci: 1 }, { tileOh: 2, tileCo: 4, vthreads: 2 })
    expect([...storeBound.uncaught].every((q) => q === "load→compute")).toBe(true)
    expect(new Set([...loadBound.caught, ...storeBound.caught])).toEqual(new Set(["load→compute", "compute→load", "compute→store", "store→compute"]))
  })

  it("a copy that is not a 2-D transfer, an expression the ALU lacks, a statement left unlowered: VtaTirError", () => {
    const f = (body: VFunc["body"]): VFunc => ({ name: "t", tensors: new Map([["data", 64], ["out", 64]]), body })
    const scoped = (body: VFunc["body"]): VFunc["body"] => ({ kind: "alloc", name: "a", scope: "acc", elems: 8, body })
    // a column-major gather: the innermost loop steps 8 elements in DRAM
    const gather = f({ kind: "alloc", name: "i", scope: "inp", elems: 8, body: { kind: "for", var: "x", extent: c(8), body: { kind: "copy", dst: { buf: "i", idx: v("x") }, src: { buf: "data", idx: { kind: "bin", op: "mul", a: v("x"), b: c(8), dtype: "int32" } } } } })
    expect(() => injectDma(gather)).toThrow(VtaTirError)
    expect(() => injectDma(gather)).toThrow(/inject-dma/)
    const times3 = f(scoped({ kind: "ew", dst: { buf: "a", idx: c(0) }, value: { kind: "bin", op: "mul", a: { kind: "read", source: "a", indices: [c(0)], dtype: "int32" }, b: c(3), dtype: "int32" } }))
    expect(() => matchAlu(times3)).toThrow(/match-alu/)
    const unlowered = f(scoped({ kind: "gemm", reset: true, acc: { buf: "a", idx: c(0) } }))
    expect(() => flattenVFunc(d, unlowered, conv2dLayout(d, layer, 1))).toThrow(/fold-uops/)
  })
})
