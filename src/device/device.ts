// The Device service: where a target's artifact is built, loaded and run. One service shape for
// every target (Context.Service), one Layer per target kind (the c, js and wasm devices; a GPU or
// an accelerator next). A loaded module owns its memory: the executor reserves blocks in it, views
// them as typed buffers, places the model's constants there once, binds each run's inputs and
// outputs, runs kernels on buffers of that memory and reads back only what the host needs. A device
// that shares the host's memory (c, js) does all of that without a copy; one with a memory of its
// own (wasm's linear memory, a GPU's) copies exactly the inputs in and the outputs out.
import { Context, type Effect } from "effect"
import { allocate, isBigArray, type DeviceArray, type DType, type TypedArray } from "../ast/graph/dtype.js"
import type { TargetKind } from "../ast/target.js"
import type { PrimFunc } from "../ast/tir/tir.js"
import type { Artifact } from "../lowering/program.js"
import { DeviceRunError, type DeviceError } from "./errors.js"
import type { Candidate, Measured, MeasurerOptions, ReferenceSource } from "./measure.js"

export { CompileError, DeviceRunError, LoadError, UnsafeCacheError, type DeviceError } from "./errors.js"

/** One kernel call of a run: the kernel and its buffers. */
export interface KernelCall {
  readonly kernel: string
  readonly args: readonly DeviceBuffer[]
}

export interface TimeOptions {
  readonly repeats: number
  readonly minMs: number
}

/**
 * `run` timed on the host's clock: one untimed call, then `repeats` rounds of back-to-back calls,
 * each at least `minMs` long; the median seconds per call (a device whose calls return before the
 * kernel ends synchronises inside `run`).
 */
export const timeRuns = (run: () => void, options: TimeOptions = { repeats: 5, minMs: 20 }): number => {
  run()
  const times: number[] = []
  for (let r = 0; r < Math.max(1, options.repeats); r++) {
    let n = 0
    const t0 = performance.now()
    let t = t0
    while (t - t0 < options.minMs || n === 0) {
      run()
      n++
      t = performance.now()
    }
    times.push((t - t0) / 1000 / n)
  }
  return times.sort((a, b) => a - b)[Math.floor(times.length / 2)]
}

declare const blockBrand: unique symbol
declare const bufferBrand: unique symbol

/** A block of a device's memory, reserved for the module's lifetime (opaque to everyone but its module). */
export interface DeviceBlock {
  readonly [blockBrand]: true
}

/** A typed buffer in a device's memory (opaque to everyone but its module, which knows its dtype and size). */
export interface DeviceBuffer {
  readonly [bufferBrand]: true
}

export interface DeviceModule {
  readonly kind: TargetKind
  /** The kernels it can run, by name. */
  readonly kernels: ReadonlySet<string>
  /** Threads its kernels run on, where the device decides it (wasm: the workers started, the calling thread included). */
  readonly threads?: number
  /** Parallel ranges the workers (not the calling thread) have run so far (wasm with threads; absent elsewhere). */
  readonly workerRanges?: () => number
  /** Reserves one block per size in bytes, each 64-byte aligned, for as long as the module lives. */
  readonly reserve: (bytes: readonly number[]) => readonly DeviceBlock[]
  /** A typed buffer at the start of a block. */
  readonly view: (block: DeviceBlock, dtype: DType, elements: number) => DeviceBuffer
  /**
   * This run's buffer for an input given as host data: a copy in `reserved` on a device with its
   * own memory, the host array itself on a device that reads host memory.
   */
  readonly input: (reserved: DeviceBuffer, data: DeviceArray) => DeviceBuffer
  /**
   * This run's buffer for an output: `reserved` on a device with its own memory (read copies it
   * out), on one that writes host memory the caller's array `into` where given (its length and
   * type checked by the executor), else a fresh host array (handed to the caller as it is).
   */
  readonly output: (reserved: DeviceBuffer, into?: TypedArray) => DeviceBuffer
  /** A buffer's contents on the host: the same memory where the device shares it (valid until it is written again), else a copy. */
  readonly read: (buffer: DeviceBuffer) => DeviceArray
  /** Host data copied into a buffer (an int64's exact values or its doubles, converted to the buffer's storage). */
  readonly write: (buffer: DeviceBuffer, data: DeviceArray) => void
  /** Whether its int64 buffers hold int64 (BigInt64Arrays: c, js, wasm): exact, so the executor hands it values past 2^53. */
  readonly exactInt64?: boolean
  /** Whether its uint64 buffers hold uint64 (BigUint64Arrays: c, js, wasm). */
  readonly exactUint64?: boolean
  /** Runs a kernel on buffers of this module; throws DeviceRunError on a kernel it does not have or arguments that do not fit. */
  readonly run: (kernel: string, args: readonly DeviceBuffer[]) => void
  /** Median seconds a kernel takes on these buffers: `repeats` rounds, each at least `minMs` of back-to-back calls after one untimed call. */
  readonly time: (kernel: string, args: readonly DeviceBuffer[], options?: TimeOptions) => number
  /**
   * Median seconds a sequence of kernel calls takes on the device with nothing between them (no
   * copy, no synchronization, no host work but the launches): a GPU's kernel time apart from the
   * copies and syncs a run does (cuda: launches between two events). Absent where a run is its
   * kernels already (the host devices).
   */
  readonly timeSequence?: (steps: readonly KernelCall[], options?: TimeOptions) => number
  /**
   * The module's kernels as one call a run (c, where its library has a plan: no host code between
   * the kernels): `calls` are every kernel once, in the artifact's order, on buffers this module
   * reserved (their memory fixed for its lifetime); the runner makes those calls. Throws
   * DeviceRunError where the calls do not fit. Absent where the device has none.
   */
  readonly plan?: (calls: readonly KernelCall[]) => () => void
  /** Ends what the module started (worker threads); its buffers are gone. */
  readonly close: () => void
}


/** Tuning candidates of one workload to measure, each checked against the reference first. */
export interface MeasureRequest {
  readonly candidates: readonly Candidate[]
  readonly source: ReferenceSource
  /** The candidates' code in the target's language, each under its name (the target's emitter, handed in: a device never imports one). */
  readonly render: (funcs: readonly { readonly name: string; readonly func: PrimFunc }[]) => string
  readonly options: MeasurerOptions
}

export interface DeviceShape {
  readonly kind: TargetKind
  /** Builds what needs building (gcc for c) and loads the artifact's kernels. */
  readonly load: (artifact: Artifact) => Effect.Effect<DeviceModule, DeviceError>
  /**
   * Measures tuning candidates, isolated (a worker, a child process): one that crashes, hangs or
   * computes wrongly is an error of its own, never a timing and never the tuner's end. Absent: the
   * device cannot time candidates yet.
   */
  readonly measure?: (request: MeasureRequest) => Effect.Effect<readonly Measured[]>
}

/** The device the artifacts of a stage are loaded on: provided by a target's Layer (src/backend). */
export class Device extends Context.Service<Device, DeviceShape>()("tessera/device/Device") {}

/** `data` into `into`, converted where one holds BigInts and the other numbers (int64 / uint64: exact values and doubles, wrapped to the buffer's type). */
export const copyDeviceArray = (into: DeviceArray, data: DeviceArray): void => {
  if (isBigArray(into) === isBigArray(data)) return void into.set(data as never)
  if (isBigArray(into))
    for (let i = 0; i < data.length; i++) {
      const x = data[i] as number
      into[i] = Number.isFinite(x) ? BigInt(Math.trunc(x)) : 0n
    }
  else for (let i = 0; i < data.length; i++) into[i] = Number(data[i])
}

/** The aligned host memory a host-memory device reserves blocks in (c: 64-byte aligned for its vector loads). */
export type HostReserve = (bytes: readonly number[]) => { readonly buffer: ArrayBuffer; readonly offsets: readonly number[] }

/** Plain ArrayBuffer blocks (a device that needs no alignment beyond the typed arrays'). */
export const plainReserve: HostReserve = (bytes) => {
  const offsets: number[] = []
  let end = 0
  for (const n of bytes) {
    offsets.push(end)
    end += Math.ceil(Math.max(64, n) / 64) * 64
  }
  return { buffer: new ArrayBuffer(Math.max(8, end)), offsets }
}

interface HostBlock {
  readonly buffer: ArrayBuffer
  readonly offset: number
}

type ViewCtor = new (buffer: ArrayBuffer, offset: number, length: number) => DeviceArray

/**
 * A module whose buffers are host typed arrays (the c and js devices): reserve is host memory,
 * input hands the array itself, output a fresh array, read is the array, run calls the kernel
 * function with the arrays.
 */
export const hostModule = (
  kind: TargetKind,
  // (each kernel takes the arrays `arrayOf` makes: js's our storage, c's int64_t for int64)
  kernels: ReadonlyMap<string, (...args: never[]) => void>,
  reserve: HostReserve = plainReserve,
  arrayOf: (d: DType) => ViewCtor = (d) => allocate(d, 0).constructor as unknown as ViewCtor,
  // (c's plan runner, on the arrays themselves)
  plan?: (calls: readonly { readonly kernel: string; readonly args: readonly DeviceArray[] }[]) => () => void,
): DeviceModule => {
  const array = (b: DeviceBuffer) => b as unknown as DeviceArray
  const buffer = (a: DeviceArray) => a as unknown as DeviceBuffer
  const run = (name: string, args: readonly DeviceBuffer[]) => {
    const fn = kernels.get(name)
    if (!fn) throw new DeviceRunError({ kernel: name, reason: `is not in this ${kind} module` })
    fn(...(args as unknown as never[]))
  }
  const copy = copyDeviceArray
  return {
    kind,
    kernels: new Set(kernels.keys()),
    exactInt64: arrayOf("int64") === (BigInt64Array as unknown as ViewCtor),
    exactUint64: arrayOf("uint64") === (BigUint64Array as unknown as ViewCtor),
    reserve: (bytes) => {
      const { buffer: memory, offsets } = reserve(bytes)
      return bytes.map((_, k) => ({ buffer: memory, offset: offsets[k] }) satisfies HostBlock as unknown as DeviceBlock)
    },
    view: (block, dtype, elements) => {
      const b = block as unknown as HostBlock
      return buffer(new (arrayOf(dtype))(b.buffer, b.offset, elements))
    },
    // (the host array itself where it is the buffer's kind; an int64's doubles for int64_t buffers: copied)
    input: (reserved, data) => (data.constructor === array(reserved).constructor ? buffer(data) : (copy(array(reserved), data), reserved)),
    output: (reserved, into) => {
      const r = array(reserved)
      if (into && into.constructor === r.constructor) return buffer(into)
      return buffer(new (r.constructor as unknown as new (n: number) => DeviceArray)(r.length))
    },
    read: array,
    write: (b, data) => copy(array(b), data),
    run,
    time: (name, args, options) => timeRuns(() => run(name, args), options),
    ...(plan ? { plan: (calls: readonly KernelCall[]) => plan(calls.map((c) => ({ kernel: c.kernel, args: c.args.map(array) }))) } : {}),
    close: () => {},
  }
}
