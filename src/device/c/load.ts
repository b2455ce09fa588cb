// The c device's loading: a built library opened through koffi, each kernel a function of typed
// arrays that checks its arguments (count, typed-array type, length) against the artifact's params
// and calls the C function on them without a copy; and the 64-byte aligned host memory the
// executor reserves its blocks in.
import { Effect } from "effect"
import koffi from "koffi"
import { cArray, DTYPE_INFO, type DeviceArray, type DType } from "../../ast/graph/dtype.js"
import type { KernelEntry } from "../../lowering/program.js"
import type { HostReserve } from "../device.js"
import { DeviceRunError, LoadError } from "../errors.js"

/** The koffi type of a param's storage: a pointer to its C type (the emitter's, from the one dtype table). */
const ffiType = (d: DType): string => `${DTYPE_INFO[d].c} *`

/** A loaded kernel: checks its arguments, then calls the C function. */
export type CKernel = (...args: DeviceArray[]) => void

/** One kernel call of a plan: the kernel and its arrays. */
export interface CPlanCall {
  readonly kernel: string
  readonly args: readonly DeviceArray[]
}

export interface CModule {
  readonly path: string
  readonly kernels: ReadonlyMap<string, CKernel>
  /**
   * Every kernel called once, in the artifact's order, on arrays fixed now, as one native call a
   * run (the library's plan unit: src/emit/c/emit.ts); absent where the library has none. The
   * arrays must be ones whose memory never moves and lives as long as the runner (the reserved
   * blocks': alignedReserve's ArrayBuffer). Throws DeviceRunError where the calls do not fit.
   */
  readonly plan?: (calls: readonly CPlanCall[]) => () => void
}

/** What loading needs of a kernel: its name and its params' dtypes and sizes. */
export type CKernelSignature = Pick<KernelEntry, "name"> & { readonly params: readonly Pick<KernelEntry["params"][number], "dtype" | "elements">[] }

/** Throws DeviceRunError where `args` do not fit kernel `k`'s params (count, typed-array type, length). */
const checkArgs = (k: CKernelSignature, ctors: readonly ReturnType<typeof cArray>[], args: readonly DeviceArray[]): void => {
  if (args.length !== k.params.length) throw new DeviceRunError({ kernel: k.name, reason: `takes ${k.params.length} arrays, given ${args.length}` })
  args.forEach((a, j) => {
    const ctor = ctors[j]
    if (a.constructor !== ctor) throw new DeviceRunError({ kernel: k.name, reason: `param ${j} (${k.params[j].dtype}) needs a ${ctor.name}, given a ${a.constructor.name}` })
    if (a.length < k.params[j].elements) throw new DeviceRunError({ kernel: k.name, reason: `param ${j} needs ${k.params[j].elements} elements, given ${a.length}` })
  })
}

const checkedKernel = (k: CKernelSignature, native: (...a: unknown[]) => unknown): CKernel => {
  const ctors = k.params.map((p) => cArray(p.dtype))
  return (...args) => {
    checkArgs(k, ctors, args)
    native(...args)
  }
}

/** A symbol of the library as a function, or undefined where the library lacks it. */
const optionalFunc = (lib: ReturnType<typeof koffi.load>, prototype: string): ((...a: unknown[]) => unknown) | undefined => {
  try {
    return lib.func(prototype) as (...a: unknown[]) => unknown
  } catch {
    return undefined
  }
}

/**
 * The library's plan runner, where it has one: its table checked against the kernels it was loaded
 * with (count and arguments: a library whose plan does not match them is a LoadError). A plan fixes
 * each call's arrays once, checked as a kernel call checks them, their addresses in one table of
 * pointers; a run is `tessera_plan_run(table, 0, kernels)`.
 */
const planOf = (lib: ReturnType<typeof koffi.load>, so: string, kernels: readonly CKernelSignature[]): CModule["plan"] => {
  const run = optionalFunc(lib, "void tessera_plan_run(void *, int, int)")
  const size = optionalFunc(lib, "int tessera_plan_size(void)")
  const count = optionalFunc(lib, "int tessera_plan_args(void)")
  if (!run || !size || !count) return undefined
  const args = kernels.reduce((n, k) => n + k.params.length, 0)
  if (size() !== kernels.length || count() !== args)
    throw new LoadError({ target: "c", path: so, reason: `its plan has ${String(size())} kernels and ${String(count())} arguments, the artifact ${kernels.length} and ${args}` })
  return (calls) => {
    if (calls.length !== kernels.length) throw new DeviceRunError({ kernel: "(plan)", reason: `the library's plan runs ${kernels.length} kernels, given ${calls.length} calls` })
    const table = new BigUint64Array(Math.max(1, args))
    let at = 0
    calls.forEach((c, i) => {
      if (c.kernel !== kernels[i].name) throw new DeviceRunError({ kernel: c.kernel, reason: `is call ${i} of the plan, where the library's plan calls ${kernels[i].name}` })
      checkArgs(kernels[i], kernels[i].params.map((p) => cArray(p.dtype)), c.args)
      for (const a of c.args) table[at++] = BigInt(koffi.address(a))
    })
    // (the calls hold the arrays, so their memory lives as long as the runner)
    return () => void run(table, 0, calls.length)
  }
}

/**
 * The thread count of the library's parallel loops: its thread pool's (`tessera_set_num_threads`,
 * every loop from now on, whichever thread calls), and OpenMP's for the parallel regions this OS
 * thread starts from now on, set through the library's own OpenMP runtime (`omp_set_num_threads`,
 * found through the library's dependencies).
 * OMP_NUM_THREADS is not enough: OpenMP reads it from the process's environment when it first loads,
 * and a Node worker thread (the CLI runs every command in one) has its own copy of `process.env`
 * that never reaches the environment — `tessera bench --threads 1` ran its c kernels on every core.
 * A library without a pool or without OpenMP has no such symbol: nothing to set there.
 */
const setThreads = (lib: ReturnType<typeof koffi.load>, threads: number): void => {
  for (const setter of ["int tessera_set_num_threads(int)", "void omp_set_num_threads(int)"]) {
    let set: ((n: number) => void) | undefined
    try {
      set = lib.func(setter) as (n: number) => void
    } catch {
      continue
    }
    set(Math.max(1, Math.floor(threads)))
  }
}

/**
 * Loads a library built from the emitted kernels (same names and params, in any order); with
 * `threads`, its parallel loops run on that many threads when called from this thread.
 */
export const loadC = (so: string, kernels: readonly CKernelSignature[], threads?: number): Effect.Effect<CModule, LoadError> =>
  Effect.try({
    try: () => {
      const lib = koffi.load(so)
      if (threads !== undefined) setThreads(lib, threads)
      const out = new Map<string, CKernel>()
      for (const k of kernels) out.set(k.name, checkedKernel(k, lib.func(k.name, "void", k.params.map((p) => ffiType(p.dtype))) as (...a: unknown[]) => unknown))
      const plan = planOf(lib, so, kernels)
      return { path: so, kernels: out, ...(plan ? { plan } : {}) }
    },
    catch: (e) => new LoadError({ target: "c", path: so, reason: e instanceof Error ? e.message : String(e) }),
  })

/**
 * Host memory for a c module's buffers, 64-byte aligned (a cache line; an AVX-512 vector). Node's
 * ArrayBuffers are only 16-byte aligned, so half of the 32-byte vector loads of a kernel would
 * straddle two cache lines: measured 30–45% slower convolutions on AVX2.
 */
export const alignedReserve: HostReserve = (sizes) => {
  const ALIGN = 64
  const rel: number[] = []
  let end = 0
  for (const n of sizes) {
    rel.push(end)
    end += Math.ceil(Math.max(ALIGN, n) / ALIGN) * ALIGN
  }
  const buffer = new ArrayBuffer(end + ALIGN)
  // ArrayBuffer backing stores do not move: the base's address decides the offset once
  const misaligned = Number(BigInt(koffi.address(new Uint8Array(buffer, 0, 1))) % BigInt(ALIGN))
  const base = misaligned === 0 ? 0 : ALIGN - misaligned
  return { buffer, offsets: rel.map((r) => base + r) }
}
