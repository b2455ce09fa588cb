// The VTA conv2d lowering on a ResNet-like layer (14×14, 64 → 64 channels, 3×3, stride 1, pad 1):
// serial and with two virtual threads, both equal to a plain-integer reference; latency hiding
// takes fewer cycles at higher utilization; removing any one dependency token from the
// latency-hiding program is a VtaRaceError or VtaDeadlockError (under the default cycle model or one
// with slower DMA or compute — a token can be redundant under one timing only); tiles that do not
// fit are VtaScheduleErrors.
import { describe, expect, it } from "vitest"
import { defaultVtaConfig, deriveVta } from "../src/ast/vta/config.js"
import type { VtaInsn } from "../src/ast/vta/isa.js"
import { VtaDeadlockError, VtaRaceError } from "../src/device/vta/errors.js"
import { VTA_CYCLE_MODEL, type VtaCycleModel } from "../src/device/vta/cycle-model.js"
import { runVtaSync } from "../src/device/vta/simulator.js"
import { defaultConv2dSchedule, defaultEpilogueChunk, EPILOGUE_ALU_PASSES, epilogueChunkOf, estimateConv2dCycles, lowerConv2d, outSize, readOut, VtaScheduleError, withTensors, type VtaConv2d } from "../src/lowering/vta/conv2d.js"
import { seededInt8 } from "../laws/vta/programs.js"

const d = deriveVta(defaultVtaConfig)
const layer: VtaConv2d = { ci: 4, co: 4, h: 14, w: 14, kh: 3, kw: 3, stride: 1, pad: 1, shift: 7 }

/** clip(conv >> shift, 0, 127) over the packed layouts, in plain integers. */
const reference = (x: VtaConv2d, data: Int8Array, kernel: Int8Array): Int8Array => {
  const { oh: OH, ow: OW } = outSize(x)
  const out = new Int8Array(x.co * OH * OW * 16)
  for (let co = 0; co < x.co; co++)
    for (let y = 0; y < OH; y++)
      for (let xx = 0; xx < OW; xx++)
        for (let oc = 0; oc < 16; oc++) {
          let s = 0
          for (let ci = 0; ci < x.ci; ci++)
            for (let kh = 0; kh < x.kh; kh++)
              for (let kw = 0; kw < x.kw; kw++) {
                const iy = y * x.stride + kh - x.pad
                const ix = xx * x.stride + kw - x.pad
                if (iy < 0 || iy >= x.h || ix < 0 || ix >= x.w) continue
                for (let ic = 0; ic < 16; ic++) s += data[((ci * x.h + iy) * x.w + ix) * 16 + ic] * kernel[((((co * x.ci + ci) * x.kh + kh) * x.kw + kw) * 16 + oc) * 16 + ic]
              }
          out[((co * OH + y) * OW + xx) * 16 + oc] = Math.min(127, Math.max(0, s >> x.shift))
        }
  return out
}

const data = seededInt8(101, layer.ci * layer.h * layer.w * 16, -20, 20)
const kernel = seededInt8(102, layer.co * layer.ci * 9 * 256, -20, 20)
const want = Array.from(reference(layer, data, kernel))

const run = (insns: readonly VtaInsn[], vthreads: 1 | 2) => {
  const p = lowerConv2d(d, layer, { tileOh: 2, tileCo: 2, vthreads }) // 14 tiles
  const r = runVtaSync(d, insns.length > 0 ? insns : p.insns, withTensors(p, data, kernel))
  return { p, r, out: Array.from(readOut(d, layer, p, r.dram)) }
}

describe("VTA conv2d on a ResNet-like layer", () => {
  it("serial and two virtual threads both equal the reference; hiding latency takes fewer cycles", () => {
    const serial = run([], 1)
    const hidden = run([], 2)
    expect(want.some((v) => v > 0 && v < 127)).toBe(true) // the epilogue's clip is not all there is
    expect(serial.out).toEqual(want)
    expect(hidden.out).toEqual(want)
    expect(hidden.p.tiles).toBe(serial.p.tiles)
    expect(hidden.r.stats.gemmOps).toBe(serial.r.stats.gemmOps)
    expect(hidden.r.stats.gemmOps).toBe((14 * 14 * 4 * 4 * 9 * 256) / 256)
    expect(hidden.r.stats.aluOps).toBe(EPILOGUE_ALU_PASSES * 14 * 14 * 4) // the roofline's epilogue ceiling counts these
    expect(hidden.r.stats.totalCycles).toBeLessThan(serial.r.stats.totalCycles)
    expect(hidden.r.stats.utilization).toBeGreaterThan(serial.r.stats.utilization)
  })

  /** The pops of a layer's latency-hiding program whose removal no cycle model of `models` catches. */
  const uncaughtPops = (x: VtaConv2d, sched: { tileOh: number; tileCo: number; tileCi?: number }) => {
    const dx = seededInt8(103, x.ci * x.h * x.w * 16, -20, 20)
    const kx = seededInt8(104, x.co * x.ci * x.kh * x.kw * 256, -20, 20)
    const wx = Array.from(reference(x, dx, kx))
    // the generator's token protocol (the pass pipeline's tokens: test/vta-tir.test.ts)
    const p = lowerConv2d(d, x, { ...sched, vthreads: 2 }, "generator")
    // A token that this timing makes redundant (its producer long done) is needed under another.
    const models = [VTA_CYCLE_MODEL, { ...VTA_CYCLE_MODEL, dmaLatency: 5000 }, { ...VTA_CYCLE_MODEL, gemmII: 8, aluII: 8 }]
    const outcome = (insns: readonly VtaInsn[], model: VtaCycleModel): string => {
      try {
        const r = runVtaSync(d, insns, withTensors(p, dx, kx), model)
        return Array.from(readOut(d, x, p, r.dram)).every((v, q) => v === wx[q]) ? "same" : "wrong"
      } catch (e) {
        if (e instanceof VtaDeadlockError) return "deadlock"
        if (e instanceof VtaRaceError) return "race"
        throw e
      }
    }
    expect(models.map((m) => outcome(p.insns, m))).toEqual(["same", "same", "same"])
    const pops = p.insns.flatMap((i, k) => (i.deps.popPrev || i.deps.popNext ? [k] : []))
    const steps = p.insns.filter((i) => i.op === "GEMM" && !i.reset).length
    // every step's GEMM pops, and from the third step on its first load; every tile's first store, and from the third tile on its reset
    expect(pops.length).toBe(2 * steps - 2 + 2 * p.tiles - 2)
    return pops.filter((k) => {
      const insns = p.insns.map((i, j) => (j === k ? { ...i, deps: { ...i.deps, popPrev: false, popNext: false } } : i))
      return models.every((m) => outcome(insns, m) === "same")
    }).map((k) => p.insns[k])
  }

  it("removing any one pop from the latency-hiding program: a VtaRaceError or VtaDeadlockError under some cycle model", () => {
    // Load-bound (4 input channel blocks, 2 output blocks a tile): the store of tile t−2 is always
    // done before tile t's reset, so only the resets' store→compute pops go uncaught here. On a
    // store-bound layer (1 input block, 4 output blocks a tile) the loads run far ahead and only
    // the GEMMs' load→compute pops go uncaught. Every pop of the protocol is needed on one of them.
    const loadBound = uncaughtPops(layer, { tileOh: 2, tileCo: 2 })
    expect(loadBound.length).toBeGreaterThan(0)
    expect(loadBound.every((i) => i.op === "GEMM" && i.reset && i.deps.popNext)).toBe(true)
    const storeBound = uncaughtPops({ ...layer, ci: 1 }, { tileOh: 2, tileCo: 4 })
    expect(storeBound.every((i) => i.op === "GEMM" && !i.reset && i.deps.popPrev)).toBe(true)
    // Reduction steps of one input block (4 steps a tile, weights and inputs loaded per step, the
    // step-to-step pops the new ones): load-bound again, every pop but the resets' is caught here.
    const steps = uncaughtPops(layer, { tileOh: 7, tileCo: 2, tileCi: 1 })
    expect(steps.every((i) => i.op === "GEMM" && i.reset && i.deps.popNext)).toBe(true)
  })

  it("the default schedule fits the buffers of two virtual threads", () => {
    // 3×3: steps of one input block; all 14 rows (2 · 16 · 16 input entries, 2 · 14 · 14 accumulators
    // a channel block fit); then 4 channel blocks (5 · 196 ≤ 1024 accumulators a slot, 4 divides 16)
    const s = defaultConv2dSchedule(d, { ...layer, ci: 16, co: 16 }, 2)
    expect(s).toEqual({ tileOh: 14, tileCo: 4, tileCi: 1, order: "co-oh", vthreads: 2 })
    expect(() => lowerConv2d(d, { ...layer, ci: 16, co: 16 }, s)).not.toThrow()
  })

  it("a 1×1 kernel's default is the fitting schedule the static estimate prices lowest: on ResNet-18's C11, whole-image tiles in steps, 1.52× fewer cycles than one step of every block", () => {
    // 14×14, 256 → 512 channels, 1×1, stride 2. One step of all 16 input blocks (the old rule) fits
    // 2 output rows a tile and loads 32 channel blocks' weights (128 KiB, 16,448 cycles) before the
    // first GEMM; steps of 2 blocks fit all 7 rows, and each step's loads (the 7 input rows the
    // windows touch, 16 blocks' weights) run under the step before.
    const c11: VtaConv2d = { ci: 16, co: 32, h: 14, w: 14, kh: 1, kw: 1, stride: 2, pad: 0, shift: 8 }
    const s = defaultConv2dSchedule(d, c11, 2)
    expect(s).toEqual({ tileOh: 7, tileCo: 16, tileCi: 2, order: "co-oh", vthreads: 2 })
    const old = { tileOh: 2, tileCo: 32, tileCi: 16, order: "co-oh" as const, vthreads: 2 }
    const cycles = (sc: typeof s) => {
      const p = lowerConv2d(d, c11, sc)
      return runVtaSync(d, p.insns, p.dram, VTA_CYCLE_MODEL, { functional: false }).stats.totalCycles
    }
    const [now, before] = [cycles(s), cycles(old)]
    expect(now).toBe(37134)
    expect(before).toBe(56548)
    // the estimate orders them as the simulator does, within 10% of it
    expect(estimateConv2dCycles(d, c11, s)).toBeLessThan(estimateConv2dCycles(d, c11, old))
    for (const [sc, sim] of [[s, now], [old, before]] as const) expect(Math.abs(estimateConv2dCycles(d, c11, sc) / sim - 1)).toBeLessThan(0.1)
    // the k×k rule is unchanged: steps of one input block
    expect(defaultConv2dSchedule(d, { ...c11, kh: 3, kw: 3, pad: 1 }, 2).tileCi).toBe(1)
  })

  it("a bias's accumulator rows count in the capacity check and the default schedule", () => {
    // 32×32 outputs: tiles of 32 rows × 2 channel blocks fill the 2048 accumulators exactly, so the
    // bias's 2 rows no longer fit; the default picks 2 channel blocks without bias, 1 with
    const x: VtaConv2d = { ...layer, h: 32, w: 32 }
    const full = { tileOh: 32, tileCo: 2, tileCi: 1, vthreads: 1 }
    expect(() => lowerConv2d(d, x, full)).not.toThrow()
    expect(() => lowerConv2d(d, { ...x, bias: true }, full)).toThrow(/2 bias rows exceed the accumulator/)
    expect(defaultConv2dSchedule(d, x, 1).tileCo).toBe(2)
    const s = defaultConv2dSchedule(d, { ...x, bias: true }, 1)
    expect(s).toEqual({ tileOh: 32, tileCo: 1, tileCi: 1, order: "co-oh", vthreads: 1 })
    expect(() => lowerConv2d(d, { ...x, bias: true }, s)).not.toThrow()
  })

  it("with two threads the epilogue runs in chunks of the least entries the cycle model gives: the same bytes, the drain one chunk's STORE, fewer cycles", () => {
    expect(defaultEpilogueChunk(d, layer)).toBe(16) // 64 / (3·2 − 16/8)
    const s = { tileOh: 7, tileCo: 2, vthreads: 2 }
    expect(epilogueChunkOf(d, layer, s)).toEqual({ rows: 2 })
    const runOf = (chunk?: number) => {
      const p = lowerConv2d(d, layer, { ...s, ...(chunk === undefined ? {} : { epilogueChunk: chunk }) })
      const r = runVtaSync(d, p.insns, withTensors(p, data, kernel))
      const lastAlu = Math.max(...r.timeline.filter((_, i) => p.insns[i].op === "ALU").map((t) => t.end))
      return { out: Array.from(readOut(d, layer, p, r.dram)), cycles: r.stats.totalCycles, drain: r.stats.totalCycles - lastAlu, aluOps: r.stats.aluOps }
    }
    const whole = runOf(0)
    const chunked = runOf()
    expect(whole.out).toEqual(want)
    expect(chunked.out).toEqual(want)
    expect(chunked.aluOps).toBe(whole.aluOps) // the same passes over the same rows
    expect(whole.drain).toBe(2 * (64 + (7 * 14 * 16) / 8)) // after the last MIN: the last tile's two STOREs of 7 rows × 14
    expect(chunked.drain).toBeLessThanOrEqual(2 * (64 + (2 * 14 * 16) / 8)) // the rest of one chunk's STORE of 2 rows and the last (shorter) chunk's
    expect(chunked.cycles).toBeLessThan(whole.cycles)
  })

  it("a shift above 15 is several SHRs (one SHR's amount is a signed 5-bit operand: 16..31 would shift left), on both paths", () => {
    const x: VtaConv2d = { ci: 4, co: 1, h: 6, w: 6, kh: 3, kw: 3, stride: 1, pad: 1, shift: 16 }
    const big = seededInt8(103, x.ci * x.h * x.w * 16, -128, 127)
    const wbig = seededInt8(104, x.co * x.ci * 9 * 256, -128, 127)
    for (const shift of [15, 16, 20, 31]) {
      const xs = { ...x, shift }
      const ref = Array.from(reference(xs, big, wbig))
      if (shift === 16) expect(ref.some((v) => v > 0 && v < 127)).toBe(true) // the sums reach past 2^16
      for (const path of ["passes", "generator"] as const)
        for (const vthreads of [1, 2]) {
          const p = lowerConv2d(d, xs, { tileOh: 3, tileCo: 1, vthreads }, path)
          const r = runVtaSync(d, p.insns, withTensors(p, big, wbig))
          expect(Array.from(readOut(d, xs, p, r.dram)), `shift ${shift}, ${path}, ${vthreads} vthreads`).toEqual(ref)
          expect(r.stats.aluOps).toBe(({ 15: 3, 16: 4, 20: 4, 31: 5 } as Record<number, number>)[shift] * 6 * 6) // SHR 15 | 15, 1 | 15, 5 | 15, 15, 1 — then MAX, MIN
        }
    }
  })

  it("tiles larger than a buffer are a VtaScheduleError", () => {
    expect(() => lowerConv2d(d, { ...layer, ci: 32, h: 56, w: 56 }, { tileOh: 56, tileCo: 1, vthreads: 2 })).toThrow(VtaScheduleError)
    expect(() => lowerConv2d(d, layer, { tileOh: 1, tileCo: 3, vthreads: 1 })).toThrow(/does not divide/)
  })
})
