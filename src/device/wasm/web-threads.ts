// The wasm loader's thread host in a browser: Web Workers made from the worker source (a Blob URL),
// sent the module and the shared memory by postMessage. Only where the page is cross-origin
// isolated (SharedArrayBuffer exists and a WebAssembly memory may be shared) and the calling thread
// may block (Atomics.wait: a worker, never a page's main thread); elsewhere one thread.
import type { ThreadHost } from "./load.js"

interface WebGlobals {
  readonly crossOriginIsolated?: boolean
  readonly document?: unknown
  readonly Worker?: new (url: string) => { postMessage(data: unknown): void }
  readonly Blob?: new (parts: string[], o: { type: string }) => unknown
  readonly URL: { createObjectURL(b: unknown): string }
}
const web = globalThis as unknown as WebGlobals

export const webThreadHost: ThreadHost = {
  available: () =>
    web.crossOriginIsolated === true && typeof SharedArrayBuffer === "function" && typeof Atomics === "object" && typeof web.Worker === "function" && web.document === undefined,
  start: (source, data) => {
    const url = web.URL.createObjectURL(new web.Blob!([`${source}\nonmessage = (e) => main(e.data)`], { type: "text/javascript" }))
    new web.Worker!(url).postMessage(data)
  },
}
