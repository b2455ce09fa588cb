// The executor's per-kernel plan of fixed arguments (src/device/executor.ts, `fixedOf`): where no
// group runs on the host, a constant's and a planned intermediate's buffer are bound once, and only
// the model's inputs and outputs per run. Several kernels in a chain (intermediates between them),
// an input read by more than one kernel and a constant: each run with other feeds, and with the
// caller's output arrays, computes the evaluator's answer for its own feeds.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { prng } from "../src/ast/graph/arbitrary.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { tensor } from "../src/ast/graph/tensor.js"
import { cpuAttrs } from "../src/ast/target.js"
import { backendOf } from "../src/backend/index.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { assertAllClose } from "../laws/support.js"
import { kernelChain } from "./support/kernel-chain.js"

const rng = prng(20261127)
const rand = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))

const graph = kernelChain(rand)

describe.each(["js", "c"] as const)("the executor's fixed arguments on %s", (kind) => {
  const backend = backendOf(kind)
  it.skipIf(backend.unavailable() !== undefined)("every run computes its own feeds' answer, into fresh arrays and the caller's", async () => {
    const target = backend.target(cpuAttrs({ isa: "avx2" }), 1)
    const program = await Effect.runPromise(compileGraph(graph, target))
    expect(program.kernels.every((k) => k.kind === "compiled")).toBe(true)
    expect(program.kernels.length).toBeGreaterThan(1)
    const exec = await Effect.runPromise(loadProgram(program, target))
    try {
      const out = new Float32Array(36)
      for (let r = 0; r < 3; r++) {
        const feeds = new Map([["x", rand([6, 6])]])
        assertAllClose([exec.run(feeds).get("y")!], runGraph(graph, feeds), 1e-4, 1e-5)
        const got = exec.run(feeds, new Map([["y", out]])).get("y")!
        expect(got.data).toBe(out)
        assertAllClose([got], runGraph(graph, feeds), 1e-4, 1e-5)
      }
    } finally {
      exec.module.close()
    }
  }, 120_000)
})
