// Runs QOperator (or any quantized) ONNX models on Tessera's interpreter and compiled targets and
// on onnxruntime-node, on the same seeded N(0, 1) inputs, and reports per model and target the
// largest difference in output LSBs (the output DequantizeLinear's scale) and top-1 agreement.
// With --isolate, each node instead runs alone on the interpreter, fed onnxruntime's own values of
// its inputs, and the script reports per op kind how many values differ and by how much.
//   node dist/scripts/qop-compare.js MODEL.onnx… [--targets interp,c] [--inputs 4] [--isolate] [--json]
import { readFileSync } from "node:fs"
import { Effect } from "effect"
import * as ort from "onnxruntime-node"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { bindSync } from "../src/ast/graph/infer.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import type { Graph } from "../src/ast/graph/graph.js"
import { fromArray, type Tensor } from "../src/ast/graph/tensor.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { cpuAttrs, type TargetKind } from "../src/ast/target.js"
import { backendOf } from "../src/backend/index.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"

const args = process.argv.slice(2)
const flag = (name: string, d: string) => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : d
}
const VALUED = new Set(["--targets", "--inputs"])
const models = args.filter((a, i) => !a.startsWith("--") && !(i > 0 && VALUED.has(args[i - 1])))
const targets = flag("--targets", "interp,c").split(",") as (TargetKind | "interp")[]
const count = Number(flag("--inputs", "4"))

/** Seeded N(0, 1) floats (mulberry32 + Box–Muller). */
const normals = (seed: number, n: number): Float32Array => {
  let a = seed >>> 0
  const u = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296
  }
  const out = new Float32Array(n)
  for (let i = 0; i < n; i++) out[i] = Math.sqrt(-2 * Math.log(u())) * Math.cos(2 * Math.PI * u())
  return out
}

/** The scale of the DequantizeLinear producing the graph's output (1 where it is not one). */
const outputScale = (g: Graph): number => {
  const n = g.nodes.find((m) => m.outputs[0] === g.outputs[0].name)
  if (!n || n.op !== "DequantizeLinear") return 1
  return Number(g.initializers.get(n.inputs[1])?.data[0] ?? 1)
}

const argmax = (v: ArrayLike<number>): number => {
  let best = 0
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i
  return best
}

/** Every node alone, fed onnxruntime's values of its inputs (the graph with every value an output, optimizations off). */
const isolate = async (graph: Graph, feeds: readonly Map<string, Tensor>[]) => {
  const types = bindSync(graph).valueTypes
  const x = graph.inputs[0]
  const all = { ...graph, outputs: graph.nodes.filter((n) => types.has(n.outputs[0])).map((n) => ({ name: n.outputs[0], type: types.get(n.outputs[0])! })) }
  const session = await ort.InferenceSession.create(encodeOnnx(all), { intraOpNumThreads: 1, graphOptimizationLevel: "disabled" })
  const stats = new Map<string, { maxLsb: number; differing: number; values: number }>()
  for (const f of feeds) {
    const t = f.get(x.name)!
    const r = await session.run({ [x.name]: new ort.Tensor("float32", t.data as Float32Array, [...t.shape]) })
    const value = (v: string): Tensor => (v === x.name ? t : { dtype: types.get(v)!.dtype, shape: r[v].dims.map(Number), data: r[v].data as Tensor["data"] })
    for (const n of graph.nodes) {
      const ins = n.inputs.filter((i) => i !== "" && !graph.initializers.has(i))
      const one: Graph = { ...graph, inputs: ins.map((i) => ({ name: i, type: { dtype: value(i).dtype, shape: value(i).shape } })), outputs: [{ name: n.outputs[0], type: types.get(n.outputs[0])! }], nodes: [n] }
      const [got] = runGraph(one, new Map(ins.map((i) => [i, value(i)])))
      const want = r[n.outputs[0]].data as ArrayLike<number>
      const key = n.domain ? `${n.domain}.${n.op}` : n.op
      const st = stats.get(key) ?? { maxLsb: 0, differing: 0, values: 0 }
      for (let i = 0; i < want.length; i++) {
        const d = Math.abs(Number(want[i]) - Number(got.data[i]))
        if (d > 0) st.differing++
        st.maxLsb = Math.max(st.maxLsb, d)
        st.values++
      }
      stats.set(key, st)
    }
  }
  await session.release()
  return [...stats].map(([op, s]) => ({ op, ...s }))
}

const main = async () => {
  const rows: unknown[] = []
  for (const path of models) {
    const bytes = readFileSync(path)
    const graph = decodeModelSync(bytes)
    const input = graph.inputs[0]
    const shape = input.type.shape.map((d) => (typeof d === "number" ? d : 1))
    const scale = outputScale(graph)
    const session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1, interOpNumThreads: 1 })
    const feedsList: Map<string, Tensor>[] = []
    const wants: Float32Array[] = []
    for (let k = 0; k < count; k++) {
      const data = normals(1000 + k, shape.reduce((a, b) => a * b, 1))
      feedsList.push(new Map([[input.name, fromArray("float32", shape, data)]]))
      const out = await session.run({ [input.name]: new ort.Tensor("float32", data, shape) })
      wants.push(out[graph.outputs[0].name].data as Float32Array)
    }
    await session.release()
    if (args.includes("--isolate")) {
      const row = { model: path.split("/").pop(), isolated: await isolate(graph, feedsList) }
      rows.push(row)
      if (!args.includes("--json")) console.log(JSON.stringify(row))
      continue
    }
    for (const kind of targets) {
      let run: (f: Map<string, Tensor>) => ArrayLike<number>
      let close = () => {}
      let fallback = 0
      if (kind === "interp") run = (f) => runGraph(graph, f)[0].data as ArrayLike<number>
      else {
        const backend = backendOf(kind)
        if (backend.unavailable() !== undefined) continue
        const target = backend.target(cpuAttrs(), 1)
        const program = await Effect.runPromise(compileGraph(graph, target))
        fallback = program.kernels.filter((k) => k.kind !== "compiled").length
        const exec = await Effect.runPromise(loadProgram(program, target))
        run = (f) => exec.run(f).get(graph.outputs[0].name)!.data as ArrayLike<number>
        close = () => exec.module.close()
      }
      let maxLsb = 0
      let top1 = 0
      for (let k = 0; k < count; k++) {
        const got = run(feedsList[k])
        const want = wants[k]
        for (let i = 0; i < want.length; i++) maxLsb = Math.max(maxLsb, Math.round(Math.abs(got[i] - want[i]) / scale))
        if (argmax(got) === argmax(want)) top1++
      }
      close()
      const row = { model: path.split("/").pop(), target: kind, inputs: count, maxLsb, top1: `${top1}/${count}`, fallbackKernels: fallback }
      rows.push(row)
      if (!args.includes("--json")) console.log(JSON.stringify(row))
    }
  }
  if (args.includes("--json")) console.log(JSON.stringify(rows, null, 2))
}

await main()
