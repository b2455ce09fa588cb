// rewrite.QdqToInteger's law: on random QDQ graphs (laws/rewrite/qdq-cases.ts: Conv / MatMul / Gemm
// with Relu / Clip folded, per-tensor and per-channel weights, int8 and uint8, int32 biases; the
// 8-bit moves; the ops that stay float) the rewritten graph, run by the evaluator, equals the ONNX
// meaning — the evaluator on the QDQ graph — within the bound ONNX's rounding allows:
//   - one requantized layer: at most 1 LSB (the float reference rounds its float32 dequantized
//     values, products and sum before Q; the integer path sums exactly and rounds once; the two
//     values rounded differ by E < 1 output LSB, which the cases assert);
//   - a chain: B_out = ⌊B_in·max_o(m_o·Σ_k|w_ok − zw_o|) + E⌋ + 1 per requantized layer, B_out =
//     B_in per 8-bit move, the Lipschitz bound per op left float (derivation in qdq-cases.ts);
//   - 8-bit moves alone: exactly equal.
// And the pass leaves no float Conv / MatMul / Gemm where its pattern qualifies, keeps no
// DequantizeLinear before a move, and is idempotent.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { runGraph } from "../../src/ast/graph/evaluate.js"
import { canonicalForm } from "../../src/ast/graph/graph.js"
import type { Tensor } from "../../src/ast/graph/tensor.js"
import { qdqToIntegerWithReport } from "../../src/rewrite/qdq-to-integer.js"
import { lawParams } from "../support.js"
import { FLOAT_KINDS, INTEGER_KINDS, MOVE_KINDS, qdqCase, type QdqCase } from "./qdq-cases.js"

/** The largest |a − b| over the elements of two 8-bit tensors of one type and shape, in LSBs. */
const lsbDiff = (a: Tensor, b: Tensor): number => {
  expect(b.dtype).toBe(a.dtype)
  expect(b.shape).toEqual(a.shape)
  let d = 0
  for (let i = 0; i < a.data.length; i++) d = Math.max(d, Math.abs((a.data[i] as number) - (b.data[i] as number)))
  return d
}

const run = (c: QdqCase) => {
  const { graph, report } = qdqToIntegerWithReport(c.graph)
  const want = runGraph(c.graph, c.inputs)[0]
  const got = runGraph(graph, c.inputs)[0]
  return { graph, report, diff: lsbDiff(got, want) }
}

const floatOps = (g: QdqCase["graph"], ops: readonly string[]) => g.nodes.filter((n) => ops.includes(n.op)).length

describe("rewrite.QdqToInteger", () => {
  it("one requantized layer (Conv, MatMul, Gemm; Relu/Clip folded) is within 1 LSB of the QDQ graph", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 30 }), (seed) => {
        const c = qdqCase(seed, { kinds: INTEGER_KINDS, minLayers: 1, maxLayers: 1 })
        // the case's stated bound: the float reference's rounding stays under one output LSB
        expect(c.roundingE.every((e) => e < 1)).toBe(true)
        expect(c.bound).toBe(c.layers.length ? 1 : 0)
        const r = run(c)
        expect(r.diff).toBeLessThanOrEqual(1)
        expect(floatOps(r.graph, ["Conv", "MatMul", "Gemm", "DequantizeLinear", "Relu"])).toBe(0)
        // (a folded clamp is a Clip on the 8-bit output, where the type's range does not lie inside it)
        expect(r.graph.nodes.filter((n) => n.op === "Clip" && r.graph.valueTypes.get(n.inputs[0])?.dtype === "float32").length).toBe(0)
        expect(r.report.filter((d) => d.outcome === "integer").length).toBe(c.layers.length)
      }),
      lawParams(150),
    )
  })

  it("a chain of quantized layers is within the compounded bound", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 30 }), (seed) => {
        const c = qdqCase(seed, { kinds: [...INTEGER_KINDS, ...MOVE_KINDS, ...FLOAT_KINDS], minLayers: 2, maxLayers: 6 })
        const r = run(c)
        expect(r.diff).toBeLessThanOrEqual(c.bound)
        expect(floatOps(r.graph, ["Conv", "MatMul", "Gemm"])).toBe(0)
      }),
      lawParams(120),
    )
  })

  it("8-bit moves (MaxPool, Pad, Slice, Transpose, Concat, Flatten, Reshape, Relu, Clip) are exact and leave no DQ/Q", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 30 }), (seed) => {
        const c = qdqCase(seed, { kinds: MOVE_KINDS, minLayers: 1, maxLayers: 5 })
        expect(c.bound).toBe(0)
        const r = run(c)
        expect(r.diff).toBe(0)
        // only the input's QuantizeLinear is left
        expect(r.graph.nodes.filter((n) => n.op === "DequantizeLinear").length).toBe(0)
        expect(r.graph.nodes.filter((n) => n.op === "QuantizeLinear").length).toBe(1)
      }),
      lawParams(120),
    )
  })

  it("ops with no standard integer form (AveragePool, GlobalAveragePool, Add, Sigmoid) stay DQ → op → Q, reported as kept", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 30 }), (seed) => {
        const c = qdqCase(seed, { kinds: FLOAT_KINDS, minLayers: 1, maxLayers: 3 })
        const r = run(c)
        expect(r.diff).toBe(0)
        expect(canonicalForm(r.graph)).toBe(canonicalForm(c.graph))
        const floats = c.graph.nodes.filter((n) => ["AveragePool", "GlobalAveragePool", "Add", "Sigmoid"].includes(n.op))
        for (const n of floats) expect(r.report.find((d) => d.node === n.name)?.outcome).toBe("kept")
      }),
      lawParams(60),
    )
  })

  it("is idempotent", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 30 }), (seed) => {
        const c = qdqCase(seed, { kinds: [...INTEGER_KINDS, ...MOVE_KINDS, ...FLOAT_KINDS], minLayers: 1, maxLayers: 4 })
        const once = qdqToIntegerWithReport(c.graph).graph
        expect(canonicalForm(qdqToIntegerWithReport(once).graph)).toBe(canonicalForm(once))
      }),
      lawParams(40),
    )
  })
})
