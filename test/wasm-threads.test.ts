// The wasm target on threads: workers share the module's memory, a parallel phase's iterations are
// cut into ranges the threads claim, and phases run in order (a phase reads what every thread of
// the one before wrote). Results equal the evaluators and the one-thread run exactly, and the
// workers did run ranges.
import * as fc from "fast-check"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { arbScheduledCase, COMPUTE_FAMILIES } from "../src/ast/te/arbitrary.js"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { allocate } from "../src/ast/graph/dtype.js"
import { prng } from "../src/ast/graph/arbitrary.js"
import { fromArray, sizeOf, type Tensor } from "../src/ast/graph/tensor.js"
import { add, c, cast, mul, read, sub, v } from "../src/ast/te/expr.js"
import type { PrimFunc } from "../src/ast/tir/tir.js"
import { evaluatePrimFunc } from "../src/ast/tir/evaluate.js"
import { lowerSync } from "../src/lowering/lower.js"
import { cpuTirPipeline } from "../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../src/lowering/tir/tir-pass.js"
import { emitWasmModule } from "../src/emit/wasm/emit.js"
import { loadWasmModule, WASM_MATH_IMPORTS, wasmThreadsAvailable, workerMathSource, type KernelFn } from "../src/device/wasm/load.js"
import { nodeThreadHost } from "../src/device/wasm/node.js"
import { frameLayouts, wasmModule } from "../src/device/wasm/device.js"
import { createExecutor } from "../src/device/executor.js"
import { makeTarget } from "../src/ast/target.js"
import { compileGraph, emitArtifact } from "../src/pipeline.js"
import type { Program } from "../src/lowering/program.js"
import { zooGraph } from "../src/zoo/index.js"
import { assertAllClose, lawParams } from "../laws/support.js"

const callKernel = (fn: KernelFn, f: PrimFunc, inputs: ReadonlyMap<string, Tensor>): Map<string, Tensor> => {
  const arrays = f.params.map((p) => inputs.get(p.name)?.data.slice() ?? allocate(p.dtype, sizeOf(p.view?.shape ?? p.shape)))
  fn(...arrays)
  return new Map(f.params.map((p, k) => [p.name, { dtype: p.dtype, shape: p.view?.shape ?? p.shape, data: arrays[k] }] as const))
}

describe.skipIf(!wasmThreadsAvailable())("wasm threads", () => {
  it("two phases on 2 threads: the second reads the shared buffer the first wrote across both ranges; frames are per thread", async () => {
    const [i, j] = [v("i"), v("j")]
    const f32 = "float32" as const
    const N = 100_000 // long enough for a woken worker to find ranges left
    // T[i] = 2·A[i]  (parallel); O[i] = T[N-1-i] + Σ_j S[j], S[j] = f64(A[i]) + j in a frame buffer (parallel)
    const f: PrimFunc = {
      name: "phases",
      params: [
        { name: "A", dtype: f32, shape: [N], scope: "global" },
        { name: "O", dtype: f32, shape: [N], scope: "global" },
      ],
      body: {
        kind: "allocate",
        buffer: { name: "T", dtype: f32, shape: [N], scope: "global" },
        body: {
          kind: "seq",
          body: [
            { kind: "for", var: i, min: c(0), extent: c(N), forKind: "parallel", body: { kind: "store", buffer: "T", indices: [i], value: mul(read("A", [i], f32), c(2, f32)) } },
            {
              kind: "for", var: i, min: c(0), extent: c(N), forKind: "parallel",
              body: {
                kind: "allocate", buffer: { name: "S", dtype: "float64", shape: [3], scope: "global" },
                body: {
                  kind: "seq",
                  body: [
                    { kind: "for", var: j, min: c(0), extent: c(3), forKind: "serial", body: { kind: "store", buffer: "S", indices: [j], value: add(cast("float64", read("A", [i], f32)), cast("float64", j)) } },
                    { kind: "store", buffer: "O", indices: [i], value: add(read("T", [sub(c(N - 1), i)], f32), cast(f32, add(add(read("S", [c(0)], "float64"), read("S", [c(1)], "float64")), read("S", [c(2)], "float64")))) },
                  ],
                },
              },
            },
          ],
        },
      },
    }
    const inputs = new Map([["A", fromArray(f32, [N], Array.from({ length: N }, (_, k) => Math.sin(k)))]])
    const want = evaluatePrimFunc(f, inputs).get("O")!
    const em = emitWasmModule([{ name: "k", func: f }], { sharedMemory: true })
    expect(em.kernels[0].phases.map((p) => p.parallel)).toEqual([N, N])
    const fns = await Effect.runPromise(loadWasmModule(em.bytes, em.kernels, { threads: 2, minSplitWork: 0, threadHost: nodeThreadHost }))
    try {
      expect(fns.threads).toBe(2)
      // until the worker has run some ranges (on a loaded machine the calling thread may claim them all at first)
      for (let run = 0; run < 3 || (fns.workerRanges() === 0 && run < 500); run++) assertAllClose([callKernel(fns.get("k")!, f, inputs).get("O")!], [want], 1e-6, 1e-6)
      expect(fns.workerRanges()).toBeGreaterThan(0)
    } finally {
      fns.close()
    }
  })

  for (const family of COMPUTE_FAMILIES)
    it(`${family} under random schedules on 2 threads (every parallel phase split) equals the TE evaluator`, async () => {
      const cases = fc.sample(arbScheduledCase([family]), lawParams(10))
      const funcs = cases.map((cc, k) => ({ name: `k${k}`, func: runTirSync(cpuTirPipeline(), lowerSync(cc.schedule)) }))
      const em = emitWasmModule(funcs, { sharedMemory: true })
      const fns = await Effect.runPromise(loadWasmModule(em.bytes, em.kernels, { threads: 2, minSplitWork: 0, threadHost: nodeThreadHost }))
      try {
        cases.forEach((cc, k) => {
          const outs = callKernel(fns.get(`k${k}`)!, funcs[k].func, cc.inputs)
          assertAllClose(cc.outputs.map((o) => outs.get(o.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
        })
      } finally {
        fns.close()
      }
    })

  it("the math imports a worker evaluates from source are the device's functions", () => {
    const xs = [-3.5, -1, -1e-3, 0, 1e-3, 0.5, 1, 2.25, 7]
    for (const name of Object.keys(WASM_MATH_IMPORTS)) {
      const src = workerMathSource(name)
      if (src === undefined) continue
      const f = (0, eval)(src) as (...a: number[]) => number
      for (const x of xs) expect(Object.is(f(x, 1.5), WASM_MATH_IMPORTS[name](x, 1.5)), `${name}(${x})`).toBe(true)
    }
    expect(workerMathSource("erf")).toBeDefined()
  })

  it("zoo ResNet-18 on 2 threads gives the 1-thread answer bit for bit", async () => {
    const graph = zooGraph("resnet18", 0)
    const input = graph.inputs[0]
    const shape = input.type.shape as number[]
    const r = prng(3)
    const data = allocate("float32", shape.reduce((a, b) => a * b, 1))
    for (let k = 0; k < data.length; k++) data[k] = r.float(-1, 1)
    const feeds = new Map([[input.name, { dtype: "float32" as const, shape, data }]])
    const target = makeTarget("wasm", { vectorLanes: 4, cores: 1 })
    const program = await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 }))
    // the module's kernels as the wasm device loads them, on `threads` threads
    const load = async (p: Program, threads: number) => {
      const artifact = await Effect.runPromise(emitArtifact(p, target, { threads }))
      return Effect.runPromise(loadWasmModule(artifact.files.get("model.wasm")!, frameLayouts(artifact.kernels), { threads, shared: threads > 1, threadHost: nodeThreadHost }))
    }
    const one = await load(program, 1)
    const two = await load(program, 2)
    try {
      expect(two.threads).toBe(2)
      const want = [...createExecutor(program, wasmModule(one)).run(feeds).values()]
      const exec = createExecutor(program, wasmModule(two))
      for (let run = 0; run < 2; run++) {
        const got = [...exec.run(feeds).values()]
        expect(got.map((t) => t.shape)).toEqual(want.map((t) => t.shape))
        got.forEach((t, k) => expect(t.data).toEqual(want[k].data))
      }
      expect(two.workerRanges()).toBeGreaterThan(0)
    } finally {
      two.close()
    }
  })
})
