// node dist/scripts/gpu-node-ref.js ZOO_NAME DIR: the zoo network (seeded weights) as
// DIR/<name>.onnx, a seeded input in [-1, 1) for each of its inputs (DIR/<input>.npy) and
// onnxruntime-node's CPU outputs for it (DIR/ref-<output>.npy), and DIR/ref.json naming them — what scripts/gpu-node-check.sh compares `tessera run --target
// cuda` with on the GPU machine.
import { Effect } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { prng } from "../src/ast/graph/arbitrary.js"
import { fromNumbers } from "../src/ast/graph/dtype.js"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { zooGraph, zooModel } from "../src/zoo/index.js"
import { serializeNpy } from "../src/device/npy.js"
import { loadOrt, runOrt } from "../src/device/onnxruntime.js"

const [name, dir] = process.argv.slice(2)
const safe = (name: string) => name.replace(/[^A-Za-z0-9_.-]/g, "_")
const main = Effect.gen(function* () {
  fs.mkdirSync(dir, { recursive: true })
  const bytes = zooModel(name)
  const graph = zooGraph(name)
  const model = `${name}.onnx`
  fs.writeFileSync(path.join(dir, model), bytes)
  const ort = yield* loadOrt()
  if (typeof ort === "string") return yield* Effect.die(new Error(ort))
  const rng = prng(0)
  const feeds = new Map<string, Tensor>()
  const inputs = graph.inputs.map((i) => {
    const shape = i.type.shape as number[]
    const n = shape.reduce((a, b) => a * b, 1)
    const t: Tensor = { dtype: i.type.dtype, shape, data: fromNumbers(i.type.dtype, Array.from({ length: n }, () => rng.float(-1, 1))) }
    feeds.set(i.name, t)
    fs.writeFileSync(path.join(dir, `${safe(i.name)}.npy`), serializeNpy(t))
    return { name: i.name, file: `${safe(i.name)}.npy` }
  })
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
