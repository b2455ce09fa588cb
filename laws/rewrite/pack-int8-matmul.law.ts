// The layout rewrite of an integer product's constant B (rewrite.AlterLayout's int8-matmul-to-packed
// rule, src/rewrite/pack-int8.ts): MatMulInteger and QLinearMatMul of random rows, depths, columns
// and batches, int8 or uint8 A and B, B's zero point the shift that makes it s8 (0 for int8 — or
// absent for MatMulInteger —, 128 for uint8) or another value, A's zero point a scalar or (for
// MatMulInteger) absent, B's scale per tensor or per column. A product is packed exactly when the
// rule's statement says so; the rewritten graph evaluates exactly as the original (the packed op's
// meaning is the product over the same s8 values); and compiled (js), the packed compute gives
// exactly what the unpacked compute gives (opt level 3 with the layout pass against 2 without).
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { prng } from "../../src/ast/graph/arbitrary-builder.js"
import { makeGraph, node, type Graph } from "../../src/ast/graph/graph.js"
import { tensor, type Tensor } from "../../src/ast/graph/tensor.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import { makeTarget } from "../../src/ast/target.js"
import { compileGraph, loadProgram } from "../../src/pipeline.js"
import { alterLayoutSync } from "../../src/rewrite/alter-layout.js"
import { evalGraph, lawParams } from "../support.js"

const ints = (dtype: "int8" | "uint8", shape: number[], rng: ReturnType<typeof prng>): Tensor => {
  const data = Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => (dtype === "int8" ? rng.int(-128, 127) : rng.int(0, 255)))
  return tensor(dtype, shape, dtype === "int8" ? Int8Array.from(data) : Uint8Array.from(data))
}
const scalar = (dtype: "int8" | "uint8", v: number) => tensor(dtype, [], dtype === "int8" ? Int8Array.of(v) : Uint8Array.of(v))

const matmulCase = (seed: number): { graph: Graph; inputs: Map<string, Tensor>; packs: boolean } => {
  const rng = prng(seed)
  const q = rng.next() < 0.5
  const adt = rng.pick(["int8", "uint8"] as const)
  const bdt = rng.pick(["int8", "uint8"] as const)
  const [rows, K, N] = [rng.int(1, 5), rng.int(1, 21), rng.pick([rng.int(1, 20), rng.int(17, 40)])]
  const aShape = rng.next() < 0.3 ? [2, rows, K] : [rows, K]
  const shiftOk = rng.next() < 0.8
  const bzpMode = bdt === "int8" ? (shiftOk ? (q ? "zero" : rng.pick(["absent", "zero"] as const)) : "other") : shiftOk ? "128" : "other"
  const init = new Map<string, Tensor>()
  init.set("b", ints(bdt, [K, N], rng))
  if (bzpMode !== "absent") init.set("bzp", scalar(bdt, bzpMode === "zero" ? 0 : bzpMode === "128" ? 128 : bdt === "int8" ? rng.pick([-3, 5]) : rng.pick([0, 100, 131])))
  const azp = q || rng.next() < 0.7
  if (azp) init.set("azp", ints(adt, [], rng))
  let nodes
  let ydt: "int8" | "uint8" | "int32" = "int32"
  if (q) {
    ydt = rng.pick(["int8", "uint8"] as const)
    init.set("as", tensor("float32", [], Float32Array.of(Math.fround(rng.float(0.005, 0.05)))))
    const perColumn = rng.next() < 0.5
    init.set("bs", tensor("float32", perColumn ? [N] : [], Float32Array.from({ length: perColumn ? N : 1 }, () => Math.fround(rng.float(0.002, 0.02)))))
    init.set("ys", tensor("float32", [], Float32Array.of(Math.fround(0.01 * 0.01 * 60 * Math.sqrt(K) * rng.float(0.5, 2)))))
    init.set("yzp", ints(ydt, [], rng))
    nodes = [node("QLinearMatMul", ["a", "as", "azp", "b", "bs", "bzp", "ys", "yzp"], ["y"])]
  } else nodes = [node("MatMulInteger", ["a", "b", azp ? "azp" : "", bzpMode === "absent" ? "" : "bzp"], ["y"])]
  const graph = makeGraph({ opset: 13, inputs: [{ name: "a", type: { dtype: adt, shape: aShape } }], outputs: [{ name: "y", type: { dtype: ydt, shape: [] } }], initializers: init, nodes })
  return { graph, inputs: new Map([["a", ints(adt, aShape, rng)]]), packs: bzpMode !== "other" }
}

const arbCase = fc.integer({ min: 1, max: 1 << 30 }).map(matmulCase)
const LAYOUT = { vectorLanes: 16, fmaUnits: 2, fmaLatency: 4, vectorRegisters: 32 }
const packedCount = (g: Graph): number => g.nodes.filter((n) => n.op === "MatMulIntegerPacked" || n.op === "QLinearMatMulPacked").length

describe("the layout rewrite of an integer product's constant B (int8-matmul-to-packed)", () => {
  it("packs a product exactly when B's zero point makes it s8, and the graph evaluates as before, bit for bit", () => {
    const seen = { packed: 0, left: 0 }
    fc.assert(
      fc.property(arbCase, ({ graph, inputs, packs }) => {
        const after = alterLayoutSync(bindSync(graph), LAYOUT)
        expect(packedCount(after)).toBe(packs ? 1 : 0)
        seen[packs ? "packed" : "left"]++
        const [got] = evalGraph(after, inputs)
        const [want] = evalGraph(graph, inputs)
        expect(got.dtype).toBe(want.dtype)
        expect(got.shape).toEqual(want.shape)
        expect(Array.from(got.data as ArrayLike<number>)).toEqual(Array.from(want.data as ArrayLike<number>))
      }),
      lawParams(60),
    )
    expect(Math.min(seen.packed, seen.left)).toBeGreaterThan(8)
  })

  it("compiled (js), the packed compute equals the unpacked one bit for bit", async () => {
    let packed = 0
    await fc.assert(
      fc.asyncProperty(arbCase, async ({ graph, inputs, packs }) => {
        const t = makeTarget("js", { isa: "avx512", vectorLanes: 16, fmaUnits: 2, fmaLatency: 4 })
        const run = async (optLevel: number) => {
          const program = await Effect.runPromise(compileGraph(graph, t, { optLevel }))
          const exec = await Effect.runPromise(loadProgram(program, makeTarget("js")))
          return { program, out: [...exec.run(inputs).values()][0] }
        }
        const a = await run(3)
        const b = await run(2)
        expect(packedCount(a.program.graph)).toBe(packs ? 1 : 0)
        expect(a.program.kernels.every((k) => k.kind === "compiled")).toBe(true)
        if (packs) packed++
        expect(Array.from(a.out.data as ArrayLike<number>)).toEqual(Array.from(b.out.data as ArrayLike<number>))
      }),
      lawParams(8),
    )
    expect(packed).toBeGreaterThan(3)
  }, 300_000)
})
