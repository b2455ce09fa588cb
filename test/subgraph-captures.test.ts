// Regression: a value read only inside a subgraph (an If branch capturing an outer value) was not
// a read to FuseOps and PlanMemory. Fused, its producer's group did not output it, so the If
// found it undefined ("input 'r' is not defined before it is used"); one group per node, its last
// use was its writer's group, so the memory plan gave its block to a value computed before the
// If ran, and the If read that value instead. Found by the memory-plan law's liveness, recomputed
// with subgraph captures counted as the evaluator counts them (laws/rewrite/structure.law.ts).
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node, type Graph } from "../src/ast/graph/graph.js"
import { tensor } from "../src/ast/graph/tensor.js"
import { makeTarget } from "../src/ast/target.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { fuseOpsSync, singletonGroups, type FusedGraph } from "../src/rewrite/fuse-ops.js"
import { planMemory } from "../src/rewrite/plan-memory.js"

/** r = -x; z = tanh(sigmoid(x)); y = If(cond, r + r, r · r): the branches read r from outside. */
const ifCapture = (): Graph => {
  const branch = (name: string, op: string) => makeGraph({ name, opset: 13, inputs: [], outputs: [{ name: `${name}_y`, type: { dtype: "float32", shape: [4] } }], nodes: [node(op, ["r", "r"], [`${name}_y`])] })
  return makeGraph({
    name: "if_capture",
    opset: 13,
    inputs: [
      { name: "cond", type: { dtype: "bool", shape: [] } },
      { name: "x", type: { dtype: "float32", shape: [4] } },
    ],
    outputs: [
      { name: "y", type: { dtype: "float32", shape: [4] } },
      { name: "z", type: { dtype: "float32", shape: [4] } },
    ],
    nodes: [
      node("Neg", ["x"], ["r"]),
      node("Sigmoid", ["x"], ["s"]),
      node("Tanh", ["s"], ["z"]),
      node("If", ["cond"], ["y"], { then_branch: attr.graph(branch("then", "Add")), else_branch: attr.graph(branch("else", "Mul")) }),
    ],
  })
}

const groupOf = (f: FusedGraph, op: string) => f.groups.find((g) => g.ops.includes(op))!

describe("values captured by subgraphs", () => {
  for (const [title, fuse] of [
    ["fused", fuseOpsSync],
    ["a group per node", singletonGroups],
  ] as const)
    it(`are outputs of their writer's group, inputs of the reader's, and live until it runs (${title})`, () => {
      const fused = fuse(ifCapture())
      expect(groupOf(fused, "Neg").outputs).toContain("r")
      expect(groupOf(fused, "If").inputs).toContain("r")
      const plan = planMemory(fused)
      const r = plan.values.find((v) => v.value === "r")!
      expect(r.lastUse).toBe(fused.groups.indexOf(groupOf(fused, "If")))
      expect(plan.values.filter((v) => v.value !== "r" && v.storage === r.storage)).toEqual([])
    })

  it("compiled at opt levels 0 and 3, the If reads the value it captured", async () => {
    const graph = ifCapture()
    for (const cond of [1, 0]) {
      const inputs = new Map([
        ["cond", tensor("bool", [], Uint8Array.of(cond))],
        ["x", tensor("float32", [4], Float32Array.from([1, -2, 3, -4]))],
      ])
      const [y] = runGraph(graph, inputs)
      expect([...y.data]).toEqual(cond ? [-2, 4, -6, 8] : [1, 4, 9, 16])
      for (const optLevel of [0, 3]) {
        const program = await Effect.runPromise(compileGraph(graph, makeTarget("js"), { optLevel }))
        const got = (await Effect.runPromise(loadProgram(program, makeTarget("js")))).run(inputs)
        expect({ optLevel, cond, y: [...got.get("y")!.data] }).toEqual({ optLevel, cond, y: [...y.data] })
      }
    }
  })
})
