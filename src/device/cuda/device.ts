// The cuda target's Device: no GPU is driven from Node yet (a CUDA driver layer through an FFI is
// the next step), so loading an artifact here fails with a typed LoadError that says how to run it:
// `make` in the artifact's folder builds its standalone runner with nvcc alone.
import { Effect, Layer } from "effect"
import { Device, type DeviceShape } from "../device.js"
import { LoadError } from "../errors.js"

export const cudaDevice: DeviceShape = {
  kind: "cuda",
  load: () =>
    Effect.fail(
      new LoadError({
        target: "cuda",
        path: "the artifact",
        reason: "Tessera does not drive a GPU from Node; write the artifact with `tessera compile MODEL.onnx --target cuda --out DIR`, then `make -C DIR` and run `DIR/model --input NAME=FILE.npy --out OUT` on the GPU machine",
      }),
    ),
}

export const cudaDeviceLayer: Layer.Layer<Device> = Layer.succeed(Device, cudaDevice)
