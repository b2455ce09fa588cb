// The cuda target's GPU rules, simulated (cuda-sim): on random computes and shapes, every
// configuration of a group's GPU space, lowered and run by the TIR evaluator with its thread teams,
// barriers and shared memory, computes what the TE says; its TIR has no store outside a thread
// loop, no barrier under a condition and no shared buffer written and read by different statements
// between two barriers; and the defaults from the attrs fit the record's limits. Per rule, on the
// shapes it is for: multi-level tiling (matmul, batch matmul, conv2d, depthwise), cross-thread
// reduction (few rows over a long axis, a batch-1 dense), auto-bind (elementwise chains).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbComputeCase, COMPUTE_FAMILIES, buildCompute, denseRowCase, longReductionCase, matmulCase, type ComputeCase } from "../../../src/ast/te/arbitrary.js"
import { cudaAttrs, type CudaAttrs } from "../../../src/ast/target.js"
import { evaluateTE } from "../../../src/ast/te/evaluate.js"
import { evaluatePrimFunc } from "../../../src/ast/tir/evaluate.js"
import type { PrimFunc } from "../../../src/ast/tir/tir.js"
import { baseSchedule } from "../../../src/lowering/lower-group.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { gpuLimits, gpuRules, gpuTemplate, verifyGpuFunc } from "../../../src/lowering/templates/gpu/index.js"
import type { Config, Knob } from "../../../src/lowering/templates/template.js"
import { hasReuse } from "../../../src/lowering/templates/gpu/multi-level-tiling.js"
import { anchorStage } from "../../../src/lowering/templates/common.js"
import { assertAllClose, lawParams } from "../../support.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { cudaTirPipeline } from "../../../src/lowering/tir/cuda-pipeline.js"
import { splitLaunches } from "../../../src/emit/cuda/launch.js"
import { verifyLaunch } from "../../../src/emit/cuda/verify.js"
import type { Stmt } from "../../../src/ast/tir/tir.js"

const countShuffles = (s: Stmt): number =>
  s.kind === "shuffle" ? 1 : s.kind === "seq" ? s.body.reduce((n, b) => n + countShuffles(b), 0) : s.kind === "for" || s.kind === "allocate" || s.kind === "let" ? countShuffles(s.body) : s.kind === "if" ? countShuffles(s.then) + (s.else ? countShuffles(s.else) : 0) : 0

const NO_TARGET = { vectorLanes: 1, cores: 1 }

/** A GPU of a known capability with 1 to 160 SMs (few SMs: the tiling rule takes small groups; many: the cross-thread rule does). */
const arbAttrs: fc.Arbitrary<CudaAttrs> = fc.tuple(fc.constantFrom("7.0", "8.0", "9.0"), fc.integer({ min: 1, max: 160 })).map(([cc, sms]) => cudaAttrs(cc, sms))

/** The config whose knob k takes candidate picks[k] (mod its count). */
const pickConfig = (knobs: readonly Knob[], picks: readonly number[]): Config =>
  Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i % picks.length] % k.candidates.length]]))

/** Lowers a case under a config of its GPU space; its function, the verifier's problems (limits aside where `limits` is false) and the rules. */
const lowerGpu = (cc: ComputeCase, attrs: CudaAttrs, config?: (knobs: readonly Knob[]) => Config) => {
  const base = baseSchedule(cc.outputs)
  const t = gpuTemplate(attrs, base)
  const knobs = t.space(cc.outputs, base)
  const c = config ? config(knobs) : t.defaults(knobs, NO_TARGET)
  const f = lowerSync(t.apply(cc.outputs, base, c))
  const v = verifyGpuFunc(f, gpuLimits(attrs))
  return { f, v, rules: gpuRules(base, gpuLimits(attrs)).map((r) => r.rule), config: c }
}

/** The simulated run equals the TE. */
const assertSimulates = (f: PrimFunc, cc: ComputeCase) => {
  const got = evaluatePrimFunc(f, cc.inputs)
  assertAllClose(
    cc.outputs.map((o) => got.get(o.name)!),
    evaluateTE(cc.outputs, cc.inputs),
    1e-4,
    1e-4,
  )
}

/** Problems that are no limit of the record (a random config may exceed the threads or shared bytes a block has; nothing else). */
const structural = (problems: readonly string[]) => problems.filter((p) => !/over the limit|registers of a block/.test(p))

const checkRandomConfig = (cc: ComputeCase, attrs: CudaAttrs, picks: readonly number[], rule?: string) => {
  const { f, v, rules } = lowerGpu(cc, attrs, (knobs) => pickConfig(knobs, picks))
  if (rule) expect(rules).toContain(rule)
  expect(structural(v.problems)).toEqual([])
  assertSimulates(f, cc)
}

const picks = fc.array(fc.nat(), { minLength: 12, maxLength: 12 })

describe("GPU rules (cuda-sim)", () => {
  it("every configuration of a group's GPU space, simulated with thread teams, barriers and shared memory, equals the TE; no store outside a thread, no conditional barrier, no shared race", () => {
    fc.assert(
      fc.property(arbComputeCase(COMPUTE_FAMILIES.filter((f) => f !== "conv2d_nchwc")), arbAttrs, picks, (cc, attrs, p) => checkRandomConfig(cc, attrs, p)),
      lawParams(60),
    )
  })

  it("multi-level tiling: random matmuls (batched, with and without an epilogue), convolutions and depthwise convolutions, random tiles", () => {
    const arbCase = fc.oneof(
      fc.record({ seed: fc.nat(), batch: fc.integer({ min: 0, max: 2 }), m: fc.integer({ min: 1, max: 12 }), n: fc.integer({ min: 2, max: 12 }), k: fc.integer({ min: 1, max: 12 }), epilogue: fc.boolean() }).map((o) => matmulCase(o.seed, o)),
      fc.tuple(fc.constantFrom("conv2d" as const, "depthwise" as const), fc.nat()).map(([f, seed]) => buildCompute(f, seed)),
    )
    fc.assert(
      fc.property(arbCase, fc.constantFrom("8.0", "9.0"), picks, (cc, capability, p) => {
        // (a conv to one output element has no reuse: auto-bind takes it)
        fc.pre(hasReuse(anchorStage(baseSchedule(cc.outputs))!))
        checkRandomConfig(cc, cudaAttrs(capability, 1), p, "tile")
      }),
      lawParams(60),
    )
  })

  it("AutoTVM's conv2d template (threadIdx.z/y/x, vthreads, two-level reduction splits, unroll pragmas): random convolutions and depthwise convolutions, random configs of its space", () => {
    fc.assert(
      fc.property(fc.constantFrom("conv2d" as const, "depthwise" as const), fc.nat(), picks, (family, seed, p) => {
        const cc = buildCompute(family, seed)
        fc.pre(hasReuse(anchorStage(baseSchedule(cc.outputs))!))
        const { f, v, config } = lowerGpu(cc, cudaAttrs("9.0", 1), (knobs) => ({ ...pickConfig(knobs, p), cuda_sketch: "autotvm" }))
        expect(config.cuda_sketch).toBe("autotvm")
        expect(structural(v.problems)).toEqual([])
        assertSimulates(f, cc)
      }),
      lawParams(40),
    )
  })

  it("cross-thread reduction: few rows over a long axis (sum or max, with a mean after), a batch-1 dense; random threads and rows a block", () => {
    const arbCase = fc.oneof(
      fc.record({ seed: fc.nat(), rows: fc.integer({ min: 1, max: 3 }), cols: fc.integer({ min: 1, max: 3 }), r: fc.integer({ min: 32, max: 300 }), max: fc.boolean(), mean: fc.boolean() }).map((o) => longReductionCase(o.seed, o)),
      fc.record({ seed: fc.nat(), n: fc.integer({ min: 1, max: 6 }), k: fc.integer({ min: 32, max: 200 }) }).map((o) => denseRowCase(o.seed, o.n, o.k)),
    )
    fc.assert(
      fc.property(arbCase, fc.constantFrom("8.0", "9.0"), picks, (cc, capability, p) => checkRandomConfig(cc, cudaAttrs(capability, 132), p, "cross-thread")),
      lawParams(40),
    )
  })

  it("cross-thread reduction with warp shuffles (lowering.LowerThreadAllreduce): through the cuda pipeline, the partials summed by __shfl_down_sync within warps and across them, simulated lane by lane, equal the TE; every launch verifies", () => {
    const arbCase = fc.oneof(
      fc.record({ seed: fc.nat(), rows: fc.integer({ min: 1, max: 3 }), cols: fc.integer({ min: 1, max: 3 }), r: fc.integer({ min: 32, max: 700 }), max: fc.boolean(), mean: fc.boolean() }).map((o) => longReductionCase(o.seed, o)),
      fc.record({ seed: fc.nat(), n: fc.integer({ min: 1, max: 6 }), k: fc.integer({ min: 32, max: 400 }) }).map((o) => denseRowCase(o.seed, o.n, o.k)),
    )
    fc.assert(
      fc.property(arbCase, fc.constantFrom("8.0", "9.0"), picks, (cc, capability, p) => {
        const attrs = cudaAttrs(capability, 132)
        const { f: f0, rules } = lowerGpu(cc, attrs, (knobs) => ({ ...pickConfig(knobs, p), ...Object.fromEntries(knobs.filter((k) => k.name.endsWith("_shuffle")).map((k) => [k.name, 1])) }))
        expect(rules).toContain("cross-thread")
        const f = runTirSync(cudaTirPipeline(attrs), f0)
        expect(countShuffles(f.body)).toBeGreaterThan(0)
        for (const l of splitLaunches(f).launches) verifyLaunch(l, attrs)
        assertSimulates(f, cc)
      }),
      lawParams(30),
    )
  })

  it("auto-bind: elementwise chains, any threads a block", () => {
    fc.assert(
      fc.property(fc.nat(), arbAttrs, picks, (seed, attrs, p) => checkRandomConfig(buildCompute("elementwise", seed), attrs, p, "bind")),
      lawParams(30),
    )
  })

  it("the defaults from the attrs verify within the record's limits (threads, shared bytes, registers) and equal the TE", () => {
    const arbCase = fc.oneof(
      arbComputeCase(COMPUTE_FAMILIES.filter((f) => f !== "conv2d_nchwc")),
      fc.record({ seed: fc.nat(), batch: fc.integer({ min: 0, max: 1 }), m: fc.integer({ min: 1, max: 40 }), n: fc.integer({ min: 2, max: 40 }), k: fc.integer({ min: 1, max: 40 }), epilogue: fc.boolean() }).map((o) => matmulCase(o.seed, o)),
    )
    fc.assert(
      fc.property(arbCase, arbAttrs, (cc, attrs) => {
        const { f, v } = lowerGpu(cc, attrs)
        expect(v.problems).toEqual([])
        assertSimulates(f, cc)
      }),
      lawParams(40),
    )
  })
})
