// The `c` device: an artifact's C source built by gcc into a shared library (cached by content),
// loaded through koffi, its kernels run on host typed arrays in 64-byte aligned memory.
import { Effect, Layer } from "effect"
import { artifactText, type Artifact } from "../../lowering/program.js"
import { Device, hostModule, LoadError, type DeviceShape } from "../device.js"
import { buildC, compilerAvailable, defaultCBuildConfig, type CBuildConfig } from "./build.js"
import { alignedReserve, loadC } from "./load.js"
import { measureC } from "./measure.js"

/** The artifact's C source (the file its manifest names as `source`). */
const sourceOf = (a: Artifact): Effect.Effect<string, LoadError> => {
  const name = a.manifest.source
  const text = typeof name === "string" ? artifactText(a, name) : undefined
  return text === undefined ? Effect.fail(new LoadError({ target: "c", path: String(name ?? "(no source)"), reason: "the artifact has no C source to build" })) : Effect.succeed(text)
}

/**
 * The c device; with `threads`, OpenMP's thread count is set before a library loads (OpenMP reads
 * it once, when a process first runs a parallel region).
 */
export const cDevice = (config: CBuildConfig = defaultCBuildConfig(), threads?: number): DeviceShape => ({
  kind: "c",
  load: (artifact) =>
    Effect.gen(function* () {
      if (threads !== undefined) process.env.OMP_NUM_THREADS = String(Math.max(1, threads))
      const so = yield* buildC(yield* sourceOf(artifact), config)
      const mod = yield* loadC(so, artifact.kernels)
      return hostModule("c", mod.kernels, alignedReserve)
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
    })
  },
})

/** The c device on this host: gcc, its build cache under the OS temp folder (or `config`'s). */
export const cDeviceLayer = (config?: CBuildConfig, threads?: number): Layer.Layer<Device> => Layer.succeed(Device, cDevice(config, threads))

/** Why the c device cannot work here (no gcc), or undefined. */
export const cUnavailable = (): string | undefined =>
  compilerAvailable("gcc") ? undefined : "gcc was not found on PATH; install gcc (with OpenMP) or use --target js"
