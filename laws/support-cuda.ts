// What the cuda laws and tests share: a kernel's launches run by the TIR evaluator one after
// another over the same buffers (the PrimFunc's params and its workspace), as the launcher runs
// them on one stream — the meaning of a split PrimFunc, compared with the TE's.
import type { Tensor } from "../src/ast/graph/tensor.js"
import { evaluatePrimFunc } from "../src/ast/tir/evaluate.js"
import type { KernelLaunches } from "../src/emit/cuda/launch.js"

/** Every buffer after the launches of `k` ran in order on `inputs` (what is not given starts at zero). */
export const evaluateLaunches = (k: KernelLaunches, inputs: ReadonlyMap<string, Tensor>): Map<string, Tensor> => {
  const state = new Map(inputs)
  for (const l of k.launches) for (const [name, t] of evaluatePrimFunc(l.func, state)) state.set(name, t)
  return state
}
