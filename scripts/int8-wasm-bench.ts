// npm run int8-wasm-bench -- MODEL.onnx [--runs 11] — a model (an int8 one: QLinearConv / QDQ) on
// Tessera's wasm target against onnxruntime-web's wasm backend, both 1 thread in this Node process,
// on the same file and the same seeded input, runs alternating in blocks, medians and their ratio
// (wasm / onnxruntime-web: below 1 Tessera is faster) and the largest output difference. Speed is
// reported, never asserted.
import { readFileSync } from "node:fs"
import { Effect } from "effect"
import { allocate } from "../src/ast/graph/dtype.js"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { decodeOnnx } from "../src/ast/onnx/decode.js"
import { BACKENDS } from "../src/backend/index.js"
import { hostCpu } from "../src/device/host.js"
import { median, ortTensorParts } from "../src/device/onnxruntime.js"
import { loadOrtWeb } from "../src/device/onnxruntime-web.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"

const args = process.argv.slice(2)
const file = args.find((a) => a.endsWith(".onnx"))
if (!file) throw new Error("usage: int8-wasm-bench MODEL.onnx [--runs N]")
const RUNS = Number(args.includes("--runs") ? args[args.indexOf("--runs") + 1] : 11)
const BLOCK = 3

const bytes = new Uint8Array(readFileSync(file))
const graph = await Effect.runPromise(decodeOnnx(bytes))
const feeds = new Map<string, Tensor>(
  graph.inputs.map((inp) => {
    const shape = inp.type.shape.map((d) => (typeof d === "number" ? d : 1))
    const data = allocate("float32", shape.reduce((a, b) => a * b, 1))
    for (let i = 0; i < data.length; i++) data[i] = Math.sin(i * 0.37)
    return [inp.name, { dtype: "float32", shape, data }] as const
  }),
)
const target = BACKENDS.wasm.target(hostCpu(), 1)
const t0 = performance.now()
const program = await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 }))
const exec = await Effect.runPromise(loadProgram(program, target, { threads: 1 }))
const compileMs = performance.now() - t0
const ort = await Effect.runPromise(loadOrtWeb())
if (typeof ort === "string") throw new Error(ort)
const session = await ort.InferenceSession.create(bytes, { executionProviders: ["wasm"], graphOptimizationLevel: "all" })
const ortFeeds = Object.fromEntries([...feeds].map(([k, t]) => [k, new ort.Tensor("float32", ortTensorParts(t, "onnxruntime-web").data as Float32Array, t.shape)]))

// warm-up, and the outputs compared
const ours = exec.run(feeds)
const theirs = await session.run(ortFeeds)
let maxDiff = 0
for (const [name, t] of Object.entries(theirs)) {
  const mine = ours.get(name)
  if (!mine) throw new Error(`output ${name} is missing from Tessera's outputs`)
  const a = mine.data as ArrayLike<number>
  const b = t.data as ArrayLike<number>
  for (let i = 0; i < a.length; i++) maxDiff = Math.max(maxDiff, Math.abs(Number(a[i]) - Number(b[i])))
}
const mineMs: number[] = []
const theirsMs: number[] = []
while (mineMs.length < RUNS) {
  for (let i = 0; i < BLOCK; i++) {
    const s = performance.now()
    exec.run(feeds)
    mineMs.push(performance.now() - s)
  }
  for (let i = 0; i < BLOCK; i++) {
    const s = performance.now()
    await session.run(ortFeeds)
    theirsMs.push(performance.now() - s)
  }
}
await session.release()
const [m, o] = [median(mineMs), median(theirsMs)]
console.log(JSON.stringify({ model: file, target: "wasm", threads: 1, tessera_wasm_ms: +m.toFixed(2), onnxruntime_web_ms: +o.toFixed(2), ratio: +(m / o).toFixed(3), runs: mineMs.length, compile_ms: Math.round(compileMs), max_abs_diff: maxDiff }))
