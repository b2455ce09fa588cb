// A seeded input in [-1, 1) for each graph input, written as DIR/PREFIX<name>.npy: what the GPU
// checks (gpu-prepare, gpu-node-ref) feed both Tessera and onnxruntime.
import * as fs from "node:fs"
import * as path from "node:path"
import { prng } from "../src/ast/graph/arbitrary.js"
import { allocate, fromNumbers } from "../src/ast/graph/dtype.js"
import type { Graph } from "../src/ast/graph/graph.js"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { serializeNpy } from "../src/device/npy.js"

/** A name made safe for a file name. */
export const safeFileName = (name: string): string => name.replace(/[^A-Za-z0-9_.-]/g, "_")

export const writeSeededInputs = (graph: Graph, seed: number, dir: string, prefix = "") => {
  const rng = prng(seed)
  const feeds = new Map<string, Tensor>()
  const inputs = graph.inputs.map((i) => {
    const shape = i.type.shape as number[]
    const n = shape.reduce((a, b) => a * b, 1)
    const t: Tensor = { dtype: i.type.dtype, shape, data: fromNumbers(i.type.dtype, Array.from({ length: n }, () => rng.float(-1, 1))) }
    feeds.set(i.name, t)
    const file = `${prefix}${safeFileName(i.name)}.npy`
    fs.writeFileSync(path.join(dir, file), serializeNpy(t))
    return { name: i.name, file, shape, dtype: i.type.dtype }
  })
  return { feeds, inputs }
}

/** A zoo network's float input (its first), seeded in [-1, 1) by prng(seed): what the A/B scripts feed both sides. */
export const seededFirstInput = (graph: Graph, seed = 1): Map<string, Tensor> => {
  const input = graph.inputs[0]
  const shape = input.type.shape as number[]
  const data = allocate("float32", shape.reduce((a, b) => a * b, 1))
  const r = prng(seed)
  for (let i = 0; i < data.length; i++) data[i] = r.float(-1, 1)
  return new Map<string, Tensor>([[input.name, { dtype: "float32", shape, data }]])
}
