// lowering.SerialSmallKernels (the CPU targets' TIR pipeline): the laws of every TIR pass on lowered
// random schedules with loops retagged parallel; and its decision: a kernel whose params take fewer
// bytes than the threshold has no parallel loop left and every other loop as it was, one at or above
// it is returned unchanged. The c backend sizes the threshold from its target record (cores × L1).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { PrimFunc, Stmt } from "../../../src/ast/tir/tir.js"
import { BACKENDS } from "../../../src/backend/index.js"
import { cpuTir } from "../../../src/backend/cpu.js"
import { cpuAttrs } from "../../../src/ast/target.js"
import { paramBytes, parallelMinBytes, serialSmallKernels } from "../../../src/lowering/tir/serial-small-kernels.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"
import { arbVariedLoops, loopsOf, passLaws } from "./support.js"

const parallelised = arbVariedLoops({ kinds: ["parallel"] })

// a threshold above every generated case: every parallel loop serial
passLaws(serialSmallKernels(1 << 40), { cases: parallelised, runs: 30, variant: "every kernel small" })
passLaws(serialSmallKernels(256), { cases: parallelised, runs: 30, variant: "a threshold between the cases" })

const kinds = (s: Stmt): string[] => loopsOf(s).map((l) => l.forKind)

describe("lowering.SerialSmallKernels: its decision", () => {
  it("a kernel under the threshold keeps no parallel loop and every other loop's kind; one at or above it is unchanged", () => {
    fc.assert(
      fc.property(parallelised, fc.integer({ min: 0, max: 4096 }), (c, minBytes) => {
        const out = runTirSync(serialSmallKernels(minBytes), c.func, { verify: false })
        if (paramBytes(c.func) >= minBytes) {
          expect(out).toBe(c.func)
          return
        }
        expect(kinds(out.body)).toEqual(kinds(c.func.body).map((k) => (k === "parallel" ? "serial" : k)))
      }),
      lawParams(60),
    )
  })

  it("some generated kernel has a parallel loop and falls under the threshold (the decision is exercised)", () => {
    const seen = fc.sample(parallelised, { numRuns: 60, seed: 7 }).some((c) => kinds(c.func.body).includes("parallel") && paramBytes(c.func) < 4096)
    expect(seen).toBe(true)
  })

  it("the CPU pipeline's threshold is the target record's cores × L1 bytes", () => {
    expect(parallelMinBytes(2, 48 * 1024)).toBe(96 * 1024)
    expect(parallelMinBytes(0, 32 * 1024)).toBe(32 * 1024)
    const lowered = (f: PrimFunc, l1Bytes: number) => kinds(runTirSync(cpuTir(BACKENDS.c.target(cpuAttrs({ l1Bytes }), 2)), f).body)
    // a kernel of a few KB whose parallel loop the pipeline keeps where the L1 is 64 bytes (a
    // threshold of 128 on two cores) loses it on two cores with 48 KiB L1s
    const kept = fc.sample(parallelised, { numRuns: 60, seed: 3 }).find((c) => paramBytes(c.func) >= 128 && lowered(c.func, 64).includes("parallel"))!
    expect(kept).toBeDefined()
    expect(paramBytes(kept.func)).toBeLessThan(96 * 1024)
    expect(lowered(kept.func, 48 * 1024)).not.toContain("parallel")
  })
})
