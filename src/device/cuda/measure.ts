// Tuning candidates measured on the GPU (tessera tune --target cuda): the candidates' kernels,
// rendered by the cuda backend, each into a translation unit of its own whose `// tessera-launches
// {…}` line says its launches (function, grid, block) and workspace, built by nvcc in parallel (each
// run limited) into a cubin for this GPU, loaded through the driver; each candidate run once on the
// workload's seeded inputs and checked against the reference, then timed with events (the median of `repeats` rounds, each at
// least minRepeatMs of back-to-back runs): between the two events only its launches, no copy, no
// synchronization, no module load — its module is loaded before and unloaded after
// (test/cuda-measure-trace.test.ts reads the driver calls' order).
// A candidate that fails to build, launch or compute the reference's answer is an error of its own,
// never a timing; a missing GPU fails every candidate with the reason.
import * as fs from "node:fs"
import * as os from "node:os"
import { Effect, type Result } from "effect"
import { cArray, isBigArray, storageBytes, type DeviceArray, type DType } from "../../ast/graph/dtype.js"
import type { MeasureRequest } from "../device.js"
import { referenceCase, wrongAnswer, type Measured } from "../measure.js"
import { medianEventSeconds, openCudaDriver, type CudaDriver, type Handle } from "./driver.js"
import { buildCubin, defaultCubinCache, findNvcc, type BuiltCubin } from "./nvcc.js"
import type { CompileError, UnsafeCacheError } from "../errors.js"

/** One candidate's launches as the render says them. */
export interface CandidateLaunches {
  readonly name: string
  /** Bytes of each workspace buffer, in order (after the params). */
  readonly workspace: readonly number[]
  readonly launches: readonly { readonly function: string; readonly grid: readonly number[]; readonly block: readonly number[] }[]
}

export const LAUNCHES_PREFIX = "// tessera-launches "

export const parseCandidateLaunches = (source: string): Map<string, CandidateLaunches> =>
  new Map(
    source
      .split("\n")
      .filter((l) => l.startsWith(LAUNCHES_PREFIX))
      .map((l) => JSON.parse(l.slice(LAUNCHES_PREFIX.length)) as CandidateLaunches)
      .map((c) => [c.name, c] as const),
  )

const ALIGN = 256
const up = (n: number, a: number) => Math.ceil(n / a) * a

export const measureCuda = (r: MeasureRequest): Effect.Effect<readonly Measured[]> =>
  Effect.gen(function* () {
    const fail = (reason: string): Measured[] => r.candidates.map((c) => ({ config: c.config, cost: undefined, error: reason }))
    const opened = openDriver()
    if (typeof opened === "string") return fail(opened)
    const driver = opened
    const nvcc = findNvcc()
    if (!nvcc) return fail("nvcc was not found: it builds the candidates for this GPU")
    const named = r.candidates.map((c, k) => ({ name: `t${k}`, func: c.func }))
    // each candidate its own translation unit, built in parallel, each nvcc run limited: a config
    // whose explicit unrolls give megabytes of CUDA (minutes of cicc) is an error of its own, not a
    // batch that never builds (nvcc is a child process this fiber waits on: a stop request
    // interrupts the waits and kills every nvcc's process group)
    const arch = `sm_${driver.device.major}${driver.device.minor}`
    const nvccMs = Math.min(r.options.measure.timeoutMs, NVCC_MS_PER_CANDIDATE)
    const builds = yield* Effect.forEach(
      named,
      (n) =>
        Effect.suspend((): Effect.Effect<{ plan: CandidateLaunches | undefined; built: Result.Result<BuiltCubin, CompileError | UnsafeCacheError> | undefined; rejected: string | undefined }> => {
          // a config past the GPU's limits (threads or shared memory per block: the emitter's
          // GpuLimitError) is that candidate's error, as a failed build is — not the whole tune's
          let source: string
          try {
            source = r.render([n])
          } catch (e) {
            return Effect.succeed({ plan: undefined, built: undefined, rejected: e instanceof Error ? e.message : String(e) })
          }
          return Effect.result(buildCubin(nvcc, source, arch, defaultCubinCache(), nvccMs)).pipe(Effect.map((b) => ({ plan: parseCandidateLaunches(source).get(n.name), built: b, rejected: undefined })))
        }),
      { concurrency: Math.max(1, os.availableParallelism()) },
    )
    const ref = referenceCase(r.candidates[0].func, r.source.outputs, r.source.reference)
    const o = r.options.measure
    /** One candidate: its module loaded, launched once, checked against the reference, timed, unloaded; its errors its own. */
    const measureOne = (c: MeasureRequest["candidates"][number], k: number): Measured => {
      const { plan, built, rejected } = builds[k]
      if (built === undefined) return { config: c.config, cost: undefined, error: `rejected: ${String(rejected).slice(0, 400)}` }
      // (the reason first: the command line alone fills the 400 characters)
      if (built._tag === "Failure") return { config: c.config, cost: undefined, error: `nvcc: ${`${built.failure.reason}: ${built.failure.message}`.slice(0, 400)}` }
      const module = loadModule(driver, built.success.cubin)
      if (typeof module === "string") return { config: c.config, cost: undefined, error: module }
      const ptrs: bigint[] = []
      try {
        if (!plan) throw new Error("the render gave no launches for it")
        const fns = plan.launches.map((l) => driver.getFunction(module, l.function))
        const dtypes = c.func.params.map((p) => p.dtype as DType)
        const sizes = c.func.params.map((p, i) => Math.max(1, ref.arrays[i]?.length ?? 0) * storageBytes(p.dtype as DType))
        for (const n of sizes) ptrs.push(driver.malloc(n))
        const ws = plan.workspace.reduce((a, b) => up(a + b, ALIGN), 0)
        const wsBase = ws > 0 ? driver.malloc(ws) : 0n
        if (ws > 0) ptrs.push(wsBase)
        let at = 0
        const wsPtrs = plan.workspace.map((b) => {
          const p = wsBase + BigInt(at)
          at = up(at + b, ALIGN)
          return p
        })
        const stage = (i: number): DeviceArray => {
          const a = new (cArray(dtypes[i]))(ref.arrays[i].length)
          if (isBigArray(a)) ref.arrays[i].forEach((x, j) => (a[j] = BigInt(Math.trunc(Number(x)))))
          else a.set(ref.arrays[i] as never)
          return a
        }
        c.func.params.forEach((_, i) => driver.toDevice(ptrs[i], stage(i)))
        const args = [...ptrs.slice(0, c.func.params.length), ...wsPtrs]
        // its launches with their params marshalled once: the timed loop below is cuLaunchKernel
        // calls and nothing else (the inputs resident, the module loaded once for the batch)
        const launches = plan.launches.map((l, j) => driver.prepareLaunch(fns[j], l.grid, l.block, 0, args))
        const runOnce = () => {
          for (const l of launches) l()
        }
        // the check's run is the warm-up too
        runOnce()
        driver.synchronize()
        const got = ref.outputIdx.map((i) => {
          const a = new (cArray(dtypes[i]))(ref.arrays[i].length)
          driver.toHost(a, ptrs[i])
          return Array.from(a as ArrayLike<number | bigint>, Number)
        })
        const wrong = wrongAnswer(got, ref, o)
        if (wrong) return { config: c.config, cost: undefined, error: wrong }
        return { config: c.config, cost: medianEventSeconds(driver, runOnce, o.repeats, o.minRepeatMs, 1 << 14) }
      } catch (e) {
        return { config: c.config, cost: undefined, error: e instanceof Error ? e.message : String(e) }
      } finally {
        for (const p of ptrs) {
          try {
            driver.free(p)
          } catch {
            // (a failed launch may leave the context unusable: the next candidate reports it)
          }
        }
        try {
          driver.unloadModule(module)
        } catch {
          // (as above)
        }
      }
    }
    // one candidate per step: an interruption (tune's stop request) lands between two, never
    // waiting for the whole batch
    return yield* Effect.forEach(r.candidates, (c, k) => Effect.sync(() => measureOne(c, k)))
  })

/** nvcc's time per candidate at most (as the c measurer's gcc: TVM's builder gives each candidate 10 s); less where --timeout-ms says less. */
const NVCC_MS_PER_CANDIDATE = 15_000

/** The driver, or why it cannot be opened. */
const openDriver = (): CudaDriver | string => {
  try {
    return openCudaDriver()
  } catch (e) {
    return e instanceof Error ? e.message : String(e)
  }
}

/** The cubin loaded as a module, or why it would not load. */
const loadModule = (driver: CudaDriver, cubin: string): Handle | string => {
  try {
    return driver.loadModule(new Uint8Array(fs.readFileSync(cubin)))
  } catch (e) {
    return e instanceof Error ? e.message : String(e)
  }
}
