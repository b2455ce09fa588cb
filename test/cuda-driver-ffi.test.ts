// The CUDA driver binding (src/device/cuda/driver.ts) against a stand-in libcuda built here
// (test/support/fake-libcuda.c: the driver API's signatures over host memory), so the koffi
// marshalling — out-params, device pointers as uint64, kernelParams as pointers to each param's
// value, error strings — is checked without a GPU. Skipped, saying so, without gcc.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { compilerAvailable } from "../src/device/c/build.js"

const gcc = compilerAvailable()

describe.skipIf(!gcc)(`the CUDA driver binding through koffi, against a stand-in libcuda${gcc ? "" : " (skipped: no C compiler to build the stand-in)"}`, () => {
  it("opens the device, loads a module, allocates, copies, launches with its params, times with events, and names a failing call", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-fake-cuda-"))
    const so = path.join(dir, "libcuda.so.1")
    const r = spawnSync("gcc", ["-shared", "-fPIC", "-O1", "-o", so, path.join(import.meta.dirname, "support", "fake-libcuda.c")], { encoding: "utf8" })
    expect(r.status, r.stderr).toBe(0)
    const { openCudaDriver, CudaDriverError } = await import("../src/device/cuda/driver.js")
    const d = openCudaDriver(so)
    expect(d.device).toEqual({ name: "Fake GPU", major: 9, minor: 0, sms: 132 })
    const m = d.loadModule(new TextEncoder().encode("TESSERA"))
    const fn = d.getFunction(m, "axpb")
    const n = 96
    const a = d.malloc(n * 4)
    const y = d.malloc(n * 4)
    expect(typeof a).toBe("bigint")
    expect(a).not.toBe(y)
    d.toDevice(a, Float32Array.from({ length: n }, (_, i) => i))
    d.launch(fn, [3, 1, 1], [32, 1, 1], 0, [a, y])
    d.synchronize()
    const out = new Float32Array(n)
    d.toHost(out, y)
    expect(Array.from(out)).toEqual(Array.from({ length: n }, (_, i) => i * 2 + 1))
    const e0 = d.eventCreate()
    const e1 = d.eventCreate()
    d.eventRecord(e0)
    d.eventRecord(e1)
    d.eventSynchronize(e1)
    expect(d.elapsedMs(e0, e1)).toBeGreaterThanOrEqual(0)
    d.eventDestroy(e0)
    d.eventDestroy(e1)
    expect(() => d.getFunction(m, "nothing")).toThrow(CudaDriverError)
    expect(() => d.getFunction(m, "nothing")).toThrow(/cuModuleGetFunction failed \(500: CUDA_ERROR_NOT_FOUND\)/)
    d.free(a)
    d.free(y)
    d.unloadModule(m)
    d.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it("a library that is not there is a NoGpuError naming it", async () => {
    const { openCudaDriver } = await import("../src/device/cuda/driver.js")
    const { NoGpuError } = await import("../src/device/errors.js")
    expect(() => openCudaDriver("/nonexistent/libcuda.so.1")).toThrow(NoGpuError)
    expect(() => openCudaDriver("/nonexistent/libcuda.so.1")).toThrow(/no CUDA GPU here: the CUDA driver library \/nonexistent\/libcuda.so.1 cannot be loaded/)
  })
})
