// The `wasm` device in Node: its workers are worker_threads sharing the module's memory (the
// device itself, src/device/wasm/device.ts, is the browser's too and imports no Node module).
import type { Layer } from "effect"
import { Worker } from "node:worker_threads"
import type { Device } from "../device.js"
import { wasmDeviceLayerWith, type WasmDeviceOptions } from "./device.js"
import { wasmThreadsAvailable, type ThreadHost } from "./load.js"

/** worker_threads as the wasm loader's thread host (evaluated sources, never holding the process open). */
export const nodeThreadHost: ThreadHost = {
  available: wasmThreadsAvailable,
  start: (source, workerData) => {
    new Worker(`${source}\nmain(require("node:worker_threads").workerData)`, { eval: true, workerData }).unref()
  },
}

/** The wasm device with Node's workers for the parallel phases. */
export const wasmDeviceLayer = (o: WasmDeviceOptions = {}): Layer.Layer<Device> => wasmDeviceLayerWith({ threadHost: nodeThreadHost, ...o })
