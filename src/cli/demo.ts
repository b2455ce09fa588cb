// `tessera demo`: the README's main job. Builds zoo networks in memory (seeded weights), compiles
// each for the c target (the js target where no C compiler is installed) and runs it, runs it through the reference interpreter too, and through
// onnxruntime-node (when installed), and prints a small table: time on each side, the largest
// absolute difference, and whether the top-5 classes agree.
import { Data, Effect, Result } from "effect"
import type { TargetKind } from "../ast/target.js"
import { BACKENDS } from "../backend/index.js"
import type { Graph } from "../ast/graph/graph.js"
import type { Tensor } from "../ast/graph/tensor.js"
import { decodeModelSync } from "../ast/onnx/decode.js"
import { loadOrt, median, runOrt } from "../device/onnxruntime.js"
import { maxAbsDiff } from "./bench.js"
import { attempt } from "./errors.js"
import { planInputs, randomTensor } from "./inputs.js"
import { prepare, targetSettings } from "./targets.js"
export interface DemoOptions {
  /** Models by zoo name. */
  readonly models: readonly string[]
  readonly seed: number
  /** The interpreter's timed runs (median reported); 1 = a single run, no warm-up. */
  readonly runs: number
  /** Timed runs of the compiled target and of onnxruntime, each after a warm-up (median reported). */
  readonly compiledRuns: number
  /** Builds a zoo model's bytes. */
  readonly build: (name: string, seed: number) => Uint8Array
}

/** The compiled target the demo runs: c where gcc is installed, else the portable js target. */
export const DEMO_TARGET: TargetKind = BACKENDS.c.unavailable() === undefined ? "c" : "js"

/** Some demo models could not be run through Tessera (each row says why). */
export class DemoError extends Data.TaggedError("DemoError")<{ readonly failed: readonly string[] }> {
  override get message(): string {
    return `${this.failed.join(", ")} could not run through Tessera (see the table above for why)`
  }
}

export interface DemoRow {
  readonly model: string
  /** Why Tessera could not run it (the other fields are then empty). */
  readonly error?: string
  /** Median time of the js target's run (ms). */
  readonly jsMs: number
  /** The reference interpreter's time (ms). */
  readonly interpMs: number
  readonly ortMs: number | null
  /** Largest |js - onnxruntime| (|js - interp| without onnxruntime). */
  readonly maxAbsDiff: number | null
  /** Largest |js - interp|. */
  readonly interpDiff: number
  readonly top5: { readonly ours: readonly number[]; readonly ort: readonly number[] | null; readonly agree: boolean | null }
}

/** Indices of the k largest values of the first row (batch 0) of a logits tensor. */
export const topK = (t: { readonly data: ArrayLike<number>; readonly shape: readonly number[] }, k = 5): number[] => {
  const row = t.shape.length ? t.shape[t.shape.length - 1] : t.data.length
  const idx = Array.from({ length: Math.min(row, t.data.length) }, (_, i) => i)
  return idx.sort((a, b) => t.data[b] - t.data[a] || a - b).slice(0, k)
}

/** Feeds for a model: symbolic dims bound to 1 (batch 1), seeded random values. */
const feedsFor = (graph: Graph, seed: number): Map<string, Tensor> => {
  const shapes = new Map(graph.inputs.map((i) => [i.name, i.type.shape.map((d) => (typeof d === "number" ? d : 1))] as const))
  const plan = planInputs(graph, new Map(), shapes)
  return new Map(plan.map((p, k) => [p.name, randomTensor(p.dtype, p.shape, seed, k)]))
}

/** Median time of `runs` runs after one warm-up (runs 1: the single run's time). */
const timeRuns = (runs: number, f: () => Map<string, Tensor>): { result: Map<string, Tensor>; ms: number } => {
  const t0 = performance.now()
  let result = f()
  if (runs <= 1) return { result, ms: performance.now() - t0 }
  const times: number[] = []
  for (let i = 0; i < runs; i++) {
    const t = performance.now()
    result = f()
    times.push(performance.now() - t)
  }
  return { result, ms: median(times) }
}

/**
 * Compiles for a target and times the runs. A compiled target gets one untimed run first even for
 * a single timed run, as onnxruntime gets its warm-up (the first run pays for first touches of
 * its buffers: the single cold run read 49 ms where warm ones take 25-45); the interpreter, whose
 * one run takes seconds, does not.
 */
const runOn = (kind: TargetKind, graph: Graph, feeds: ReadonlyMap<string, Tensor>, runs: number) =>
  Effect.gen(function* () {
    const shapes = new Map([...feeds].map(([n, t]) => [n, t.shape] as const))
    const model = yield* prepare(graph, { settings: targetSettings(kind), optLevel: 3, shapes, trace: false })
    if (kind !== "interp" && runs <= 1) yield* attempt(() => model.run(feeds))
    return yield* attempt(() => timeRuns(runs, () => model.run(feeds)))
  })

export const demo = Effect.fn("cli.demo")(function* (o: DemoOptions, log: (line: string) => Effect.Effect<void>) {
  const ort = yield* loadOrt()
  if (typeof ort === "string") yield* log(ort)
  const rows: DemoRow[] = []
  for (const name of o.models) {
    const attemptRun = Effect.gen(function* () {
      const bytes = yield* attempt(() => o.build(name, o.seed))
      const graph = yield* attempt(() => decodeModelSync(bytes))
      const feeds = yield* attempt(() => feedsFor(graph, o.seed))
      const js = yield* runOn(DEMO_TARGET, graph, feeds, o.compiledRuns)
      const interp = yield* runOn("interp", graph, feeds, o.runs)
      return { bytes, graph, feeds, js, interp }
    })
    const tried = yield* Effect.result(attemptRun)
    if (Result.isFailure(tried)) {
      rows.push({ model: name, error: tried.failure.message, jsMs: NaN, interpMs: NaN, ortMs: null, maxAbsDiff: null, interpDiff: NaN, top5: { ours: [], ort: null, agree: null } })
      continue
    }
    const { bytes, graph, feeds, js, interp } = tried.success
    const first = graph.outputs[0].name
    const ours = js.result.get(first)!
    const oursTop = topK(ours)
    const interpDiff = maxAbsDiff(js.result, new Map([...interp.result].map(([k, t]) => [k, { data: Float64Array.from(t.data as ArrayLike<number>) }] as const)))
    const base = { model: name, jsMs: js.ms, interpMs: interp.ms, interpDiff }
    const theirs = typeof ort === "string" ? ort : yield* runOrt(ort, bytes, feeds, { threads: 0, runs: Math.max(o.compiledRuns, 1) })
    if (typeof theirs === "string") {
      if (typeof ort !== "string") yield* log(`${name}: ${theirs}`)
      rows.push({ ...base, ortMs: null, maxAbsDiff: interpDiff, top5: { ours: oursTop, ort: null, agree: null } })
      continue
    }
    const ortOut = theirs.outputs.get(first)!
    const ortTop = topK(ortOut)
    rows.push({
      ...base,
      ortMs: theirs.ms,
      maxAbsDiff: maxAbsDiff(js.result, theirs.outputs),
      top5: { ours: oursTop, ort: ortTop, agree: ortTop.every((c, k) => c === oursTop[k]) },
    })
  }
  return rows
})

/** Fails with DemoError when a model could not run through Tessera. */
export const demoOutcome = (rows: readonly DemoRow[]): Effect.Effect<void, DemoError> => {
  const failed = rows.filter((r) => r.error !== undefined).map((r) => r.model)
  return failed.length ? Effect.fail(new DemoError({ failed })) : Effect.void
}

const fmtMs = (ms: number | null) => (ms === null || Number.isNaN(ms) ? "-" : ms >= 100 ? ms.toFixed(0) : ms.toFixed(2))

/** The table the demo prints. */
export const demoTable = (rows: readonly DemoRow[]): string => {
  const header = ["model", `tessera ${DEMO_TARGET} (ms)`, "interp (ms)", "onnxruntime (ms)", "max |diff|", "top-5 agree"]
  const body = rows.map((r) =>
    r.error !== undefined ? [r.model, `failed: ${r.error}`, "", "", "", ""] : [
    r.model,
    fmtMs(r.jsMs),
    fmtMs(r.interpMs),
    fmtMs(r.ortMs),
    r.maxAbsDiff === null ? "-" : r.maxAbsDiff.toExponential(2),
    r.top5.agree === null ? `- (ours ${r.top5.ours.join(",")})` : r.top5.agree ? `yes (${r.top5.ours.join(",")})` : `NO (ours ${r.top5.ours.join(",")}, ort ${r.top5.ort?.join(",")})`,
  ])
  // a failed row's message runs past the columns instead of widening them
  const sized = body.filter((_, i) => rows[i].error === undefined)
  const widths = header.map((h, k) => Math.max(h.length, ...(k === 0 ? body : sized).map((b) => b[k].length)))
  const line = (cells: readonly string[]) => cells.map((c, k) => c.padEnd(widths[k])).join("  ").trimEnd()
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...body.map(line)].join("\n")
}
