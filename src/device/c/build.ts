// The c device's build: emitted C into a shared library (gcc -O3 -march=native, -fopenmp or, for
// kernels on Tessera's thread pool, -fopenmp-simd -pthread: the backend record's flags) under
// `cacheDir` (by default the c folder of ~/.cache/tessera, $TESSERA_CACHE_DIR), a folder of this
// user's alone; everything written to a temporary name, fsynced, its hash stored, then renamed;
// a cached file used only when it hashes right (./cache-store.ts): concurrent builders never see
// half a file, a planted or torn one is built again, a killed build leaves nothing in the way.
// - One source (the tuner's candidates): one gcc run, the library cached by a content hash of
//   compiler, flags, host CPU and source.
// - An artifact's units (one per distinct kernel, a runtime, the prelude header they include):
//   each compiled to an object in parallel, cached by the hash of its source, the prelude, the flags,
//   the compiler's version and the host CPU; then one link, cached by its objects. Units under
//   `batch.below` bytes are compiled `batch.size` to a gcc run (a file that includes them), their
//   object cached by its members' keys: gcc's fixed cost per process (~0.1 s) is most of a small
//   unit's time. A recompile after one kernel changed compiles that kernel's unit alone (a large
//   unit), or the batch it is in (a small one).
// After every build the cache is kept under its size limit, least recently used first (cache-store.ts `evict`).
// And the Makefile of the standalone artifact, which builds the same library with no Node (make -j).
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { cacheRoot } from "../cache-root.js"
import { CompileError } from "../errors.js"
import { runInGroup as run, runProbeSync } from "../process-group.js"
import { buildFolderPrefix, cacheBudget, cached, evict, privateDir, publish, removeStaleTemps, tempTag, type CacheBudget } from "./cache-store.js"

export interface CBuildConfig {
  readonly cc: string
  /** Compile flags (-shared is added for the library). */
  readonly flags: readonly string[]
  readonly cacheDir: string
  /** A limit on one gcc run (none when absent): past it gcc is killed and the build fails. */
  readonly timeoutMs?: number
  /** gcc runs at once when building an artifact's units (default: os.availableParallelism()). */
  readonly jobs?: number
  /** Units whose source is under `below` bytes, compiled up to `size` to a gcc run (default C_BATCH; `size` 1: each alone). */
  readonly batch?: { readonly below: number; readonly size: number }
  /** The cache's size limit and grace (default `cacheBudget()`: $TESSERA_CACHE_MAX_MB), kept after every build (cache-store.ts `evict`). */
  readonly budget?: CacheBudget
}

/** After a build: the cache folder and its obj/ and lib/ brought under the budget, least recently used first, `keep` spared. */
const evictAfterBuild = (config: CBuildConfig, keep: readonly string[]) =>
  evict(config.cacheDir, [config.cacheDir, path.join(config.cacheDir, "obj"), path.join(config.cacheDir, "lib")], config.budget ?? cacheBudget(), keep)

/** The guard against gcc 12.2's epilogue miscompile (C_FLAGS): needed where `omp parallel` regions are compiled (-fopenmp). */
const NO_VECTOR_EPILOGUES = "--param=vect-epilogues-nomask=0"

/**
 * -fwrapv: integer arithmetic wraps (stores wrap like the evaluator); -fno-math-errno: libm calls
 * vectorize; --param=vect-epilogues-nomask=0: no vectorized epilogue loops, which gcc 12.2
 * miscompiles (x86-64, AVX2 and AVX-512) for a guarded load in an `omp simd` loop in a parallel
 * region, dropping a lane of the epilogue (a padded ConvTranspose lost a tap: test/c-epilogue-miscompile.test.ts).
 * -fno-tree-loop-distribute-patterns: gcc (on at -O3) made the int8 kernels' tile zero-inits and the
 * sums' compaction rows calls to memset / memmove of 224–1024 bytes; inline they are vector stores
 * (ResNet-18 int8's stem 0.71 → 0.62 ms, its 56² convs 0.44 → 0.39; fp32 ResNet-18 neutral:
 * docs/backends.md, 2026-11-27 eleventh session).
 */
export const C_FLAGS = ["-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-std=gnu11", "-fwrapv", "-fno-math-errno", "-fno-tree-loop-distribute-patterns", NO_VECTOR_EPILOGUES, "-fPIC", "-Wl,-z,nodelete"] as const

/**
 * Small units, batched: measured on DenseNet-121's 192 units (docs/backends.md, "where DenseNet-121's
 * gcc time goes"), gcc costs ~0.1 s of CPU per process whatever it compiles, and the 125 units
 * under 4 KB took half the CPU; 8 of them to a run took 5.1 s against 19.4 s one by one.
 */
export const C_BATCH = { below: 4096, size: 8 } as const

/**
 * C_FLAGS for kernels whose parallel loops run on Tessera's thread pool (the emitter's tessera_parallel_for):
 * OpenMP's simd pragmas only (-fopenmp-simd: no libgomp), POSIX threads, and vectorized epilogue
 * loops on. gcc 12.2's miscompile needs the parallel region -fopenmp outlines: the kernel of
 * test/c-epilogue-miscompile.test.ts built with -fopenmp-simd keeps every lane, and so does its
 * graph through the pool. Without vectorized epilogues every vector loop's tail ran scalar: the
 * int8 depthwise convs' rows of 57 int16 (3 × 16 lanes and 9 scalar) took the 112² → 56² one 0.62
 * ms against 0.24 (docs/backends.md, 2026-11-27).
 */
export const C_POOL_FLAGS = [...C_FLAGS.flatMap((f) => (f === "-fopenmp" ? ["-fopenmp-simd"] : f === NO_VECTOR_EPILOGUES ? [] : [f])), "-pthread"] as const

/**
 * The flags a tuner's candidates build with, given the flags of the library a network's kernels
 * build with: the same (its vectorized epilogues or not, so a candidate is timed as the network
 * will run it), but libgomp linked where the library has only OpenMP's simd pragmas — the
 * measuring child's cache sweep (measure.ts, SWEEP_C) is an `omp parallel` region. The pool's
 * candidates have no parallel region of their own for gcc to outline (the miscompile's condition).
 */
export const cMeasureFlags = (flags: readonly string[]): readonly string[] => flags.map((f) => (f === "-fopenmp-simd" ? "-fopenmp" : f))

/** gcc with `flags` (default C_FLAGS), its cache in the c folder of the cache root (read when called: $TESSERA_CACHE_DIR). */
export const defaultCBuildConfig = (flags: readonly string[] = C_FLAGS): CBuildConfig => ({ cc: "gcc", flags, cacheDir: path.join(cacheRoot(), "c") })

/** The flags that compile a unit to an object (the linker's, -Wl,…, left for the link). */
export const compileFlags = (flags: readonly string[]): string[] => flags.filter((f) => !f.startsWith("-Wl,"))

/** Whether the compiler runs here (tests skip the device when it does not). */
export const compilerAvailable = (cc = "gcc"): boolean => {
  const r = spawnSync(cc, ["--version"], { stdio: "ignore" })
  return r.status === 0
}

const identities = new Map<string, string>()

/**
 * The compiler's version and target (`cc --version`, `cc -dumpmachine`), asked once per process: a
 * new compiler misses the cache. Asked as probes (../process-group.ts runProbeSync: a group of
 * their own, killed on a stop); a stopped answer is not kept (the work stops at its next check).
 */
export const compilerIdentity = (cc: string): string => {
  let id = identities.get(cc)
  if (id === undefined) {
    let stopped = false
    const ask = (args: string[]) => {
      const r = runProbeSync(cc, args)
      stopped ||= r.stopped === true
      return r.stdout
    }
    id = `${ask(["--version"]).split("\n")[0]}\n${ask(["-dumpmachine"]).trim()}`
    if (!stopped) identities.set(cc, id)
  }
  return id
}

/** What every output depends on besides its sources: the compiler and its version, the flags, the CPU (-march=native). */
const toolKey = (cc: string, flags: readonly string[]): string => JSON.stringify([cc, compilerIdentity(cc), flags, os.cpus()[0]?.model ?? "", process.arch])

/** The cache key: the library depends on the compiler, its flags, the CPU (-march=native) and the source. */
export const buildKey = (source: string, config: CBuildConfig): string =>
  createHash("sha256").update(toolKey(config.cc, config.flags)).update("\0").update(source).digest("hex").slice(0, 32)

/** Builds `source` into a shared library; its path (cached: an unchanged source is not rebuilt). */
export const buildC = Effect.fn("c.build")(function* (source: string, config: CBuildConfig = defaultCBuildConfig()) {
  const key = buildKey(source, config)
  const so = path.join(config.cacheDir, `${key}.so`)
  yield* privateDir(config.cacheDir)
  if (cached(so)) return so
  removeStaleTemps(config.cacheDir)
  // unique temporary names: a concurrent builder of the same key never reads or renames our half-written files
  const stem = path.join(config.cacheDir, `${key}${tempTag()}`)
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
  const r = yield* run(config.cc, args, config.timeoutMs).pipe(Effect.onInterrupt(() => Effect.sync(() => [tmp, src].forEach((f) => rmSync(f, { force: true })))))
  if (r.spawnError !== undefined || r.code !== 0) {
    rmSync(tmp, { force: true })
    rmSync(src, { force: true })
  }
  if (r.spawnError !== undefined) return yield* new CompileError({ command, reason: `cannot run ${config.cc}: ${r.spawnError}`, stderr: r.stderr })
  if (r.code !== 0) {
    const reason = r.timedOut ? `${config.cc} ran past its limit of ${config.timeoutMs} ms and was killed` : `exit code ${r.code}`
    return yield* new CompileError({ command, reason, stderr: r.stderr })
  }
  yield* Effect.try({
    try: () => {
      renameSync(src, path.join(config.cacheDir, `${key}.c`)) // kept beside the library for reading
      publish(tmp, so)
    },
    catch: (e) => new CompileError({ command, reason: `cannot move the library into the cache: ${String(e)}`, stderr: "" }),
  })
  yield* evictAfterBuild(config, [so])
  return so
})


/** An artifact's C in units: the prelude header they include, and the units (the runtime, the kernels). */
export interface CUnits {
  readonly prelude: { readonly file: string; readonly source: string }
  readonly units: readonly { readonly file: string; readonly source: string }[]
}

/**
 * A built library, and each unit: its key (objectKey), the key of the object it is compiled into
 * (its own key, or its batch's), and whether this build compiled that object (else the cache had it).
 */
export interface CUnitsBuilt {
  readonly library: string
  readonly objects: readonly { readonly file: string; readonly key: string; readonly object: string; readonly compiled: boolean }[]
}

/** The key of a unit's object: the tools, the prelude it includes, its source. */
export const objectKey = (prelude: string, source: string, config: CBuildConfig): string =>
  createHash("sha256").update(toolKey(config.cc, compileFlags(config.flags))).update("\0").update(prelude).update("\0").update(source).digest("hex").slice(0, 32)

/**
 * The units in objects: a unit of `batch.below` bytes or more alone (its key its own), the smaller
 * ones, in the units' order, cut `batch.size` at a time into batches (keyed by their
 * members' keys; a batch of one is the unit alone). Same units, same objects.
 */
/**
 * Items in their order, grouped for gcc runs: those whose `bytes` are under `batch.below` share a
 * group, `batch.size` at a time; a larger one is a group alone (batchUnits's rule, and the tuner's
 * chunks: measure.ts chunkBySize).
 */
export const groupBySize = <U>(items: readonly U[], bytes: (u: U) => number, batch: { readonly below: number; readonly size: number } = C_BATCH): U[][] => {
  const out: U[][] = []
  let open: U[] = []
  for (const u of items) {
    if (bytes(u) >= batch.below) out.push([u])
    else {
      open.push(u)
      if (open.length >= Math.max(1, batch.size)) {
        out.push(open)
        open = []
      }
    }
  }
  if (open.length) out.push(open)
  return out
}

export const batchUnits = <U extends { readonly source: string; readonly key: string }>(
  units: readonly U[],
  batch: { readonly below: number; readonly size: number } = C_BATCH,
): { readonly key: string; readonly members: readonly U[] }[] =>
  groupBySize(units, (u) => Buffer.byteLength(u.source), batch).map((members) =>
    members.length === 1
      ? { key: members[0].key, members }
      : { key: createHash("sha256").update("batch\0").update(members.map((u) => u.key).join(",")).digest("hex").slice(0, 32), members },
  )

/** Writes `text` to `file` with the error of a build step. */
const writeFor = (command: string, what: string, f: () => void): Effect.Effect<void, CompileError> =>
  Effect.try({ try: f, catch: (e) => new CompileError({ command, reason: `cannot ${what}: ${String(e)}`, stderr: "" }) })

/** Runs one gcc command; its typed failure (the command, why, gcc's stderr). */
const gcc = (config: CBuildConfig, args: readonly string[], cleanup: readonly string[]): Effect.Effect<void, CompileError> =>
  Effect.gen(function* () {
    const command = [config.cc, ...args].join(" ")
    const r = yield* run(config.cc, args, config.timeoutMs)
    if (r.spawnError !== undefined || r.code !== 0) for (const f of cleanup) rmSync(f, { force: true })
    if (r.spawnError !== undefined) return yield* new CompileError({ command, reason: `cannot run ${config.cc}: ${r.spawnError}`, stderr: r.stderr })
    if (r.code !== 0) {
      const reason = r.timedOut ? `${config.cc} ran past its limit of ${config.timeoutMs} ms and was killed` : `exit code ${r.code}`
      return yield* new CompileError({ command, reason, stderr: r.stderr })
    }
  })

/**
 * Builds an artifact's units into one shared library: each large unit compiled to an object, the
 * small ones in batches (batchUnits: `config.batch`), `config.jobs` gcc runs at once; each object
 * cached under `<cacheDir>/obj` by its key (objectKey, or its batch's of its members'), then one
 * link, cached under `<cacheDir>/lib` by the objects' keys. An unchanged unit is never compiled
 * again (nor is a batch of unchanged units); an unchanged artifact is not even linked again. A cached object or library is
 * used only when its bytes hash to the hash stored beside it; else it is built again.
 */
export const buildCUnits = Effect.fn("c.buildUnits")(function* (c: CUnits, config: CBuildConfig = defaultCBuildConfig()) {
  const objDir = path.join(config.cacheDir, "obj")
  const libDir = path.join(config.cacheDir, "lib")
  const keyed = c.units.map((u) => ({ ...u, key: objectKey(c.prelude.source, u.source, config) }))
  const batches = batchUnits(keyed, config.batch)
  const libKey = createHash("sha256").update(toolKey(config.cc, config.flags)).update("\0").update(batches.map((b) => b.key).join(",")).digest("hex").slice(0, 32)
  const library = path.join(libDir, `${libKey}.so`)
  for (const d of [config.cacheDir, objDir, libDir]) yield* privateDir(d)
  // a whole library needs no objects: checked first (its objects may have been cleaned away)
  const haveLibrary = cached(library)
  const todo = haveLibrary ? [] : batches.filter((b) => !cached(path.join(objDir, `${b.key}.o`)))
  const batchOf = new Map(batches.flatMap((b) => b.members.map((u) => [u, b] as const)))
  const objects = keyed.map((u) => {
    const b = batchOf.get(u)!
    return { file: u.file, key: u.key, object: b.key, compiled: todo.includes(b) }
  })
  if (haveLibrary) return { library, objects } satisfies CUnitsBuilt
  for (const d of [config.cacheDir, objDir, libDir]) removeStaleTemps(d)
  // a folder of our own for the sources and the half-written outputs (named after the unit: gcc's messages name its file)
  const tmp = yield* Effect.try({
    try: () => {
      const dir = mkdtempSync(path.join(config.cacheDir, buildFolderPrefix()))
      writeFileSync(path.join(dir, c.prelude.file), c.prelude.source)
      return dir
    },
    catch: (e) => new CompileError({ command: `mkdir ${config.cacheDir}`, reason: `cannot make the build folder: ${String(e)}`, stderr: "" }),
  })
  const flags = compileFlags(config.flags)
  // a batch through a file that includes its members (each member under its own name: gcc's messages name it)
  const compile = (b: (typeof batches)[number], i: number) =>
    Effect.gen(function* () {
      const src = b.members.length === 1 ? path.join(tmp, b.members[0].file) : path.join(tmp, `tessera_batch_${i}.c`)
      const obj = path.join(tmp, `${b.key}.o`)
      const command = [config.cc, ...flags, "-c", "-o", obj, src].join(" ")
      yield* writeFor(command, "write the source", () => {
        for (const u of b.members) writeFileSync(path.join(tmp, u.file), u.source)
        if (b.members.length > 1) writeFileSync(src, `${b.members.map((u) => `#include "${u.file}"`).join("\n")}\n`)
      })
      yield* gcc(config, [...flags, "-c", "-o", obj, src], [obj])
      yield* writeFor(command, "move the object into the cache", () => publish(obj, path.join(objDir, `${b.key}.o`)))
    })
  const jobs = Math.max(1, config.jobs ?? os.availableParallelism())
  const linked = Effect.gen(function* () {
    yield* Effect.forEach(todo, compile, { concurrency: jobs, discard: true })
    const out = path.join(tmp, `${libKey}.so`)
    const args = [...config.flags, "-shared", "-o", out, ...batches.map((b) => path.join(objDir, `${b.key}.o`)), "-lm"]
    yield* gcc(config, args, [out])
    yield* writeFor([config.cc, ...args].join(" "), "move the library into the cache", () => publish(out, library))
  })
  yield* linked.pipe(Effect.ensuring(Effect.sync(() => rmSync(tmp, { recursive: true, force: true }))))
  yield* evictAfterBuild(config, [library])
  return { library, objects } satisfies CUnitsBuilt
})

/**
 * The files that build the library with `make -j` and no Node: the header, the prelude header, the
 * units, and a Makefile that compiles each unit to an object and links them (the device's build,
 * step for step).
 */
export const cArtifact = (
  emitted: { readonly header: string } & CUnits,
  libName = "tessera_kernels",
  config: CBuildConfig = defaultCBuildConfig(),
): ReadonlyMap<string, string> => {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(libName)) throw new Error(`library name ${JSON.stringify(libName)} is not a safe file name`)
  const objects = emitted.units.map((u) => `${u.file.replace(/\.c$/, "")}.o`)
  // eight objects a line
  const lines: string[] = []
  for (let i = 0; i < objects.length; i += 8) lines.push(objects.slice(i, i + 8).join(" "))
  const makefile = [
    `# Generated by Tessera (c target). \`make -j\` builds lib${libName}.so: each unit (a kernel's code, or`,
    `# the runtime) compiled to an object, then one link.`,
    `CC = ${config.cc}`,
    `CFLAGS = ${compileFlags(config.flags).join(" ")}`,
    `LDFLAGS = -shared ${config.flags.filter((f) => f.startsWith("-Wl,")).join(" ")}`.trimEnd(),
    `LIB = lib${libName}.so`,
    `OBJS = ${lines.join(" \\\n  ")}`,
    ``,
    `$(LIB): $(OBJS)`,
    `\t$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(OBJS) -lm`,
    ``,
    `%.o: %.c ${emitted.prelude.file}`,
    `\t$(CC) $(CFLAGS) -c -o $@ $<`,
    ``,
    `clean:`,
    `\trm -f $(LIB) $(OBJS)`,
    ``,
    `.PHONY: clean`,
    ``,
  ].join("\n")
  return new Map([[`${libName}.h`, emitted.header], [emitted.prelude.file, emitted.prelude.source], ...emitted.units.map((u) => [u.file, u.source] as const), ["Makefile", makefile]])
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

