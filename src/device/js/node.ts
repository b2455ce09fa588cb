// The `js` device in Node: the portable one (./device.ts) and a measurer of tuning candidates, each
// batch in a worker thread with a time limit (./measure.ts, worker_threads).
import { Layer } from "effect"
import { Device, type DeviceShape } from "../device.js"
import { jsDeviceCore } from "./device.js"
import { measureJs } from "./measure.js"

export const jsDevice: DeviceShape = {
  ...jsDeviceCore,
  measure: (r) => measureJs(r.candidates, r.source.outputs, r.source.reference, r.render, r.options.measure),
}

export const jsDeviceLayer: Layer.Layer<Device> = Layer.succeed(Device, jsDevice)
