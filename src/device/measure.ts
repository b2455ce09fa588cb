// What measuring tuning candidates shares across devices: the options, the candidates' seeded
// inputs, the reference outputs every candidate is checked against before its time counts, and the
// check itself. The measurers are per device (device/js/measure.ts: a worker thread; device/c/
// measure.ts: gcc and a child process); each isolates its candidates, so one that crashes, hangs or
// gives wrong answers is recorded as an error and never takes the tuner down.
import type { Effect } from "effect"
import { allocate, type DType, type TypedArray } from "../ast/graph/dtype.js"
import { prng } from "../ast/graph/arbitrary.js"
import { sizeOf, type Tensor } from "../ast/graph/tensor.js"
import type { PrimFunc } from "../ast/tir/tir.js"
import type { Config } from "../lowering/templates/template.js"
import type { CBuildConfig } from "./c/build.js"

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
  /** Each param's dtype (the c device passes int64 as int64_t). */
  readonly dtypes: readonly DType[]
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
  return { arrays, outputIdx, want: outputIdx.map((i) => ref.get(f0.params[i].name)?.data), dtypes: f0.params.map((p) => p.dtype as DType) }
}

/** Why a candidate's outputs (by position in `outputIdx`) are wrong, or undefined when they match. */
export const wrongAnswer = (out: readonly ArrayLike<number>[], ref: ReferenceCase, options: Pick<MeasureOptions, "rtol" | "atol">): string | undefined => {
  for (const [j, want] of ref.want.entries()) {
    const bad = want ? close(out[j], want, options.rtol, options.atol) : "no reference output"
    if (bad) return `wrong answer: ${bad}`
  }
  return undefined
}


/** Measures candidates of one workload on a device (each checked against the reference first). */
export type Measure = (candidates: readonly Candidate[]) => Effect.Effect<readonly Measured[]>

/** What a task gives its measurer: which params are outputs, and their expected values for any inputs. */
export interface ReferenceSource {
  readonly outputs: ReadonlySet<string>
  readonly reference: (inputs: ReadonlyMap<string, Tensor>) => ReadonlyMap<string, Tensor>
}

/** How a device measures: the timing options, and (c) the threads, chunks, gcc runs and build folder. */
export interface MeasurerOptions {
  readonly measure: MeasureOptions
  /** c: OpenMP threads of the measuring process. */
  readonly threads: number
  /** c: candidates per gcc run (chunks build ahead while earlier ones are measured). */
  readonly chunk: number
  /** c: gcc runs at once. */
  readonly buildJobs: number
  /** c: compiler, flags and the folder libraries are built in. */
  readonly build: CBuildConfig
  /** c: whether gcc builds while candidates are measured (false when the measuring takes every core). */
  readonly overlap?: boolean
  /** c: told, per candidate of a call (by position), what measuring it took (CandidateSpent). */
  readonly spent?: (candidate: number, ms: CandidateSpent) => void
}

/**
 * What one candidate's measuring took, wall ms: its share of the gcc run that built it (the run's
 * time over its members), and its share of its library's checked and timed runs. What a
 * confirmation of that config will cost again (tessera tune's budget reserves it).
 */
export interface CandidateSpent {
  readonly build: number
  readonly run: number
}
