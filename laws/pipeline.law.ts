// The whole compiler on random well-typed graphs, 40% of them model-like (conv-BN blocks with
// strided and padded windows over several vector blocks, attention, multi-output ops, siblings,
// float16 / int8 / int64 islands; arbitrary-models.ts): compileGraph (graph passes, fusion, memory
// plan, lowering with the target's default schedules) → js emission → load → the executor with
// the planned buffers equals the reference evaluator, at opt level 0 and 3 (with blocked layouts).
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbGraphCase } from "../src/ast/graph/arbitrary.js"
import { arbModelGraphCase } from "../src/ast/graph/arbitrary-models.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeTarget } from "../src/ast/target.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { withPassConfig } from "../src/rewrite/index.js"
import { assertAllClose, lawParams } from "./support.js"

describe("compile → js → run", () => {
  for (const [optLevel, lanes] of [
    [0, 0],
    [3, 0],
    [3, 4],
  ] as const)
    it(`equals the evaluator on random graphs (opt level ${optLevel}, vector lanes ${lanes})`, async () => {
      const cases = fc.sample(arbGraphCase({ maxNodes: 10, modelShare: 0.4, models: { maxMotifs: 4 } }), lawParams(25))
      let compiled = 0
      for (const { graph, inputs } of cases) {
        const program = await Effect.runPromise(compileGraph(graph, makeTarget("js", { vectorLanes: lanes }), { optLevel }))
        const exec = await Effect.runPromise(loadProgram(program, makeTarget("js")))
        const want = runGraph(graph, inputs)
        // twice: the planned buffers are reused across runs
        for (let r = 0; r < 2; r++) {
          const got = exec.run(inputs)
          assertAllClose(graph.outputs.map((o) => got.get(o.name)!), want, 1e-3, 1e-4)
        }
        compiled += program.kernels.filter((k) => k.kind === "compiled").length
      }
      expect(compiled).toBeGreaterThan(0)
    }, 300_000)

  it("equals the evaluator with FuseOps and PlanMemory disabled (a group per node, a block per value)", async () => {
    const cases = fc.sample(arbGraphCase({ maxNodes: 10, modelShare: 0.4, models: { maxMotifs: 4 } }), lawParams(15))
    for (const { graph, inputs } of cases) {
      const target = makeTarget("js", { vectorLanes: 4 })
      const program = await Effect.runPromise(compileGraph(graph, target).pipe(withPassConfig({ disabled: new Set(["rewrite.FuseOps", "rewrite.PlanMemory"]) })))
      expect(program.fused.groups.every((g) => g.nodes.length === 1)).toBe(true)
      expect(new Set(program.memory.values.map((v) => v.storage)).size).toBe(program.memory.values.length)
      const exec = await Effect.runPromise(loadProgram(program, target))
      assertAllClose(graph.outputs.map((o) => exec.run(inputs).get(o.name)!), runGraph(graph, inputs), 1e-3, 1e-4)
    }
  }, 300_000)
})

describe("compile → js → run: windows of conv nets", () => {
  it("convs and pools (strides, asymmetric pads, auto_pad, dilation, ceil_mode, count_include_pad) in NCHW equal the evaluator", async () => {
    const nets = arbModelGraphCase({ stems: ["image"], motifs: ["conv-bn-act", "pool"], islands: false, maxMotifs: 2 })
    const target = makeTarget("js", { vectorLanes: 0 })
    await fc.assert(
      fc.asyncProperty(nets, async ({ graph, inputs }) => {
        const exec = await Effect.runPromise(loadProgram(await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 })), target))
        const got = exec.run(inputs)
        assertAllClose(graph.outputs.map((o) => got.get(o.name)!), runGraph(graph, inputs), 1e-3, 1e-4)
      }),
      lawParams(40),
    )
  }, 300_000)
})
