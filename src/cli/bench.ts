// `tessera bench MODEL.onnx --target T [--tuned LOG] [--threads N] [--runs N] [--format json]`:
// median latency after a warm-up, with onnxruntime-node beside it in the same process (same
// inputs, intraOpNumThreads = threads, the two sides' runs alternating) when it is installed, and
// the ratio of the two.
import { Effect } from "effect"
import type { Interrupt } from "../ast/graph/errors.js"
import type { Tensor } from "../ast/graph/tensor.js"
import { readBytesSync, readModel } from "../device/files.js"
import { alternateRuns, loadOrt, median, openOrtSession } from "../device/onnxruntime.js"
import { attempt, attemptAsync, UsageError } from "./errors.js"
import { boundShapes } from "./compile.js"
import { randomTensor } from "./inputs.js"
import { parseOptLevel, parseTarget, prepare, readTuned, targetSettings, tuningLines, type Prepared } from "./targets.js"

export const BENCH_FORMATS = ["text", "json"] as const

export interface BenchOptions {
  readonly model: string
  readonly target: string
  readonly tuned?: string
  readonly threads: number
  readonly runs: number
  readonly optLevel: number
  readonly shapes: readonly string[]
  readonly seed: number
  readonly format: (typeof BENCH_FORMATS)[number]
  /** Progress and the tuning report (stderr). */
  readonly log: (line: string) => Effect.Effect<void>
  /** The supervisor's stop flag (SIGINT, SIGTERM, --deadline): checked by compile and by each of our runs. */
  readonly interrupt?: Interrupt
}

export interface BenchResult {
  readonly model: string
  readonly target: string
  readonly threads: number
  readonly median_ms: number
  readonly runs: number
  readonly onnxruntime_ms: number | null
  /** Ours over onnxruntime's (below 1: Tessera is faster). */
  readonly ratio: number | null
  readonly compile_ms: number
  /** Largest |ours - onnxruntime| over the outputs. */
  readonly max_abs_diff: number | null
  /** Why onnxruntime is missing from the comparison. */
  readonly onnxruntime_error?: string
  /**
   * Where the device times them apart (cuda): the median ms of the model's kernels alone, launched
   * back to back between two events on the last run's buffers — without the copies in and out and
   * the synchronize after every kernel that `median_ms` counts.
   */
  readonly kernel_ms?: number
}

const WARMUP = 2

const round3 = (x: number) => Math.round(x * 1000) / 1000

/** Largest absolute difference between our outputs and onnxruntime's (Infinity on a shape mismatch). */
export const maxAbsDiff = (ours: ReadonlyMap<string, Tensor>, theirs: ReadonlyMap<string, { readonly data: ArrayLike<number> }>): number => {
  let d = 0
  for (const [name, t] of ours) {
    const o = theirs.get(name)
    if (!o) continue
    if (o.data.length !== t.data.length) return Infinity
    for (let i = 0; i < o.data.length; i++) {
      const x = Math.abs(Number(t.data[i]) - o.data[i])
      if (x > d || Number.isNaN(x)) d = Number.isNaN(x) ? Infinity : x
    }
  }
  return d
}

export const benchCommand = Effect.fn("cli.bench")(function* (o: BenchOptions) {
  const kind = yield* parseTarget(o.target)
  const optLevel = yield* parseOptLevel(o.optLevel)
  if (!Number.isInteger(o.threads) || o.threads < 1) return yield* new UsageError({ flag: "--threads", reason: `${o.threads} is not a thread count (1 or more)` })
  if (!Number.isInteger(o.runs) || o.runs < 1) return yield* new UsageError({ flag: "--runs", reason: `${o.runs} is not a run count (1 or more)` })
  const settings = targetSettings(kind, o.threads)
  const graph = yield* readModel(o.model)
  const shapes = yield* boundShapes(graph, o.shapes)
  const feeds = new Map(graph.inputs.map((i, k) => [i.name, randomTensor(i.type.dtype, shapes.get(i.name)!, o.seed, k)] as const))
  const tuned = o.tuned !== undefined ? yield* readTuned(o.tuned, settings) : undefined
  if (tuned) for (const w of tuned.warnings) yield* o.log(`tessera bench: ${o.tuned}: ${w}`)
  const model = yield* prepare(graph, { settings, optLevel, shapes, trace: false, ...(tuned ? { tuned: tuned.best } : {}), ...(o.interrupt ? { interrupt: o.interrupt } : {}) })
  if (tuned && o.tuned !== undefined) for (const line of tuningLines(o.tuned, tuned, model.program?.tuning)) yield* o.log(line)
  let outs = yield* attempt(() => model.run(feeds))
  for (let i = 1; i < WARMUP; i++) outs = yield* attempt(() => model.run(feeds))
  const ort = yield* loadOrt()
  const session = typeof ort === "string" ? ort : yield* openOrtSession(ort, yield* attempt(() => readBytesSync(o.model)), feeds, o.threads)
  // the two sides alternate (alternateRuns): a shared machine's slow spells (another tenant on
  // the core, a lower clock) fall on both alike, not on whichever side happened to run during them
  const timed = yield* attemptAsync(() =>
    alternateRuns(() => void (outs = model.run(feeds)), typeof session === "string" ? undefined : session, o.runs),
  ).pipe(Effect.ensuring(typeof session === "string" ? Effect.void : Effect.promise(session.release)))
  const ours = median(timed.ours)
  const timeKernels = (model as Prepared).kernelMs
  const kernelMs = timeKernels ? yield* attempt(timeKernels) : undefined
  const theirs = typeof session === "string" ? session : { ms: median(timed.theirs), outputs: session.outputs() }
  const result: BenchResult = {
    model: o.model,
    target: kind,
    threads: o.threads,
    median_ms: round3(ours),
    runs: o.runs,
    onnxruntime_ms: typeof theirs === "string" ? null : round3(theirs.ms),
    ratio: typeof theirs === "string" ? null : Math.round((ours / theirs.ms) * 1000) / 1000,
    compile_ms: round3(model.compileMs),
    max_abs_diff: typeof theirs === "string" ? null : maxAbsDiff(outs, theirs.outputs),
    ...(typeof theirs === "string" ? { onnxruntime_error: theirs } : {}),
    ...(kernelMs !== undefined ? { kernel_ms: round3(kernelMs) } : {}),
  }
  return result
})

const fmt = (x: number | null, digits = 3) => (x === null ? "-" : x.toFixed(digits))

/** The human form: one table row per side, and the ratio. */
export const benchText = (r: BenchResult): string => {
  const rows = [
    ["side", "median (ms)", "runs", "threads"],
    [`tessera ${r.target}`, fmt(r.median_ms), String(r.runs), String(r.threads)],
    ["onnxruntime-node", fmt(r.onnxruntime_ms), r.onnxruntime_ms === null ? "-" : String(r.runs), String(r.threads)],
  ]
  const w = rows[0].map((_, k) => Math.max(...rows.map((row) => row[k].length)))
  const lines = [`bench ${r.model} (compiled in ${fmt(r.compile_ms, 0)} ms)`, ...rows.map((row) => row.map((c, k) => c.padEnd(w[k])).join("  ").trimEnd())]
  if (r.kernel_ms !== undefined) lines.push(`tessera ${r.target} kernels alone: ${fmt(r.kernel_ms)} ms (launched back to back between two events: no copies, no synchronize after each kernel)`)
  if (r.onnxruntime_error) lines.push(r.onnxruntime_error)
  else lines.push(`ratio tessera / onnxruntime: ${fmt(r.ratio)}${r.ratio !== null ? (r.ratio < 1 ? " (Tessera faster)" : " (onnxruntime faster)") : ""}; max |diff| ${r.max_abs_diff === null ? "-" : r.max_abs_diff.toExponential(2)}`)
  return lines.join("\n")
}
