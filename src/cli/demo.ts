// `tessera demo`: the README's main job. Builds zoo networks in memory (seeded weights), runs each
// through Tessera and through onnxruntime-node (when installed), and prints a small table: time on
// each side, the largest absolute difference, and whether the top-5 classes agree.
import { Data, Effect, Result } from "effect"
import { runGraph } from "../ast/graph/evaluate.js"
import type { Graph } from "../ast/graph/graph.js"
import type { Tensor } from "../ast/graph/tensor.js"
import { decodeModelSync } from "../ast/onnx/decode.js"
import { attempt } from "./errors.js"
import { planInputs, randomTensor } from "./inputs.js"

export interface DemoOptions {
  /** Models by zoo name. */
  readonly models: readonly string[]
  readonly seed: number
  /** Timed runs per side (median reported); 1 = a single run, no warm-up. */
  readonly runs: number
  /** Builds a zoo model's bytes. */
  readonly build: (name: string, seed: number) => Uint8Array
}

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
  readonly ourMs: number
  readonly ortMs: number | null
  readonly maxAbsDiff: number | null
  readonly top5: { readonly ours: readonly number[]; readonly ort: readonly number[] | null; readonly agree: boolean | null }
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
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

const timeRuns = <A>(runs: number, f: () => A): { result: A; ms: number } => {
  let result = f() // the first run is the warm-up when timing several
  if (runs <= 1) return { result, ms: NaN }
  const times: number[] = []
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now()
    result = f()
    times.push(performance.now() - t0)
  }
  return { result, ms: median(times) }
}

type Ort = typeof import("onnxruntime-node")

/** onnxruntime-node, or a reason it cannot be used. */
const loadOrt = (): Effect.Effect<Ort | string> =>
  Effect.promise(() =>
    import("onnxruntime-node").then(
      (m) => m as Ort,
      (e: unknown) => `onnxruntime-node is not available (${e instanceof Error ? e.message.split("\n")[0] : String(e)}); install it with 'npm install onnxruntime-node' to compare`,
    ),
  )

const ORT_TYPES: { readonly [d: string]: string } = {
  float32: "float32",
  float64: "float64",
  int8: "int8",
  int16: "int16",
  int32: "int32",
  uint8: "uint8",
  uint16: "uint16",
  uint32: "uint32",
  bool: "bool",
}

const toOrtTensor = (ort: Ort, t: Tensor) => {
  const type = ORT_TYPES[t.dtype]
  if (t.dtype === "int64") return new ort.Tensor("int64", BigInt64Array.from(t.data, (x) => BigInt(x)), t.shape)
  if (!type) throw new Error(`the demo cannot hand ${t.dtype} inputs to onnxruntime`)
  return new ort.Tensor(type as "float32", t.data as Float32Array, t.shape)
}

/** Runs the model in onnxruntime: its first output and median time, or why it could not. */
const runOrt = (ort: Ort, bytes: Uint8Array, graph: Graph, feeds: ReadonlyMap<string, Tensor>, runs: number) =>
  Effect.tryPromise({
    catch: (e) => `onnxruntime failed: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`,
    try: async () => {
      const session = await ort.InferenceSession.create(bytes, { graphOptimizationLevel: "all" })
      const ortFeeds = Object.fromEntries([...feeds].map(([k, t]) => [k, toOrtTensor(ort, t)]))
      const outName = graph.outputs[0].name
      const once = async () => (await session.run(ortFeeds))[outName]
      let out = await once()
      const times: number[] = []
      for (let i = 0; i < Math.max(runs, 1); i++) {
        const t0 = performance.now()
        out = await once()
        times.push(performance.now() - t0)
      }
      await session.release()
      return { data: Array.from(out.data as ArrayLike<number>, Number), shape: [...out.dims], ms: median(times) }
    },
  }).pipe(Effect.catch((reason) => Effect.succeed(reason)))

export const demo = Effect.fn("cli.demo")(function* (o: DemoOptions, log: (line: string) => Effect.Effect<void>) {
  const ort = yield* loadOrt()
  if (typeof ort === "string") yield* log(ort)
  const rows: DemoRow[] = []
  for (const name of o.models) {
    const attemptRun = Effect.gen(function* () {
      const bytes = yield* attempt(() => o.build(name, o.seed))
      const graph = yield* attempt(() => decodeModelSync(bytes))
      const feeds = yield* attempt(() => feedsFor(graph, o.seed))
      const t0 = performance.now()
      const ours = yield* attempt(() => timeRuns(o.runs, () => runGraph(graph, feeds)[0]))
      return { bytes, graph, feeds, ours, ourMs: o.runs > 1 ? ours.ms : performance.now() - t0 }
    })
    const tried = yield* Effect.result(attemptRun)
    if (Result.isFailure(tried)) {
      rows.push({ model: name, error: tried.failure.message, ourMs: NaN, ortMs: null, maxAbsDiff: null, top5: { ours: [], ort: null, agree: null } })
      continue
    }
    const { bytes, graph, feeds, ours, ourMs } = tried.success
    const oursTop = topK(ours.result)
    if (typeof ort === "string") {
      rows.push({ model: name, ourMs, ortMs: null, maxAbsDiff: null, top5: { ours: oursTop, ort: null, agree: null } })
      continue
    }
    const theirs = yield* runOrt(ort, bytes, graph, feeds, o.runs)
    if (typeof theirs === "string") {
      yield* log(`${name}: ${theirs}`)
      rows.push({ model: name, ourMs, ortMs: null, maxAbsDiff: null, top5: { ours: oursTop, ort: null, agree: null } })
      continue
    }
    let maxAbsDiff = 0
    if (theirs.data.length !== ours.result.data.length) maxAbsDiff = Infinity
    else for (let i = 0; i < theirs.data.length; i++) maxAbsDiff = Math.max(maxAbsDiff, Math.abs(theirs.data[i] - ours.result.data[i]))
    const ortTop = topK(theirs)
    rows.push({
      model: name,
      ourMs,
      ortMs: theirs.ms,
      maxAbsDiff,
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

const fmtMs = (ms: number | null) => (ms === null ? "-" : ms >= 100 ? ms.toFixed(0) : ms.toFixed(2))

/** The table the demo prints. */
export const demoTable = (rows: readonly DemoRow[]): string => {
  const header = ["model", "tessera interp (ms)", "onnxruntime (ms)", "max |diff|", "top-5 agree"]
  const body = rows.map((r) =>
    r.error !== undefined ? [r.model, `failed: ${r.error}`, "", "", ""] : [
    r.model,
    fmtMs(r.ourMs),
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
