// The VTA simulator (src/device/vta), on tiled int8 GEMM programs of random shapes, data, shifts
// and configurations (laws/vta/programs.ts), serial (one buffer slot) and with latency hiding (two):
// - the stored result equals the plain-integer reference, bit for bit;
// - a program whose every reuse of a buffer is ordered by tokens computes the same bytes under any
//   cycle model (random DMA latency, padding cost, GEMM and ALU initiation intervals) and never
//   races (no VtaRaceError): its meaning does not depend on timing, only its cycle count does;
// - the statistics add up: each module's busy + stall + idle is the total, GEMM iterations are
//   M·K·N, no token is left over.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { deriveVta } from "../../src/ast/vta/config.js"
import { lawConfigs } from "../../src/ast/vta/arbitrary.js"
import type { VtaCycleModel } from "../../src/device/vta/cycle-model.js"
import { runVtaSync, VTA_MODULES } from "../../src/device/vta/simulator.js"
import { lawParams } from "../support.js"
import { buildTiledGemm, readTiledGemm, seededInt8, type TiledGemmCase } from "./programs.js"

const derived = lawConfigs.map((c) => deriveVta(c.config))

const arbCase = fc.record({
  cfg: fc.nat({ max: derived.length - 1 }),
  M: fc.integer({ min: 1, max: 12 }),
  K: fc.integer({ min: 1, max: 4 }),
  N: fc.integer({ min: 1, max: 5 }),
  shift: fc.integer({ min: 0, max: 12 }),
  depth: fc.constantFrom(1 as const, 2 as const),
  seed: fc.nat(),
})

const arbModel: fc.Arbitrary<VtaCycleModel> = fc.record({
  dmaLatency: fc.integer({ min: 0, max: 300 }),
  padEntryCycles: fc.integer({ min: 0, max: 4 }),
  gemmII: fc.integer({ min: 1, max: 8 }),
  aluII: fc.integer({ min: 1, max: 8 }),
  finishCycles: fc.integer({ min: 0, max: 4 }),
})

const build = (r: { cfg: number; M: number; K: number; N: number; shift: number; depth: 1 | 2; seed: number }) => {
  const d = derived[r.cfg]
  const c: TiledGemmCase = { M: r.M, K: r.K, N: r.N, shift: r.shift, depth: r.depth, a: seededInt8(r.seed, r.M * r.K * d.blockIn), w: seededInt8(r.seed + 1, r.N * d.blockOut * r.K * d.blockIn) }
  return { d, c, p: buildTiledGemm(d, c) }
}

describe("VTA simulator", () => {
  it("stores the reference result, bit for bit", () => {
    fc.assert(fc.property(arbCase, (r) => {
      const { d, c, p } = build(r)
      const run = runVtaSync(d, p.insns, p.dram)
      expect(Array.from(readTiledGemm(d, c, run.dram, p.layout))).toEqual(Array.from(p.expected))
    }), lawParams(60))
  })

  it("a fully synchronized program computes the same bytes under any cycle model", () => {
    fc.assert(fc.property(arbCase, arbModel, (r, model) => {
      const { d, p } = build(r)
      expect(runVtaSync(d, p.insns, p.dram, model).dram).toEqual(runVtaSync(d, p.insns, p.dram).dram)
    }), lawParams(60))
  })

  it("the statistics add up", () => {
    fc.assert(fc.property(arbCase, (r) => {
      const { d, p } = build(r)
      const { stats } = runVtaSync(d, p.insns, p.dram)
      for (const m of VTA_MODULES) {
        const s = stats.modules[m]
        expect(s.busy + s.stall + s.idle).toBe(stats.totalCycles)
        expect(Math.min(s.busy, s.stall, s.idle)).toBeGreaterThanOrEqual(0)
      }
      expect(stats.gemmOps).toBe(r.M * r.K * r.N)
      expect(stats.bytes.wgt).toBe(r.N * r.K * d.wgtElemBytes)
      expect(stats.utilization).toBeLessThanOrEqual(1)
      expect(Object.values(stats.tokensLeft)).toEqual([0, 0, 0, 0])
    }), lawParams(60))
  })
})
