// The c build cache against planted, torn and leftover files (issue 19): a library whose bytes do
// not hash to the hash stored beside it is built again, never loaded; so is a truncated one (the
// check comes before dlopen: a torn library gives SIGBUS); a cache folder another user owns or
// others can write is refused with UnsafeCacheError naming it; temporaries of a killed build are
// removed or ignored, and an interrupted build kills its compiler's whole process group.
import { Effect, Fiber } from "effect"
import { createHash } from "node:crypto"
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, truncateSync, utimesSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { tensor } from "../src/ast/graph/tensor.js"
import { cpuAttrs } from "../src/ast/target.js"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { backendOf } from "../src/backend/index.js"
import { cDevice } from "../src/device/c/device.js"
import { createExecutor } from "../src/device/executor.js"
import { compileGraph, emitArtifact } from "../src/pipeline.js"
import { paramsOf } from "../src/ast/tir/analysis.js"
import { buildC, buildCUnits, compilerAvailable, defaultCBuildConfig, type CBuildConfig } from "../src/device/c/build.js"
import { cached, evict, hashFile, intact } from "../src/device/c/cache-store.js"
import { lockFile } from "../src/device/file-lock.js"
import { cacheRoot } from "../src/device/cache-root.js"
import { defaultCubinCache } from "../src/device/cuda/nvcc.js"
import { loadC } from "../src/device/c/load.js"
import { emitC } from "../src/emit/c/emit.js"
import { assertAllClose } from "../laws/support.js"
import { callKernel } from "../laws/support-c.js"
import { GOLDEN_CASES, goldenFunc } from "../scripts/update-goldens.js"

const HAVE_GCC = compilerAvailable()
const dense = GOLDEN_CASES.map((mk) => mk()).find((g) => g.name === "dense")!
const func = goldenFunc(dense)
const units = () => emitC([func])
const roots: string[] = []
const freshDir = (): string => {
  const d = mkdtempSync(path.join(os.tmpdir(), "tessera-c-cache-"))
  roots.push(d)
  return d
}
const configIn = (cacheDir: string): CBuildConfig => ({ ...defaultCBuildConfig(), cacheDir, jobs: 2 })
afterAll(() => roots.forEach((d) => rmSync(d, { recursive: true, force: true })))

/** Loads the library and runs dense on it against the TE reference. */
const runsRight = async (library: string) => {
  const mod = await Effect.runPromise(loadC(library, [{ name: func.name, params: paramsOf(func) }]))
  const outs = callKernel(mod.kernels.get(func.name)!, func, dense.inputs)
  assertAllClose(dense.outputs.map((o) => outs.get(o.name)!), evaluateTE(dense.outputs, dense.inputs), 1e-4, 1e-5)
}

describe("c build cache: planted and torn files", () => {
  it.skipIf(!HAVE_GCC)("a library whose bytes do not match its stored hash is built again, not loaded", async () => {
    const config = configIn(freshDir())
    const built = await Effect.runPromise(buildCUnits(units(), config))
    expect(intact(built.library)).toBe(true)
    const good = readFileSync(built.library)
    // planted: other bytes under the expected name, the old hash left beside them
    writeFileSync(built.library, Buffer.concat([good, Buffer.from("planted")]))
    const again = await Effect.runPromise(buildCUnits(units(), config))
    expect(again.library).toBe(built.library)
    expect(again.objects.every((o) => !o.compiled)).toBe(true) // the objects were whole: linked again only
    expect(intact(again.library)).toBe(true)
    expect(readFileSync(again.library).includes(Buffer.from("planted"))).toBe(false)
    // planted with no hash at all: the same
    rmSync(hashFile(built.library))
    writeFileSync(built.library, "not a library")
    await Effect.runPromise(buildCUnits(units(), config))
    expect(intact(built.library)).toBe(true)
    await runsRight(built.library)
  })

  it.skipIf(!HAVE_GCC)("a truncated library (and a truncated object) is detected before dlopen and built again", async () => {
    const config = configIn(freshDir())
    const built = await Effect.runPromise(buildCUnits(units(), config))
    const size = statSync(built.library).size
    truncateSync(built.library, Math.floor(size / 2))
    const objDir = path.join(config.cacheDir, "obj")
    // dense's object (a small unit, a batch of one); the runtime's its own (with the thread pool, a large unit)
    const denseObject = built.objects.find((o) => o.file === "dense.c")!.object
    expect(built.objects.map((o) => o.file)).toEqual(["tessera_runtime.c", "dense.c"])
    expect(built.objects[0].object).not.toBe(denseObject)
    const dense_o = readdirSync(objDir).find((f) => f === `${denseObject}.o`)!
    truncateSync(path.join(objDir, dense_o), 100)
    const again = await Effect.runPromise(buildCUnits(units(), config))
    expect(again.objects.filter((o) => o.compiled).map((o) => o.file)).toEqual(["dense.c"])
    expect(statSync(again.library).size).toBe(size)
    expect(intact(again.library)).toBe(true)
    await runsRight(again.library)
  })

  it.skipIf(!HAVE_GCC)("buildC (the tuner's candidates): a torn library is built again", async () => {
    const config = configIn(freshDir())
    const full = "void one(float* a) { a[0] = 1.0f; }\n"
    const so = await Effect.runPromise(buildC(full, config))
    const size = statSync(so).size
    truncateSync(so, 64)
    expect(await Effect.runPromise(buildC(full, config))).toBe(so)
    expect(statSync(so).size).toBe(size)
    const mod = await Effect.runPromise(loadC(so, [{ name: "one", params: [{ dtype: "float32", elements: 1 }] }]))
    const a = new Float32Array(1)
    mod.kernels.get("one")!(a)
    expect(a[0]).toBe(1)
  })
})

describe("c device: a library that hashes right but will not load", () => {
  it.skipIf(!HAVE_GCC)("is built again (a planted file with a forged hash), and the module runs", async () => {
    const cacheDir = freshDir()
    const config = configIn(cacheDir)
    const graph = makeGraph({
      opset: 13,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [4] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [4] } }],
      nodes: [node("Relu", ["x"], ["y"])],
    })
    const target = backendOf("c").target(cpuAttrs(), 1)
    const program = await Effect.runPromise(compileGraph(graph, target))
    const artifact = await Effect.runPromise(emitArtifact(program, target))
    // the library's name, from a build in another cache (a library dlopened once is handed back
    // by its path, whatever is on disk since: the planted one goes in a cache never loaded from)
    const lib = path.join(cacheDir, "lib")
    await Effect.runPromise(cDevice(config).load(artifact)).then((m) => m.close())
    const built = readdirSync(lib).find((f) => f.endsWith(".so"))!
    // a fresh cache with the same names, its library planted there (renamed in, as another
    // process would): not a library, with a hash that matches it
    const cacheDir2 = freshDir()
    const config2 = configIn(cacheDir2)
    mkdirSync(path.join(cacheDir2, "lib"), { mode: 0o700 })
    const library = path.join(cacheDir2, "lib", built)
    const planted = Buffer.from("not an ELF file at all")
    writeFileSync(`${library}.x`, planted)
    renameSync(`${library}.x`, library)
    writeFileSync(hashFile(library), `${createHash("sha256").update(planted).digest("hex")}\n`)
    expect(intact(library)).toBe(true)
    const mod = await Effect.runPromise(cDevice(config2).load(artifact))
    try {
      expect(readFileSync(library).subarray(1, 4).toString()).toBe("ELF")
      const exec = createExecutor(program, mod)
      const y = exec.run(new Map([["x", tensor("float32", [4], Float32Array.from([-1, 2, -3, 4]))]])).get("y")!
      expect([...y.data]).toEqual([0, 2, 0, 4])
    } finally {
      mod.close()
    }
  })
})

describe("c build cache: a folder of this user's alone", () => {
  const unsafe = async (dir: string) => Effect.runPromise(Effect.flip(buildCUnits(units(), configIn(dir))))

  it("is the user's ($TESSERA_CACHE_DIR, else $XDG_CACHE_HOME/tessera, else ~/.cache/tessera), never a fixed shared path (it was os.tmpdir()/tessera-c)", () => {
    const saved = { t: process.env.TESSERA_CACHE_DIR, x: process.env.XDG_CACHE_HOME }
    const restore = (k: "TESSERA_CACHE_DIR" | "XDG_CACHE_HOME", v: string | undefined) => (v === undefined ? delete process.env[k] : (process.env[k] = v))
    try {
      delete process.env.TESSERA_CACHE_DIR
      delete process.env.XDG_CACHE_HOME
      expect(cacheRoot()).toBe(path.join(os.homedir(), ".cache", "tessera"))
      process.env.XDG_CACHE_HOME = "/xdg"
      expect(cacheRoot()).toBe(path.join("/xdg", "tessera"))
      process.env.TESSERA_CACHE_DIR = "/mine"
      expect(cacheRoot()).toBe("/mine")
      // the c and cuda caches live in it
      expect(defaultCBuildConfig().cacheDir).toBe(path.join("/mine", "c"))
      expect(defaultCubinCache().cacheDir).toBe(path.join("/mine", "cuda"))
    } finally {
      restore("TESSERA_CACHE_DIR", saved.t)
      restore("XDG_CACHE_HOME", saved.x)
    }
  })

  it("is made mode 0700", async () => {
    const dir = path.join(freshDir(), "new", "c")
    // the gcc-less path: the folder check comes before anything is built
    await Effect.runPromise(Effect.ignore(buildCUnits({ prelude: { file: "p.h", source: "" }, units: [] }, { ...configIn(dir), cc: "false" })))
    for (const d of [dir, path.join(dir, "obj"), path.join(dir, "lib")]) expect(statSync(d).mode & 0o777).toBe(0o700)
  })

  it("a world- or group-writable folder is refused with UnsafeCacheError naming it", async () => {
    for (const mode of [0o777, 0o775, 0o757]) {
      const dir = freshDir()
      chmodSync(dir, mode)
      const e = await unsafe(dir)
      expect(e._tag).toBe("UnsafeCacheError")
      expect(e.message).toContain(dir)
      expect(e.message).toMatch(/others can write/)
      expect(existsSync(path.join(dir, "lib"))).toBe(false)
    }
    // a writable sub-folder is refused too
    const dir = freshDir()
    mkdirSync(path.join(dir, "lib"), { mode: 0o700 })
    chmodSync(path.join(dir, "lib"), 0o777)
    const e = await unsafe(dir)
    expect(e._tag === "UnsafeCacheError" && e.path).toBe(path.join(dir, "lib"))
  })

  it("a folder whose parent others can write (and is not sticky) is refused; a sticky one (as /tmp) is fine", async () => {
    const parent = freshDir()
    chmodSync(parent, 0o777)
    const e = await unsafe(path.join(parent, "c"))
    expect(e._tag).toBe("UnsafeCacheError")
    expect(e.message).toMatch(/parent folder/)
    chmodSync(parent, 0o1777)
    await Effect.runPromise(Effect.ignore(buildCUnits({ prelude: { file: "p.h", source: "" }, units: [] }, { ...configIn(path.join(parent, "c")), cc: "false" })))
    expect(statSync(path.join(parent, "c", "lib")).mode & 0o777).toBe(0o700)
  })

  it.skipIf(process.getuid?.() !== 0)("a folder another user owns is refused (as root: chowned to nobody)", async () => {
    const dir = freshDir()
    chownSync(dir, 65534, 65534)
    const e = await unsafe(dir)
    expect(e._tag).toBe("UnsafeCacheError")
    expect(e.message).toContain(dir)
    expect(e.message).toMatch(/owned by user 65534/)
  })

  it("a file where the folder should be is refused", async () => {
    const file = path.join(freshDir(), "c")
    writeFileSync(file, "")
    const e = await unsafe(file)
    expect(e._tag).toBe("UnsafeCacheError")
  })
})

describe("c build cache: what a killed build leaves", () => {
  it.skipIf(!HAVE_GCC)("temporaries of a dead process are removed, a live one's are left, none is in the way", async () => {
    const config = configIn(freshDir())
    const built = await Effect.runPromise(buildCUnits(units(), config))
    // a pid that is gone: a child that has exited
    const dead = (await import("node:child_process")).spawnSync("true").pid!
    const live = process.ppid
    const lib = path.dirname(built.library)
    const stale = [
      path.join(config.cacheDir, `build-${dead}-abc123`),
      `${built.library}.${dead}.0badf00d.tmp`,
      `${hashFile(built.library)}.${dead}.0badf00d.tmp`,
      path.join(config.cacheDir, "obj", `0123.${dead}.deadbeef.tmp.o`),
    ]
    mkdirSync(stale[0])
    writeFileSync(path.join(stale[0], "dense.c"), "half a source")
    for (const f of stale.slice(1)) writeFileSync(f, "half a file")
    const kept = path.join(lib, `x.so.${live}.cafe0001.tmp`)
    writeFileSync(kept, "someone's build in progress")
    // the cache hit ignores them; a build that compiles cleans the dead ones
    expect((await Effect.runPromise(buildCUnits(units(), config))).library).toBe(built.library)
    rmSync(built.library)
    await Effect.runPromise(buildCUnits(units(), config))
    for (const f of stale) expect(existsSync(f)).toBe(false)
    expect(existsSync(kept)).toBe(true)
    await runsRight(built.library)
  })

  it("an interrupted build kills the compiler's process group and leaves no temporaries", async () => {
    const dir = freshDir()
    // a compiler that never finishes: it starts a grandchild (as gcc starts cc1) and waits
    const cc = path.join(dir, "slow-cc")
    const pidFile = path.join(dir, "grandchild.pid")
    writeFileSync(cc, `#!/bin/sh\ncase "$1" in --version|-dumpmachine) echo slow; exit 0;; esac\nsleep 300 &\necho $! > ${pidFile}\nwait\n`, { mode: 0o755 })
    const config: CBuildConfig = { ...configIn(path.join(dir, "cache")), cc }
    const fiber = Effect.runFork(buildCUnits({ prelude: { file: "p.h", source: "" }, units: [{ file: "u.c", source: "int x;" }] }, config))
    const deadline = Date.now() + 10_000
    while (!existsSync(pidFile) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    const grandchild = Number(readFileSync(pidFile, "utf8"))
    await Effect.runPromise(Fiber.interrupt(fiber))
    const gone = () => {
      try {
        process.kill(grandchild, 0)
        return false
      } catch {
        return true
      }
    }
    const until = Date.now() + 5_000
    while (!gone() && Date.now() < until) await new Promise((r) => setTimeout(r, 20))
    expect(gone()).toBe(true)
    expect(readdirSync(config.cacheDir).filter((f) => f.startsWith("build-"))).toEqual([])
    expect(readdirSync(path.join(config.cacheDir, "obj"))).toEqual([])
  })
})

describe("c build cache: bounded, least recently used first", () => {
  const key = (k: number) => k.toString(16).padStart(32, "0")
  /** A fake cached output of `bytes` bytes (with its hash, and a library's source beside it), last used `ageMs` before `now`. */
  const entry = (dir: string, k: number, ext: "so" | "o", bytes: number, ageMs: number, now: number) => {
    mkdirSync(dir, { recursive: true })
    const file = path.join(dir, `${key(k)}.${ext}`)
    const body = Buffer.alloc(bytes, k)
    writeFileSync(file, body)
    writeFileSync(hashFile(file), `${createHash("sha256").update(body).digest("hex")}\n`)
    if (ext === "so") writeFileSync(path.join(dir, `${key(k)}.c`), "/* source */\n")
    const t = new Date(now - ageMs)
    utimesSync(file, t, t)
    return file
  }
  const HOUR = 3600_000

  it("removes the least recently used entries (and their hashes and sources) until the cache is under its limit; fresh ones, kept files, temporaries and locks stay", async () => {
    const dir = freshDir()
    const now = Date.now()
    const old = entry(dir, 1, "so", 4000, 5 * HOUR, now)
    const older = entry(path.join(dir, "obj"), 2, "o", 4000, 9 * HOUR, now)
    const mid = entry(path.join(dir, "lib"), 3, "so", 4000, 3 * HOUR, now)
    const fresh = entry(dir, 4, "so", 4000, 60_000, now) // used a minute ago: within the grace
    const kept = entry(dir, 5, "so", 4000, 20 * HOUR, now) // just built by the caller
    writeFileSync(path.join(dir, `${key(6)}.99999.abcd.tmp`), Buffer.alloc(9000))
    const dirs = [dir, path.join(dir, "obj"), path.join(dir, "lib")]
    const budget = { maxBytes: 13_000, graceMs: HOUR }
    const r = await Effect.runPromise(evict(dir, dirs, budget, [kept], now))
    // the oldest (after the kept one) go first, only as many as needed
    expect(r.removed).toEqual([older, old])
    expect(r.bytesAfter).toBeLessThanOrEqual(budget.maxBytes)
    for (const f of [older, old]) expect([f, hashFile(f)].some(existsSync)).toBe(false)
    expect(existsSync(path.join(dir, `${key(1)}.c`))).toBe(false)
    for (const f of [mid, fresh, kept]) expect(intact(f)).toBe(true)
    expect(existsSync(path.join(dir, `${key(6)}.99999.abcd.tmp`))).toBe(true)
    expect(existsSync(path.join(dir, ".evict.lock"))).toBe(false) // released
    // everything left is fresh or kept or under the limit: a second run removes nothing more
    expect((await Effect.runPromise(evict(dir, dirs, { maxBytes: 1, graceMs: 4 * HOUR }, [kept], now))).removed).toEqual([])
  })

  it("a cache hit marks the entry used, so it outlives entries used less recently", async () => {
    const dir = freshDir()
    const now = Date.now()
    const a = entry(dir, 1, "o", 1000, 10 * HOUR, now)
    const b = entry(dir, 2, "o", 1000, 5 * HOUR, now)
    expect(cached(a)).toBe(true) // used now
    const r = await Effect.runPromise(evict(dir, [dir], { maxBytes: 1500, graceMs: 0 }, [], now + 1000))
    expect(r.removed).toEqual([b])
    expect(intact(a)).toBe(true)
  })

  it("a second evictor skips its turn while another holds the lock", async () => {
    const dir = freshDir()
    const now = Date.now()
    const a = entry(dir, 1, "o", 1000, 10 * HOUR, now)
    const held = await Effect.runPromise(lockFile(path.join(dir, ".evict")))
    try {
      const r = await Effect.runPromise(evict(dir, [dir], { maxBytes: 0, graceMs: 0 }, [], now))
      expect(r.skipped).toMatch(/in use/)
      expect(intact(a)).toBe(true)
    } finally {
      held.release()
    }
  })

  it.skipIf(!HAVE_GCC)("every build keeps the cache under its budget: an older library goes, the one just built stays and loads", async () => {
    const config: CBuildConfig = { ...configIn(freshDir()), budget: { maxBytes: 1, graceMs: 0 } }
    const one = await Effect.runPromise(buildC("void one(float* a) { a[0] = 1.0f; }\n", config))
    const two = await Effect.runPromise(buildC("void two(float* a) { a[0] = 2.0f; }\n", config))
    expect(existsSync(one)).toBe(false)
    expect(intact(two)).toBe(true)
    const mod = await Effect.runPromise(loadC(two, [{ name: "two", params: [{ dtype: "float32", elements: 1 }] }]))
    const a = new Float32Array(1)
    mod.kernels.get("two")!(a)
    expect(a[0]).toBe(2)
    // an artifact's build: its library and objects are what remains
    const built = await Effect.runPromise(buildCUnits(units(), config))
    expect(existsSync(two)).toBe(false)
    expect(intact(built.library)).toBe(true)
    await runsRight(built.library)
  })
})
