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
import { DTYPES } from "../../src/ast/graph/dtype.js"
import type { Graph } from "../../src/ast/graph/graph.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import type { Tensor } from "../../src/ast/graph/tensor.js"
import { rewriteToFixedPoint, simplifyInferenceRules, simplifyInferenceSync } from "../../src/rewrite/index.js"
import { assertAllClose, evalGraph, lawParams } from "../support.js"
import { arbSimplifiableCase, readsOf } from "./cases.js"

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

// rewrite.SimplifyInference leaves nothing its rules are for, and keeps the near misses, on cases
// with Identity chains, Dropouts (plain, training_mode 0 or 1, mask read), Casts, units on either
// side (broadcasting or not, near units), Transpose pairs, reshape chains, BatchNormalization after
// a Conv or not, and Gemms (cases.ts).
const simplifiable = arbSimplifiableCase()

const RESHAPES = new Set(["Reshape", "Flatten", "Squeeze", "Unsqueeze"])
const UNITS: Record<string, { readonly value: number; readonly sides: readonly number[] }> = {
  Mul: { value: 1, sides: [0, 1] },
  Add: { value: 0, sides: [0, 1] },
  Sub: { value: 0, sides: [1] },
  Div: { value: 1, sides: [1] },
}

/** Facts about a graph's nodes: a Dropout in training mode, a Cast that changes the type. */
const facts = (g: Graph) => {
  const type = (v: string) => g.valueTypes.get(v) ?? g.inputs.find((i) => i.name === v)?.type ?? g.initializers.get(v)
  const same = (a: string, b: string) => {
    const [x, y] = [type(a), type(b)]
    return !!x && !!y && x.dtype === y.dtype && x.shape.join() === y.shape.join()
  }
  const constant = (v: string | undefined) => (v ? g.initializers.get(v) : undefined)
  const training = (n: Graph["nodes"][number]) => n.op === "Dropout" && !!n.inputs[2] && constant(n.inputs[2])?.data[0] !== 0
  const converting = (n: Graph["nodes"][number]) => n.op === "Cast" && !same(n.inputs[0], n.outputs[0])
  return { type, same, constant, training, converting }
}

/** What a rule of SimplifyInference would still rewrite in `g` (the writers of graph outputs and of names subgraphs read aside). */
const leftToSimplify = (g: Graph): string[] => {
  const { type, same, constant, training } = facts(g)
  const outputs = new Set([...g.outputs.map((o) => o.name), ...g.nodes.flatMap((n) => readsOf(n).filter((r) => !n.inputs.includes(r)))])
  const producer = new Map(g.nodes.flatMap((n) => n.outputs.map((o) => [o, n] as const)))
  const isFloat = (t: { readonly dtype: string } | undefined) => !!t && (t.dtype === "float32" || t.dtype === "float64")
  const bad: string[] = []
  for (const n of g.nodes) {
    const pinned = outputs.has(n.outputs[0])
    const say = (why: string) => bad.push(`${n.name} (${n.op}): ${why}`)
    const extraOutputs = n.outputs.slice(1).some((o) => o !== "")
    switch (n.op) {
      case "Identity":
        if (!pinned) say("an Identity is left")
        break
      case "Dropout":
        if (!pinned && !extraOutputs && !training(n)) say("an inference Dropout whose mask nobody reads is left")
        break
      case "Cast":
        if (!pinned && same(n.inputs[0], n.outputs[0])) say("a Cast to the same type is left")
        break
      case "Transpose":
        if (producer.get(n.inputs[0])?.op === "Transpose") say("a Transpose of a Transpose is left")
        break
      case "BatchNormalization": {
        const x = type(n.inputs[0])
        const params = n.inputs.slice(1, 5).every((i) => constant(i))
        // training mode as the evaluator reads it: the attribute from opset 14, before it any statistics output
        const training = g.opset >= 14 ? n.attrs.training_mode?.kind === "int" && n.attrs.training_mode.value !== 0 : n.outputs.length > 1
        if (params && !extraOutputs && isFloat(x) && x!.shape.length >= 2 && !training) say("a BatchNormalization of constants is left")
        break
      }
      case "Gemm": {
        const int = (k: string, d: number) => (n.attrs[k]?.kind === "int" || n.attrs[k]?.kind === "float" ? (n.attrs[k].value as number) : d)
        const [b, c] = [constant(n.inputs[1]), constant(n.inputs[2])]
        if (b && isFloat(b) && (int("transB", 0) !== 0 || int("alpha", 1) !== 1)) say("a constant weight is left transposed or scaled")
        if (c && isFloat(c) && int("beta", 1) !== 1) say("a constant bias is left scaled")
        break
      }
      default: {
        const u = UNITS[n.op]
        if (u && n.inputs.length === 2 && !pinned)
          for (const side of u.sides) {
            const t = constant(n.inputs[side])
            if (t && t.data.length > 0 && t.data.every((x) => x === u.value) && same(n.inputs[1 - side], n.outputs[0])) say(`a unit on side ${side} is left`)
          }
        if (RESHAPES.has(n.op) && RESHAPES.has(producer.get(n.inputs[0])?.op ?? "") && type(n.outputs[0])?.shape.every((d) => typeof d === "number")) say("a reshape of a reshape is left")
      }
    }
  }
  return bad
}

/** The ends of two-op reshape chains (static) whose output has the chain's input's type, not graph outputs or captured. */
const sameTypeReshapeChains = (g: Graph): string[] => {
  const { type, same } = facts(g)
  const pinned = new Set([...g.outputs.map((o) => o.name), ...g.nodes.flatMap((n) => readsOf(n).filter((r) => !n.inputs.includes(r)))])
  const producer = new Map(g.nodes.flatMap((n) => n.outputs.map((o) => [o, n] as const)))
  return g.nodes
    .filter((n) => {
      const p = producer.get(n.inputs[0])
      return RESHAPES.has(n.op) && p && RESHAPES.has(p.op) && !pinned.has(n.outputs[0]) && type(n.outputs[0])?.shape.every((d) => typeof d === "number") && same(p.inputs[0], n.outputs[0])
    })
    .map((n) => n.outputs[0])
}

describe("rewrite.SimplifyInference: what is left", () => {
  it("leaves no node a rule is for (writers of graph outputs and captured names aside), keeps training Dropouts and converting Casts, duplicates no conv; evaluates as before", () => {
    let removed = 0
    fc.assert(
      fc.property(simplifiable, ({ graph, inputs }) => {
        const after = simplifyInferenceSync(graph)
        // the rules reach their fixed point (none fires forever, renaming what it folded)
        expect(rewriteToFixedPoint(graph, simplifyInferenceRules).stop).toBe("Saturated")
        expect(leftToSimplify(after)).toEqual([])
        // a reshape chain that comes back to its input's type vanishes (no Reshape to the same shape is left in its place)
        for (const end of sameTypeReshapeChains(bindSync(graph))) expect(after.nodes.some((n) => n.outputs.includes(end)), end).toBe(false)
        const [was, is] = [facts(bindSync(graph)), facts(after)]
        expect(after.nodes.filter(is.training).length).toBe(graph.nodes.filter(was.training).length)
        expect(after.nodes.filter(is.converting).length).toBe(graph.nodes.filter(was.converting).length)
        // no fold in float16 (the folded constants would round to half again)
        const halfBns = (g: Graph, t: (v: string) => { readonly dtype: string } | undefined) => g.nodes.filter((n) => n.op === "BatchNormalization" && t(n.inputs[0])?.dtype === "float16").length
        expect(halfBns(after, is.type)).toBe(halfBns(graph, was.type))
        // no work duplicated (a BatchNormalization folded into a conv that another node reads too)
        for (const op of ["Conv", "Gemm", "MatMul"]) expect(after.nodes.filter((n) => n.op === op).length).toBeLessThanOrEqual(graph.nodes.filter((n) => n.op === op).length)
        // the constants the rules make have types values can have (a Reshape's shape is int64)
        for (const [k, t] of after.initializers) expect(DTYPES, k).toContain(t.dtype)
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs))
        removed += graph.nodes.length - after.nodes.length
      }),
      lawParams(100),
    )
    expect(removed).toBeGreaterThan(200)
  })
})
