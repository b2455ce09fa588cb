// Measuring c-target candidates, isolated: a batch is emitted into one C source per chunk and built
// by gcc once per chunk (`buildJobs` gcc runs at a time, ahead of the measuring), then every
// candidate runs in a CHILD PROCESS (not a worker thread: a native crash must not take the tuner
// down) with OMP_NUM_THREADS set and a time limit per candidate. Each candidate's first run is
// checked against the reference before its time counts. A build failure, a crash (signal), a hang
// or a wrong answer is recorded for that candidate only: a chunk that fails to build is built again
// one candidate at a time, and when the child dies mid-chunk the candidate in flight is recorded as
// the error and the ones not yet measured run in a fresh child.
//
// The device never imports emit: the caller renders PrimFuncs to C (`render`, normally emitC). A
// test may render any C it likes for the functions it is given — that is how faults are injected.
import { Effect, Fiber, Semaphore } from "effect"
import { spawn } from "node:child_process"
import { rmSync } from "node:fs"
import { createRequire } from "node:module"
import { isBigArray } from "../../ast/graph/dtype.js"
import { sizeOf, type Tensor } from "../../ast/graph/tensor.js"
import type { PrimFunc } from "../../ast/tir/tir.js"
import { storageElements } from "../../ast/tir/analysis.js"
import { buildC, C_BATCH, defaultCBuildConfig, groupBySize, type CBuildConfig } from "./build.js"
import { discard } from "./cache-store.js"
import { defaultMeasureOptions, referenceCase, wrongAnswer, type Candidate, type CandidateSpent, type Measured, type MeasureOptions, type ReferenceCase } from "../measure.js"

export interface CMeasureOptions extends MeasureOptions {
  /** OpenMP threads of the measuring process (the schedules' `cores` should say the same). */
  readonly threads: number
  /** Candidates per gcc run; chunks build ahead while earlier ones are measured. */
  readonly chunk: number
  /** gcc runs at once (cores beside the measuring threads; 1 keeps builds off the measured core on two). */
  readonly buildJobs: number
  /** Compiler, flags and the folder libraries are built in (they are deleted once measured). */
  readonly build: CBuildConfig
  /**
   * Whether chunks build while earlier ones are measured (default true). False when the measuring
   * threads take every core: gcc beside them would be timed into the candidates (at 2 threads on
   * 2 cores the tuned records ran 13-16% slower end to end than the defaults).
   */
  readonly overlap?: boolean
  /** Told what each candidate's build and runs took (wall ms, its share of its gcc run and of its library's runs), by position. */
  readonly spent?: (candidate: number, ms: CandidateSpent) => void
}

/** `timeoutMs` is per candidate here (js: per batch). */
export const defaultCMeasureOptions = (): CMeasureOptions => ({ ...defaultMeasureOptions, threads: 1, chunk: 4, buildJobs: 1, build: defaultCBuildConfig() })

/** C source defining every function given (each under its `name`, params in order, pointer args). */
export type RenderC = (funcs: readonly PrimFunc[]) => string

/** The sweep's entry point in every measured library (not a kernel name: those are `cand<k>`). */
export const SWEEP_FN = "tessera_measure_sweep"

/**
 * Appended to every measured library when `flushBytes` > 0: each OpenMP thread of the measuring
 * process writes `bytes` of a buffer of its own, so the caches of every core that runs the kernel
 * are swept, not the main thread's alone (at 2 threads a sweep by the main thread left the other
 * core's L2 warm, and the tuner picked configs that won only there).
 */
export const SWEEP_C = `
/* tessera: the measuring child's cache sweep, run by every OpenMP thread */
#include <stdlib.h>
/* returns how many threads swept (each its own buffer: a store to every 64-byte line) */
int ${SWEEP_FN}(long bytes, int round) {
  int swept = 0;
  #pragma omp parallel reduction(+ : swept)
  {
    static __thread unsigned char* buf;
    static __thread long size;
    if (size < bytes) { free(buf); buf = malloc((size_t)bytes); size = buf ? bytes : 0; }
    for (long i = 0; i < size; i += 64) buf[i] = (unsigned char)(round + i);
    swept += size >= bytes;
  }
  return swept;
}
`

// The child: first asks Linux to SIGKILL it when its parent dies (a tuner killed mid-run leaves
// no orphan spinning in a hung kernel), loads the library, then per kernel says which one it
// starts (and waits until the message is out, so a crash cannot lose it), runs it once on fresh
// copies of the arrays (64-byte aligned, as the executor's), sends the outputs, times it (with
// `flushBytes`, each call after every thread swept its caches: SWEEP_C) and sends the median;
// with `interleave` the kernels' repeats are taken in turns after every kernel has been checked.
// All params are passed as `void *` (the ABI of any pointer): the child needs no dtype table.
const CHILD = `
const koffi = require(process.env.TESSERA_KOFFI)
if (process.platform === "linux") {
  try { koffi.load("libc.so.6").func("int prctl(int, unsigned long, unsigned long, unsigned long, unsigned long)")(1, 9, 0, 0, 0) } catch {}
  if (String(process.ppid) !== process.env.TESSERA_MEASURE_PARENT) process.exit(1)
}
const send = (m) => new Promise((resolve) => process.send(m, resolve))
// a copy at a 64-byte aligned address, as the executor places its buffers (alignedHostMemory)
const aligned = (a) => {
  const buf = new ArrayBuffer(a.byteLength + 64)
  const mis = Number(BigInt(koffi.address(new Uint8Array(buf, 0, 1))) % 64n)
  const copy = new a.constructor(buf, mis === 0 ? 0 : 64 - mis, a.length)
  copy.set(a)
  return copy
}
process.once("message", async ({ so, names, nparams, arrays, outputIdx, repeats, minRepeatMs, flushBytes, interleave }) => {
  let lib
  try { lib = koffi.load(so) } catch (e) { await send({ fatal: String(e && e.message || e) }); process.exit(0) }
  // run before each timed call when flushBytes > 0, by every OpenMP thread: no core's L1 or L2
  // holds the kernel's data
  let sweep
  try { sweep = flushBytes > 0 ? lib.func(${JSON.stringify(SWEEP_FN)}, "int", ["long", "int"]) : undefined } catch (e) { await send({ fatal: String(e && e.message || e) }); process.exit(0) }
  let flushes = 0
  const now = () => Number(process.hrtime.bigint()) / 1e6
  const types = Array(nparams).fill("void *")
  // one repeat: ms per call, over at least minRepeatMs of calls
  const repeat = (fn, args) => {
    let n = 0
    if (sweep) {
      // each call timed alone after the caches were swept (at most 1000 calls a repeat)
      let total = 0
      do {
        sweep(flushBytes, ++flushes)
        const t0 = now()
        fn(...args)
        total += now() - t0
        n++
      } while (total < minRepeatMs && n < 1000)
      return total / n
    }
    const t0 = now()
    do { fn(...args); n++ } while (now() - t0 < minRepeatMs)
    return (now() - t0) / n
  }
  const median = (times) => times.sort((a, b) => a - b)[Math.floor(times.length / 2)]
  const ready = []
  for (const name of names) {
    await send({ start: name })
    let fn
    try { fn = lib.func(name, "void", types) } catch (e) { await send({ name, error: String(e && e.message || e) }); continue }
    const args = arrays.map(aligned)
    fn(...args)
    await send({ name, out: outputIdx.map((i) => args[i]) })
    if (interleave) { ready.push({ name, fn, args, times: [] }); continue }
    const times = []
    for (let r = 0; r < repeats; r++) times.push(repeat(fn, args))
    await send({ name, ms: median(times) })
  }
  // interleaved: one repeat of each kernel in turn, as many rounds as repeats (each announced,
  // so the time limit and a crash's culprit stay per kernel)
  for (let r = 0; r < repeats && ready.length; r++)
    for (const k of ready) {
      await send({ start: k.name })
      k.times.push(repeat(k.fn, k.args))
    }
  for (const k of ready) await send({ name: k.name, ms: median(k.times) })
  await send({ done: true })
  process.exit(0)
})
`

const KOFFI = createRequire(import.meta.url).resolve("koffi")

/** Time a child may take to start node and load the library (a loaded machine is slow at it). */
const STARTUP_MS = 10_000

type ChildMessage =
  | { readonly start: string }
  | { readonly name: string; readonly out: ArrayLike<number>[] }
  | { readonly name: string; readonly ms: number }
  | { readonly name: string; readonly error: string }
  | { readonly fatal: string }
  | { readonly done: true }

type Result = { readonly cost?: number; readonly error?: string }

/** What one child run ended with: results by kernel name, and why it stopped early (if it did). */
interface ChildRun {
  readonly results: Map<string, Result>
  /** The kernels it started, in order. */
  readonly started: readonly string[]
  /** Why it stopped before finishing (the last kernel started without a time is the culprit). */
  readonly died?: string
}

const lastLine = (s: string): string => s.trim().split("\n").filter(Boolean).at(-1)?.slice(0, 300) ?? ""

/** Runs `names` of the library `so` in one fresh child process. */
const runChild = (so: string, names: readonly string[], ref: ReferenceCase, options: CMeasureOptions): Effect.Effect<ChildRun> =>
  Effect.callback<ChildRun>((resume) => {
    const results = new Map<string, Result>()
    const started: string[] = []
    const child = spawn(process.execPath, ["-e", CHILD], {
      stdio: ["ignore", "ignore", "pipe", "ipc"],
      serialization: "advanced",
      env: { ...process.env, OMP_NUM_THREADS: String(options.threads), TESSERA_KOFFI: KOFFI, TESSERA_MEASURE_PARENT: String(process.pid) },
    })
    let stderr = ""
    child.stderr?.on("data", (d: unknown) => (stderr = (stderr + String(d)).slice(-4000)))
    let finished = false
    let timer: ReturnType<typeof setTimeout> | undefined
    const finish = (died?: string) => {
      if (finished) return
      finished = true
      clearTimeout(timer)
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
      resume(Effect.succeed({ results, started, ...(died ? { died } : {}) }))
    }
    // the time limit restarts with each kernel; the child's start and loading get STARTUP_MS more
    const arm = (ms: number) => {
      clearTimeout(timer)
      timer = setTimeout(() => finish(`timed out after ${ms} ms`), ms)
    }
    arm(options.timeoutMs + STARTUP_MS)
    child.on("message", (m: ChildMessage) => {
      if ("start" in m) {
        started.push(m.start)
        return arm(options.timeoutMs)
      }
      if ("fatal" in m) return finish(`the library did not load: ${m.fatal}`)
      if ("done" in m) return finish()
      if ("error" in m) return void results.set(m.name, { error: m.error })
      if ("out" in m) {
        // wrong answers are errors, never timings
        // (int64 / uint64 outputs come back as int64_t / uint64_t: compared as numbers)
        const wrong = wrongAnswer(m.out.map((a: ArrayLike<number> | BigInt64Array | BigUint64Array) => (isBigArray(a) ? Float64Array.from(a, Number) : a)), ref, options)
        if (wrong) results.set(m.name, { error: wrong })
        return
      }
      if (!results.has(m.name)) results.set(m.name, { cost: m.ms / 1000 })
    })
    child.on("error", (e) => finish(`the measuring process failed: ${e.message}`))
    // "close", not "exit": it comes after the last message the child sent has been read
    child.on("close", (code, signal) => {
      const why = signal ? `crashed (${signal})` : `the measuring process exited with code ${code}`
      const tail = lastLine(stderr)
      finish(tail ? `${why}: ${tail}` : why)
    })
    child.send({ so, names, nparams: ref.arrays.length, arrays: ref.arrays.map((a, j) => (ref.dtypes[j] === "int64" ? BigInt64Array.from(a, (x) => BigInt(x)) : ref.dtypes[j] === "uint64" ? BigUint64Array.from(a, (x) => BigInt.asUintN(64, BigInt(x))) : a)), outputIdx: ref.outputIdx, repeats: options.repeats, minRepeatMs: options.minRepeatMs, flushBytes: options.flushBytes ?? 0, interleave: options.interleave === true })
    return Effect.sync(() => {
      finished = true
      clearTimeout(timer)
      child.kill("SIGKILL")
    })
  })

/**
 * Measures `names` of one library: the child that dies takes only the kernel it was running with
 * it; the rest run in a fresh child. A child that dies before starting any kernel fails them all.
 */
const measureLibrary = (so: string, names: readonly string[], ref: ReferenceCase, options: CMeasureOptions) =>
  Effect.gen(function* () {
    const out = new Map<string, Result>()
    let pending = [...names]
    while (pending.length) {
      const run = yield* runChild(so, pending, ref, options)
      for (const [n, r] of run.results) out.set(n, r)
      if (run.died !== undefined) {
        const culprit = run.started.at(-1)
        if (culprit === undefined) {
          for (const n of pending) out.set(n, { error: run.died })
          break
        }
        // a wrong answer stays the verdict when the kernel then crashed or hung while timed
        if (out.get(culprit)?.cost === undefined && out.get(culprit)?.error === undefined) out.set(culprit, { error: run.died })
      }
      pending = pending.filter((n) => !out.has(n))
    }
    return out
  })

/** A built library and the kernels in it, or why a candidate did not build. */
type Built = { readonly so: string; readonly names: readonly string[] } | { readonly name: string; readonly error: string }

/** The compiler's first lines, the temporary source's path shortened to its name. */
const firstLines = (s: string, n = 6) =>
  s
    .trim()
    .split("\n")
    .slice(0, n)
    .map((l) => l.replace(/\S*\/([0-9a-f]+)\.[^\s/]*\.tmp\.c\b/g, "$1.c"))
    .join("\n")

/** gcc's time per candidate in a chunk (TVM's builder gives each candidate 10 s). */
const BUILD_MS_PER_CANDIDATE = 15_000

/** Renders and builds one chunk; when that fails, each candidate alone, so the failure is theirs. */
const buildChunk = (funcs: readonly PrimFunc[], render: RenderC, config: CBuildConfig): Effect.Effect<Built[]> => {
  // gcc gets BUILD_MS_PER_CANDIDATE per candidate of the chunk: a config whose unrolled loops
  // take gcc minutes is an error for that candidate (the chunk is retried one by one), not a stall
  const limited = { ...config, timeoutMs: config.timeoutMs ?? BUILD_MS_PER_CANDIDATE * funcs.length }
  const attempt = (fs: readonly PrimFunc[]) =>
    Effect.try({ try: () => render(fs), catch: (e) => `emit failed: ${e instanceof Error ? e.message : String(e)}` }).pipe(
      Effect.flatMap((source) => Effect.mapError(buildC(source, limited), (e) => `build failed: ${(e._tag === "CompileError" ? firstLines(e.stderr) : "") || e.reason}`)),
    )
  return attempt(funcs).pipe(
    Effect.map((so): Built[] => [{ so, names: funcs.map((f) => f.name) }]),
    Effect.catch((error) =>
      funcs.length === 1
        ? Effect.succeed<Built[]>([{ name: funcs[0].name, error }])
        : Effect.forEach(funcs, (f) => buildChunk([f], render, config)).pipe(Effect.map((bs) => bs.flat())),
    ),
  )
}

/**
 * The chunks (gcc runs) a batch builds in: candidates whose own code is under `below` bytes share a
 * run, `size` at a time in their order; a larger one builds alone — build.ts's rule for an
 * artifact's units (batchUnits). Sharing a run saves gcc's fixed cost (~0.1 s a process), nothing
 * beside a candidate gcc takes seconds over, while a run killed at its time limit loses every
 * member's build: ResNet-18's 56² Winograd candidates (100–550 KB of C each), built 4 to a run,
 * lost the run's whole 45–60 s whenever one of them ran past gcc's limit, then built again one by
 * one (docs/tuning.md, 2026-11-27 fourteenth session).
 */
export const chunkBySize = <F>(funcs: readonly F[], ownBytes: (f: F) => number, size: number, below: number = C_BATCH.below): F[][] =>
  groupBySize(funcs, ownBytes, { below, size })

/**
 * `render` remembering each single function's source (a candidate that builds alone is rendered
 * once, for its size and its build), and a function's own bytes: its source alone less the source
 * of no function (the prelude every run compiles). A renderer that refuses no function: all bytes count.
 */
const sizedRender = (render: RenderC): { readonly render: RenderC; readonly ownBytes: (f: PrimFunc) => number } => {
  const alone = new Map<PrimFunc, string>()
  const one = (f: PrimFunc): string => {
    let s = alone.get(f)
    if (s === undefined) alone.set(f, (s = render([f])))
    return s
  }
  let empty: number | undefined
  const prelude = (): number => {
    if (empty === undefined) {
      try {
        empty = Buffer.byteLength(render([]))
      } catch {
        empty = 0
      }
    }
    return empty
  }
  return {
    render: (fs) => (fs.length === 1 ? one(fs[0]) : render(fs)),
    ownBytes: (f) => {
      try {
        return Buffer.byteLength(one(f)) - prelude()
      } catch {
        return Infinity // (it fails to render: alone, so the failure is its own)
      }
    },
  }
}

const removeLibrary = (so: string) =>
  Effect.sync(() => {
    discard(so) // and its stored hash
    rmSync(so.replace(/\.so$/, ".c"), { force: true })
  })

/**
 * Measures c-target candidates of one workload (candidates share the first one's params).
 * `reference` gives the expected outputs (by param name) for the same inputs; `render` turns the
 * candidates' functions (renamed `cand0`, `cand1`, … by their position) into C.
 */
export const measureC = (
  candidates: readonly Candidate[],
  outputs: ReadonlySet<string>,
  reference: (inputs: ReadonlyMap<string, Tensor>) => ReadonlyMap<string, Tensor>,
  render: RenderC,
  options: CMeasureOptions = defaultCMeasureOptions(),
): Effect.Effect<Measured[]> =>
  Effect.gen(function* () {
    if (candidates.length === 0) return []
    const ref = referenceCase(candidates[0].func, outputs, reference)
    const f0 = candidates[0].func
    const results = new Map<string, Result>()
    const funcs: PrimFunc[] = []
    candidates.forEach((c, k) => {
      const name = `cand${k}`
      // the child passes raw pointers: params that differ from the arrays are refused here
      const fits = c.func.params.length === f0.params.length && c.func.params.every((p, j) => p.dtype === f0.params[j].dtype && storageElements(p) <= ref.arrays[j].length)
      if (!fits)
        results.set(name, { error: `params differ from the workload's (${c.func.params.map((p) => `${p.name}[${sizeOf(p.view?.shape ?? p.shape)}]`).join(", ")})` })
      else funcs.push({ ...c.func, name })
    })
    const sized = sizedRender((options.flushBytes ?? 0) > 0 ? (fs) => `${render(fs)}\n${SWEEP_C}` : render)
    const rendered = sized.render
    const chunks = chunkBySize(funcs, sized.ownBytes, options.chunk)
    // every chunk builds in order, `buildJobs` at a time, while the ones built are measured in order
    const jobs = yield* Semaphore.make(Math.max(1, options.buildJobs))
    const builds: Fiber.Fiber<Built[]>[] = []
    // (each candidate's share of its gcc run and of its library's runs, for `spent`)
    const buildMs = new Map<string, number>()
    const runMs = new Map<string, number>()
    const timed = <A>(eff: Effect.Effect<A>, names: readonly string[], into: Map<string, number>): Effect.Effect<A> =>
      options.spent
        ? Effect.suspend(() => {
            const t0 = performance.now()
            return Effect.tap(eff, () => Effect.sync(() => names.forEach((n) => into.set(n, (performance.now() - t0) / names.length))))
          })
        : eff
    for (const ch of chunks)
      builds.push(
        yield* Effect.forkChild(
          Semaphore.withPermit(jobs)(
            timed(
              buildChunk(ch, rendered, options.build),
              ch.map((f) => f.name),
              buildMs,
            ),
          ),
        ),
      )
    // without overlap every chunk is built before the first is measured
    if (options.overlap === false) for (const build of builds) yield* Fiber.await(build)
    for (const build of builds) {
      const built = yield* Fiber.join(build)
      for (const b of built) {
        if ("error" in b) {
          results.set(b.name, { error: b.error })
          continue
        }
        const measured = yield* timed(measureLibrary(b.so, b.names, ref, options), b.names, runMs).pipe(Effect.ensuring(removeLibrary(b.so)))
        for (const [n, r] of measured) results.set(n, r)
      }
    }
    if (options.spent) for (const k of candidates.keys()) options.spent(k, { build: buildMs.get(`cand${k}`) ?? 0, run: runMs.get(`cand${k}`) ?? 0 })
    return candidates.map((c, k): Measured => {
      const r = results.get(`cand${k}`)
      return r?.cost !== undefined ? { config: c.config, cost: r.cost } : { config: c.config, cost: undefined, error: r?.error ?? "not measured" }
    })
  })
