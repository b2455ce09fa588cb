// rewrite.SimplifyInference's BatchNormalization folding on model-like conv nets: Conv(+bias;
// strided, padded, dilated, depthwise, grouped) → BatchNormalization → activation, residual and
// squeeze-excite blocks, with running variances down to 1e-4 and epsilons up to 1e-1. Every BN
// after a conv folds into it, and the folded graph evaluates as the original.
//
// The tolerance is the ONNX one (rtol 1e-3, atol 1e-4). A fold that forgets ε scales channel c by
// √((v + ε)/v) instead: 1.049 at v = 1e-4, ε = 1e-5, and 1.025 at v = 2, ε = 1e-1 — 25 to 50×
// the tolerance; the generator's variances are matched to their conv channel's scale, so the
// values stay O(1) and the error is not lost in atol. A fold that drops the conv's bias b shifts
// channel c by b_c·γ_c/√(v_c + ε), about ½·γ. The last two laws check that the cases do show both
// (the generator's job, not the pass's): the graph with ε = 0, or without the conv's bias, is not
// close to the original in nearly every case.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attr } from "../../src/ast/graph/attrs.js"
import { arbModelGraphCase } from "../../src/ast/graph/arbitrary-models.js"
import type { Graph } from "../../src/ast/graph/graph.js"
import type { Tensor } from "../../src/ast/graph/tensor.js"
import { simplifyInferenceSync } from "../../src/rewrite/index.js"
import { assertAllClose, evalGraph, lawParams } from "../support.js"

const convNets = arbModelGraphCase({ stems: ["image"], motifs: ["conv-bn-act", "residual", "squeeze-excite", "pool"], islands: false, maxMotifs: 3 })

/** Whether `got` is within the laws' tolerance of `want`. */
const close = (got: readonly Tensor[], want: readonly Tensor[]): boolean => {
  try {
    assertAllClose(got, want)
    return true
  } catch {
    return false
  }
}

/** The BatchNormalizations that read a Conv's output with a bias. */
const biasedConvBns = (g: Graph) => {
  const producer = new Map(g.nodes.flatMap((n) => n.outputs.map((o) => [o, n] as const)))
  return g.nodes.filter((n) => n.op === "BatchNormalization" && producer.get(n.inputs[0])?.op === "Conv" && producer.get(n.inputs[0])!.inputs.length === 3)
}

describe("rewrite.SimplifyInference: BatchNormalization folding", () => {
  it("folds every BatchNormalization of a conv net (small variances, large ε, conv bias, strides, groups), evaluating as before", () => {
    fc.assert(
      fc.property(convNets, ({ graph, inputs }) => {
        const after = simplifyInferenceSync(graph)
        expect(after.nodes.map((n) => n.op)).not.toContain("BatchNormalization")
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs))
      }),
      lawParams(60),
    )
  })

  it("the cases see a dropped ε: with ε = 0 the graph is not within tolerance of itself in ≥ 90% of them", () => {
    const cases = fc.sample(convNets, lawParams(60)).filter(({ graph }) => graph.nodes.some((n) => n.op === "BatchNormalization"))
    const seen = cases.filter(({ graph, inputs }) => {
      const noEps = { ...graph, nodes: graph.nodes.map((n) => (n.op === "BatchNormalization" ? { ...n, attrs: { ...n.attrs, epsilon: attr.float(0) } } : n)) }
      return !close(evalGraph(noEps, inputs), evalGraph(graph, inputs))
    })
    expect(cases.length).toBeGreaterThan(40)
    expect(seen.length / cases.length).toBeGreaterThanOrEqual(0.9)
  })

  it("the cases see a dropped conv bias: without the bias of the convs before a BN, the graph is not within tolerance in ≥ 90% of them", () => {
    const cases = fc.sample(convNets, lawParams(60)).filter(({ graph }) => biasedConvBns(graph).length > 0)
    const seen = cases.filter(({ graph, inputs }) => {
      const convs = new Set(biasedConvBns(graph).map((bn) => bn.inputs[0]))
      const noBias = { ...graph, nodes: graph.nodes.map((n) => (n.op === "Conv" && convs.has(n.outputs[0]) ? { ...n, inputs: n.inputs.slice(0, 2) } : n)) }
      return !close(evalGraph(noBias, inputs), evalGraph(graph, inputs))
    })
    expect(cases.length).toBeGreaterThan(30)
    expect(seen.length / cases.length).toBeGreaterThanOrEqual(0.9)
  })
})
