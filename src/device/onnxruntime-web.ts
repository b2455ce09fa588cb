// onnxruntime-web's wasm backend as the reference for the `wasm` target: loaded when installed (a
// dev dependency; its .wasm files ship inside the package, nothing is fetched), run in this Node
// process on one thread with no proxy worker, a session over model bytes, its outputs as float64
// numbers and its median latency after a warm-up. Used beside Tessera's wasm target by the bench.
import { Effect } from "effect"
import type { Tensor } from "../ast/graph/tensor.js"
import { median, ortTensorParts, type OrtResult } from "./onnxruntime.js"

type OrtWeb = typeof import("onnxruntime-web")

/** onnxruntime-web set to its wasm backend on one thread, or the reason it cannot be used (a line to print). */
export const loadOrtWeb = (): Effect.Effect<OrtWeb | string> =>
  Effect.promise(() =>
    import("onnxruntime-web").then(
      (m) => {
        const ort = m as OrtWeb
        // global settings of the module, read when its runtime starts (the first session)
        ort.env.wasm.numThreads = 1
        ort.env.wasm.proxy = false
        ort.env.logLevel = "error"
        return ort
      },
      (e: unknown) => `onnxruntime-web is not available (${e instanceof Error ? e.message.split("\n")[0] : String(e)}); install it with 'npm install --save-dev onnxruntime-web' to compare`,
    ),
  )

const toOrtWebTensor = (ort: OrtWeb, t: Tensor) => {
  const { type, data } = ortTensorParts(t, "onnxruntime-web")
  return new ort.Tensor(type as "float32", data as Float32Array, t.shape)
}

export interface OrtWebOptions {
  /** Timed runs after the warm-up. */
  readonly runs: number
}

/** Runs the model in onnxruntime-web (wasm, 1 thread): its outputs and median time, or the reason it could not. */
export const runOrtWeb = (ort: OrtWeb, bytes: Uint8Array, feeds: ReadonlyMap<string, Tensor>, o: OrtWebOptions): Effect.Effect<OrtResult | string> =>
  Effect.tryPromise({
    catch: (e) => `onnxruntime-web failed: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`,
    try: async () => {
      const session = await ort.InferenceSession.create(bytes, { executionProviders: ["wasm"], graphOptimizationLevel: "all" })
      try {
        const ortFeeds = Object.fromEntries([...feeds].map(([k, t]) => [k, toOrtWebTensor(ort, t)]))
        let out = await session.run(ortFeeds) // the warm-up
        const times: number[] = []
        for (let i = 0; i < o.runs; i++) {
          const t0 = performance.now()
          out = await session.run(ortFeeds)
          times.push(performance.now() - t0)
        }
        const outputs = new Map(
          Object.entries(out).map(([name, t]) => [name, { data: Float64Array.from(t.data as ArrayLike<number | bigint>, Number), shape: [...t.dims] }] as const),
        )
        return { outputs, ms: median(times), runs: o.runs }
      } finally {
        await session.release()
      }
    },
  }).pipe(Effect.catch((reason) => Effect.succeed(reason)))
