// rewrite.VtaRequantize on a quantized model (the small seeded CNN of the quantize tests, QDQ with
// per-channel weights and zero points −128): in the region TVM's graph_pack offloads (after the
// first pool, up to the global pool) the QLinearConv and QLinearAdd become the shift-requantized
// shapes, with one power-of-two activation scale and a power-of-two multiplier per conv; the rest
// is untouched, with re-quantizing pairs at the edges; the result is partitioned onto VTA whole and
// runs there exactly as on c; its numbers stay near the int8 graph's (a coarser quantization).
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { bindSync } from "../src/ast/graph/infer.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { randomTensor } from "../src/cli/inputs.js"
import { loadVta, planVta, runOnC } from "../src/cli/vta.js"
import { qdqToIntegerSync } from "../src/rewrite/qdq-to-integer.js"
import { quantizeModelSync } from "../src/rewrite/quantize/index.js"
import { offloadRegion, vtaRequantizeWithReport } from "../src/rewrite/vta-requantize.js"
import { partitionForVta } from "../src/rewrite/vta-partition.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { smallCnn } from "./support/quantize-models.js"

const calib = Array.from({ length: 8 }, (_, k) => new Map([["x", randomTensor("float32", [1, 3, 8, 8], k)]]))
const qdq = decodeModelSync(quantizeModelSync(smallCnn(), calib, { method: "minmax", perChannel: true }).bytes)
const integer = qdqToIntegerSync(qdq)

describe("rewrite.VtaRequantize", () => {
  it("converts the region's QLinearConv and QLinearAdd to shift-requantized standard ops, and nothing else", () => {
    const { start, end } = offloadRegion(integer)
    expect(integer.nodes[start - 1].op).toBe("MaxPool")
    expect(integer.nodes[end].op).toBe("QLinearGlobalAveragePool")
    const { graph, report } = vtaRequantizeWithReport(integer)
    expect(report.converted).toEqual(integer.nodes.slice(start, end).filter((n) => n.op === "QLinearConv" || n.op === "QLinearAdd").map((n) => n.name))
    expect(report.converted).toHaveLength(2)
    // one activation scale, a power of two over 128
    expect(Number.isInteger(Math.log2(report.activationScale! * 128))).toBe(true)
    const ops = graph.nodes.map((n) => n.op)
    expect(ops.filter((o) => o === "QLinearConv")).toHaveLength(1) // the first conv stays as it was
    expect(ops).not.toContain("QLinearAdd")
    expect(ops).toContain("ConvInteger")
    for (const n of graph.nodes.filter((m) => m.op === "Mul" && m.name.endsWith("_vta_scale"))) {
      const f = Number(graph.initializers.get(n.inputs[1])!.data[0])
      expect(Number.isInteger(Math.log2(f))).toBe(true)
    }
    // the nodes outside the region are the integer graph's own
    const before = integer.nodes.slice(0, start).map((n) => n.name)
    expect(graph.nodes.slice(0, start).map((n) => n.name)).toEqual(before)
  })

  it("is offloaded whole, runs on vta exactly as on c, and stays near the int8 graph's numbers", async () => {
    const shapes = new Map([["x", [1, 3, 8, 8]]])
    const plan = planVta(qdq, shapes)
    expect(plan.partition.offloaded.map((l) => l.kind)).toEqual(["conv", "add"])
    expect(plan.partition.segments.map((s) => s.device)).toEqual(["c", "vta", "c"])
    const feeds = new Map([["x", randomTensor("float32", [1, 3, 8, 8], 99)]])
    const got = (await Effect.runPromise(loadVta(plan))).run(feeds).outputs.get("y")!
    const want = (await Effect.runPromise(runOnC(plan, feeds))).get("y")!
    expect(Array.from(got.data as Float32Array)).toEqual(Array.from(want.data as Float32Array))
    const int8 = runGraph(bindSync(integer, shapes), feeds)[0].data as Float32Array
    const span = Math.max(...int8) - Math.min(...int8)
    const worst = Math.max(...Array.from(int8, (v, i) => Math.abs(v - (got.data as Float32Array)[i])))
    expect(worst).toBeLessThan(0.05 * span) // 0.8% of the span here
  }, 120_000)

  it("weight scales per block or per channel: each group's own power of two, a shift per channel; 'tensor' is the default's bytes; VTA keeps such a conv on c, saying why", () => {
    expect(encodeOnnx(vtaRequantizeWithReport(integer, { weightScales: "tensor" }).graph)).toEqual(encodeOnnx(vtaRequantizeWithReport(integer).graph))
    // the region's conv with its first 4 output channels' weights 8× and 64× smaller than the rest (their w_scale)
    const { start } = offloadRegion(integer)
    const qconv = integer.nodes.slice(start).find((n) => n.op === "QLinearConv")!
    const ws = integer.initializers.get(qconv.inputs[4])!
    const small = Float32Array.from(ws.data as Float32Array, (v, o) => (o < 2 ? v / 8 : o < 4 ? v / 64 : v))
    const uneven = { ...integer, initializers: new Map([...integer.initializers, [qconv.inputs[4], { ...ws, data: small }]]) }
    const tensor = vtaRequantizeWithReport(uneven, { weightScales: "tensor" }).graph
    const channel = vtaRequantizeWithReport(uneven, { weightScales: "channel" }).graph
    const block = vtaRequantizeWithReport(uneven, { weightScales: "block", block: 4 }).graph
    const shiftsOf = (g: typeof channel) => g.nodes.filter((m) => m.op === "Mul" && m.name.endsWith("_vta_scale")).map((n) => Array.from(g.initializers.get(n.inputs[1])!.data as Float64Array))
    // the convs' weights differ per channel, so per channel the shifts do too; per block of 4 they are equal within each block
    const perChannel = shiftsOf(channel)
    expect(perChannel.some((v) => new Set(v).size > 1)).toBe(true)
    for (const v of [...perChannel, ...shiftsOf(block)]) for (const f of v) expect(Number.isInteger(Math.log2(f))).toBe(true)
    for (const v of shiftsOf(block)) for (let o = 0; o < v.length; o++) expect(v[o]).toBe(v[o - (o % 4)])
    // each channel's weights use its int8 range better: at least one reaches past half of it where per tensor none does
    const weightsOf = (g: typeof channel) => g.nodes.filter((m) => m.op === "ConvInteger" && m.name.endsWith("_vta_conv")).map((n) => g.initializers.get(n.inputs[1])!)
    const w1 = weightsOf(channel)[0]
    const per = w1.data.length / w1.shape[0]
    const fill = (w: typeof w1) => Array.from({ length: w.shape[0] }, (_, o) => Math.max(...Array.from(w.data as Int8Array).slice(o * per, (o + 1) * per).map(Math.abs)))
    expect(Math.min(...fill(w1))).toBeGreaterThanOrEqual(64)
    expect(Math.min(...fill(weightsOf(tensor)[0]))).toBeLessThan(16)
    expect(Math.min(...fill(weightsOf(block)[0]).slice(0, 4))).toBeLessThan(16) // a block of 4 holds channels 8× apart
    // VTA's one SHR a tile: the partition keeps a per-channel shift on c with the reason (never a wrong answer)
    const shapes = new Map([["x", [1, 3, 8, 8]]])
    const p = partitionForVta(bindSync(channel, shapes))
    expect(partitionForVta(bindSync(tensor, shapes)).kept).toEqual([])
    expect(p.kept.filter((k) => k.op === "ConvInteger").map((k) => k.reason)).toEqual([expect.stringContaining("is not 2^-k")])
  })

  it("activation scales per value: each value's own power of two, an add of operands at other scales aligned by shifts, the numbers near the int8 graph's", () => {
    const shapes = new Map([["x", [1, 3, 8, 8]]])
    const { graph } = vtaRequantizeWithReport(integer, { activationScales: "value" })
    const scales = [...graph.initializers].filter(([k]) => k.endsWith("_vta_scale") && !k.includes("_vta_scale_")).map(([, t]) => Number(t.data[0]))
    expect(scales.length).toBeGreaterThan(1)
    for (const sc of scales) expect(Number.isInteger(Math.log2(sc * 128))).toBe(true)
    const feeds = new Map([["x", randomTensor("float32", [1, 3, 8, 8], 99)]])
    const run = (g: typeof graph) => runGraph(bindSync(g, shapes), feeds)[0].data as Float32Array
    // here the pooled input is finer (1/32) than the one global scale (1/16), the add aligns it to the conv's output
    expect(graph.nodes.filter((n) => n.name.endsWith("_align_b")).length).toBe(1)
    const int8 = run(integer)
    const span = Math.max(...int8) - Math.min(...int8)
    const got = run(graph)
    expect(Math.max(...Array.from(int8, (v, i) => Math.abs(v - got[i])))).toBeLessThan(0.05 * span)
  })

  it("shifts round half up by default (2^(k−1) folded into each conv's bias, TVM's round_for_shift); 'floor' is the SHR alone; both offloaded whole and run on vta exactly as on c", async () => {
    const biasOf = (g: ReturnType<typeof vtaRequantizeWithReport>["graph"]) => Array.from(g.initializers.get("conv2_qlinearconv_vta_bias")!.data as Int32Array)
    const floor = vtaRequantizeWithReport(integer, { rounding: "floor" }).graph
    const half = vtaRequantizeWithReport(integer).graph
    expect(encodeOnnx(vtaRequantizeWithReport(integer, { rounding: "half-up" }).graph)).toEqual(encodeOnnx(half))
    const k = -Math.log2(Number(floor.initializers.get("conv2_qlinearconv_vta_shift")!.data[0]))
    expect(k).toBeGreaterThanOrEqual(1)
    expect(biasOf(half)).toEqual(biasOf(floor).map((b) => b + 2 ** (k - 1)))
    const shapes = new Map([["x", [1, 3, 8, 8]]])
    const plan = planVta(qdq, shapes, { requantize: { rounding: "floor" } })
    expect(plan.partition.offloaded.map((l) => l.kind)).toEqual(["conv", "add"])
    const feeds = new Map([["x", randomTensor("float32", [1, 3, 8, 8], 99)]])
    const got = (await Effect.runPromise(loadVta(plan))).run(feeds).outputs.get("y")!
    const want = (await Effect.runPromise(runOnC(plan, feeds))).get("y")!
    expect(Array.from(got.data as Float32Array)).toEqual(Array.from(want.data as Float32Array))
    // the default's exactness: the test above
  }, 120_000)
})

