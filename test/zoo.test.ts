// The model zoo end to end: every network encodes to the same bytes for the same seed, decodes
// back to the graph it was built from, and runs in onnxruntime-node with the evaluator's answers.
// Also the ONNX encoder on its own: every attribute kind, subgraphs, value_info, symbolic dims.
import * as ort from "onnxruntime-node"
import { afterAll, describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node, structurallyEqual, type Graph, type Node } from "../src/ast/graph/graph.js"
import { bindSync } from "../src/ast/graph/infer.js"
import { fromArray, tensor, type Tensor } from "../src/ast/graph/tensor.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { ZOO, ZOO_NAMES, zooModel, type ZooName } from "../src/zoo/index.js"
import { rng } from "../src/zoo/random.js"

// ---------------------------------------------------------------------------------------------
// Helpers

const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && Buffer.compare(a, b) === 0

/** A fast digest of a tensor's storage bytes (FNV-1a over 32-bit words). */
const digest = (t: Tensor): [number, number] => {
  const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)
  const words = new Int32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 2)
  let h1 = 2166136261
  let h2 = 0x9e3779b9
  for (let i = 0; i < words.length; i++) {
    h1 = Math.imul(h1 ^ words[i], 16777619) >>> 0
    h2 = Math.imul(h2 ^ (words[i] + i), 0x85ebca6b) >>> 0
  }
  for (let i = words.length * 4; i < bytes.length; i++) h1 = Math.imul(h1 ^ bytes[i], 16777619) >>> 0
  return [h1, h2]
}

/**
 * The graph with every initializer replaced by a small stand-in that keeps its dtype, shape and
 * a digest of its bytes. structurallyEqual hashes constants element by element through strings,
 * which takes tens of seconds on ResNet-50's 25M weights; the weights are compared exactly by
 * `sameInitializers` instead.
 */
const withDigests = (g: Graph): Graph =>
  makeGraph({
    ...g,
    initializers: new Map(
      [...g.initializers].map(([name, t]) => [name, fromArray("float64", [t.shape.length + 3], [...t.shape, t.data.length, ...digest(t)])] as const),
    ),
  })

const sameInitializers = (a: Graph, b: Graph): boolean => {
  if (a.initializers.size !== b.initializers.size) return false
  for (const [name, t] of a.initializers) {
    const u = b.initializers.get(name)
    if (!u || u.dtype !== t.dtype || u.shape.join() !== t.shape.join() || u.data.length !== t.data.length) return false
    for (let i = 0; i < t.data.length; i++) if (!Object.is(t.data[i], u.data[i])) return false
  }
  return true
}

const seededInput = (shape: readonly number[], seed: number): Tensor => {
  const r = rng(seed)
  let n = 1
  for (const d of shape) n *= d
  const data = new Float32Array(n)
  for (let i = 0; i < n; i++) data[i] = r.normal()
  return tensor("float32", shape, data)
}

const runOrt = async (bytes: Uint8Array, feeds: ReadonlyMap<string, Tensor>, outputs: readonly string[]): Promise<Tensor[]> => {
  const session = await ort.InferenceSession.create(bytes)
  const ortFeeds: Record<string, ort.Tensor> = {}
  for (const [name, t] of feeds)
    ortFeeds[name] =
      t.dtype === "bool"
        ? new ort.Tensor("bool", Uint8Array.from(t.data as Uint8Array), [...t.shape])
        : new ort.Tensor("float32", Float32Array.from(t.data as Float32Array), [...t.shape])
  const res = await session.run(ortFeeds)
  await session.release()
  return outputs.map((o) => tensor("float32", res[o].dims, Float32Array.from(res[o].data as Float32Array)))
}

/** Max |a - b|, and how many elements lie outside atol + rtol·|b|. */
const compare = (a: Tensor, b: Tensor, rtol = 1e-3, atol = 1e-4): { maxAbs: number; outside: number } => {
  let maxAbs = 0
  let outside = 0
  for (let i = 0; i < b.data.length; i++) {
    const d = Math.abs(a.data[i] - b.data[i])
    if (!(d <= atol + rtol * Math.abs(b.data[i]))) outside++
    if (!(d <= maxAbs)) maxAbs = d
  }
  return { maxAbs, outside }
}

const stats = (t: Tensor): { finite: boolean; std: number } => {
  let s = 0
  let s2 = 0
  let finite = true
  for (const v of t.data) {
    if (!Number.isFinite(v)) finite = false
    s += v
    s2 += v * v
  }
  const mean = s / t.data.length
  return { finite, std: Math.sqrt(Math.max(0, s2 / t.data.length - mean * mean)) }
}

/**
 * The graph's part that computes `value` (the nodes it depends on, the initializers they read),
 * with `value` as its one output.
 */
const prefixGraph = (g: Graph, value: string): Graph => {
  const needed = new Set([value])
  const kept = new Set<Node>()
  for (let i = g.nodes.length - 1; i >= 0; i--) {
    const n = g.nodes[i]
    if (!n.outputs.some((o) => needed.has(o))) continue
    kept.add(n)
    for (const v of n.inputs) needed.add(v)
  }
  const part = makeGraph({ ...g, initializers: new Map([...g.initializers].filter(([k]) => needed.has(k))), nodes: g.nodes.filter((n) => kept.has(n)) })
  const type = bindSync(part).valueTypes.get(value)
  if (!type) throw new Error(`no value ${value}`)
  return { ...part, outputs: [{ name: value, type }] }
}

// ---------------------------------------------------------------------------------------------
// The zoo

/** Test time grows with the model: ResNet-50's build, encode and evaluation take several seconds each. */
const TIMEOUT = 300_000

/**
 * The networks too big to check whole in the evaluator (about 0.5 GFLOP/s on one core): ConvNeXt-T
 * is 9 GFLOP, BERT-base 22, ViT-B/16 35 — minutes each — and Tessera's js target is slower still,
 * its c target a cold gcc build of 20 s each. For these the evaluator checks, against
 * onnxruntime-node, the real network's first part up to the value named here (every op kind the
 * network uses but its head's, with its own weights); the whole network still decodes back and
 * runs in onnxruntime. Their builds draw 28-87M weights (seconds each, and as many to encode), so
 * the determinism test, which builds twice more, is the light models' alone: a seed reaches the
 * weights only through NetBuilder.param, whichever network calls it.
 */
const HEAVY: Partial<Record<ZooName, string>> = {
  "convnext-t": "features.2.1", // the stem, stage 1's blocks and the first downsampling
  "vit-b16": "encoder.layers.encoder_layer_0.mlp.1", // patch embedding, class token, position, block 0 to its GELU
  "bert-base": "encoder.layer.0.output.LayerNorm", // layer 0
}

describe.each(ZOO_NAMES)("zoo %s", (name: ZooName) => {
  const heavy = HEAVY[name]
  const seed = 7
  let built: Graph | undefined
  let bytes: Uint8Array | undefined
  const model = () => {
    built ??= ZOO[name].build(seed)
    bytes ??= encodeOnnx(built)
    return { graph: built, bytes }
  }
  let decoded: Graph | undefined
  const decode = () => (decoded ??= decodeModelSync(model().bytes))

  // (registered only for the networks the evaluator runs whole: a skipped test would count as one)
  if (heavy === undefined) it("encodes deterministically: the same seed gives the same bytes, another seed other bytes", () => {
    const { bytes } = model()
    expect(sameBytes(zooModel(name, seed), bytes)).toBe(true)
    expect(sameBytes(zooModel(name, seed + 1), bytes)).toBe(false)
  }, TIMEOUT)

  it("decodes back to a structurally equal graph", () => {
    const { graph } = model()
    const decoded = decode()
    expect(decoded.opset).toBe(graph.opset)
    expect(decoded.inputs).toEqual(graph.inputs)
    expect(decoded.outputs).toEqual(graph.outputs)
    expect(sameInitializers(decoded, graph)).toBe(true)
    expect(structurallyEqual(withDigests(decoded), withDigests(graph))).toBe(true)
  }, TIMEOUT)

  const feeds = (g: Graph) => new Map([[g.inputs[0].name, seededInput(g.inputs[0].type.shape as number[], 1234)]])
  let theirs: Tensor | undefined
  const runTheirs = async () => {
    const { graph, bytes } = model()
    theirs ??= (await runOrt(bytes, feeds(graph), [graph.outputs[0].name]))[0]
    return theirs
  }
  // let each network go when its tests end: the heavy ones hold 0.1-0.35 GB each as a graph,
  // as bytes and decoded; each describe's
  afterAll(() => {
    built = bytes = decoded = theirs = undefined
  })

  it("runs in onnxruntime-node: the declared output shape, finite, not degenerate", async () => {
    const { graph } = model()
    const out = await runTheirs()
    expect(out.shape).toEqual(graph.outputs[0].type.shape)
    const s = stats(out)
    expect(s.finite).toBe(true)
    expect(s.std).toBeGreaterThan(1e-3) // the outputs differ from each other
  }, TIMEOUT)

  if (heavy === undefined) it("the evaluator agrees with onnxruntime-node (rtol 1e-3, atol 1e-4)", async () => {
    const { graph } = model()
    const out = await runTheirs()
    const [ours] = runGraph(decode(), feeds(graph))
    expect(ours.shape).toEqual(out.shape)
    const { maxAbs, outside } = compare(ours, out)
    expect({ maxAbs, outside }).toEqual({ maxAbs: expect.any(Number), outside: 0 })
  }, TIMEOUT)

  if (heavy !== undefined) it(`the evaluator agrees with onnxruntime-node up to ${heavy} (rtol 1e-3, atol 1e-4)`, async () => {
    const part = prefixGraph(decode(), heavy!)
    const [out] = await runOrt(encodeOnnx(part), feeds(part), [heavy!])
    const s = stats(out)
    expect(s.finite).toBe(true)
    expect(s.std).toBeGreaterThan(1e-3)
    const [ours] = runGraph(part, feeds(part))
    expect(ours.shape).toEqual(out.shape)
    const { maxAbs, outside } = compare(ours, out)
    expect({ maxAbs, outside }).toEqual({ maxAbs: expect.any(Number), outside: 0 })
  }, TIMEOUT)
})

// ---------------------------------------------------------------------------------------------
// The encoder on its own

describe("encodeOnnx", () => {
  const f32 = Math.fround
  const sub = (name: string, op: string): Graph =>
    makeGraph({
      name,
      opset: 13,
      inputs: [],
      outputs: [{ name: `${name}_y`, type: { dtype: "float32", shape: ["n", 3] } }],
      nodes: [node(op, ["x", "c"], [`${name}_y`])],
    })

  /** x + c when cond, else x · c; a Constant with a tensor attribute, subgraphs reading outer values. */
  const ifGraph = (): Graph =>
    makeGraph({
      name: "if_model",
      opset: 13,
      inputs: [
        { name: "cond", type: { dtype: "bool", shape: [] } },
        { name: "x", type: { dtype: "float32", shape: ["n", 3] } },
      ],
      outputs: [{ name: "y", type: { dtype: "float32", shape: ["n", 3] } }],
      nodes: [
        node("Constant", [], ["c"], { value: attr.tensor(fromArray("float32", [3], [1.5, -2, 0.25])) }),
        node("If", ["cond"], ["y"], { then_branch: attr.graph(sub("then", "Add")), else_branch: attr.graph(sub("else", "Mul")) }),
      ],
      valueTypes: new Map([["c", { dtype: "float32", shape: [3] }]]),
    })

  it("writes every attribute kind and reads back the same graph", () => {
    const g = makeGraph({
      name: "attrs",
      opset: 13,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [2, "batch"] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [2, "batch"] } }],
      initializers: new Map([["w", fromArray("int64", [2], [-3, 2 ** 40])]]),
      nodes: [
        node("Relu", ["x"], ["y"], {
          i: attr.int(-7),
          f: attr.float(f32(0.1)),
          s: attr.str("héllo"),
          is: attr.ints([1, -2, 2 ** 40]),
          fs: attr.floats([f32(1.5), f32(-0.3)]),
          ss: attr.strs(["a", "", "ü"]),
          t: attr.tensor(fromArray("float16", [2, 2], [1, 0.5, -2, 65504])),
          ts: { kind: "tensors", value: [fromArray("int32", [1], [9]), fromArray("bool", [2], [1, 0])] },
          g: attr.graph(sub("g", "Add")),
          gs: { kind: "graphs", value: [sub("g1", "Mul"), sub("g2", "Sub")] },
        }),
      ],
    })
    const bytes = encodeOnnx(g)
    expect(sameBytes(encodeOnnx(g), bytes)).toBe(true)
    const back = decodeModelSync(bytes)
    expect(structurallyEqual(back, g)).toBe(true)
    expect(back.inputs).toEqual(g.inputs)
    expect(back.outputs).toEqual(g.outputs)
    expect(back.nodes[0].attrs).toEqual(g.nodes[0].attrs)
  })

  it("is a fixed point: encode ∘ decode ∘ encode gives the same bytes", () => {
    const bytes = encodeOnnx(ifGraph())
    expect(sameBytes(encodeOnnx(decodeModelSync(bytes)), bytes)).toBe(true)
  })

  it("subgraphs run the same in onnxruntime-node and the evaluator", async () => {
    const g = ifGraph()
    const bytes = encodeOnnx(g)
    const back = decodeModelSync(bytes)
    expect(back.valueTypes.get("c")).toEqual({ dtype: "float32", shape: [3] })
    const x = seededInput([4, 3], 5)
    for (const cond of [1, 0]) {
      const feeds = new Map([
        ["cond", fromArray("bool", [], [cond])],
        ["x", x],
      ])
      const [theirs] = await runOrt(bytes, feeds, ["y"])
      const [ours] = runGraph(back, feeds)
      expect(compare(ours, theirs).outside).toBe(0)
    }
  })
})
