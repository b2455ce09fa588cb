// The quantization pass (src/rewrite/quantize): a small seeded CNN quantized, run by
// onnxruntime-node and by Tessera's evaluator on the same QDQ bytes; its report; the typed
// errors of an unquantizable node and bad options; the same inputs giving the same bytes.
import { Effect } from "effect"
import * as ort from "onnxruntime-node"
import { describe, expect, it } from "vitest"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { node } from "../src/ast/graph/graph.js"
import { tensor, type Tensor } from "../src/ast/graph/tensor.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { randomTensor } from "../src/cli/inputs.js"
import { fillNormal } from "../src/zoo/random.js"
import { smallCnn } from "./support/quantize-models.js"
import { entropyRange, Histogram, percentileRange } from "../src/rewrite/quantize/calibrate.js"
import { activationParams, quantizeWeight } from "../src/rewrite/quantize/params.js"
import { quantizeModel, quantizeModelSync, type QuantizeOptions } from "../src/rewrite/quantize/index.js"

const feedsOf = (n: number, seed = 0): ReadonlyMap<string, Tensor>[] =>
  Array.from({ length: n }, (_, k) => new Map([["x", randomTensor("float32", [1, 3, 8, 8], seed + k)]]))

const opts = (o: Partial<QuantizeOptions> = {}): QuantizeOptions => ({ method: "minmax", perChannel: true, ...o })

const runOrt = async (bytes: Uint8Array, x: Tensor): Promise<Float32Array> => {
  const s = await ort.InferenceSession.create(bytes)
  const out = await s.run({ x: new ort.Tensor("float32", x.data as Float32Array, [...x.shape]) })
  const y = out[s.outputNames[0]].data as Float32Array
  await s.release()
  return y
}

describe("quantize: a small CNN", () => {
  const graph = smallCnn()
  const calib = feedsOf(8)
  const result = quantizeModelSync(graph, calib, opts())

  it("writes QDQ: int8 weights per channel, int32 biases, Q/DQ around the activations, ReLUs folded", () => {
    const g = decodeModelSync(result.bytes)
    const ops = g.nodes.map((n) => n.op)
    expect(ops).not.toContain("BatchNormalization")
    expect(ops).not.toContain("Relu") // both folded into the range of the node before them
    expect(ops.filter((o) => o === "QuantizeLinear").length).toBe(new Set(result.report.layers.map((l) => l.output)).size + 1) // + the input
    const w1 = g.initializers.get("w1_bn_quantized") ?? [...g.initializers].find(([k]) => k.startsWith("w1"))?.[1]
    expect(w1?.dtype).toBe("int8")
    const dqW = g.nodes.find((n) => n.op === "DequantizeLinear" && n.inputs[0].startsWith("w2"))!
    expect(dqW.attrs.axis).toEqual({ kind: "int", value: 0 })
    expect(g.initializers.get(dqW.inputs[1])!.shape).toEqual([8])
    const dqB = g.nodes.find((n) => n.op === "DequantizeLinear" && n.inputs[0].startsWith("b2"))!
    expect(g.initializers.get(dqB.inputs[0])!.dtype).toBe("int32")
    // bias scale = x_scale · w_scale, channel by channel
    const xScale = g.initializers.get(g.nodes.find((n) => n.op === "DequantizeLinear" && n.outputs[0] === g.nodes.find((c) => c.name === "conv2")!.inputs[0])!.inputs[1])!.data[0]
    const wScale = g.initializers.get(dqW.inputs[1])!.data
    const bScale = g.initializers.get(dqB.inputs[1])!.data
    for (let c = 0; c < 8; c++) expect(bScale[c]).toBe(Math.fround(xScale * wScale[c]))
    // activations int8 with a zero point; a folded ReLU's range starts at 0 (zero point -128)
    const conv2Out = g.nodes.find((n) => n.op === "QuantizeLinear" && n.inputs[0] === "s")!
    expect(g.initializers.get(conv2Out.inputs[2])!.dtype).toBe("int8")
    expect(g.initializers.get(conv2Out.inputs[2])!.data[0]).toBe(-128)
  })

  it("runs on onnxruntime-node and Tessera's evaluator alike (within 2 output LSBs), near fp32", async () => {
    const g = decodeModelSync(result.bytes)
    const outLayer = result.report.layers.find((l) => l.output === "y")!
    for (const feeds of feedsOf(4, 100)) {
      const x = feeds.get("x")!
      const ours = runGraph(g, feeds)[0].data as Float32Array
      const theirs = await runOrt(result.bytes, x)
      const fp32 = runGraph(graph, feeds)[0].data as Float32Array
      let noise = 0
      let signal = 0
      for (let i = 0; i < ours.length; i++) {
        expect(Math.abs(ours[i] - theirs[i])).toBeLessThanOrEqual(2 * outLayer.scale + 1e-6)
        noise += (ours[i] - fp32[i]) ** 2
        signal += fp32[i] ** 2
      }
      expect(Math.sqrt(noise / signal)).toBeLessThan(0.25)
    }
  })

  it("reports per layer the scale, the clipping range and the error against fp32", () => {
    const r = result.report
    expect(r.layers.map((l) => l.node)).toEqual(["conv1", "pool1", "conv2", "add", "gap", "flatten", "fc"])
    expect(r.layers.find((l) => l.node === "conv1")!.folded).toEqual(["relu1"])
    expect(r.layers.find((l) => l.node === "add")!.folded).toEqual(["relu2"])
    for (const l of r.layers) {
      expect(l.scale).toBeGreaterThan(0)
      expect(l.clip.min).toBeLessThanOrEqual(0)
      expect(l.clip.max).toBeGreaterThan(0)
      expect(l.clip.max - l.clip.min).toBeCloseTo(255 * l.scale, 5)
      expect(l.sqnrDb).toBeGreaterThan(15)
      expect(l.relError).toBeLessThan(0.2)
    }
    const conv1 = r.layers.find((l) => l.node === "conv1")!
    expect(conv1.clip.min).toBe(0) // ReLU folded: zero point -128
    expect(conv1.clip.max).toBeGreaterThanOrEqual(conv1.seen.max * (1 - 1e-6))
    expect(conv1.weightScales?.count).toBe(8)
    expect(r.outputs[0].sqnrDb).toBeGreaterThan(15)
  })

  it("the report covers every quantized tensor: each QuantizeLinear after the input's is one layer's output", () => {
    const g = decodeModelSync(result.bytes)
    // (a layer with a folded ReLU is quantized at its own output, and reported under the ReLU's)
    const producers = g.nodes.filter((n) => n.op === "QuantizeLinear" && n.inputs[0] !== "x").map((q) => g.nodes.find((n) => n.outputs.includes(q.inputs[0]))!.name)
    expect(producers.length).toBe(result.report.layers.length)
    expect(new Set(producers)).toEqual(new Set(result.report.layers.map((l) => l.node)))
    for (const l of result.report.layers) {
      expect(l.scale).toBeGreaterThan(0)
      expect(l.clip.min).toBeLessThanOrEqual(0)
      expect(l.clip.max).toBeGreaterThanOrEqual(0)
      expect(Number.isFinite(l.sqnrDb) || l.sqnrDb === Infinity).toBe(true)
      expect(Number.isFinite(l.relError)).toBe(true)
      if (l.op === "Conv" || l.op === "Gemm") expect(l.weightScales?.count).toBeGreaterThan(0)
    }
  })

  it("is deterministic: the same inputs give the same bytes", () => {
    const again = quantizeModelSync(graph, feedsOf(8), opts())
    expect(Buffer.from(again.bytes).equals(Buffer.from(result.bytes))).toBe(true)
  })

  it("per tensor without --per-channel; percentile and entropy give narrower clips than minmax", () => {
    const perTensor = decodeModelSync(quantizeModelSync(graph, calib, opts({ perChannel: false })).bytes)
    const dqW = perTensor.nodes.find((n) => n.op === "DequantizeLinear" && n.inputs[0].startsWith("w2"))!
    expect(dqW.attrs.axis).toBeUndefined()
    expect(perTensor.initializers.get(dqW.inputs[1])!.shape).toEqual([])
    for (const method of ["percentile", "entropy"] as const) {
      const r = quantizeModelSync(graph, calib, opts({ method })).report
      r.layers.forEach((l, k) => expect(l.clip.max - l.clip.min).toBeLessThanOrEqual(result.report.layers[k].clip.max - result.report.layers[k].clip.min + 1e-6))
    }
  })

  it("--skip leaves a node float on purpose", () => {
    const r = quantizeModelSync(graph, calib, opts({ skip: ["conv2"] }))
    const g = decodeModelSync(r.bytes)
    const conv2 = g.nodes.find((n) => n.name === "conv2")!
    expect(g.initializers.get(conv2.inputs[1])!.dtype).toBe("float32")
    expect(r.report.skipped).toEqual(["conv2"])
    expect(r.report.layers.map((l) => l.node)).not.toContain("conv2")
  })
})

describe("quantize: typed errors", () => {
  const withSoftsign = smallCnn((x) => ({ nodes: [node("Softsign", [x], ["soft"], {}, "softsign")], out: "soft" }))

  it("a node of the quantized region with no quantized meaning is reported per node, never left float", () => {
    const e = Effect.runSync(Effect.flip(quantizeModel(withSoftsign, feedsOf(2), opts())))
    expect(e._tag).toBe("QuantizationUnsupportedError")
    if (e._tag !== "QuantizationUnsupportedError") return
    expect(e.nodes.map((n) => [n.node, n.op])).toEqual([["softsign", "Softsign"]])
    expect(e.message).toMatch(/--skip softsign/)
  })

  it("many such nodes: each is named in the error (the first eight with their reason), none left out", () => {
    // twelve Softsigns, each reading the first conv's quantized output, summed by quantized Adds
    const chain = smallCnn((x) => ({
      nodes: [
        ...Array.from({ length: 12 }, (_, k) => node("Softsign", [x], [`soft${k}`], {}, `softsign${k}`)),
        ...Array.from({ length: 11 }, (_, k) => node("Add", [k === 0 ? "soft0" : `sum${k - 1}`, `soft${k + 1}`], [`sum${k}`], {}, `sum${k}`)),
      ],
      out: "sum10",
    }))
    const e = Effect.runSync(Effect.flip(quantizeModel(chain, feedsOf(1), opts())))
    expect(e._tag).toBe("QuantizationUnsupportedError")
    if (e._tag !== "QuantizationUnsupportedError") return
    expect(e.nodes.map((n) => n.node)).toEqual(Array.from({ length: 12 }, (_, k) => `softsign${k}`))
    for (let k = 0; k < 12; k++) expect(e.message).toContain(`'softsign${k}' (Softsign)`)
    expect(e.message).toMatch(/and 4 more, for the same kind of reason: 'softsign8' \(Softsign\)/)
  })

  it("--skip on that node quantizes the rest", () => {
    const r = quantizeModelSync(withSoftsign, feedsOf(2), opts({ skip: ["softsign"] }))
    expect(r.report.skipped).toEqual(["softsign"])
  })

  it("bad options: an unknown --skip name, a percentile out of range, no calibration data", () => {
    const flip = (o: QuantizeOptions, n = 2) => Effect.runSync(Effect.flip(quantizeModel(smallCnn(), feedsOf(n), o)))
    expect(flip(opts({ skip: ["nope"] }))).toMatchObject({ _tag: "QuantizeOptionError", option: "skip" })
    expect(flip(opts({ method: "percentile", percentile: 20 }))).toMatchObject({ _tag: "QuantizeOptionError", option: "percentile" })
    expect(flip(opts(), 0)).toMatchObject({ _tag: "QuantizeOptionError", option: "calibration" })
    const wrong = [new Map([["x", randomTensor("float32", [1, 3, 9, 9], 0)]])]
    expect(Effect.runSync(Effect.flip(quantizeModel(smallCnn(), wrong, opts())))._tag).toBe("InputError")
  })
})

describe("quantize: parameters and calibration methods", () => {
  it("activation parameters as onnxruntime computes them: range widened to 0, zero point rounded half to even", () => {
    expect(activationParams({ min: 0, max: 2.55 })).toEqual({ scale: Math.fround(0.01), zeroPoint: -128 })
    // float32 scale 0.0078431377…: -128 - (-1 / scale) = -0.5000076, which rounds to -1 (not a tie)
    expect(activationParams({ min: -1, max: 1 })).toEqual({ scale: Math.fround(2 / 255), zeroPoint: -1 })
    expect(activationParams({ min: -1.5, max: 1.05 })).toEqual({ scale: Math.fround(0.01), zeroPoint: 22 })
    expect(activationParams({ min: 1, max: 3 }).zeroPoint).toBe(-128) // [0, 3]
    expect(activationParams({ min: 0, max: 0 })).toEqual({ scale: 1, zeroPoint: -128 }) // only zeros seen: negatives still clip to 0
  })

  it("symmetric weights in [-127, 127], per channel", () => {
    const w = tensor("float32", [2, 2], new Float32Array([1, -0.5, 0.03, -0.04]))
    const q = quantizeWeight(w, 0)
    expect([...q.values.data]).toEqual([127, -64, 95, -127]) // -63.5 → -64 (half to even), 95.25 → 95
    expect([...q.scales]).toEqual([Math.fround(1 / 127), Math.fround(0.04 / 127)])
  })

  it("percentile clips the outliers; entropy finds a threshold inside the range", () => {
    const h = new Histogram(-100, 100)
    const data = new Float32Array(100000)
    fillNormal(3, data, 0, 1)
    data[0] = 100
    data[1] = -100
    h.add(data)
    const p = percentileRange(h, 99.99, { min: -100, max: 100 })
    expect(p.max).toBeLessThan(10)
    expect(p.min).toBeGreaterThan(-10)
    const e = entropyRange(h, { min: -100, max: 100 })
    expect(e.max).toBeLessThan(100)
    expect(e.max).toBeGreaterThan(2)
  })
})
