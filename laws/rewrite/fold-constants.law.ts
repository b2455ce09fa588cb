// rewrite.FoldConstants on multi-output ops: Split (2 or 3 parts, QKV-style fused weights), TopK
// (values and indices), Dropout (its mask) and LayerNormalization (its Mean and InvStdDev) on
// constants, with later nodes reading their second and third outputs — each output folds into its
// own constant — and the same ops on activations, which stay.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbModelGraphCase } from "../../src/ast/graph/arbitrary-models.js"
import type { Graph } from "../../src/ast/graph/graph.js"
import { foldConstants, withPassConfig } from "../../src/rewrite/index.js"
import { assertAllClose, evalGraph, lawParams } from "../support.js"

const fold = (g: Graph): Graph => Effect.runSync(foldConstants.run(g).pipe(withPassConfig({ verify: true })))

const multiOutput = arbModelGraphCase({
  motifs: ["split-weights", "topk-constant", "dropout-mask", "layer-norm-stats", "split", "topk", "conv-bn-act", "linear", "gemm", "pool"],
  maxMotifs: 5,
})

const MULTI = new Set(["Split", "TopK", "Dropout", "LayerNormalization"])

describe("rewrite.FoldConstants on multi-output ops", () => {
  it("folds each output of Split, TopK, Dropout and LayerNormalization on constants into its own value: evaluate(fold(g)) ≈ evaluate(g)", () => {
    fc.assert(
      fc.property(multiOutput, ({ graph, inputs }) => {
        assertAllClose(evalGraph(fold(graph), inputs), evalGraph(graph, inputs))
      }),
      lawParams(80),
    )
  })

  it("leaves no node whose inputs are all constant, and every multi-output node it keeps reads an activation", () => {
    let folded = 0
    fc.assert(
      fc.property(multiOutput, ({ graph }) => {
        const after = fold(graph)
        for (const n of after.nodes) {
          const constant = n.inputs.every((i) => i === "" || after.initializers.has(i))
          // an Identity that keeps a folded graph output's name is all that may read constants only
          if (constant && n.op !== "Identity") throw new Error(`${n.name} (${n.op}) reads only constants and was not folded`)
        }
        folded += graph.nodes.filter((n) => MULTI.has(n.op) && n.outputs.length > 1).length - after.nodes.filter((n) => MULTI.has(n.op) && n.outputs.length > 1).length
      }),
      lawParams(80),
    )
    // the cases do hold multi-output ops on constants
    expect(folded).toBeGreaterThan(20)
  })
})
