// lowering.ParallelChunks (the c target's TIR pipeline): the laws of every TIR pass on lowered random
// schedules with loops retagged parallel; and its decision: a kernel whose params take fewer bytes than
// the threshold has every parallel loop marked `parallel_chunks` = 1 and nothing else changed (every
// loop's kind, no other loop marked), one at or above it is returned unchanged. The c backend sizes
// the threshold from its target record (cores × L2), and the c emitter runs a marked loop through the
// pool's `tessera_parallel_for_chunks` with that count.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { PARALLEL_CHUNKS, type PrimFunc, type Stmt } from "../../../src/ast/tir/tir.js"
import { BACKENDS } from "../../../src/backend/index.js"
import { cpuTir } from "../../../src/backend/cpu.js"
import { cpuAttrs } from "../../../src/ast/target.js"
import { emitC } from "../../../src/emit/c/emit.js"
import { oneChunkMaxBytes, paramBytes, parallelChunks } from "../../../src/lowering/tir/serial-small-kernels.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"
import { arbVariedLoops, loopsOf, passLaws } from "./support.js"

const parallelised = arbVariedLoops({ kinds: ["parallel"] })

// a threshold above every generated case: every parallel loop marked
passLaws(parallelChunks(1 << 40), { cases: parallelised, runs: 30, variant: "every kernel small" })
passLaws(parallelChunks(256), { cases: parallelised, runs: 30, variant: "a threshold between the cases" })

const kinds = (s: Stmt): string[] => loopsOf(s).map((l) => l.forKind)
/** Each loop's chunks pragma (undefined where it has none), in loop order. */
const chunks = (s: Stmt): (string | undefined)[] => loopsOf(s).map((l) => (l.pragmas ?? []).find(([k]) => k === PARALLEL_CHUNKS)?.[1])

describe("lowering.ParallelChunks: its decision", () => {
  it("a kernel under the threshold has every parallel loop, and no other, marked one chunk a thread, every loop's kind kept; one at or above it is unchanged", () => {
    fc.assert(
      fc.property(parallelised, fc.integer({ min: 0, max: 4096 }), (c, maxBytes) => {
        const out = runTirSync(parallelChunks(maxBytes), c.func, { verify: false })
        if (paramBytes(c.func) >= maxBytes) {
          expect(out).toBe(c.func)
          return
        }
        expect(kinds(out.body)).toEqual(kinds(c.func.body))
        expect(chunks(out.body)).toEqual(kinds(c.func.body).map((k) => (k === "parallel" ? "1" : undefined)))
      }),
      lawParams(60),
    )
  })

  it("some generated kernel has a parallel loop and falls under the threshold (the decision is exercised)", () => {
    const seen = fc.sample(parallelised, { numRuns: 60, seed: 7 }).some((c) => kinds(c.func.body).includes("parallel") && paramBytes(c.func) < 4096)
    expect(seen).toBe(true)
  })

  it("the c pipeline's threshold is the target record's cores × L2 bytes, and the emitter runs a marked loop in that many chunks a thread", () => {
    expect(oneChunkMaxBytes(2, 1 << 20)).toBe(2 << 20)
    expect(oneChunkMaxBytes(0, 1 << 20)).toBe(1 << 20)
    // (an L1 of 64 bytes: SerialSmallKernels keeps every parallel loop of these kernels of a few KB)
    const lowered = (f: PrimFunc, l2Bytes: number) => runTirSync(cpuTir(BACKENDS.c.target(cpuAttrs({ l1Bytes: 64, l2Bytes }), 2)), f)
    const marked = (f: PrimFunc) => loopsOf(f.body).filter((l) => l.forKind === "parallel" && chunks(l).at(0) !== undefined).length
    // a kernel of a few KB: unmarked where the cores' L2s are smaller than it, marked on two cores with 1 MiB L2s
    const kept = fc.sample(parallelised, { numRuns: 60, seed: 3 }).find((c) => paramBytes(c.func) >= 256 && kinds(lowered(c.func, 64).body).includes("parallel"))!
    expect(kept).toBeDefined()
    expect(marked(lowered(kept.func, 64))).toBe(0)
    const small = lowered(kept.func, 1 << 20)
    expect(marked(small)).toBe(kinds(small.body).filter((k) => k === "parallel").length)
    expect(marked(small)).toBeGreaterThan(0)
    // the emitted calls: the pool's runner with one chunk a thread, each marked loop's; the unmarked function's none
    const calls = (f: PrimFunc) => emitC([{ ...f, name: "k0" }], { parallel: "pool" }).source.match(/tessera_parallel_for_chunks\([^;]*, 1\);/g)?.length ?? 0
    expect(calls(small)).toBe(marked(small))
    expect(calls(lowered(kept.func, 64))).toBe(0)
  })
})
