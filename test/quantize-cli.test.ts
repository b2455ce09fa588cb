// `tessera quantize` as users run it (built into .cache/quantize-cli, so that it does not race
// the other CLI tests' dist/): seeded and folder calibration, the file onnxruntime-node runs, the
// report, and the typed one-line errors of bad flags and of an unquantizable node.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as ort from "onnxruntime-node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { node } from "../src/ast/graph/graph.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { randomTensor } from "../src/cli/inputs.js"
import { serializeNpy } from "../src/device/npy.js"
import { smallCnn } from "./support/quantize-models.js"

const ROOT = path.resolve(import.meta.dirname, "..")
/** Inside the repository, so the bundle finds node_modules (ignored by git). */
const BUILD = path.join(ROOT, ".cache", "quantize-cli")
let tmp = ""
let main = ""

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-quantize-cli-"))
  const b = spawnSync(process.execPath, ["scripts/build.mjs", "--outdir", BUILD], { cwd: ROOT, encoding: "utf8" })
  if (b.status !== 0) throw new Error(`build failed: ${b.stderr}`)
  main = path.join(BUILD, "cli", "main.js")
  fs.writeFileSync(path.join(tmp, "cnn.onnx"), encodeOnnx(smallCnn()))
  fs.writeFileSync(path.join(tmp, "soft.onnx"), encodeOnnx(smallCnn((x) => ({ nodes: [node("Softsign", [x], ["soft"], {}, "softsign")], out: "soft" }))))
  fs.mkdirSync(path.join(tmp, "calib"))
  for (let k = 0; k < 3; k++) fs.writeFileSync(path.join(tmp, "calib", `x${k}.npy`), serializeNpy(randomTensor("float32", [1, 3, 8, 8], 50 + k)))
})
afterAll(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true })
})

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
})
