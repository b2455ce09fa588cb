// The `js` device: an artifact's ES module imported from its text (a data: URL), its exported
// kernels run on host typed arrays. Timing uses the clock here, never in the emit stage. This file
// runs in Node and in a browser; measuring tuning candidates (worker_threads) is Node's, ./node.ts.
import { Effect, Layer } from "effect"
import { artifactText } from "../../lowering/program.js"
import { bigArray } from "../../ast/graph/dtype.js"
import { Device, hostModule, LoadError, plainReserve, type DeviceShape } from "../device.js"

export type KernelFn = (...args: import("../../ast/graph/dtype.js").TypedArray[]) => void

/** Imports module text; its exported functions by name. */
export const loadJsModule = (source: string): Effect.Effect<Map<string, KernelFn>, LoadError> =>
  Effect.tryPromise({
    try: async () => {
      const url = `data:text/javascript;charset=utf-8,${encodeURIComponent(source)}`
      const mod = (await import(url)) as Record<string, unknown>
      return new Map(Object.entries(mod).filter((e): e is [string, KernelFn] => typeof e[1] === "function"))
    },
    catch: (e) => new LoadError({ target: "js", path: "model.js", reason: e instanceof Error ? e.message : String(e) }),
  })

/** The js device without a measurer (a browser's; Node's adds one: ./node.ts). */
export const jsDeviceCore: DeviceShape = {
  kind: "js",
  load: (artifact) =>
    Effect.gen(function* () {
      const name = artifact.manifest.module
      const source = typeof name === "string" ? artifactText(artifact, name) : undefined
      if (source === undefined) return yield* new LoadError({ target: "js", path: String(name ?? "(no module)"), reason: "the artifact has no module" })
      // (int64 / uint64 buffers as BigInt64Arrays / BigUint64Arrays: the emitted code computes them as BigInts)
      return hostModule("js", yield* loadJsModule(source), plainReserve, bigArray)
    }),
}

export const jsDeviceCoreLayer: Layer.Layer<Device> = Layer.succeed(Device, jsDeviceCore)
