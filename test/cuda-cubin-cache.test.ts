// The cuda build cache (issue 19), bounded and checked like the c cache, through the same module
// (src/device/c/cache-store.ts): nvcc is a fake here (a script that writes the cubin it is asked
// for and a ptxas report, and counts its builds), so this runs without the CUDA toolkit or a GPU.
import { Effect } from "effect"
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { intact } from "../src/device/c/cache-store.js"
import { buildCubin, type CubinCacheConfig } from "../src/device/cuda/nvcc.js"

const roots: string[] = []
const fresh = (): string => {
  const d = mkdtempSync(path.join(os.tmpdir(), "tessera-cubin-cache-"))
  roots.push(d)
  return d
}
afterAll(() => roots.forEach((d) => rmSync(d, { recursive: true, force: true })))

/** A fake nvcc in `dir`: `--version` prints a version; a build writes its -o file (the source's bytes) and ptxas's report, appends a line to `builds`, and fails when the source holds FAIL. */
const fakeNvcc = (dir: string): { nvcc: string; builds: () => number } => {
  const nvcc = path.join(dir, "nvcc")
  const log = path.join(dir, "builds")
  writeFileSync(
    nvcc,
    `#!/bin/sh
if [ "$1" = "--version" ]; then echo "fake nvcc 12.0"; exit 0; fi
out=""; prev=""; src=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; src="$a"; done
echo build >> "${log}"
if grep -q FAIL "$src"; then echo "error: FAIL" >&2; exit 2; fi
cat "$src" > "$out"
echo "ptxas info    : Compiling entry function 'k0' for 'sm_90'" >&2
echo "ptxas info    : Function properties for k0" >&2
echo "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" >&2
echo "ptxas info    : Used 12 registers, 360 bytes cmem[0]" >&2
`,
  )
  chmodSync(nvcc, 0o755)
  return { nvcc, builds: () => (existsSync(log) ? readFileSync(log, "utf8").split("\n").filter(Boolean).length : 0) }
}
const HOUR = 3600_000
const source = (k: number) => `extern "C" __global__ void k0(float* a) { a[0] = ${k}.0f; }\n${"/* padding */\n".repeat(100)}`

describe("cuda build cache", () => {
  it("builds once, then hits (ptxas's report kept with the cubin); the folder is this user's alone", async () => {
    const root = fresh()
    const { nvcc, builds } = fakeNvcc(root)
    const config: CubinCacheConfig = { cacheDir: path.join(root, "cuda"), budget: { maxBytes: 1 << 30, graceMs: HOUR } }
    const a = await Effect.runPromise(buildCubin(nvcc, source(1), "sm_90", config))
    expect(a.cached).toBe(false)
    expect(a.functions.get("k0")?.registers).toBe(12)
    expect(intact(a.cubin)).toBe(true)
    expect(statSync(config.cacheDir).mode & 0o777).toBe(0o700)
    const b = await Effect.runPromise(buildCubin(nvcc, source(1), "sm_90", config))
    expect(b).toMatchObject({ cached: true, cubin: a.cubin })
    expect(b.functions.get("k0")?.registers).toBe(12)
    expect(builds()).toBe(1)
  })

  it("a torn or planted cubin is built again, never handed on", async () => {
    const root = fresh()
    const { nvcc, builds } = fakeNvcc(root)
    const config: CubinCacheConfig = { cacheDir: path.join(root, "cuda"), budget: { maxBytes: 1 << 30, graceMs: HOUR } }
    const a = await Effect.runPromise(buildCubin(nvcc, source(1), "sm_90", config))
    truncateSync(a.cubin, 10)
    const b = await Effect.runPromise(buildCubin(nvcc, source(1), "sm_90", config))
    expect(b.cached).toBe(false)
    expect(readFileSync(b.cubin, "utf8")).toBe(source(1))
    writeFileSync(b.cubin, "planted")
    expect((await Effect.runPromise(buildCubin(nvcc, source(1), "sm_90", config))).cached).toBe(false)
    expect(builds()).toBe(3)
  })

  it("is bounded: every build evicts the least recently used cubins (and their reports) past the limit, keeping the one just built", async () => {
    const root = fresh()
    const { nvcc } = fakeNvcc(root)
    const config: CubinCacheConfig = { cacheDir: path.join(root, "cuda"), budget: { maxBytes: 1, graceMs: 0 } }
    const one = await Effect.runPromise(buildCubin(nvcc, source(1), "sm_90", config))
    const two = await Effect.runPromise(buildCubin(nvcc, source(2), "sm_90", config))
    expect(existsSync(one.cubin)).toBe(false)
    expect(intact(two.cubin)).toBe(true)
    // nothing of the first is left: its cubin, report and their hashes went together; no temporaries
    const key = (f: string) => path.basename(f).slice(0, 32)
    const left = readdirSync(config.cacheDir)
    expect(left.filter((n) => n.startsWith(key(one.cubin)))).toEqual([])
    expect(left.filter((n) => !n.startsWith(key(two.cubin))).sort()).toEqual([])
    expect(left.sort()).toEqual([`${key(two.cubin)}.cubin`, `${key(two.cubin)}.cubin.sha256`, `${key(two.cubin)}.ptxas`, `${key(two.cubin)}.ptxas.sha256`])
    // within the grace period an entry stays even over the limit
    const graced: CubinCacheConfig = { ...config, budget: { maxBytes: 1, graceMs: HOUR } }
    await Effect.runPromise(buildCubin(nvcc, source(3), "sm_90", graced))
    expect(intact(two.cubin)).toBe(true)
  })

  it("a failed build is a CompileError and leaves no temporaries", async () => {
    const root = fresh()
    const { nvcc } = fakeNvcc(root)
    const config: CubinCacheConfig = { cacheDir: path.join(root, "cuda"), budget: { maxBytes: 1 << 30, graceMs: HOUR } }
    const r = await Effect.runPromise(Effect.result(buildCubin(nvcc, "FAIL", "sm_90", config)))
    expect(r._tag).toBe("Failure")
    if (r._tag === "Failure") expect(r.failure).toMatchObject({ _tag: "CompileError", stderr: expect.stringMatching(/FAIL/) })
    expect(readdirSync(config.cacheDir)).toEqual([])
  })

  it("a cache folder others can write is refused with UnsafeCacheError", async () => {
    const root = fresh()
    const { nvcc, builds } = fakeNvcc(root)
    const dir = path.join(root, "cuda")
    const config: CubinCacheConfig = { cacheDir: dir, budget: { maxBytes: 1 << 30, graceMs: HOUR } }
    await Effect.runPromise(buildCubin(nvcc, source(1), "sm_90", config))
    chmodSync(dir, 0o777)
    const r = await Effect.runPromise(Effect.result(buildCubin(nvcc, source(1), "sm_90", config)))
    expect(r._tag === "Failure" && r.failure._tag).toBe("UnsafeCacheError")
    expect(builds()).toBe(1)
  })
})
