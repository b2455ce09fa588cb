// The `js` device: an artifact's ES module imported from its text (a data: URL), its exported
// kernels run on host typed arrays. Timing uses the clock here, never in the emit stage.
import { Effect, Layer } from "effect"
import { artifactText } from "../../lowering/program.js"
import { Device, hostModule, LoadError, type DeviceShape } from "../device.js"
import { measureJs } from "./measure.js"

export type KernelFn = (...args: import("../../ast/graph/dtype.js").TypedArray[]) => void

/** Imports module text; its exported functions by name. */
export const loadJsModule = (source: string): Effect.Effect<Map<string, KernelFn>, LoadError> =>
  Effect.tryPromise({
    try: async () => {
      const url = `data:text/javascript;base64,${Buffer.from(source, "utf8").toString("base64")}`
      const mod = (await import(url)) as Record<string, unknown>
      return new Map(Object.entries(mod).filter((e): e is [string, KernelFn] => typeof e[1] === "function"))
    },
    catch: (e) => new LoadError({ target: "js", path: "model.js", reason: e instanceof Error ? e.message : String(e) }),
  })

export const jsDevice: DeviceShape = {
  kind: "js",
  load: (artifact) =>
    Effect.gen(function* () {
      const name = artifact.manifest.module
      const source = typeof name === "string" ? artifactText(artifact, name) : undefined
      if (source === undefined) return yield* new LoadError({ target: "js", path: String(name ?? "(no module)"), reason: "the artifact has no module" })
      return hostModule("js", yield* loadJsModule(source))
    }),
  // each batch in a worker thread with a time limit
  measure: (r) => measureJs(r.candidates, r.source.outputs, r.source.reference, r.render, r.options.measure),
}

export const jsDeviceLayer: Layer.Layer<Device> = Layer.succeed(Device, jsDevice)
