// The VTA simulator on hand-written programs: a 16×16 GEMM tile (results and cycles worked out by
// hand from the cycle model), ALU relu / shift / residual add, a tiled load→compute→store pipeline
// with tokens, serial and with latency hiding, a missing push (VtaDeadlockError), a missing
// token that races (VtaRaceError), and addresses out of range.
import { Effect, Result } from "effect"
import { describe, expect, it } from "vitest"
import { defaultVtaConfig, deriveVta } from "../src/ast/vta/config.js"
import { layoutDram, readInt8, writeInt32, writeInt8, writeUops } from "../src/ast/vta/dram-image.js"
import { noDeps, type VtaInsn } from "../src/ast/vta/isa.js"
import { VTA_CYCLE_MODEL } from "../src/device/vta/cycle-model.js"
import { VtaDeadlockError, VtaDramAddressError, VtaIllegalInsnError, VtaRaceError, VtaSramAddressError } from "../src/device/vta/errors.js"
import { aluLane } from "../src/device/vta/execute.js"
import { runVta, runVtaSync } from "../src/device/vta/simulator.js"
import { alu, buildTiledGemm, deps, mem, readTiledGemm, seededInt8, type TiledGemmCase } from "../laws/vta/programs.js"

const d = deriveVta(defaultVtaConfig)

const thrown = (f: () => unknown): unknown => {
  try {
    f()
  } catch (e) {
    return e
  }
  throw new Error("expected a throw")
}

/** One 16×16 tile: C = A · Wᵀ with A, W 16×16 int8; the int32 sums stored as their low 8 bits. */
const gemmTile = () => {
  const L = layoutDram(d, [
    { name: "uop", kind: "uop", elems: 1 },
    { name: "a", kind: "inp", elems: 16 },
    { name: "w", kind: "wgt", elems: 1 },
    { name: "c", kind: "out", elems: 16 },
  ])
  const dram = new Uint8Array(L.bytes)
  const a = seededInt8(7, 256, -128, 127)
  const w = seededInt8(8, 256, -128, 127)
  writeInt8(dram, L, "a", a)
  writeInt8(dram, L, "w", w) // one 16×16 block [oc][ic] = W[oc][ic]
  writeUops(d, dram, L, "uop", [{ dst: 0, src: 0, wgt: 0 }])
  const R = (n: string) => L.regions.get(n)!.base
  const loop = { reset: false, uopBgn: 0, uopEnd: 1, iterOut: 16, iterIn: 1, dstFactorOut: 1, dstFactorIn: 0, srcFactorOut: 1, srcFactorIn: 0, wgtFactorOut: 0, wgtFactorIn: 0 }
  const insns: VtaInsn[] = [
    mem("LOAD", "uop", 0, R("uop"), 1, 1, 1),
    mem("LOAD", "inp", 0, R("a"), 1, 16, 16),
    mem("LOAD", "wgt", 0, R("w"), 1, 1, 1, { pushNext: true }),
    { op: "GEMM", deps: noDeps, ...loop, reset: true },
    { op: "GEMM", deps: deps({ popPrev: true, pushNext: true }), ...loop },
    mem("STORE", "out", 0, R("c"), 1, 16, 16, { popPrev: true }),
    { op: "FINISH", deps: noDeps },
  ]
  const want = new Int8Array(256)
  for (let m = 0; m < 16; m++) for (let n = 0; n < 16; n++) {
    let s = 0
    for (let k = 0; k < 16; k++) s += a[m * 16 + k] * w[n * 16 + k]
    want[m * 16 + n] = (s << 24) >> 24
  }
  return { L, dram, insns, want }
}

describe("VTA simulator: one 16×16 GEMM tile", () => {
  it("computes A·Wᵀ in int32 and stores the low 8 bits", () => {
    const { L, dram, insns, want } = gemmTile()
    const run = runVtaSync(d, insns, dram)
    expect(Array.from(readInt8(run.dram, L, "c", 256))).toEqual(Array.from(want))
    expect(Array.from(dram.subarray(L.regions.get("c")!.byteOffset))).toEqual(new Array(256).fill(0)) // the input image is untouched
  })

  it("costs what the cycle model says, worked out by hand", () => {
    const { dram, insns } = gemmTile()
    const { stats, timeline } = runVtaSync(d, insns, dram)
    expect(VTA_CYCLE_MODEL).toEqual({ dmaLatency: 64, padEntryCycles: 1, gemmII: 1, aluII: 2, finishCycles: 1 })
    // Instruction k arrives at 64 + 2(k+1) (16 bytes over an 8-byte bus).
    // 0 LOAD uop (compute): 66 → 66 + 64 + ⌈4/8⌉ = 131.   1 LOAD inp (load): 68 → 68 + 64 + 256/8 = 164.
    // 2 LOAD wgt (load): 164 → 260, pushes.             3 GEMM reset (compute): 131 → 147.
    // 4 GEMM (compute) waits for the token: 260 → 276.   5 STORE (store): 276 → 276 + 64 + 32 = 372.
    // 6 FINISH (compute): 276 → 277.
    expect(timeline.map((t) => [t.module, t.start, t.end])).toEqual([
      ["compute", 66, 131], ["load", 68, 164], ["load", 164, 260], ["compute", 131, 147], ["compute", 260, 276], ["store", 276, 372], ["compute", 276, 277],
    ])
    expect(stats.totalCycles).toBe(372)
    expect(stats.modules.compute).toEqual({ insns: 4, busy: 65 + 16 + 16 + 1, stall: 260 - 147, idle: 372 - 98 - 113 })
    expect(stats.modules.store).toEqual({ insns: 1, busy: 96, stall: 276 - 76, idle: 372 - 96 - 200 })
    expect(stats.bytes).toEqual({ inp: 256, wgt: 256, acc: 0, uop: 4, out: 256, insn: 7 * 16 })
    expect([stats.gemmOps, stats.gemmResetOps, stats.aluOps, stats.gemmBusy]).toEqual([16, 16, 0, 16])
    expect(stats.utilization).toBeCloseTo(16 / 372, 12)
    expect(stats.tokensLeft).toEqual({ "load→compute": 0, "compute→load": 0, "compute→store": 0, "store→compute": 0 })
  })
})

describe("VTA simulator: the ALU", () => {
  /** acc rows loaded from DRAM, one ALU sequence, stored: returns the int8 result. */
  const runAlu = (acc: number[], ops: VtaInsn[], rows: number) => {
    const L = layoutDram(d, [
      { name: "uop", kind: "uop", elems: 2 },
      { name: "acc", kind: "acc", elems: rows },
      { name: "c", kind: "out", elems: rows / 2 },
    ])
    const dram = new Uint8Array(L.bytes)
    writeInt32(dram, L, "acc", acc)
    writeUops(d, dram, L, "uop", [{ dst: 0, src: 0, wgt: 0 }, { dst: 0, src: rows / 2, wgt: 0 }])
    const R = (n: string) => L.regions.get(n)!.base
    const insns: VtaInsn[] = [
      mem("LOAD", "uop", 0, R("uop"), 1, 2, 2),
      mem("LOAD", "acc", 0, R("acc"), 1, rows, rows),
      ...ops,
      mem("STORE", "out", 0, R("c"), 1, rows / 2, rows / 2, { popPrev: true }),
      { op: "FINISH", deps: noDeps },
    ]
    return { run: runVtaSync(d, insns, dram), read: (dr: Uint8Array) => Array.from(readInt8(dr, L, "c", (rows / 2) * 16)) }
  }

  it("relu and shift: clip(x >> 3, 0, 127) over two rows", () => {
    const acc = Array.from({ length: 64 }, (_, i) => (i - 20) * 97 * (i % 3 === 0 ? 1000 : 1))
    const { run, read } = runAlu(acc, [alu("SHR", 0, 2, 3), alu("MAX", 0, 2, 0), alu("MIN", 0, 2, 127, { pushNext: true })], 4)
    expect(read(run.dram)).toEqual(acc.slice(0, 32).map((x) => Math.min(127, Math.max(0, x >> 3))))
    expect(run.stats.aluOps).toBe(6)
    expect(run.stats.modules.compute.busy).toBe(64 + 256 / 8 + 64 + 1 + 6 * 2 + 1) // uop, acc loads; 6 ALU iterations at II 2; FINISH
  })

  it("residual add from the accumulator (wrapping), then the low 8 bits", () => {
    const acc = Array.from({ length: 64 }, (_, i) => (i < 32 ? 2 ** 31 - 1 - i : 5 + i * 3))
    // uop 1: dst 0, src rows/2 = 2: acc rows 0–1 += rows 2–3.
    const { run, read } = runAlu(acc, [alu("ADD", 1, 2, undefined, { pushNext: true }, 1)], 4)
    expect(read(run.dram)).toEqual(acc.slice(0, 32).map((x, i) => (((x + acc[32 + i]) | 0) << 24) >> 24))
  })

  it("lanes: SHR by a negative amount shifts left, MUL takes the operand's low 8 bits signed, ADD wraps", () => {
    expect(aluLane("SHR", -100, 2, 5, 8)).toBe(-25)
    expect(aluLane("SHR", 3, -2, 5, 8)).toBe(12)
    expect(aluLane("SHR", 1, 31, 5, 8)).toBe(1 << 1) // 31 = −1 in 5 bits
    expect(aluLane("MUL", 3, 200, 5, 8)).toBe(3 * -56)
    expect(aluLane("ADD", 2 ** 31 - 1, 1, 5, 8)).toBe(-(2 ** 31))
    expect(aluLane("MIN", -3, 2, 5, 8)).toBe(-3)
    expect(aluLane("MAX", -3, 2, 5, 8)).toBe(2)
  })
})

describe("VTA simulator: load → compute → store with tokens", () => {
  const base = { M: 32, K: 4, N: 6, shift: 6 }
  const mk = (depth: 1 | 2): TiledGemmCase => ({ ...base, depth, a: seededInt8(11, base.M * base.K * 16), w: seededInt8(12, base.N * 16 * base.K * 16) })

  it("serial and latency-hiding programs both give the reference; hiding takes fewer cycles", () => {
    const runs = ([1, 2] as const).map((depth) => {
      const c = mk(depth)
      const p = buildTiledGemm(d, c)
      const run = runVtaSync(d, p.insns, p.dram)
      expect(Array.from(readTiledGemm(d, c, run.dram, p.layout))).toEqual(Array.from(p.expected))
      expect(Object.values(run.stats.tokensLeft)).toEqual([0, 0, 0, 0])
      return run.stats
    })
    const [serial, hidden] = runs
    expect(serial.gemmOps).toBe(hidden.gemmOps)
    expect(hidden.totalCycles).toBeLessThan(serial.totalCycles)
    expect(hidden.utilization).toBeGreaterThan(serial.utilization)
  })

  it("a pop whose push was removed is a VtaDeadlockError naming the popping instruction", () => {
    const p = buildTiledGemm(d, mk(2))
    const k = p.insns.findIndex((i) => i.op === "LOAD" && i.memType === "wgt")
    const insns = p.insns.map((i, j) => (j === k ? { ...i, deps: { ...i.deps, pushNext: false } } : i))
    const e = thrown(() => runVtaSync(d, insns, p.dram))
    expect(e).toBeInstanceOf(VtaDeadlockError)
    // Tokens carry no name: each GEMM takes the next weight load's token, and the last GEMM finds none.
    const gemm = insns.reduce((last, i, j) => (i.op === "GEMM" && i.deps.popPrev ? j : last), -1)
    expect((e as VtaDeadlockError).index).toBe(gemm)
    expect((e as VtaDeadlockError).queue).toBe("load→compute")
    expect((e as VtaDeadlockError).module).toBe("compute")
    const r = Effect.runSync(Effect.result(runVta(defaultVtaConfig, insns, p.dram)))
    expect(Result.isFailure(r) && r.failure._tag).toBe("VtaDeadlockError")
  })

  it("without the token that orders a weight load before its GEMM, the GEMM would read a stale slot: a VtaRaceError naming both", () => {
    // Load-bound (each tile's weights take 320 cycles, its compute 60), so the GEMM would run ahead of its load.
    const c: TiledGemmCase = { M: 4, K: 8, N: 6, shift: 4, depth: 2, a: seededInt8(21, 4 * 8 * 16), w: seededInt8(22, 6 * 16 * 8 * 16) }
    const p = buildTiledGemm(d, c)
    expect(Array.from(readTiledGemm(d, c, runVtaSync(d, p.insns, p.dram).dram, p.layout))).toEqual(Array.from(p.expected))
    // Tile 1's weight load no longer pushes, and tile 1's GEMM no longer pops.
    const wl = p.insns.flatMap((i, j) => (i.op === "LOAD" && i.memType === "wgt" ? [j] : []))[1]
    const gm = p.insns.flatMap((i, j) => (i.op === "GEMM" && i.deps.popPrev ? [j] : []))[1]
    const insns = p.insns.map((i, j) => (j === wl ? { ...i, deps: { ...i.deps, pushNext: false } } : j === gm ? { ...i, deps: { ...i.deps, popPrev: false } } : i))
    const e = thrown(() => runVtaSync(d, insns, p.dram)) as VtaRaceError
    expect(e).toBeInstanceOf(VtaRaceError)
    expect([e.index, e.other, e.space]).toEqual([gm, wl, "wgt"])
  })

  it("runs on BLOCK 32 and on larger buffers too", () => {
    for (const config of [{ ...defaultVtaConfig, logBlock: 5 }, { ...defaultVtaConfig, logBlock: 5, logInpBuffSize: 16, logWgtBuffSize: 20, logAccBuffSize: 18, logBusWidth: 7 }]) {
      const d32 = deriveVta(config)
      const c: TiledGemmCase = { M: 8, K: 2, N: 3, shift: 7, depth: 2, a: seededInt8(3, 8 * 2 * 32), w: seededInt8(4, 3 * 32 * 2 * 32) }
      const p = buildTiledGemm(d32, c)
      const run = runVtaSync(d32, p.insns, p.dram)
      expect(Array.from(readTiledGemm(d32, c, run.dram, p.layout))).toEqual(Array.from(p.expected))
    }
  })
})

describe("VTA simulator: typed errors", () => {
  const { dram, insns } = gemmTile()
  it("an accumulator index past the buffer is a VtaSramAddressError", () => {
    const bad = insns.map((i) => (i.op === "GEMM" && !i.reset ? { ...i, dstFactorOut: 2000 } : i))
    const e = thrown(() => runVtaSync(d, bad, dram)) as VtaSramAddressError
    expect(e).toBeInstanceOf(VtaSramAddressError)
    expect([e.buffer, e.entry, e.depth, e.index]).toEqual(["acc", 2 * 2000, 2048, 4]) // row 2 of 16: dst 0 + 2·2000 is the first past 2048
  })
  it("a load past the input buffer is a VtaSramAddressError", () => {
    const bad = insns.map((i) => (i.op === "LOAD" && i.memType === "inp" ? { ...i, sramBase: 2040 } : i))
    expect(thrown(() => runVtaSync(d, bad, dram))).toBeInstanceOf(VtaSramAddressError)
  })
  it("DRAM past the image is a VtaDramAddressError", () => {
    const bad = insns.map((i) => (i.op === "STORE" ? { ...i, dramBase: i.dramBase + 1 } : i))
    const e = thrown(() => runVtaSync(d, bad, dram)) as VtaDramAddressError
    expect(e).toBeInstanceOf(VtaDramAddressError)
    expect(e.index).toBe(5)
  })
  it("a flag the module has no queue for, a padded store, a load of the output buffer are VtaIllegalInsnError", () => {
    for (const bad of [
      insns.map((i) => (i.op === "STORE" ? { ...i, deps: { ...i.deps, popNext: true } } : i)),
      insns.map((i) => (i.op === "STORE" ? { ...i, xPad0: 1 } : i)),
      [mem("LOAD", "out", 0, 0, 1, 1, 1)],
    ]) expect(thrown(() => runVtaSync(d, bad, dram))).toBeInstanceOf(VtaIllegalInsnError)
  })
  it("padding loads zero-fill the buffer around the copied rows", () => {
    // The 16-row input padded by one zero element on each side of a row, and one zero row above and below.
    const padded = insns.map((i) => (i.op === "LOAD" && i.memType === "inp" ? { ...i, ySize: 1, xSize: 16, yPad0: 1, yPad1: 1, xPad0: 1, xPad1: 1 } : i))
    const run = runVtaSync(d, padded, dram)
    expect(run.stats.bytes.inp).toBe(256)
    expect(run.timeline[1].end - run.timeline[1].start).toBe(64 + 32 + (3 * 18 - 16)) // 38 padded entries at one cycle each
  })
})
