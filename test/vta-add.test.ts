// The residual add with virtual threads (src/lowering/vta/add.ts): two slots hide the loads of one
// chunk under the GEMM and ALU of the other (fewer cycles than serial, the same bytes), and the
// tokens of the protocol: without any one push the run deadlocks; without any one pop but the
// resets' it races, deadlocks or answers wrong under some cycle model (the resets' pops: see below).
import { describe, expect, it } from "vitest"
import { defaultVtaConfig, deriveVta } from "../src/ast/vta/config.js"
import type { VtaInsn } from "../src/ast/vta/isa.js"
import { VTA_CYCLE_MODEL, type VtaCycleModel } from "../src/device/vta/cycle-model.js"
import { VtaDeadlockError, VtaRaceError } from "../src/device/vta/errors.js"
import { runVtaSync } from "../src/device/vta/simulator.js"
import { addChunkLimit, lowerAdd } from "../src/lowering/vta/add.js"
import { addReference, runAdd } from "../laws/vta/add-cases.js"
import { seededInt8 } from "../laws/vta/programs.js"

const d = deriveVta(defaultVtaConfig)

describe("VTA residual add with virtual threads", () => {
  it("two slots: fewer cycles than serial on ResNet-18's first residual add (4 channel blocks of 56×56), the same bytes", () => {
    const entries = 4 * 56 * 56
    const cycles = (vthreads: number) => {
      const p = lowerAdd(d, { entries, clipLo: 0, vthreads })
      return { p, stats: runVtaSync(d, p.insns, p.dram.slice(), VTA_CYCLE_MODEL, { functional: false }).stats }
    }
    const serial = cycles(1)
    const hidden = cycles(2)
    expect(serial.p.chunk).toBe(addChunkLimit(d, 1))
    expect(hidden.p.chunk).toBe(addChunkLimit(d, 1) / 2)
    expect(hidden.stats.totalCycles).toBeLessThan(serial.stats.totalCycles)
    // the bytes: several chunks a slot (the law draws the rest)
    const a = seededInt8(1, 300 * 16, -128, 127)
    const b = seededInt8(2, 300 * 16, -128, 127)
    const want = Array.from(addReference(a, b, 0))
    expect(Array.from(runAdd({ entries: 300, clipLo: 0 }, a, b, 64).out)).toEqual(want)
    expect(Array.from(runAdd({ entries: 300, clipLo: 0, vthreads: 2 }, a, b, 64).out)).toEqual(want)
  })

  const outcome = (insns: readonly VtaInsn[], model: VtaCycleModel): string => {
    const entries = 32
    const a = seededInt8(3, entries * 16, -128, 127)
    const b = seededInt8(4, entries * 16, -128, 127)
    const p = lowerAdd(d, { entries, clipLo: -20, vthreads: 2 }, 8)
    const dram = p.dram.slice()
    dram.set(new Uint8Array(a.buffer), p.layout.regions.get("a")!.byteOffset)
    dram.set(new Uint8Array(b.buffer), p.layout.regions.get("b")!.byteOffset)
    try {
      const r = runVtaSync(d, insns, dram, model)
      const o = p.layout.regions.get("out")!.byteOffset
      const got = new Int8Array(r.dram.buffer.slice(r.dram.byteOffset + o, r.dram.byteOffset + o + entries * 16))
      return Array.from(got).every((v, i) => v === addReference(a, b, -20)[i]) ? "same" : "wrong"
    } catch (e) {
      if (e instanceof VtaDeadlockError) return "deadlock"
      if (e instanceof VtaRaceError) return "race"
      throw e
    }
  }

  it("removing one token from the two-slot protocol: a push deadlocks; a pop (but a reset's) races, deadlocks or answers wrong under some cycle model", () => {
    const p = lowerAdd(d, { entries: 32, clipLo: -20, vthreads: 2 }, 8)
    expect(p.chunks).toBe(4)
    // a token a timing makes redundant (its producer long done) is needed under another
    const models = [VTA_CYCLE_MODEL, { ...VTA_CYCLE_MODEL, dmaLatency: 5000 }, { ...VTA_CYCLE_MODEL, gemmII: 400, aluII: 400 }]
    expect(models.map((m) => outcome(p.insns, m))).toEqual(models.map(() => "same"))
    const flags = ["popPrev", "popNext", "pushPrev", "pushNext"] as const
    const tokens = p.insns.flatMap((i, k) => flags.filter((f) => i.deps[f]).map((f) => [k, f] as const))
    // per chunk: load→compute and compute→store pushed and popped; from chunk 2 on the slot's reuse pops (a LOAD's compute→load, a reset's store→compute), pushed by chunk t−2
    expect(tokens.length).toBe(4 * 4 + 4 * 2)
    const uncaught = tokens.filter(([k, f]) => {
      const insns = p.insns.map((i, j) => (j === k ? { ...i, deps: { ...i.deps, [f]: false } } : i))
      const seen = models.map((m) => outcome(insns, m))
      if (f.startsWith("push")) expect(seen.every((s) => s === "deadlock")).toBe(true)
      return seen.every((s) => s === "same")
    })
    // All but the resets' store→compute pops. Those no cycle model of this simulator can catch:
    // the load module moves two chunks for each one the store module moves, at the same DMA cost a
    // byte, so the store of chunk t has always ended before compute, which waits for chunk t + 1's
    // loads, reaches chunk t + 2's reset. They stay for a board whose stores can be slower (the bus
    // contention the cycle model leaves out), as conv2d.ts's resets keep theirs (test/vta-conv2d.test.ts).
    expect(uncaught.map(([k, f]) => [p.insns[k].op, (p.insns[k] as { reset?: boolean }).reset, f])).toEqual([2, 3].map(() => ["GEMM", true, "popNext"]))
  })
})
