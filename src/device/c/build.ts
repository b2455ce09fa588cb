// The c device's build: emitted C into a shared library (gcc -O3 -march=native -fopenmp), cached by
// a content hash of compiler, flags, host CPU and source under `cacheDir` (written to a temporary
// name, then renamed: concurrent builders never see half a library); and the Makefile of the
// standalone artifact, which builds the same library with no Node.
import { Effect } from "effect"
import { spawn, spawnSync } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { CompileError } from "../errors.js"

export interface CBuildConfig {
  readonly cc: string
  /** Compile flags (-shared is added for the library). */
  readonly flags: readonly string[]
  readonly cacheDir: string
  /** A limit on one gcc run (none when absent): past it gcc is killed and the build fails. */
  readonly timeoutMs?: number
}

/**
 * -fwrapv: integer arithmetic wraps (stores wrap like the evaluator); -fno-math-errno: libm calls
 * vectorize; --param=vect-epilogues-nomask=0: no vectorized epilogue loops, which gcc 12.2
 * miscompiles (x86-64, AVX2 and AVX-512) for a guarded load in an `omp simd` loop in a parallel
 * region, dropping a lane of the epilogue (a padded ConvTranspose lost a tap: test/c-epilogue-miscompile.test.ts).
 */
export const C_FLAGS = ["-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-std=gnu11", "-fwrapv", "-fno-math-errno", "--param=vect-epilogues-nomask=0", "-fPIC", "-Wl,-z,nodelete"] as const

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

