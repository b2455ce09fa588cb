// rewrite.QdqToInteger: Before / Expected graphs (what each pattern becomes, and the patterns that
// must stay, with the report's reason), the pass's place in the default pipeline (on from opt level
// 2), and hand-built QDQ models against onnxruntime-node on the original file: the rewritten model
// on the evaluator and compiled for `c` (where gcc is), in LSBs of the output.
import { Effect } from "effect"
import * as ort from "onnxruntime-node"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node, type Graph, type Node } from "../src/ast/graph/graph.js"
import { bindSync } from "../src/ast/graph/infer.js"
import { fromArray, tensor, type Tensor } from "../src/ast/graph/tensor.js"
import { makeTarget } from "../src/ast/target.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { defaultPasses, withPassConfig } from "../src/rewrite/index.js"
import { qdqToIntegerWithReport } from "../src/rewrite/qdq-to-integer.js"
import { CONTRIB_KINDS, INTEGER_KINDS, MOVE_KINDS, qdqCase } from "../laws/rewrite/qdq-cases.js"
import { HAVE_GCC, mergeGraphs, NO_GCC } from "../laws/support-c.js"

const f32 = (v: number) => fromArray("float32", [], [v])

/** x → Q → DQ → Conv(DQ(w), DQ(b)) [→ act] → Q(sy, zy of `out`), the output the 8-bit tensor. */
const convCase = (o: { out: "int8" | "uint8"; zy: number; act?: "Relu"; biasScale?: number; extraReader?: boolean; yScaleInput?: boolean }): Graph => {
  const sx = 0.02
  const sw = [0.01, 0.02]
  const inits = new Map<string, Tensor>([
    ["sx", f32(sx)], ["zx", fromArray("int8", [], [3])],
    ["w", fromArray("int8", [2, 2, 1, 1], [10, -20, 30, 40])], ["sw", fromArray("float32", [2], sw)], ["zw", fromArray("int8", [2], [0, 0])],
    ["b", fromArray("int32", [2], [100, -50])], ["sb", fromArray("float32", [2], sw.map((s) => Math.fround((o.biasScale ?? 1) * Math.fround(sx * s))))],
    ["zy", fromArray(o.out, [], [o.zy])],
    ...(o.yScaleInput ? [] : ([["sy", f32(0.05)]] as const)),
  ])
  const nodes: Node[] = [
    node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
    node("DequantizeLinear", ["xq", "sx", "zx"], ["xf"]),
    node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], { axis: attr.int(0) }),
    node("DequantizeLinear", ["b", "sb"], ["bf"], { axis: attr.int(0) }),
    node("Conv", ["xf", "wf", "bf"], ["c"], { kernel_shape: attr.ints([1, 1]) }),
    ...(o.act ? [node(o.act, ["c"], ["a"])] : []),
    node("QuantizeLinear", [o.act ? "a" : "c", "sy", "zy"], ["y"]),
  ]
  const outputs = [{ name: "y", type: { dtype: o.out, shape: [1, 2, 2, 2] } }]
  if (o.extraReader) {
    nodes.push(node("Sigmoid", ["c"], ["side"]))
    outputs.push({ name: "side", type: { dtype: "float32" as never, shape: [1, 2, 2, 2] } })
  }
  const inputs = [{ name: "x", type: { dtype: "float32" as const, shape: [1, 2, 2, 2] } }, ...(o.yScaleInput ? [{ name: "sy", type: { dtype: "float32" as const, shape: [] } }] : [])]
  return bindSync(makeGraph({ opset: 17, inputs, outputs, initializers: inits, nodes }))
}

const ops = (g: Graph) => g.nodes.map((n) => n.op)
const xIn = new Map([["x", tensor("float32", [1, 2, 2, 2], Float32Array.from([0.5, -1, 2, 0.3, -0.7, 1.1, 0, 2.4]))]])

describe("rewrite.QdqToInteger: Before / Expected", () => {
  it("Conv with an int32 bias and per-channel weights → QLinearConv (B the int32 bias); a uint8 zp-0 Relu vanishes", () => {
    const g = convCase({ out: "uint8", zy: 0, act: "Relu" })
    const { graph, report } = qdqToIntegerWithReport(g)
    expect(ops(graph)).toEqual(["QuantizeLinear", "QLinearConv"])
    const qc = graph.nodes[1]
    expect(qc.inputs[3]).toBe("w")
    expect(qc.inputs[8]).toBe("b")
    expect(graph.initializers.get(qc.inputs[4])?.shape).toEqual([2])
    expect(report.find((d) => d.node === "c")).toMatchObject({ outcome: "integer", detail: expect.stringContaining("(Relu a folded)") as unknown })
    expect(runGraph(graph, xIn)[0].data).toEqual(runGraph(g, xIn)[0].data)
  })

  it("a Relu before an int8 Q with zero point -5 → Clip(-5, 127) on the int8 output", () => {
    const g = convCase({ out: "int8", zy: -5, act: "Relu" })
    const { graph } = qdqToIntegerWithReport(g)
    expect(ops(graph)).toEqual(["QuantizeLinear", "QLinearConv", "Clip"])
    const clip = graph.nodes[2]
    expect([graph.initializers.get(clip.inputs[1])?.data[0], graph.initializers.get(clip.inputs[2])?.data[0]]).toEqual([-5, 127])
    expect(runGraph(graph, xIn)[0].data).toEqual(runGraph(g, xIn)[0].data)
  })

  it("stays, with the reason: a bias scale 1% off x_scale·w_scale; a second reader of the Conv; a y_scale not constant", () => {
    const cases: [Graph, string][] = [
      [convCase({ out: "int8", zy: 0, biasScale: 1.01 }), "is not x_scale·w_scale"],
      [convCase({ out: "int8", zy: 0, extraReader: true }), "has readers besides"],
      [convCase({ out: "int8", zy: 0, yScaleInput: true }), "its scale is not a constant"],
    ]
    for (const [g, why] of cases) {
      const { graph, report } = qdqToIntegerWithReport(g)
      expect(ops(graph)).toContain("Conv")
      expect(ops(graph)).not.toContain("QLinearConv")
      const d = report.find((r) => r.node === "c")
      expect(d?.outcome).toBe("kept")
      expect(d?.detail).toContain(why)
    }
  })

  it("Gemm (transB) with a bias → Transpose · MatMulInteger → Add → QuantizeLinear per column; without → QLinearMatMul", () => {
    const mk = (bias: boolean) =>
      bindSync(makeGraph({
        opset: 17,
        inputs: [{ name: "x", type: { dtype: "float32", shape: [2, 3] } }],
        outputs: [{ name: "y", type: { dtype: "uint8", shape: [2, 2] } }],
        initializers: new Map<string, Tensor>([
          ["sa", f32(0.03)], ["za", fromArray("uint8", [], [128])],
          ["w", fromArray("int8", [2, 3], [1, -2, 3, 4, 5, -6])], ["sw", fromArray("float32", [2], [0.1, 0.2])], ["zw", fromArray("int8", [2], [0, 0])],
          ["b", fromArray("int32", [2], [7, -9])], ["sb", fromArray("float32", [2], [Math.fround(0.03 * Math.fround(0.1)), Math.fround(0.03 * Math.fround(0.2))])],
          ["sy", f32(0.01)], ["zy", fromArray("uint8", [], [100])],
        ]),
        nodes: [
          node("QuantizeLinear", ["x", "sa", "za"], ["xq"]),
          node("DequantizeLinear", ["xq", "sa", "za"], ["xf"]),
          node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], { axis: attr.int(0) }),
          ...(bias ? [node("DequantizeLinear", ["b", "sb"], ["bf"], { axis: attr.int(0) })] : []),
          node("Gemm", ["xf", "wf", ...(bias ? ["bf"] : [])], ["g"], { transB: attr.int(1) }),
          node("QuantizeLinear", ["g", "sy", "zy"], ["y"]),
        ],
      }))
    const x = new Map([["x", tensor("float32", [2, 3], Float32Array.from([0.2, -1, 1.5, 0.7, 0.1, -2]))]])
    for (const bias of [true, false]) {
      const g = mk(bias)
      const { graph } = qdqToIntegerWithReport(g)
      expect(ops(graph)).toEqual(bias ? ["QuantizeLinear", "Transpose", "MatMulInteger", "Add", "QuantizeLinear"] : ["QuantizeLinear", "Transpose", "QLinearMatMul"])
      const a = runGraph(graph, x)[0].data
      const b = runGraph(g, x)[0].data
      for (let i = 0; i < a.length; i++) expect(Math.abs((a[i] as number) - (b[i] as number))).toBeLessThanOrEqual(1)
    }
  })

  it("folds the QuantizeLinear of a constant weight, then rewrites its Conv", () => {
    const g0 = convCase({ out: "int8", zy: 0 })
    const nodes = g0.nodes.map((n) => (n.outputs[0] === "wf" ? node("DequantizeLinear", ["wq", "sw", "zw"], ["wf"], { axis: attr.int(0) }) : n))
    const inits = new Map(g0.initializers)
    inits.set("wfloat", fromArray("float32", [2, 2, 1, 1], [0.1, -0.2, 0.6, 0.8]))
    inits.delete("w")
    const g = bindSync(makeGraph({ ...g0, initializers: inits, nodes: [node("QuantizeLinear", ["wfloat", "sw", "zw"], ["wq"], { axis: attr.int(0) }), ...nodes] }))
    const { graph, report } = qdqToIntegerWithReport(g)
    expect(ops(graph)).toEqual(["QuantizeLinear", "QLinearConv"])
    expect(graph.initializers.get(graph.nodes[1].inputs[3])?.data).toEqual(Int8Array.from([10, -20, 30, 40]))
    expect(report.some((d) => d.outcome === "folded")).toBe(true)
  })

  it("Add, Mul, AveragePool, GlobalAveragePool, Sigmoid, LeakyRelu → the com.microsoft QLinear op (one type throughout)", () => {
    const want: Record<string, string> = { add: "QLinearAdd", mul: "QLinearMul", averagepool: "QLinear(Global)?AveragePool", sigmoid: "QLinearSigmoid", leakyrelu: "QLinearLeakyRelu" }
    for (const kind of ["add", "mul", "averagepool", "sigmoid", "leakyrelu"] as const) {
      // the first seed whose layer is integer (the generator mixes types one time in five)
      const c = Array.from({ length: 20 }, (_, s) => qdqCase(100 + s, { kinds: [kind], minLayers: 1, maxLayers: 1 })).find((x) => x.contrib[0]?.integer)!
      const { graph, report } = qdqToIntegerWithReport(c.graph)
      expect(ops(graph).join(" "), kind).toMatch(new RegExp(`^QuantizeLinear ${want[kind]}$`))
      expect(graph.nodes[1].domain).toBe("com.microsoft")
      expect(report.find((d) => d.outcome === "integer")?.detail).toMatch(new RegExp(`^com\\.microsoft\\.${want[kind]}$`))
      if (kind === "leakyrelu") expect(graph.nodes[1].attrs.alpha).toEqual(c.graph.nodes.find((n) => n.op === "LeakyRelu")?.attrs.alpha)
      expect(lsb(runGraph(graph, c.inputs)[0], runGraph(c.graph, c.inputs)[0])).toBeLessThanOrEqual(1)
    }
  })

  it("a residual Add → Relu / Clip → Q: QLinearAdd, its clamp an 8-bit Clip (none where the range holds it); a computed bound stays, reported", () => {
    /** x → Q → DQ, twice (a, b) → Add → act → Q(0.05, zy) of `out`. */
    const addCase = (out: "int8" | "uint8", zy: number, act: "Relu" | "Clip" | "ClipComputed") => {
      const inits = new Map<string, Tensor>([
        ["sa", f32(0.02)], ["za", fromArray(out, [], [out === "int8" ? 3 : 130])],
        ["sb", f32(0.03)], ["zb", fromArray(out, [], [out === "int8" ? -7 : 120])],
        ["sy", f32(0.05)], ["zy", fromArray(out, [], [zy])],
        ["lo", f32(-0.2)], ["hi", f32(1.5)],
      ])
      const computed = act === "ClipComputed"
      const nodes: Node[] = [
        node("QuantizeLinear", ["x", "sa", "za"], ["aq"]), node("DequantizeLinear", ["aq", "sa", "za"], ["af"]),
        node("QuantizeLinear", ["x", "sb", "zb"], ["bq"]), node("DequantizeLinear", ["bq", "sb", "zb"], ["bf"]),
        node("Add", ["af", "bf"], ["s"], {}, "add"),
        act === "Relu" ? node("Relu", ["s"], ["r"], {}, "relu") : node("Clip", ["s", "lo", computed ? "top" : "hi"], ["r"], {}, "clip"),
        node("QuantizeLinear", ["r", "sy", "zy"], ["y"]),
      ]
      const inputs = [{ name: "x", type: { dtype: "float32" as const, shape: [1, 2, 2, 2] } }, ...(computed ? [{ name: "top", type: { dtype: "float32" as const, shape: [] } }] : [])]
      return bindSync(makeGraph({ opset: 17, inputs, outputs: [{ name: "y", type: { dtype: out, shape: [1, 2, 2, 2] } }], initializers: inits, nodes }))
    }
    // int8, zero point -5: q(0) = -5, so the Relu is Clip(-5, 127) on the 8-bit output
    const relu = qdqToIntegerWithReport(addCase("int8", -5, "Relu"))
    expect(ops(relu.graph)).toEqual(["QuantizeLinear", "QuantizeLinear", "QLinearAdd", "Clip"])
    const clip = relu.graph.nodes[3]
    expect([relu.graph.initializers.get(clip.inputs[1])!.data[0], relu.graph.initializers.get(clip.inputs[2])!.data[0]]).toEqual([-5, 127])
    expect(relu.report.find((d) => d.node === "add")?.detail).toBe("com.microsoft.QLinearAdd → Clip (Relu relu folded)")
    expect(lsb(runGraph(relu.graph, xIn)[0], runGraph(addCase("int8", -5, "Relu"), xIn)[0])).toBeLessThanOrEqual(1)
    // uint8 with zero point 0: q(0) is the type's bottom, so nothing is left of the Relu
    expect(ops(qdqToIntegerWithReport(addCase("uint8", 0, "Relu")).graph)).toEqual(["QuantizeLinear", "QuantizeLinear", "QLinearAdd"])
    // Clip(-0.2, 1.5) under scale 0.05, zero point 10: Clip(6, 40)
    const c = qdqToIntegerWithReport(addCase("int8", 10, "Clip"))
    const k = c.graph.nodes.find((n) => n.op === "Clip")!
    expect([c.graph.initializers.get(k.inputs[1])!.data[0], c.graph.initializers.get(k.inputs[2])!.data[0]]).toEqual([6, 40])
    // a computed bound: no clamp the output range can take; the Add stays float, and the report says why
    const kept = qdqToIntegerWithReport(addCase("int8", 10, "ClipComputed"))
    expect(ops(kept.graph)).toContain("Add")
    expect(kept.report.find((d) => d.node === "add")).toMatchObject({ outcome: "kept", detail: expect.stringMatching(/Clip clip's bounds are not constants, so Clip clip cannot be folded into com\.microsoft\.QLinearAdd's output range/) })
  })

  it("a contrib-op pattern with mixed 8-bit types, a per-axis or non-constant parameter stays DQ → op → Q, and the report says why", () => {
    const mixed = Array.from({ length: 40 }, (_, s) => qdqCase(200 + s, { kinds: ["add"], minLayers: 1, maxLayers: 1 })).find((x) => x.contrib[0] && !x.contrib[0].integer)!
    const r = qdqToIntegerWithReport(mixed.graph)
    expect(ops(r.graph)).toContain("Add")
    expect(r.report.find((d) => d.op === "Add")?.detail).toMatch(/com\.microsoft\.QLinearAdd takes one type/)
    // a float operand that is no DequantizeLinear
    const g0 = qdqCase(300, { kinds: ["sigmoid"], minLayers: 1, maxLayers: 1 }).graph
    const sig = g0.nodes.find((n) => n.op === "Sigmoid")!
    const inits = new Map(g0.initializers)
    inits.set("one", f32(1))
    // DQ(x) · 1 (a float constant) → Q in place of the Sigmoid
    const nodes = g0.nodes.map((n) => (n === sig ? node("Mul", [sig.inputs[0], "one"], sig.outputs) : n))
    const g = bindSync(makeGraph({ ...g0, initializers: inits, nodes }))
    const { graph, report } = qdqToIntegerWithReport(g)
    expect(ops(graph)).toContain("Mul")
    expect(report.find((d) => d.op === "Mul")?.detail).toContain("input 1 is not the output of a DequantizeLinear")
  })

  it("runs in the default passes from opt level 2 (onnxruntime's QDQ transformer is its level 2), not at 1", () => {
    const g = convCase({ out: "int8", zy: 0 })
    const at = (optLevel: number) => Effect.runSync(defaultPasses.run(g).pipe(withPassConfig({ optLevel })))
    expect(ops(at(2))).toContain("QLinearConv")
    expect(ops(at(1))).not.toContain("QLinearConv")
    expect(ops(at(1))).toContain("Conv")
  })
})

// ---------------------------------------------------------------------------------------------
// Against onnxruntime-node on the QDQ file

const runOrt = async (g: Graph, feeds: ReadonlyMap<string, Tensor>): Promise<Tensor> => {
  const session = await ort.InferenceSession.create(encodeOnnx(g))
  const x = feeds.get("x")!
  const res = await session.run({ x: new ort.Tensor("float32", x.data as Float32Array, [...x.shape]) })
  const out = res[g.outputs[0].name]
  await session.release()
  return fromArray(g.outputs[0].type.dtype, out.dims as number[], Array.from(out.data as ArrayLike<number>))
}

const lsb = (a: Tensor, b: Tensor) => {
  expect(a.data.length).toBe(b.data.length)
  let d = 0
  for (let i = 0; i < a.data.length; i++) d = Math.max(d, Math.abs((a.data[i] as number) - (b.data[i] as number)))
  return d
}

const CASES = Array.from({ length: 16 }, (_, k) => qdqCase(7000 + k, { kinds: [...INTEGER_KINDS, ...MOVE_KINDS, ...CONTRIB_KINDS], minLayers: 2, maxLayers: 5 }))

describe("rewrite.QdqToInteger against onnxruntime-node", () => {
  it("the rewritten models on the evaluator are within the law's bound of onnxruntime on the QDQ files", async () => {
    const diffs: number[] = []
    for (const c of CASES) {
      const want = await runOrt(c.graph, c.inputs)
      const got = runGraph(qdqToIntegerWithReport(c.graph).graph, c.inputs)[0]
      const d = lsb(got, want)
      diffs.push(d)
      if (process.env.QDQ_DIFFS) console.log(c.graph.name, c.layers.join(","), "bound", c.bound, "ort-vs-ours", d)
      expect(d, `${c.graph.name}: ${c.layers.join(", ")}`).toBeLessThanOrEqual(c.bound)
    }
    // (measured at the commit: at most 1 LSB, in most cases 0)
    expect(Math.max(...diffs)).toBeLessThanOrEqual(1)
  }, 120_000)

  it(`compiled for c (the pass in the default pipeline), within the bound of onnxruntime${NO_GCC}`, async () => {
    if (!HAVE_GCC) return
    const merged = mergeGraphs(CASES)
    const target = makeTarget("c")
    const program = await Effect.runPromise(compileGraph(merged.graph, target, { optLevel: 3 }))
    expect(program.graph.nodes.some((n) => n.op === "QLinearConv")).toBe(true)
    const exec = await Effect.runPromise(loadProgram(program, target))
    const outs = exec.run(merged.inputs)
    for (const [k, c] of CASES.entries()) {
      const want = await runOrt(c.graph, c.inputs)
      const got = outs.get(merged.graph.outputs[k].name)!
      expect(lsb(got, want), `${c.graph.name}: ${c.layers.join(", ")}`).toBeLessThanOrEqual(c.bound)
    }
    exec.module.close()
  }, 300_000)
})
