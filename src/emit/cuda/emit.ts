// The `cuda` target's kernels: PrimFuncs → one CUDA C translation unit of `extern "C" __global__`
// functions. Each PrimFunc is split into its launches (launch.ts), each launch verified against the
// GPU's limits (verify.ts) and rendered by the C-family walker under the cuda dialect (dialect.ts);
// launches of the same code (ResNet's repeated blocks) are one function, the others calling it.
// Pure and deterministic: same funcs and options, same bytes; identifiers are generated, names
// from programs appear only in escaped comments.
import type { CudaAttrs } from "../../ast/target.js"
import type { Buffer, PrimFunc, Stmt } from "../../ast/tir/tir.js"
import { renderFunction } from "../c-family/render.js"
import { commentSafe } from "../c-family/names.js"
import { EmitError } from "../emit-error.js"
import { isSafeCName } from "../c/emit.js"
import { cudaDialect, needsLaunchBounds } from "./dialect.js"
import { fitsInt32 } from "./index-width.js"
import { splitLaunches, type Dim3 } from "./launch.js"
import { CUDA_HALF_SUPPORT, CUDA_PRELUDE } from "./prelude.js"
import { sharedBytes, verifyLaunch } from "./verify.js"

export interface CudaEmitOptions {
  /** Params are declared `__restrict__` (they never overlap). Default true. */
  readonly restrict?: boolean
  /** Functions whose params may overlap (in-place kernels): declared without `__restrict__` whatever `restrict` says. */
  readonly aliased?: ReadonlySet<string>
}

/** One launch of a kernel, as the host launcher makes it. */
export interface CudaLaunch {
  /** The `__global__` function it calls (the first launch of the same code's name). */
  readonly symbol: string
  readonly grid: Dim3
  readonly block: Dim3
  /** Bytes of `__shared__` arrays per block. */
  readonly sharedBytes: number
  /** Whether its kernel synchronizes its block's threads (`__syncthreads()`). */
  readonly barriers: boolean
}

/** A PrimFunc as the host sees it: its params, its workspace buffers (device memory), its launches in order. */
export interface CudaKernel {
  readonly name: string
  readonly params: readonly Buffer[]
  readonly workspace: readonly Buffer[]
  readonly launches: readonly CudaLaunch[]
}

export interface CudaEmitted {
  /** The translation unit: the prelude, then every distinct `__global__` function. */
  readonly source: string
  /** Each distinct `__global__` function's text, in order. */
  readonly functions: readonly string[]
  readonly kernels: readonly CudaKernel[]
}

/** Whether a statement holds a barrier or a warp shuffle (its threads meet: the emulator runs them as a team). */
const hasBarrier = (s: Stmt): boolean => {
  switch (s.kind) {
    case "barrier":
    case "shuffle":
      return true
    case "for":
    case "allocate":
    case "let":
      return hasBarrier(s.body)
    case "seq":
      return s.body.some(hasBarrier)
    case "if":
      return hasBarrier(s.then) || (s.else !== undefined && hasBarrier(s.else))
    default:
      return false
  }
}

/** The text that decides a function's code: without comments, its own name taken out. */
const codeKey = (name: string, text: string): string => text.replace(/\/\*[\s\S]*?\*\//g, "").replace(` ${name}(`, " (")

/** The kernels of `funcs` for a GPU of `attrs`. Throws EmitError, or GpuLimitError for a launch past a limit. */
export const emitCuda = (funcs: readonly PrimFunc[], attrs: CudaAttrs, options: CudaEmitOptions = {}): CudaEmitted => {
  const seen = new Set<string>()
  for (const f of funcs) {
    if (!isSafeCName(f.name)) throw new EmitError({ target: "cuda", reason: `function name ${commentSafe(f.name)} is not a safe C identifier (rename it, e.g. k0)` })
    if (seen.has(f.name)) throw new EmitError({ target: "cuda", reason: `function name ${f.name} appears twice` })
    seen.add(f.name)
  }
  const byCode = new Map<string, string>()
  const texts: string[] = []
  const kernels = funcs.map((f): CudaKernel => {
    const split = splitLaunches(f)
    const launches = split.launches.map((l): CudaLaunch => {
      verifyLaunch(l, attrs)
      const text = renderFunction(cudaDialect(l, { restrict: (options.restrict ?? true) && !options.aliased?.has(f.name), index: fitsInt32(l.func.body) ? "int" : "int64_t", maxVectorBytes: attrs.maxVectorBytes, launchBounds: needsLaunchBounds(l.block[0] * l.block[1] * l.block[2], attrs) }), l.func, l.name)
      const key = codeKey(l.name, text)
      let symbol = byCode.get(key)
      if (symbol === undefined) {
        symbol = l.name
        byCode.set(key, symbol)
        texts.push(text)
      }
      return { symbol, grid: l.grid, block: l.block, sharedBytes: sharedBytes(l), barriers: hasBarrier(l.func.body) }
    })
    return { name: f.name, params: f.params, workspace: split.workspace, launches }
  })
  // halves (`--precision fp16`) bring cuda_fp16.h and their loads; a float32 module is as it was
  const halves = kernels.some((k) => [...k.params, ...k.workspace].some((b) => b.dtype === "float16")) || texts.some((t) => t.includes("__half"))
  const source = [`/* Generated by Tessera (cuda target): the kernels. Do not edit. */`, CUDA_PRELUDE, ...(halves ? [CUDA_HALF_SUPPORT] : []), ...texts.map((t) => `${t}\n`)].join("\n")
  return { source, functions: texts, kernels }
}
