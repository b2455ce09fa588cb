// The small network the cuda tests compile end to end (fp32 and fp16): each kind of group a CNN
// has — conv + BN + relu, max pool, depthwise conv + clip, 1x1 conv + residual add, global pool,
// Gemm, softmax; and its artifact built over the emulation header and run on the CPU.
import { spawnSync } from "node:child_process"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { prng } from "../../src/ast/graph/arbitrary.js"
import { fromArray, type Tensor } from "../../src/ast/graph/tensor.js"
import { parseNpy, serializeNpy } from "../../src/device/npy.js"
import { attr } from "../../src/ast/graph/attrs.js"
import type { Graph } from "../../src/ast/graph/graph.js"
import { conv, linear, maxPool, NetBuilder, poolFlatten, relu } from "../../src/zoo/builder.js"
import { scalar } from "../../src/zoo/layers.js"

export const tinyNet = (): Graph => {
  const b = new NetBuilder(7, 13)
  let x = b.input("input", { dtype: "float32", shape: [1, 3, 16, 16] })
  x = relu(b, conv(b, x, "conv1", { cin: 3, cout: 8, k: 3, pad: 1, bias: true }), "relu1")
  x = maxPool(b, x, "pool1", 2, 2, 0)
  const dw = b.op("Clip", [conv(b, x, "dw", { cin: 8, cout: 8, k: 3, pad: 1, group: 8 }), scalar(b, "zero", 0), scalar(b, "six", 6)], "clip")
  const pw = conv(b, dw, "pw", { cin: 8, cout: 8, k: 1 })
  x = b.op("Add", [pw, x], "residual")
  const f = poolFlatten(b, x, "gap")
  const l = linear(b, f, "fc", 8, 10)
  b.op("Softmax", [l], "output", { axis: attr.int(-1) })
  return b.build("tiny", [{ name: "output", type: { dtype: "float32", shape: [1, 10] } }])
}

/** Writes an artifact's files into `dir`. */
export const writeAll = (dir: string, files: ReadonlyMap<string, Uint8Array>): void => {
  mkdirSync(dir, { recursive: true })
  for (const [name, bytes] of files) writeFileSync(path.join(dir, name), bytes)
}

/**
 * A cuda artifact written into `dir`, built by the host compiler over tessera_emulate.h (`make
 * emulate`), and run once on the tiny network's seeded input: the build, the run, and the output.
 */
export const runEmulated = (dir: string, files: ReadonlyMap<string, Uint8Array>, o: { readonly runs: number; readonly warmup: number }) => {
  writeAll(dir, files)
  const build = spawnSync("make", ["-C", dir, "emulate"], { encoding: "utf8" })
  if (build.status !== 0) return { build, run: undefined, input: undefined, output: undefined }
  const rng = prng(3)
  const input: Tensor = fromArray("float32", [1, 3, 16, 16], Array.from({ length: 768 }, () => rng.float(-1, 1)))
  writeFileSync(path.join(dir, "x.npy"), serializeNpy(input))
  mkdirSync(path.join(dir, "out"))
  const run = spawnSync(path.join(dir, "model-emulated"), ["--input", `input=${path.join(dir, "x.npy")}`, "--out", path.join(dir, "out"), "--runs", String(o.runs), "--warmup", String(o.warmup)], { encoding: "utf8" })
  const output = run.status === 0 ? parseNpy(new Uint8Array(readFileSync(path.join(dir, "out", "output.npy")))) : undefined
  return { build, run, input, output }
}
