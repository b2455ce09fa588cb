// onnxruntime-node as a reference device: loaded when installed (an optional dependency), a
// session over model bytes with a chosen thread count, its outputs as Tensors and its median
// latency after a warm-up. Used beside Tessera's own targets by `tessera bench` and `tessera demo`.
import { Effect } from "effect"
import type { TypedArray } from "../ast/graph/dtype.js"
import { exactValues, type Tensor } from "../ast/graph/tensor.js"

type Ort = typeof import("onnxruntime-node")

/** onnxruntime-node, or the reason it cannot be used (a line to print). */
export const loadOrt = (): Effect.Effect<Ort | string> =>
  Effect.promise(() =>
    import("onnxruntime-node").then(
      (m) => m as Ort,
      (e: unknown) => `onnxruntime-node is not available (${e instanceof Error ? e.message.split("\n")[0] : String(e)}); install it with 'npm install onnxruntime-node' to compare`,
    ),
  )

/**
 * A tensor as onnxruntime (node or web) takes it: its type and data, the same typed array where our
 * storage is onnxruntime's (float16, bfloat16 and uint64 are not), int64 as a BigInt64Array.
 */
export const ortTensorParts = (t: Tensor, runtime = "onnxruntime"): { readonly type: string; readonly data: TypedArray | BigInt64Array } => {
  if (t.dtype === "int64") return { type: "int64", data: exactValues(t) as BigInt64Array }
  if (t.dtype === "float16" || t.dtype === "bfloat16" || t.dtype === "uint64") throw new Error(`cannot hand ${t.dtype} tensors to ${runtime}`)
  return { type: t.dtype, data: t.data }
}

const toOrtTensor = (ort: Ort, t: Tensor) => {
  const { type, data } = ortTensorParts(t)
  return new ort.Tensor(type as "float32", data as Float32Array, t.shape)
}

export const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

export interface OrtResult {
  /** The graph's outputs by name, as float64 numbers (enough to compare). */
  readonly outputs: ReadonlyMap<string, { readonly data: Float64Array; readonly shape: readonly number[] }>
  /** Median of `runs` timed runs after one warm-up (ms); NaN when runs is 0. */
  readonly ms: number
  readonly runs: number
}

export interface OrtOptions {
  /** intraOpNumThreads (0: onnxruntime's default). */
  readonly threads: number
  /** Timed runs after the warm-up. */
  readonly runs: number
}

/** The reason an onnxruntime call failed, as a line to print. */
const failure = (e: unknown): string => `onnxruntime failed: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`

/** A session over the model bytes (graph optimizations all; `threads` 0: onnxruntime's default) and its feeds. */
const createSession = async (ort: Ort, bytes: Uint8Array, feeds: ReadonlyMap<string, Tensor>, threads: number) => {
  const session = await ort.InferenceSession.create(bytes, {
    graphOptimizationLevel: "all",
    ...(threads > 0 ? { intraOpNumThreads: threads, interOpNumThreads: 1 } : {}),
  })
  return { session, ortFeeds: Object.fromEntries([...feeds].map(([k, t]) => [k, toOrtTensor(ort, t)])) }
}

/** A run's outputs as float64 tensors by name. */
const outputsOf = (out: Record<string, { readonly data: unknown; readonly dims: readonly number[] }>): ReadonlyMap<string, { data: Float64Array; shape: number[] }> =>
  new Map(Object.entries(out).map(([name, t]) => [name, { data: Float64Array.from(t.data as ArrayLike<number | bigint>, Number), shape: [...t.dims] }] as const))

/** Runs the model in onnxruntime: its outputs and median time, or the reason it could not. */
export const runOrt = (ort: Ort, bytes: Uint8Array, feeds: ReadonlyMap<string, Tensor>, o: OrtOptions): Effect.Effect<OrtResult | string> =>
  Effect.tryPromise({
    catch: failure,
    try: async () => {
      const { session, ortFeeds } = await createSession(ort, bytes, feeds, o.threads)
      try {
        let out = await session.run(ortFeeds) // the warm-up
        const times: number[] = []
        for (let i = 0; i < o.runs; i++) {
          const t0 = performance.now()
          out = await session.run(ortFeeds)
          times.push(performance.now() - t0)
        }
        return { outputs: outputsOf(out), ms: median(times), runs: o.runs }
      } finally {
        await session.release()
      }
    },
  }).pipe(Effect.catch((reason) => Effect.succeed(reason)))

/**
 * How two runtimes' runs alternate in one process: in blocks of BLOCK_RUNS timed runs, each block
 * after a pause of SETTLE_MS (`settle`) and one untimed run. Both keep worker threads spinning
 * after a parallel run (onnxruntime's pool for tens of ms, libgomp's spin-wait), and with as many
 * threads as cores the side that starts runs against the other's spinning threads. At 2 threads
 * on 2 cores, MobileNetV2 alternated run by run took 18-35 ms (8.2 alone) and onnxruntime 11-15
 * (7-9 alone); in blocks after the pause, 8.4 and 7.8.
 */
const SETTLE_MS = 50
const BLOCK_RUNS = 5
export const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, SETTLE_MS))

/** An open session on fixed inputs: each `time()` is one timed run in ms (warmed up once when opened). */
export interface OrtSession {
  readonly time: () => Promise<number>
  /** The outputs of the latest run. */
  readonly outputs: () => OrtResult["outputs"]
  readonly release: () => Promise<void>
}

/**
 * A session kept open across rounds, so a benchmark that alternates with our runs times
 * onnxruntime's steady state, as it does ours (not a fresh session's arena and prepacking).
 */
export const openOrtSession = (ort: Ort, bytes: Uint8Array, feeds: ReadonlyMap<string, Tensor>, threads: number): Effect.Effect<OrtSession | string> =>
  Effect.tryPromise({
    catch: failure,
    try: async () => {
      const { session, ortFeeds } = await createSession(ort, bytes, feeds, threads)
      let last = await session.run(ortFeeds)
      return {
        time: async () => {
          const t0 = performance.now()
          last = await session.run(ortFeeds)
          return performance.now() - t0
        },
        outputs: () => outputsOf(last),
        release: () => session.release(),
      }
    },
  }).pipe(Effect.catch((reason) => Effect.succeed(reason)))

/**
 * `runs` timed runs of `ours` (ms each) and, with an open session, as many of onnxruntime's,
 * the two alternating in blocks of BLOCK_RUNS, each block after `settle` and one untimed run.
 * Without a session, `runs` of ours back to back. What `ours` throws is thrown.
 */
export const alternateRuns = async (ours: () => void, session: OrtSession | undefined, runs: number): Promise<{ readonly ours: number[]; readonly theirs: number[] }> => {
  const mine: number[] = []
  const theirs: number[] = []
  while (mine.length < runs) {
    const n = session ? Math.min(BLOCK_RUNS, runs - mine.length) : runs
    if (session) {
      await settle()
      ours()
    }
    for (let i = 0; i < n; i++) {
      const t0 = performance.now()
      ours()
      mine.push(performance.now() - t0)
    }
    if (!session) continue
    await settle()
    await session.time()
    for (let i = 0; i < n; i++) theirs.push(await session.time())
  }
  return { ours: mine, theirs }
}
