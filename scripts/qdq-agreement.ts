// A QDQ model (onnxruntime's quantize_static output, or any QDQ file) through rewrite.QdqToInteger:
// what became integer and what stayed float (the pass's report), and the agreement of Tessera's
// rewritten model with onnxruntime-node on the original file — the largest difference in LSBs of
// the output's quantization (the scale of the DequantizeLinear producing it) and top-1 agreement
// over seeded N(0, 1) inputs.
//
// With --reference, also the ONNX meaning (the evaluator on the QDQ file, before the pass): how far
// Tessera and onnxruntime each are from it.
//
//   node dist/scripts/qdq-agreement.js MODEL.onnx... [--inputs 20] [--target interp|c] [--report] [--reference]
import { Effect } from "effect"
import * as fs from "node:fs"
import * as ort from "onnxruntime-node"
import { runGraph } from "../src/ast/graph/evaluate.js"
import type { Graph } from "../src/ast/graph/graph.js"
import { tensor, type Tensor } from "../src/ast/graph/tensor.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { BACKENDS } from "../src/backend/index.js"
import { hostCpu } from "../src/device/host.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { qdqReportText, qdqToIntegerWithReport } from "../src/rewrite/qdq-to-integer.js"
import { rng } from "../src/zoo/random.js"

const arg = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : d
}
const INPUTS = Number(arg("inputs", "20"))
const TARGET = arg("target", "interp")
const REFERENCE = process.argv.includes("--reference")
const FLAGS = new Set(["--report", "--reference"])
const models = process.argv.slice(2).filter((a, i, all) => !a.startsWith("--") && (!all[i - 1]?.startsWith("--") || FLAGS.has(all[i - 1])))

const seeded = (shape: readonly number[], seed: number): Tensor => {
  const r = rng(seed)
  const n = shape.reduce((a, b) => a * b, 1)
  return tensor("float32", shape, Float32Array.from({ length: n }, () => r.normal()))
}

const argmax = (d: ArrayLike<number>, from: number, n: number) => {
  let best = from
  for (let i = from; i < from + n; i++) if (d[i] > d[best]) best = i
  return best - from
}

/** The output's quantization step: the scale of the DequantizeLinear that produces it (else 1). */
const outputStep = (g: Graph): number => {
  const dq = g.nodes.find((n) => n.outputs[0] === g.outputs[0].name && n.op === "DequantizeLinear")
  return dq ? (g.initializers.get(dq.inputs[1])?.data[0] as number) ?? 1 : 1
}

for (const file of models) {
  const bytes = fs.readFileSync(file)
  const graph = decodeModelSync(bytes)
  const { graph: rewritten, report } = qdqToIntegerWithReport(graph)
  const count = (g: Graph) => {
    const m = new Map<string, number>()
    for (const n of g.nodes) m.set(n.op, (m.get(n.op) ?? 0) + 1)
    return [...m].map(([k, v]) => `${k} ${v}`).join(", ")
  }
  console.log(`${file}\n  before: ${count(graph)}\n  after:  ${count(rewritten)}`)
  const outcomes = new Map<string, number>()
  for (const d of report) outcomes.set(`${d.outcome} ${d.op}`, (outcomes.get(`${d.outcome} ${d.op}`) ?? 0) + 1)
  console.log(`  report: ${[...outcomes].map(([k, v]) => `${k} ×${v}`).join(", ")}`)
  if (process.argv.includes("--report")) console.log(qdqReportText(report).replace(/^/gm, "    "))
  const input = graph.inputs[0]
  const shape = input.type.shape.map((d) => (typeof d === "number" ? d : 1))
  const session = await ort.InferenceSession.create(bytes)
  let runOurs: (x: Tensor) => Tensor
  if (TARGET === "c") {
    const target = BACKENDS.c.target(hostCpu(), 1)
    const program = await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 }))
    const exec = await Effect.runPromise(loadProgram(program, target, { threads: 1 }))
    const integer = program.graph.nodes.filter((n) => n.op === "QLinearConv" || n.op === "MatMulInteger" || n.op === "QLinearMatMul").length
    console.log(`  c program: ${integer} integer ops after the default passes`)
    runOurs = (x) => exec.run(new Map([[input.name, x]])).get(graph.outputs[0].name)!
  } else runOurs = (x) => runGraph(rewritten, new Map([[input.name, x]]))[0]
  const step = outputStep(graph)
  let maxLsb = 0
  let agree = 0
  let total = 0
  const vsRef = { ours: 0, ort: 0, oursTop1: 0, ortTop1: 0 }
  for (let s = 0; s < INPUTS; s++) {
    const x = seeded(shape, 1000 + s)
    const res = await session.run({ [input.name]: new ort.Tensor("float32", x.data as Float32Array, shape) })
    const want = res[graph.outputs[0].name].data as Float32Array
    const got = runOurs(x).data as Float32Array
    for (let i = 0; i < want.length; i++) maxLsb = Math.max(maxLsb, Math.abs(got[i] - want[i]) / step)
    const classes = want.length / shape[0]
    const ref = REFERENCE ? (runGraph(graph, new Map([[input.name, x]]))[0].data as Float32Array) : undefined
    for (let i = 0; ref && i < want.length; i++) {
      vsRef.ours = Math.max(vsRef.ours, Math.abs(got[i] - ref[i]) / step)
      vsRef.ort = Math.max(vsRef.ort, Math.abs(want[i] - ref[i]) / step)
    }
    for (let b = 0; b < shape[0]; b++) {
      total++
      if (argmax(got, b * classes, classes) === argmax(want, b * classes, classes)) agree++
      if (ref && argmax(got, b * classes, classes) === argmax(ref, b * classes, classes)) vsRef.oursTop1++
      if (ref && argmax(want, b * classes, classes) === argmax(ref, b * classes, classes)) vsRef.ortTop1++
    }
  }
  if (REFERENCE)
    console.log(`  vs the ONNX meaning (the evaluator on the QDQ file): Tessera max ${vsRef.ours.toFixed(2)} LSB, top-1 ${vsRef.oursTop1}/${total}; onnxruntime max ${vsRef.ort.toFixed(2)} LSB, top-1 ${vsRef.ortTop1}/${total}`)
  await session.release()
  console.log(`  vs onnxruntime-node ${ort.env.versions.common} on the QDQ file, ${TARGET}, ${INPUTS} seeded inputs: max ${maxLsb.toFixed(2)} LSB (step ${step}), top-1 ${agree}/${total}`)
}
