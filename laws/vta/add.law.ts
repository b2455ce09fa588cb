// The VTA residual add (src/lowering/vta/add.ts) on random sizes, chunks, clip bounds and one to
// four virtual threads: the program run on the simulator stores clip(a + b, lo, 127) for every
// entry, bit for bit, under the default cycle model and under random ones (a synchronized program's
// answer does not depend on timing, and it never races); more virtual threads give the same bytes.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { defaultVtaConfig, deriveVta } from "../../src/ast/vta/config.js"
import type { VtaAdd } from "../../src/lowering/vta/add.js"
import { lawParams } from "../support.js"
import { addReference, runAdd } from "./add-cases.js"
import { seededInt8 } from "./programs.js"

const d = deriveVta(defaultVtaConfig)

const arbCase = fc.record({
  entries: fc.integer({ min: 1, max: 48 }),
  chunk: fc.integer({ min: 1, max: 48 }),
  clipLo: fc.oneof(fc.constant(0), fc.constant(-128), fc.integer({ min: -128, max: 0 })),
  vthreads: fc.integer({ min: 1, max: 4 }),
  seed: fc.nat(),
  model: fc.record({
    dmaLatency: fc.integer({ min: 0, max: 400 }),
    padEntryCycles: fc.integer({ min: 0, max: 3 }),
    gemmII: fc.integer({ min: 1, max: 8 }),
    aluII: fc.integer({ min: 1, max: 8 }),
    finishCycles: fc.integer({ min: 1, max: 4 }),
  }),
})

describe("VTA residual add", () => {
  it("simulator == clip(a + b, lo, 127), bit for bit, with 1–4 virtual threads, under any cycle model", () => {
    fc.assert(
      fc.property(arbCase, (c) => {
        const n = c.entries * d.blockOut
        const a = seededInt8(c.seed, n, -128, 127)
        const b = seededInt8(c.seed + 1, n, -128, 127)
        const want = Array.from(addReference(a, b, c.clipLo))
        const x: VtaAdd = { entries: c.entries, clipLo: c.clipLo, vthreads: c.vthreads }
        const run = runAdd(x, a, b, c.chunk)
        expect(Array.from(run.out)).toEqual(want)
        expect(Array.from(runAdd(x, a, b, c.chunk, c.model).out)).toEqual(want)
        expect(Array.from(runAdd({ ...x, vthreads: 1 }, a, b, c.chunk).out)).toEqual(want)
        // the work does not change with the threads: one widening GEMM pass of both operands, three ALU passes
        expect(run.r.stats.aluOps).toBe(3 * c.entries)
      }),
      lawParams(60),
    )
  })
})
