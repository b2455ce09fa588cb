// rewrite.QdqToInteger's law: on random QDQ graphs (laws/rewrite/qdq-cases.ts: Conv / MatMul / Gemm
// with Relu / Clip folded, per-tensor and per-channel weights, int8 and uint8, int32 biases; the
// 8-bit moves; Add / Mul / AveragePool / GlobalAveragePool / Sigmoid / LeakyRelu, which become
// com.microsoft QLinear ops or, with mixed types, stay float; an Add / Mul → Relu / Clip → Q with
// the clamp folded into the QLinearAdd / QLinearMul's output range) the rewritten graph, run by the evaluator, equals the ONNX
// meaning — the evaluator on the QDQ graph — within the bound ONNX's rounding allows:
//   - one requantized layer: at most 1 LSB (the float reference rounds its float32 dequantized
//     values, products and sum before Q; the integer path sums exactly and rounds once; the two
//     values rounded differ by E < 1 output LSB, which the cases assert) — the com.microsoft ops
//     too: they requantize once, in onnxruntime's float32 arithmetic on the exact operands;
//   - a chain: B_out = ⌊B_in·max_o(m_o·Σ_k|w_ok − zw_o|) + E⌋ + 1 per requantized layer,
//     ⌊Lipschitz·Σ B_i·s_i/sy + E⌋ + 1 per com.microsoft op, B_out = B_in per 8-bit move, the
//     Lipschitz bound per op left float (derivation in qdq-cases.ts);
//   - 8-bit moves alone: exactly equal.
// And the pass leaves no float Conv / MatMul / Gemm where its pattern qualifies, keeps no
// DequantizeLinear before a move, and is idempotent.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { runGraph } from "../../src/ast/graph/evaluate.js"
import { canonicalForm } from "../../src/ast/graph/graph.js"
import { decodeModelSync } from "../../src/ast/onnx/decode.js"
import { encodeOnnx } from "../../src/ast/onnx/encode.js"
import type { Tensor } from "../../src/ast/graph/tensor.js"
import { qdqToIntegerWithReport } from "../../src/rewrite/qdq-to-integer.js"
import { lawParams } from "../support.js"
import { CONTRIB_KINDS, INTEGER_KINDS, MOVE_KINDS, qdqCase, type QdqCase } from "./qdq-cases.js"

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
        const c = qdqCase(seed, { kinds: [...INTEGER_KINDS, ...MOVE_KINDS, ...CONTRIB_KINDS], minLayers: 2, maxLayers: 6 })
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

  it("Add, Mul, AveragePool, GlobalAveragePool, Sigmoid, LeakyRelu become com.microsoft QLinear ops within the bound (a Relu / Clip after Add / Mul folded); mixed types stay, reported", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 30 }), (seed) => {
        const c = qdqCase(seed, { kinds: CONTRIB_KINDS, minLayers: 1, maxLayers: 4 })
        // one requantization per integer layer: E < 1, so exactly 1 LSB where the inputs agree
        expect(c.roundingE.every((e) => e < 1)).toBe(true)
        const r = run(c)
        expect(r.diff).toBeLessThanOrEqual(c.bound)
        expect(c.contrib.length).toBe(c.layers.length)
        for (const { value, integer, act } of c.contrib) {
          const n = c.graph.nodes.find((m) => m.outputs[0] === value)
          expect(n).toBeDefined()
          const d = r.report.find((e) => e.node === n?.name)
          expect(d?.outcome).toBe(integer ? "integer" : "kept")
          if (integer) {
            expect(d?.detail).toMatch(/^com\.microsoft\.QLinear/)
            expect(r.graph.nodes.some((m) => m.name === n?.name && m.op === n?.op)).toBe(false)
            // a Relu / Clip before the Q: folded into the output range (an 8-bit Clip where needed), no float clamp left
            if (act) {
              const a = c.graph.nodes.find((m) => m.outputs[0] === act)!
              expect(d?.detail).toContain(`(${a.op} ${a.name} folded)`)
              expect(r.graph.nodes.some((m) => m.outputs.includes(act))).toBe(false)
            }
          } else expect(d?.detail).toMatch(/takes one type/)
        }
        expect(r.graph.nodes.filter((m) => (m.op === "Relu" || m.op === "Clip") && r.graph.valueTypes.get(m.inputs[0])?.dtype === "float32").length).toBe(
          c.contrib.filter((x) => !x.integer && x.act).length,
        )
        // the integer ones leave no float op and no DQ / Q around them: only the input's Q, and a
        // DQ → op → Q per kept layer
        const keptLayers = c.contrib.filter((x) => !x.integer).length
        expect(r.graph.nodes.filter((n) => n.domain === "com.microsoft").length).toBe(c.contrib.length - keptLayers)
        expect(r.graph.nodes.filter((n) => n.op === "QuantizeLinear").length).toBe(1 + keptLayers)
        // the model file imports com.microsoft where a node uses it, and reads back
        const back = decodeModelSync(encodeOnnx(r.graph))
        expect(canonicalForm(back)).toBe(canonicalForm(r.graph))
      }),
      lawParams(100),
    )
  })

  it("is idempotent", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 30 }), (seed) => {
        const c = qdqCase(seed, { kinds: [...INTEGER_KINDS, ...MOVE_KINDS, ...CONTRIB_KINDS], minLayers: 1, maxLayers: 4 })
        const once = qdqToIntegerWithReport(c.graph).graph
        expect(canonicalForm(qdqToIntegerWithReport(once).graph)).toBe(canonicalForm(once))
      }),
      lawParams(40),
    )
  })
})
