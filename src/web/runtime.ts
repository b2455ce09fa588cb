// The runtime of a model compiled ahead of time (the esbuild plugin's modules): a packed program
// (./packed-program.ts) and its artifact's code — a wasm module or a js module's text — loaded on
// the js or wasm device and run by the executor. Runs in a browser and in Node; imports no Node module.
import { Effect, type Layer } from "effect"
import type { TypedArray } from "../ast/graph/dtype.js"
import { InputError } from "../ast/graph/errors.js"
import { TargetUnavailableError } from "../backend/backend.js"
import type { Tensor } from "../ast/graph/tensor.js"
import type { Device } from "../device/device.js"
import { jsDeviceCoreLayer } from "../device/js/device.js"
import { wasmDeviceLayerWith } from "../device/wasm/device.js"
import { webThreadHost } from "../device/wasm/web-threads.js"
import type { Artifact } from "../lowering/program.js"
import { loadArtifact } from "../pipeline-core.js"
import { unpackProgram } from "./packed-program.js"

export interface LoadedModel {
  /** The outputs by name for inputs by name (typed arrays of the inputs' dtypes and sizes, or tensors). */
  readonly run: (feeds: Readonly<Record<string, TypedArray | Tensor>>) => Promise<Record<string, Tensor>>
  /** Ends the device's workers. */
  readonly close: () => void
}

const deviceOf = (kind: string, threads: number): Layer.Layer<Device> | undefined =>
  kind === "wasm" ? wasmDeviceLayerWith({ threads, threadHost: webThreadHost }) : kind === "js" ? jsDeviceCoreLayer : undefined

/** Loads a packed program and its artifact; `threads` > 1 only where the artifact has a shared memory and the page may share it. */
export const loadPackedModel = async (packed: Uint8Array, artifact: Artifact, o: { readonly threads?: number } = {}): Promise<LoadedModel> => {
  const program = unpackProgram(packed)
  const layer = deviceOf(artifact.kind, o.threads ?? 1)
  if (!layer) throw new TargetUnavailableError({ target: artifact.kind, reason: "the ahead-of-time runtime runs js and wasm artifacts" })
  const executor = await Effect.runPromise(loadArtifact(program, artifact).pipe(Effect.provide(layer)))
  const types = new Map(program.graph.inputs.map((i) => [i.name, i.type] as const))
  return {
    run: async (feeds) => {
      const map = new Map<string, Tensor>()
      for (const [name, value] of Object.entries(feeds)) {
        const t = types.get(name)
        if (!t) throw new InputError({ input: name, reason: `the model has no such input (it has ${[...types.keys()].join(", ")})` })
        map.set(name, "data" in value && "shape" in value ? (value as Tensor) : { dtype: t.dtype, shape: t.shape as number[], data: value as TypedArray })
      }
      return Object.fromEntries(executor.run(map))
    },
    close: () => executor.module.close(),
  }
}
