// `tessera quantize` as users run it (built into .cache/quantize-cli, so that it does not race
// the other CLI tests' dist/): seeded and folder calibration, the file onnxruntime-node runs, the
// report, the typed one-line errors of bad flags and of an unquantizable node; calibration on a
// compiled target against the evaluator (--calibrate-on); the supervisor's SIGINT / SIGTERM and
// --deadline, which leave no output file.
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as ort from "onnxruntime-node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { makeGraph, node, type Graph } from "../src/ast/graph/graph.js"
import { tensor } from "../src/ast/graph/tensor.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { randomTensor } from "../src/cli/inputs.js"
import { serializeNpy } from "../src/device/npy.js"
import { smallCnn } from "./support/quantize-models.js"
import { HAVE_GCC, NO_GCC } from "../laws/support-c.js"
import { fillNormal } from "../src/zoo/random.js"
import { CLI } from "./support/dist.js"

let tmp = ""
const main = CLI

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-quantize-cli-"))
  fs.writeFileSync(path.join(tmp, "cnn.onnx"), encodeOnnx(smallCnn()))
  fs.writeFileSync(path.join(tmp, "soft.onnx"), encodeOnnx(smallCnn((x) => ({ nodes: [node("Softsign", [x], ["soft"], {}, "softsign")], out: "soft" }))))
  fs.writeFileSync(path.join(tmp, "exact.onnx"), encodeOnnx(exactModel()))
  fs.writeFileSync(path.join(tmp, "slow.onnx"), encodeOnnx(slowCnn()))
  fs.mkdirSync(path.join(tmp, "calib"))
  for (let k = 0; k < 3; k++) fs.writeFileSync(path.join(tmp, "calib", `x${k}.npy`), serializeNpy(randomTensor("float32", [1, 3, 8, 8], 50 + k)))
})
afterAll(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true })
})

/**
 * A model whose float values do not depend on the order of any sum: a Conv of one input channel
 * and a 1×1 kernel (one product, then the bias), ReLU, MaxPool, an Add of two pooled values (not
 * fused with the Conv, whose kernel would otherwise add the bias and the residual in its own
 * order), Concat, Flatten.
 */
const exactModel = (): Graph => {
  const w = new Float32Array(6)
  fillNormal(11, w, 0, 0.5)
  return makeGraph({
    name: "exact",
    opset: 13,
    inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 1, 8, 8] } }],
    outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 12 * 16] } }],
    initializers: new Map([["w", tensor("float32", [6, 1, 1, 1], w)], ["b", tensor("float32", [6], Float32Array.from([0.1, -0.2, 0.3, 0, 0.05, -0.4]))]]),
    nodes: [
      node("Conv", ["x", "w", "b"], ["c"], { kernel_shape: attr.ints([1, 1]) }, "conv"),
      node("Relu", ["c"], ["r"], {}, "relu"),
      node("MaxPool", ["r"], ["p"], { kernel_shape: attr.ints([2, 2]), strides: attr.ints([2, 2]) }, "pool"),
      node("MaxPool", ["x"], ["px"], { kernel_shape: attr.ints([2, 2]), strides: attr.ints([2, 2]) }, "pool_x"),
      node("Add", ["p", "px"], ["s"], {}, "add"),
      node("Concat", ["s", "p"], ["cat"], { axis: attr.int(1) }, "cat"),
      node("Flatten", ["cat"], ["y"], { axis: attr.int(1) }, "flatten"),
    ],
  })
}

/** Four 3×3 convolutions of 16 channels on 64×64: a tenth of a second a run on the evaluator, with a node boundary every few ms. */
const slowCnn = (): Graph => {
  const inits = new Map<string, ReturnType<typeof tensor>>()
  const nodes = []
  let x = "x"
  for (let k = 0; k < 4; k++) {
    const w = new Float32Array(16 * 16 * 9)
    fillNormal(20 + k, w, 0, 0.1)
    inits.set(`w${k}`, tensor("float32", [16, 16, 3, 3], w))
    nodes.push(node("Conv", [x, `w${k}`], [`c${k}`], { kernel_shape: attr.ints([3, 3]), pads: attr.ints([1, 1, 1, 1]) }, `conv${k}`))
    nodes.push(node("Relu", [`c${k}`], [`r${k}`], {}, `relu${k}`))
    x = `r${k}`
  }
  return makeGraph({ name: "slow", opset: 13, inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 16, 64, 64] } }], outputs: [{ name: x, type: { dtype: "float32", shape: [1, 16, 64, 64] } }], initializers: inits, nodes })
}

/** Runs the CLI without waiting; `signal` sent `afterMs` after the start. Its exit, output and how long it took to stop after the signal. */
const tesseraAsync = (args: readonly string[], signal?: { readonly name: NodeJS.Signals; readonly afterMs: number }) =>
  new Promise<{ code: number | null; stdout: string; stderr: string; stopMs: number }>((resolve) => {
    const p = spawn(process.execPath, [main, "quantize", ...args], { cwd: tmp })
    let stdout = ""
    let stderr = ""
    p.stdout.on("data", (d) => (stdout += d))
    p.stderr.on("data", (d) => (stderr += d))
    let sentAt = 0
    if (signal)
      setTimeout(() => {
        sentAt = performance.now()
        p.kill(signal.name)
      }, signal.afterMs)
    p.on("close", (code) => resolve({ code, stdout, stderr, stopMs: sentAt ? performance.now() - sentAt : 0 }))
  })

const oneLine = (stderr: string): string => {
  const lines = stderr.split("\n").filter((l) => l.trim() !== "")
  expect(lines, stderr).toHaveLength(1)
  return lines[0]
}

/** The files of a folder (none left half-written: no temporary file either). */
const filesIn = (dir: string): string[] => (fs.existsSync(dir) ? fs.readdirSync(dir) : [])

const tessera = (...args: string[]) => spawnSync(process.execPath, [main, "quantize", ...args], { cwd: tmp, encoding: "utf8", timeout: 120_000 })
const lastJson = (stdout: string) => JSON.parse(stdout.trim().split("\n").at(-1)!)

describe("tessera quantize", () => {
  it("quantizes on seeded inputs: a QDQ file onnxruntime-node runs, a report table and a JSON line", async () => {
    const r = tessera("cnn.onnx", "--out", "out/cnn.int8.onnx", "--calibrate-seeded", "4", "--per-channel")
    expect(r.stderr).toBe("")
    expect(r.status).toBe(0)
    expect(r.stdout).toMatch(/^node\s+op\s+scale\s+zp\s+clip/)
    expect(r.stdout).toMatch(/conv1 \(\+relu1\)\s+Conv/)
    const s = lastJson(r.stdout)
    expect(s).toMatchObject({ method: "minmax", perChannel: true, calibration: { seeded: 4, seed: 0 }, activations: "int8", weights: "int8", layers: 7 })
    const bytes = fs.readFileSync(path.join(tmp, "out/cnn.int8.onnx"))
    expect(decodeModelSync(bytes).nodes.some((n) => n.op === "QuantizeLinear")).toBe(true)
    const session = await ort.InferenceSession.create(bytes)
    const out = await session.run({ x: new ort.Tensor("float32", randomTensor("float32", [1, 3, 8, 8], 9).data as Float32Array, [1, 3, 8, 8]) })
    expect(out[session.outputNames[0]].dims).toEqual([1, 5])
    await session.release()
  })

  it("calibrates on a folder of .npy files; --format json holds every layer", () => {
    const r = tessera("cnn.onnx", "--out", "a.onnx", "--calibrate", "calib", "--method", "percentile", "--percentile", "99.9", "--format", "json")
    expect(r.status).toBe(0)
    const s = lastJson(r.stdout)
    expect(s.calibration).toEqual({ folder: "calib", inputs: 3 })
    expect(s.percentile).toBe(99.9)
    expect(s.report.layers).toHaveLength(7)
    expect(s.report.layers[0]).toMatchObject({ node: "conv1", op: "Conv", folded: ["relu1"] })
  })

  it("the same command writes the same bytes", () => {
    tessera("cnn.onnx", "--out", "b1.onnx", "--calibrate-seeded", "2", "--method", "entropy")
    tessera("cnn.onnx", "--out", "b2.onnx", "--calibrate-seeded", "2", "--method", "entropy")
    expect(fs.readFileSync(path.join(tmp, "b1.onnx")).equals(fs.readFileSync(path.join(tmp, "b2.onnx")))).toBe(true)
  })

  it.each([
    [["--out", "x.onnx", "--method", "median"], /--method: 'median' is not a calibration method/],
    [["--out", "x.onnx", "--calibrate", "calib", "--calibrate-seeded", "2"], /not both/],
    [["--out", "x.onnx", "--calibrate-seeded", "0"], /--calibrate-seeded: 0 is not a count/],
    [["--out", "x.onnx", "--percentile", "99"], /--percentile: it sets the percentile method's cut/],
    [["--out", "x.onnx", "--method", "percentile", "--percentile", "30"], /--percentile: 30 is not a percentile/],
    [["--out", "x.onnx", "--skip", "nope", "--calibrate-seeded", "1"], /--skip: no node named 'nope'/],
    [["--calibrate-seeded", "1"], /--out: say where to write/],
    [["--out", "x.onnx", "--calibrate", "missing-folder"], /--calibrate: 'missing-folder' is not a folder/],
  ])("a bad command line is a usage error (exit 2, one line): %j", (args, message) => {
    const r = tessera("cnn.onnx", ...args)
    expect(r.status).toBe(2)
    expect(r.stderr.trim().split("\n")).toHaveLength(1)
    expect(r.stderr).toMatch(message)
    expect(fs.existsSync(path.join(tmp, "x.onnx"))).toBe(false)
  })

  it("an unquantizable node in the quantized region fails with a line naming it; --skip quantizes the rest", () => {
    const r = tessera("soft.onnx", "--out", "soft.int8.onnx", "--calibrate-seeded", "1")
    expect(r.status).toBe(1)
    expect(r.stderr).toMatch(/soft\.onnx: 1 node\(s\) in the quantized region have no quantized meaning: 'softsign' \(Softsign\).*--skip softsign/)
    expect(fs.existsSync(path.join(tmp, "soft.int8.onnx"))).toBe(false)
    const ok = tessera("soft.onnx", "--out", "soft.int8.onnx", "--calibrate-seeded", "1", "--skip", "softsign")
    expect(ok.status).toBe(0)
    expect(lastJson(ok.stdout).skipped).toEqual(["softsign"])
  })

  it(`--calibrate-on: wasm (the default) and c write the evaluator's bytes where the float values agree; a network whose sums reassociate gets scales within 1e-5${NO_GCC}`, () => {
    const on = (model: string, where: string, out: string) => {
      const r = tessera(model, "--out", out, "--calibrate-seeded", "3", "--per-channel", ...(where === "auto" ? [] : ["--calibrate-on", where]), "--format", "json")
      expect(r.stderr).toBe("")
      expect(r.status).toBe(0)
      return lastJson(r.stdout)
    }
    expect(on("exact.onnx", "auto", "exact.wasm.onnx").calibratedOn).toBe("wasm")
    expect(on("exact.onnx", "interp", "exact.interp.onnx").calibratedOn).toBe("interp")
    const same = (a: string, b: string) => fs.readFileSync(path.join(tmp, a)).equals(fs.readFileSync(path.join(tmp, b)))
    expect(same("exact.wasm.onnx", "exact.interp.onnx")).toBe(true)
    if (HAVE_GCC) {
      expect(on("exact.onnx", "c", "exact.c.onnx").calibratedOn).toBe("c")
      expect(same("exact.c.onnx", "exact.interp.onnx")).toBe(true)
    }
    // the small CNN's 3×3 convolutions sum in another order when compiled: the same layers, zero
    // points within 1, scales and seen ranges within a relative 1e-5
    const c = on("cnn.onnx", "auto", "cnn.wasm.onnx").report
    const interp = on("cnn.onnx", "interp", "cnn.interp.onnx").report
    expect(c.layers.map((l: { node: string }) => l.node)).toEqual(interp.layers.map((l: { node: string }) => l.node))
    const near = (a: number, b: number) => Math.abs(a - b) <= 1e-5 * Math.max(Math.abs(a), Math.abs(b), 1e-30)
    c.layers.forEach((l: { scale: number; zeroPoint: number; seen: { min: number; max: number } }, k: number) => {
      const m = interp.layers[k]
      expect(near(l.scale, m.scale), `${m.node}: scale ${l.scale} vs ${m.scale}`).toBe(true)
      expect(Math.abs(l.zeroPoint - m.zeroPoint)).toBeLessThanOrEqual(1)
      expect(Math.abs(l.seen.min - m.seen.min)).toBeLessThanOrEqual(1e-5 * (m.seen.max - m.seen.min))
      expect(Math.abs(l.seen.max - m.seen.max)).toBeLessThanOrEqual(1e-5 * (m.seen.max - m.seen.min))
    })
  }, 120_000)

  it("--calibrate-on: a target that is not one, or not here, is a usage error", () => {
    const r = tessera("cnn.onnx", "--out", "x.onnx", "--calibrate-seeded", "1", "--calibrate-on", "cuda")
    expect(r.status).toBe(2)
    expect(oneLine(r.stderr)).toMatch(/--calibrate-on: 'cuda' is not one of auto, c, wasm, js, interp/)
  })

  for (const [sig, code] of [
    ["SIGINT", 130],
    ["SIGTERM", 143],
  ] as const)
    it(`runs under the supervisor: the first ${sig} stops it within a second with one typed line, and no file is left`, async () => {
      const dir = path.join(tmp, `stopped-${sig}`)
      const r = await tesseraAsync(["slow.onnx", "--out", path.join(dir, "slow.int8.onnx"), "--calibrate-seeded", "500", "--calibrate-on", "interp"], { name: sig, afterMs: 2500 })
      expect(oneLine(r.stderr)).toMatch(new RegExp(`^tessera quantize: (.*slow\\.onnx: )?interrupted \\(${sig}\\): (stopped at |the work did not stop at a check|before the work started$)`))
      expect(r.code).toBe(code)
      expect(r.stopMs).toBeLessThan(1000 + 500) // (a second, and a margin for a machine shared with other work)
      expect(filesIn(dir)).toEqual([])
    }, 30_000)

  it("--deadline stops it (exit 124, one line, no file); a --deadline that is not a duration is a usage error", async () => {
    const dir = path.join(tmp, "deadline")
    const r = await tesseraAsync(["slow.onnx", "--out", path.join(dir, "slow.int8.onnx"), "--calibrate-seeded", "500", "--calibrate-on", "interp", "--deadline", "2s"])
    expect(oneLine(r.stderr)).toMatch(/^tessera quantize: (.*slow\.onnx: )?interrupted \(the --deadline of 2s passed\): (stopped at |the work did not stop at a check|before the work started$)/)
    expect(r.code).toBe(124)
    expect(filesIn(dir)).toEqual([])
    const bad = tessera("cnn.onnx", "--out", "x.onnx", "--deadline", "soon")
    expect(bad.status).toBe(2)
    expect(oneLine(bad.stderr)).toMatch(/^tessera quantize: --deadline: 'soon' is not a duration/)
  }, 30_000)
})
