// rewrite.AlterLayout's pooling rule and the PoolNCHWc compute: a conv followed by max or average
// pooling (random window, stride, padding, dilation, ceil mode, count_include_pad; or global max /
// average pooling, the window the whole image) moves into the blocked layout as PoolNCHWc — the
// rewritten graph evaluates as the original, and compiled (tensor expression, schedule, js) the
// blocked pooling computes what its reference kernel does.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attr } from "../../src/ast/graph/attrs.js"
import { prng } from "../../src/ast/graph/arbitrary.js"
import { arbModelGraphCase } from "../../src/ast/graph/arbitrary-models.js"
import { makeGraph, node, type Graph } from "../../src/ast/graph/graph.js"
import { tensor, type Tensor } from "../../src/ast/graph/tensor.js"
import { makeTarget } from "../../src/ast/target.js"
import { compileGraph, loadProgram } from "../../src/pipeline.js"
import { alterLayoutSync } from "../../src/rewrite/alter-layout.js"
import { simplifyInferenceSync } from "../../src/rewrite/simplify-inference.js"
import { assertAllClose, evalGraph, lawParams } from "../support.js"

/** A graph and its inputs. */
interface GraphCase {
  readonly graph: Graph
  readonly inputs: ReadonlyMap<string, Tensor>
}

const arbPoolCase: fc.Arbitrary<GraphCase> = fc.integer({ min: 1, max: 1 << 30 }).map((seed) => {
  const rng = prng(seed)
  const rand = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))
  const C = rng.pick([4, 8])
  const [H, W] = [rng.int(3, 8), rng.int(3, 8)]
  const max = rng.next() < 0.5
  const global = rng.next() < 0.25
  const k = [rng.int(1, 3), rng.int(1, 3)]
  const pads = [rng.int(0, k[0] - 1), rng.int(0, k[1] - 1), rng.int(0, k[0] - 1), rng.int(0, k[1] - 1)]
  const attrs = {
    kernel_shape: attr.ints(k),
    strides: attr.ints([rng.int(1, 2), rng.int(1, 2)]),
    pads: attr.ints(pads),
    ...(rng.next() < 0.3 ? { ceil_mode: attr.int(1) } : {}),
    ...(max && rng.next() < 0.3 ? { dilations: attr.ints([rng.int(1, 2), 1]) } : {}),
    ...(!max && rng.next() < 0.5 ? { count_include_pad: attr.int(1) } : {}),
  }
  const graph = makeGraph({
    opset: 13,
    inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 3, H, W] } }],
    outputs: [{ name: "y", type: { dtype: "float32", shape: [] } }],
    initializers: new Map([["w", rand([C, 3, 3, 3])]]),
    nodes: [
      node("Conv", ["x", "w"], ["c"], { pads: attr.ints([1, 1, 1, 1]), kernel_shape: attr.ints([3, 3]) }),
      global ? node(max ? "GlobalMaxPool" : "GlobalAveragePool", ["c"], ["y"]) : node(max ? "MaxPool" : "AveragePool", ["c"], ["y"], attrs),
    ],
  })
  return { graph, inputs: new Map([["x", rand([1, 3, H, W])]]) }
})

describe("alterLayout: pooling in the blocked layout", () => {
  it("Conv → MaxPool / AveragePool / GlobalMaxPool / GlobalAveragePool becomes PoolNCHWc, and evaluates as before", () => {
    fc.assert(
      fc.property(arbPoolCase, ({ graph, inputs }) => {
        const after = alterLayoutSync(graph, { vectorLanes: 4 })
        expect(after.nodes.map((n) => n.op)).toContain("PoolNCHWc")
        // the rewrite saturates: at most the one Identity that keeps the output's name
        expect(after.nodes.filter((n) => n.op === "Identity").length).toBeLessThanOrEqual(1)
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs), 1e-5, 1e-6)
      }),
      lawParams(60),
    )
  })

  it("compiled PoolNCHWc (js) computes what the evaluator does", async () => {
    await fc.assert(
      fc.asyncProperty(arbPoolCase, async ({ graph, inputs }) => {
        const program = await Effect.runPromise(compileGraph(graph, makeTarget("js", { vectorLanes: 4 }), { optLevel: 3 }))
        const pool = program.kernels.find((k) => k.kind === "compiled" && program.fused.groups[k.group].ops.includes("PoolNCHWc"))
        expect(pool, "the blocked pooling group is compiled").toBeDefined()
        const exec = await Effect.runPromise(loadProgram(program, makeTarget("js")))
        assertAllClose([...exec.run(inputs).values()], evalGraph(graph, inputs), 1e-5, 1e-6)
      }),
      lawParams(25),
    )
  }, 120_000)
})

// rewrite.AlterLayout's dense rule and the DensePack compute: a Gemm of a few rows with a constant
// weight (random rows, inner and output sizes, columns a multiple of the panel or not, transposed
// weight, alpha, a bias of shape [N], [1, N] or [M, N] or none) takes its weight in column panels —
// the rewritten graph evaluates as the original, and compiled (js) DensePack computes what the
// evaluator does.
const arbDenseCase: fc.Arbitrary<GraphCase & { readonly lanes: number }> = fc.integer({ min: 1, max: 1 << 30 }).map((seed) => {
  const rng = prng(seed)
  const rand = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))
  const lanes = rng.pick([8, 16])
  const [M, K, N] = [rng.int(1, 8), rng.int(1, 40), rng.int(2 * lanes, 5 * lanes)]
  const transB = rng.next() < 0.5
  const bias = rng.pick(["none", "row", "vector", "matrix"] as const)
  const biasShape = bias === "row" ? [1, N] : bias === "vector" ? [N] : [M, N]
  const initializers = new Map<string, Tensor>([["w", rand(transB ? [N, K] : [K, N])]])
  if (bias !== "none") initializers.set("c", rand(biasShape))
  const graph = makeGraph({
    opset: 13,
    inputs: [{ name: "x", type: { dtype: "float32", shape: [M, K] } }],
    outputs: [{ name: "y", type: { dtype: "float32", shape: [] } }],
    initializers,
    nodes: [
      node("Gemm", bias === "none" ? ["x", "w"] : ["x", "w", "c"], ["y"], {
        ...(transB ? { transB: attr.int(1) } : {}),
        ...(rng.next() < 0.3 ? { alpha: attr.float(rng.float(0.5, 2)) } : {}),
      }),
    ],
  })
  return { graph, inputs: new Map([["x", rand([M, K])]]), lanes }
})

/** Gemm canonicalized (transposes and alpha folded into the constant weight), then the layout pass. */
const optimize = (graph: Graph, lanes: number): Graph => alterLayoutSync(simplifyInferenceSync(graph), { vectorLanes: lanes })

describe("alterLayout: dense layers over packed weights", () => {
  it("a Gemm of a few rows becomes DensePack, and evaluates as before", () => {
    fc.assert(
      fc.property(arbDenseCase, ({ graph, inputs, lanes }) => {
        const after = optimize(graph, lanes)
        expect(after.nodes.map((n) => n.op)).toContain("DensePack")
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs), 1e-5, 1e-5)
      }),
      lawParams(60),
    )
  })

  it("compiled DensePack (js) computes what the evaluator does", async () => {
    await fc.assert(
      fc.asyncProperty(arbDenseCase, async ({ graph, inputs, lanes }) => {
        const program = await Effect.runPromise(compileGraph(graph, makeTarget("js", { vectorLanes: lanes }), { optLevel: 3 }))
        const dense = program.kernels.find((k) => k.kind === "compiled" && program.fused.groups[k.group].ops.includes("DensePack"))
        expect(dense, "the packed dense group is compiled").toBeDefined()
        const exec = await Effect.runPromise(loadProgram(program, makeTarget("js")))
        assertAllClose([...exec.run(inputs).values()], evalGraph(graph, inputs), 1e-5, 1e-5)
      }),
      lawParams(25),
    )
  }, 120_000)
})

// rewrite.AlterLayout on model-like conv nets (arbitrary-models.ts): 3 to 32 channels against 4,
// 8 and 16 lanes (several blocks per tensor), convs and pools with stride 2 and uneven strides,
// asymmetric and zero pads, auto_pad, dilation, ceil_mode, depthwise and grouped convs, residual
// adds, squeeze-excite broadcasts and siblings — the blocked graph evaluates as the original, and
// compiled (js) it computes what the evaluator does.
const arbConvNet = fc.tuple(
  arbModelGraphCase({ stems: ["image"], motifs: ["conv-bn-act", "residual", "squeeze-excite", "pool", "broadcast", "siblings", "head", "split"], islands: false, maxMotifs: 4 }),
  fc.constantFrom(4, 8, 16),
)

/** The blocked convs of a graph with ≥ 2 blocks in or out ([N, C/b, H, W, b]). */
const multiBlockConvs = (g: Graph) =>
  g.nodes.filter((n) => {
    if (n.op !== "ConvNCHWc") return false
    const x = g.valueTypes.get(n.inputs[0])?.shape ?? []
    const y = g.valueTypes.get(n.outputs[0])?.shape ?? []
    return (x[1] as number) >= 2 || (y[1] as number) >= 2
  })
const strided = (n: Graph["nodes"][number]) => n.attrs.strides?.kind === "ints" && n.attrs.strides.value.some((s) => s !== 1)

describe("alterLayout: model-like conv nets", () => {
  it("the blocked graph evaluates as the original (several blocks, strides, pads, auto_pad, dilation)", () => {
    let multi = 0
    let multiStrided = 0
    fc.assert(
      fc.property(arbConvNet, ([{ graph, inputs }, lanes]) => {
        const after = alterLayoutSync(graph, { vectorLanes: lanes })
        const convs = multiBlockConvs(after)
        multi += convs.length
        multiStrided += convs.filter(strided).length
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs))
      }),
      lawParams(60),
    )
    // the cases reach convs of several vector blocks, strided ones too
    expect(multi).toBeGreaterThan(20)
    expect(multiStrided).toBeGreaterThan(5)
  })

  it("compiled (js, the blocked layout of the case's lanes) computes what the evaluator does", async () => {
    await fc.assert(
      fc.asyncProperty(arbConvNet, async ([{ graph, inputs }, lanes]) => {
        const target = makeTarget("js", { vectorLanes: lanes })
        const exec = await Effect.runPromise(loadProgram(await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 })), target))
        const got = exec.run(inputs)
        assertAllClose(graph.outputs.map((o) => got.get(o.name)!), evalGraph(graph, inputs))
      }),
      lawParams(8),
    )
  }, 120_000)
})
