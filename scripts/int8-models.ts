// The int8 networks the int8 benchmark and accuracy script share: a zoo network quantized by
// Tessera's own pass as the issue measures it (QDQ, per-channel weights, minmax on 32 seeded
// calibration inputs), written to a folder (`--int8-dir DIR` keeps them between runs: a file
// already there is reused, and the line printed says so).
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { randomTensor } from "../src/cli/inputs.js"
import { quantizeModelSync, type QuantizeReport } from "../src/rewrite/quantize/index.js"
import { zooGraph } from "../src/zoo/index.js"

export const INT8_MODELS = ["resnet18", "mobilenetv2"] as const
export const CALIBRATION_INPUTS = 32
/** Calibration draws seeds 0..31; measured inputs start here, so none was calibrated on. */
export const MEASURE_SEED = 1000

/** Seeded inputs of a zoo network (its one input). */
export const zooInputs = (name: string, count: number, seed: number): ReadonlyMap<string, Tensor>[] => {
  const input = zooGraph(name, 0).inputs[0]
  return Array.from({ length: count }, (_, k) => new Map([[input.name, randomTensor("float32", input.type.shape as number[], seed + k)]]))
}

export const int8Folder = (args: readonly string[]): string => {
  const i = args.indexOf("--int8-dir")
  const dir = i >= 0 ? path.resolve(args[i + 1]) : fs.mkdtempSync(path.join(os.tmpdir(), "tessera-int8-"))
  fs.mkdirSync(dir, { recursive: true })
  return dir
}

/** The int8 file of a zoo network in `dir`, quantized now unless it is there already. */
export const int8Model = (name: string, dir: string, log: (line: string) => void): string => {
  const file = path.join(dir, `${name}.int8.onnx`)
  if (fs.existsSync(file)) {
    log(`${name}: reusing ${file}`)
    return file
  }
  const t0 = performance.now()
  const r = quantizeModelSync(zooGraph(name, 0), zooInputs(name, CALIBRATION_INPUTS, 0), { method: "minmax", perChannel: true })
  fs.writeFileSync(`${file}.tmp`, r.bytes)
  fs.renameSync(`${file}.tmp`, file)
  fs.writeFileSync(path.join(dir, `${name}.report.json`), JSON.stringify(r.report, null, 1))
  log(`${name}: quantized (QDQ, per-channel, minmax, ${CALIBRATION_INPUTS} seeded inputs) in ${((performance.now() - t0) / 1000).toFixed(0)} s: ${summary(r.report)} → ${file}`)
  return file
}

const summary = (r: QuantizeReport): string => r.outputs.map((o) => `output ${o.name} SQNR ${o.sqnrDb.toFixed(1)} dB against fp32`).join(", ")
