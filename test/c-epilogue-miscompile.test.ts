// Regression: gcc 12.2 (Debian 12's; x86-64 with AVX2 or AVX-512) miscompiled a guarded load in an
// `omp simd` loop inside a parallel region when it vectorized the loop's epilogue: one lane of the
// epilogue lost its term. Found by laws/pipeline-c.law.ts (TESSERA_LAW_SEED=3): a ConvTranspose
// with a top pad of 1 over one input row, compiled for c at 8 or 16 vector lanes, dropped a tap
// of output column 5. The OpenMP build (C_FLAGS, -fopenmp) passes --param=vect-epilogues-nomask=0
// (src/device/c/build.ts); the thread pool's (C_POOL_FLAGS, -fopenmp-simd, no parallel region for gcc
// to outline) keeps vectorized epilogues, and this kernel is right there without the guard.
// Both the kernel as Tessera emitted it and the whole program are checked; skipped without gcc.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { tensor } from "../src/ast/graph/tensor.js"
import { makeTarget } from "../src/ast/target.js"
import { BACKENDS, C_BUILD_FLAGS } from "../src/backend/index.js"
import { buildC, cMeasureFlags, compilerAvailable, C_POOL_FLAGS, defaultCBuildConfig } from "../src/device/c/build.js"
import { compiledKernels } from "../src/lowering/program.js"
import { loadC } from "../src/device/c/load.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"

const HAVE_GCC = compilerAvailable("gcc")
const X = [4, 0, -4, 3, -1, -5, 5, 1, -3, 4, 0, -4]
const W = [0, 0, 1, 100]
/** out[n, 0, 0, j] = x[n, j] · 1 + x[n, j − 1] · 100 (the kernel's top row of taps falls into the pad). */
const WANT = [4, 400, -4, -397, 299, -105, -500, 5, 501, 97, -296, 400, -4, -400]

/** The kernel as the c target emitted it (lanes 8): a padded ConvTranspose's accumulation, the tap guarded by a select. */
const KERNEL = `#include <stdint.h>
void convt(const float* restrict b0, const float* restrict b1, float* restrict b2) {
  #pragma omp parallel for schedule(static)
  for (int64_t v0 = 0; v0 < 2; ++v0) {
    {
      _Alignas(64) float b3[7];
      for (int64_t v1 = 0; v1 < 7; ++v1) {
        b3[v1] = 0.0f;
      }
      for (int64_t v2 = 0; v2 < 2; ++v2) {
        for (int64_t v3 = 0; v3 < 2; ++v3) {
          #pragma omp simd
          for (int64_t v4 = 0; v4 < 7; ++v4) {
            b3[v4] = (b3[v4] + ((((((v2 * (-1)) + 1) < 1) && (((v4 + (v3 * (-1))) >= 0) && ((v4 + (v3 * (-1))) < 6))) ? b0[(((((v0 * 6) + v4) + (v2 * (-6))) + (v3 * (-1))) + 6)] : 0.0f) * b1[((v2 * 2) + v3)]));
          }
        }
      }
      #pragma omp simd
      for (int64_t v5 = 0; v5 < 7; ++v5) {
        b2[((v0 * 7) + v5)] = b3[v5];
      }
    }
  }
}
`

/** The one-node graph whose kernel that is: a ConvTranspose with a top pad of 1 over one input row. */
const CONVT_GRAPH = makeGraph({
  name: "convtranspose_pad_top",
  opset: 18,
  inputs: [{ name: "x", type: { dtype: "float32", shape: [2, 1, 1, 6] } }],
  outputs: [{ name: "y", type: { dtype: "float32", shape: [2, 1, 1, 7] } }],
  initializers: new Map([["w", tensor("float32", [1, 1, 2, 2], Float32Array.from(W))]]),
  nodes: [node("ConvTranspose", ["x", "w"], ["y"], { pads: attr.ints([1, 0, 0, 0]) })],
})

describe("c target: gcc's vectorized epilogue of a guarded load", () => {
  const runKernel = async (flags?: readonly string[]) => {
    const mod = await Effect.runPromise(Effect.flatMap(buildC(KERNEL, flags ? defaultCBuildConfig(flags) : undefined), (so) => loadC(so, [{ name: "convt", params: [{ dtype: "float32", elements: 12 }, { dtype: "float32", elements: 4 }, { dtype: "float32", elements: 14 }] }])))
    const out = new Float32Array(14)
    mod.kernels.get("convt")!(Float32Array.from(X), Float32Array.from(W), out)
    return [...out]
  }

  it.skipIf(!HAVE_GCC)(`the emitted kernel, built with the OpenMP build's flags (C_FLAGS), keeps every lane${HAVE_GCC ? "" : " (skipped: no gcc on PATH)"}`, async () => {
    expect(await runKernel()).toEqual(WANT)
  })

  it.skipIf(!HAVE_GCC)(`the emitted kernel, built with the thread pool's flags (C_POOL_FLAGS: vectorized epilogues on), keeps every lane${HAVE_GCC ? "" : " (skipped: no gcc on PATH)"}`, async () => {
    expect(C_POOL_FLAGS).not.toContain("--param=vect-epilogues-nomask=0")
    expect(await runKernel(C_POOL_FLAGS)).toEqual(WANT)
  })

  it.skipIf(!HAVE_GCC)(`a tuner's candidate builds with the network library's flags (libgomp for the sweep only) and keeps every lane${HAVE_GCC ? "" : " (skipped: no gcc on PATH)"}`, async () => {
    // the flags: the library's, but -fopenmp where it has -fopenmp-simd (the measuring sweep's omp parallel)
    expect(cMeasureFlags(C_BUILD_FLAGS).filter((f, i) => f !== C_BUILD_FLAGS[i])).toEqual(C_BUILD_FLAGS.includes("-fopenmp-simd") ? ["-fopenmp"] : [])
    const graph = CONVT_GRAPH
    for (const lanes of [8, 16]) {
      const target = makeTarget("c", { vectorLanes: lanes })
      const program = await Effect.runPromise(compileGraph(graph, target))
      const [kernel] = compiledKernels(program)
      const func = kernel.func
      // rendered as the tuner renders a candidate (the c record's parallel loops), built as it builds one
      const source = BACKENDS.c.codegen!.renderCandidates!([{ name: "cand0", func }], target)
      const sizes = func.params.map((b) => ({ dtype: b.dtype, elements: b.shape.reduce((m, d) => m * d, 1) }))
      const mod = await Effect.runPromise(Effect.flatMap(buildC(source, defaultCBuildConfig(cMeasureFlags(C_BUILD_FLAGS))), (so) => loadC(so, [{ name: "cand0", params: sizes }], 1)))
      const args = sizes.map((p) => new Float32Array(p.elements))
      args[0].set(X)
      args[1].set(W)
      mod.kernels.get("cand0")!(...args)
      expect({ lanes, y: [...args[args.length - 1]] }).toEqual({ lanes, y: WANT })
    }
  })

  it.skipIf(!HAVE_GCC)(`a ConvTranspose with a top pad over one row equals the evaluator at vector lanes 0, 8 and 16${HAVE_GCC ? "" : " (skipped: no gcc on PATH)"}`, async () => {
    const graph = CONVT_GRAPH
    const inputs = new Map([["x", tensor("float32", [2, 1, 1, 6], Float32Array.from(X))]])
    expect([...runGraph(graph, inputs)[0].data]).toEqual(WANT)
    for (const lanes of [0, 8, 16]) {
      const target = makeTarget("c", { vectorLanes: lanes })
      const program = await Effect.runPromise(compileGraph(graph, target))
      const got = (await Effect.runPromise(loadProgram(program, target))).run(inputs).get("y")!
      expect({ lanes, y: [...got.data] }).toEqual({ lanes, y: WANT })
    }
  })
})
