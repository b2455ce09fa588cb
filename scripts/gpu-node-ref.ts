// node dist/scripts/gpu-node-ref.js ZOO_NAME DIR: the zoo network (seeded weights) as
// DIR/<name>.onnx, a seeded input in [-1, 1) for each of its inputs (DIR/<input>.npy) and
// onnxruntime-node's CPU outputs for it (DIR/ref-<output>.npy), and DIR/ref.json naming them — what scripts/gpu-node-check.sh compares `tessera run --target
// cuda` with on the GPU machine.
import { Effect } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { zooGraph, zooModel } from "../src/zoo/index.js"
import { serializeNpy } from "../src/device/npy.js"
import { loadOrt, runOrt } from "../src/device/onnxruntime.js"
import { safeFileName as safe, writeSeededInputs } from "./seeded-inputs.js"

const [name, dir] = process.argv.slice(2)
const main = Effect.gen(function* () {
  fs.mkdirSync(dir, { recursive: true })
  const bytes = zooModel(name)
  const graph = zooGraph(name)
  const model = `${name}.onnx`
  fs.writeFileSync(path.join(dir, model), bytes)
  const ort = yield* loadOrt()
  if (typeof ort === "string") return yield* Effect.die(new Error(ort))
  const { feeds, inputs } = writeSeededInputs(graph, 0, dir)
  const ref = yield* runOrt(ort, bytes, feeds, { threads: 0, runs: 0 })
  if (typeof ref === "string") return yield* Effect.die(new Error(ref))
  const outputs = graph.outputs.map((o) => {
    const r = ref.outputs.get(o.name)!
    fs.writeFileSync(path.join(dir, `ref-${safe(o.name)}.npy`), serializeNpy({ dtype: "float32", shape: r.shape, data: Float32Array.from(r.data) }))
    return { name: o.name, file: `${safe(o.name)}.npy`, reference: `ref-${safe(o.name)}.npy` }
  })
  fs.writeFileSync(path.join(dir, "ref.json"), `${JSON.stringify({ model, zoo: name, sha256: createHash("sha256").update(bytes).digest("hex"), inputs, outputs }, null, 2)}\n`)
  console.log(`${dir}: ${inputs.length} inputs, ${outputs.length} outputs of onnxruntime`)
})
Effect.runPromise(main).catch((e: unknown) => {
  console.error(`gpu-node-ref: ${e instanceof Error ? e.message : String(e)}`)
  process.exit(1)
})
