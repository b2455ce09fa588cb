// npm run int8-accuracy: on 100 seeded inputs (none of them calibrated on), ResNet-18 and
// MobileNetV2 quantized by Tessera's pass (scripts/int8-models.ts), run by Tessera c and by
// onnxruntime-node on the same int8 file, and by Tessera c on the fp32 network:
// - Tessera int8 against onnxruntime int8: the largest |difference| in output LSBs (the output's
//   quantization scale), and how often their top-1 classes agree;
// - int8 against fp32: top-1 agreement and the relative error ‖int8 - fp32‖ / ‖fp32‖ (median
//   and largest over the inputs).
// `--models a,b`, `--inputs N`, `--int8-dir DIR` (keeps the quantized files between runs).
import { Effect } from "effect"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { BACKENDS } from "../src/backend/index.js"
import { hostCpu } from "../src/device/host.js"
import { loadOrt, median } from "../src/device/onnxruntime.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { zooGraph } from "../src/zoo/index.js"
import * as fs from "node:fs"
import { INT8_MODELS, int8Folder, int8Model, MEASURE_SEED, zooInputs } from "./int8-models.js"

const args = process.argv.slice(2)
const flag = (name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined)
const models = flag("--models")?.split(",").map((s) => s.trim()) ?? [...INT8_MODELS]
const count = Number(flag("--inputs") ?? 100)

const argmax = (xs: ArrayLike<number>): number => {
  let k = 0
  for (let i = 1; i < xs.length; i++) if (xs[i] > xs[k]) k = i
  return k
}

const unavailable = BACKENDS.c.unavailable()
const ort = await Effect.runPromise(loadOrt())
if (unavailable !== undefined || typeof ort === "string") {
  console.log(`needs the c target and onnxruntime-node: ${unavailable ?? ort}`)
  process.exit(0)
}
const dir = int8Folder(args)
console.log("| model | inputs | max |int8 - ort int8| (LSBs) | top-1 int8 = ort int8 | top-1 int8 = fp32 | rel error int8 vs fp32 (median / max) | top-1 ort int8 = fp32 |")
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
const lines: string[] = []
for (const name of models) {
  const file = int8Model(name, dir, (l) => console.error(l))
  const bytes = new Uint8Array(fs.readFileSync(file))
  const int8Graph = decodeModelSync(bytes)
  const outName = int8Graph.outputs[0].name
  const dq = int8Graph.nodes.find((n) => n.op === "DequantizeLinear" && n.outputs[0] === outName)
  const lsb = dq ? Number(int8Graph.initializers.get(dq.inputs[1])!.data[0]) : NaN
  const target = BACKENDS.c.target(hostCpu(), 1)
  const int8 = await Effect.runPromise(loadProgram(await Effect.runPromise(compileGraph(int8Graph, target, { optLevel: 3 })), target, { threads: 1 }))
  const fp32 = await Effect.runPromise(loadProgram(await Effect.runPromise(compileGraph(zooGraph(name, 0), target, { optLevel: 3 })), target, { threads: 1 }))
  const session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1, interOpNumThreads: 1 })
  let maxLsb = 0
  let agreeOrt = 0
  let agreeFp32 = 0
  let agreeOrtFp32 = 0
  const rel: number[] = []
  for (const feeds of zooInputs(name, count, MEASURE_SEED)) {
    const [inName, x] = [...feeds][0] as [string, Tensor]
    const a = [...int8.run(feeds).values()][0].data as Float32Array
    const f = [...fp32.run(feeds).values()][0].data as Float32Array
    const o = (await session.run({ [inName]: new ort.Tensor("float32", x.data as Float32Array, [...x.shape]) }))[session.outputNames[0]].data as Float32Array
    let diff = 0
    let noise = 0
    let signal = 0
    for (let i = 0; i < a.length; i++) {
      diff = Math.max(diff, Math.abs(a[i] - o[i]))
      noise += (a[i] - f[i]) ** 2
      signal += f[i] ** 2
    }
    maxLsb = Math.max(maxLsb, diff / lsb)
    const ta = argmax(a)
    if (ta === argmax(o)) agreeOrt++
    if (ta === argmax(f)) agreeFp32++
    if (argmax(o) === argmax(f)) agreeOrtFp32++
    rel.push(Math.sqrt(noise / signal))
  }
  await session.release()
  int8.module.close()
  fp32.module.close()
  const pct = (k: number) => `${((100 * k) / count).toFixed(0)}%`
  lines.push(`| ${name} | ${count} | ${maxLsb.toFixed(2)} | ${pct(agreeOrt)} | ${pct(agreeFp32)} | ${median(rel).toFixed(4)} / ${Math.max(...rel).toFixed(4)} | ${pct(agreeOrtFp32)} |`)
  console.log(lines[lines.length - 1])
}
