// The layout rewrite of constant weights (rewrite.AlterLayout's dense-to-packed rule,
// src/rewrite/pack-dense.ts): products over a constant B [K, N] — MatMul of 2-D, batched [b, M, K]
// and [b1, b2, M, K] operands, Gemm (transposed B, alpha, C of shape [N], [1, N] or [M, N], canonical
// or as written) — of random rows, inner sizes and columns (the panel dividing them or not), on
// random register files (lanes 4, 8, 16; FMA pipes 1–2 × latency 3–5; 16 or 32 registers). The
// rewritten graph evaluates as the original; a product is packed exactly when it is packable
// (DensePack for a few rows, MatMulPacked for more, in panels of the matmul register tile's width
// for its rows and columns); and compiled (js, and c where gcc is) it computes what the evaluator
// does. Products it must leave stand beside them: float64, a computed B, a batch of unknown size,
// one row a batch, a product of two computed operands.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attr } from "../../src/ast/graph/attrs.js"
import { prng } from "../../src/ast/graph/arbitrary.js"
import { makeGraph, node, type Graph, type Node } from "../../src/ast/graph/graph.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import { tensor, type Tensor } from "../../src/ast/graph/tensor.js"
import { matmulRegisterTile, type RegisterFile } from "../../src/ast/register-tile.js"
import { makeTarget, type Isa } from "../../src/ast/target.js"
import { compileGraph, loadProgram } from "../../src/pipeline.js"
import { alterLayoutSync } from "../../src/rewrite/alter-layout.js"
import { simplifyInferenceSync } from "../../src/rewrite/simplify-inference.js"
import { assertAllClose, evalGraph, lawParams } from "../support.js"
import { HAVE_GCC, mergeGraphs, NO_GCC } from "../support-c.js"

/** A product case: its graph and inputs, the register file it is rewritten for, and what the rule must make of it. */
interface PackCase {
  readonly graph: Graph
  readonly inputs: ReadonlyMap<string, Tensor>
  readonly target: RegisterFile & { readonly isa: Isa }
  /** "dense": DensePack; "packed": MatMulPacked over panels of `panel`; "none": left as it is. */
  readonly expect: "dense" | "packed" | "none"
  readonly panel: number
}

const ISA_OF_LANES: Record<number, Isa> = { 4: "sse", 8: "avx2", 16: "avx512" }
const REGISTERS_OF_LANES: Record<number, number> = { 4: 16, 8: 16, 16: 32 }

/**
 * A random product and what the rule must make of it, derived here from the rule's statement (not
 * from its code): for 8 or more lanes, float32, B constant and 2-D, A of static shape; a 2-D A of
 * at most 8 rows → DensePack where N holds two vectors; else at least two rows a batch → MatMulPacked
 * where the register tile's columns for M × N are whole vectors and fewer than N.
 */
const packCase = (seed: number): PackCase => {
  const rng = prng(seed)
  const lanes = rng.pick([4, 8, 8, 16, 16])
  const target = { vectorLanes: lanes, isa: ISA_OF_LANES[lanes], fmaUnits: rng.int(1, 2), fmaLatency: rng.int(3, 5), vectorRegisters: REGISTERS_OF_LANES[lanes] }
  const gemm = rng.next() < 0.3
  const batch = gemm ? [] : rng.pick([[], [], [rng.int(1, 3)], [rng.int(1, 2), rng.int(1, 3)]])
  // (a batch of unknown size where there is a batch)
  const leave = rng.next() < 0.2 ? rng.pick(batch.length ? (["f64", "computed", "symbolic", "both-computed"] as const) : (["f64", "computed", "both-computed"] as const)) : undefined
  const f64 = leave === "f64"
  const rand = (shape: number[]) => {
    const data = Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1))
    return f64 ? tensor("float64", shape, Float64Array.from(data)) : tensor("float32", shape, Float32Array.from(data))
  }
  const dtype = f64 ? "float64" : "float32"
  const M = rng.pick([1, rng.int(2, 8), rng.int(9, 40), rng.int(2, 70)])
  const K = rng.int(1, 24)
  const N = rng.pick([rng.int(1, 40), rng.int(2 * lanes, 6 * lanes), rng.int(60, 200), 64 * rng.int(2, 3)])
  const xShape = [...batch, M, K]
  const transB = gemm && rng.next() < 0.4
  const initializers = new Map<string, Tensor>([[leave === "computed" ? "w0" : "w", rand(transB ? [N, K] : [K, N])]])
  const nodes: Node[] = leave === "computed" ? [node("Abs", ["w0"], ["w"])] : []
  const inputs = new Map<string, Tensor>([["x", rand(xShape)]])
  const graphInputs: { name: string; type: { dtype: "float32" | "float64"; shape: (number | string)[] } }[] = [{ name: "x", type: { dtype, shape: leave === "symbolic" ? ["B", ...xShape.slice(1)] : xShape } }]
  if (leave === "both-computed") {
    // (B an input: a product of two computed operands, attention's)
    const wShape = transB ? [N, K] : [K, N]
    initializers.clear()
    inputs.set("w", rand(wShape))
    graphInputs.push({ name: "w", type: { dtype, shape: wShape } })
  }
  const bias = rng.pick(["none", "vector", "row", "matrix"] as const)
  if (gemm) {
    if (bias !== "none") initializers.set("c", rand(bias === "vector" ? [N] : bias === "row" ? [1, N] : [M, N]))
    nodes.push(node("Gemm", bias === "none" ? ["x", "w"] : ["x", "w", "c"], ["y"], { ...(transB ? { transB: attr.int(1) } : {}), ...(rng.next() < 0.3 ? { alpha: attr.float(rng.float(0.5, 2)) } : {}) }))
  } else if (bias === "none") nodes.push(node("MatMul", ["x", "w"], ["y"]))
  else {
    // a linear layer's bias and activation after the product (the fuser's epilogue)
    initializers.set("c", rand([N]))
    nodes.push(node("MatMul", ["x", "w"], ["p"]), node("Add", ["p", "c"], ["q"]), node(rng.pick(["Relu", "Gelu", "Identity"]), ["q"], ["y"]))
  }
  const graph = makeGraph({ opset: 20, inputs: graphInputs, outputs: [{ name: "y", type: { dtype, shape: [] } }], initializers, nodes })
  const panel = matmulRegisterTile(target, M, N).cols
  const packable = lanes >= 8 && !leave
  const expect = !packable ? "none" : xShape.length === 2 && M <= 8 ? (N >= 2 * lanes ? "dense" : "none") : M >= 2 && panel % lanes === 0 && N > panel ? "packed" : "none"
  return { graph, inputs, target, expect, panel }
}

const arbPackCase = fc.integer({ min: 1, max: 1 << 30 }).map(packCase)

/** The packed products of a graph: [op, panel width] each. */
const packedOf = (g: Graph): [string, number][] =>
  g.nodes.filter((n) => n.op === "DensePack" || n.op === "MatMulPacked").map((n) => [n.op, g.initializers.get(n.inputs[1])!.shape[2]])

describe("the layout rewrite of constant weights (dense-to-packed)", () => {
  it("packs a product exactly when it is packable, in panels of the register tile's width (DensePack: of the lanes), and the graph evaluates as before", () => {
    const seen = { dense: 0, packed: 0, none: 0 }
    fc.assert(
      fc.property(arbPackCase, fc.boolean(), ({ graph, inputs, target, expect: want, panel }, canonical) => {
        // (a Gemm as written packs only where it is canonical already; canonicalized, transposes and alpha are folded into B)
        const g = canonical ? simplifyInferenceSync(graph) : bindSync(graph)
        const gemm = graph.nodes.find((n) => n.op === "Gemm")
        const written = gemm && !canonical && (gemm.attrs.transB !== undefined || gemm.attrs.alpha !== undefined)
        const after = alterLayoutSync(g, target)
        const packed = packedOf(after)
        const wanted = written ? "none" : want
        seen[wanted]++
        expect(packed).toEqual(wanted === "none" ? [] : [[wanted === "dense" ? "DensePack" : "MatMulPacked", wanted === "dense" ? target.vectorLanes : panel]])
        if (wanted === "packed") expect(panel % target.vectorLanes).toBe(0)
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs), 1e-5, 1e-5)
      }),
      lawParams(200),
    )
    // the cases reach every outcome
    expect(Math.min(seen.dense, seen.packed, seen.none)).toBeGreaterThan(15)
  })

  it("compiled (js, the case's register file) computes what the evaluator does", async () => {
    let packed = 0
    await fc.assert(
      fc.asyncProperty(arbPackCase, async ({ graph, inputs, target, expect: want }) => {
        const t = makeTarget("js", { isa: target.isa, vectorLanes: target.vectorLanes, fmaUnits: target.fmaUnits, fmaLatency: target.fmaLatency })
        const program = await Effect.runPromise(compileGraph(graph, t, { optLevel: 3 }))
        const group = program.kernels.find((k) => k.kind === "compiled" && program.fused.groups[k.group].ops.includes("MatMulPacked"))
        expect(!!group).toBe(want === "packed")
        if (group) packed++
        const exec = await Effect.runPromise(loadProgram(program, makeTarget("js")))
        assertAllClose([...exec.run(inputs).values()], evalGraph(graph, inputs), 1e-4, 1e-5)
      }),
      lawParams(40),
    )
    expect(packed).toBeGreaterThan(5)
  }, 300_000)

  it.skipIf(!HAVE_GCC)(`compiled to C (batches of cases, one gcc run each) computes what the evaluator does${NO_GCC}`, async () => {
    for (const lanes of [8, 16]) {
      const cases = Array.from({ length: 60 }, (_, k) => packCase(lanes * 1000 + k)).filter((c) => c.target.vectorLanes === lanes && c.expect === "packed" && c.graph.inputs.length === 1)
      expect(cases.length).toBeGreaterThan(4)
      const { graph, inputs } = mergeGraphs(cases)
      const target = makeTarget("c", { vectorLanes: lanes, isa: ISA_OF_LANES[lanes], fmaUnits: cases[0].target.fmaUnits, fmaLatency: cases[0].target.fmaLatency })
      const program = await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 }))
      expect(program.graph.nodes.filter((n) => n.op === "MatMulPacked").length).toBeGreaterThan(0)
      const exec = await Effect.runPromise(loadProgram(program, target))
      const got = exec.run(inputs)
      assertAllClose(graph.outputs.map((o) => got.get(o.name)!), evalGraph(graph, inputs), 1e-4, 1e-4)
      exec.module.close()
    }
  }, 600_000)
})
