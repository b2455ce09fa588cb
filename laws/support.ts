// Shared helpers of the laws: evaluation, the ONNX-style closeness check, small integer inputs
// and "a schedule computes what its TE says".
import * as fc from "fast-check"
import { prng } from "../src/ast/graph/arbitrary.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import type { Graph } from "../src/ast/graph/graph.js"
import { fromArray, sizeOf, type Tensor } from "../src/ast/graph/tensor.js"
import type { Schedule } from "../src/ast/schedule/schedule.js"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { freeVars, type Expr } from "../src/ast/te/expr.js"
import type { Interval } from "../src/ast/te/simplify.js"
import type { Placeholder, TeTensor } from "../src/ast/te/tensor.js"
import { evaluatePrimFunc } from "../src/ast/tir/evaluate.js"
import { lowerSync } from "../src/lowering/lower.js"

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

/** Each placeholder filled with seeded integers in [-4, 4] (sums of them are exact in float32). */
export const smallIntInputs = (seed: number, ps: readonly Placeholder[]): Map<string, Tensor> => {
  const rng = prng(seed)
  return new Map(ps.map((p) => [p.name, fromArray(p.dtype, p.shape, Array.from({ length: sizeOf(p.shape) }, () => rng.int(-4, 4)))]))
}

/** The schedule, lowered and run by the TIR evaluator, computes what the TE says of `outputs`. */
export const assertLowersToTE = (s: Schedule, inputs: ReadonlyMap<string, Tensor>, tol = 0, outputs: readonly TeTensor[] = s.outputs): void => {
  const want = evaluateTE(outputs, inputs)
  const got = evaluatePrimFunc(lowerSync(s), inputs)
  assertAllClose(outputs.map((o) => got.get(o.name)!), want, tol, tol)
}

/** Every assignment of the variables `e` uses, within the box. */
export const boxPoints = (e: Expr, box: ReadonlyMap<string, Interval>): Map<string, number>[] => {
  let out: Map<string, number>[] = [new Map()]
  for (const n of [...freeVars(e)].sort()) {
    const { min, max } = box.get(n)!
    out = out.flatMap((p) => Array.from({ length: max - min + 1 }, (_, k) => new Map(p).set(n, min + k)))
  }
  return out
}
