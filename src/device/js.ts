// The `js` device: loads an emitted ES module (from its text, as a data: URL import) and hands
// the executor its kernel functions. Timing uses the clock here, never in the emit stage.
import { Data, Effect } from "effect"
import type { KernelFn } from "./executor.js"

export class JsLoadError extends Data.TaggedError("JsLoadError")<{ readonly reason: string }> {
  override get message(): string {
    return `cannot load the js module: ${this.reason}`
  }
}

/** Imports module text; its exported functions by name. */
export const loadJsModule = (source: string): Effect.Effect<Map<string, KernelFn>, JsLoadError> =>
  Effect.tryPromise({
    try: async () => {
      const url = `data:text/javascript;base64,${Buffer.from(source, "utf8").toString("base64")}`
      const mod = (await import(url)) as Record<string, unknown>
      return new Map(Object.entries(mod).filter((e): e is [string, KernelFn] => typeof e[1] === "function"))
    },
    catch: (e) => new JsLoadError({ reason: e instanceof Error ? e.message : String(e) }),
  })
