// The TIR pipeline of the cuda target: one named pass per line, verified between passes and at its
// end against what the CUDA emitter assumes. Thread-bound loops are kept (the emitter turns them
// into the launch's blockIdx / threadIdx); virtual threads are injected (their copies interleaved
// in one thread); storage is flattened whatever its scope (global, shared, local), so the emitter
// renders every access as one index; vectorized loops are kept up to one access of the widest
// vector a thread loads (maxVectorBytes of fp32: a float4), the rest serial; the cross-thread
// reduction's sums over a block's partials become warp shuffles (lower-thread-allreduce.ts).
import type { CudaAttrs } from "../../ast/target.js"
import type { TirExpect } from "../../ast/tir/verify.js"
import type { VerifyError } from "../../rewrite/pass.js"
import type { InterruptedError } from "../../ast/graph/errors.js"
import { flattenStorage } from "./flatten-storage.js"
import { injectVirtualThread } from "./inject-virtual-thread.js"
import { hoistLaneGuards } from "./hoist-lane-guards.js"
import { loopPartition } from "./loop-partition.js"
import { lowerThreadAllreduce } from "./lower-thread-allreduce.js"
import { lowerIntrinsics, type IntrinsicModeError } from "./lower-intrinsics.js"
import { promoteAccumulators } from "./promote-accumulators.js"
import { rewriteStorage } from "./rewrite-storage.js"
import { simplifyTir } from "./simplify-tir.js"
import { tirSequential, type TirPass } from "./tir-pass.js"
import { unrollLoops } from "./unroll-loops.js"
import { vectorizeLoops } from "./vectorize-loops.js"

/** Longest unrolled loop copied (as the CPU pipeline's: nvcc unrolls further on its own under `#pragma unroll`). */
const MAX_UNROLL = 16

/** fp32 lanes of the widest access one thread makes (a float4 on every capability Tessera knows). */
export const cudaVectorLanes = (attrs: CudaAttrs): number => Math.max(1, Math.floor(attrs.maxVectorBytes / 4))

/** What the CUDA emitter assumes of a PrimFunc: flat storage, no intrinsic statement, thread loops of known bounds. */
export const cudaEmitterAssumes = (attrs: CudaAttrs): TirExpect => ({ threadExtentsKnown: true, flat: true, noIntrinsics: true, maxVectorLanes: cudaVectorLanes(attrs), maxUnroll: MAX_UNROLL })

export const cudaTirPipeline = (attrs: CudaAttrs): TirPass<IntrinsicModeError | VerifyError | InterruptedError> =>
  tirSequential(
    "lowering.CudaPipeline",
    [
      simplifyTir, // fold index arithmetic under the loop bounds (thread extents included); drop proven guards
      hoistLaneGuards, // a vectorized fetch's guard the same for every lane moved outside it
      promoteAccumulators, // a thread's register tile of sums in a local array across its reduce loops
      loopPartition, // peel a guarded tail so the main loop body has no guard
      vectorizeLoops(cudaVectorLanes(attrs)), // vectorized loops up to a float4; the rest serial
      unrollLoops(MAX_UNROLL), // unrolled loops of constant extent become their copies
      injectVirtualThread, // vthread copies interleaved statement by statement in one thread
      flattenStorage(), // global, shared and local buffers → flat buffers through strides
      rewriteStorage, // allocations of one scope whose lifetimes do not overlap share one buffer
      simplifyTir, // fold the flat indices
      lowerIntrinsics, // intrinsic calls become their declared loop nests
      lowerThreadAllreduce, // a block's partials marked thread_allreduce summed by warp shuffles
    ],
    { assumes: { threadExtentsKnown: true }, provides: cudaEmitterAssumes(attrs) },
  )
