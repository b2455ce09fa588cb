// The CUDA driver API through koffi (libcuda.so.1, the driver's own library: no toolkit needed to
// run): init, the first device's primary context, modules loaded from a cubin, device memory,
// launches and events. Every call's CUresult is checked; a failure is a CudaDriverError naming the
// call and the driver's message. Opening it where there is no driver library or no device is a
// NoGpuError (the CLI's exit 2), so commands and tests can tell "no GPU here" from a failure.
import koffi from "koffi"
import { Data } from "effect"
import { NoGpuError } from "../errors.js"

export { NoGpuError }

/** A driver call that returned an error. */
export class CudaDriverError extends Data.TaggedError("CudaDriverError")<{ readonly call: string; readonly code: number; readonly reason: string }> {
  override get message(): string {
    return `cuda driver: ${this.call} failed (${this.code}: ${this.reason})`
  }
}

type Fn = (...args: unknown[]) => number

/** An opaque driver handle (context, module, function, event). */
export type Handle = unknown

export interface CudaDriver {
  readonly device: { readonly name: string; readonly major: number; readonly minor: number; readonly sms: number }
  readonly loadModule: (image: Uint8Array) => Handle
  readonly getFunction: (module: Handle, name: string) => Handle
  readonly malloc: (bytes: number) => bigint
  readonly free: (ptr: bigint) => void
  readonly toDevice: (dst: bigint, src: ArrayBufferView) => void
  readonly toHost: (dst: ArrayBufferView, src: bigint) => void
  /** One launch of `fn` on the default stream; `args` the device pointers of its params, in order. */
  readonly launch: (fn: Handle, grid: readonly number[], block: readonly number[], sharedBytes: number, args: readonly bigint[]) => void
  /**
   * The same launch with its kernelParams marshalled once: each call of what it gives is one
   * cuLaunchKernel and nothing else (timed loops: no host work between two launches but the call).
   */
  readonly prepareLaunch: (fn: Handle, grid: readonly number[], block: readonly number[], sharedBytes: number, args: readonly bigint[]) => () => void
  readonly synchronize: () => void
  readonly eventCreate: () => Handle
  readonly eventRecord: (e: Handle) => void
  readonly eventSynchronize: (e: Handle) => void
  readonly elapsedMs: (start: Handle, end: Handle) => number
  readonly eventDestroy: (e: Handle) => void
  readonly unloadModule: (m: Handle) => void
  readonly close: () => void
}

const CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76

let opened: CudaDriver | undefined

/** The driver, opened once per process (its first device's primary context made current). Throws NoGpuError or CudaDriverError. */
export const openCudaDriver = (library = process.env.TESSERA_LIBCUDA ?? "libcuda.so.1"): CudaDriver => {
  if (opened) return opened
  let lib: ReturnType<typeof koffi.load>
  try {
    lib = koffi.load(library)
  } catch (e) {
    throw new NoGpuError({ reason: `the CUDA driver library ${library} cannot be loaded (${e instanceof Error ? e.message : String(e)})` })
  }
  const f = (sig: string): Fn => lib.func(sig) as Fn
  const cuGetErrorString = f("int cuGetErrorString(int error, _Out_ const char **str)")
  const check = (call: string, code: number): void => {
    if (code === 0) return
    const out: (string | null)[] = [null]
    const ok = cuGetErrorString(code, out) === 0
    throw new CudaDriverError({ call, code, reason: ok && out[0] ? out[0] : "unknown error" })
  }
  const cuInit = f("int cuInit(unsigned int flags)")
  const cuDeviceGetCount = f("int cuDeviceGetCount(_Out_ int *count)")
  const cuDeviceGet = f("int cuDeviceGet(_Out_ int *device, int ordinal)")
  const cuDeviceGetName = f("int cuDeviceGetName(_Out_ uint8_t *name, int len, int dev)")
  const cuDeviceGetAttribute = f("int cuDeviceGetAttribute(_Out_ int *pi, int attrib, int dev)")
  const cuDevicePrimaryCtxRetain = f("int cuDevicePrimaryCtxRetain(_Out_ void **pctx, int dev)")
  const cuDevicePrimaryCtxRelease = f("int cuDevicePrimaryCtxRelease_v2(int dev)")
  const cuCtxSetCurrent = f("int cuCtxSetCurrent(void *ctx)")
  const cuCtxSynchronize = f("int cuCtxSynchronize()")
  const cuModuleLoadData = f("int cuModuleLoadData(_Out_ void **module, const void *image)")
  const cuModuleUnload = f("int cuModuleUnload(void *hmod)")
  const cuModuleGetFunction = f("int cuModuleGetFunction(_Out_ void **hfunc, void *hmod, const char *name)")
  const cuMemAlloc = f("int cuMemAlloc_v2(_Out_ uint64_t *dptr, size_t bytesize)")
  const cuMemFree = f("int cuMemFree_v2(uint64_t dptr)")
  const cuMemcpyHtoD = f("int cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t bytes)")
  const cuMemcpyDtoH = f("int cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t bytes)")
  const cuLaunchKernel = f(
    "int cuLaunchKernel(void *f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, void *stream, void *params, void *extra)",
  )
  const cuEventCreate = f("int cuEventCreate(_Out_ void **event, unsigned int flags)")
  const cuEventRecord = f("int cuEventRecord(void *event, void *stream)")
  const cuEventSynchronize = f("int cuEventSynchronize(void *event)")
  const cuEventElapsedTime = f("int cuEventElapsedTime(_Out_ float *ms, void *start, void *end)")
  const cuEventDestroy = f("int cuEventDestroy_v2(void *event)")

  const init = cuInit(0)
  if (init !== 0) {
    const out: (string | null)[] = [null]
    cuGetErrorString(init, out)
    throw new NoGpuError({ reason: `cuInit failed (${init}: ${out[0] ?? "unknown"})` })
  }
  const count = [0]
  check("cuDeviceGetCount", cuDeviceGetCount(count))
  if (count[0] < 1) throw new NoGpuError({ reason: "the CUDA driver sees no device" })
  const dev = [0]
  check("cuDeviceGet", cuDeviceGet(dev, 0))
  const attr = (a: number) => {
    const v = [0]
    check("cuDeviceGetAttribute", cuDeviceGetAttribute(v, a, dev[0]))
    return v[0]
  }
  const nameBuf = new Uint8Array(256)
  check("cuDeviceGetName", cuDeviceGetName(nameBuf, nameBuf.length, dev[0]))
  const name = new TextDecoder().decode(nameBuf.subarray(0, Math.max(0, nameBuf.indexOf(0))))
  const ctx: Handle[] = [null]
  check("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(ctx, dev[0]))
  check("cuCtxSetCurrent", cuCtxSetCurrent(ctx[0]))
  const out = <T>(call: string, run: (o: T[]) => number, init: T): T => {
    const o: T[] = [init]
    check(call, run(o))
    return o[0]
  }
  const prepare = (fn: Handle, grid: readonly number[], block: readonly number[], sharedBytes: number, args: readonly bigint[]) => {
    // kernelParams: an array of pointers, each to one param's value (a device pointer); both arrays
    // over 64 bytes, so off the V8 heap where nothing moves them, and held by the closure
    const values = new BigUint64Array(Math.max(16, args.length))
    args.forEach((a, k) => (values[k] = a))
    const base = BigInt(koffi.address(values) as bigint | number)
    const params = new BigUint64Array(Math.max(16, args.length))
    args.forEach((_, k) => (params[k] = base + BigInt(8 * k)))
    const [gx, gy, gz] = grid
    const [bx, by, bz] = block
    return () => check("cuLaunchKernel", cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, sharedBytes, null, params, null))
  }
  const driver: CudaDriver = {
    device: { name, major: attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), minor: attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), sms: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) },
    loadModule: (image) => out("cuModuleLoadData", (o) => cuModuleLoadData(o, image), null as Handle),
    getFunction: (module, fn) => out("cuModuleGetFunction", (o) => cuModuleGetFunction(o, module, fn), null as Handle),
    malloc: (bytes) => BigInt(out("cuMemAlloc", (o) => cuMemAlloc(o, Math.max(1, bytes)), 0 as number | bigint)),
    free: (ptr) => check("cuMemFree", cuMemFree(ptr)),
    toDevice: (dst, src) => check("cuMemcpyHtoD", cuMemcpyHtoD(dst, src, src.byteLength)),
    toHost: (dst, src) => check("cuMemcpyDtoH", cuMemcpyDtoH(dst, src, dst.byteLength)),
    launch: (fn, grid, block, sharedBytes, args) => prepare(fn, grid, block, sharedBytes, args)(),
    prepareLaunch: (fn, grid, block, sharedBytes, args) => prepare(fn, grid, block, sharedBytes, args),
    synchronize: () => check("cuCtxSynchronize", cuCtxSynchronize()),
    eventCreate: () => out("cuEventCreate", (o) => cuEventCreate(o, 0), null as Handle),
    eventRecord: (e) => check("cuEventRecord", cuEventRecord(e, null)),
    eventSynchronize: (e) => check("cuEventSynchronize", cuEventSynchronize(e)),
    elapsedMs: (a, b) => out("cuEventElapsedTime", (o) => cuEventElapsedTime(o, a, b), 0),
    eventDestroy: (e) => check("cuEventDestroy", cuEventDestroy(e)),
    unloadModule: (m) => check("cuModuleUnload", cuModuleUnload(m)),
    close: () => {
      cuDevicePrimaryCtxRelease(dev[0])
      opened = undefined
    },
  }
  opened = driver
  return driver
}

/**
 * The median seconds one `work()` takes on the GPU, timed between two events: each of `repeats`
 * measurements runs `work` n times back to back, n doubled (or scaled to the time seen) until the
 * batch lasts `minMs` or n reaches `maxRuns`.
 */
export const medianEventSeconds = (driver: CudaDriver, work: () => void, repeats: number, minMs: number, maxRuns: number): number => {
  const a = driver.eventCreate()
  const b = driver.eventCreate()
  const times: number[] = []
  let n = 1
  try {
    for (let r = 0; r < Math.max(1, repeats); r++)
      for (;;) {
        driver.eventRecord(a)
        for (let i = 0; i < n; i++) work()
        driver.eventRecord(b)
        driver.eventSynchronize(b)
        const ms = driver.elapsedMs(a, b)
        if (ms >= minMs || n >= maxRuns) {
          times.push(ms / 1000 / n)
          break
        }
        n = Math.min(maxRuns, Math.max(2 * n, Math.ceil((n * minMs) / Math.max(ms, 1e-3))))
      }
  } finally {
    driver.eventDestroy(a)
    driver.eventDestroy(b)
  }
  return times.sort((x, y) => x - y)[Math.floor(times.length / 2)]
}
