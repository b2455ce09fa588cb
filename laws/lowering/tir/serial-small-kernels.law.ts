// lowering.SerialSmallKernels (the CPU targets' TIR pipeline): the laws of every TIR pass on lowered
// random schedules with loops retagged parallel, under both rules; and its decision:
// - the bytes rule: a kernel whose params take fewer bytes than the threshold has no parallel loop
//   left and every other loop as it was, one at or above it is returned unchanged;
// - the time rule: the same, where the kernel's one-core time (its params at the streaming rate
//   plus its operations at peak) × (1 − 1/cores) is under its regions × the region's cost × the
//   margin — its operations and regions counted here by running every iteration of the loop nest,
//   not by the pass's count (which multiplies uniform loops and stops early);
// - the c pipeline's rule follows the target record: the time rule over the record's measured
//   region at its cores (margin = the break-even's saving over the region's cost), the bytes rule
//   (cores × L1) for js and wasm, one core, or a record without the measurement.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { Expr } from "../../../src/ast/te/expr.js"
import { evalExpr } from "../../../src/ast/te/eval-expr.js"
import type { PrimFunc, Stmt } from "../../../src/ast/tir/tir.js"
import { BACKENDS } from "../../../src/backend/index.js"
import { cpuTir, serialRule } from "../../../src/backend/cpu.js"
import { cpuAttrs, type ParallelRegionRecord } from "../../../src/ast/target.js"
import { callWork, paramBytes, parallelMinBytes, serialSmallKernels, type RegionCost } from "../../../src/lowering/tir/serial-small-kernels.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"
import { arbVariedLoops, loopsOf, passLaws } from "./support.js"

const parallelised = arbVariedLoops({ kinds: ["parallel"] })

// a threshold above every generated case: every parallel loop serial
passLaws(serialSmallKernels(1 << 40), { cases: parallelised, runs: 30, variant: "every kernel small" })
passLaws(serialSmallKernels(256), { cases: parallelised, runs: 30, variant: "a threshold between the cases" })
const between: RegionCost = { cores: 2, regionNs: 40, margin: 1.5, streamBytesPerNs: 8, flopsPerNs: 4 }
passLaws(serialSmallKernels({ kind: "time", cost: between }), { cases: parallelised, runs: 30, variant: "the time rule" })

const kinds = (s: Stmt): string[] => loopsOf(s).map((l) => l.forKind)

/** A call's operations (each binary operation, call and select in a stored value, a select's condition not) and parallel regions entered, every iteration run. */
const runCounts = (f: PrimFunc): { flops: number; regions: number } => {
  const env = new Map<string, number>()
  const ev = (e: Expr) => evalExpr(e, env, () => 0)
  const ops = (e: Expr): number =>
    e.kind === "bin" ? 1 + ops(e.a) + ops(e.b) : e.kind === "call" ? 1 + e.args.reduce((s, x) => s + ops(x), 0) : e.kind === "select" ? 1 + ops(e.t) + ops(e.f) : e.kind === "cast" ? ops(e.value) : 0
  let flops = 0
  let regions = 0
  const run = (s: Stmt, inside: boolean): void => {
    switch (s.kind) {
      case "for": {
        const region = s.forKind === "parallel" && !inside
        if (region) regions++
        const [min, extent] = [ev(s.min), ev(s.extent)]
        for (let i = 0; i < extent; i++) {
          env.set(s.var.name, min + i)
          run(s.body, inside || region)
        }
        env.delete(s.var.name)
        return
      }
      case "seq":
        return s.body.forEach((b) => run(b, inside))
      case "store":
        flops += ops(s.value)
        return
      case "if":
        return ev(s.cond) ? run(s.then, inside) : s.else ? run(s.else, inside) : undefined
      case "let":
        env.set(s.var.name, ev(s.value))
        run(s.body, inside)
        env.delete(s.var.name)
        return
      case "allocate":
        return run(s.body, inside)
      default:
        return
    }
  }
  run(f.body, false)
  return { flops, regions }
}

/** The time rule's decision, restated: serial where the split saves less than the regions cost. */
const timeRuleSerial = (f: PrimFunc, cost: RegionCost): boolean => {
  const { flops, regions } = runCounts(f)
  const oneCore = paramBytes(f) / cost.streamBytesPerNs + flops / cost.flopsPerNs
  return regions > 0 && oneCore * (1 - 1 / cost.cores) < regions * cost.regionNs * cost.margin
}

const arbCost: fc.Arbitrary<RegionCost> = fc.record({
  cores: fc.integer({ min: 2, max: 8 }),
  regionNs: fc.double({ min: 1, max: 400, noNaN: true }),
  margin: fc.double({ min: 0.25, max: 4, noNaN: true }),
  streamBytesPerNs: fc.double({ min: 1, max: 64, noNaN: true }),
  flopsPerNs: fc.double({ min: 0.5, max: 64, noNaN: true }),
})

describe("lowering.SerialSmallKernels: its decision", () => {
  it("bytes rule: a kernel under the threshold keeps no parallel loop and every other loop's kind; one at or above it is unchanged", () => {
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

  it("time rule: serial exactly where the one-core time's saving is under regions × region cost × margin (operations and regions counted by running the loops)", () => {
    fc.assert(
      fc.property(parallelised, arbCost, (c, cost) => {
        const out = runTirSync(serialSmallKernels({ kind: "time", cost }), c.func, { verify: false })
        if (!timeRuleSerial(c.func, cost)) {
          expect(out).toBe(c.func)
          return
        }
        expect(kinds(out.body)).toEqual(kinds(c.func.body).map((k) => (k === "parallel" ? "serial" : k)))
      }),
      lawParams(80),
    )
  })

  it("the pass's count (uniform loops multiplied) equals the count of every iteration", () => {
    fc.assert(
      fc.property(parallelised, (c) => {
        const w = callWork(c.func)
        expect(w.complete).toBe(true)
        expect({ flops: w.flops, regions: w.regions }).toEqual(runCounts(c.func))
      }),
      lawParams(60),
    )
  })

  it("both outcomes of each rule are exercised by the generated kernels", () => {
    // (counted by the pass's count, which the law above holds equal to running every iteration)
    const sample = fc.sample(fc.tuple(parallelised, arbCost), { numRuns: 80, seed: 7 })
    const withRegion = sample.filter(([c]) => kinds(c.func.body).includes("parallel")).map(([c, cost]) => ({ c, cost, work: callWork(c.func) }))
    const serial = ({ c, cost, work }: (typeof withRegion)[number]) =>
      work.regions > 0 && (paramBytes(c.func) / cost.streamBytesPerNs + work.flops / cost.flopsPerNs) * (1 - 1 / cost.cores) < work.regions * cost.regionNs * cost.margin
    expect(withRegion.some(({ c }) => paramBytes(c.func) < 4096)).toBe(true)
    expect(withRegion.some(serial)).toBe(true)
    expect(withRegion.some((x) => !serial(x))).toBe(true)
    // some kernel with several regions a call (a parallel loop inside a serial one)
    expect(withRegion.some(({ work }) => work.regions > 1)).toBe(true)
  })
})

describe("lowering.SerialSmallKernels: the rule follows the target record", () => {
  const record = (regionNs: number, breakEvenNs: number, streamBytesPerNs = 10, flopsPerNs = 100): ParallelRegionRecord => ({ flopsPerNs, byThreads: { "2": { regionNs, breakEvenNs, streamBytesPerNs } } })
  const l1Bytes = 48 * 1024

  it("c at the record's cores: the time rule, its margin the break-even's saving over the region's cost; js, wasm, one core, no record: cores × L1", () => {
    const parallelRegion = record(500, 3000, 12, 150)
    const attrs = cpuAttrs({ l1Bytes, parallelRegion })
    expect(serialRule(BACKENDS.c.target(attrs, 2))).toEqual({ kind: "time", cost: { cores: 2, regionNs: 500, margin: (3000 * (1 - 1 / 2)) / 500, streamBytesPerNs: 12, flopsPerNs: 150 } })
    // 4 cores with only 2 measured: the 2-thread region, its margin as measured at 2
    expect(serialRule(BACKENDS.c.target(attrs, 4))).toMatchObject({ kind: "time", cost: { cores: 4, margin: 3 } })
    expect(serialRule(BACKENDS.c.target(attrs, 1))).toEqual({ kind: "bytes", minBytes: l1Bytes })
    // (the js and wasm records take no host record today; were one handed the measured pool, it is the c pool's)
    expect(serialRule({ kind: "js", attrs: { ...attrs, cores: 2 } })).toEqual({ kind: "bytes", minBytes: parallelMinBytes(2, l1Bytes) })
    expect(serialRule({ kind: "wasm", attrs: { ...attrs, cores: 2 } })).toEqual({ kind: "bytes", minBytes: parallelMinBytes(2, l1Bytes) })
    expect(serialRule(BACKENDS.c.target(cpuAttrs({ l1Bytes }), 2))).toEqual({ kind: "bytes", minBytes: parallelMinBytes(2, l1Bytes) })
  })

  it("a kernel's parallel loops on c at 2 cores: kept where the record's break-even is under its one-core time a region, serial where it is over", () => {
    const lowered = (f: PrimFunc, parallelRegion: ParallelRegionRecord) => kinds(runTirSync(cpuTir(BACKENDS.c.target(cpuAttrs({ l1Bytes, parallelRegion }), 2)), f).body)
    // one-core time as the record's rates estimate it (10 bytes and 100 operations a ns): at 2 cores
    // the saving is half of it, the regions' cost regions × regionNs × margin = regions × breakEven / 2
    const oneCore = (f: PrimFunc) => paramBytes(f) / 10 + runCounts(f).flops / 100
    // (the kernels whose parallel loops the pipeline keeps where the rule keeps them: simplifyTir drops a loop of one iteration)
    const cases = fc.sample(parallelised, { numRuns: 60, seed: 3 }).filter((c) => lowered(c.func, record(50, 1e-9)).includes("parallel"))
    expect(cases.length).toBeGreaterThan(5)
    for (const c of cases.slice(0, 12)) {
      const perRegion = oneCore(c.func) / runCounts(c.func).regions
      expect(lowered(c.func, record(50, perRegion / 1.25))).toContain("parallel")
      expect(lowered(c.func, record(50, perRegion * 1.25))).not.toContain("parallel")
    }
  })
})
