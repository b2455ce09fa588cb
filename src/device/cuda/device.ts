// The cuda target's Device: the artifact's kernels built by nvcc into a cubin for the GPU that is
// here (its compute capability, from the driver), loaded through the CUDA driver API (driver.ts,
// koffi over libcuda.so.1) and run by the same executor as every target: each reserved block one
// cuMemAlloc, inputs and outputs copied in and out, each of a kernel's launches (the manifest's
// grid, block and workspace, as the artifact's launcher makes them) a cuLaunchKernel on the
// default stream, timed with events. Without a driver or a device: NoGpuError (exit 2); without
// nvcc: a LoadError naming it.
import * as fs from "node:fs"
import { Effect, Layer } from "effect"
import { cArray, storageBytes, type DeviceArray, type DType } from "../../ast/graph/dtype.js"
import type { Artifact } from "../../lowering/program.js"
import { copyDeviceArray, Device, DeviceRunError, LoadError, type DeviceBlock, type DeviceBuffer, type DeviceModule, type DeviceShape, type TimeOptions } from "../device.js"
import { NoGpuError } from "../errors.js"
import { CudaDriverError, medianEventSeconds, openCudaDriver, type CudaDriver, type Handle } from "./driver.js"
import { buildCubin, findNvcc } from "./nvcc.js"
import { measureCuda } from "./measure.js"

/** Alignment of the workspace buffers inside a module's workspace block (the launcher's ARENA_ALIGN). */
const ALIGN = 256
const up = (n: number, a: number) => Math.ceil(n / a) * a

interface ManifestLaunches {
  readonly kernel: string
  readonly workspace: readonly { readonly name: string; readonly dtype: DType; readonly shape: readonly number[] }[]
  readonly launches: readonly { readonly function: string; readonly grid: readonly number[]; readonly block: readonly number[]; readonly sharedBytes: number }[]
}

interface GpuBlock {
  readonly ptr: bigint
  readonly bytes: number
}
interface GpuBuffer {
  readonly ptr: bigint
  readonly dtype: DType
  readonly elements: number
}

/** The artifact's kernels on the GPU (its driver opened, its cubin loaded). Throws NoGpuError, LoadError or CompileError (through the Effect). */
const loadCuda = (artifact: Artifact, driver: CudaDriver, cubin: Uint8Array): DeviceModule => {
  const launches = (artifact.manifest.launches ?? []) as readonly ManifestLaunches[]
  const module = driver.loadModule(cubin)
  const fns = new Map<string, Handle>()
  for (const k of launches) for (const l of k.launches) if (!fns.has(l.function)) fns.set(l.function, driver.getFunction(module, l.function))
  // one workspace block every kernel reuses (the kernels run in order on one stream)
  const wsOffsets = new Map<string, number[]>()
  let wsBytes = 0
  for (const k of launches) {
    let w = 0
    wsOffsets.set(
      k.kernel,
      k.workspace.map((b) => {
        const at = w
        w = up(w + Math.max(1, b.shape.reduce((a, d) => a * d, 1)) * storageBytes(b.dtype), ALIGN)
        return at
      }),
    )
    wsBytes = Math.max(wsBytes, w)
  }
  const allocated: bigint[] = []
  const malloc = (bytes: number) => {
    const p = driver.malloc(bytes)
    allocated.push(p)
    return p
  }
  const workspace = wsBytes > 0 ? malloc(wsBytes) : 0n
  const byKernel = new Map(launches.map((k) => [k.kernel, k] as const))
  const gpu = (b: DeviceBuffer) => b as unknown as GpuBuffer
  // (int64 as int64_t; uint64 still as a double, as the runner's arena holds it: cuda compiles no group that reads it)
  const hostArray = (b: GpuBuffer): DeviceArray => (b.dtype === "uint64" ? new Float64Array(b.elements) : new (cArray(b.dtype))(b.elements))
  /** `data` as the buffer's storage (int64 as int64_t: exact values, or doubles truncated). */
  const staged = (b: GpuBuffer, data: DeviceArray): DeviceArray => {
    const into = hostArray(b)
    copyDeviceArray(into, data)
    return into
  }
  const driverCall = <A>(kernel: string, f: () => A): A => {
    try {
      return f()
    } catch (e) {
      throw e instanceof CudaDriverError ? new DeviceRunError({ kernel, reason: e.message }) : e
    }
  }
  /** A kernel's launches on these buffers, their params marshalled once: each call of one is a cuLaunchKernel. */
  const prepared = (name: string, args: readonly DeviceBuffer[]): (() => void)[] => {
    const k = byKernel.get(name)
    if (!k) throw new DeviceRunError({ kernel: name, reason: "is not in this cuda module" })
    const ptrs = [...args.map((a) => gpu(a).ptr), ...(wsOffsets.get(name) ?? []).map((o) => workspace + BigInt(o))]
    return k.launches.map((l) => driver.prepareLaunch(fns.get(l.function)!, l.grid, l.block, 0, ptrs))
  }
  const launch = (name: string, args: readonly DeviceBuffer[]) => {
    for (const l of prepared(name, args)) l()
  }
  /** Launches timed back to back between two events after one untimed pass: the median seconds per pass. */
  const timeLaunches = (launches: readonly (() => void)[], options: TimeOptions) => {
    const pass = () => {
      for (const l of launches) l()
    }
    pass()
    driver.synchronize()
    return medianEventSeconds(driver, pass, options.repeats, options.minMs, 1 << 16)
  }
  const run = (name: string, args: readonly DeviceBuffer[]) =>
    driverCall(name, () => {
      launch(name, args)
      driver.synchronize()
    })
  return {
    kind: "cuda",
    kernels: new Set(byKernel.keys()),
    exactInt64: true,
    reserve: (bytes) => bytes.map((n) => ({ ptr: malloc(n), bytes: n }) satisfies GpuBlock as unknown as DeviceBlock),
    view: (block, dtype, elements) => {
      const b = block as unknown as GpuBlock
      if (elements * storageBytes(dtype) > Math.max(b.bytes, 1) && elements > 0) throw new DeviceRunError({ kernel: "view", reason: `${elements} ${dtype} do not fit a block of ${b.bytes} bytes` })
      return { ptr: b.ptr, dtype, elements } satisfies GpuBuffer as unknown as DeviceBuffer
    },
    input: (reserved, data) => {
      const b = gpu(reserved)
      driverCall("input", () => driver.toDevice(b.ptr, staged(b, data)))
      return reserved
    },
    output: (reserved) => reserved,
    read: (buffer) => {
      const b = gpu(buffer)
      const out = hostArray(b)
      driverCall("read", () => driver.toHost(out, b.ptr))
      // int64_t comes back exact (BigInt64Array); the rest as our storage
      return out instanceof BigInt64Array ? out : (out as DeviceArray)
    },
    write: (buffer, data) => {
      const b = gpu(buffer)
      driverCall("write", () => driver.toDevice(b.ptr, staged(b, data)))
    },
    run,
    // one untimed launch, then `repeats` rounds of back-to-back launches between two events, each at least minMs
    time: (name, args, options: TimeOptions = { repeats: 5, minMs: 20 }) => driverCall(name, () => timeLaunches(prepared(name, args), options)),
    // a run's kernels alone: their launches back to back, no copies, no synchronize between them
    timeSequence: (steps, options: TimeOptions = { repeats: 5, minMs: 20 }) => driverCall(steps[0]?.kernel ?? "timeSequence", () => timeLaunches(steps.flatMap((s) => prepared(s.kernel, s.args)), options)),
    close: () => {
      for (const p of allocated.splice(0)) driver.free(p)
      driver.unloadModule(module)
    },
  }
}

export const cudaDevice: DeviceShape = {
  kind: "cuda",
  measure: measureCuda,
  load: (artifact) =>
    Effect.gen(function* () {
      const driver = yield* Effect.try({
        try: () => openCudaDriver(),
        catch: (e) => (e instanceof NoGpuError ? e : new LoadError({ target: "cuda", path: "libcuda.so.1", reason: e instanceof Error ? e.message : String(e) })),
      })
      // this device copies float16 as our storage's 4-byte floats; an artifact of __half buffers (a
      // graph's own float16, or --precision fp16) runs through its standalone runner, which holds halves
      const halves = artifact.kernels.find((k) => k.params.some((p) => p.dtype === "float16"))
      if (halves) return yield* new LoadError({ target: "cuda", path: "the artifact", reason: `kernel ${halves.name} has float16 (__half) buffers, which the Node device does not hold yet: build and run the artifact's standalone runner (make; ./model)` })
      const nvcc = findNvcc()
      if (!nvcc) return yield* new LoadError({ target: "cuda", path: "the kernels", reason: "nvcc was not found ($CUDA_HOME/bin, by default /usr/local/cuda/bin, or PATH): it builds the kernels for this GPU" })
      const source = artifact.files.get("tessera_kernels.cu")
      if (!source) return yield* new LoadError({ target: "cuda", path: "the artifact", reason: "it has no tessera_kernels.cu" })
      const arch = `sm_${driver.device.major}${driver.device.minor}`
      const { cubin } = yield* buildCubin(nvcc, new TextDecoder().decode(source), arch)
      const image = yield* Effect.try({ try: () => new Uint8Array(fs.readFileSync(cubin)), catch: (e) => new LoadError({ target: "cuda", path: cubin, reason: e instanceof Error ? e.message : String(e) }) })
      return yield* Effect.try({
        try: () => loadCuda(artifact, driver, image),
        catch: (e) => new LoadError({ target: "cuda", path: cubin, reason: e instanceof Error ? e.message : String(e) }),
      })
    }),
}

export const cudaDeviceLayer: Layer.Layer<Device> = Layer.succeed(Device, cudaDevice)

/** Whether a GPU can be driven here, or why not (tests skip visibly with the reason). */
export const cudaGpuHere = (): { readonly ok: true; readonly device: string } | { readonly ok: false; readonly reason: string } => {
  try {
    const d = openCudaDriver()
    return { ok: true, device: `${d.device.name} (sm_${d.device.major}${d.device.minor}, ${d.device.sms} SMs)` }
  } catch (e) {
    return { ok: false, reason: e instanceof NoGpuError ? e.reason : e instanceof Error ? e.message : String(e) }
  }
}
