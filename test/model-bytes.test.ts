// A model file read with its large initializers' raw data left in it (src/device/model-bytes.ts):
// those bytes are never read at decode (zero in the array), the weights become stored tensors read
// when asked, and a file changed after the decode is a FileAccessError when they are, never other
// values. A file the walk does not understand is read whole (the decoder's errors as before).
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { pendingRecipe } from "../src/ast/graph/deferred.js"
import type { Graph } from "../src/ast/graph/graph.js"
import { tensor, type Tensor } from "../src/ast/graph/tensor.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { FileAccessError, readModelSync } from "../src/device/files.js"
import { readModelBytes, UNREAD_BYTES } from "../src/device/model-bytes.js"

const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-model-bytes-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A graph of an Add of a large weight (left in the file) and a small one (read). */
const model = (seed: number): Graph => {
  const large = tensor("float32", [64, 128], Float32Array.from({ length: 64 * 128 }, (_, j) => Math.sin(seed + j)))
  const small = tensor("float32", [64, 128], Float32Array.from({ length: 64 * 128 }, (_, j) => j % 7))
  const initializers = new Map<string, Tensor>([["large", large], ["small", tensor("float32", [4], Float32Array.of(1, 2, 3, seed))], ["same", small]])
  return {
    name: "g",
    opset: 17,
    inputs: [],
    outputs: [{ name: "y", type: { dtype: "float32", shape: [64, 128] } }],
    initializers,
    nodes: [{ name: "add", op: "Add", domain: "", inputs: ["large", "same"], outputs: ["y"], attrs: {} }],
    valueTypes: new Map(),
  }
}

describe("a model's large raw data left in its file", () => {
  it("is never read at decode: zero in the bytes, every other byte the file's; the weights read when asked hold the file's values", () => {
    const file = path.join(dir, "m.onnx")
    const bytes = encodeOnnx(model(1))
    writeFileSync(file, bytes)
    const read = readModelBytes(file)
    expect([...read.unread.values()]).toEqual([64 * 128 * 4, 64 * 128 * 4])
    const left = (i: number) => [...read.unread].some(([at, n]) => i >= at && i < at + n)
    let zero = 0
    for (let i = 0; i < bytes.length; i++)
      if (!left(i)) expect(read.bytes[i]).toBe(bytes[i])
      else if (read.bytes[i] === 0) zero++
    // what a read ahead of a header reached of a weight (at most a page each) is the only part read
    expect(zero).toBeGreaterThan(2 * (64 * 128 * 4 - 4096) - 1)
    const g = readModelSync(file)
    const large = g.initializers.get("large")!
    expect(pendingRecipe(large)?.kind).toBe("stored")
    expect(pendingRecipe(g.initializers.get("small")!)).toBeUndefined()
    expect(Array.from(large.data)).toEqual(Array.from(model(1).initializers.get("large")!.data))
    expect(UNREAD_BYTES).toBeLessThanOrEqual(64 * 128 * 4)
  })

  it("changed after the decode (same size, new bytes): reading a weight is a FileAccessError, never the new values", () => {
    const file = path.join(dir, "changed.onnx")
    writeFileSync(file, encodeOnnx(model(1)))
    const g = readModelSync(file)
    const other = encodeOnnx(model(2))
    expect(other.length).toBe(encodeOnnx(model(1)).length)
    writeFileSync(file, other)
    utimesSync(file, new Date(), new Date(Date.now() + 5000))
    const large = g.initializers.get("large")!
    expect(() => large.data).toThrow(FileAccessError)
    expect(() => large.data).toThrow(/changed after the model was decoded/)
  })

  it("a file the walk does not understand (cut inside a field) is read whole: the decoder's error, as before", () => {
    const file = path.join(dir, "cut.onnx")
    const bytes = encodeOnnx(model(1))
    writeFileSync(file, bytes.subarray(0, bytes.length - 100))
    const read = readModelBytes(file)
    expect(read.unread.size).toBe(0)
    expect(Buffer.from(read.bytes).equals(Buffer.from(bytes.subarray(0, bytes.length - 100)))).toBe(true)
    expect(() => readModelSync(file)).toThrow(/not a valid ONNX protobuf/)
  })
})
