// The `c` device: an artifact's C units built by gcc into a shared library (each unit's object
// compiled in parallel and cached by its content, ./build.ts),
// loaded through koffi, its kernels run on host typed arrays in 64-byte aligned memory.
import { Effect, Layer } from "effect"
import { cArray } from "../../ast/graph/dtype.js"
import { artifactText, type Artifact } from "../../lowering/program.js"
import { Device, hostModule, LoadError, type DeviceShape } from "../device.js"
import { buildCUnits, compilerAvailable, defaultCBuildConfig, type CBuildConfig, type CUnits } from "./build.js"
import { discard } from "./cache-store.js"
import { alignedReserve, loadC } from "./load.js"
import { measureC } from "./measure.js"

/** The artifact's C units: the prelude header and the units its manifest names (`prelude`, `units[].file`). */
const unitsOf = (a: Artifact): Effect.Effect<CUnits, LoadError> => {
  const missing = (what: string) => Effect.fail(new LoadError({ target: "c", path: what, reason: "the artifact lacks a C file its manifest names" }))
  const { prelude, units } = a.manifest
  if (typeof prelude !== "string" || !Array.isArray(units)) return missing("(no prelude or units in the manifest)")
  const preludeText = artifactText(a, prelude)
  if (preludeText === undefined) return missing(prelude)
  const out: { file: string; source: string }[] = []
  for (const u of units as unknown[]) {
    const file = typeof u === "object" && u !== null && "file" in u && typeof u.file === "string" ? u.file : undefined
    const text = file === undefined ? undefined : artifactText(a, file)
    if (file === undefined || text === undefined) return missing(String(file ?? "(a unit without a file)"))
    out.push({ file, source: text })
  }
  return Effect.succeed({ prelude: { file: prelude, source: preludeText }, units: out })
}

/**
 * The c device; with `threads`, the thread count of the library's parallel loops, set through its
 * thread pool (or, for a library on OpenMP, its OpenMP runtime, for the thread that loads it and
 * calls its kernels: loadC) — not OMP_NUM_THREADS, which a worker thread's `process.env` never
 * carries to the process's environment.
 */
export const cDevice = (config: CBuildConfig = defaultCBuildConfig(), threads?: number): DeviceShape => ({
  kind: "c",
  load: (artifact) =>
    Effect.gen(function* () {
      const units = yield* unitsOf(artifact)
      const built = yield* buildCUnits(units, config)
      // a library that hashes right but will not load (damaged before it was hashed, a planted
      // file with a forged hash) is built once more; a second failure is the error
      const mod = yield* loadC(built.library, artifact.kernels, threads).pipe(
        Effect.catchTag("LoadError", () =>
          Effect.sync(() => discard(built.library)).pipe(
            Effect.andThen(buildCUnits(units, config)),
            Effect.flatMap((again) => loadC(again.library, artifact.kernels, threads)),
          ),
        ),
      )
      return hostModule("c", mod.kernels, alignedReserve, cArray, mod.plan)
    }),
  // gcc in chunks, each candidate timed in a child process with its own OpenMP thread count
  measure: (r) => {
    const o = r.options
    return measureC(r.candidates, r.source.outputs, r.source.reference, (funcs) => r.render(funcs.map((f) => ({ name: f.name, func: f }))), {
      ...o.measure,
      threads: o.threads,
      chunk: o.chunk,
      buildJobs: o.buildJobs,
      build: o.build,
      ...(o.overlap === undefined ? {} : { overlap: o.overlap }),
      ...(o.spent ? { spent: o.spent } : {}),
    })
  },
})

/** The c device on this host: gcc, its build cache under the cache root (or `config`'s). */
export const cDeviceLayer = (config?: CBuildConfig, threads?: number): Layer.Layer<Device> => Layer.succeed(Device, cDevice(config, threads))

/** Why the c device cannot work here (no gcc), or undefined. */
export const cUnavailable = (): string | undefined =>
  compilerAvailable("gcc") ? undefined : "gcc was not found on PATH; install gcc (with OpenMP) or use --target js"
