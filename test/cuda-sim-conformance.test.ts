// A sample of the ONNX conformance suite through cuda-sim (the cuda target's GPU schedules,
// every kernel statically verified, run by the TIR evaluator's thread teams, barriers and shared
// memory): every sampled case that passes on the reference evaluator passes here. The whole suite:
// `npm run conformance -- --targets cuda-sim`. The sample's kernels are also built by nvcc for
// sm_80 and sm_90 in one translation unit each (skipped, saying so, without nvcc); every case's:
// `npm run nvcc-conformance`.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { findNvcc } from "../src/device/cuda/nvcc.js"
import { CUDA_PRELUDE } from "../src/emit/cuda/prelude.js"
import { compileCudaSim, cudaSimSource } from "./support/cuda-sim.js"
import { caseShapes, listCases, ONNX_TESTS, runCase, runCaseOnTarget } from "./support/onnx-cases.js"

const nvcc = findNvcc()

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

  it.skipIf(!nvcc)(`nvcc builds every kernel of the sample for sm_80 and sm_90, one translation unit each${nvcc ? "" : " (skipped: nvcc was not found in $CUDA_HOME/bin, /usr/local/cuda/bin or PATH)"}`, () => {
    const cases = listCases().filter((c) => c.suite === "node" && SAMPLE.test(c.name))
    const units: string[] = []
    let kernels = 0
    for (const [k, c] of cases.entries()) {
      const graph = decodeModelSync(fs.readFileSync(c.model))
      let source: string
      try {
        source = cudaSimSource(compileCudaSim(graph, caseShapes(c, graph)))
      } catch {
        continue
      }
      units.push(
        source.slice(source.indexOf(CUDA_PRELUDE) + CUDA_PRELUDE.length).replace(/(extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?)(\w+)\(/g, (_m, head: string, fn: string) => {
          kernels++
          return `${head}c${k}_${fn}(`
        }),
      )
    }
    expect(kernels).toBeGreaterThan(15)
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-nvcc-sample-"))
    try {
      const file = path.join(dir, "sample.cu")
      fs.writeFileSync(file, [CUDA_PRELUDE, ...units].join("\n"))
      for (const arch of ["sm_80", "sm_90"]) {
        const r = spawnSync(nvcc!, ["-O3", "-std=c++17", `-arch=${arch}`, "-cubin", "-o", path.join(dir, `${arch}.cubin`), file], { encoding: "utf8" })
        expect(r.status, `${arch}: ${r.stderr}`).toBe(0)
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 300_000)
})
