// cuda-sim: a model compiled with the cuda target's GPU schedules (cudaSchedules at a CudaAttrs
// record, the default graph passes: no blocked layout) and run without a GPU — every kernel
// statically verified against the record (verifyGpuFunc), then run by the TIR evaluator with its
// thread teams, barriers and shared memory through the executor (planned buffers, fallback groups
// on the host). What CI checks of the GPU schedules; a GPU run is the cuda device's.
import { Effect } from "effect"
import type { Graph } from "../../src/ast/graph/graph.js"
import { bind } from "../../src/ast/graph/infer.js"
import { tensor, type Tensor } from "../../src/ast/graph/tensor.js"
import type { TypedArray } from "../../src/ast/graph/dtype.js"
import { cudaAttrs, type CudaAttrs } from "../../src/ast/target.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import type { PrimFunc } from "../../src/ast/tir/tir.js"
import { hostModule } from "../../src/device/device.js"
import { createExecutor } from "../../src/device/executor.js"
import { lowerGroups } from "../../src/lowering/lower-group.js"
import type { Program } from "../../src/lowering/program.js"
import { cudaSchedules, gpuLimits, verifyGpuFunc } from "../../src/lowering/templates/gpu/index.js"
import { tirPass } from "../../src/lowering/tir/tir-pass.js"
import { graphPipeline } from "../../src/rewrite/index.js"

/** The H100 (sm_90, 132 SMs) the schedules are made for unless told otherwise. */
export const H100: CudaAttrs = cudaAttrs("9.0", 132)

/** A kernel that fails the GPU verifier: the group, and what breaks. */
export class GpuVerifyError extends Error {
  override readonly name = "GpuVerifyError"
}

/** A PrimFunc as a host kernel: its params (inputs then outputs, as the executor passes them) run by the TIR evaluator. */
const simulated =
  (f: PrimFunc) =>
  (...args: TypedArray[]): void => {
    const feeds = new Map<string, Tensor>(f.params.map((p, k) => [p.name, tensor(p.dtype, p.shape, args[k].subarray(0, p.shape.reduce((a, b) => a * b, 1)) as TypedArray)]))
    const out = evaluatePrimFunc(f, feeds)
    f.params.forEach((p, k) => args[k].set(out.get(p.name)!.data as ArrayLike<number> as never))
  }

/** The program of a graph under the GPU schedules (no TIR passes: the lowered functions as the verifier and the emitter see them); throws GpuVerifyError on a kernel that does not verify. */
export const compileCudaSim = (graph: Graph, shapes: ReadonlyMap<string, readonly number[]> = new Map(), attrs: CudaAttrs = H100): Program => {
  const bound = Effect.runSync(bind(graph, shapes as never, { requireStatic: true }))
  const planned = Effect.runSync(graphPipeline().run(bound))
  const kernels = lowerGroups(planned, cudaSchedules(attrs), tirPass("lowering.None", 0, (f) => f))
  const l = gpuLimits(attrs)
  for (const k of kernels) {
    if (k.kind !== "compiled") continue
    const v = verifyGpuFunc(k.func, l)
    if (v.problems.length) throw new GpuVerifyError(`${k.name}: ${v.problems.join("; ")}`)
  }
  return { graph: planned.graph, fused: { graph: planned.graph, groups: planned.groups }, memory: planned.memory, kernels }
}

/** Runs a cuda-sim program on feeds: its outputs by name. */
export const runCudaSim = (program: Program, feeds: ReadonlyMap<string, Tensor>): Map<string, Tensor> => {
  const kernels = new Map(program.kernels.flatMap((k) => (k.kind === "compiled" ? [[k.name, simulated(k.func)] as const] : [])))
  // (the module is the js device's kind of host memory; its kernels are the simulations)
  const exec = createExecutor(program, hostModule("js", kernels))
  return exec.run(feeds)
}
