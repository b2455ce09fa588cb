// `tessera quantize MODEL.onnx --out MODEL.int8.onnx [--calibrate DIR | --calibrate-seeded N]
// [--per-channel] [--method minmax|percentile|entropy] [--percentile P] [--skip NODE]…
// [--calibrate-on auto|c|wasm|js|interp] [--deadline D]`: calibrates on the .npy files of a folder
// or on seeded random inputs (a progress bar on a terminal), running the fp32 model compiled for a
// target (quantize-runner.ts), writes the QDQ model (atomically: a temporary file renamed at the
// end, so a stopped run leaves none) and prints the per-layer report: a table and a one-line JSON
// summary, or with --format json one JSON object with every layer. It runs under the supervisor as
// run and compile do: SIGINT, SIGTERM and --deadline stop it with one typed line.
import cliProgress from "cli-progress"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { checkInterrupt, type Interrupt } from "../ast/graph/errors.js"
import type { Tensor } from "../ast/graph/tensor.js"
import { ensureFolderSync, readModel, readNpySync, safeFileName, writeFileAtomic } from "../device/files.js"
import { CALIBRATION_METHODS, DEFAULT_PERCENTILE, quantizeModel, QuantizeOptionError, type CalibrationMethod, type QuantizeProgress, type QuantizeReport } from "../rewrite/quantize/index.js"
import { attempt, UsageError } from "./errors.js"
import { parseDims, planInputs, randomTensor, splitAssignment } from "./inputs.js"
import { calibrationTarget, quantizeRunner } from "./quantize-runner.js"

export const QUANTIZE_FORMATS = ["text", "json"] as const
/** Seeded calibration inputs when neither --calibrate nor --calibrate-seeded is given. */
export const DEFAULT_SEEDED_INPUTS = 32

export interface QuantizeCommandOptions {
  readonly model: string
  readonly out?: string
  readonly calibrate?: string
  readonly calibrateSeeded?: number
  readonly perChannel: boolean
  readonly method: string
  readonly percentile?: number
  /** Node names; each flag may also hold several, comma-separated. */
  readonly skip: readonly string[]
  readonly shapes: readonly string[]
  readonly seed: number
  readonly format: (typeof QUANTIZE_FORMATS)[number]
  /** Draw a progress bar on stderr (a terminal). */
  readonly progress: boolean
  /** Where the graphs run: auto (the first compiled target here), c, wasm, js or interp. */
  readonly calibrateOn: string
  /** Threads the compiled model's kernels run on (c). */
  readonly threads: number
  /** The supervisor's stop flag (SIGINT, SIGTERM, --deadline). */
  readonly interrupt?: Interrupt
}

const isMethod = (m: string): m is CalibrationMethod => (CALIBRATION_METHODS as readonly string[]).includes(m)

/** The calibration inputs of a folder: one .npy per input for a one-input model, else a folder per input set holding NAME.npy. */
const readCalibrationFolder = (dir: string, inputs: readonly string[]): ReadonlyMap<string, Tensor>[] => {
  let entries: fs.Dirent[]
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true })
  } catch {
    throw new UsageError({ flag: "--calibrate", reason: `'${dir}' is not a folder that can be read` })
  }
  const byName = (a: fs.Dirent, b: fs.Dirent) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
  if (inputs.length === 1) {
    const files = entries.filter((e) => e.isFile() && e.name.endsWith(".npy")).sort(byName)
    if (!files.length) throw new UsageError({ flag: "--calibrate", reason: `'${dir}' holds no .npy files (one per calibration input of '${inputs[0]}')` })
    return files.map((f) => new Map([[inputs[0], readNpySync(path.join(dir, f.name))]]))
  }
  const sets = entries.filter((e) => e.isDirectory()).sort(byName)
  if (!sets.length)
    throw new UsageError({ flag: "--calibrate", reason: `the model has ${inputs.length} inputs: '${dir}' needs a folder per calibration set, each with ${inputs.map((i) => `${safeFileName(i)}.npy`).join(", ")}` })
  return sets.map((s) => new Map(inputs.map((i) => [i, readNpySync(path.join(dir, s.name, `${safeFileName(i)}.npy`))] as const)))
}

const fixed = (x: number, d = 4): string => (Number.isFinite(x) ? (Math.abs(x) >= 1e4 || (Math.abs(x) < 1e-3 && x !== 0) ? x.toExponential(2) : x.toFixed(d)) : String(x))

/** The report as a table (one row per quantized layer). */
export const quantizeTable = (r: QuantizeReport): string => {
  const head = ["node", "op", "scale", "zp", "clip", "seen", "w scale", "SQNR dB", "rel err"]
  const rows = r.layers.map((l) => [
    l.node + (l.folded ? ` (+${l.folded.join(", ")})` : ""),
    l.op,
    fixed(l.scale, 6),
    String(l.zeroPoint),
    `[${fixed(l.clip.min, 3)}, ${fixed(l.clip.max, 3)}]`,
    `[${fixed(l.seen.min, 3)}, ${fixed(l.seen.max, 3)}]`,
    l.weightScales ? (l.weightScales.count > 1 ? `${fixed(l.weightScales.min, 6)}..${fixed(l.weightScales.max, 6)}` : fixed(l.weightScales.min, 6)) : "",
    fixed(l.sqnrDb, 1),
    fixed(l.relError, 4),
  ])
  const widths = head.map((h, k) => Math.max(h.length, ...rows.map((row) => row[k].length)))
  const line = (cells: readonly string[]) => cells.map((c, k) => c.padEnd(widths[k])).join("  ").trimEnd()
  const out = [line(head), ...rows.map(line)]
  for (const o of r.outputs) out.push(`output ${o.name}: SQNR ${fixed(o.sqnrDb, 1)} dB, relative error ${fixed(o.relError, 4)} against fp32 (${r.errorInputs} input(s))`)
  if (r.skipped.length) out.push(`left float (--skip): ${r.skipped.join(", ")}`)
  return out.join("\n")
}

export const quantizeCommand = Effect.fn("cli.quantize")(function* (o: QuantizeCommandOptions) {
  if (o.out === undefined) return yield* new UsageError({ flag: "--out", reason: "say where to write the quantized model: --out MODEL.int8.onnx" })
  const out = o.out
  if (!isMethod(o.method)) return yield* new UsageError({ flag: "--method", reason: `'${o.method}' is not a calibration method (${CALIBRATION_METHODS.join(", ")})` })
  const method = o.method
  if (o.calibrate !== undefined && o.calibrateSeeded !== undefined)
    return yield* new UsageError({ flag: "--calibrate-seeded", reason: "give --calibrate DIR or --calibrate-seeded N, not both" })
  if (o.calibrateSeeded !== undefined && !(Number.isInteger(o.calibrateSeeded) && o.calibrateSeeded >= 1))
    return yield* new UsageError({ flag: "--calibrate-seeded", reason: `${o.calibrateSeeded} is not a count of inputs (1 or more)` })
  if (o.percentile !== undefined && method !== "percentile")
    return yield* new UsageError({ flag: "--percentile", reason: `it sets the percentile method's cut; this run uses --method ${method}` })
  const percentile = o.percentile ?? DEFAULT_PERCENTILE
  if (!(percentile > 50 && percentile <= 100)) return yield* new UsageError({ flag: "--percentile", reason: `${percentile} is not a percentile in (50, 100]` })
  const skip = o.skip.flatMap((s) => s.split(",")).map((s) => s.trim()).filter((s) => s !== "")
  const on = yield* calibrationTarget(o.calibrateOn)

  const graph = yield* readModel(o.model)
  const calibration = yield* attempt(() => {
    if (o.calibrate !== undefined) return readCalibrationFolder(o.calibrate, graph.inputs.map((i) => i.name))
    const shapes = new Map(o.shapes.map((spec) => {
      const { name, value } = splitAssignment(spec, "--shape")
      return [name, parseDims(value, "--shape")] as const
    }))
    const plan = planInputs(graph, new Map(), shapes)
    const n = o.calibrateSeeded ?? DEFAULT_SEEDED_INPUTS
    return Array.from({ length: n }, (_, k) => new Map(plan.map((p, i) => [p.name, randomTensor(p.dtype, p.shape, o.seed + k, i)] as const)))
  })

  const bar = o.progress ? new cliProgress.SingleBar({ stream: process.stderr, format: "{phase} {bar} {value}/{total} inputs | {duration_formatted} elapsed | ETA {eta_formatted}", hideCursor: false }, cliProgress.Presets.shades_classic) : undefined
  let phase = ""
  const onProgress = (p: QuantizeProgress) => {
    if (!bar) return
    if (p.phase !== phase) {
      if (phase) bar.stop()
      phase = p.phase
      bar.start(p.total, 0, { phase: p.phase.padEnd(9) })
    }
    bar.update(p.done)
  }
  const onCompile = (which: string) => {
    if (!bar) return
    if (phase) bar.stop()
    phase = ""
    process.stderr.write(`compiling the ${which === "qdq" ? "QDQ" : "fp32"} model for ${on}\n`)
  }
  const interrupt = o.interrupt ? { interrupt: o.interrupt } : {}
  if (!(Number.isInteger(o.threads) && o.threads >= 1)) return yield* new UsageError({ flag: "--threads", reason: `${o.threads} is not a count of threads (1 or more)` })
  const runner = quantizeRunner(on, o.threads, o.interrupt, onCompile)
  const result = yield* quantizeModel(graph, calibration, { method, percentile, perChannel: o.perChannel, skip, onProgress, ...interrupt }, runner).pipe(
    Effect.ensuring(Effect.sync(() => bar?.stop())),
    Effect.catchTag("QuantizeOptionError", (e: QuantizeOptionError): Effect.Effect<never, QuantizeOptionError | UsageError> =>
      e.option === "skip" || e.option === "percentile" ? Effect.fail(new UsageError({ flag: `--${e.option}`, reason: e.reason })) : Effect.fail(e),
    ),
  )
  // (a stop asked for now still leaves no file)
  yield* attempt(() => checkInterrupt(o.interrupt, () => `writing ${out}`))
  yield* attempt(() => ensureFolderSync(path.dirname(path.resolve(out))))
  yield* writeFileAtomic(out, result.bytes)
  const r = result.report
  const summary = {
    model: o.model,
    out,
    bytes: result.bytes.length,
    method: r.method,
    ...(r.percentile !== undefined ? { percentile: r.percentile } : {}),
    perChannel: r.perChannel,
    calibration: o.calibrate !== undefined ? { folder: o.calibrate, inputs: r.calibrationInputs } : { seeded: r.calibrationInputs, seed: o.seed },
    calibratedOn: on,
    activations: r.activationType,
    weights: r.weightType,
    layers: r.layers.length,
    skipped: r.skipped,
    outputs: r.outputs.map((x) => ({ name: x.name, sqnrDb: Number(x.sqnrDb.toFixed(2)), relError: Number(x.relError.toFixed(5)) })),
  }
  return o.format === "json" ? JSON.stringify({ ...summary, report: r }) : `${quantizeTable(r)}\n${JSON.stringify(summary)}`
})
