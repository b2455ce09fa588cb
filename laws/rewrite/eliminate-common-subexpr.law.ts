// rewrite.EliminateCommonSubexpr on model-like graphs full of siblings: two nodes of one op on one
// input, identical or differing in one attribute (Transpose perm, Softmax axis, LeakyRelu alpha,
// Clip bounds, Cast's type, LayerNormalization epsilon, Conv strides and pads, MaxPool kernel), both
// read downstream. Merging two that differ changes the result; leaving two identical ones is a
// missed merge.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, it } from "vitest"
import { arbModelGraphCase } from "../../src/ast/graph/arbitrary-models.js"
import type { Graph } from "../../src/ast/graph/graph.js"
import { eliminateCommonSubexpr, withPassConfig } from "../../src/rewrite/index.js"
import { assertAllClose, evalGraph, lawParams } from "../support.js"

const cse = (g: Graph): Graph => Effect.runSync(eliminateCommonSubexpr.run(g).pipe(withPassConfig({ verify: true })))

const withSiblings = arbModelGraphCase({
  motifs: ["siblings", "conv-bn-act", "pool", "attention", "linear", "gemm", "layer-norm", "split-weights"],
  maxMotifs: 5,
})

/** A node's op, inputs and attributes (tensor attributes by their bytes) as a string. */
const keyOf = (n: Graph["nodes"][number]): string =>
  JSON.stringify([n.domain, n.op, n.inputs, n.outputs.length, Object.entries(n.attrs).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => [k, v.kind === "tensor" ? Array.from(v.value.data) : v.value])])

describe("rewrite.EliminateCommonSubexpr on siblings", () => {
  it("keeps siblings that differ in an attribute apart: evaluate(cse(g)) ≈ evaluate(g)", () => {
    fc.assert(
      fc.property(withSiblings, ({ graph, inputs }) => {
        assertAllClose(evalGraph(cse(graph), inputs), evalGraph(graph, inputs))
      }),
      lawParams(80),
    )
  })

  it("merges identical siblings: no two nodes left with the same op, inputs and attributes (graph outputs aside)", () => {
    fc.assert(
      fc.property(withSiblings, ({ graph }) => {
        const after = cse(graph)
        const outputs = new Set(after.outputs.map((o) => o.name))
        const seen = new Map<string, string>()
        for (const n of after.nodes) {
          if (n.outputs.some((o) => outputs.has(o))) continue
          const key = keyOf(n)
          const prev = seen.get(key)
          if (prev) throw new Error(`${prev} and ${n.name} (${n.op}) compute the same value and were not merged`)
          seen.set(key, n.name)
        }
      }),
      lawParams(80),
    )
  })
})
