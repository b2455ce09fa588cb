// The layout rewrite of an int8 convolution's constant weights (rewrite.AlterLayout's
// int8-conv-to-packed rule, src/rewrite/pack-int8.ts): QLinearConv of random batches, channels,
// images, kernels, strides, pads and dilations, int8 or uint8 activations and weights, weight zero
// points that make w − w_zp an s8 value (0 for int8, 128 for uint8, absent) or not, per-tensor or
// per-channel weight scales, a bias or none, group 1 or 2. A conv is packed exactly when the
// rule's statement says so, and a grouped one becomes QLinearConvGrouped (int8-grouped-to-packed:
// its weights widened to int16, its multipliers folded); the rewritten graph evaluates exactly as the original (bit for bit: the
// packed op's meaning is QLinearConv's over the same s8 values); and compiled (js, and c where gcc
// is), the packed compute gives exactly what the unpacked compute gives (opt level 3 with the
// layout pass against 2 without it).
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attr } from "../../src/ast/graph/attrs.js"
import { prng } from "../../src/ast/graph/arbitrary-builder.js"
import { makeGraph, node, type Graph } from "../../src/ast/graph/graph.js"
import { tensor, type Tensor } from "../../src/ast/graph/tensor.js"
import { makeTarget } from "../../src/ast/target.js"
import { depthwiseWindowGrid } from "../../src/ast/graph/ops/int8-packed.js"
import { hostCpu } from "../../src/device/host.js"
import { compileGraph, loadProgram } from "../../src/pipeline.js"
import { alterLayoutSync } from "../../src/rewrite/alter-layout.js"
import { int8DepthwiseChannels } from "../../src/rewrite/pack-int8.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import { evalGraph, lawParams } from "../support.js"
import { HAVE_GCC, mergeGraphs, NO_GCC } from "../support-c.js"

/** The graph compiled to C for an AVX-512 target with or without VNNI, run on the inputs: its compiled graph and outputs. */
const compiledOnC = async (graph: Graph, inputs: ReadonlyMap<string, Tensor>, vnni: boolean) => {
  const target = makeTarget("c", { vectorLanes: 16, isa: "avx512", fmaUnits: 2, fmaLatency: 4, vnni })
  const program = await Effect.runPromise(compileGraph(graph, target))
  const exec = await Effect.runPromise(loadProgram(program, target))
  const got = exec.run(inputs)
  const out = graph.outputs.map((o) => Array.from(got.get(o.name)!.data as ArrayLike<number>))
  exec.module.close()
  return { graph: program.graph, out }
}

interface Int8ConvCase {
  readonly graph: Graph
  readonly inputs: ReadonlyMap<string, Tensor>
  /** Must the rule pack it (from its statement: group 1, w_zp absent or 0 for int8 weights, 128 for uint8)? */
  readonly packs: boolean
  /** Is it grouped (then the int8-grouped-to-packed rule widens its weights at compile time: QLinearConvGrouped)? */
  readonly grouped: boolean
}

const ints = (dtype: "int8" | "uint8", shape: number[], rng: ReturnType<typeof prng>): Tensor => {
  const n = shape.reduce((a, b) => a * b, 1)
  const [lo, hi] = dtype === "int8" ? [-128, 127] : [0, 255]
  const data = Array.from({ length: n }, () => rng.int(lo, hi))
  return tensor(dtype, shape, dtype === "int8" ? Int8Array.from(data) : Uint8Array.from(data))
}

const int8ConvCase = (seed: number): Int8ConvCase => {
  const rng = prng(seed)
  const xdt = rng.pick(["int8", "uint8"] as const)
  const wdt = rng.pick(["int8", "uint8"] as const)
  const group = rng.next() < 0.15 ? 2 : 1
  const N = rng.int(1, 2)
  const C = group * rng.int(1, 12)
  const M = group * rng.pick([rng.int(1, 8), rng.int(9, 40)])
  const k = rng.pick([1, 1, 3, 2])
  const stride = rng.int(1, 2)
  const dil = k > 1 && rng.next() < 0.2 ? 2 : 1
  const pad = rng.int(0, 1)
  const H = rng.int((k - 1) * dil + 1, 9)
  const W = rng.int((k - 1) * dil + 1, 9)
  // the weight zero point: the shift that makes it s8 (or, for int8, absent), or another value
  const shiftOk = rng.next() < 0.8
  const wzpMode = wdt === "int8" ? (shiftOk ? rng.pick(["absent", "zero"] as const) : "other") : shiftOk ? "128" : "other"
  const perChannel = rng.next() < 0.6
  const init = new Map<string, Tensor>()
  init.set("xs", tensor("float32", [], Float32Array.of(Math.fround(rng.float(0.005, 0.05)))))
  init.set("xzp", ints(xdt, [], rng))
  init.set("w", ints(wdt, [M, C / group, k, k], rng))
  const ws = Array.from({ length: perChannel ? M : 1 }, () => Math.fround(rng.float(0.002, 0.02)))
  init.set("ws", tensor("float32", perChannel ? [M] : [], Float32Array.from(ws)))
  if (wzpMode !== "absent") {
    const z = wzpMode === "zero" ? 0 : wzpMode === "128" ? 128 : wdt === "int8" ? rng.pick([-3, 5, 17]) : rng.pick([0, 100, 131])
    init.set("wzp", tensor(wdt, [], wdt === "int8" ? Int8Array.of(z) : Uint8Array.of(z)))
  }
  const ydt = rng.pick(["int8", "uint8"] as const)
  // (y's scale about the sums' spread, so the outputs are neither all saturated nor all zero)
  init.set("ys", tensor("float32", [], Float32Array.of(Math.fround(0.02 * 0.01 * 60 * Math.sqrt((C / group) * k * k) * rng.float(0.5, 2)))))
  init.set("yzp", ints(ydt, [], rng))
  const bias = rng.next() < 0.5
  if (bias) init.set("b", tensor("int32", [M], Int32Array.from({ length: M }, () => rng.int(-3000, 3000))))
  const inputs = ["x", "xs", "xzp", "w", "ws", wzpMode === "absent" ? "" : "wzp", "ys", "yzp", ...(bias ? ["b"] : [])]
  const attrs = { strides: attr.ints([stride, stride]), pads: attr.ints([pad, pad, pad, pad]), dilations: attr.ints([dil, dil]), ...(group !== 1 ? { group: attr.int(group) } : {}) }
  const graph = makeGraph({
    opset: 13,
    inputs: [{ name: "x", type: { dtype: xdt, shape: [N, C, H, W] } }],
    outputs: [{ name: "y", type: { dtype: ydt, shape: [] } }],
    initializers: init,
    nodes: [node("QLinearConv", inputs, ["y"], attrs)],
  })
  return { graph, inputs: new Map([["x", ints(xdt, [N, C, H, W], rng)]]), packs: group === 1 && wzpMode !== "other", grouped: group !== 1 }
}

const arbCase = fc.integer({ min: 1, max: 1 << 30 }).map(int8ConvCase)
const LAYOUT = { vectorLanes: 16, fmaUnits: 2, fmaLatency: 4, vectorRegisters: 32 }
const packedCount = (g: Graph): number => g.nodes.filter((n) => n.op === "QLinearConvPacked").length
const groupedCount = (g: Graph): number => g.nodes.filter((n) => n.op === "QLinearConvGrouped").length

/** The graph rewritten evaluates as the original, bit for bit (dtype, shape and values of its first output). */
const expectEvaluatesAsBefore = (after: Graph, graph: Graph, inputs: ReadonlyMap<string, Tensor>): void => {
  const [got] = evalGraph(after, inputs)
  const [want] = evalGraph(graph, inputs)
  expect(got.dtype).toBe(want.dtype)
  expect(got.shape).toEqual(want.shape)
  expect(Array.from(got.data as ArrayLike<number>)).toEqual(Array.from(want.data as ArrayLike<number>))
}

/** The graph compiled for a js target of `lanes` lanes at an opt level and run: its program and first output. */
const compiledJs = async (graph: Graph, inputs: ReadonlyMap<string, Tensor>, lanes: number, optLevel: number) => {
  const t = makeTarget("js", { isa: "avx512", vectorLanes: lanes, fmaUnits: 2, fmaLatency: 4 })
  const program = await Effect.runPromise(compileGraph(graph, t, { optLevel }))
  const exec = await Effect.runPromise(loadProgram(program, makeTarget("js")))
  return { program, out: [...exec.run(inputs).values()][0] }
}

describe("the layout rewrite of an int8 conv's constant weights (int8-conv-to-packed)", () => {
  it("packs a conv exactly when its weights' zero point makes them s8 and it is ungrouped, and the graph evaluates as before, bit for bit", () => {
    const seen = { packed: 0, left: 0 }
    fc.assert(
      fc.property(arbCase, ({ graph, inputs, packs, grouped }) => {
        const after = alterLayoutSync(bindSync(graph), LAYOUT)
        expect(packedCount(after)).toBe(packs ? 1 : 0)
        expect(groupedCount(after)).toBe(grouped ? 1 : 0)
        seen[packs ? "packed" : "left"]++
        expectEvaluatesAsBefore(after, graph, inputs)
      }),
      lawParams(150),
    )
    expect(Math.min(seen.packed, seen.left)).toBeGreaterThan(15)
  })

  it("compiled (js), the packed compute equals the unpacked one bit for bit", async () => {
    let packed = 0
    let seenGrouped = 0
    await fc.assert(
      fc.asyncProperty(arbCase, async ({ graph, inputs, packs, grouped }) => {
        const a = await compiledJs(graph, inputs, 16, 3)
        const b = await compiledJs(graph, inputs, 16, 2)
        expect(packedCount(a.program.graph)).toBe(packs ? 1 : 0)
        expect(groupedCount(a.program.graph)).toBe(grouped ? 1 : 0)
        if (grouped) seenGrouped++
        expect(a.program.kernels.every((k) => k.kind === "compiled")).toBe(true)
        if (packs) packed++
        expect(Array.from(a.out.data as ArrayLike<number>)).toEqual(Array.from(b.out.data as ArrayLike<number>))
      }),
      lawParams(30),
    )
    expect(packed).toBeGreaterThan(5)
    expect(seenGrouped).toBeGreaterThan(0)
  }, 300_000)

  it.skipIf(!HAVE_GCC)(`compiled to C (one batch of cases, one gcc run a side), the packed compute equals the unpacked one bit for bit${NO_GCC}`, async () => {
    const cases = Array.from({ length: 24 }, (_, k) => int8ConvCase(7000 + k))
    expect(cases.filter((c) => c.packs).length).toBeGreaterThan(4)
    const { graph, inputs } = mergeGraphs(cases)
    const target = makeTarget("c", { vectorLanes: 16, isa: "avx512", fmaUnits: 2, fmaLatency: 4 })
    const run = async (optLevel: number) => {
      const program = await Effect.runPromise(compileGraph(graph, target, { optLevel }))
      const exec = await Effect.runPromise(loadProgram(program, target))
      const got = exec.run(inputs)
      const out = graph.outputs.map((o) => Array.from(got.get(o.name)!.data as ArrayLike<number>))
      exec.module.close()
      return { program, out }
    }
    const a = await run(3)
    expect(packedCount(a.program.graph)).toBe(cases.filter((c) => c.packs).length)
    expect(groupedCount(a.program.graph)).toBe(cases.filter((c) => c.grouped).length)
    const b = await run(2)
    expect(packedCount(b.program.graph)).toBe(0)
    expect(a.out).toEqual(b.out)
  }, 600_000)

  it("on a VNNI target of 16 lanes, sets channel_lanes 16 exactly where int8EpilogueLanes says (the channels in the dot's lanes, M whole blocks), never elsewhere; the graph evaluating as before, bit for bit", () => {
    const seen = { taken: 0, left: 0 }
    const lanesOf = (g: Graph): number[] => g.nodes.filter((n) => n.op === "QLinearConvPacked").map((n) => (n.attrs.channel_lanes?.kind === "int" ? Number(n.attrs.channel_lanes.value) : 0))
    fc.assert(
      fc.property(arbCase, fc.constantFrom(4, 8, 16), ({ graph, inputs, packs }, lanes) => {
        const after = alterLayoutSync(bindSync(graph), { ...LAYOUT, vectorLanes: lanes, int8Dot: "vnni" })
        const pk = after.nodes.filter((n) => n.op === "QLinearConvPacked")
        expect(pk.length).toBe(packs ? 1 : 0)
        const expected = pk.map((n) => {
          const m = n.attrs.m?.kind === "int" ? Number(n.attrs.m.value) : -1
          return lanes === 16 && n.attrs.pixel_lanes === undefined && m % 16 === 0 ? 16 : 0
        })
        expect(lanesOf(after)).toEqual(expected)
        // (no dot of its own: never)
        expect(lanesOf(alterLayoutSync(bindSync(graph), { ...LAYOUT, vectorLanes: lanes })).every((l) => l === 0)).toBe(true)
        for (const l of expected) seen[l > 0 ? "taken" : "left"]++
        expectEvaluatesAsBefore(after, graph, inputs)
      }),
      lawParams(300),
    )
    // (M whole blocks of 16 are a few of the random cases: the C case below has more)
    expect(seen.taken).toBeGreaterThan(0)
    expect(seen.left).toBeGreaterThan(20)
  })

  it.skipIf(!HAVE_GCC || !hostCpu().vnni)(`channels-in-lanes convs on a VNNI target narrow their requantized values from blocks of 16 (channel_lanes), compiled to C equal to the form without them bit for bit${NO_GCC}`, async () => {
    // 1×1 convs at 14² (196 pixels: tiles of 64, a tail of 4) and 7² (49: tiles of 16, a tail of 1), a 3×3 pad 1 at 7², int8 and uint8
    const rng = prng(29)
    const cases = [["int8", 1, 14, 32], ["uint8", 1, 7, 48], ["int8", 3, 7, 16]].map(([xdt, K, H, M], k) => {
      const dt = xdt as "int8" | "uint8"
      const [kk, hh, mm, C] = [K as number, H as number, M as number, 24]
      const init = new Map<string, Tensor>([
        ["xs", tensor("float32", [], Float32Array.of(0.02))], ["xzp", ints(dt, [], rng)], ["w", ints("int8", [mm, C, kk, kk], rng)],
        ["ws", tensor("float32", [mm], Float32Array.from({ length: mm }, () => Math.fround(rng.float(0.002, 0.02))))], ["ys", tensor("float32", [], Float32Array.of(0.1))], ["yzp", ints(dt, [], rng)],
      ])
      const p = (kk - 1) / 2
      const graph = makeGraph({
        opset: 13,
        inputs: [{ name: "x", type: { dtype: dt, shape: [1, C, hh, hh] } }],
        outputs: [{ name: "y", type: { dtype: dt, shape: [] } }],
        initializers: init,
        nodes: [node("QLinearConv", ["x", "xs", "xzp", "w", "ws", "", "ys", "yzp"], ["y"], { pads: attr.ints([p, p, p, p]) })],
      })
      return { graph, inputs: new Map([["x", ints(dt, [1, C, hh, hh], prng(300 + k))]]), packs: true, grouped: false }
    })
    const { graph, inputs } = mergeGraphs(cases)
    const blocked = (g: Graph) => g.nodes.filter((n) => n.op === "QLinearConvPacked" && n.attrs.channel_lanes !== undefined).length
    const a = await compiledOnC(graph, inputs, true)
    expect(blocked(a.graph)).toBe(3)
    const b = await compiledOnC(graph, inputs, false)
    expect(blocked(b.graph)).toBe(0)
    expect(a.out).toEqual(b.out)
  }, 600_000)

  it.skipIf(!HAVE_GCC || !hostCpu().vnni)(`a few-channel conv on a VNNI target takes the dot along the kernel's width where that takes fewer dots (dot_kw), compiled to C equal to the channels-in-lanes form bit for bit${NO_GCC}`, async () => {
    // a 7×7 / 2 stem over 3 channels (42 dots a pixel against 49: taken), int8 and uint8; a 3×3 / 2 one (9 against 9: not)
    const rng = prng(13)
    const cases = [["int8", 7], ["uint8", 7], ["int8", 3]].map(([xdt, K], k) => {
      const [C, M, H] = [3, 16, 64]
      const dt = xdt as "int8" | "uint8"
      const kk = K as number
      const init = new Map<string, Tensor>([
        ["xs", tensor("float32", [], Float32Array.of(0.02))], ["xzp", ints(dt, [], rng)], ["w", ints("int8", [M, C, kk, kk], rng)],
        ["ws", tensor("float32", [M], Float32Array.from({ length: M }, () => Math.fround(rng.float(0.002, 0.02))))], ["ys", tensor("float32", [], Float32Array.of(0.05))], ["yzp", ints(dt, [], rng)],
      ])
      const p = (kk - 1) / 2
      const graph = makeGraph({
        opset: 13,
        inputs: [{ name: "x", type: { dtype: dt, shape: [1, C, H, H] } }],
        outputs: [{ name: "y", type: { dtype: dt, shape: [] } }],
        initializers: init,
        nodes: [node("QLinearConv", ["x", "xs", "xzp", "w", "ws", "", "ys", "yzp"], ["y"], { pads: attr.ints([p, p, p, p]), strides: attr.ints([2, 2]) })],
      })
      return { graph, inputs: new Map([["x", ints(dt, [1, C, H, H], prng(200 + k))]]), packs: true, grouped: false }
    })
    const { graph, inputs } = mergeGraphs(cases)
    const taps = (g: Graph) => g.nodes.filter((n) => n.op === "QLinearConvPacked" && n.attrs.dot_kw !== undefined).length
    const a = await compiledOnC(graph, inputs, true)
    expect(taps(a.graph)).toBe(2)
    const b = await compiledOnC(graph, inputs, false)
    expect(taps(b.graph)).toBe(0)
    expect(a.out).toEqual(b.out)
  }, 600_000)

  it.skipIf(!HAVE_GCC || !hostCpu().vnni)(`a depthwise conv on a VNNI target takes the window form (int8-grouped-to-packed with the taps' weights), compiled to C equal to the int16 form bit for bit${NO_GCC}`, async () => {
    // 56² under 3×3, pad 1 (depthwiseWindowGrid: rows of whole vectors, 64), 14² (rows of 16, its
    // 222 pixels rounded up to 224: the product at root) and 28² (no grid: the int16 form), int8 and
    // uint8 activations
    const rng = prng(11)
    const cases = [["int8", 56], ["uint8", 56], ["int8", 28], ["uint8", 14]].map(([xdt, H], k) => {
      const C = 8
      const dt = xdt as "int8" | "uint8"
      const init = new Map<string, Tensor>([
        ["xs", tensor("float32", [], Float32Array.of(0.02))], ["xzp", ints(dt, [], rng)], ["w", ints("int8", [C, 1, 3, 3], rng)],
        ["ws", tensor("float32", [C], Float32Array.from({ length: C }, () => Math.fround(rng.float(0.002, 0.02))))], ["ys", tensor("float32", [], Float32Array.of(0.05))], ["yzp", ints(dt, [], rng)],
      ])
      const graph = makeGraph({
        opset: 13,
        inputs: [{ name: "x", type: { dtype: dt, shape: [1, C, H as number, H as number] } }],
        outputs: [{ name: "y", type: { dtype: dt, shape: [] } }],
        initializers: init,
        nodes: [node("QLinearConv", ["x", "xs", "xzp", "w", "ws", "", "ys", "yzp"], ["y"], { pads: attr.ints([1, 1, 1, 1]), group: attr.int(C) })],
      })
      return { graph, inputs: new Map([["x", ints(dt, [1, C, H as number, H as number], prng(100 + k))]]), packs: false, grouped: true }
    })
    const { graph, inputs } = mergeGraphs(cases)
    const run = async (vnni: boolean) => {
      const { graph: g, out } = await compiledOnC(graph, inputs, vnni)
      return { windows: g.nodes.filter((n) => n.op === "QLinearConvGrouped" && n.inputs.length > 11).length, out }
    }
    const a = await run(true)
    expect(a.windows).toBe(3)
    const b = await run(false)
    expect(b.windows).toBe(0)
    expect(a.out).toEqual(b.out)
  }, 600_000)
  it.skipIf(!HAVE_GCC || !hostCpu().vnni)(`a small-plane depthwise conv on a VNNI target takes the channels-in-lanes dot (channel_lanes 16 with the taps' weights), compiled to C equal to the int16 form bit for bit${NO_GCC}`, async () => {
    // 7² under 3×3 (int8, 32 channels), 14² → 7² at stride 2 (uint8, 16 channels), 9 × 7 under 1×3
    // with a pad of 1 (int8, 16, 9 × 7), and 28² → 14² at stride 2 (int8, 16: rows of a vector, which
    // the window form does not take): rows of at most a vector, whole blocks of 16 — the dot's
    // vpermd / vpshufb transposition of 4 pixels' channel bytes run for real
    const rng = prng(13)
    // (and 16 × 80 → 8 × 40 at stride 2, int8, 16: rows wider than a vector, which no window form takes)
    const cases = ([["int8", 32, 7, 7, 3, 1], ["uint8", 16, 14, 14, 3, 2], ["int8", 16, 9, 7, 1, 1], ["int8", 16, 28, 28, 3, 2], ["int8", 16, 16, 80, 3, 2]] as const).map(([dt, C, H, W, kh, stride], k) => {
      const init = new Map<string, Tensor>([
        ["xs", tensor("float32", [], Float32Array.of(0.02))], ["xzp", ints(dt, [], rng)], ["w", ints("int8", [C, 1, kh, 3], rng)],
        ["ws", tensor("float32", [C], Float32Array.from({ length: C }, () => Math.fround(rng.float(0.002, 0.02))))], ["ys", tensor("float32", [], Float32Array.of(0.05))], ["yzp", ints(dt, [], rng)],
      ])
      const graph = makeGraph({
        opset: 13,
        inputs: [{ name: "x", type: { dtype: dt, shape: [1, C, H, W] } }],
        outputs: [{ name: "y", type: { dtype: dt, shape: [] } }],
        initializers: init,
        nodes: [node("QLinearConv", ["x", "xs", "xzp", "w", "ws", "", "ys", "yzp"], ["y"], { strides: attr.ints([stride, stride]), pads: attr.ints([kh === 3 ? 1 : 0, 1, kh === 3 ? 1 : 0, 1]), group: attr.int(C) })],
      })
      return { graph, inputs: new Map([["x", ints(dt, [1, C, H, W], prng(200 + k))]]), packs: false, grouped: true }
    })
    const { graph, inputs } = mergeGraphs(cases)
    const run = async (vnni: boolean) => {
      const { graph: g, out } = await compiledOnC(graph, inputs, vnni)
      const grouped = g.nodes.filter((n) => n.op === "QLinearConvGrouped")
      return { dots: grouped.filter((n) => n.inputs.length > 11 && n.attrs.channel_lanes?.kind === "int" && Number(n.attrs.channel_lanes.value) === 16).length, out }
    }
    const a = await run(true)
    expect(a.dots).toBe(5)
    const b = await run(false)
    expect(b.dots).toBe(0)
    expect(a.out).toEqual(b.out)
  }, 600_000)
})

/**
 * The channels-in-lanes form of a depthwise conv (int8-grouped-to-packed's `channel_lanes`,
 * int8DepthwiseChannels): on random depthwise and grouped convs, targets of 4, 8 or 16 lanes, the
 * rule sets channel_lanes to the lanes exactly when the conv is depthwise (one input and one output
 * channel a group), its channels whole blocks of the lanes and its output rows at most half a vector
 * and not where the window form takes it (on a VNNI target at 16 lanes, at most a vector: the form
 * on the dot, its taps packed too, before the window form);
 * the rewritten graph evaluates as before, and compiled (js, the target's lanes) equals the int16
 * form's bytes (opt level 3 against 2, which has no layout rewrite).
 */
describe("the layout rewrite of a depthwise int8 conv: the channels in the lanes", () => {
  const depthwiseCase = (seed: number) => {
    const rng = prng(seed)
    const lanes = rng.pick([4, 8, 16])
    const xdt = rng.pick(["int8", "uint8"] as const)
    const C = rng.pick([lanes, 2 * lanes, lanes + 2, 6])
    const multiplier = rng.next() < 0.2 ? 2 : 1
    const k = rng.pick([1, 3])
    const stride = rng.int(1, 2)
    const H = rng.int(k, 12)
    // (up to 40 wide: at stride 2 rows wider than a vector of 16, which only the strided clause takes)
    const W = rng.next() < 0.8 ? rng.int(k, 20) : rng.int(21, 40)
    const pad = k === 3 ? rng.int(0, 1) : 0
    const OW = Math.floor((W + 2 * pad - k) / stride) + 1
    const init = new Map<string, Tensor>([
      ["xs", tensor("float32", [], Float32Array.of(0.02))], ["xzp", ints(xdt, [], rng)], ["w", ints("int8", [C * multiplier, 1, k, k], rng)],
      ["ws", tensor("float32", [C * multiplier], Float32Array.from({ length: C * multiplier }, () => Math.fround(rng.float(0.002, 0.02))))], ["ys", tensor("float32", [], Float32Array.of(0.05))], ["yzp", ints(xdt, [], rng)],
    ])
    const graph = makeGraph({
      opset: 13,
      inputs: [{ name: "x", type: { dtype: xdt, shape: [1, C, H, W] } }],
      outputs: [{ name: "y", type: { dtype: xdt, shape: [] } }],
      initializers: init,
      nodes: [node("QLinearConv", ["x", "xs", "xzp", "w", "ws", "", "ys", "yzp"], ["y"], { strides: attr.ints([stride, stride]), pads: attr.ints([pad, pad, pad, pad]), group: attr.int(C) })],
    })
    // (on a VNNI target, rows of up to a vector where the conv computes on the channels-in-lanes dot —
    // 16 lanes, a row of at most 4 taps, no dilation — the window form or not; else rows of at most
    // half a vector where the window form does not take it)
    const OH = Math.floor((H + 2 * pad - k) / stride) + 1
    const vnni = rng.next() < 0.5
    const window = vnni && depthwiseWindowGrid([OH, OW], [k, k], [1, 1], [stride, stride]) !== undefined
    const rows = (2 * OW <= lanes && !window) || (vnni && lanes === 16 && (OW <= lanes || (stride > 1 && !window)))
    const expected = multiplier === 1 && C % lanes === 0 && rows ? lanes : 0
    // (a target without the dot: js)
    const plain = multiplier === 1 && C % lanes === 0 && 2 * OW <= lanes ? lanes : 0
    return { graph, inputs: new Map([["x", ints(xdt, [1, C, H, W], rng)]]), lanes, expected, plain, vnni, wide: OW > lanes }
  }
  const lanesOf = (g: Graph): number[] => g.nodes.filter((n) => n.op === "QLinearConvGrouped").map((n) => (n.attrs.channel_lanes?.kind === "int" ? Number(n.attrs.channel_lanes.value) : 0))

  it("sets channel_lanes exactly when the statement says, the graph evaluating as before, bit for bit", () => {
    const seen = { taken: 0, left: 0, wide: 0 }
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1 << 30 }).map(depthwiseCase), ({ graph, inputs, lanes, expected, vnni, wide }) => {
        const after = alterLayoutSync(bindSync(graph), { ...LAYOUT, vectorLanes: lanes, ...(vnni ? { int8Dot: "vnni" as const } : {}) })
        expect(lanesOf(after)).toEqual([expected])
        // (the VNNI dot's taps packed beside channel_lanes exactly where the form is on the dot)
        const dots = after.nodes.filter((n) => n.op === "QLinearConvGrouped" && n.inputs.length > 11 && n.attrs.channel_lanes !== undefined).length
        expect(dots).toBe(vnni && expected === 16 ? 1 : 0)
        seen[expected > 0 ? "taken" : "left"]++
        if (wide && expected > 0) seen.wide++
        expectEvaluatesAsBefore(after, graph, inputs)
      }),
      lawParams(150),
    )
    expect(Math.min(seen.taken, seen.left)).toBeGreaterThan(10)
    // (rows wider than a vector taken: strided, no window form)
    expect(seen.wide).toBeGreaterThan(0)
  })

  it("on the VNNI dot: rows of at most a vector, and strided convs no window form takes (MobileNetV2's 112² → 56²); not the strided ones the window's phase rows take, nor wider stride-1 rows", () => {
    const vnni = { ...LAYOUT, int8Dot: "vnni" as const }
    const at = (out: [number, number], stride: number) => int8DepthwiseChannels({ kernel: [3, 3], strides: [stride, stride], dilations: [1, 1], out }, { in: 96, out: 96, group: 96 }, vnni)
    expect([at([56, 56], 2), at([8, 40], 2), at([14, 14], 2), at([7, 7], 1)]).toEqual([16, 16, 16, 16])
    expect([at([28, 28], 2), at([4, 24], 2), at([56, 56], 1), at([28, 28], 1)]).toEqual([0, 0, 0, 0])
  })

  it("compiled (js), the channels-in-lanes form equals the int16 form bit for bit", async () => {
    let taken = 0
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 1 << 30 }).map(depthwiseCase), async ({ graph, inputs, lanes, plain: expected }) => {
        const a = await compiledJs(graph, inputs, lanes, 3)
        const b = await compiledJs(graph, inputs, lanes, 2)
        expect(lanesOf(a.program.graph)).toEqual([expected])
        expect(a.program.kernels.every((k) => k.kind === "compiled")).toBe(true)
        if (expected > 0) taken++
        expect(Array.from(a.out.data as ArrayLike<number>)).toEqual(Array.from(b.out.data as ArrayLike<number>))
      }),
      lawParams(30),
    )
    expect(taken).toBeGreaterThan(3)
  }, 300_000)
})
