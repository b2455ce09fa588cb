// rewrite.AlterLayout's pooling rule and the PoolNCHWc compute: a conv followed by max or average
// pooling (random window, stride, padding, dilation, ceil mode, count_include_pad; or global max /
// average pooling, the window the whole image) moves into the blocked layout as PoolNCHWc — the
// rewritten graph evaluates as the original, and compiled (tensor expression, schedule, js) the
// blocked pooling computes what its reference kernel does.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attr, type Attrs } from "../../src/ast/graph/attrs.js"
import { arbGraphCase, prng } from "../../src/ast/graph/arbitrary.js"
import { arbModelGraphCase } from "../../src/ast/graph/arbitrary-models.js"
import { makeGraph, node, structurallyEqual, type Graph } from "../../src/ast/graph/graph.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import { tensor, type Tensor } from "../../src/ast/graph/tensor.js"
import { makeTarget } from "../../src/ast/target.js"
import { compileGraph, loadProgram } from "../../src/pipeline.js"
import { TESSERA_DOMAIN } from "../../src/ast/graph/ops/index.js"
import { alterLayout, alterLayoutSync, chooseBlock, paddedBlock } from "../../src/rewrite/alter-layout.js"
import { matmulRegisterTile } from "../../src/ast/register-tile.js"
import { runPass, withPassConfig } from "../../src/rewrite/pass.js"
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
/**
 * A Gemm the rule packs (after canonicalization); `wide`: rows, columns and lanes past its limits
 * too, and Gemms it must leave: float64, A transposed, beta ≠ 1 with a bias (without one it is
 * packed), rows of unknown count, a computed B.
 */
const denseCase = (seed: number, wide = false): GraphCase & { readonly lanes: number } => {
  const rng = prng(seed)
  const [f64, transA, beta, symbolic, computed] = wide ? [rng.next() < 0.15, rng.next() < 0.15, rng.next() < 0.3, rng.next() < 0.1, rng.next() < 0.15] : [false, false, false, false, false]
  const dtype = f64 ? "float64" : "float32"
  const rand = (shape: number[]) => {
    const data = Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1))
    return f64 ? tensor("float64", shape, Float64Array.from(data)) : tensor("float32", shape, Float32Array.from(data))
  }
  const lanes = rng.pick(wide ? [4, 8, 16] : [8, 16])
  const [M0, K0, N] = [rng.int(1, wide ? 10 : 8), rng.int(1, 40), rng.int(wide ? 2 * lanes - 2 : 2 * lanes, 5 * lanes)]
  // (past DensePack's rows, up to 24: a product MatMulPacked takes)
  const M = M0 > 8 ? rng.int(9, 24) : M0
  // (as many inner as output columns or rows at times: a transposed operand then has the shape of an untransposed one)
  const K = wide && rng.next() < 0.5 ? rng.pick([M, N]) : K0
  const transB = rng.next() < 0.5
  const bias = rng.pick(["none", "row", "vector", "matrix"] as const)
  const biasShape = bias === "row" ? [1, N] : bias === "vector" ? [N] : [M, N]
  const initializers = new Map<string, Tensor>([[computed ? "w0" : "w", rand(transB ? [N, K] : [K, N])]])
  if (bias !== "none") initializers.set("c", rand(biasShape))
  const graph = makeGraph({
    opset: 13,
    inputs: [{ name: "x", type: { dtype, shape: transA ? [K, symbolic ? "M" : M] : [symbolic ? "M" : M, K] } }],
    outputs: [{ name: "y", type: { dtype, shape: [] } }],
    initializers,
    nodes: [
      ...(computed ? [node("Abs", ["w0"], ["w"])] : []),
      node("Gemm", bias === "none" ? ["x", "w"] : ["x", "w", "c"], ["y"], {
        ...(transA ? { transA: attr.int(1) } : {}),
        ...(transB ? { transB: attr.int(1) } : {}),
        ...(beta ? { beta: attr.float(rng.float(0.5, 2)) } : {}),
        ...(rng.next() < 0.3 ? { alpha: attr.float(rng.float(0.5, 2)) } : {}),
      }),
    ],
  })
  return { graph, inputs: new Map([["x", rand(transA ? [K, M] : [M, K])]]), lanes }
}
const arbDenseCase = fc.integer({ min: 1, max: 1 << 30 }).map((seed) => denseCase(seed))

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
    let padded = 0
    fc.assert(
      fc.property(arbConvNet, ([{ graph, inputs }, lanes]) => {
        const after = alterLayoutSync(graph, { vectorLanes: lanes })
        const convs = multiBlockConvs(after)
        padded += after.nodes.filter((n) => n.op === "LayoutTransform" && int(n, "channels", 0) > 0).length
        multi += convs.length
        multiStrided += convs.filter(strided).length
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs))
      }),
      lawParams(60),
    )
    // the cases reach convs of several vector blocks, strided ones too
    expect(multi).toBeGreaterThan(20)
    expect(multiStrided).toBeGreaterThan(5)
    // and channels padded to whole blocks (paddedBlock), through activations, adds, pools and depthwise convs
    expect(padded).toBeGreaterThan(20)
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

// rewrite.AlterLayout's padded blocks: where the block does not divide a value's channels they are
// padded to whole blocks, and the extra lanes hold zeros wherever the blocked graph computes them —
// a conv's zero filters and bias, the elementwise ops that keep 0 at 0, constants re-laid with
// zeros (ones where they divide), pools — so a conv that reduces over them adds nothing, and a
// transform back to the padded block after them is the identity.

/** The blocked values of the pass's result whose channels are padded: value → its NCHW channels. */
const paddedValues = (after: Graph, before: Graph): Map<string, number> => {
  const padded = new Map<string, number>()
  for (const n of after.nodes) {
    const y = after.valueTypes.get(n.outputs[0])?.shape ?? []
    if (y.length !== 5) continue
    let C = 0
    if (n.op === "LayoutTransform") C = int(n, "channels", 0)
    else if (n.op === "ConvNCHWc") {
      const O0 = before.initializers.get(convOf(before, n.name).inputs[1])!.shape[0]
      C = O0 % (y[4] as number) === 0 ? 0 : O0
    } else C = n.inputs.map((v) => padded.get(v) ?? 0).find((c) => c > 0) ?? 0
    if (C > 0) padded.set(n.outputs[0], C)
  }
  return padded
}

const allFinite = (ts: readonly Tensor[]): boolean => ts.every((t) => t.data.every((v) => Number.isFinite(Number(v))))

/** Whether element i of a blocked [N, CB, H, W, b] value lies in its last channel block. */
const isLastBlock = (shape: readonly (number | string)[], i: number): boolean => {
  const [, CB, H, W, b] = shape as number[]
  return Math.floor(i / (H * W * b)) % CB === CB - 1
}

describe("alterLayout: padded blocks", () => {
  it("the lanes past a padded value's channels are zero wherever the blocked graph computes it", () => {
    let checked = 0
    fc.assert(
      fc.property(fc.oneof(arbConvNet, arbNeighbourCase), ([{ graph, inputs }, lanes]) => {
        const after = alterLayoutSync(graph, { vectorLanes: lanes })
        const padded = [...paddedValues(after, bindSync(graph))]
        // (a NaN or infinity a real lane holds reaches the extra lanes of a conv that reads it: the outputs have it already)
        if (!allFinite(evalGraph(graph, inputs))) return
        const outs = evalGraph({ ...after, outputs: padded.map(([name]) => ({ name, type: after.valueTypes.get(name)! })) }, inputs)
        padded.forEach(([name, C], k) => {
          const [N, CB, H, W, b] = outs[k].shape
          for (let n = 0; n < N; n++)
            for (let c = C; c < CB * b; c++)
              for (let s = 0; s < H * W; s++) {
                const v = outs[k].data[((n * CB + Math.floor(c / b)) * H * W + s) * b + (c % b)]
                if (v !== 0) throw new Error(`${name}: lane ${c} of ${C} channels holds ${v}`)
              }
          checked++
        })
      }),
      lawParams(120),
    )
    expect(checked).toBeGreaterThan(40)
  })

  it("each neighbour after a conv of 12 filters at 8 lanes (padded to 16), then a conv that reduces over them: the extra lanes zero, the graph evaluates as before", () => {
    const rng = prng(13)
    const rand = (shape: number[], lo = -1, hi = 1) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(lo, hi)))
    const window = { kernel_shape: attr.ints([2, 2]), pads: attr.ints([0, 0, 1, 1]) }
    const mids: [string, string[], Attrs][] = [
      ...NEIGHBOURS.map((op) => [op, ["c"], {}] as [string, string[], Attrs]),
      ["Clip", ["c", "lo", "hi"], {}],
      ["MaxPool", ["c"], window],
      ["AveragePool", ["c"], window],
      ...["Add", "Sub", "Mul", "Div"].flatMap((op) => ["s", "k"].flatMap((k) => [[op, ["c", k], {}], [op, [k, "c"], {}]] as [string, string[], Attrs][])),
    ]
    for (const [op, ins, attrs] of mids) {
      const graph = makeGraph({
        opset: 18,
        inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 4, 3, 3] } }],
        outputs: [{ name: "y", type: { dtype: "float32", shape: [] } }],
        initializers: new Map([
          ["w", rand([12, 4, 3, 3])],
          ["v", rand([5, 12, 1, 1])],
          ["s", rand([], 0.5, 1.5)],
          ["k", rand([1, 12, 1, 1], 0.5, 1.5)],
          ["lo", rand([], -1, -0.5)],
          ["hi", rand([], 0.5, 1)],
        ]),
        nodes: [node("Conv", ["x", "w"], ["c"], { pads: attr.ints([1, 1, 1, 1]) }), node(op, ins, ["u"], attrs), node("Conv", ["u", "v"], ["y"])],
      })
      const after = alterLayoutSync(graph, { vectorLanes: 8 })
      const inputs = new Map([["x", rand([1, 4, 3, 3], 0.1, 1)]])
      const padded = [...paddedValues(after, bindSync(graph))]
      expect(padded.length, `${op}(${ins}): the conv's output is padded`).toBeGreaterThan(0)
      const want = evalGraph(graph, inputs)
      assertAllClose(evalGraph(after, inputs), want)
      // (a NaN or infinity a real lane holds reaches the extra lanes of a conv that reads it: the outputs have it already)
      if (!allFinite(want)) continue
      const outs = evalGraph({ ...after, outputs: padded.map(([name]) => ({ name, type: after.valueTypes.get(name)! })) }, inputs)
      padded.forEach(([name, C], k) => {
        const b = outs[k].shape[4]
        outs[k].data.forEach((v, i) => {
          if (i % b >= C % b && isLastBlock(outs[k].shape, i) && v !== 0) throw new Error(`${op}(${ins}): ${name} lane ${i % b} of its last block holds ${v}`)
        })
      })
    }
  })

  it("paddedBlock: of lanes, lanes/2, … 1, the fewest vector FMA cycles times the padded share, the larger block on a tie", () => {
    const cost = (c: number, b: number, units: (b: number) => number) => (Math.ceil(c / b) / units(b)) * ((Math.ceil(c / b) * b) / c)
    const records: (Readonly<Record<string, number>> | undefined)[] = [undefined, { "4": 2, "8": 2, "16": 1 }, { "4": 2, "8": 2, "16": 2 }, { "4": 1 }]
    for (const byLanes of records)
      for (const lanes of [1, 2, 4, 8, 16])
        for (let c = 1; c <= 130; c++) {
          const units = (b: number) => {
            const ws = Object.keys(byLanes ?? {}).map(Number).sort((x, y) => x - y)
            return ws.length ? byLanes![String(ws.find((w) => w >= b) ?? ws[ws.length - 1])] : 1
          }
          const blocks = [16, 8, 4, 2, 1].filter((b) => b <= lanes)
          const best = Math.min(...blocks.map((b) => cost(c, b, units)))
          const want = blocks.find((b) => cost(c, b, units) <= best + 1e-9)
          expect([c, lanes, paddedBlock(c, { vectorLanes: lanes, ...(byLanes ? { fmaUnitsByLanes: byLanes } : {}) })]).toEqual([c, lanes, want])
        }
    // Zen 4's measured pipes (2 at 4 and 8 lanes, 1 at 16): ShuffleNetV2's channels
    const zen4 = { vectorLanes: 16, fmaUnitsByLanes: { "4": 2, "8": 2, "16": 1 } }
    expect([58, 116, 232, 464, 24, 3].map((c) => paddedBlock(c, zen4))).toEqual([16, 8, 8, 16, 8, 4])
  })
})

// rewrite.AlterLayout's concatenation rule: a fire module (SqueezeNet's: two or three convs of
// one input, 1×1 or 3×3, their filters random, a ReLU at times, joined over the channels as axis
// 1 or -3), then a pooling or a conv at times — the join moves into the blocked layout exactly
// when its operands are blocked alike and unpadded in its own block, the blocked graph evaluates as the original,
// and compiled (js) it computes what the evaluator does.
const arbFireCase: fc.Arbitrary<readonly [GraphCase, number]> = fc.integer({ min: 1, max: 1 << 30 }).map((seed) => {
  const rng = prng(seed)
  const rand = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))
  const lanes = rng.pick([4, 8, 16])
  const C = rng.pick([3, 4, 8, 16])
  const [H, W] = [rng.int(2, 5), rng.int(2, 5)]
  const initializers = new Map<string, Tensor>()
  const nodes: Graph["nodes"][number][] = []
  let k = 0
  const add = (op: string, inputs: string[], attrs: Attrs = {}) => {
    const out = `v${k}`
    nodes.push(node(op, inputs, [out], attrs, `${op.toLowerCase()}_${k++}`))
    return out
  }
  const cst = (t: Tensor) => {
    const name = `c${k++}`
    initializers.set(name, t)
    return name
  }
  let joined = 0
  const branches = Array.from({ length: rng.int(2, 3) }, () => {
    const O = rng.pick([4, 8, 16, 32, 12, 6])
    joined += O
    const ks = rng.pick([1, 3])
    const y = add("Conv", ["x", cst(rand([O, C, ks, ks])), cst(rand([O]))], ks === 3 ? { pads: attr.ints([1, 1, 1, 1]) } : {})
    return rng.next() < 0.6 ? add("Relu", [y]) : y
  })
  let y = add("Concat", branches, { axis: attr.int(rng.pick([1, -3])) })
  const after = rng.next()
  if (after < 0.3) y = add("MaxPool", [y], { kernel_shape: attr.ints([2, 2]), pads: attr.ints([0, 0, 1, 1]) })
  else if (after < 0.6) y = add("Conv", [y, cst(rand([rng.pick([4, 8]), joined, 1, 1]))])
  return [{ graph: makeGraph({ opset: 18, inputs: [{ name: "x", type: { dtype: "float32", shape: [1, C, H, W] } }], outputs: [{ name: y, type: { dtype: "float32", shape: [] } }], initializers, nodes }), inputs: new Map([["x", rand([1, C, H, W])]]) }, lanes] as const
})

describe("alterLayout: concatenation over the channels", () => {
  it("a fire module's join moves into the blocked layout exactly when its operands are blocked alike and unpadded in its own block; layouts consistent; evaluates as before", () => {
    let moved = 0
    fc.assert(
      fc.property(arbFireCase, ([{ graph, inputs }, lanes]) => {
        const after = alterLayoutSync(graph, { vectorLanes: lanes })
        checkLayouts(after, lanes, graph)
        checkSaturated(after, lanes)
        expect(structurallyEqual(alterLayoutSync(after, { vectorLanes: lanes }), after), "a second run changes nothing").toBe(true)
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs))
        moved += after.nodes.filter((n) => n.op === "Concat" && after.valueTypes.get(n.outputs[0])?.shape.length === 5).length
      }),
      lawParams(120),
    )
    expect(moved).toBeGreaterThan(30)
  })

  it("compiled (js) computes what the evaluator does", async () => {
    await fc.assert(
      fc.asyncProperty(arbFireCase, async ([{ graph, inputs }, lanes]) => {
        const target = makeTarget("js", { vectorLanes: lanes })
        const exec = await Effect.runPromise(loadProgram(await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 })), target))
        const got = exec.run(inputs)
        assertAllClose(graph.outputs.map((o) => got.get(o.name)!), evalGraph(graph, inputs))
      }),
      lawParams(10),
    )
  }, 120_000)
})

// rewrite.AlterLayout's structure, on random graphs and model-like conv nets against 4, 8 and 16
// lanes: every value has one layout and every op reads what it expects (a LayoutTransform its
// source layout, a blocked conv its input block, a blocked pool or elementwise op one block; every
// other op, and every graph output, plain NCHW); transforms stand only at a layout boundary, never
// on a constant, never after their inverse; a blocked conv's blocks are the rule's (paddedBlock of
// its filters; chooseBlock or paddedBlock of its channels), its channels padded to whole blocks of
// them; every convolution that can be blocked is, and every dense layer that can be
// packed is; a second run changes nothing (the moves saturate).

/** "NCHW" → 0, "NCHW{b}c" → b for b ≥ 1 (undefined otherwise: no "NCHW0c"). */
const blockIn = (s: string): number | undefined => (s === "NCHW" ? 0 : /^NCHW([1-9]\d*)c$/.test(s) ? Number(/^NCHW(\d+)c$/.exec(s)![1]) : undefined)
/** The largest of lanes, lanes/2, lanes/4, … (above 1) that divides c; 1 when none does. */
const largestBlock = (c: number, lanes: number): number => {
  const fits = [16, 8, 4, 2].filter((b) => b <= lanes && lanes % b === 0 && c % b === 0)
  return fits.length ? Math.max(...fits) : 1
}
const MOVABLE = new Set(["Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "HardSwish", "Elu", "Selu", "Softplus", "Neg", "Abs", "Exp", "Erf", "Sqrt", "Gelu", "Mish", "Swish", "Clip", "Add", "Sub", "Mul", "Div", "Concat"])

const str = (n: Graph["nodes"][number], a: string) => (n.attrs[a]?.kind === "string" ? (n.attrs[a].value as string) : "")
const int = (n: Graph["nodes"][number], a: string, dflt: number) => (n.attrs[a]?.kind === "int" ? (n.attrs[a].value as number) : dflt)

/** The conv of `before` a blocked conv of the pass's result was made from (its name and "_nchwc", a fresh name's suffix after). */
const convOf = (before: Graph, blocked: string): Graph["nodes"][number] => {
  const name = /^(.*)_nchwc(?:_\d+)?$/.exec(blocked)?.[1]
  const n = before.nodes.find((m) => m.name === name && m.op === "Conv")
  if (!n) throw new Error(`${blocked} was made from no conv of the graph`)
  return n
}

/**
 * Throws unless the layouts of `after` (the pass's result on `before` for `lanes`) are consistent
 * and minimal: a blocked conv's output block is paddedBlock of its filters (a depthwise conv's
 * input the same), its input block chooseBlock or paddedBlock of its channels, its padded channel
 * counts whole blocks of them.
 */
const checkLayouts = (after: Graph, lanes: number, before: Graph): void => {
  const layout = new Map<string, number>()
  const producer = new Map<string, Graph["nodes"][number]>()
  for (const n of after.nodes) {
    const ins = n.inputs.map((i) => (i === "" ? undefined : (layout.get(i) ?? 0)))
    let out = 0
    if (n.op === "LayoutTransform") {
      const [src, dst] = [blockIn(str(n, "src_layout")), blockIn(str(n, "dst_layout"))]
      // (NCHW to a block, a block to NCHW, or one block to another)
      expect(src !== undefined && dst !== undefined && src !== dst, `${n.name}: ${str(n, "src_layout")} → ${str(n, "dst_layout")}`).toBe(true)
      expect(ins[0], `${n.name} reads its source layout`).toBe(src)
      expect(after.initializers.has(n.inputs[0]), `${n.name} re-lays a constant at run time`).toBe(false)
      const p = producer.get(n.inputs[0])
      if (p?.op === "LayoutTransform") throw new Error(`${p.name} → ${n.name}: two transforms back to back`)
      out = dst!
    } else if (n.op === "ConvNCHWc") {
      const [ib, ob] = [int(n, "in_block", 0), int(n, "out_block", 0)]
      const [x, y] = [after.valueTypes.get(n.inputs[0])!.shape as number[], after.valueTypes.get(n.outputs[0])!.shape as number[]]
      const [C, O] = [x[1] * x[4], y[1] * y[4]]
      expect([ins[0], x[4], y[4]], `${n.name} reads and writes its blocks`).toEqual([ib, ib, ob])
      const conv = convOf(before, n.name)
      const [C0, O0] = [bindSync(before).valueTypes.get(conv.inputs[0])?.shape[1] ?? before.inputs.find((i) => i.name === conv.inputs[0])!.type.shape[1], before.initializers.get(conv.inputs[1])!.shape[0]] as number[]
      expect([C, O], `${n.name}: ${C0} → ${O0} channels padded to whole blocks of ${ib} and ${ob}`).toEqual([Math.ceil(C0 / ib) * ib, Math.ceil(O0 / ob) * ob])
      const group = int(n, "group", 1)
      // (a depthwise conv over padded channels has a group a padded channel)
      const depthwise = group !== 1 && group === C
      const target = { vectorLanes: lanes }
      if (group !== 1 && !depthwise) {
        // (grouped: one block in and out, the largest dividing a group's input and output channels, never padded)
        const inGroup = largestBlock(gcd(C0 / group, O0 / group), lanes)
        expect([ib, ob], `${n.name}: the largest blocks ≤ ${lanes} lanes of ${C0} → ${O0} channels in ${group} groups`).toEqual([inGroup, inGroup])
      } else {
        // (one output pixel: a matrix-vector product, not padded)
        const pixels = y[2] * y[3]
        expect(ob, `${n.name}: the block of ${O0} filters for ${lanes} lanes`).toBe(pixels > 1 ? paddedBlock(O0, target) : largestBlock(O0, lanes))
        if (depthwise) expect(ib, `${n.name}: a depthwise conv's one block`).toBe(ob)
        else expect([largestBlock(C0, lanes), paddedBlock(C0, target)], `${n.name}: the block of ${C0} channels for ${lanes} lanes`).toContain(ib)
      }
      out = ob
    } else if (n.op === "PoolNCHWc") {
      expect(ins[0]! > 0, `${n.name} reads a blocked value`).toBe(true)
      out = ins[0]!
    } else {
      const blocked = [...new Set(ins.filter((b) => b !== undefined && b > 0))]
      if (blocked.length) {
        expect(MOVABLE.has(n.op) && blocked.length === 1, `${n.op} ${n.name} reads blocked values ${blocked}`).toBe(true)
        out = blocked[0]!
      }
    }
    for (const o of n.outputs) if (o !== "") layout.set(o, out)
    for (const o of n.outputs) producer.set(o, n)
  }
  for (const o of after.outputs) expect(layout.get(o.name) ?? 0, `graph output ${o.name} is NCHW`).toBe(0)
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b))

/**
 * Convs the pass must block: 2-D, float32 of static shape, constant weights; group 1 or depthwise
 * with some block above 1, or grouped with a block above 1 dividing a group's input and output channels.
 */
const blockable = (g: Graph, lanes: number): number =>
  g.nodes.filter((n) => {
    const x = g.valueTypes.get(n.inputs[0])
    const w = g.initializers.get(n.inputs[1] ?? "")
    if (n.op !== "Conv" || !x || !w || x.dtype !== "float32" || x.shape.length !== 4 || w.shape.length !== 4 || !x.shape.every((d) => typeof d === "number")) return false
    const [C, O, group] = [x.shape[1] as number, w.shape[0], int(n, "group", 1)]
    const depthwise = group === C && O === C && w.shape[1] === 1
    if (group !== 1 && !depthwise) return largestBlock(gcd(C / group, O / group), lanes) > 1
    const y = g.valueTypes.get(n.outputs[0])?.shape ?? []
    const out = (y[2] as number) * (y[3] as number) > 1 ? paddedBlock(depthwise ? C : O, { vectorLanes: lanes }) : largestBlock(depthwise ? C : O, lanes)
    return largestBlock(C, lanes) > 1 || out > 1
  }).length

/**
 * The products over a constant weight the pass must pack, `dense` (DensePack) or `many`
 * (MatMulPacked): Gemm (no transposes, alpha 1, beta 1 or no C) and MatMul, float32 A by a constant
 * [K, N], lanes ≥ 8; DensePack where A is [M ≤ 8, K] and N ≥ 2·lanes; MatMulPacked where A is
 * otherwise of static shape with M ≥ 2 rows a batch, and the matmul register tile's columns for
 * M × N (the target's default register file) are whole vectors and fewer than N.
 */
const packed = (g: Graph, lanes: number, form: "dense" | "many" = "dense"): number =>
  g.nodes.filter((n) => {
    const x = g.valueTypes.get(n.inputs[0])
    const w = g.initializers.get(n.inputs[1] ?? "")
    const f = (a: string, d: number) => (n.attrs[a]?.kind === "float" ? (n.attrs[a].value as number) : d)
    if ((n.op !== "Gemm" && n.op !== "MatMul") || n.domain !== "" || lanes < 8 || !x || !w || x.dtype !== "float32" || w.dtype !== "float32" || x.shape.length < 2 || w.shape.length !== 2) return false
    if (n.op === "Gemm" && (int(n, "transA", 0) || int(n, "transB", 0) || f("alpha", 1) !== 1 || (f("beta", 1) !== 1 && n.inputs[2]))) return false
    const [M, N] = [x.shape[x.shape.length - 2], w.shape[1]]
    if (typeof M !== "number") return false
    const few = x.shape.length === 2 && M <= 8
    if (form === "dense") return few && N >= 2 * lanes
    const panel = matmulRegisterTile({ vectorLanes: lanes }, M, N).cols
    return !few && M >= 2 && x.shape.every((d) => typeof d === "number") && panel % lanes === 0 && N > panel
  }).length
const packable = (g: Graph, lanes: number): number => packed(g, lanes, "dense")

const arbLayoutCase: fc.Arbitrary<readonly [GraphCase, number]> = fc.oneof(
  { arbitrary: fc.tuple(fc.oneof(arbGraphCase({ maxNodes: 14, modelShare: 0.5 }), arbConvNet.map(([c]) => c)), fc.constantFrom(4, 8, 16)), weight: 4 },
  { arbitrary: fc.integer({ min: 1, max: 1 << 30 }).map((seed) => denseCase(seed, true)).map((c) => [c, c.lanes] as const), weight: 3 },
)

describe("alterLayout: structure", () => {
  it("the pass: alterLayoutSync at opt level 3, the graph unchanged below it or disabled by its name", () => {
    fc.assert(
      fc.property(arbNeighbourCase, ([{ graph }, lanes]) => {
        const pass = alterLayout({ vectorLanes: lanes })
        expect(structurallyEqual(Effect.runSync(runPass(pass, graph)), alterLayoutSync(graph, { vectorLanes: lanes }))).toBe(true)
        expect(Effect.runSync(runPass(pass, graph).pipe(withPassConfig({ optLevel: 2 })))).toBe(graph)
        expect(Effect.runSync(runPass(pass, graph).pipe(withPassConfig({ disabled: new Set(["rewrite.AlterLayout"]) })))).toBe(graph)
      }),
      lawParams(10),
    )
  })

  it("a Gemm is packed exactly when it is packable (as written or canonical; transposes, alpha, beta, float64, unknown rows; DensePack for a few rows, MatMulPacked for more), and evaluates as before", () => {
    let many = 0
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1 << 30 }), (seed) => {
        const { graph, inputs, lanes } = denseCase(seed, true)
        for (const g of [bindSync(graph), simplifyInferenceSync(graph)]) {
          const after = alterLayoutSync(g, { vectorLanes: lanes })
          expect(after.nodes.filter((n) => n.op === "DensePack").length).toBe(packable(bindSync(g), lanes))
          expect(after.nodes.filter((n) => n.op === "MatMulPacked").length).toBe(packed(bindSync(g), lanes, "many"))
          many += packed(bindSync(g), lanes, "many")
          assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs), 1e-5, 1e-5)
        }
      }),
      lawParams(200),
    )
    // (the cases reach MatMulPacked too; laws/rewrite/pack-dense.law.ts takes its rule in full)
    expect(many).toBeGreaterThan(0)
  })

  it("chooseBlock: the largest of lanes, lanes/2, … above 1 that divides the channels, else 1", () => {
    for (const lanes of [1, 2, 4, 8, 16]) for (let c = 1; c <= 48; c++) expect([c, lanes, chooseBlock(c, lanes)]).toEqual([c, lanes, largestBlock(c, lanes)])
  })

  it("layouts are consistent, transforms only at boundaries, blocks the rule's and padded to whole blocks, every blockable conv and packable dense layer converted, a second run changes nothing", () => {
    let convs = 0
    let dense = 0
    fc.assert(
      fc.property(arbLayoutCase, fc.boolean(), ([{ graph }, lanes], canonical) => {
        // Gemms canonical (transposes, alpha and beta folded into the constants) or as written
        const g = canonical ? simplifyInferenceSync(graph) : bindSync(graph)
        const after = alterLayoutSync(g, { vectorLanes: lanes })
        checkLayouts(after, lanes, g)
        const bound = bindSync(g)
        expect(after.nodes.filter((n) => n.op === "ConvNCHWc").length).toBe(blockable(bound, lanes))
        expect(after.nodes.filter((n) => n.op === "DensePack").length).toBe(packable(bound, lanes))
        expect(after.nodes.filter((n) => n.op === "MatMulPacked").length).toBe(packed(bound, lanes, "many"))
        expect(structurallyEqual(alterLayoutSync(after, { vectorLanes: lanes }), after), "a second run changes nothing").toBe(true)
        convs += blockable(bound, lanes)
        dense += packable(bound, lanes)
      }),
      lawParams(60),
    )
    // the cases reach both rules
    expect(convs).toBeGreaterThan(25)
    expect(dense).toBeGreaterThan(3)
  })
})

// The neighbours a blocked convolution takes into its layout: every elementwise activation the
// rule knows, Clip (bounds constant, computed or left out), Add / Sub / Mul / Div with a scalar or
// per-channel constant or with another blocked value, max / average / global pooling — and the
// ones it must leave: a constant that varies over H or W or over the batch, or that adds a dim,
// pooling with its Indices. Convs that cannot be blocked stand beside them: computed weights, two
// groups (blocked where a group's channels have a block), a depthwise conv with a channel
// multiplier, a 1-D conv, float64, a batch of unknown size, and a ConvTranspose (odd channels are
// blocked, padded to whole blocks; after them only the ops that keep 0 at 0 move, and no Div by a
// blocked value).
/** The neighbours that keep 0 at 0, the ones that move after a conv whose channels are padded to whole blocks. */
const ZERO_KEEPING = ["Relu", "Tanh", "LeakyRelu", "HardSwish", "Elu", "Selu", "Neg", "Abs", "Erf", "Sqrt", "Gelu", "Mish", "Swish"]
const NEIGHBOURS = ["Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "HardSwish", "Elu", "Selu", "Softplus", "Neg", "Abs", "Exp", "Erf", "Sqrt", "Gelu", "Mish", "Swish"]
const arbNeighbourCase: fc.Arbitrary<readonly [GraphCase, number]> = fc.integer({ min: 1, max: 1 << 30 }).map((seed) => {
  const rng = prng(seed)
  const rand = (shape: number[], lo = -1, hi = 1) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(lo, hi)))
  const lanes = rng.pick([4, 8, 16])
  const C = rng.pick([4, 8, 16, 6, 3])
  const [H, W] = [rng.int(2, 5), rng.int(2, 5)]
  const N = rng.next() < 0.25 ? 2 : 1
  const initializers = new Map<string, Tensor>()
  const nodes: Graph["nodes"][number][] = []
  let k = 0
  const cst = (t: Tensor) => {
    const name = `c${k++}`
    initializers.set(name, t)
    return name
  }
  const add = (op: string, inputs: string[], attrs: Attrs = {}, outputs = 1) => {
    const outs = Array.from({ length: outputs }, (_, j) => `v${k}_${j}`)
    nodes.push(node(op, inputs, outs, attrs, `${op.toLowerCase()}_${k++}`))
    return outs[0]
  }
  const oneD = rng.next() < 0.1
  const x = "x"
  // the conv: blockable, or one of the kinds the rule leaves
  const kind = rng.pick(["dense", "dense", "dense", "depthwise", "computed", "grouped", "multiplier", "odd", "transpose"])
  const O = kind === "odd" ? 3 : kind === "depthwise" ? C : kind === "multiplier" ? 2 * C : rng.pick([4, 8, 16, 12])
  const Cin = kind === "odd" ? 3 : C
  const group = kind === "depthwise" || kind === "multiplier" ? Cin : kind === "grouped" && Cin % 2 === 0 && O % 2 === 0 ? 2 : 1
  const wShape = oneD ? [O, Cin / group, 3] : [O, Cin / group, 3, 3]
  const w = kind === "computed" ? add("Abs", [cst(rand(wShape))]) : cst(rand(wShape))
  // (a ConvTranspose of group 1 and a constant [C, O, 3, 3] weight: no Conv, left alone)
  let y =
    kind === "transpose"
      ? add("ConvTranspose", [x, cst(rand(oneD ? [Cin, O, 3] : [Cin, O, 3, 3])), cst(rand([O]))], { pads: attr.ints(oneD ? [1, 1] : [1, 1, 1, 1]) })
      : add("Conv", [x, w, cst(rand([O]))], { pads: attr.ints(oneD ? [1, 1] : [1, 1, 1, 1]), ...(group > 1 ? { group: attr.int(group) } : {}) })
  for (let s = rng.int(1, 3); s > 0 && !oneD; s--) {
    const r = rng.next()
    if (r < 0.35) y = add(rng.pick(NEIGHBOURS), [y])
    else if (r < 0.45) {
      // bounds constant, left out ("") or computed
      const bound = (lo: number, hi: number) => (rng.next() < 0.5 ? cst(rand([], lo, hi)) : rng.next() < 0.6 ? "" : add("Abs", [cst(rand([]))]))
      y = add("Clip", [y, bound(-1, -0.5), bound(0.5, 1)])
    }
    else if (r < 0.7) {
      // scalar, per channel (the rule's), per batch and channel, varying over H or W, of a fifth dim
      const shape = rng.pick([[], [1], [O, 1, 1], [1, O, 1, 1], [1, 1, H, W], [1, O, H, W], [N, O, 1, 1], [O, 1, W], [O, H, 1], [1, O, 1, W], [1, O, H, 1], [1, 1, 1, 1, 1]])
      const c = cst(rand(shape, 0.5, 1.5))
      const op = rng.pick(["Add", "Sub", "Mul", "Div"])
      y = add(op, rng.next() < 0.5 ? [y, c] : [c, y])
    } else if (r < 0.8) {
      // two blocked values of one block: a second conv from the same input
      const z = add("Conv", [x, cst(rand([O, Cin / group, 1, 1])), cst(rand([O]))], group > 1 ? { group: attr.int(group) } : {})
      y = add(rng.pick(["Add", "Mul"]), rng.next() < 0.5 ? [y, z] : [z, y])
    } else {
      const op = rng.pick(["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "MaxPool"])
      const global = op.startsWith("Global")
      const indices = op === "MaxPool" && rng.next() < 0.3
      y = add(op, [y], global ? {} : { kernel_shape: attr.ints([2, 2]), pads: attr.ints([0, 0, 1, 1]) }, indices ? 2 : 1)
      // the Indices left out by name at times ("")
      const last = nodes[nodes.length - 1]
      if (op === "MaxPool" && !indices && rng.next() < 0.4) nodes[nodes.length - 1] = { ...last, outputs: [y, ""] }
      if (global) break
    }
  }
  // and convs the rule must leave at times: float64, or a batch of unknown size
  const [f64, symbolic] = [rng.next() < 0.1, rng.next() < 0.1]
  const typed = (t: Tensor) => (f64 ? tensor("float64", t.shape, Float64Array.from(t.data)) : t)
  const dtype = f64 ? ("float64" as const) : ("float32" as const)
  const graph = makeGraph({
    opset: 18,
    inputs: [{ name: "x", type: { dtype, shape: oneD ? [symbolic ? "N" : N, Cin, H * W] : [symbolic ? "N" : N, Cin, H, W] } }],
    outputs: [{ name: y, type: { dtype, shape: [] } }],
    initializers: new Map([...initializers].map(([name, t]) => [name, typed(t)])),
    nodes,
  })
  return [{ graph, inputs: new Map([["x", typed(rand(oneD ? [N, Cin, H * W] : [N, Cin, H, W]))]]) }, lanes] as const
})

/** Throws where an op the pass moves into the blocked layout still reads an unblocked value (LayoutTransform b → NCHW). */
const checkSaturated = (g: Graph, lanes?: number): void => {
  const producer = new Map<string, Graph["nodes"][number]>()
  for (const n of g.nodes) for (const o of n.outputs) producer.set(o, n)
  const unblocked = (v: string): number => {
    const p = producer.get(v)
    return p?.op === "LayoutTransform" && str(p, "dst_layout") === "NCHW" ? blockIn(str(p, "src_layout"))! : 0
  }
  /** A value unblocked from a padded block (its channels not whole blocks): only ops that keep 0 at 0 move. */
  const padded = (v: string): boolean => {
    const p = producer.get(v)
    return !!p && unblocked(v) > 0 && int(p, "channels", 0) > 0
  }
  // (a bound left out holds 0; a computed one is not known to)
  const bound = (v: string | undefined, none: number) => (v ? Number(g.initializers.get(v)?.data[0]) : none)
  const keepsZero = (n: Graph["nodes"][number]) => ZERO_KEEPING.includes(n.op) || (n.op === "Clip" && bound(n.inputs[1], -1) <= 0 && bound(n.inputs[2], 1) >= 0)
  const isConst = (v: string) => v === "" || g.initializers.has(v)
  const perChannel = (v: string, C: number) => {
    const t = g.initializers.get(v)
    if (!t) return false
    const s = t.shape.join()
    return t.data.length === 1 || s === `${C},1,1` || s === `1,${C},1,1`
  }
  for (const n of g.nodes) {
    const b = unblocked(n.inputs[0] ?? "")
    const out = g.valueTypes.get(n.outputs[0])?.shape ?? []
    const stays = `${n.op} ${n.name} reads an unblocked value it could read blocked`
    if (n.domain !== "") continue
    if (b && (NEIGHBOURS.includes(n.op) || n.op === "Clip") && (!padded(n.inputs[0]) || keepsZero(n))) throw new Error(stays)
    if (b && ["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"].includes(n.op) && (n.outputs[1] ?? "") === "") throw new Error(stays)
    const axis = int(n, "axis", 0)
    if (n.op === "Concat" && out.length === 4 && (axis === 1 || axis === -3)) {
      const bs = n.inputs.map(unblocked)
      // (where the common block is the join's own: paddedBlock of its channels)
      const own = lanes !== undefined && paddedBlock(out[1] as number, { vectorLanes: lanes }) === bs[0]
      if (n.inputs.length > 1 && bs[0] > 0 && own && bs.every((b) => b === bs[0]) && !n.inputs.some(padded)) throw new Error(stays)
    }
    if (["Add", "Sub", "Mul", "Div"].includes(n.op) && out.length === 4) {
      const [l, r] = n.inputs.map(unblocked)
      const same = (v: string) => g.valueTypes.get(v)?.shape.join() === out.join()
      const div = n.op === "Div"
      if (l && r && l === r && !(div && padded(n.inputs[0]))) throw new Error(stays)
      if (l && !r && same(n.inputs[0]) && perChannel(n.inputs[1], out[1] as number)) throw new Error(stays)
      if (r && !l && same(n.inputs[1]) && perChannel(n.inputs[0], out[1] as number) && !(div && padded(n.inputs[1]))) throw new Error(stays)
    }
  }
}

/**
 * A graph that holds layout transforms already, of two blocks (a blocked input [1, 2, H, W, 4] of
 * 8 channels): NCHW4c → NCHW → NCHW8c is no inverse pair, a Relu of the NCHW8c value reads no
 * unblocked value, and the Add of the 4-blocked input and the 8-blocked Relu has operands of two
 * blocks: none of the rules applies, and the graph keeps its meaning.
 */
const mixedBlocks = (H: number, W: number, seed: number): GraphCase => {
  const rng = prng(seed)
  const lt = (src: string, dst: string, input: string, output: string) => ({
    ...node("LayoutTransform", [input], [output], { src_layout: attr.str(src), dst_layout: attr.str(dst) }, `lt_${output}`),
    domain: TESSERA_DOMAIN,
  })
  const graph = makeGraph({
    opset: 18,
    inputs: [{ name: "xb", type: { dtype: "float32", shape: [1, 2, H, W, 4] } }],
    outputs: [{ name: "s", type: { dtype: "float32", shape: [] } }],
    nodes: [lt("NCHW4c", "NCHW", "xb", "u"), lt("NCHW", "NCHW8c", "u", "v"), node("Relu", ["v"], ["r"]), lt("NCHW8c", "NCHW", "r", "a"), node("Add", ["u", "a"], ["s"])],
  })
  return { graph, inputs: new Map([["xb", tensor("float32", [1, 2, H, W, 4], Float32Array.from({ length: 8 * H * W }, () => rng.float(-1, 1)))]]) }
}

describe("alterLayout: neighbours of a blocked conv", () => {
  it("an Add / Mul of a blocked conv and a constant of each shape moves exactly when the constant is a scalar or per channel; a conv of two groups of as many filters as channels is not depthwise", () => {
    const rng = prng(12)
    const rand = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(0.5, 1.5)))
    for (const N of [1, 2]) {
      const shapes: [number[], boolean][] = [
        [[], true],
        [[1], true],
        [[8, 1, 1], true],
        [[1, 8, 1, 1], true],
        [[N, 8, 1, 1], N === 1],
        [[1, 1, 3, 3], false],
        [[8, 1, 3], false],
        [[8, 3, 1], false],
        [[1, 1, 1, 1, 1], false],
      ]
      for (const [shape, moves] of shapes)
        for (const op of ["Add", "Mul"]) {
          const graph = makeGraph({
            opset: 18,
            inputs: [{ name: "x", type: { dtype: "float32", shape: [N, 4, 3, 3] } }],
            outputs: [{ name: "y", type: { dtype: "float32", shape: [] } }],
            initializers: new Map([
              ["w", rand([8, 4, 3, 3])],
              ["k", rand(shape)],
            ]),
            nodes: [node("Conv", ["x", "w"], ["c"], { pads: attr.ints([1, 1, 1, 1]) }), node(op, shape.length === 3 ? ["k", "c"] : ["c", "k"], ["y"])],
          })
          const after = alterLayoutSync(graph, { vectorLanes: 4 })
          checkLayouts(after, 4, graph)
          const blocked = after.nodes.find((n) => n.op === "ConvNCHWc")!.outputs[0]
          const moved = after.nodes.some((n) => n.op === op && n.inputs.includes(blocked))
          expect(moved, `${op} of [${shape}], batch ${N}`).toBe(moves)
          const inputs = new Map([["x", rand([N, 4, 3, 3])]])
          assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs))
        }
    }
    // group 2, 8 channels, 8 filters of 4 channels each: not a depthwise conv, a grouped one of
    // blocks of 4 (a group's channels)
    const grouped = makeGraph({
      opset: 18,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 8, 3, 3] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [] } }],
      initializers: new Map([["w", rand([8, 4, 3, 3])]]),
      nodes: [node("Conv", ["x", "w"], ["y"], { pads: attr.ints([1, 1, 1, 1]), group: attr.int(2) })],
    })
    const blockedGroups = alterLayoutSync(grouped, { vectorLanes: 4 })
    // (and the Identity that keeps the output's name)
    expect(blockedGroups.nodes.map((n) => n.op)).toEqual(["LayoutTransform", "ConvNCHWc", "LayoutTransform", "Identity"])
    const gconv = blockedGroups.nodes[1]
    expect([int(gconv, "group", 1), int(gconv, "in_block", 0), int(gconv, "out_block", 0)]).toEqual([2, 4, 4])
    const x8 = new Map([["x", rand([1, 8, 3, 3])]])
    assertAllClose(evalGraph(blockedGroups, x8), evalGraph(grouped, x8))
  })

  it("each elementwise op the rule knows, and each pooling (a MaxPool whose Indices are left out as \"\" too), moves after a blocked conv (Conv → op → Relu), and evaluates as before", () => {
    const rng = prng(11)
    const rand = (shape: number[], lo = -1, hi = 1) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(lo, hi)))
    const window = { kernel_shape: attr.ints([2, 2]), pads: attr.ints([0, 0, 1, 1]) }
    const pools = [node("MaxPool", ["c"], ["u", "idx"], window), node("MaxPool", ["c"], ["u", ""], window), node("MaxPool", ["c"], ["u"], window), node("AveragePool", ["c"], ["u"], window), node("GlobalMaxPool", ["c"], ["u"]), node("GlobalAveragePool", ["c"], ["u"])]
    for (const mid of [...NEIGHBOURS.map((op) => node(op, ["c"], ["u"])), ...pools]) {
      const graph = makeGraph({
        opset: 18,
        inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 4, 3, 3] } }],
        // (the Indices, when named, a graph output: that MaxPool stays in NCHW)
        outputs: [{ name: "y", type: { dtype: "float32", shape: [] } }, ...(mid.outputs[1] ? [{ name: mid.outputs[1], type: { dtype: "int64" as const, shape: [] } }] : [])],
        initializers: new Map([["w", rand([8, 4, 3, 3])]]),
        nodes: [node("Conv", ["x", "w"], ["c"], { pads: attr.ints([1, 1, 1, 1]) }), mid, node("Relu", ["u"], ["y"])],
      })
      const after = alterLayoutSync(graph, { vectorLanes: 4 })
      checkSaturated(after)
      expect(after.nodes.filter((n) => n.op === "LayoutTransform").length, `${mid.op} → ${mid.outputs}`).toBe(2)
      expect(after.nodes.some((n) => n.op === "PoolNCHWc"), `${mid.op} → ${mid.outputs}`).toBe(pools.includes(mid) && !mid.outputs[1])
      const inputs = new Map([["x", rand([1, 4, 3, 3], 0.1, 1)]])
      assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs))
    }
  })

  it("a graph blocked already, in two blocks: no transform pair of two blocks cancels, nothing reads a blocked value as an unblocked one, no op of two blocks moves", () => {
    for (const [H, W, seed] of [
      [2, 3, 1],
      [4, 4, 2],
    ]) {
      const { graph, inputs } = mixedBlocks(H, W, seed)
      for (const lanes of [4, 8, 16]) {
        const after = alterLayoutSync(graph, { vectorLanes: lanes })
        expect(after.nodes.map((n) => n.op)).toEqual(graph.nodes.map((n) => n.op))
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs))
      }
    }
  })

  it("move into the blocked layout when they can and only then; layouts consistent; every blockable conv blocked; evaluates as before", () => {
    let moved = 0
    fc.assert(
      fc.property(arbNeighbourCase, ([{ graph, inputs }, lanes]) => {
        const after = alterLayoutSync(graph, { vectorLanes: lanes })
        checkLayouts(after, lanes, graph)
        checkSaturated(after)
        expect(after.nodes.filter((n) => n.op === "ConvNCHWc").length).toBe(blockable(bindSync(graph), lanes))
        expect(structurallyEqual(alterLayoutSync(after, { vectorLanes: lanes }), after), "a second run changes nothing").toBe(true)
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs))
        moved += after.nodes.filter((n) => n.op === "PoolNCHWc" || ((n.inputs[0] ?? "").length > 0 && after.valueTypes.get(n.inputs[0])?.shape.length === 5 && n.op !== "LayoutTransform" && n.op !== "ConvNCHWc")).length
      }),
      lawParams(150),
    )
    expect(moved).toBeGreaterThan(45)
  })
})

// rewrite.AlterLayout's grouped convolutions (not depthwise): 2 to 4 groups of 1 to 8 input and
// output channels each, 1×1 to 3×3 kernels, strides 1 or 2, random asymmetric pads, a bias or
// none, a ReLU after or not, dense 1×1 convs before and after or not, against 4, 8 and 16 lanes —
// blocked exactly when a block above 1 divides a group's input and output channels (the largest
// such block ≤ the lanes, in and out), a dense conv's blocks to the grouped conv's in one
// transform, and the blocked graph evaluates as the original; compiled (js) it computes what the
// evaluator does.
const arbGroupedCase: fc.Arbitrary<readonly [GraphCase, number]> = fc.integer({ min: 1, max: 1 << 30 }).map((seed) => {
  const rng = prng(seed)
  const rand = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))
  const lanes = rng.pick([4, 8, 16])
  const group = rng.int(2, 4)
  const [inPer, outPer] = [rng.pick([1, 2, 3, 4, 6, 8]), rng.pick([1, 2, 4, 6, 8])]
  // (one input and one output channel a group is depthwise: another rule's case)
  const [C, O] = [group * inPer, group * (inPer === 1 && outPer === 1 ? 2 : outPer)]
  const [kh, kw] = [rng.int(1, 3), rng.int(1, 3)]
  const [H, W] = [rng.int(kh, 7), rng.int(kw, 7)]
  const pads = [rng.int(0, kh - 1), rng.int(0, kw - 1), rng.int(0, kh - 1), rng.int(0, kw - 1)]
  const bias = rng.next() < 0.6
  const initializers = new Map<string, Tensor>([["w", rand([O, C / group, kh, kw])], ...(bias ? [["b", rand([O])] as [string, Tensor]] : [])])
  const relu = rng.next() < 0.5
  // half the time a dense 1×1 conv (and a ReLU) before it and after it, blocked by all the
  // channels: its blocks and the grouped conv's differ at times (one block to another)
  const dense = rng.next() < 0.5
  if (dense) {
    initializers.set("w0", rand([C, C, 1, 1]))
    initializers.set("w2", rand([C, O, 1, 1]))
  }
  const graph = makeGraph({
    opset: 13,
    inputs: [{ name: "x", type: { dtype: "float32", shape: [1, C, H, W] } }],
    outputs: [{ name: "y", type: { dtype: "float32", shape: [] } }],
    initializers,
    nodes: [
      ...(dense ? [node("Conv", ["x", "w0"], ["d0"]), node("Relu", ["d0"], ["x0"])] : []),
      node("Conv", [dense ? "x0" : "x", "w", ...(bias ? ["b"] : [])], [relu ? "c" : dense ? "g" : "y"], { group: attr.int(group), kernel_shape: attr.ints([kh, kw]), pads: attr.ints(pads), strides: attr.ints([rng.int(1, 2), rng.int(1, 2)]) }),
      ...(relu ? [node("Relu", ["c"], [dense ? "g" : "y"])] : []),
      ...(dense ? [node("Conv", ["g", "w2"], ["y"])] : []),
    ],
  })
  return [{ graph, inputs: new Map([["x", rand([1, C, H, W])]]) }, lanes] as const
})

describe("alterLayout: grouped convolutions", () => {
  it("are blocked exactly when a block divides a group's channels, with the largest such block, and evaluate as before; a block to another in one transform", () => {
    let blocked = 0
    let reblocked = 0
    fc.assert(
      fc.property(arbGroupedCase, ([{ graph, inputs }, lanes]) => {
        const after = alterLayoutSync(graph, { vectorLanes: lanes })
        // (no two transforms back to back: 16 → NCHW → 8 is one transform 16 → 8)
        checkLayouts(after, lanes, graph)
        const convs = after.nodes.filter((n) => n.op === "ConvNCHWc")
        expect(convs.length).toBe(blockable(bindSync(graph), lanes))
        blocked += convs.length
        reblocked += after.nodes.filter((n) => n.op === "LayoutTransform" && str(n, "src_layout") !== "NCHW" && str(n, "dst_layout") !== "NCHW").length
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs), 1e-4, 1e-5)
        expect(structurallyEqual(alterLayoutSync(after, { vectorLanes: lanes }), after), "a second run changes nothing").toBe(true)
      }),
      lawParams(100),
    )
    expect(blocked).toBeGreaterThan(40)
    expect(reblocked).toBeGreaterThan(10)
  })

  it("a transform from one block to another (2 to 16 lanes, either dividing the other or not), compiled (js), computes what the evaluator does", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(2, 4, 8, 16, 6), fc.constantFrom(2, 4, 8, 16, 6), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 4 }), fc.nat(), async (a, b, k, H, W, seed) => {
        fc.pre(a !== b)
        const C = ((a * b) / gcd(a, b)) * k
        const rng = prng(seed)
        const x = tensor("float32", [1, C / a, H, W, a], Float32Array.from({ length: C * H * W }, () => rng.float(-1, 1)))
        const graph = makeGraph({
          opset: 13,
          inputs: [{ name: "x", type: { dtype: "float32", shape: x.shape } }],
          outputs: [{ name: "y", type: { dtype: "float32", shape: [] } }],
          nodes: [{ name: "t", op: "LayoutTransform", domain: TESSERA_DOMAIN, inputs: ["x"], outputs: ["y"], attrs: { src_layout: attr.str(`NCHW${a}c`), dst_layout: attr.str(`NCHW${b}c`) } }],
        })
        const target = makeTarget("js", { vectorLanes: 16 })
        const exec = await Effect.runPromise(loadProgram(await Effect.runPromise(compileGraph(graph, target, { optLevel: 0 })), target))
        const inputs = new Map([["x", x]])
        const [want] = evalGraph(graph, inputs)
        expect(want.shape).toEqual([1, C / b, H, W, b])
        assertAllClose([exec.run(inputs).get("y")!], [want], 0, 0)
      }),
      lawParams(30),
    )
  }, 120_000)

  it("compiled (js, the blocked layout of the case's lanes) compute what the evaluator does", async () => {
    await fc.assert(
      fc.asyncProperty(arbGroupedCase, async ([{ graph, inputs }, lanes]) => {
        const target = makeTarget("js", { vectorLanes: lanes })
        const program = await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 }))
        const exec = await Effect.runPromise(loadProgram(program, target))
        const got = exec.run(inputs)
        assertAllClose(graph.outputs.map((o) => got.get(o.name)!), evalGraph(graph, inputs), 1e-4, 1e-5)
      }),
      lawParams(25),
    )
  }, 120_000)
})
