// Measuring candidates, isolated: each batch runs in a worker thread with a time limit, so a
// candidate that crashes, hangs or gives wrong answers is recorded as an error and never takes the
// tuner down. Every candidate's output is checked against the reference before its time counts;
// times are medians of repeats, each repeat at least `minRepeatMs` long (noisy shared machines).
import { Effect } from "effect"
import { Worker } from "node:worker_threads"
import { allocate, type DType, type TypedArray } from "../ast/graph/dtype.js"
import { prng } from "../ast/graph/arbitrary.js"
import { sizeOf, type Tensor } from "../ast/graph/tensor.js"
import type { PrimFunc } from "../ast/tir/tir.js"
import { emitJsModule } from "../emit/js/emit.js"
import type { Config } from "../lowering/templates.js"

export interface Candidate {
  readonly config: Config
  readonly func: PrimFunc
}

export interface Measured {
  readonly config: Config
  /** Median seconds per run, undefined on error. */
  readonly cost: number | undefined
  readonly error?: string
}

export interface MeasureOptions {
  readonly repeats: number
  readonly minRepeatMs: number
  /**
   * c: bytes written before each timed call, by each of the measuring threads (0 or absent: calls
   * back to back, caches warm). Twice
   * the L2 leaves a kernel's data in L3 at most, as a layer finds it in a network run (TVM's
   * enable_cpu_cache_flush, for the same reason: warm-cache timings favour tiles that lean on L1/L2).
   */
  readonly flushBytes?: number
  /**
   * c: the candidates' repeats taken in turns (one repeat of each, then the next round) rather
   * than one candidate's repeats after another's, so a slow spell of the machine falls on all of
   * them alike. For comparing a few candidates against each other (they must share one chunk).
   */
  readonly interleave?: boolean
  readonly timeoutMs: number
  readonly rtol: number
  readonly atol: number
}
export const defaultMeasureOptions: MeasureOptions = { repeats: 3, minRepeatMs: 20, timeoutMs: 20_000, rtol: 1e-3, atol: 1e-4 }

/** Inputs for a function's params (seeded random for inputs, zeros for outputs). */
export const paramArrays = (f: PrimFunc, outputs: ReadonlySet<string>, seed = 7): TypedArray[] => {
  const rng = prng(seed)
  return f.params.map((p) => {
    const n = sizeOf(p.view?.shape ?? p.shape)
    const a = allocate(p.dtype, n)
    if (!outputs.has(p.name)) for (let i = 0; i < n; i++) a[i] = p.dtype.startsWith("float") ? rng.float(-1, 1) : Math.floor(rng.next() * 5) - 2
    return a
  })
}

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
 * |a − b| ≤ atol + rtol · (|b| + SCALE_FLOOR · max|b|): relative to the element, with a floor at a
 * tenth of the output's largest magnitude. A sum that cancels to near zero carries the rounding
 * error of its terms, not of its result: Winograd's transforms (F(4×4, 3×3) in float32) put
 * about 1e-5 of the output's scale on every element, which a purely elementwise test calls wrong
 * where an element happens to be small.
 */
const SCALE_FLOOR = 0.1

const close = (a: ArrayLike<number>, b: ArrayLike<number>, rtol: number, atol: number): string | undefined => {
  if (a.length !== b.length) return `output has ${a.length} elements, the reference ${b.length}`
  let scale = 0
  for (let i = 0; i < b.length; i++) if (Number.isFinite(b[i])) scale = Math.max(scale, Math.abs(b[i]))
  const floor = SCALE_FLOOR * scale
  for (let i = 0; i < a.length; i++) {
    if (Number.isNaN(a[i]) && Number.isNaN(b[i])) continue
    if (!(Math.abs(a[i] - b[i]) <= atol + rtol * (Math.abs(b[i]) + floor))) return `element ${i} is ${a[i]}, the reference gives ${b[i]}`
  }
  return undefined
}

/** What every candidate of one workload runs on and must compute (the first candidate's params). */
export interface ReferenceCase {
  /** One array per param: seeded inputs, zeroed outputs (copy before running). */
  readonly arrays: readonly TypedArray[]
  /** Positions of the output params. */
  readonly outputIdx: readonly number[]
  /** The reference's value of each output param (by position in `outputIdx`). */
  readonly want: readonly (TypedArray | undefined)[]
}

export const referenceCase = (
  f0: PrimFunc,
  outputs: ReadonlySet<string>,
  reference: (inputs: ReadonlyMap<string, Tensor>) => ReadonlyMap<string, Tensor>,
): ReferenceCase => {
  const arrays = paramArrays(f0, outputs)
  const inputs = new Map<string, Tensor>()
  f0.params.forEach((p, k) => {
    if (!outputs.has(p.name)) inputs.set(p.name, { dtype: p.dtype as DType, shape: p.view?.shape ?? p.shape, data: arrays[k] })
  })
  const ref = reference(inputs)
  const outputIdx = f0.params.map((p, k) => (outputs.has(p.name) ? k : -1)).filter((k) => k >= 0)
  return { arrays, outputIdx, want: outputIdx.map((i) => ref.get(f0.params[i].name)?.data) }
}

/** Why a candidate's outputs (by position in `outputIdx`) are wrong, or undefined when they match. */
export const wrongAnswer = (out: readonly ArrayLike<number>[], ref: ReferenceCase, options: Pick<MeasureOptions, "rtol" | "atol">): string | undefined => {
  for (const [j, want] of ref.want.entries()) {
    const bad = want ? close(out[j], want, options.rtol, options.atol) : "no reference output"
    if (bad) return `wrong answer: ${bad}`
  }
  return undefined
}

/**
 * Measures js-target candidates of one workload. `reference` gives the expected outputs (by param
 * name) for the same inputs; every candidate shares the param list of the first.
 */
export const measureJs = (
  candidates: readonly Candidate[],
  outputs: ReadonlySet<string>,
  reference: (inputs: ReadonlyMap<string, Tensor>) => ReadonlyMap<string, Tensor>,
  options: MeasureOptions = defaultMeasureOptions,
): Effect.Effect<Measured[]> =>
  Effect.callback<Measured[]>((resume) => {
    if (candidates.length === 0) return resume(Effect.succeed([]))
    const ref = referenceCase(candidates[0].func, outputs, reference)
    const { arrays, outputIdx } = ref
    const names = candidates.map((_, k) => `c${k}`)
    const source = emitJsModule(candidates.map((c, k) => ({ name: names[k], func: c.func })))
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
    worker.on("message", (m: { name?: string; ms?: number; out?: TypedArray[]; error?: string; done?: boolean; fatal?: string }) => {
      if (m.fatal) return finish(`the module failed to load: ${m.fatal}`)
      if (m.done) return finish()
      const k = names.indexOf(m.name ?? "")
      if (k < 0) return
      const config = candidates[k].config
      if (m.error) return void results.set(m.name!, { config, cost: undefined, error: m.error })
      // wrong answers are errors, never timings
      const wrong = wrongAnswer(m.out!, ref, options)
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
