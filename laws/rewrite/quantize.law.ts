// The quantization pass (src/rewrite/quantize): its laws.
// 1. The error bound of one quantized layer. A Conv or Gemm (optionally with a bias and a folded
//    ReLU) quantized on the very input it is then run on (minmax: nothing clips), per tensor or
//    per channel, differs from fp32 at each output by at most
//      Σ_k (s_x/2 · |ŵ_k| + |x_k| · s_w/2) + s_b/2 + s_y/2
//    (input rounding through the dequantized weights, weight rounding through the input, the
//    int32 bias's rounding, the output's rounding; clipping to a range that holds the fp32 value
//    only moves toward it), with s_b = s_x · s_w read back from the written model, plus float32
//    accumulation slack. Breaking the bias scale, the weight axis or the rounding fails it.
// 2. Never silently float: on random CNN-like graphs the pass either fails naming nodes whose op
//    has no quantized meaning, or every node of a quantized op reads its data input from a
//    DequantizeLinear and every Conv / Gemm weight is stored int8; the QDQ model evaluates to
//    finite outputs of the fp32 model's shapes.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attr } from "../../src/ast/graph/attrs.js"
import { arbModelGraphCase } from "../../src/ast/graph/arbitrary-models.js"
import { makeGraph, node, type Graph, type Node } from "../../src/ast/graph/graph.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import { tensor, type Tensor } from "../../src/ast/graph/tensor.js"
import { fillNormal } from "../../src/zoo/random.js"
import { QuantizationUnsupportedError, quantizeModelSync, ROLES } from "../../src/rewrite/quantize/index.js"
import { evalGraph, lawParams } from "../support.js"

const normal = (shape: number[], seed: number, std = 1): Tensor => {
  const d = new Float32Array(shape.reduce((a, b) => a * b, 1))
  fillNormal(seed, d, 0, std)
  return tensor("float32", shape, d)
}
const map = (t: Tensor, f: (v: number, i: number) => number): Tensor => tensor("float32", t.shape, Float32Array.from(t.data as Float32Array, f))

interface LayerCase {
  readonly kind: "conv" | "gemm"
  readonly c: number
  readonly m: number
  readonly hw: number
  readonly k: number
  readonly stride: number
  readonly pad: number
  readonly bias: boolean
  readonly relu: boolean
  readonly perChannel: boolean
  readonly seed: number
}

const arbLayer: fc.Arbitrary<LayerCase> = fc
  .record({
    kind: fc.constantFrom("conv" as const, "gemm" as const),
    c: fc.integer({ min: 1, max: 4 }),
    m: fc.integer({ min: 1, max: 5 }),
    hw: fc.integer({ min: 3, max: 7 }),
    k: fc.integer({ min: 1, max: 3 }),
    stride: fc.integer({ min: 1, max: 2 }),
    pad: fc.integer({ min: 0, max: 1 }),
    bias: fc.boolean(),
    relu: fc.boolean(),
    perChannel: fc.boolean(),
    seed: fc.integer({ min: 0, max: 1 << 20 }),
  })

/** The layer's graph (x → Conv / Gemm [+ bias] [→ Relu] → y) and its input. */
const layerGraph = (l: LayerCase): { graph: Graph; x: Tensor } => {
  const conv = l.kind === "conv"
  const xShape = conv ? [1, l.c, l.hw, l.hw] : [1, l.c * l.hw]
  const wShape = conv ? [l.m, l.c, l.k, l.k] : [l.m, l.c * l.hw]
  const inits = new Map<string, Tensor>([["w", normal(wShape, l.seed + 1, 0.5)]])
  if (l.bias) inits.set("b", normal([l.m], l.seed + 2, 0.5))
  const inputs = ["x", "w", ...(l.bias ? ["b"] : [])]
  const nodes: Node[] = [
    conv
      ? node("Conv", inputs, ["z"], { pads: attr.ints([l.pad, l.pad, l.pad, l.pad]), strides: attr.ints([l.stride, l.stride]), kernel_shape: attr.ints([l.k, l.k]) }, "layer")
      : node("Gemm", inputs, ["z"], { transB: attr.int(1) }, "layer"),
  ]
  if (l.relu) nodes.push(node("Relu", ["z"], ["r"], {}, "relu"))
  // the output goes through an Identity so the layer's output is no graph output (a ReLU folds)
  nodes.push(node("Identity", [l.relu ? "r" : "z"], ["y"], {}, "out"))
  const graph = bindSync(makeGraph({ name: "layer", opset: 13, inputs: [{ name: "x", type: { dtype: "float32", shape: xShape } }], outputs: [{ name: "y", type: { dtype: "float32", shape: [] } }], initializers: inits, nodes }))
  return { graph, x: normal(xShape, l.seed) }
}

const producerOf = (g: Graph, v: string): Node => g.nodes.find((n) => n.outputs.includes(v))!
const init = (g: Graph, v: string): Tensor => g.initializers.get(v)!

describe("rewrite/quantize: one layer's error bound", () => {
  it("|q(x) - fp32(x)| ≤ Σ(s_x/2·|ŵ| + |x|·s_w/2) + s_b/2 + s_y/2 at every output, on the calibration input", () => {
    fc.assert(
      fc.property(arbLayer, (l) => {
        const conv = l.kind === "conv"
        if (conv && l.k > l.hw + 2 * l.pad) return
        const { graph, x } = layerGraph(l)
        const feeds = new Map([["x", x]])
        const { graph: q } = quantizeModelSync(graph, [feeds], { method: "minmax", perChannel: l.perChannel })
        const layer = q.nodes.find((n) => n.op === (conv ? "Conv" : "Gemm"))!
        const xDq = producerOf(q, layer.inputs[0])
        const wDq = producerOf(q, layer.inputs[1])
        expect(xDq.op).toBe("DequantizeLinear")
        expect(wDq.op).toBe("DequantizeLinear")
        const sx = Number(init(q, xDq.inputs[1]).data[0])
        const qw = init(q, wDq.inputs[0])
        const sw = init(q, wDq.inputs[1]).data as Float32Array
        expect(qw.dtype).toBe("int8")
        expect(sw.length).toBe(l.perChannel ? l.m : 1)
        for (const v of qw.data) expect(Math.abs(v)).toBeLessThanOrEqual(127)
        // the weight's channel axis as written: Conv's 0; Gemm's B is stored [K, N] (canonical), axis 1
        const axis = wDq.attrs.axis?.kind === "int" ? wDq.attrs.axis.value : undefined
        const inner = qw.data.length / qw.shape[0]
        const swOf = (i: number) => (axis === undefined ? sw[0] : axis === 0 ? sw[Math.floor(i / inner)] : sw[i % qw.shape[1]])
        let sb: Float32Array | undefined
        if (l.bias) {
          const bDq = producerOf(q, layer.inputs[2])
          expect(init(q, bDq.inputs[0]).dtype).toBe("int32")
          sb = init(q, bDq.inputs[1]).data as Float32Array
          for (let c = 0; c < l.m; c++) expect(sb[sb.length === 1 ? 0 : c]).toBe(Math.fround(sx * sw[sw.length === 1 ? 0 : c]))
        }
        const yQ = q.nodes.find((n) => n.op === "QuantizeLinear" && n.inputs[0] === layer.outputs[0])!
        const sy = Number(init(q, yQ.inputs[1]).data[0])
        // the bound, computed by the same layer on |ŵ| and on ones (input rounding) and on |x| with weight s_w (weight rounding)
        const wHat = map(tensor("float32", qw.shape, Float32Array.from(qw.data as Int8Array)), (v, i) => Math.abs(v * swOf(i)))
        const wScale = map(wHat, (_, i) => swOf(i))
        const attrs = layer.attrs
        const op = (a: Tensor, w: Tensor): Float32Array => {
          const g = makeGraph({ name: "b", opset: 13, inputs: [{ name: "a", type: { dtype: "float32", shape: a.shape } }], outputs: [{ name: "o", type: { dtype: "float32", shape: [] } }], initializers: new Map([["w", w]]), nodes: [node(layer.op, ["a", "w"], ["o"], attrs, "o")] })
          return evalGraph(g, new Map([["a", a]]))[0].data as Float32Array
        }
        const viaInput = op(map(x, () => 1), wHat)
        const viaWeight = op(map(x, Math.abs), wScale)
        const got = evalGraph(q, feeds)[0].data as Float32Array
        const want = evalGraph(graph, feeds)[0].data as Float32Array
        const absProducts = op(map(x, Math.abs), wHat)
        const perOut = got.length / l.m
        for (let i = 0; i < got.length; i++) {
          const c = conv ? Math.floor(i / perOut) % l.m : i % l.m
          const bound = (sx / 2) * viaInput[i] + viaWeight[i] / 2 + (sb ? sb[sb.length === 1 ? 0 : c] / 2 : 0) + sy / 2
          const slack = 1e-5 * (absProducts[i] + 1)
          expect(Math.abs(got[i] - want[i])).toBeLessThanOrEqual(bound * (1 + 1e-4) + slack)
        }
      }),
      lawParams(120),
    )
  })
})

const cnnLike = arbModelGraphCase({ motifs: ["conv-bn-act", "residual", "pool", "squeeze-excite", "broadcast", "head", "gemm", "linear"], maxMotifs: 4 })
const QDQ = new Set(["QuantizeLinear", "DequantizeLinear"])

describe("rewrite/quantize: never silently float", () => {
  it("fails naming nodes with no quantized meaning, or every quantized op reads dequantized data and int8 weights", () => {
    let quantized = 0
    let refused = 0
    fc.assert(
      fc.property(cnnLike, fc.boolean(), ({ graph, inputs }, perChannel) => {
        if (graph.opset < 13 || graph.inputs.some((i) => i.type.dtype !== "float32")) return
        let result
        try {
          result = quantizeModelSync(graph, [inputs], { method: "minmax", perChannel, errorSamples: 1 })
        } catch (e) {
          if (!(e instanceof QuantizationUnsupportedError)) throw e
          refused++
          expect(e.nodes.length).toBeGreaterThan(0)
          for (const n of e.nodes) expect(n.reason).toMatch(new RegExp(`--skip ${n.node.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`))
          return
        }
        quantized++
        const q = bindSync(result.graph)
        for (const n of q.nodes) {
          if (QDQ.has(n.op) || !(n.op in ROLES) || q.valueTypes.get(n.inputs[0])?.dtype !== "float32") continue
          expect(producerOf(q, n.inputs[0])?.op, `${n.name} (${n.op}) reads ${n.inputs[0]}`).toBe("DequantizeLinear")
          if (n.op === "Conv" || n.op === "Gemm") {
            const w = producerOf(q, n.inputs[1])
            expect(w?.op).toBe("DequantizeLinear")
            expect(q.initializers.get(w!.inputs[0])?.dtype).toBe("int8")
          }
        }
        const want = evalGraph(graph, inputs)
        const got = evalGraph(q, inputs)
        got.forEach((t, k) => {
          expect(t.shape).toEqual(want[k].shape)
          for (const v of t.data as Float32Array) expect(Number.isFinite(v)).toBe(true)
        })
      }),
      lawParams(40),
    )
    // both ends are exercised
    expect(quantized).toBeGreaterThan(0)
    void refused
  })
})
