// The `wasm` device's loader: validates and instantiates an emitted module against a
// WebAssembly.Memory (plain, or shared when the module imports a shared one) with the math imports.
// A kernel runs two ways: `callAt(name, addresses)` on buffers already in the memory (the device
// module's: the executor reserves its blocks, the constants, the inputs and outputs there, so a
// call copies nothing), and as a function of typed arrays (tests, per-layer timing), which copies an
// array that lives elsewhere into a staging region — all but the outputs the layout marks as
// written whole before any read — and the written ones back.
//
// Threads (a ThreadHost that starts workers — Node's worker_threads, src/device/wasm/node.ts, or a
// cross-origin isolated page's Web Workers, src/device/wasm/web-threads.ts —, `threads` > 1 and a
// module emitted with a shared memory; this file imports neither): workers instantiate the same module on the same memory, each with
// a frame of its own. A kernel's phases run in order; a parallel phase's iterations are cut into
// a few ranges per thread, which the calling thread and the workers claim from a shared counter
// (Atomics) until none is left; the calling thread then waits for the ranges still running. A
// worker that gets no core in time leaves its ranges to the others (a loaded machine degrades to
// one thread, not to waiting), and the answer is the same whoever runs a range.
//
// Memory: [guard | args (the params' addresses) | job | staging | frames | reserved blocks …]; the layout of each kernel comes from the emitter as data (this file never imports emit).
import { Effect } from "effect"
import { erf } from "../../ast/te/eval-expr.js" // the evaluator's formula, so results agree bit for bit in f64
import { allocate, converter, type DType, type TypedArray } from "../../ast/graph/dtype.js"
import { LoadError } from "../device.js"

/** A kernel of typed arrays (the js target's shape). */
export type KernelFn = (...args: TypedArray[]) => void

/** The module's linear memory, where the executor's blocks are reserved. */
export interface DeviceMemory {
  /** Reserves blocks of these byte sizes, at least 16-byte aligned, for good; their byte offsets in the buffer. */
  readonly reserve: (bytes: readonly number[]) => readonly number[]
  /** The memory's buffer now (another one after the memory grew: views are made again from it). */
  readonly buffer: () => ArrayBufferLike
}

// The WebAssembly JS API, typed here (our lib is ES2022 without DOM, and @types/node omits it).
interface WasmMemory {
  readonly buffer: ArrayBuffer | SharedArrayBuffer
  grow(pages: number): number
}
interface WasmApi {
  validate(bytes: Uint8Array): boolean
  Module: { new (bytes: Uint8Array): object; imports(m: object): { module: string; name: string; kind: string }[] }
  Instance: new (m: object, imports: object) => { readonly exports: Record<string, unknown> }
  Memory: new (d: { initial: number; maximum?: number; shared?: boolean }) => WasmMemory
}
const WA = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly

/** Whether the engine accepts the bytes as a module (WebAssembly.validate). */
export const validateWasm = (bytes: Uint8Array): boolean => WA.validate(bytes)


/** A kernel's params and frame (src/emit/wasm/emit.ts WasmKernelLayout, structurally). */
export interface WasmFrameLayout {
  readonly name: string
  readonly params: readonly { readonly dtype: DType; readonly length: number; readonly written: boolean; readonly copyIn?: boolean }[]
  readonly frameBytes: number
  readonly phases?: readonly { readonly parallel?: number; readonly work?: number }[]
}

export interface WasmLoadOptions {
  /** Use a shared memory (the module must have been emitted with `sharedMemory`). Default: threads > 1. */
  readonly shared?: boolean
  /**
   * Threads for the parallel phases, the calling one included (a module emitted with
   * `sharedMemory`). Default 1; 1 where threads are not available or the module imports a math
   * function workers do not have.
   */
  readonly threads?: number
  /** Stores a parallel phase must run to be split across threads. Default 65536 (tests: 0). */
  readonly minSplitWork?: number
  /** Where the workers come from; absent or unavailable: one thread. */
  readonly threadHost?: ThreadHost
}

/** The kernels of a loaded module as functions of typed arrays, with the memory they share. */
export type WasmKernels = Map<string, KernelFn> & {
  readonly memory: DeviceMemory
  /** Threads the parallel phases run on (1: the calling thread alone). */
  readonly threads: number
  /** Ends the workers (the kernels then run on the calling thread alone). */
  readonly close: () => void
  /** Ranges of split phases the workers ran so far (the calling thread ran the others). */
  readonly workerRanges: () => number
  /** Runs a kernel on buffers already in the memory, by their byte addresses (no staging). */
  readonly callAt: (name: string, addresses: readonly number[]) => void
}

/** Whether this host can run a module's kernels on several threads (SharedArrayBuffer, Atomics, worker_threads). */
export const wasmThreadsAvailable = (): boolean =>
  typeof SharedArrayBuffer === "function" && typeof Atomics === "object" && typeof process === "object" && typeof process.versions?.node === "string"

/**
 * Where the workers come from: `start(source, data)` runs `source` — a script that defines
 * `main(data)` — on a thread of its own and calls `main` with `data` (a WebAssembly.Module, a
 * shared memory and numbers: what a worker may be sent); `available()` says whether this host can
 * share a memory with one and block on it (Atomics.wait) in the calling thread.
 */
export interface ThreadHost {
  readonly available: () => boolean
  readonly start: (source: string, data: unknown) => void
}

/** The "math" imports a module may ask for (src/emit/wasm/expr.ts MATH_IMPORTS). */
export const WASM_MATH_IMPORTS: Readonly<Record<string, (...a: number[]) => number>> = {
  exp: Math.exp,
  log: Math.log,
  tanh: Math.tanh,
  erf,
  pow: Math.pow,
  sigmoid: (x) => 1 / (1 + Math.exp(-x)),
  sin: Math.sin,
  cos: Math.cos,
  round_f16: converter("float16"),
  round_bf16: converter("bfloat16"),
}

const PAGE = 65536
const MAX_SHARED_PAGES = 16384 // the maximum the emitter declares for a shared memory (1 GiB)
const GUARD = 64 // nothing lives below: a stray negative index cannot alias a buffer silently without bounds checks
const I32_MAX = 0x7fffffff
const align16 = (n: number) => Math.ceil(n / 16) * 16
const elementBytes = (d: DType) => allocate(d, 0).BYTES_PER_ELEMENT

// The job (int32s): seq (bumped last when one is posted), what to run, the claim counter (the
// job's tag << 16 | next range) and the ranges done.
const SEQ = 0
const KERNEL = 1
const PHASE = 2
const EXTENT = 3
const RANGES = 4
const NEXT = 5
const DONE = 6
const FAILED = 7
const JOB_BYTES = 32
/** Polls before sleeping (phases follow each other closely). */
const SPIN = 20000
/** Stores a phase must run to be split across threads (fewer do not pay for waking a worker). */
const MIN_SPLIT_WORK = 1 << 16
/** Ranges per thread a split phase is cut into (several: a late thread leaves less undone). */
const RANGES_PER_THREAD = 4

/**
 * A worker: instantiates the module on the shared memory, then for each job claims ranges while
 * the counter carries the job's tag (a range of a later job is never run with an earlier job's
 * kernel) and counts them done; kernel < 0 stops it. One that cannot instantiate claims nothing.
 */
export const WORKER_SOURCE = `
const main = (workerData) => {
const { module, memory, names, math, args, shared, frame, job, spin } = workerData
const I = new Int32Array(memory.buffer, job, 8)
let fns
try {
  const m = {}
  for (const k of Object.keys(math)) m[k] = (0, eval)(math[k])
  const exports = new WebAssembly.Instance(module, { env: { memory }, math: m }).exports
  fns = names.map((n) => exports[n])
} catch {}
let seen = 0
for (;;) {
  for (let n = 0; Atomics.load(I, ${SEQ}) === seen; n++) if (n > spin) Atomics.wait(I, ${SEQ}, seen)
  seen = Atomics.load(I, ${SEQ})
  const k = I[${KERNEL}]
  if (k < 0) break
  if (!fns) continue
  const phase = I[${PHASE}], extent = I[${EXTENT}], ranges = I[${RANGES}], tag = seen << 16
  for (;;) {
    const cur = Atomics.load(I, ${NEXT})
    if ((cur & ~0xffff) !== tag || (cur & 0xffff) >= ranges) break
    if (Atomics.compareExchange(I, ${NEXT}, cur, cur + 1) !== cur) continue
    const r = cur & 0xffff
    try { fns[k](args, shared, frame, phase, Math.floor((extent * r) / ranges), Math.floor((extent * (r + 1)) / ranges)) } catch { Atomics.store(I, ${FAILED}, 1) }
    if (Atomics.add(I, ${DONE}, 1) + 1 === ranges) Atomics.notify(I, ${DONE})
  }
}
}
`

/** A math import as source a worker evaluates: Math's own, or a function of Math alone (erf, sigmoid). */
export const workerMathSource = (name: string): string | undefined => {
  const f = WASM_MATH_IMPORTS[name]
  if (f !== undefined && f === (Math as unknown as Record<string, unknown>)[name]) return `Math.${name}`
  return name === "erf" || name === "sigmoid" ? `(${String(f)})` : undefined
}

/** Validates, compiles and instantiates `bytes`; one kernel function per layout (workers started when threads > 1). */
export const loadWasmModule = (bytes: Uint8Array, layouts: readonly WasmFrameLayout[], opts: WasmLoadOptions = {}): Effect.Effect<WasmKernels, LoadError> =>
  Effect.tryPromise({
    try: async () => {
      const host = opts.threadHost?.available() ? opts.threadHost : undefined
      const threads = (opts.threads ?? 1) > 1 && host ? (opts.threads ?? 1) : 1
      return loadWasmModuleSync(bytes, layouts, { ...opts, threads }, threads > 1 ? host : undefined)
    },
    catch: (e) => new LoadError({ target: "wasm", path: "model.wasm", reason: e instanceof Error ? e.message : String(e) }),
  })

/** The synchronous core of loadWasmModule (throws); threads need `host`'s workers. */
export const loadWasmModuleSync = (bytes: Uint8Array, layouts: readonly WasmFrameLayout[], opts: WasmLoadOptions = {}, host?: ThreadHost): WasmKernels => {
  if (!WA.validate(bytes)) {
    // compile to get the engine's reason
    new WA.Module(bytes)
    throw new Error("WebAssembly.validate rejected the module")
  }
  const mod = new WA.Module(bytes)
  const wanted = new Set(WA.Module.imports(mod).filter((i) => i.module === "math").map((i) => i.name))
  const math = Object.fromEntries([...wanted].map((n) => {
    const f = WASM_MATH_IMPORTS[n]
    if (!f) throw new Error(`the module imports an unknown math function '${n}'`)
    return [n, f] as const
  }))
  const workerMath = Object.fromEntries([...wanted].map((n) => [n, workerMathSource(n)] as const))
  const minWork = opts.minSplitWork ?? MIN_SPLIT_WORK
  const splits = (p: { readonly parallel?: number; readonly work?: number }) => (p.parallel ?? 0) > 1 && (p.work ?? Infinity) >= minWork
  const parallel = layouts.some((l) => l.phases?.some(splits))
  const threads = host && parallel && Object.values(workerMath).every((x) => x !== undefined) ? Math.max(1, Math.floor(opts.threads ?? 1)) : 1
  const shared = opts.shared ?? (opts.threads ?? 1) > 1
  if (threads > 1 && !shared) throw new Error("threads need a shared memory")
  // the fixed regions, then the reserved blocks from `heap` on
  const argsAt = GUARD
  const jobAt = align16(argsAt + 4 * Math.max(1, ...layouts.map((l) => l.params.length)))
  const stageAt = jobAt + JOB_BYTES
  const stageBytes = Math.max(0, ...layouts.map((l) => l.params.reduce((s, p) => s + align16(p.length * elementBytes(p.dtype)), 0)))
  const frameAt = stageAt + stageBytes
  const frameBytes = align16(Math.max(0, ...layouts.map((l) => l.frameBytes)))
  let heap = frameAt + frameBytes * threads
  const pages = Math.max(1, Math.ceil(heap / PAGE))
  const memory = shared ? new WA.Memory({ initial: pages, maximum: MAX_SHARED_PAGES, shared: true }) : new WA.Memory({ initial: pages })
  const instance = new WA.Instance(mod, { env: { memory }, math })
  // views of the memory's buffer, made again when it grows
  let buffer = memory.buffer
  let u8 = new Uint8Array(buffer)
  let i32 = new Int32Array(buffer)
  const grown = () => {
    buffer = memory.buffer
    u8 = new Uint8Array(buffer)
    i32 = new Int32Array(buffer)
  }
  const deviceMemory: DeviceMemory = {
    reserve: (sizes) => {
      const at = sizes.map((n) => {
        const a = heap
        heap = align16(heap + Math.max(16, n))
        return a
      })
      const need = Math.ceil(heap / PAGE) - buffer.byteLength / PAGE
      if (need > 0) {
        memory.grow(need)
        grown()
      }
      return at
    },
    buffer: () => buffer,
  }
  // the job (a view of the first buffer: a shared one stays valid as the memory grows) and the workers
  const job = new Int32Array(buffer, jobAt, JOB_BYTES / 4)
  const names = layouts.map((l) => l.name)
  for (let w = 1; w < threads; w++) {
    const workerData = { module: mod, memory, names, math: workerMath, args: argsAt, shared: frameAt, frame: frameAt + frameBytes * w, job: jobAt, spin: SPIN }
    host!.start(WORKER_SOURCE, workerData)
  }
  let closed = threads === 1
  let seq = 0
  let workerRanges = 0
  const post = (kernel: number) => {
    seq = (seq + 1) & 0x7fff // the tag of the claim counter
    job[KERNEL] = kernel
    Atomics.store(job, SEQ, seq)
    Atomics.notify(job, SEQ)
  }
  /** Runs phase `phase` of kernel `kernel`: its `extent` iterations in ranges the threads claim. */
  const runSplit = (kernel: number, phase: number, extent: number, run: (phase: number, begin: number, end: number) => void) => {
    const ranges = Math.min(extent, threads * RANGES_PER_THREAD)
    job[PHASE] = phase
    job[EXTENT] = extent
    job[RANGES] = ranges
    Atomics.store(job, DONE, 0)
    Atomics.store(job, FAILED, 0)
    Atomics.store(job, NEXT, ((seq + 1) & 0x7fff) << 16)
    post(kernel)
    let error: unknown
    let mine = 0
    for (;;) {
      const cur = Atomics.load(job, NEXT)
      if ((cur & 0xffff) >= ranges) break
      if (Atomics.compareExchange(job, NEXT, cur, cur + 1) !== cur) continue
      const r = cur & 0xffff
      mine++
      try {
        run(phase, Math.floor((extent * r) / ranges), Math.floor((extent * (r + 1)) / ranges))
      } catch (e) {
        error ??= e
      }
      Atomics.add(job, DONE, 1)
    }
    // the ranges still running elsewhere
    for (let i = 0, d = Atomics.load(job, DONE); d !== ranges; i++, d = Atomics.load(job, DONE)) if (i > SPIN) Atomics.wait(job, DONE, d)
    workerRanges += ranges - mine
    if (error !== undefined) throw error
    if (job[FAILED] !== 0) throw new Error(`kernel ${names[kernel]}: a worker's range trapped`)
  }
  const fns = new Map<string, KernelFn>()
  const calls = new Map<string, (addresses: readonly number[]) => void>()
  layouts.forEach((lay, kernel) => {
    const fn = instance.exports[lay.name]
    if (typeof fn !== "function") throw new Error(`the module exports no kernel '${lay.name}'`)
    const exported = fn as (args: number, shared: number, frame: number, phase: number, begin: number, end: number) => void
    const run = (phase: number, begin: number, end: number) => exported(argsAt, frameAt, frameAt, phase, begin, end)
    const phases = lay.phases ?? []
    const split = phases.some(splits)
    const staged: number[] = lay.params.map(() => -1)
    // the kernel on the addresses in the args region: its phases, split across threads where worth it
    const invoke = () => {
      if (closed || !split) run(-1, 0, I32_MAX)
      else phases.forEach((p, k) => (splits(p) ? runSplit(kernel, k, p.parallel!, run) : run(k, 0, I32_MAX)))
    }
    calls.set(lay.name, (addresses) => {
      if (addresses.length !== lay.params.length) throw new Error(`kernel ${lay.name} takes ${lay.params.length} buffers, given ${addresses.length}`)
      addresses.forEach((a, k) => (i32[(argsAt >> 2) + k] = a))
      invoke()
    })
    fns.set(lay.name, (...args: TypedArray[]) => {
      if (args.length !== lay.params.length) throw new Error(`kernel ${lay.name} takes ${lay.params.length} arrays, given ${args.length}`)
      // resident arrays by address, the others copied into the staging region
      let stage = stageAt
      lay.params.forEach((p, k) => {
        const a = args[k]
        if (a.buffer === buffer) {
          i32[(argsAt >> 2) + k] = a.byteOffset
          staged[k] = -1
          return
        }
        staged[k] = stage
        i32[(argsAt >> 2) + k] = stage
        if (p.copyIn !== false) u8.set(new Uint8Array(a.buffer, a.byteOffset, Math.min(a.byteLength, p.length * a.BYTES_PER_ELEMENT)), stage)
        stage += align16(p.length * elementBytes(p.dtype))
      })
      invoke()
      lay.params.forEach((p, k) => {
        if (staged[k] < 0 || !p.written) return
        const a = args[k]
        const n = Math.min(a.byteLength, p.length * a.BYTES_PER_ELEMENT)
        new Uint8Array(a.buffer, a.byteOffset, n).set(u8.subarray(staged[k], staged[k] + n))
      })
    })
  })
  const close = () => {
    if (closed) return
    closed = true
    post(-1)
  }
  const callAt = (name: string, addresses: readonly number[]) => {
    const call = calls.get(name)
    if (!call) throw new Error(`the module has no kernel '${name}'`)
    call(addresses)
  }
  return Object.assign(fns, { memory: deviceMemory, threads, close, workerRanges: () => workerRanges, callAt })
}
