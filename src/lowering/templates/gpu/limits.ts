// What the GPU rules size their schedules from: the per-block limits of a CudaAttrs record and the
// defaults derived from them (never a number tuned to one card by hand).
import type { CudaAttrs } from "../../../ast/target.js"

export interface GpuLimits {
  readonly maxThreads: number
  /** Shared memory a block may use without opting in (bytes). */
  readonly sharedBytes: number
  readonly registers: number
  readonly warp: number
  /** Streaming multiprocessors the grid should fill (1 where unknown). */
  readonly sms: number
  /**
   * Threads per block a tiled or bound nest aims for: a quarter of the block limit, so that
   * several blocks share an SM and one block's barrier stalls overlap another's work (256 on
   * every capability from 7.0 on).
   */
  readonly blockThreads: number
  /**
   * Accumulators a thread's register tile holds at most: a quarter of the registers a thread has
   * when a full block runs (registers per block / max threads: 64 on every capability from 7.0;
   * the rest hold the operands, addresses and loop state).
   */
  readonly accumulators: number
  /** fp32 elements of the widest access one thread makes (maxVectorBytes / 4: a float4). */
  readonly vectorLanes: number
  /**
   * Virtual threads a kernel's thread runs at most (the product of its vthread loops): a warp's
   * quarter, Ansor's `max_vthread_extent` (warp_size / 4) and MetaSchedule's VerifyGPUCode bound
   * (8) on the fused vthread loop. lowering.InjectVirtualThread copies a thread's work once per
   * virtual thread (its register tile and the updates of it), so registers and the source nvcc
   * compiles grow with it: a ResNet-18 3x3 conv config of 1,792 virtual threads was 8.6 MB of
   * CUDA, minutes of cicc (docs/cuda.md).
   */
  readonly maxVthreads: number
  /** The record itself (the rules that check a schedule through the cuda TIR pipeline need it). */
  readonly record: CudaAttrs
}

export const gpuLimits = (a: CudaAttrs): GpuLimits => ({
  maxThreads: a.maxThreadsPerBlock,
  sharedBytes: a.sharedMemoryPerBlock,
  registers: a.registersPerBlock,
  warp: a.warpSize,
  sms: Math.max(1, a.multiprocessors),
  blockThreads: Math.max(a.warpSize, Math.floor(a.maxThreadsPerBlock / 4)),
  accumulators: Math.max(1, Math.floor(a.registersPerBlock / a.maxThreadsPerBlock / 4)),
  vectorLanes: Math.max(1, Math.floor(a.maxVectorBytes / 4)),
  maxVthreads: Math.max(1, Math.floor(a.warpSize / 4)),
  record: a,
})

/** Thread counts a knob offers: the warp times powers of two up to the block limit. */
export const threadCandidates = (l: GpuLimits): number[] => {
  const out: number[] = []
  for (let t = l.warp; t <= l.maxThreads; t *= 2) out.push(t)
  return out
}

/**
 * Each axis's bound on its vthread factor in a tiling's knobs, so that any draw's product stays
 * within `maxVthreads`: the bound's factors of two dealt out one at a time over the axes longer
 * than one, outermost first (three axes and 8: 2 each; two: 4 and 2; one: 8). Ansor bounds each
 * split's vthread factor alone (`max_vthread_extent`), which let most of AutoTVM's template's
 * random draws over three axes run past the product (docs/cuda.md).
 */
export const vthreadCaps = (extents: readonly number[], maxVthreads: number): number[] => {
  const caps = extents.map(() => 1)
  const axes = [...extents.keys()].filter((k) => extents[k] > 1)
  for (let bits = Math.floor(Math.log2(Math.max(1, maxVthreads))), k = 0; bits > 0 && axes.length > 0; bits--, k++) caps[axes[k % axes.length]] *= 2
  return caps
}
