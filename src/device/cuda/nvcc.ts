// nvcc on this host: found through $CUDA_HOME/bin (by default /usr/local/cuda/bin) or PATH, and the kernels of a cuda artifact
// built to a cubin for one architecture with ptxas's resource report (registers, spills, stack,
// shared memory per function), kept in a content-hashed cache (the source, the architecture and
// nvcc's version decide the report) that is bounded, hash-checked and this user's alone, as the c
// target's is (../c/cache-store.ts). The only place the cuda target spawns a process.
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import { cacheRoot } from "../cache-root.js"
import { buildFolderPrefix, cacheBudget, cached, cubinReport, evict, privateDir, publish, removeStaleTemps, type CacheBudget } from "../c/cache-store.js"
import { CompileError, UnsafeCacheError } from "../errors.js"
import { runInGroup } from "../process-group.js"

/** nvcc's path: $CUDA_HOME/bin/nvcc when it runs ($CUDA_HOME unset: the toolkit's default, /usr/local/cuda), else nvcc on PATH; undefined when neither runs. */
export const findNvcc = (): string | undefined => {
  const candidates = [path.join(process.env.CUDA_HOME ?? "/usr/local/cuda", "bin", "nvcc"), "nvcc"]
  for (const c of candidates) {
    const r = spawnSync(c, ["--version"], { encoding: "utf8" })
    if (r.status === 0) return c
  }
  return undefined
}

/** One function's resources as ptxas reports them. */
export interface PtxasFunction {
  readonly registers: number
  readonly spillStores: number
  readonly spillLoads: number
  readonly stackBytes: number
  readonly sharedBytes: number
}

/** ptxas -v's report (stderr) per function. */
export const parsePtxas = (text: string): Map<string, PtxasFunction> => {
  const out = new Map<string, PtxasFunction>()
  let fn: string | undefined
  let cur = { registers: 0, spillStores: 0, spillLoads: 0, stackBytes: 0, sharedBytes: 0 }
  for (const line of text.split("\n")) {
    const f = /Function properties for (\S+)/.exec(line) ?? /Compiling entry function '([^']+)'/.exec(line)
    if (f) {
      if (fn !== undefined && fn !== f[1]) out.set(fn, cur)
      if (fn !== f[1]) cur = { registers: 0, spillStores: 0, spillLoads: 0, stackBytes: 0, sharedBytes: 0 }
      fn = f[1]
      continue
    }
    const stack = /(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads/.exec(line)
    if (stack) cur = { ...cur, stackBytes: Number(stack[1]), spillStores: Number(stack[2]), spillLoads: Number(stack[3]) }
    const regs = /Used (\d+) registers/.exec(line)
    if (regs) cur = { ...cur, registers: Number(regs[1]) }
    const smem = /(\d+) bytes smem/.exec(line)
    if (smem) cur = { ...cur, sharedBytes: Number(smem[1]) }
  }
  if (fn !== undefined) out.set(fn, cur)
  return out
}

/** Where buildCubin keeps its cubins and reports, and how large that folder may grow. */
export interface CubinCacheConfig {
  readonly cacheDir: string
  readonly budget: CacheBudget
}

/** The cuda folder of the cache root (read when called: $TESSERA_CACHE_DIR), bounded as the c cache is ($TESSERA_CACHE_MAX_MB). */
export const defaultCubinCache = (): CubinCacheConfig => ({ cacheDir: path.join(cacheRoot(), "cuda"), budget: cacheBudget() })

/** What buildCubin gives: ptxas's report per function, whether the cache had it, the cubin's path. */
export interface BuiltCubin {
  readonly functions: Map<string, PtxasFunction>
  readonly cached: boolean
  readonly cubin: string
}

/**
 * The kernels' cubin for `arch` built by `nvcc` (-O3 -cubin -Xptxas -v) and ptxas's report per
 * function, from the cache when the same source, architecture and nvcc built it before. The cache
 * is the c target's (../c/cache-store.ts): a folder of this user's alone; `<key>.cubin` and
 * `<key>.ptxas` each published whole with its hash beside it and used only when it hashes right
 * (a torn or planted one is built again); a killed build's temporaries removed by the next; and
 * after every build the folder brought under its budget, least recently used first, the entry
 * just built and any used within the grace period kept (an evicted cubin's report goes with it).
 */
export const buildCubin = (nvcc: string, source: string, arch: string, config: CubinCacheConfig = defaultCubinCache(), timeoutMs?: number): Effect.Effect<BuiltCubin, CompileError | UnsafeCacheError> =>
  Effect.gen(function* () {
    const version = spawnSync(nvcc, ["--version"], { encoding: "utf8" }).stdout ?? ""
    const key = createHash("sha256").update(`${version}\0${arch}\0${source}`).digest("hex").slice(0, 32)
    const dir = config.cacheDir
    const cubin = path.join(dir, `${key}.cubin`)
    const report = cubinReport(cubin)
    yield* privateDir(dir)
    if (cached(cubin) && cached(report)) return { functions: parsePtxas(fs.readFileSync(report, "utf8")), cached: true, cubin }
    removeStaleTemps(dir)
    const args = (out: string, cu: string) => ["-O3", "-std=c++17", `-arch=${arch}`, "-cubin", "-Xptxas", "-v", "-o", out, cu]
    const tmp = yield* Effect.try({
      try: () => fs.mkdtempSync(path.join(dir, buildFolderPrefix())),
      catch: (e) => new CompileError({ command: `mkdir ${dir}`, reason: `cannot make the build folder: ${String(e)}`, stderr: "" }),
    })
    const cu = path.join(tmp, "tessera_kernels.cu")
    const out = path.join(tmp, "kernels.cubin")
    const command = `${nvcc} ${args(out, cu).join(" ")}`
    const stderr = yield* Effect.gen(function* () {
      yield* Effect.try({ try: () => fs.writeFileSync(cu, source), catch: (e) => new CompileError({ command, reason: `cannot write the source: ${String(e)}`, stderr: "" }) })
      // (asynchronously, in a process group of its own: a stop request kills it whole, where a
      // spawnSync held the thread until nvcc ended — tune --target cuda outlived its SIGTERM)
      const r = yield* runInGroup(nvcc, args(out, cu), timeoutMs)
      if (r.timedOut) return yield* new CompileError({ command, reason: `nvcc ran past ${timeoutMs} ms and was killed`, stderr: r.stderr.slice(-4000) })
      if (r.spawnError !== undefined || r.code !== 0) return yield* new CompileError({ command, reason: r.spawnError ?? `exit ${r.code}`, stderr: r.stderr.slice(-4000) })
      yield* Effect.try({
        try: () => {
          const text = path.join(tmp, "ptxas.txt")
          fs.writeFileSync(text, r.stderr)
          // the report first: a cubin is used only with its report beside it
          publish(text, report)
          publish(out, cubin)
        },
        catch: (e) => new CompileError({ command, reason: `cannot move the cubin into the cache: ${String(e)}`, stderr: "" }),
      })
      return r.stderr
    }).pipe(Effect.ensuring(Effect.sync(() => fs.rmSync(tmp, { recursive: true, force: true }))))
    yield* evict(dir, [dir], config.budget, [cubin])
    return { functions: parsePtxas(stderr), cached: false, cubin }
  })
