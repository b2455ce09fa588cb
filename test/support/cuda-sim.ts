// cuda-sim: a model compiled with the cuda target's GPU schedules (cudaSchedules at a CudaAttrs
// record, the default graph passes: no blocked layout) and its TIR pipeline (warp shuffles, lane
// guards hoisted, storage flattened), and run without a GPU — every kernel statically verified
// against the record (verifyGpuFunc on the lowered function, then the emitter's launch checks as
// it renders the CUDA C the artifact would hold), then run by the TIR evaluator with its thread
// teams, barriers, warp shuffles and shared memory through the executor (planned buffers, fallback
// groups on the host). What CI checks of the GPU schedules; a GPU run is the cuda device's.
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
import { cudaTirPipeline } from "../../src/lowering/tir/cuda-pipeline.js"
import { emitCuda } from "../../src/emit/cuda/emit.js"
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
    const feeds = new Map<string, Tensor>(
      f.params.map((p, k) => {
        const shape = p.view?.shape ?? p.shape
        return [p.name, tensor(p.dtype, shape, args[k].subarray(0, shape.reduce((a, b) => a * b, 1)) as TypedArray)]
      }),
    )
    const out = evaluatePrimFunc(f, feeds)
    f.params.forEach((p, k) => args[k].set(out.get(p.name)!.data as ArrayLike<number> as never))
  }

/** The program of a graph under the GPU schedules and the cuda TIR pipeline; throws GpuVerifyError on a kernel that does not verify (before or after the pipeline) or that the emitter cannot render. */
export const compileCudaSim = (graph: Graph, shapes: ReadonlyMap<string, readonly number[]> = new Map(), attrs: CudaAttrs = H100): Program => {
  const bound = Effect.runSync(bind(graph, shapes as never, { requireStatic: true }))
  const planned = Effect.runSync(graphPipeline().run(bound))
  const l = gpuLimits(attrs)
  for (const k of lowerGroups(planned, tirPass("lowering.None", 0, (f) => f), cudaSchedules(attrs))) {
    if (k.kind !== "compiled") continue
    const v = verifyGpuFunc(k.func, l)
    if (v.problems.length) throw new GpuVerifyError(`${k.name}: ${v.problems.join("; ")}`)
  }
  const kernels = lowerGroups(planned, cudaTirPipeline(attrs), cudaSchedules(attrs))
  const program: Program = { graph: planned.graph, fused: { graph: planned.graph, groups: planned.groups }, memory: planned.memory, kernels }
  cudaSimSource(program, attrs)
  return program
}

/** The CUDA C of a cuda-sim program's kernels (what its artifact's tessera_kernels.cu holds); throws GpuVerifyError where the emitter refuses a launch. */
export const cudaSimSource = (program: Program, attrs: CudaAttrs = H100): string => {
  const funcs = program.kernels.flatMap((k) => (k.kind === "compiled" ? [k.func] : []))
  try {
    return emitCuda(funcs, attrs).source
  } catch (e) {
    throw new GpuVerifyError(e instanceof Error ? e.message : String(e))
  }
}

/** Runs a cuda-sim program on feeds: its outputs by name. */
export const runCudaSim = (program: Program, feeds: ReadonlyMap<string, Tensor>): Map<string, Tensor> => {
  const kernels = new Map(program.kernels.flatMap((k) => (k.kind === "compiled" ? [[k.name, simulated(k.func)] as const] : [])))
  // (the module is the js device's kind of host memory; its kernels are the simulations)
  const exec = createExecutor(program, hostModule("js", kernels))
  return exec.run(feeds)
}
