// Measuring js-target candidates, isolated: each batch runs in a worker thread with a time limit.
// Every candidate's output is checked against the reference before its time counts; times are
// medians of repeats, each repeat at least `minRepeatMs` long (noisy shared machines).
import { Effect } from "effect"
import { Worker } from "node:worker_threads"
import { isBigArray, type TypedArray } from "../../ast/graph/dtype.js"
import type { Tensor } from "../../ast/graph/tensor.js"
import type { PrimFunc } from "../../ast/tir/tir.js"
import { defaultMeasureOptions, referenceCase, wrongAnswer, type Candidate, type Measured, type MeasureOptions } from "../measure.js"

/** An ES module exporting each function under its given name (the js emitter's, handed in: a device never imports emit). */
export type RenderJs = (funcs: readonly { readonly name: string; readonly func: PrimFunc }[]) => string

const WORKER = `
const { parentPort, workerData } = require("node:worker_threads")
const { source, names, arrays, outputIdx, repeats, minRepeatMs } = workerData
import("data:text/javascript;base64," + Buffer.from(source).toString("base64")).then((mod) => {
  const now = () => Number(process.hrtime.bigint()) / 1e6
  for (const name of names) {
    try {
      const fn = mod[name]
      const args = arrays.map((a) => a.slice())
      fn(...args)
      const out = outputIdx.map((i) => args[i])
      const times = []
      for (let r = 0; r < repeats; r++) {
        let n = 0
        const t0 = now()
        do { fn(...args); n++ } while (now() - t0 < minRepeatMs)
        times.push((now() - t0) / n)
      }
      times.sort((a, b) => a - b)
      parentPort.postMessage({ name, ms: times[Math.floor(times.length / 2)], out })
    } catch (e) {
      parentPort.postMessage({ name, error: String(e && e.message || e) })
    }
  }
  parentPort.postMessage({ done: true })
}, (e) => parentPort.postMessage({ fatal: String(e && e.message || e) }))
`

/**
 * Measures js-target candidates of one workload. `reference` gives the expected outputs (by param
 * name) for the same inputs; every candidate shares the param list of the first; `render` is the
 * js emitter.
 */
export const measureJs = (
  candidates: readonly Candidate[],
  outputs: ReadonlySet<string>,
  reference: (inputs: ReadonlyMap<string, Tensor>) => ReadonlyMap<string, Tensor>,
  render: RenderJs,
  options: MeasureOptions = defaultMeasureOptions,
): Effect.Effect<Measured[]> =>
  Effect.callback<Measured[]>((resume) => {
    if (candidates.length === 0) return resume(Effect.succeed([]))
    const ref = referenceCase(candidates[0].func, outputs, reference)
    const { outputIdx } = ref
    // (int64 / uint64 params as BigInt64Arrays / BigUint64Arrays, as the js device hands them)
    const arrays = ref.arrays.map((a, j) => (ref.dtypes[j] === "int64" ? BigInt64Array.from(a, (x) => BigInt(x)) : ref.dtypes[j] === "uint64" ? BigUint64Array.from(a, (x) => BigInt.asUintN(64, BigInt(x))) : a))
    const names = candidates.map((_, k) => `c${k}`)
    const source = render(candidates.map((c, k) => ({ name: names[k], func: c.func })))
    const results = new Map<string, Measured>()
    const worker = new Worker(WORKER, { eval: true, workerData: { source, names, arrays, outputIdx, repeats: options.repeats, minRepeatMs: options.minRepeatMs } })
    let finished = false
    const finish = (why?: string) => {
      if (finished) return
      finished = true
      clearTimeout(timer)
      void worker.terminate()
      resume(
        Effect.succeed(
          candidates.map((c, k) => results.get(names[k]) ?? { config: c.config, cost: undefined, error: why ?? "not measured" }),
        ),
      )
    }
    const timer = setTimeout(() => finish(`timed out after ${options.timeoutMs} ms`), options.timeoutMs)
    worker.on("message", (m: { name?: string; ms?: number; out?: (TypedArray | BigInt64Array | BigUint64Array)[]; error?: string; done?: boolean; fatal?: string }) => {
      if (m.fatal) return finish(`the module failed to load: ${m.fatal}`)
      if (m.done) return finish()
      const k = names.indexOf(m.name ?? "")
      if (k < 0) return
      const config = candidates[k].config
      if (m.error) return void results.set(m.name!, { config, cost: undefined, error: m.error })
      // wrong answers are errors, never timings
      const wrong = wrongAnswer(m.out!.map((a) => (isBigArray(a) ? Float64Array.from(a, Number) : a)), ref, options)
      if (wrong) return void results.set(m.name!, { config, cost: undefined, error: wrong })
      results.set(m.name!, { config, cost: (m.ms ?? 0) / 1000 })
    })
    worker.on("error", (e) => finish(`the worker crashed: ${e.message}`))
    worker.on("exit", () => finish("the worker exited"))
    return Effect.sync(() => {
      finished = true
      clearTimeout(timer)
      void worker.terminate()
    })
  })
