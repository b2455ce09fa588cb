// Counterexamples the laws found on the model-like cases (src/ast/graph/arbitrary-models.ts), each
// a named case here, shrunk to the op that was wrong: the compiled program against the evaluator.
import { Effect } from "effect"
import { describe, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { prng } from "../src/ast/graph/arbitrary.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node, type Graph } from "../src/ast/graph/graph.js"
import { tensor, type Tensor } from "../src/ast/graph/tensor.js"
import { makeTarget } from "../src/ast/target.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { assertAllClose } from "../laws/support.js"

const rng = prng(5)
const rand = (shape: number[]): Tensor => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))

/** Compiles `graph` for js (opt level 3, `lanes` vector lanes) and checks it against the evaluator on `inputs`. */
const compiledMatches = async (graph: Graph, inputs: ReadonlyMap<string, Tensor>, lanes = 0) => {
  const target = makeTarget("js", { vectorLanes: lanes })
  const exec = await Effect.runPromise(loadProgram(await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 })), target))
  const got = exec.run(inputs)
  assertAllClose(graph.outputs.map((o) => got.get(o.name)!), runGraph(graph, inputs))
}

describe("counterexamples of the model-like laws", () => {
  // laws/pipeline.law.ts, "windows of conv nets" (shrunk: AveragePool 2×2 stride 2 SAME_UPPER
  // count_include_pad on 5×5): the NCHW AveragePool compute took the end padding from the pads
  // attribute only, so with auto_pad SAME_* (no pads) a window over the end padding counted only
  // its taps inside the input — 2 instead of 4 — and averaged twice too high.
  for (const autoPad of ["SAME_UPPER", "SAME_LOWER"])
    for (const ceil of [0, 1])
      it(`AveragePool 3×2 strides [1, 2], auto_pad ${autoPad}, count_include_pad, ceil_mode ${ceil} counts the padding auto_pad adds at the end`, async () => {
        const graph = makeGraph({
          opset: 18,
          inputs: [{ name: "x", type: { dtype: "float32", shape: [2, 8, 5, 5] } }],
          outputs: [{ name: "y", type: { dtype: "float32", shape: [2, 8, 5, 3] } }],
          nodes: [
            node("AveragePool", ["x"], ["y"], {
              kernel_shape: attr.ints([3, 2]),
              strides: attr.ints([1, 2]),
              auto_pad: attr.str(autoPad),
              ceil_mode: attr.int(ceil),
              count_include_pad: attr.int(1),
            }),
          ],
        })
        await compiledMatches(graph, new Map([["x", rand([2, 8, 5, 5])]]))
      })
})
