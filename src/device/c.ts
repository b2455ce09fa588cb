// The `c` device: builds emitted C into a shared library (gcc -O3 -march=native -fopenmp), loads
// it through koffi and calls its kernels on typed arrays without copies. Builds are cached by a
// content hash of compiler, flags, host CPU and source under `cacheDir` (written to a temporary
// name, then renamed: concurrent builders never see half a library). Also writes the standalone
// artifact: sources, header and a Makefile that builds the same library with no Node.
//
// The device never imports emit: it takes C text and the PrimFuncs (for the signatures).
import { Context, Data, Effect, Layer } from "effect"
import { spawn, spawnSync } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import koffi from "koffi"
import { allocate, DTYPE_INFO, type DType, type TypedArray } from "../ast/graph/dtype.js"
import { storageElements } from "../ast/tir/analysis.js"
import type { PrimFunc } from "../ast/tir/tir.js"
import type { Target } from "../ast/target.js"
import { hostTarget } from "./host.js"

export class CompileError extends Data.TaggedError("CompileError")<{ readonly command: string; readonly reason: string; readonly stderr: string }> {
  override get message(): string {
    return `c build failed (${this.command}): ${this.reason}${this.stderr ? `\n${this.stderr}` : ""}`
  }
}

export class LoadError extends Data.TaggedError("LoadError")<{ readonly path: string; readonly reason: string }> {
  override get message(): string {
    return `cannot load ${this.path}: ${this.reason}`
  }
}

export class CRunError extends Data.TaggedError("CRunError")<{ readonly kernel: string; readonly reason: string }> {
  override get message(): string {
    return `kernel ${this.kernel}: ${this.reason}`
  }
}

export interface CBuildConfig {
  readonly cc: string
  /** Compile flags (-shared is added for the library). */
  readonly flags: readonly string[]
  readonly cacheDir: string
  /** A limit on one gcc run (none when absent): past it gcc is killed and the build fails. */
  readonly timeoutMs?: number
}

/** -fwrapv: integer arithmetic wraps (stores wrap like the evaluator); -fno-math-errno: libm calls vectorize. */
export const C_FLAGS = ["-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-std=gnu11", "-fwrapv", "-fno-math-errno", "-fPIC", "-Wl,-z,nodelete"] as const

export const defaultCBuildConfig = (): CBuildConfig => ({ cc: "gcc", flags: C_FLAGS, cacheDir: path.join(os.tmpdir(), "tessera-c") })

/** Whether the compiler runs here (tests skip the device when it does not). */
export const compilerAvailable = (cc = "gcc"): boolean => {
  const r = spawnSync(cc, ["--version"], { stdio: "ignore" })
  return r.status === 0
}

const run = (cmd: string, args: readonly string[], timeoutMs?: number): Promise<{ code: number | null; stderr: string; spawnError?: string; timedOut?: boolean }> =>
  new Promise((resolve) => {
    // a group of its own when limited: gcc's cc1 and as are killed with it (killing the driver
    // alone leaves cc1 compiling on)
    const child = spawn(cmd, args, { stdio: ["ignore", "ignore", "pipe"], detached: timeoutMs !== undefined })
    let stderr = ""
    let timedOut = false
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => {
      timedOut = true
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL")
      } catch {
        child.kill("SIGKILL")
      }
    }, timeoutMs)
    child.stderr.on("data", (d: unknown) => (stderr += String(d)))
    child.on("error", (e) => resolve({ code: null, stderr, spawnError: e.message }))
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stderr, ...(timedOut ? { timedOut } : {}) })
    })
  })

/** The cache key: the library depends on the compiler, its flags, the CPU (-march=native) and the source. */
export const buildKey = (source: string, config: CBuildConfig): string =>
  createHash("sha256")
    .update(JSON.stringify([config.cc, config.flags, os.cpus()[0]?.model ?? "", process.arch]))
    .update("\0")
    .update(source)
    .digest("hex")
    .slice(0, 32)

/** Builds `source` into a shared library; its path (cached: an unchanged source is not rebuilt). */
export const buildC = Effect.fn("c.build")(function* (source: string, config: CBuildConfig = defaultCBuildConfig()) {
  const key = buildKey(source, config)
  const so = path.join(config.cacheDir, `${key}.so`)
  if (existsSync(so)) return so
  // unique temporary names: a concurrent builder of the same key never reads or renames our half-written files
  const stem = path.join(config.cacheDir, `${key}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`)
  const src = `${stem}.c`
  const tmp = `${stem}.so`
  const args = [...config.flags, "-shared", "-o", tmp, src, "-lm"]
  const command = [config.cc, ...args].join(" ")
  yield* Effect.try({
    try: () => {
      mkdirSync(config.cacheDir, { recursive: true })
      writeFileSync(src, source)
    },
    catch: (e) => new CompileError({ command, reason: `cannot write the source: ${String(e)}`, stderr: "" }),
  })
  const r = yield* Effect.promise(() => run(config.cc, args, config.timeoutMs))
  if (r.spawnError !== undefined) return yield* new CompileError({ command, reason: `cannot run ${config.cc}: ${r.spawnError}`, stderr: r.stderr })
  if (r.code !== 0) {
    rmSync(tmp, { force: true })
    rmSync(src, { force: true })
    const reason = r.timedOut ? `${config.cc} ran past its limit of ${config.timeoutMs} ms and was killed` : `exit code ${r.code}`
    return yield* new CompileError({ command, reason, stderr: r.stderr })
  }
  yield* Effect.try({
    try: () => {
      renameSync(src, path.join(config.cacheDir, `${key}.c`)) // kept beside the library for reading
      renameSync(tmp, so)
    },
    catch: (e) => new CompileError({ command, reason: `cannot move the library into the cache: ${String(e)}`, stderr: "" }),
  })
  return so
})

/** The koffi type of a param's storage: a pointer to its C type (the emitter's, from the one dtype table). */
const ffiType = (d: DType): string => `${DTYPE_INFO[d].c} *`



/** A loaded kernel: checks its arguments (count, typed-array type, length), then calls the C function. */
export type CKernel = (...args: TypedArray[]) => void

export interface CModule {
  readonly path: string
  readonly kernels: ReadonlyMap<string, CKernel>
}

const checkedKernel = (f: PrimFunc, native: (...a: unknown[]) => unknown): CKernel => {
  const ctors = f.params.map((p) => allocate(p.dtype, 0).constructor)
  const lengths = f.params.map(storageElements)
  return (...args) => {
    if (args.length !== f.params.length) throw new CRunError({ kernel: f.name, reason: `takes ${f.params.length} arrays, given ${args.length}` })
    args.forEach((a, k) => {
      if (a.constructor !== ctors[k]) throw new CRunError({ kernel: f.name, reason: `param ${k} (${f.params[k].dtype}) needs a ${ctors[k].name}, given a ${a.constructor.name}` })
      if (a.length < lengths[k]) throw new CRunError({ kernel: f.name, reason: `param ${k} needs ${lengths[k]} elements, given ${a.length}` })
    })
    native(...args)
  }
}

/** Loads a library built from the emitted `funcs` (same names and params, in any order). */
export const loadC = (so: string, funcs: readonly PrimFunc[]): Effect.Effect<CModule, LoadError> =>
  Effect.try({
    try: () => {
      const lib = koffi.load(so)
      const kernels = new Map<string, CKernel>()
      for (const f of funcs) kernels.set(f.name, checkedKernel(f, lib.func(f.name, "void", f.params.map((p) => ffiType(p.dtype))) as (...a: unknown[]) => unknown))
      return { path: so, kernels }
    },
    catch: (e) => new LoadError({ path: so, reason: e instanceof Error ? e.message : String(e) }),
  })

/** Runs one kernel of a module; argument problems are typed errors. */
export const runC = (mod: CModule, name: string, args: readonly TypedArray[]): Effect.Effect<void, CRunError> => {
  const k = mod.kernels.get(name)
  if (!k) return Effect.fail(new CRunError({ kernel: name, reason: `is not in ${mod.path}` }))
  return Effect.try({ try: () => k(...args), catch: (e) => (e instanceof CRunError ? e : new CRunError({ kernel: name, reason: String(e) })) })
}

/** Median seconds per call: `repeats` rounds, each at least `minMs` long (noisy shared machines). */
export const timeC = (mod: CModule, name: string, args: readonly TypedArray[], repeats = 5, minMs = 50): Effect.Effect<number, CRunError> =>
  Effect.gen(function* () {
    yield* runC(mod, name, args) // warm up (page faults, OpenMP team start)
    const k = mod.kernels.get(name)!
    const times: number[] = []
    for (let r = 0; r < repeats; r++) {
      let n = 0
      const t0 = performance.now()
      let t = t0
      while (t - t0 < minMs || n === 0) {
        k(...args)
        n++
        t = performance.now()
      }
      times.push((t - t0) / 1000 / n)
    }
    return times.sort((a, b) => a - b)[Math.floor(times.length / 2)]
  })

/**
 * Host memory for a c module's buffers, 64-byte aligned (a cache line; an AVX-512 vector). Node's
 * ArrayBuffers are only 16-byte aligned, so half of the 32-byte vector loads of a kernel would
 * straddle two cache lines: measured 30–45% slower convolutions on AVX2. The executor reserves its
 * planned blocks and constants here once; `reserve` may be called once per memory.
 */
export const alignedHostMemory = (): { readonly reserve: (bytes: readonly number[]) => readonly number[]; readonly buffer: () => ArrayBuffer } => {
  const ALIGN = 64
  let buffer: ArrayBuffer | undefined
  return {
    reserve: (sizes) => {
      if (buffer) throw new Error("alignedHostMemory: reserve was already called")
      const rel: number[] = []
      let end = 0
      for (const n of sizes) {
        rel.push(end)
        end += Math.ceil(Math.max(ALIGN, n) / ALIGN) * ALIGN
      }
      buffer = new ArrayBuffer(end + ALIGN)
      // ArrayBuffer backing stores do not move: the base's address decides the offset once
      const misaligned = Number(BigInt(koffi.address(new Uint8Array(buffer, 0, 1))) % BigInt(ALIGN))
      const base = misaligned === 0 ? 0 : ALIGN - misaligned
      return rel.map((r) => base + r)
    },
    buffer: () => {
      if (!buffer) throw new Error("alignedHostMemory: nothing reserved yet")
      return buffer
    },
  }
}

// ---------------------------------------------------------------------------------------------
// The standalone artifact

/** The files that build the library with `make` and no Node: `<lib>.c`, `<lib>.h`, `Makefile`. */
export const cArtifact = (emitted: { readonly source: string; readonly header: string }, libName = "tessera_kernels", config: CBuildConfig = defaultCBuildConfig()): ReadonlyMap<string, string> => {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(libName)) throw new Error(`library name ${JSON.stringify(libName)} is not a safe file name`)
  const makefile = [
    `# Generated by Tessera (c target). \`make\` builds lib${libName}.so; the header is force-included`,
    `# so the prototypes are checked against the definitions.`,
    `CC = ${config.cc}`,
    `CFLAGS = ${config.flags.join(" ")}`,
    `LIB = lib${libName}.so`,
    ``,
    `$(LIB): ${libName}.c ${libName}.h`,
    `\t$(CC) $(CFLAGS) -include ${libName}.h -shared -o $@ ${libName}.c -lm`,
    ``,
    `clean:`,
    `\trm -f $(LIB)`,
    ``,
    `.PHONY: clean`,
    ``,
  ].join("\n")
  return new Map([
    [`${libName}.c`, emitted.source],
    [`${libName}.h`, emitted.header],
    ["Makefile", makefile],
  ])
}

/** Writes artifact files into `dir` (created if missing). */
export const writeArtifact = (dir: string, files: ReadonlyMap<string, string>): Effect.Effect<void, CompileError> =>
  Effect.try({
    try: () => {
      mkdirSync(dir, { recursive: true })
      for (const [name, text] of files) {
        if (name.includes("/") || name.includes("\\") || name.startsWith(".")) throw new Error(`unsafe artifact file name ${JSON.stringify(name)}`)
        writeFileSync(path.join(dir, name), text)
      }
    },
    catch: (e) => new CompileError({ command: `write ${dir}`, reason: e instanceof Error ? e.message : String(e), stderr: "" }),
  })

// ---------------------------------------------------------------------------------------------
// The service

export interface CDeviceShape {
  readonly target: Target
  readonly build: (source: string) => Effect.Effect<string, CompileError>
  readonly load: (so: string, funcs: readonly PrimFunc[]) => Effect.Effect<CModule, LoadError>
  readonly run: (mod: CModule, name: string, args: readonly TypedArray[]) => Effect.Effect<void, CRunError>
  readonly time: (mod: CModule, name: string, args: readonly TypedArray[], repeats?: number, minMs?: number) => Effect.Effect<number, CRunError>
}

export const makeCDevice = (config: CBuildConfig = defaultCBuildConfig(), target: Target = hostTarget()): CDeviceShape => ({
  target,
  build: (source) => buildC(source, config),
  load: loadC,
  run: runC,
  time: timeC,
})

export class CDevice extends Context.Service<CDevice, CDeviceShape>()("tessera/device/CDevice") {
  /** The host CPU, gcc, cache under the OS temp dir. */
  static readonly layer = Layer.sync(CDevice, () => makeCDevice())
  static readonly layerWith = (config: CBuildConfig, target?: Target) => Layer.succeed(CDevice, makeCDevice(config, target))
}
