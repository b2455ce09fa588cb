// The `wasm` device: validates and instantiates an emitted module against a WebAssembly.Memory
// (plain, or shared when the module imports a shared one) with the math imports, and hands the
// executor kernel functions of the js target's shape: `(…typed arrays) => void`. Each call copies
// the params into the kernel's frame in linear memory (layout given by the emitter as data; this
// file never imports emit) — all but the outputs the layout marks as written whole before any
// read —, runs the export, and copies the written params back.
import { Data, Effect } from "effect"
import { erf } from "../ast/te/eval-expr.js" // the evaluator's formula, so results agree bit for bit in f64
import { converter, type DType, type TypedArray } from "../ast/graph/dtype.js"
import type { KernelFn } from "./executor.js"

// The WebAssembly JS API, typed here (our lib is ES2022 without DOM, and @types/node omits it).
interface WasmMemory {
  readonly buffer: ArrayBuffer | SharedArrayBuffer
}
interface WasmApi {
  validate(bytes: Uint8Array): boolean
  Module: { new (bytes: Uint8Array): object; imports(m: object): { module: string; name: string; kind: string }[] }
  Instance: new (m: object, imports: object) => { readonly exports: Record<string, unknown> }
  Memory: new (d: { initial: number; maximum?: number; shared?: boolean }) => WasmMemory
}
const WA = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly

/** Whether the engine accepts the bytes as a module (WebAssembly.validate). */
export const validateWasm = (bytes: Uint8Array): boolean => WA.validate(bytes)

export class WasmLoadError extends Data.TaggedError("WasmLoadError")<{ readonly reason: string }> {
  override get message(): string {
    return `cannot load the wasm module: ${this.reason}`
  }
}

/** Where a kernel's params lie in its frame (src/emit/wasm/emit.ts WasmKernelLayout, structurally). */
export interface WasmFrameLayout {
  readonly name: string
  readonly params: readonly { readonly dtype: DType; readonly offset: number; readonly length: number; readonly written: boolean; readonly copyIn?: boolean }[]
  readonly frameBytes: number
}

export interface WasmLoadOptions {
  /** Use a shared memory (the module must have been emitted with `sharedMemory`). Default false. */
  readonly shared?: boolean
}


/** The "math" imports a module may ask for (src/emit/wasm/expr.ts MATH_IMPORTS). */
export const WASM_MATH_IMPORTS: Readonly<Record<string, (...a: number[]) => number>> = {
  exp: Math.exp,
  log: Math.log,
  tanh: Math.tanh,
  erf,
  pow: Math.pow,
  sigmoid: (x) => 1 / (1 + Math.exp(-x)),
  sin: Math.sin,
  cos: Math.cos,
  round_f16: converter("float16"),
  round_bf16: converter("bfloat16"),
}

const PAGE = 65536
const FRAME_BASE = 64 // the frame starts past address 0, so a stray negative index cannot alias it silently without bounds checks

/** Validates, compiles and instantiates `bytes`; one kernel function per layout. */
export const loadWasmModule = (bytes: Uint8Array, layouts: readonly WasmFrameLayout[], opts: WasmLoadOptions = {}): Effect.Effect<Map<string, KernelFn>, WasmLoadError> =>
  Effect.try({
    try: () => loadWasmModuleSync(bytes, layouts, opts),
    catch: (e) => new WasmLoadError({ reason: e instanceof Error ? e.message : String(e) }),
  })

/** The synchronous core of loadWasmModule (throws); for benchmarks and tests. */
export const loadWasmModuleSync = (bytes: Uint8Array, layouts: readonly WasmFrameLayout[], opts: WasmLoadOptions = {}): Map<string, KernelFn> => {
  if (!WA.validate(bytes)) {
    // compile to get the engine's reason
    new WA.Module(bytes)
    throw new Error("WebAssembly.validate rejected the module")
  }
  const mod = new WA.Module(bytes)
  const needPages = Math.max(1, Math.ceil((FRAME_BASE + Math.max(0, ...layouts.map((l) => l.frameBytes))) / PAGE))
  const memory = opts.shared ? new WA.Memory({ initial: needPages, maximum: 16384, shared: true }) : new WA.Memory({ initial: needPages })
  const wanted = new Set(WA.Module.imports(mod).filter((i) => i.module === "math").map((i) => i.name))
  const math = Object.fromEntries([...wanted].map((n) => {
    const f = WASM_MATH_IMPORTS[n]
    if (!f) throw new Error(`the module imports an unknown math function '${n}'`)
    return [n, f] as const
  }))
  const instance = new WA.Instance(mod, { env: { memory }, math })
  const out = new Map<string, KernelFn>()
  for (const lay of layouts) {
    const fn = instance.exports[lay.name]
    if (typeof fn !== "function") throw new Error(`the module exports no kernel '${lay.name}'`)
    const run = fn as (frame: number) => void
    out.set(lay.name, (...args: TypedArray[]) => {
      if (args.length !== lay.params.length) throw new Error(`kernel ${lay.name} takes ${lay.params.length} arrays, given ${args.length}`)
      const mem = new Uint8Array(memory.buffer)
      lay.params.forEach((p, k) => {
        if (p.copyIn === false) return // an output the kernel writes whole before any read
        const a = args[k]
        const src = new Uint8Array(a.buffer, a.byteOffset, Math.min(a.byteLength, p.length * a.BYTES_PER_ELEMENT))
        mem.set(src, FRAME_BASE + p.offset)
      })
      run(FRAME_BASE)
      const after = new Uint8Array(memory.buffer)
      lay.params.forEach((p, k) => {
        if (!p.written) return
        const a = args[k]
        const n = Math.min(a.byteLength, p.length * a.BYTES_PER_ELEMENT)
        new Uint8Array(a.buffer, a.byteOffset, n).set(after.subarray(FRAME_BASE + p.offset, FRAME_BASE + p.offset + n))
      })
    })
  }
  return out
}
