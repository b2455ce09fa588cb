// nvcc on this host: found through $CUDA_HOME/bin (by default /usr/local/cuda/bin) or PATH, and the kernels of a cuda artifact
// built to a cubin for one architecture with ptxas's resource report (registers, spills, stack,
// shared memory per function), kept in a content-hashed cache (the source, the architecture and
// nvcc's version decide the report). The only place the cuda target spawns a process.
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import { cacheRoot } from "../cache-root.js"
import { CompileError } from "../errors.js"

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

/**
 * The kernels' cubin for `arch` built by `nvcc` (-O3 -cubin -Xptxas -v) and ptxas's report per
 * function, from the cache when the same source, architecture and nvcc built it before.
 */
export const buildCubin = (nvcc: string, source: string, arch: string): Effect.Effect<{ readonly functions: Map<string, PtxasFunction>; readonly cached: boolean; readonly cubin: string }, CompileError> =>
  Effect.suspend((): Effect.Effect<{ readonly functions: Map<string, PtxasFunction>; readonly cached: boolean; readonly cubin: string }, CompileError> => {
    const version = spawnSync(nvcc, ["--version"], { encoding: "utf8" }).stdout ?? ""
    const key = createHash("sha256").update(`${version}\0${arch}\0${source}`).digest("hex").slice(0, 32)
    const dir = path.join(cacheRoot(), "cuda", key)
    const reportFile = path.join(dir, "ptxas.txt")
    const cubin = path.join(dir, "kernels.cubin")
    if (fs.existsSync(reportFile)) return Effect.succeed({ functions: parsePtxas(fs.readFileSync(reportFile, "utf8")), cached: true, cubin })
    fs.mkdirSync(path.join(cacheRoot(), "cuda"), { recursive: true })
    const tmp = fs.mkdtempSync(path.join(cacheRoot(), "cuda", `build-${process.pid}-`))
    const cu = path.join(tmp, "tessera_kernels.cu")
    fs.writeFileSync(cu, source)
    const args = ["-O3", "-std=c++17", `-arch=${arch}`, "-cubin", "-Xptxas", "-v", "-o", path.join(tmp, "kernels.cubin"), cu]
    const r = spawnSync(nvcc, args, { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 })
    const command = `${nvcc} ${args.join(" ")}`
    if (r.status !== 0) {
      fs.rmSync(tmp, { recursive: true, force: true })
      return Effect.fail(new CompileError({ command, reason: r.error ? r.error.message : `exit ${r.status}`, stderr: (r.stderr ?? "").slice(-4000) }))
    }
    fs.writeFileSync(path.join(tmp, "ptxas.txt"), r.stderr ?? "")
    try {
      fs.renameSync(tmp, dir)
    } catch {
      // another process filed the same build first
      fs.rmSync(tmp, { recursive: true, force: true })
    }
    return Effect.succeed({ functions: parsePtxas(r.stderr ?? ""), cached: false, cubin })
  })
