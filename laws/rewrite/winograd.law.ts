// rewrite.WinogradConv and the ConvWinogradNCHWc compute: a 3×3 stride-1 convolution (random
// channels, image size, explicit or automatic padding, bias, a fused Relu) in the blocked layout
// becomes F(4×4, 3×3) Winograd with its kernel transform folded at compile time — the rewritten
// graph evaluates as the original, and compiled (tensor expression, the Winograd template, js) it
// computes what the evaluator does. Convs the rewrite must leave alone (strided, dilated, grouped,
// narrow, small images) stay direct.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attr, type AttrValue } from "../../src/ast/graph/attrs.js"
import { prng } from "../../src/ast/graph/arbitrary.js"
import { arbModelGraphCase } from "../../src/ast/graph/arbitrary-models.js"
import { makeGraph, node, type Graph } from "../../src/ast/graph/graph.js"
import { TESSERA_DOMAIN } from "../../src/ast/graph/ops/index.js"
import { WINOGRAD } from "../../src/ast/graph/ops/winograd.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import { tensor, type Tensor } from "../../src/ast/graph/tensor.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { baseSchedule, buildGroupTE } from "../../src/lowering/lower-group.js"
import { lowerSync } from "../../src/lowering/lower.js"
import type { Config } from "../../src/lowering/templates/template.js"
import { templateFor } from "../../src/lowering/templates/template-for.js"
import { winogradTemplate } from "../../src/lowering/templates/winograd.js"
import { cpuTirPipeline } from "../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../src/lowering/tir/tir-pass.js"
import { makeTarget } from "../../src/ast/target.js"
import { compileGraph, loadProgram } from "../../src/pipeline.js"
import { alterLayoutSync } from "../../src/rewrite/alter-layout.js"
import { minTiles4, winogradConvSync, type WinogradTarget } from "../../src/rewrite/winograd.js"
import { assertAllClose, evalGraph, lawParams } from "../support.js"

interface ConvCase {
  readonly graph: Graph
  readonly inputs: ReadonlyMap<string, Tensor>
  readonly lanes: number
}

/** Conv (k×k, `group`) with optional bias and Relu on a random [1, C, H, W] input. */
const convGraph = (
  rng: ReturnType<typeof prng>,
  o: { C: number; O: number; H: number; W: number; k?: number; kw?: number; group?: number; attrs: Record<string, AttrValue>; bias: boolean; relu: boolean },
): Graph => {
  const rand = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))
  const k = o.k ?? 3
  const inits = new Map<string, Tensor>([["w", rand([o.O, o.C / (o.group ?? 1), k, o.kw ?? k])]])
  if (o.bias) inits.set("b", rand([o.O]))
  return makeGraph({
    opset: 13,
    inputs: [{ name: "x", type: { dtype: "float32", shape: [1, o.C, o.H, o.W] } }],
    outputs: [{ name: "y", type: { dtype: "float32", shape: [] } }],
    initializers: inits,
    nodes: [node("Conv", o.bias ? ["x", "w", "b"] : ["x", "w"], [o.relu ? "c" : "y"], o.attrs), ...(o.relu ? [node("Relu", ["c"], ["y"])] : [])],
  })
}

const arbWinogradCase: fc.Arbitrary<ConvCase> = fc.integer({ min: 1, max: 1 << 30 }).map((seed) => {
  const rng = prng(seed)
  const C = rng.pick([16, 24, 32])
  const O = rng.pick([16, 32])
  // at least 4×4 output tiles of 4×4 (F(4×4), rewrite.WinogradConv's MIN_TILES), or of 2×2 (F(2×2))
  const small = rng.next() < 0.35
  const [H, W] = small ? [rng.int(9, 11), rng.int(9, 11)] : [rng.int(15, 21), rng.int(15, 21)]
  const auto = rng.pick(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
  const attrs: Record<string, AttrValue> = {
    kernel_shape: attr.ints([3, 3]),
    ...(auto === "NOTSET" ? { pads: attr.ints([rng.int(0, 2), rng.int(0, 2), rng.int(0, 2), rng.int(0, 2)]) } : { auto_pad: attr.str(auto) }),
  }
  const graph = convGraph(rng, { C, O, H, W, attrs, bias: rng.next() < 0.6, relu: rng.next() < 0.5 })
  const rand = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))
  return { graph, inputs: new Map([["x", rand([1, C, H, W])]]), lanes: rng.pick([4, 8]) }
})

const rewritten = (g: Graph, lanes: number) => winogradConvSync(alterLayoutSync(g, { vectorLanes: lanes }))

describe("rewrite.WinogradConv: F(4×4, 3×3) in the blocked layout", () => {
  it("the transform matrices compute a 3×3 correlation: Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A = g ⋆ d on random tiles, F(4×4) and F(2×2)", () => {
    const mat = (a: readonly (readonly number[])[], b: readonly (readonly number[])[]) => a.map((r) => b[0].map((_, j) => r.reduce((s, x, k) => s + x * b[k][j], 0)))
    const tr = (a: readonly (readonly number[])[]) => a[0].map((_, j) => a.map((r) => r[j]))
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1 << 30 }), (seed) => {
        const rng = prng(seed)
        const m = rng.pick([2, 4] as const)
        const { BT, G, AT } = WINOGRAD[m]
        const g = [0, 1, 2].map(() => [0, 1, 2].map(() => rng.float(-1, 1)))
        const d = Array.from({ length: m + 2 }, () => Array.from({ length: m + 2 }, () => rng.float(-1, 1)))
        const U = mat(mat(G, g), tr(G))
        const V = mat(mat(BT, d), tr(BT))
        const Y = mat(mat(AT, U.map((r, i) => r.map((u, j) => u * V[i][j]))), tr(AT))
        for (let i = 0; i < m; i++)
          for (let j = 0; j < m; j++) {
            let want = 0
            for (let r = 0; r < 3; r++) for (let s = 0; s < 3; s++) want += g[r][s] * d[i + r][j + s]
            expect(Math.abs(Y[i][j] - want)).toBeLessThan(1e-9)
          }
      }),
      lawParams(50),
    )
  })

  it("a blocked 3×3 conv becomes ConvWinogradNCHWc and evaluates as before", () => {
    fc.assert(
      fc.property(arbWinogradCase, ({ graph, inputs, lanes }) => {
        const after = rewritten(graph, lanes)
        const ops = after.nodes.map((n) => n.op)
        expect(ops).toContain("ConvWinogradNCHWc")
        expect(ops).not.toContain("ConvNCHWc")
        // the reference Conv sums in float32, the Winograd reference in float64
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs), 1e-4, 1e-4)
      }),
      lawParams(40),
    )
  })

  it("compiled ConvWinogradNCHWc (the Winograd template, js) computes what the evaluator does", async () => {
    await fc.assert(
      fc.asyncProperty(arbWinogradCase, async ({ graph, inputs, lanes }) => {
        const program = await Effect.runPromise(compileGraph(graph, makeTarget("js", { vectorLanes: lanes }), { optLevel: 3 }))
        const wino = program.kernels.find((k) => program.fused.groups[k.group].ops.includes("ConvWinogradNCHWc"))
        expect(wino?.kind, "the Winograd group is compiled").toBe("compiled")
        const exec = await Effect.runPromise(loadProgram(program, makeTarget("js")))
        // float32 transforms: the products' error grows with the channels summed
        assertAllClose([...exec.run(inputs).values()], evalGraph(graph, inputs), 1e-4, 5e-4)
      }),
      lawParams(12),
    )
  }, 120_000)

  it("every configuration of the Winograd template's space computes what its TE says", async () => {
    await fc.assert(
      fc.asyncProperty(arbWinogradCase, fc.array(fc.nat(), { minLength: 5, maxLength: 5 }), async ({ graph, lanes }, picks) => {
        const program = await Effect.runPromise(compileGraph(graph, makeTarget("js", { vectorLanes: lanes }), { optLevel: 3 }))
        const group = program.fused.groups.find((g) => g.ops.includes("ConvWinogradNCHWc"))!
        const te = buildGroupTE(program.fused, group)
        const base = baseSchedule(te.outputs)
        const t = templateFor(base)
        expect(t).toBe(winogradTemplate)
        const knobs = t.space(te.outputs, base)
        const config: Config = Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]]))
        // the TE's placeholders from the program's values: the graph's constants, random activations
        const rng = prng(picks[0] + 1)
        const feeds = new Map<string, Tensor>()
        for (const [p, v] of te.placeholders) {
          const c = program.graph.initializers.get(v)
          const shape = program.graph.valueTypes.get(v)!.shape as number[]
          feeds.set(p, c ?? tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1))))
        }
        const f = runTirSync(cpuTirPipeline(), lowerSync(t.apply(te.outputs, base, config)))
        const outs = evaluatePrimFunc(f, feeds)
        assertAllClose(te.outputs.map((o) => outs.get(o.name)!), evaluateTE(te.outputs, feeds), 1e-4, 1e-4)
      }),
      lawParams(5),
    )
  }, 120_000)

  it("leaves strided, dilated, grouped, narrow and small convolutions direct", () => {
    const rng = prng(7)
    const base = { C: 16, O: 16, H: 20, W: 20, bias: false, relu: false }
    const k3 = { kernel_shape: attr.ints([3, 3]), pads: attr.ints([1, 1, 1, 1]) }
    const cases: [string, Graph][] = [
      ["stride 2", convGraph(rng, { ...base, attrs: { ...k3, strides: attr.ints([2, 2]) } })],
      ["dilation 2", convGraph(rng, { ...base, attrs: { ...k3, dilations: attr.ints([2, 2]) } })],
      ["depthwise", convGraph(rng, { ...base, group: 16, attrs: { ...k3, group: attr.int(16) } })],
      ["8 channels", convGraph(rng, { ...base, C: 8, attrs: k3 })],
      ["6×6 image (9 tiles of 2×2)", convGraph(rng, { ...base, H: 6, W: 6, attrs: k3 })],
      ["5×5 kernel", convGraph(rng, { ...base, k: 5, attrs: { kernel_shape: attr.ints([5, 5]), pads: attr.ints([2, 2, 2, 2]) } })],
    ]
    for (const [what, g] of cases) {
      const ops = rewritten(g, 8).nodes.map((n) => n.op)
      expect(ops, what).not.toContain("ConvWinogradNCHWc")
      expect(ops, what).toContain("ConvNCHWc")
    }
    // 7×7 (4 tiles of 4×4, 16 of 2×2) takes F(2×2): weights of 4×4 tiles; 14×14 F(4×4)
    const tileOf = (H: number) => {
      const after = rewritten(convGraph(rng, { ...base, H, W: H, attrs: k3 }), 8)
      const n = after.nodes.find((x) => x.op === "ConvWinogradNCHWc")!
      return after.initializers.get(n.inputs[1])!.shape[0]
    }
    expect(tileOf(7)).toBe(4)
    expect(tileOf(14)).toBe(6)
    // a target whose products hold 16 tiles in registers: 14×14 (16 tiles of 4×4) takes F(2×2), 20×20 (25) F(4×4)
    const tileFor = (H: number, target: WinogradTarget) => {
      const after = winogradConvSync(alterLayoutSync(convGraph(rng, { ...base, H, W: H, attrs: k3 }), { vectorLanes: 8 }), target)
      const n = after.nodes.find((x) => x.op === "ConvWinogradNCHWc")!
      return after.initializers.get(n.inputs[1])!.shape[0]
    }
    expect(tileFor(14, { registerTiles: 16 })).toBe(4)
    expect(tileFor(20, { registerTiles: 16 })).toBe(6)
    expect(tileFor(14, { registerTiles: 8 })).toBe(6)
  })
})

// Model-like conv nets (arbitrary-models.ts, 8 to 32 channels, images 8 to 14 pixels): conv-BN
// blocks, residual blocks and pooling, where some 3×3 stride-1 convs take Winograd and the strided,
// dilated, grouped and narrow ones stay direct, side by side in one graph.
const arbWinogradNet = fc.tuple(
  arbModelGraphCase({ stems: ["image"], motifs: ["conv-bn-act", "residual", "pool", "squeeze-excite"], channels: [16, 24, 32, 8], imageSize: [8, 14], islands: false, maxMotifs: 3 }),
  fc.constantFrom(4, 8),
)

describe("rewrite.WinogradConv: model-like conv nets", () => {
  it("after the blocked layout, Winograd where it applies: the graph evaluates as the original", () => {
    let winograd = 0
    fc.assert(
      fc.property(arbWinogradNet, ([{ graph, inputs }, lanes]) => {
        const after = rewritten(graph, lanes)
        winograd += after.nodes.filter((n) => n.op === "ConvWinogradNCHWc").length
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs), 1e-4, 1e-4)
      }),
      lawParams(30),
    )
    // the cases do reach Winograd
    expect(winograd).toBeGreaterThan(5)
  })
})

// Which convs take Winograd, and which tile: single blocked convs with random channels (8 to 32),
// images (5 to 18 pixels, batch 1 or 2: tile counts on both sides of MIN_TILES), kernels (3×1 too), strides,
// dilations (explicit ones of 1 too), depthwise groups, pads and auto_pad, some with a computed weight (an Identity of the
// constant: no kernel transform at compile time), and the model-like nets above. An oracle read off
// each ConvNCHWc (group 1, 3×3, stride and dilation 1, ≥ 16 channels in and out, a constant
// weight; F(4×4) with ≥ 16 tiles of 4×4 and more than the target's register block of tiles (none,
// 8, 16, 24 or 48: random), else F(2×2) with ≥ 16 tiles of 2×2) says how many convs take which tile
// and how many stay direct.
const arbAnyConv: fc.Arbitrary<ConvCase & { readonly computedWeight: boolean }> = fc.integer({ min: 1, max: 1 << 30 }).map((seed) => {
  const rng = prng(seed)
  const C = rng.pick([8, 12, 16, 24, 32, 16])
  const depthwise = rng.next() < 0.15
  const O = depthwise ? C : rng.pick([8, 12, 16, 24, 16])
  const k = rng.pick([3, 3, 3, 3, 3, 3, 1, 5])
  // now and then a 3×1 or 1×3 kernel
  const [kh, kw] = k === 3 && rng.next() < 0.15 ? rng.pick([[3, 1], [1, 3]]) : [k, k]
  // at least the widest window (5: a 5×5 kernel, or a 3×3 dilated by 2)
  const [H, W] = rng.next() < 0.3 ? [rng.int(5, 10), rng.int(5, 10)] : [rng.int(11, 18), rng.int(11, 18)]
  const auto = rng.pick(["NOTSET", "NOTSET", "SAME_UPPER", "VALID"])
  const attrs: Record<string, AttrValue> = {
    kernel_shape: attr.ints([kh, kw]),
    ...(rng.next() < 0.2 ? { strides: attr.ints([rng.int(1, 2), rng.int(1, 2)]) } : {}),
    ...(k === 3 && rng.next() < 0.25 ? { dilations: attr.ints(rng.pick([[1, 2], [2, 1], [2, 2], [1, 1]])) } : {}),
    ...(depthwise ? { group: attr.int(C) } : {}),
    ...(auto === "NOTSET" ? { pads: attr.ints([rng.int(0, 2), rng.int(0, 2), rng.int(0, 2), rng.int(0, 2)]) } : { auto_pad: attr.str(auto) }),
  }
  const graph = convGraph(rng, { C, O, H, W, k: kh, kw, group: depthwise ? C : 1, attrs, bias: rng.next() < 0.5, relu: rng.next() < 0.3 })
  const N = rng.pick([1, 1, 2])
  const batched: Graph = { ...graph, inputs: [{ name: "x", type: { dtype: "float32", shape: [N, C, H, W] } }] }
  const rand = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))
  return { graph: batched, inputs: new Map([["x", rand([N, C, H, W])]]), lanes: rng.pick([4, 8]), computedWeight: rng.next() < 0.15 }
})

/** The tile (4 or 2) the conv `n` of a blocked graph should take, or undefined: it stays direct. */
const expectedTile = (g: Graph, n: Graph["nodes"][number], target: WinogradTarget): number | undefined => {
  const w = g.initializers.get(n.inputs[1])
  const [x, y] = [g.valueTypes.get(n.inputs[0]), g.valueTypes.get(n.outputs[0])]
  if (!w || !x || !y) return undefined
  const ints = (k: string) => (n.attrs[k]?.kind === "ints" ? (n.attrs[k].value as readonly number[]) : [1, 1])
  const group = n.attrs.group?.kind === "int" ? n.attrs.group.value : 1
  const [OB, IB, KH, KW, ib, ob] = w.shape
  if (group !== 1 || KH !== 3 || KW !== 3 || ints("strides").some((s) => s !== 1) || ints("dilations").some((d) => d !== 1)) return undefined
  if (IB * ib < 16 || OB * ob < 16) return undefined
  const [N, OH, OW] = [x.shape[0], y.shape[2], y.shape[3]] as number[]
  const tiles = (m: number) => Math.ceil(OH / m) * Math.ceil(OW / m) * N
  return tiles(4) >= Math.max(16, (target.registerTiles ?? 0) + 1) ? 4 : tiles(2) >= 16 ? 2 : undefined
}

/** `g` with the weights of its blocked convs read through an Identity (no longer constants). */
const computeWeights = (g: Graph): Graph => ({
  ...g,
  nodes: g.nodes.flatMap((n) =>
    n.op === "ConvNCHWc" ? [{ name: `${n.name}_w`, op: "Identity", domain: "", inputs: [n.inputs[1]], outputs: [`${n.inputs[1]}_computed`], attrs: {} }, { ...n, inputs: [n.inputs[0], `${n.inputs[1]}_computed`, ...n.inputs.slice(2)] }] : [n],
  ),
})

describe("rewrite.WinogradConv: exactly the convs it applies to", () => {
  it("rewrites the convs the oracle picks, with its tile, and leaves the others direct; evaluates as before", () => {
    const counts = { 4: 0, 2: 0, direct: 0 }
    // F(2×2) where the register block alone turned F(4×4) down
    let byRegisters = 0
    const either = fc.oneof(
      arbAnyConv,
      arbWinogradNet.map(([c, lanes]) => ({ ...c, lanes, computedWeight: false })),
    )
    // the target's register block of the products' tiles: none, or 8 to 48
    const arbTarget = fc.constantFrom<WinogradTarget>({}, {}, { registerTiles: 8 }, { registerTiles: 16 }, { registerTiles: 24 }, { registerTiles: 48 })
    fc.assert(
      fc.property(either, arbTarget, ({ graph, inputs, lanes, computedWeight }, target) => {
        const blocked0 = alterLayoutSync(graph, { vectorLanes: lanes })
        const blocked = computedWeight ? computeWeights(blocked0) : blocked0
        const want = blocked.nodes.filter((n) => n.op === "ConvNCHWc").map((n) => (computedWeight ? undefined : expectedTile(blocked, n, target)))
        byRegisters += blocked.nodes.filter((n) => n.op === "ConvNCHWc" && !computedWeight && expectedTile(blocked, n, target) === 2 && expectedTile(blocked, n, {}) === 4).length
        const after = winogradConvSync(blocked, target)
        const got = after.nodes.filter((n) => n.op === "ConvWinogradNCHWc").map((n) => after.initializers.get(n.inputs[1])!.shape[0] - 2)
        expect(got.sort()).toEqual(want.filter((m) => m !== undefined).sort())
        expect(after.nodes.filter((n) => n.op === "ConvNCHWc").length).toBe(want.filter((m) => m === undefined).length)
        for (const m of want) counts[m === 4 || m === 2 ? m : "direct"] += 1
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs), 1e-4, 1e-4)
      }),
      lawParams(150),
    )
    // the cases reach both tiles and direct convs
    expect(counts[4]).toBeGreaterThan(1)
    expect(Math.min(counts[2], counts.direct)).toBeGreaterThan(3)
    expect(byRegisters).toBeGreaterThan(1)
    expect(minTiles4({ registerTiles: 16 })).toBe(17)
  })
})

// Blocked convs alterLayout does not make, written by hand: ConvNCHWc in two groups of 16 to 32
// input channels each (every group wide enough for Winograd's MIN_CHANNELS, but the op has no
// groups), on a blocked input of batch 1 or 2. They stay direct, and the graph evaluates as before.
const arbGroupedBlockedConv = fc.integer({ min: 1, max: 1 << 30 }).map((seed) => {
  const rng = prng(seed)
  const b = rng.pick([4, 8])
  const [perGroup, O, N, H, W] = [rng.pick([16, 24, 32]), rng.pick([16, 32]), rng.int(1, 2), rng.int(8, 12), rng.int(8, 12)]
  const C = 2 * perGroup
  const rand = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, c) => a * c, 1) }, () => rng.float(-1, 1)))
  const pads = [rng.int(0, 1), rng.int(0, 1), rng.int(0, 1), rng.int(0, 1)]
  const [OH, OW] = [H + pads[0] + pads[2] - 2, W + pads[1] + pads[3] - 2]
  const graph = makeGraph({
    opset: 13,
    inputs: [{ name: "x", type: { dtype: "float32", shape: [N, C / b, H, W, b] } }],
    outputs: [{ name: "y", type: { dtype: "float32", shape: [N, O / b, OH, OW, b] } }],
    initializers: new Map([["w", rand([O / b, perGroup / b, 3, 3, b, b])]]),
    nodes: [
      {
        name: "conv",
        op: "ConvNCHWc",
        domain: TESSERA_DOMAIN,
        inputs: ["x", "w"],
        outputs: ["y"],
        attrs: { in_block: attr.int(b), out_block: attr.int(b), group: attr.int(2), kernel_shape: attr.ints([3, 3]), pads: attr.ints(pads) },
      },
    ],
  })
  return { graph, inputs: new Map([["x", rand([N, C / b, H, W, b])]]) }
})

describe("rewrite.WinogradConv: blocked convs written by hand", () => {
  it("a ConvNCHWc in two groups of ≥ 16 channels stays direct and evaluates as before", () => {
    fc.assert(
      fc.property(arbGroupedBlockedConv, ({ graph, inputs }) => {
        const after = winogradConvSync(graph)
        expect(after.nodes.map((n) => n.op)).toEqual(["ConvNCHWc"])
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs), 1e-4, 1e-4)
      }),
      lawParams(10),
    )
  })

  it("ConvNCHWc's type inference rejects a kernel that is not 6-D (the rule takes its rank for granted)", () => {
    const { graph } = fc.sample(arbGroupedBlockedConv, lawParams(1))[0]
    const w = graph.initializers.get("w")!
    const flat = tensor("float32", [...w.shape.slice(0, 4), w.shape[4] * w.shape[5]], w.data)
    expect(() => bindSync({ ...graph, initializers: new Map([["w", flat]]) })).toThrow(/rank 6/)
  })
})
