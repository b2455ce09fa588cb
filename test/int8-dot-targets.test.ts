// The 8-bit dot chosen by the c target's record (src/backend/cpu.ts's int8DotOf): VNNI's vpdpbusd
// where the record has VNNI (both lane forms: channels, and the 1×1 convs' pixels), else AVX2's
// vpmaddubsw / vpmaddwd (exact: the activation byte split 7 + 1 bits against vpmaddubsw's s16
// saturation) where its ISA has AVX2, else the loops the C compiler takes. This machine runs all
// three, so the record is forced: the integer products (ConvInteger, MatMulInteger: int32 outputs
// the reference evaluator computes exactly) equal the reference, and the requantized ones
// (QLinearConv, QLinearMatMul) are the same bytes under every record — on random values and on the
// extremes where a plain vpmaddubsw saturates (255 · 127 twice).
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { prng } from "../src/ast/graph/arbitrary-builder.js"
import { makeGraph, node, type Graph } from "../src/ast/graph/graph.js"
import { tensor, type Tensor } from "../src/ast/graph/tensor.js"
import { makeTarget, type CpuAttrs } from "../src/ast/target.js"
import { BACKENDS } from "../src/backend/index.js"
import { artifactText } from "../src/lowering/program.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { evalGraph } from "../laws/support.js"
import { HAVE_GCC, mergeGraphs, NO_GCC } from "../laws/support-c.js"

const bytes = (dtype: "int8" | "uint8", shape: number[], f: (k: number) => number): Tensor => {
  const n = shape.reduce((a, b) => a * b, 1)
  const data = Array.from({ length: n }, (_, k) => f(k))
  return tensor(dtype, shape, dtype === "int8" ? Int8Array.from(data) : Uint8Array.from(data))
}
const f32 = (shape: number[], v: number[]): Tensor => tensor("float32", shape, Float32Array.from(v.map(Math.fround)))

/** Convs (3×3 padded, 1×1 over 64 pixels: the pixels-in-lanes form under VNNI), products; int8 and uint8; `extreme`: x at its top (u8 255) and w at 127. */
const graphOf = (seed: number, extreme: boolean): { graph: Graph; inputs: Map<string, Tensor> } => {
  const rng = prng(seed)
  const C = 20
  const init = new Map<string, Tensor>()
  const w8 = (name: string, shape: number[], dt: "int8" | "uint8" = "int8") =>
    init.set(name, bytes(dt, shape, () => (extreme ? (dt === "int8" ? 127 : 255) : dt === "int8" ? rng.int(-128, 127) : rng.int(0, 255))))
  w8("w3", [24, C, 3, 3])
  w8("w1", [40, C, 1, 1])
  w8("w1u", [17, C, 1, 1], "uint8")
  w8("b", [C, 33])
  init.set("wzp128", bytes("uint8", [], () => 128))
  init.set("xzp", bytes("int8", [], () => (extreme ? -128 : rng.int(-20, 20))))
  init.set("xs", f32([], [0.02]))
  init.set("ys", f32([], [extreme ? 40 : 0.4]))
  init.set("yzp", bytes("int8", [], () => 3))
  for (const [name, m] of [["ws3", 24], ["ws1", 40], ["ws1u", 17]] as const) init.set(name, f32([m], Array.from({ length: m }, () => rng.float(0.002, 0.02))))
  const pad1 = { pads: attr.ints([1, 1, 1, 1]) }
  const nodes = [
    node("ConvInteger", ["x", "w3", "xzp"], ["c3"], pad1),
    node("ConvInteger", ["x", "w1", "xzp"], ["c1"]),
    node("QLinearConv", ["x", "xs", "xzp", "w3", "ws3", "", "ys", "yzp"], ["q3"], pad1),
    node("QLinearConv", ["x", "xs", "xzp", "w1", "ws1", "", "ys", "yzp"], ["q1"]),
    node("QLinearConv", ["x", "xs", "xzp", "w1u", "ws1u", "wzp128", "ys", "yzp"], ["q1u"]),
    node("MatMulInteger", ["a", "b"], ["m"]),
  ]
  const graph = makeGraph({
    opset: 13,
    inputs: [
      { name: "x", type: { dtype: "int8", shape: [1, C, 8, 8] } },
      { name: "a", type: { dtype: "uint8", shape: [5, C] } },
    ],
    outputs: ["c3", "c1", "q3", "q1", "q1u", "m"].map((name) => ({ name, type: { dtype: name.startsWith("q") ? ("int8" as const) : ("int32" as const), shape: [] } })),
    initializers: init,
    nodes,
  })
  const inputs = new Map([
    ["x", bytes("int8", [1, C, 8, 8], () => (extreme ? 127 : rng.int(-128, 127)))],
    ["a", bytes("uint8", [5, C], () => (extreme ? 255 : rng.int(0, 255)))],
  ])
  return { graph, inputs }
}

const RECORDS: Record<string, { attrs: Partial<CpuAttrs>; dot?: string }> = {
  vnni: { attrs: { isa: "avx512", vectorLanes: 16, vnni: true }, dot: "tessera_vnni_dot_16x4" },
  // (an AVX2 record: the AVX2 dot; an AVX-512 one without VNNI, Skylake-X, takes it too: src/backend/cpu.ts)
  avx2: { attrs: { isa: "avx2", vectorLanes: 8, vnni: false }, dot: "tessera_avx2_dot_16x4" },
  sse: { attrs: { isa: "sse", vectorLanes: 4, vnni: false } },
}

describe("the int8 dot chosen by the c target's record", () => {
  it.skipIf(!HAVE_GCC)(`VNNI, AVX2 and loops give the reference's integer sums and the same requantized bytes, bit for bit${NO_GCC}`, async () => {
    // (the random values and the extremes as two components of one graph: one gcc run a record)
    const { graph, inputs } = mergeGraphs([graphOf(1, false), graphOf(2, true)])
    const want = evalGraph(graph, inputs)
    const integer = graph.outputs.flatMap((o, k) => (/_(c3|c1|m)$/.test(o.name) ? [k] : []))
    expect(integer.length).toBe(6)
    const outs: Record<string, number[][]> = {}
    for (const [name, r] of Object.entries(RECORDS)) {
      const target = makeTarget("c", { fmaUnits: 2, fmaLatency: 4, ...r.attrs })
      const program = await Effect.runPromise(compileGraph(graph, target))
      const artifact = BACKENDS.c.codegen!.emit(program, target, {})
      const source = [...artifact.files.keys()].map((f) => artifactText(artifact, f) ?? "").join("\n")
      for (const d of ["tessera_vnni_dot_16x4", "tessera_avx2_dot_16x4"]) expect(source.includes(`${d}(`), `${name}: ${d}`).toBe(d === r.dot)
      // (the 1×1 convs over 64 pixels: the pixels in the lanes where the record has VNNI)
      expect(source.includes("tessera_vnni_dot_px_16x4("), name).toBe(name === "vnni")
      const exec = await Effect.runPromise(loadProgram(program, target))
      const got = exec.run(inputs)
      outs[name] = graph.outputs.map((o) => Array.from(got.get(o.name)!.data as ArrayLike<number>))
      exec.module.close()
      // the integer products: the reference's sums exactly
      for (const k of integer) expect(outs[name][k], `${name}: ${graph.outputs[k].name}`).toEqual(Array.from(want[k].data as ArrayLike<number>))
    }
    for (const name of Object.keys(RECORDS)) expect(outs[name], name).toEqual(outs.vnni)
  }, 300_000)
})
