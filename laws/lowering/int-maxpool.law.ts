// An integer MaxPool with padding (src/lowering/op-library.ts, maxPoolPadded): the input copied into
// a padded plane holding the type's least value, the window read from it without bounds tests. On
// random shapes, kernels, asymmetric pads, strides, dilations and ceil_mode, int8 and uint8 (whose
// values reach the type's least value, which a window of padding and such values must keep), the
// whole compiler for the js target equals the reference evaluator exactly, and the kernel holds
// the padded plane (the form the law is about, not the bounds-tested one).
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attr } from "../../src/ast/graph/attrs.js"
import type { DType } from "../../src/ast/graph/dtype.js"
import { runGraph } from "../../src/ast/graph/evaluate.js"
import { makeGraph, node } from "../../src/ast/graph/graph.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import { fromArray } from "../../src/ast/graph/tensor.js"
import { makeTarget } from "../../src/ast/target.js"
import { compileGraph, loadProgram } from "../../src/pipeline.js"
import { assertAllClose, lawParams } from "../support.js"
import { range, stream } from "./int8-cases.js"

const arbCase = fc.record({
  dtype: fc.constantFrom<DType>("int8", "uint8"),
  dims: fc.tuple(fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 9 }), fc.integer({ min: 1, max: 9 })),
  kernel: fc.tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 })),
  pads: fc.tuple(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 2 })),
  strides: fc.tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 })),
  dil: fc.tuple(fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 2 })),
  ceil: fc.integer({ min: 0, max: 1 }),
  seed: fc.integer({ min: 1, max: 1 << 30 }),
})

describe("integer MaxPool through the padded plane", () => {
  it("compiled for js equals the evaluator exactly on padded, strided, dilated, ceil-mode windows", async () => {
    await fc.assert(
      fc.asyncProperty(arbCase, async ({ dtype, dims: [N, C, H0, W0], kernel, pads: pads0, strides, dil, ceil, seed }) => {
        // ONNX: each pad smaller than the kernel's reach, the input at least one window
        const reach = [0, 1].map((k) => (kernel[k] - 1) * dil[k] + 1)
        const pads = pads0.map((p, k) => Math.min(p, reach[k % 2] - 1))
        const [H, W] = [Math.max(H0, reach[0]), Math.max(W0, reach[1])]
        const r = stream(seed)
        const [lo, hi] = range(dtype)
        // a third of the values the type's least, so windows of padding and least values occur
        const x = fromArray(dtype, [N, C, H, W], Array.from({ length: N * C * H * W }, () => (r(0, 2) === 0 ? lo : r(lo, hi))))
        const graph = bindSync(
          makeGraph({
            name: "int_maxpool",
            opset: 20,
            inputs: [{ name: "x", type: { dtype, shape: [N, C, H, W] } }],
            outputs: [{ name: "y", type: { dtype, shape: [] } }],
            initializers: new Map(),
            nodes: [node("MaxPool", ["x"], ["y"], { kernel_shape: attr.ints(kernel), pads: attr.ints(pads), strides: attr.ints(strides), dilations: attr.ints(dil), ceil_mode: attr.int(ceil) }, "pool")],
          }),
        )
        const target = makeTarget("js")
        const program = await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 }))
        expect(program.kernels.every((k) => k.kind === "compiled")).toBe(true)
        const padded = pads.some((p) => p > 0)
        expect(JSON.stringify(program.kernels).includes("padded")).toBe(padded)
        const exec = await Effect.runPromise(loadProgram(program, target))
        const inputs = new Map([["x", x]])
        assertAllClose([exec.run(inputs).get("y")!], runGraph(graph, inputs), 0, 0)
      }),
      lawParams(60),
    )
  })
})
