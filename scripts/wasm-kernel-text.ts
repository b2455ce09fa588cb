// node dist/scripts/wasm-kernel-text.js --model mobilenetv2 --kernel k4 [--file MODEL.onnx]: one
// compiled kernel of a zoo model (or of an ONNX file: an int8 model of `tessera quantize`) on the wasm target, its TIR and its WAT-like text (what the wasm emitter renders), to
// read where a kernel's instructions go.
import { Effect } from "effect"
import * as fs from "node:fs"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { BACKENDS } from "../src/backend/index.js"
import { printPrimFunc } from "../src/ast/tir/tir.js"
import { hostCpu } from "../src/device/host.js"
import { emitWasmModule } from "../src/emit/wasm/emit.js"
import { printWasmModule } from "../src/emit/wasm/print.js"
import { compiledKernels } from "../src/lowering/program.js"
import { compileGraph } from "../src/pipeline.js"
import { isZooName, zooGraph } from "../src/zoo/index.js"

const args = process.argv.slice(2)
const opt = (k: string, d: string) => (args.includes(k) ? args[args.indexOf(k) + 1] : d)
const name = opt("--model", "mobilenetv2")
const kernel = opt("--kernel", "k1")
const file = args.includes("--file") ? opt("--file", "") : undefined
if (!file && !isZooName(name)) throw new Error(`unknown zoo model '${name}'`)
const target = BACKENDS.wasm.target(hostCpu(), 1)
const graph = file ? decodeModelSync(new Uint8Array(fs.readFileSync(file))) : zooGraph(name, 0)
const program = await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 }))
const k = compiledKernels(program).find((x) => x.name === kernel)
if (!k) throw new Error(`no compiled kernel '${kernel}'`)
console.log(printPrimFunc(k.func))
console.log(printWasmModule(emitWasmModule([{ name: k.name, func: k.func }]).module))
