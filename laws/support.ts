// Shared helpers of the laws: evaluation and the ONNX-style closeness check.
import * as fc from "fast-check"
import { runGraph } from "../src/ast/graph/evaluate.js"
import type { Graph } from "../src/ast/graph/graph.js"
import type { Tensor } from "../src/ast/graph/tensor.js"

/** Fixed seeds in CI (override with TESSERA_LAW_SEED to explore). */
export const LAW_SEED = Number(process.env.TESSERA_LAW_SEED ?? 20261123)
export const lawParams = <T = unknown>(numRuns: number): fc.Parameters<T> => ({ seed: LAW_SEED, numRuns })

export const evalGraph = (g: Graph, inputs: ReadonlyMap<string, Tensor>): Tensor[] => runGraph(g, inputs)

/** Throws with a readable message unless `got` ≈ `want` (same dtype and shape; |a-b| ≤ atol + rtol·|b|). */
export const assertAllClose = (got: readonly Tensor[], want: readonly Tensor[], rtol = 1e-3, atol = 1e-4): void => {
  if (got.length !== want.length) throw new Error(`${got.length} outputs, expected ${want.length}`)
  got.forEach((g, k) => {
    const w = want[k]
    if (g.dtype !== w.dtype) throw new Error(`output ${k}: dtype ${g.dtype}, expected ${w.dtype}`)
    if (g.shape.join(",") !== w.shape.join(",")) throw new Error(`output ${k}: shape [${g.shape}], expected [${w.shape}]`)
    for (let i = 0; i < w.data.length; i++) {
      const a = g.data[i]
      const b = w.data[i]
      if (Number.isNaN(a) && Number.isNaN(b)) continue
      if (!(Math.abs(a - b) <= atol + rtol * Math.abs(b))) throw new Error(`output ${k}[${i}]: ${a}, expected ${b}`)
    }
  })
}
