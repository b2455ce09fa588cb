// node dist/scripts/wasm-ab.js --base /work/base-x/dist [--model mobilenetv2 | --file MODEL.onnx] [--rounds 9] [--runs 5]:
// an A/B of the wasm target on a machine shared with other jobs. This build's compile and another
// build's (its `dist` folder: a checkout of the baseline, built) each compile the zoo model (or an
// ONNX file: an int8 model of `tessera quantize`) for wasm
// at one thread in this Node process, beside onnxruntime-web (wasm, 1 thread) on the same seeded
// input; rounds alternate base, ours and onnxruntime-web, `--runs` runs each, timed by the process's
// CPU time (one thread: what the run itself used, not what other jobs took). Per round each side's
// median; printed: the medians over the rounds and each build's ratio to onnxruntime-web's median of
// the same round (< 1: faster). `--kernels`: each kernel's CPU time inside the sequence too, per
// build (medians over every run), printed beside each other. Speed is reported, never asserted.
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { allocate } from "../src/ast/graph/dtype.js"
import { prng } from "../src/ast/graph/arbitrary.js"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { median, ortTensorParts } from "../src/device/onnxruntime.js"
import { loadOrtWeb } from "../src/device/onnxruntime-web.js"
import { hostCpu } from "../src/device/host.js"
import { zooModel } from "../src/zoo/index.js"

const args = process.argv.slice(2)
const opt = (k: string, d: string) => (args.includes(k) ? args[args.indexOf(k) + 1] : d)
const model = opt("--model", "mobilenetv2")
const base = opt("--base", "")
const rounds = Number(opt("--rounds", "9"))
const runs = Number(opt("--runs", "5"))
if (!base) throw new Error("--base DIST: the baseline build's dist folder")
const cpuMs = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

interface Side {
  readonly run: (feeds: ReadonlyMap<string, Tensor>) => Map<string, Tensor>
  readonly module: { run: (kernel: string, args: unknown) => void }
}
/** A build's compile of the model for wasm at one thread, from its dist folder. */
const load = async (dist: string): Promise<Side> => {
  // the library entry of that build (dist/index.js: its stages, backends and pipeline)
  const { compileGraph, loadProgram, BACKENDS, decodeModelSync } = await import(pathToFileURL(path.resolve(dist, "index.js")).href)
  const graph = decodeModelSync(bytes)
  const target = BACKENDS.wasm.target(hostCpu(), 1)
  const program = await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 }) as Effect.Effect<unknown>)
  return (await Effect.runPromise(loadProgram(program, target, { threads: 1 }) as Effect.Effect<Side>))
}

const file = args.includes("--file") ? opt("--file", "") : undefined
const bytes = file ? new Uint8Array(readFileSync(file)) : zooModel(model, 0)
const here = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..") // this build's dist
const ours = await load(here)
const theirs = await load(base)
const { decodeModelSync } = await import("../src/ast/onnx/decode.js")
const input = decodeModelSync(bytes).inputs[0]
const shape = input.type.shape as number[]
const data = allocate("float32", shape.reduce((a, b) => a * b, 1))
const r = prng(1)
for (let i = 0; i < data.length; i++) data[i] = r.float(-1, 1)
const feeds = new Map<string, Tensor>([[input.name, { dtype: "float32", shape, data }]])
const ort = await Effect.runPromise(loadOrtWeb())
if (typeof ort === "string") throw new Error(ort)
const session = await ort.InferenceSession.create(bytes, { executionProviders: ["wasm"], graphOptimizationLevel: "all" })
const ortFeeds = { [input.name]: new ort.Tensor("float32", ortTensorParts(feeds.get(input.name)!, "onnxruntime-web").data as Float32Array, shape) }

// warm-up (V8 tiers a wasm function up after its first calls), and the outputs compared
let maxDiff = 0
let maxAB = 0
for (let i = 0; i < 3; i++) {
  const a = ours.run(feeds)
  const b = theirs.run(feeds)
  const o = await session.run(ortFeeds)
  for (const [name, t] of Object.entries(o)) {
    const x = a.get(name)!.data as ArrayLike<number>
    const y = b.get(name)!.data as ArrayLike<number>
    const z = t.data as ArrayLike<number>
    for (let j = 0; j < z.length; j++) {
      maxDiff = Math.max(maxDiff, Math.abs(x[j] - z[j]), Math.abs(y[j] - z[j]))
      maxAB = Math.max(maxAB, Math.abs(x[j] - y[j]))
    }
  }
}
const time = async (f: () => unknown): Promise<number> => {
  const ts: number[] = []
  for (let i = 0; i < runs; i++) {
    const t0 = cpuMs()
    await f()
    ts.push(cpuMs() - t0)
  }
  return median(ts)
}
// (--kernels: each module's kernels wrapped, their CPU time inside the sequence gathered per kernel)
const perKernel = args.includes("--kernels")
const kernelTimes = (side: Side): Map<string, number[]> => {
  const times = new Map<string, number[]>()
  if (!perKernel) return times
  const inner = side.module.run.bind(side.module)
  side.module.run = (k, a) => {
    const t0 = cpuMs()
    inner(k, a)
    times.set(k, [...(times.get(k) ?? []), cpuMs() - t0])
  }
  return times
}
const oursK = kernelTimes(ours)
const baseK = kernelTimes(theirs)
const rows: { base: number; ours: number; ort: number }[] = []
for (let k = 0; k < rounds; k++) {
  const b = await time(() => theirs.run(feeds))
  const o = await time(() => ours.run(feeds))
  const w = await time(() => session.run(ortFeeds))
  rows.push({ base: b, ours: o, ort: w })
  console.log(`round ${k}: base ${b.toFixed(2)} ms (${(b / w).toFixed(3)}), ours ${o.toFixed(2)} ms (${(o / w).toFixed(3)}), onnxruntime-web ${w.toFixed(2)} ms`)
}
const m = (f: (x: (typeof rows)[number]) => number) => median(rows.map(f))
console.log(
  `${file ?? model}, wasm, 1 thread, ${rounds} rounds × ${runs} runs, CPU time: base ${m((x) => x.base).toFixed(2)} ms (${m((x) => x.base / x.ort).toFixed(3)} of onnxruntime-web), ours ${m((x) => x.ours).toFixed(2)} ms (${m((x) => x.ours / x.ort).toFixed(3)}), onnxruntime-web ${m((x) => x.ort).toFixed(2)} ms; largest |difference| from onnxruntime-web ${maxDiff.toExponential(2)}, between the builds ${maxAB.toExponential(2)}`,
)
if (perKernel) {
  for (const [k, t] of baseK) {
    const b = median(t)
    const o = median(oursK.get(k) ?? [])
    console.log(`${k}\tbase ${b.toFixed(3)}\tours ${o.toFixed(3)}\t${(o / b).toFixed(2)}`)
  }
}
await session.release()
