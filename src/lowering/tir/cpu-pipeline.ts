// The TIR pipeline of the CPU targets (c, js, wasm): one named pass per line, in order, verified
// between passes, and at its end against what the c, js and wasm emitters assume.
import type { TirExpect } from "../../ast/tir/verify.js"
import type { VerifyError } from "../../rewrite/pass.js"
import type { InterruptedError } from "../../ast/graph/errors.js"
import { flattenStorage, type StorageAligns } from "./flatten-storage.js"
import { injectVirtualThread } from "./inject-virtual-thread.js"
import { loopPartition } from "./loop-partition.js"
import { lowerIntrinsicsExcept, type IntrinsicModeError } from "./lower-intrinsics.js"
import { prefetchNextTile } from "./prefetch-next-tile.js"
import { promoteAccumulators } from "./promote-accumulators.js"
import { rewriteStorage } from "./rewrite-storage.js"
import { parallelChunks, serialSmallKernels } from "./serial-small-kernels.js"
import { serializeUnsharedUnrolls } from "./serialize-unshared-unrolls.js"
import { simplifyTir } from "./simplify-tir.js"
import { tirSequential, type TirPass } from "./tir-pass.js"
import { unrollLoops } from "./unroll-loops.js"
import { vectorizeLoops } from "./vectorize-loops.js"

export interface CpuTirOptions {
  /** storageAlign of buffers whose strides lowering did not set. */
  readonly aligns?: StorageAligns
  /** Widest vectorized loop kept (lanes). */
  readonly maxVectorLanes?: number
  /** Longest unrolled loop copied. */
  readonly maxUnroll?: number
  /** Unrolled reduction loops whose copies share no load become serial first (the wasm target: serialize-unshared-unrolls.ts). */
  readonly unrollSharedOnly?: boolean
  /** Intrinsics the emitter renders itself (the c target's VNNI dot): kept, not lowered to loops. */
  readonly keepIntrinsics?: ReadonlySet<string>
  /** Kernels whose params take fewer bytes run their parallel loops serially (serial-small-kernels.ts); absent: none. */
  readonly parallelMinBytes?: number
  /** Kernels whose params take fewer bytes run each parallel loop in one chunk a thread (lowering.ParallelChunks, serial-small-kernels.ts; the c pool); absent: none. */
  readonly oneChunkMaxBytes?: number
  /** Read-only params over `minBytes` get their parallel loops' next slabs of up to half `maxSlabBytes` prefetched (prefetch-next-tile.ts; the c target: its record's L1 and L2); absent: none. */
  readonly prefetch?: { readonly minBytes: number; readonly maxSlabBytes: number }
}

/**
 * What the c, js and wasm emitters assume of a PrimFunc: flat storage, no intrinsic statement, and
 * only the loop kinds VectorizeLoops and UnrollLoops leave; thread loops (run serially) of known bounds.
 */
export const cpuEmitterAssumes = (maxVectorLanes = 64, maxUnroll = 16, noIntrinsics = true): TirExpect => ({ threadExtentsKnown: true, flat: true, ...(noIntrinsics ? { noIntrinsics } : {}), maxVectorLanes, maxUnroll })

export const cpuTirPipeline = (options: CpuTirOptions = {}): TirPass<IntrinsicModeError | VerifyError | InterruptedError> => {
  const lanes = options.maxVectorLanes ?? 64
  const unroll = options.maxUnroll ?? 16
  const keep = options.keepIntrinsics ?? new Set<string>()
  return tirSequential(
    "lowering.CpuPipeline",
    [
      ...(options.parallelMinBytes ? [serialSmallKernels(options.parallelMinBytes)] : []), // kernels too small for a parallel region: serial
      ...(options.oneChunkMaxBytes ? [parallelChunks(options.oneChunkMaxBytes)] : []), // (c) kernels of short regions: one chunk a thread
      simplifyTir, // fold index arithmetic under the loop bounds; drop proven guards
      promoteAccumulators, // a register tile's sums in a local array across its reduce loops
      loopPartition, // peel a guarded tail so the main loop body has no guard
      vectorizeLoops(lanes), // keep vectorized loops a vector unit can run; the rest serial
      ...(options.unrollSharedOnly ? [serializeUnsharedUnrolls] : []), // (wasm) unrolled reductions whose copies share no load: serial
      unrollLoops(unroll), // unrolled loops of constant extent become their copies
      injectVirtualThread, // vthread copies interleaved statement by statement
      flattenStorage(options.aligns), // multi-dimensional buffers → flat buffers through strides
      rewriteStorage, // allocations whose lifetimes do not overlap share one buffer
      simplifyTir, // fold the flat indices
      lowerIntrinsicsExcept(keep), // intrinsic calls become their declared loop nests (but those the emitter renders)
      ...(options.prefetch ? [prefetchNextTile(options.prefetch.minBytes, options.prefetch.maxSlabBytes)] : []), // (c) a streamed slab's successor fetched through its steps
    ],
    // lowering gives thread loops constant bounds (split factors); every pass keeps them
    { assumes: { threadExtentsKnown: true }, provides: cpuEmitterAssumes(lanes, unroll, keep.size === 0) },
  )
}
