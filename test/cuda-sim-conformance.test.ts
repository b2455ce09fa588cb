// A sample of the ONNX conformance suite through cuda-sim (the cuda target's GPU schedules,
// every kernel statically verified, run by the TIR evaluator's thread teams, barriers and shared
// memory): every sampled case that passes on the reference evaluator passes here. The whole suite:
// `npm run conformance -- --targets cuda-sim`.
import * as fs from "node:fs"
import { describe, expect, it } from "vitest"
import { listCases, ONNX_TESTS, runCase, runCaseOnTarget } from "./support/onnx-cases.js"

const present = fs.existsSync(ONNX_TESTS)
/** The ops the GPU rules are for (convolutions, products, pools, softmax, norms, reductions), some injective ones, and rank-0 results (one-thread kernels). */
const SAMPLE = /^test_(conv_with|convtranspose_1d|gemm_default|gemm_transposeA|matmul_2d|matmul_3d|softmax_axis_1|softmax_example|logsoftmax_axis_1|reduce_mean_default_axes_keepdims_example|reduce_sum_keepdims_example|reduce_max_do_not_keepdims_example|globalaveragepool$|globalmaxpool$|maxpool_2d_default|averagepool_2d_pads$|batchnorm_example|layer_normalization_2d_axis1$|instancenorm_example|relu$|add_bcast|sigmoid$|transpose_all_permutations_0|concat_2d_axis_0$|gelu_default_1$|einsum_inner_prod$|einsum_scalar$)/

describe.skipIf(!present)("ONNX conformance through cuda-sim (a sample)", () => {
  it("every sampled case that passes on the evaluator passes through the GPU schedules", async () => {
    const cases = listCases().filter((c) => c.suite === "node" && SAMPLE.test(c.name))
    expect(cases.length).toBeGreaterThan(15)
    const failed: string[] = []
    let compiled = 0
    for (const c of cases) {
      if (runCase(c).status !== "pass") continue
      const r = await runCaseOnTarget(c, "cuda-sim")
      compiled += r.compiled
      if (r.status === "fail") failed.push(`${r.name}: ${r.reason}`)
    }
    expect(failed).toEqual([])
    expect(compiled).toBeGreaterThan(15)
  }, 300_000)
})
