// Static verification of a launch before anything runs it (TVM's VerifyGPUCode): threads per block
// and each block and grid dimension, shared memory per block, the widest vector access, and
// barriers only under block-uniform control flow (every thread of a block reaches each
// `__syncthreads()` or none does) — each against the target record's limit, as a typed error
// naming the kernel and the limit. Pure.
import { Data } from "effect"
import { storageBytes } from "../../ast/graph/dtype.js"
import { freeVars, type Expr } from "../../ast/te/expr.js"
import type { CudaAttrs } from "../../ast/target.js"
import { storageElements } from "../../ast/tir/analysis.js"
import type { Stmt } from "../../ast/tir/tir.js"
import { isThreadLoop, type Launch } from "./launch.js"

/** A launch past one of the GPU's limits (or a barrier some threads of a block would not reach). */
export class GpuLimitError extends Data.TaggedError("GpuLimitError")<{
  readonly kernel: string
  /** The limit, as the target record names it (maxThreadsPerBlock, sharedMemoryPerBlock, …) or "uniformBarrier". */
  readonly limit: string
  readonly value: number
  readonly max: number
  readonly reason: string
}> {
  override get message(): string {
    return `cuda kernel ${JSON.stringify(this.kernel)}: ${this.reason} (${this.limit}: ${this.value} > ${this.max})`
  }
}

/** Bytes of the block-level (`__shared__`) allocations of a launch: those outside every threadIdx loop, when the block has more than one thread. */
export const sharedBytes = (l: Launch): number => {
  const threads = l.block[0] * l.block[1] * l.block[2]
  if (threads === 1) return 0
  let bytes = 0
  const walk = (s: Stmt, inThread: boolean): void => {
    switch (s.kind) {
      case "for":
        return walk(s.body, inThread || isThreadLoop(s))
      case "allocate":
        if (!inThread) bytes += storageElements(s.buffer) * storageBytes(s.buffer.dtype)
        return walk(s.body, inThread)
      case "let":
        return walk(s.body, inThread)
      case "seq":
        return s.body.forEach((b) => walk(b, inThread))
      case "if":
        walk(s.then, inThread)
        if (s.else) walk(s.else, inThread)
        return
      default:
        return
    }
  }
  walk(l.func.body, false)
  return bytes
}

/** Throws GpuLimitError where launch `l` breaks a limit of `attrs`. */
export const verifyLaunch = (l: Launch, attrs: CudaAttrs): void => {
  const fail = (limit: string, value: number, max: number, reason: string): never => {
    throw new GpuLimitError({ kernel: l.name, limit, value, max, reason })
  }
  const threads = l.block[0] * l.block[1] * l.block[2]
  if (threads > attrs.maxThreadsPerBlock) fail("maxThreadsPerBlock", threads, attrs.maxThreadsPerBlock, `${l.block.join("x")} threads per block`)
  l.block.forEach((d, k) => d > attrs.maxBlockDim[k] && fail(`maxBlockDim.${"xyz"[k]}`, d, attrs.maxBlockDim[k], `block dimension ${"xyz"[k]} of ${d}`))
  l.grid.forEach((d, k) => d > attrs.maxGridDim[k] && fail(`maxGridDim.${"xyz"[k]}`, d, attrs.maxGridDim[k], `grid dimension ${"xyz"[k]} of ${d}`))
  const shared = sharedBytes(l)
  if (shared > attrs.sharedMemoryPerBlock) fail("sharedMemoryPerBlock", shared, attrs.sharedMemoryPerBlock, `${shared} bytes of shared memory per block`)
  // variables that differ between the threads of a block: threadIdx loops', and what is computed from them
  const variant = new Set<string>()
  const varies = (e: Expr) => [...freeVars(e)].some((x) => variant.has(x))
  const walk = (s: Stmt, uniform: boolean, bytesOf: (name: string) => number): void => {
    switch (s.kind) {
      case "for": {
        if (s.forKind === "vectorized") {
          const n = s.extent.kind === "const" ? s.extent.value : Infinity
          // the widest element a vectorized loop over this body touches
          const width = n * maxElementBytes(s.body, bytesOf)
          if (width > attrs.maxVectorBytes) fail("maxVectorBytes", width, attrs.maxVectorBytes, `a vectorized loop ${s.var.name} of ${n} lanes`)
        }
        if (isThreadLoop(s)) {
          variant.add(s.var.name)
          const dim = l.block["xyz".indexOf(s.thread!.slice(-1))]
          // a thread loop narrower than the block is a guard
          return walk(s.body, uniform && s.extent.kind === "const" && s.extent.value === dim, bytesOf)
        }
        const v = varies(s.min) || varies(s.extent)
        if (v) variant.add(s.var.name)
        return walk(s.body, uniform && !v, bytesOf)
      }
      case "let":
        if (varies(s.value)) variant.add(s.var.name)
        return walk(s.body, uniform, bytesOf)
      case "if":
        walk(s.then, uniform && !varies(s.cond), bytesOf)
        if (s.else) walk(s.else, uniform && !varies(s.cond), bytesOf)
        return
      case "seq":
        return s.body.forEach((b) => walk(b, uniform, bytesOf))
      case "allocate": {
        const n = storageBytes(s.buffer.dtype)
        return walk(s.body, uniform, (name) => (name === s.buffer.name ? n : bytesOf(name)))
      }
      case "barrier":
        if (!uniform) fail("uniformBarrier", 1, 0, "a barrier under control flow that differs between the threads of a block (a thread guard, or a condition or loop bound computed from threadIdx)")
        return
      default:
        return
    }
  }
  const params = new Map(l.func.params.map((p) => [p.name, storageBytes(p.dtype)] as const))
  walk(l.func.body, true, (name) => params.get(name) ?? 4)
  verifyShuffles(l, attrs, fail)
}

/**
 * Warp shuffles: a launch that shuffles has a block of threadIdx.x alone, whole warps of it (the
 * evaluator's lanes are threadIdx.x mod 32), and reaches each shuffle under control that is the
 * same for every thread of a warp: a thread guard or condition from threadIdx.x only of the form
 * `t < 32·n` (whole warps), never one that splits a warp — with a full mask every lane must arrive.
 */
const verifyShuffles = (l: Launch, attrs: CudaAttrs, fail: (limit: string, value: number, max: number, reason: string) => never): void => {
  const shuffles: Stmt[] = []
  const find = (s: Stmt): void => {
    if (s.kind === "shuffle") shuffles.push(s)
    else if (s.kind === "seq") s.body.forEach(find)
    else if (s.kind === "for" || s.kind === "allocate" || s.kind === "let") find(s.body)
    else if (s.kind === "if") {
      find(s.then)
      if (s.else) find(s.else)
    }
  }
  find(l.func.body)
  if (shuffles.length === 0) return
  const warp = attrs.warpSize
  if (l.block[1] !== 1 || l.block[2] !== 1 || l.block[0] % warp !== 0)
    fail("warpShuffle", l.block[0] % warp, 0, `warp shuffles in a block of ${l.block.join("x")} threads (they need threadIdx.x alone, in whole warps of ${warp})`)
  const variant = new Set<string>()
  const varies = (e: Expr) => [...freeVars(e)].some((x) => variant.has(x))
  /** `t < 32·n` for a threadIdx.x variable t: true for whole warps. */
  const wholeWarps = (e: Expr): boolean =>
    e.kind === "bin" && e.op === "lt" && e.a.kind === "var" && variant.has(e.a.name) && e.b.kind === "const" && e.b.value % warp === 0
  const walk = (s: Stmt, uniform: boolean): void => {
    switch (s.kind) {
      case "for": {
        if (isThreadLoop(s)) {
          variant.add(s.var.name)
          const dim = l.block["xyz".indexOf(s.thread!.slice(-1))]
          const ext = s.extent.kind === "const" ? s.extent.value : -1
          return walk(s.body, uniform && (ext === dim || ext % warp === 0))
        }
        const v = varies(s.min) || varies(s.extent)
        if (v) variant.add(s.var.name)
        return walk(s.body, uniform && !v)
      }
      case "let":
        if (varies(s.value)) variant.add(s.var.name)
        return walk(s.body, uniform)
      case "if": {
        const u = uniform && (!varies(s.cond) || (wholeWarps(s.cond) && !s.else))
        walk(s.then, u)
        if (s.else) walk(s.else, uniform && !varies(s.cond))
        return
      }
      case "seq":
        return s.body.forEach((b) => walk(b, uniform))
      case "allocate":
        return walk(s.body, uniform)
      case "shuffle":
        if (!uniform) fail("uniformShuffle", 1, 0, `a warp shuffle into ${s.buffer} under control flow that splits a warp (every lane of its mask must reach it)`)
        return
      default:
        return
    }
  }
  walk(l.func.body, true)
}

/** The widest element stored in `s` (bytes), 4 when it stores nothing. */
const maxElementBytes = (s: Stmt, bytesOf: (name: string) => number): number => {
  let max = 4
  const walk = (x: Stmt): void => {
    switch (x.kind) {
      case "store":
        max = Math.max(max, bytesOf(x.buffer))
        return
      case "for":
      case "let":
      case "allocate":
        return walk(x.body)
      case "seq":
        return x.body.forEach(walk)
      case "if":
        walk(x.then)
        if (x.else) walk(x.else)
        return
      default:
        return
    }
  }
  walk(s)
  return max
}
