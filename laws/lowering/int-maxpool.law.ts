// An integer MaxPool with padding (src/lowering/op-library.ts, maxPoolPadded): the input copied into
// a padded plane holding the type's least value, the window read from it without bounds tests. On
// random shapes, kernels, asymmetric pads, strides, dilations and ceil_mode, int8 and uint8 (whose
// values reach the type's least value, which a window of padding and such values must keep), the
// whole compiler for the js target equals the reference evaluator exactly, and the kernel holds
// the padded plane (the form the law is about, not the bounds-tested one). And the reduction
// template's default row tile for such a pool (templates/reduction.ts, `tileLanes`): where the C
// compiler vectorizes the loops (c) a vector of the pool's own type (an 8-bit one: 4 × the float32
// lanes), elsewhere (js, wasm) the float32 lanes; the c kernel at that tile equals the evaluator.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attr } from "../../src/ast/graph/attrs.js"
import type { DType } from "../../src/ast/graph/dtype.js"
import { runGraph } from "../../src/ast/graph/evaluate.js"
import { makeGraph, node, type Graph } from "../../src/ast/graph/graph.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import { fromArray } from "../../src/ast/graph/tensor.js"
import { makeTarget, type Isa } from "../../src/ast/target.js"
import { tasksOfProgram } from "../../src/search/extract.js"
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

/** A 3×3 MaxPool, pads 1, over [1, C, H, W] of `dtype`. */
const poolGraph = (dtype: DType, [C, H, W]: readonly number[], stride: number): Graph =>
  bindSync(
    makeGraph({
      name: "pool_tile",
      opset: 20,
      inputs: [{ name: "x", type: { dtype, shape: [1, C, H, W] } }],
      outputs: [{ name: "y", type: { dtype, shape: [] } }],
      initializers: new Map(),
      nodes: [node("MaxPool", ["x"], ["y"], { kernel_shape: attr.ints([3, 3]), pads: attr.ints([1, 1, 1, 1]), strides: attr.ints([stride, stride]) }, "pool")],
    }),
  )

/** Elements of an integer type in a float32 lane (what `tileLanes` multiplies the lanes by). */
const PER_LANE: Partial<Record<DType, number>> = { int8: 4, uint8: 4 }
const LANES: Record<"avx512" | "avx2" | "sse", number> = { avx512: 16, avx2: 8, sse: 4 }

describe("integer MaxPool through the padded plane", () => {
  it("takes a row tile of its own type's vector lanes on c and float32's on js / wasm, by default", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          dtype: fc.constantFrom<DType>("int8", "uint8", "float32"),
          isa: fc.constantFrom<"avx512" | "avx2" | "sse">("avx512", "avx2", "sse"),
          kind: fc.constantFrom<"c" | "js" | "wasm">("c", "js", "wasm"),
          hw: fc.tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 2, max: 12 }), fc.integer({ min: 2, max: 130 })),
          stride: fc.integer({ min: 1, max: 2 }),
        }),
        async ({ dtype, isa, kind, hw, stride }) => {
          const target = kind === "wasm" ? makeTarget("wasm") : makeTarget(kind, { isa: isa as Isa })
          const program = await Effect.runPromise(compileGraph(poolGraph(dtype, hw, stride), target, { optLevel: 3 }))
          const tasks = tasksOfProgram(program, target).filter((r) => r.task.template.name === "reduction")
          // (a float pool on a c target with vectors: the layout rewrite's NCHWc pool, a template of its own)
          if (tasks.length === 0) return
          const [r] = tasks
          const inner = r.task.knobs.find((k) => k.name === "tile_inner")
          if (inner?.kind !== "split") throw new Error("the pool's task has no tile_inner")
          const lanes = Math.max(r.target.vectorLanes, 1)
          const vectorizes = kind === "c" && lanes > 1
          const widest = vectorizes ? lanes * (PER_LANE[dtype] ?? 1) : lanes
          const want = [...inner.candidates].reverse().find((d) => d <= widest) ?? 1
          expect(r.task.template.defaults(r.task.knobs, r.target).tile_inner).toBe(want)
          if (kind === "c") expect(lanes).toBe(LANES[isa])
        },
      ),
      lawParams(40),
    )
  })

  it("compiled for c at the byte-lane row tile equals the evaluator exactly", async () => {
    const target = makeTarget("c", { isa: "avx512" })
    for (const [dtype, shape, stride] of [["int8", [3, 12, 112], 2], ["uint8", [2, 9, 120], 1], ["int8", [1, 5, 70], 2]] as const) {
      const graph = poolGraph(dtype, shape, stride)
      const program = await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 }))
      const [r] = tasksOfProgram(program, target).filter((t) => t.task.template.name === "reduction")
      // (the tile the rule takes: wider than the float32 lanes)
      expect(Number(r.task.template.defaults(r.task.knobs, r.target).tile_inner)).toBeGreaterThan(16)
      const exec = await Effect.runPromise(loadProgram(program, target))
      const rr = stream(shape[2] * 7 + stride)
      const [lo, hi] = range(dtype)
      const x = fromArray(dtype, [1, ...shape], Array.from({ length: shape[0] * shape[1] * shape[2] }, () => (rr(0, 3) === 0 ? lo : rr(lo, hi))))
      const inputs = new Map([["x", x]])
      assertAllClose([exec.run(inputs).get("y")!], runGraph(graph, inputs), 0, 0)
    }
  }, 60_000)


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
