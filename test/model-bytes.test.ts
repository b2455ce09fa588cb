// A model file read with its large initializers' raw data left in it (src/device/model-bytes.ts):
// those bytes are never read at decode (zero in the array), the weights become stored tensors read
// when asked, and a file changed after the decode is a FileAccessError when they are, never other
// values. A file the walk does not understand is read whole (the decoder's errors as before).
import { spawn, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { pendingRecipe } from "../src/ast/graph/deferred.js"
import type { Graph } from "../src/ast/graph/graph.js"
import { tensor, type Tensor } from "../src/ast/graph/tensor.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { FileAccessError, readModelSync } from "../src/device/files.js"
import { readModelBytes, UNREAD_BYTES } from "../src/device/model-bytes.js"
import { CLI } from "./support/dist.js"

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

  it("read from a pipe (`tessera run <(cat m.onnx)`, a FIFO): its misaligned raw data moved in memory, not read again from a file that cannot seek or reopen — the same outputs as from the file", async () => {
    // initializers whose names of 1-5 characters put their raw data at every offset mod 4 (alignRawData moves the misaligned ones)
    const g = model(2)
    const initializers = new Map(g.initializers)
    for (const name of ["a", "bb", "ccc", "dddd", "eeeee"]) initializers.set(name, tensor("float32", [64, 128], Float32Array.from({ length: 64 * 128 }, (_, j) => name.length + j)))
    const nodes = ["a", "bb", "ccc", "dddd", "eeeee"].reduce((acc, name, k) => [...acc, { name: `add${k}`, op: "Add", domain: "", inputs: [k === 0 ? "y0" : `y${k}`, name], outputs: [`y${k + 1}`], attrs: {} }], [{ ...g.nodes[0], outputs: ["y0"] }])
    const file = path.join(dir, "aligned.onnx")
    writeFileSync(file, encodeOnnx({ ...g, initializers, nodes, outputs: [{ name: "y5", type: { dtype: "float32", shape: [64, 128] } }] }))
    const fifo = path.join(dir, "pipe.onnx")
    expect(spawnSync("mkfifo", [fifo]).status, "mkfifo is needed for this test").toBe(0)
    const run = (model: string, out: string) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [CLI, "run", model, "--out", out], { stdio: ["ignore", "ignore", "pipe"] })
        let stderr = ""
        child.stderr.on("data", (b: Buffer) => (stderr += b.toString()))
        // a second open of the pipe would block for ever: ended here, a failure
        const timer = setTimeout(() => child.kill("SIGKILL"), 30_000)
        child.on("exit", (code) => (clearTimeout(timer), resolve({ code, stderr })))
      })
    const writer = spawn("/bin/sh", ["-c", 'cat "$1" > "$2"', "sh", file, fifo], { stdio: "ignore" })
    const [fromPipe, fromFile] = await Promise.all([run(fifo, path.join(dir, "out-pipe")), run(file, path.join(dir, "out-file"))])
    writer.kill()
    expect(fromPipe, fromPipe.stderr).toEqual({ code: 0, stderr: "" })
    expect(fromFile.code).toBe(0)
    expect(readFileSync(path.join(dir, "out-pipe", "y5.npy")).equals(readFileSync(path.join(dir, "out-file", "y5.npy")))).toBe(true)
  }, 60_000)
})
