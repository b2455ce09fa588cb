// npm run vta-accuracy: what VTA's power-of-two re-quantization (rewrite.VtaRequantize) costs in
// accuracy, on the zoo ResNet-18 quantized by Tessera (QDQ, per-channel, minmax on 32 seeded
// calibration inputs: scripts/int8-models.ts; `--int8-dir DIR` reuses DIR/resnet18.int8.onnx)
// over 100 seeded inputs none of which was calibrated on. Run by the c target (one thread):
//   fp32   the zoo network;
//   int8   the int8 graph as quantized (onnxruntime's requantize: float multiplier, round half to even);
//   vta    the int8 graph re-quantized for VTA with the weights' power-of-two scales shared per
//          tensor (TVM's scheme; what --target vta runs), per block of 16 output channels (an SHR a
//          channel block), and per output channel; and, beside them, with a power-of-two scale per
//          activation value instead of one for all (not offloaded: what would narrow the gap).
// `vta` on c is what the VTA target computes, bit for bit: checked here on the first `--check-vta N`
// inputs (default 1) through the partitioned executor (the simulator for the offloaded layers).
// Reported: top-1 agreement with int8 and with fp32, and the relative error ‖y − ref‖ / ‖ref‖
// (median and largest over the inputs).
import { Effect } from "effect"
import * as fs from "node:fs"
import type { Graph } from "../src/ast/graph/graph.js"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { BACKENDS } from "../src/backend/index.js"
import { loadVta, planVta } from "../src/cli/vta.js"
import { hostCpu } from "../src/device/host.js"
import { median } from "../src/device/onnxruntime.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { qdqToIntegerSync } from "../src/rewrite/qdq-to-integer.js"
import { vtaRequantizeWithReport, type VtaRequantizeOptions } from "../src/rewrite/vta-requantize.js"
import { zooGraph } from "../src/zoo/index.js"
import { int8Folder, int8Model, MEASURE_SEED, zooInputs } from "./int8-models.js"

const args = process.argv.slice(2)
const flag = (name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined)
const count = Number(flag("--inputs") ?? 100)
const checkVta = Number(flag("--check-vta") ?? 1)
const NAME = "resnet18"

const unavailable = BACKENDS.c.unavailable()
if (unavailable !== undefined) {
  console.log(`needs the c target: ${unavailable}`)
  process.exit(0)
}
const argmax = (xs: ArrayLike<number>): number => {
  let k = 0
  for (let i = 1; i < xs.length; i++) if (xs[i] > xs[k]) k = i
  return k
}
const relError = (y: ArrayLike<number>, ref: ArrayLike<number>): number => {
  let noise = 0
  let signal = 0
  for (let i = 0; i < ref.length; i++) {
    noise += (y[i] - ref[i]) ** 2
    signal += ref[i] ** 2
  }
  return Math.sqrt(noise / signal)
}

const file = int8Model(NAME, int8Folder(args), (l) => console.error(l))
const int8Graph = decodeModelSync(new Uint8Array(fs.readFileSync(file)))
const integer = qdqToIntegerSync(int8Graph)
const VARIANTS: readonly { readonly label: string; readonly options: VtaRequantizeOptions }[] = [
  { label: "vta: one activation scale, weight scales per tensor, shifts rounding half up (as run)", options: {} },
  { label: "vta: the same, shifts rounding down (the SHR alone)", options: { rounding: "floor" } },
  { label: "rounding down, weight scales per block of 16", options: { rounding: "floor", weightScales: "block" } },
  { label: "rounding down, weight scales per channel", options: { rounding: "floor", weightScales: "channel" } },
  { label: "rounding half up, weight scales per channel", options: { weightScales: "channel" } },
  { label: "rounding down, activation scales per value, weight scales per channel", options: { rounding: "floor", activationScales: "value", weightScales: "channel" } },
]
const vtaGraphs = new Map(VARIANTS.map((v) => [v.label, vtaRequantizeWithReport(integer, v.options)] as const))
const asRun = VARIANTS[0].label
console.error(`${NAME}: ${vtaGraphs.get(asRun)!.report.converted.length} nodes re-quantized for VTA, activation scale ${vtaGraphs.get(asRun)!.report.activationScale}`)

const target = BACKENDS.c.target(hostCpu(), 1)
const load = async (g: Graph) => Effect.runPromise(loadProgram(await Effect.runPromise(compileGraph(g, target, { optLevel: 3 })), target, { threads: 1 }))
const fp32 = await load(zooGraph(NAME, 0))
const int8 = await load(int8Graph)
const vta = new Map<string, Awaited<ReturnType<typeof load>>>()
for (const v of VARIANTS) vta.set(v.label, await load(vtaGraphs.get(v.label)!.graph))
const first = (m: ReadonlyMap<string, Tensor>) => [...m.values()][0].data as Float32Array

const inputs = zooInputs(NAME, count, MEASURE_SEED)
const rows = new Map<string, { agreeInt8: number; agreeFp32: number; relInt8: number[]; relFp32: number[] }>()
const row = (k: string) => rows.get(k) ?? rows.set(k, { agreeInt8: 0, agreeFp32: 0, relInt8: [], relFp32: [] }).get(k)!
for (const feeds of inputs) {
  const f = first(fp32.run(feeds))
  const q = first(int8.run(feeds))
  const r = row("int8 (onnxruntime's requantize)")
  if (argmax(q) === argmax(f)) r.agreeFp32++
  r.agreeInt8++
  r.relFp32.push(relError(q, f))
  r.relInt8.push(0)
  for (const variant of VARIANTS) {
    const v = first(vta.get(variant.label)!.run(feeds))
    const x = row(variant.label)
    if (argmax(v) === argmax(q)) x.agreeInt8++
    if (argmax(v) === argmax(f)) x.agreeFp32++
    x.relInt8.push(relError(v, q))
    x.relFp32.push(relError(v, f))
  }
}

// the VTA target itself on the first inputs: the same floats as its graph on c
if (checkVta > 0) {
  const shapes = new Map(int8Graph.inputs.map((i) => [i.name, i.type.shape as number[]] as const))
  // the variants VTA offloads whole: one activation scale, one shift a conv (floor, or rounding half up through the bias)
  for (const variant of VARIANTS.slice(0, 2)) {
    const plan = planVta(int8Graph, shapes, { requantize: variant.options })
    const model = await Effect.runPromise(loadVta(plan))
    for (const feeds of inputs.slice(0, checkVta)) {
      const e = model.run(feeds)
      const got = Array.from(e.outputs.get(plan.graph.outputs[0].name)!.data as Float32Array)
      const want = Array.from(first(vta.get(variant.label)!.run(feeds)))
      const same = got.length === want.length && got.every((v, i) => Object.is(v, want[i]))
      console.error(`${variant.label}: the vta target (${e.layers.length} layers on the simulator) vs its integer graph on c: ${same ? "the same outputs, bit for bit" : "DIFFERENT"}`)
      if (!same) process.exitCode = 1
    }
  }
}

const pct = (k: number) => `${((100 * k) / count).toFixed(0)}%`
const f4 = (x: number) => x.toFixed(4)
console.log(`\n${NAME}, ${count} seeded inputs (seeds ${MEASURE_SEED}…), c target:\n`)
console.log("| variant | top-1 = int8 | top-1 = fp32 | rel error vs int8 (median / max) | rel error vs fp32 (median / max) |")
console.log("| --- | ---: | ---: | ---: | ---: |")
for (const [k, r] of rows) console.log(`| ${k} | ${pct(r.agreeInt8)} | ${pct(r.agreeFp32)} | ${f4(median(r.relInt8))} / ${f4(Math.max(...r.relInt8))} | ${f4(median(r.relFp32))} / ${f4(Math.max(...r.relFp32))} |`)
