// lowering.HalfStorage (`--precision fp16` on cuda): every compute family under the GPU rules,
// through the cuda TIR pipeline, with every param stored as halves, its launches run by the TIR
// evaluator — float16 stores rounded to nearest even through float32, as __float2half_rn — equals
// the TE reference computed the same way: inputs rounded to halves, float32 arithmetic, each
// output rounded to a half once — on random computes of every family and random long sums
// (denses, matmuls, convs, row sums: tiled, cross-thread and auto-bound ones). "Equals" is within one half ulp of the result (plus float32's
// 1e-5: the two sum in different orders, and a float32 difference at a rounding boundary moves a
// half by one ulp), which a kernel that accumulates in half does not meet: the law's own check
// below runs the property with `accumulateInHalf` (the read-back output kept as a half, each
// partial sum rounded) and expects fast-check to find a counterexample.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { roundF16 } from "../../../src/ast/graph/dtype.js"
import type { Tensor } from "../../../src/ast/graph/tensor.js"
import { arbComputeCase, COMPUTE_FAMILIES, convCase, denseRowCase, longReductionCase, matmulCase, type ComputeCase } from "../../../src/ast/te/arbitrary.js"
import { evaluateTE } from "../../../src/ast/te/evaluate.js"
import { cudaAttrsForArch, type CudaAttrs } from "../../../src/ast/target.js"
import { splitLaunches } from "../../../src/emit/cuda/launch.js"
import { verifyLaunch } from "../../../src/emit/cuda/verify.js"
import { baseSchedule } from "../../../src/lowering/lower-group.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { cudaSchedules } from "../../../src/lowering/templates/gpu/index.js"
import { cudaTirPipeline } from "../../../src/lowering/tir/cuda-pipeline.js"
import { halfStorage, type HalfStorageOptions } from "../../../src/lowering/tir/half-storage.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import type { FusedGroup } from "../../../src/rewrite/fuse-ops.js"
import { lawParams } from "../../support.js"
import { evaluateLaunches } from "../../support-cuda.js"

const GROUP = { id: 0 } as unknown as FusedGroup

/** One float16 ulp at |x| (2^-24 below the normal range). */
const halfUlp = (x: number): number => 2 ** (Math.max(Math.floor(Math.log2(Math.max(Math.abs(x), 2 ** -24))), -14) - 10)

/** A float32 tensor's values rounded to halves (other dtypes as they are: only float32 is stored as halves). */
const roundTensor = (t: Tensor): Tensor => (t.dtype === "float32" ? { ...t, data: Float32Array.from(t.data as Float32Array, roundF16) } : t)

/** The first element where `got` and the reference differ by more than a half ulp (plus float32's 1e-5), or undefined. */
const firstMiss = (got: readonly Tensor[], want: readonly Tensor[]): string | undefined => {
  for (let k = 0; k < want.length; k++)
    for (let i = 0; i < want[k].data.length; i++) {
      const a = Number(got[k].data[i])
      const b = Number(want[k].data[i])
      if (!(Math.abs(a - b) <= halfUlp(Math.max(Math.abs(a), Math.abs(b))) + 1e-5)) return `output ${k} element ${i}: ${a} against ${b}`
    }
  return undefined
}

/** Runs a case through the GPU rules and HalfStorage (every float32 param a half) and compares it with the TE computed alike; the first miss, or undefined. */
const halfMiss = (cc: ComputeCase, attrs: CudaAttrs, options: HalfStorageOptions = {}): string | undefined => {
  const s = cudaSchedules(attrs)(cc.outputs, baseSchedule(cc.outputs), GROUP)
  const f = runTirSync(cudaTirPipeline(attrs), lowerSync(s, "k0"))
  const h = halfStorage(f, new Set(f.params.filter((p) => p.dtype === "float32").map((p) => p.name)), attrs, options)
  // the float32 params are halves, the workspace and everything inside float32
  expect(h.params.some((p) => p.dtype === "float32")).toBe(false)
  const k = splitLaunches(h)
  for (const l of k.launches) verifyLaunch(l, attrs)
  const inputs = new Map([...cc.inputs].map(([n, t]) => [n, roundTensor(t)] as const))
  const got = evaluateLaunches(k, inputs)
  const want = evaluateTE(cc.outputs, inputs).map(roundTensor)
  return firstMiss(
    cc.outputs.map((o) => got.get(o.name)!),
    want,
  )
}

/** Cases with long reductions (where a sum accumulated in half drifts), beside every family's random ones. */
const arbReductionCase = (): fc.Arbitrary<ComputeCase> =>
  fc.oneof(
    fc.tuple(fc.integer({ min: 0, max: 1 << 30 }), fc.constantFrom(8, 24), fc.constantFrom(32, 96)).map(([seed, n, k]) => denseRowCase(seed, n, k)),
    fc.tuple(fc.integer({ min: 0, max: 1 << 30 }), fc.constantFrom(4, 8), fc.constantFrom(8, 16), fc.constantFrom(32, 64)).map(([seed, m, n, k]) => matmulCase(seed, { batch: 0, m, n, k, epilogue: seed % 2 === 0 })),
    fc.tuple(fc.integer({ min: 0, max: 1 << 30 }), fc.constantFrom(4, 8), fc.constantFrom(4, 8), fc.constantFrom(1, 3)).map(([seed, ch, o, k]) => convCase({ seed, c: ch, o, hw: 4, k, stride: 1, pad: k === 3 })),
    fc.tuple(fc.integer({ min: 0, max: 1 << 30 }), fc.constantFrom(2, 8), fc.constantFrom(1, 8), fc.constantFrom(64, 200), fc.boolean()).map(([seed, rows, cols, r, mean]) => longReductionCase(seed, { rows, cols, r, max: false, mean })),
  )

/** Long sums of 64 outputs: on one SM the auto-bind rule's, each thread summing into its output (the read-back a float32 twin holds). */
const arbSummedInOutput = (): fc.Arbitrary<ComputeCase> =>
  fc.tuple(fc.integer({ min: 0, max: 1 << 30 }), fc.constantFrom(64, 200), fc.boolean()).map(([seed, r, mean]) => longReductionCase(seed, { rows: 8, cols: 8, r, max: false, mean }))

/** sm_80 and sm_90 records, with their SMs or one (few outputs then fill the GPU: more reductions auto-bound, fewer cross-thread). */
const arbAttrs = (): fc.Arbitrary<CudaAttrs> =>
  fc.tuple(fc.constantFrom("sm_80", "sm_90"), fc.boolean()).map(([arch, one]) => ({ ...cudaAttrsForArch(arch), ...(one ? { multiprocessors: 1 } : {}) }))

const property = (cases: fc.Arbitrary<ComputeCase>, attrsOf: fc.Arbitrary<CudaAttrs>, options: HalfStorageOptions = {}) =>
  fc.property(cases, attrsOf, (cc, attrs) => {
    const miss = halfMiss(cc, attrs, options)
    if (miss) throw new Error(`${cc.family}: ${miss}`)
  })

describe("lowering.HalfStorage", () => {
  it("every family under the GPU rules, its params halves: the launches evaluate, float16 stores rounded to nearest even, to the TE on inputs rounded to halves with each output rounded once (one half ulp)", () => {
    fc.assert(property(fc.oneof(arbComputeCase(COMPUTE_FAMILIES), arbReductionCase(), arbSummedInOutput()), arbAttrs()), lawParams(10))
  })

  it("the law fails where the kernel accumulates in half (the read-back output kept a half: every partial sum rounded)", () => {
    const oneSm = fc.constantFrom("sm_80", "sm_90").map((arch) => ({ ...cudaAttrsForArch(arch), multiprocessors: 1 }))
    const r = fc.check(property(arbSummedInOutput(), oneSm, { accumulateInHalf: true }), lawParams(10))
    expect(r.failed).toBe(true)
  })
})
