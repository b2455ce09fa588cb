// The `wasm` device: an artifact's module instantiated on a memory of its own (device/wasm/load.ts).
// Its buffers are places in that linear memory: the executor's blocks are reserved there, a run's
// inputs are copied in and its outputs copied out, kernels are called by the buffers' addresses.
// With threads (a module emitted with a shared memory, a thread host) workers share the parallel phases.
import { Effect, Layer } from "effect"
import { allocate, storageBytes, type DType, type TypedArray } from "../../ast/graph/dtype.js"
import type { Artifact, KernelEntry } from "../../lowering/program.js"
import { Device, DeviceRunError, LoadError, timeRuns, type DeviceBlock, type DeviceBuffer, type DeviceModule, type DeviceShape } from "../device.js"
import { loadWasmModule, type ThreadHost, type WasmFrameLayout, type WasmKernels } from "./load.js"

/** A place in the module's memory: its byte address, dtype and elements. */
interface WasmBuffer {
  readonly at: number
  readonly dtype: DType
  readonly elements: number
}

type ArrayCtor = new (buffer: ArrayBufferLike, offset: number, length: number) => TypedArray

/** The frame layouts the loader needs, from the artifact's kernel entries. */
export const frameLayouts = (kernels: readonly KernelEntry[]): WasmFrameLayout[] =>
  kernels.map((k) => ({
    name: k.name,
    params: k.params.map((p) => ({ dtype: p.dtype, length: p.elements, written: p.written, copyIn: p.copyIn })),
    frameBytes: k.frame?.bytes ?? 0,
    phases: k.frame?.phases ?? [],
  }))

/** A loaded module as a DeviceModule: buffers by address in its memory. */
export const wasmModule = (kernels: WasmKernels): DeviceModule => {
  const view = (b: WasmBuffer): TypedArray => new (allocate(b.dtype, 0).constructor as unknown as ArrayCtor)(kernels.memory.buffer(), b.at, b.elements)
  const place = (b: DeviceBuffer) => b as unknown as WasmBuffer
  const buffer = (b: WasmBuffer) => b as unknown as DeviceBuffer
  const run = (name: string, args: readonly DeviceBuffer[]) => {
    if (!kernels.has(name)) throw new DeviceRunError({ kernel: name, reason: "is not in this wasm module" })
    kernels.callAt(name, args.map((a) => place(a).at))
  }
  return {
    kind: "wasm",
    kernels: new Set(kernels.keys()),
    threads: kernels.threads,
    workerRanges: kernels.workerRanges,
    reserve: (bytes) => kernels.memory.reserve(bytes).map((at) => ({ at }) as unknown as DeviceBlock),
    view: (block, dtype, elements) => buffer({ at: (block as unknown as { at: number }).at, dtype, elements }),
    input: (reserved, data) => {
      const r = place(reserved)
      if (data.length !== r.elements || data.BYTES_PER_ELEMENT !== storageBytes(r.dtype)) throw new DeviceRunError({ kernel: "(input)", reason: `${data.length} elements of ${data.BYTES_PER_ELEMENT} bytes do not fit a ${r.dtype}[${r.elements}] buffer` })
      view(r).set(data as ArrayLike<number>)
      return reserved
    },
    output: (reserved) => reserved,
    read: (b) => view(place(b)).slice(),
    write: (b, data) => view(place(b)).set(data as ArrayLike<number>),
    run,
    time: (name, args, options) => timeRuns(() => run(name, args), options),
    close: () => kernels.close(),
  }
}

export interface WasmDeviceOptions {
  /** Threads for the parallel phases (a module emitted with a shared memory); 1 by default. */
  readonly threads?: number
  /** Where the workers come from (Node's: ./node.ts; a page's: ./web-threads.ts); absent: one thread. */
  readonly threadHost?: ThreadHost
}

export const wasmDevice = (o: WasmDeviceOptions = {}): DeviceShape => ({
  kind: "wasm",
  load: (artifact: Artifact) =>
    Effect.gen(function* () {
      const name = artifact.manifest.module
      const bytes = typeof name === "string" ? artifact.files.get(name) : undefined
      if (!bytes) return yield* new LoadError({ target: "wasm", path: String(name ?? "(no module)"), reason: "the artifact has no module" })
      const threads = artifact.manifest.sharedMemory === true ? Math.max(1, o.threads ?? 1) : 1
      return wasmModule(yield* loadWasmModule(bytes, frameLayouts(artifact.kernels), { threads, shared: artifact.manifest.sharedMemory === true, ...(o.threadHost ? { threadHost: o.threadHost } : {}) }))
    }),
})

/** The wasm device on the given thread host (none: one thread); Node's is ./node.ts wasmDeviceLayer. */
export const wasmDeviceLayerWith = (o: WasmDeviceOptions = {}): Layer.Layer<Device> => Layer.succeed(Device, wasmDevice(o))
