// The com.microsoft domain through decoding and the graph passes: an op Tessera does not implement
// is a typed UnsupportedOpError naming node, op and domain; fusion, CSE, dead-code elimination and
// constant folding treat the contrib ops by their registered meaning; and seeded random QOperator
// graphs give onnxruntime-node's bits on the interpreter and on every compiled target.
import { fromBinary, toBinary } from "@bufbuild/protobuf"
import { Effect } from "effect"
import { ModelProtoSchema } from "onnx-buf"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { UnsupportedOpError } from "../src/ast/graph/errors.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node, type Graph, type Node } from "../src/ast/graph/graph.js"
import { MICROSOFT_DOMAIN } from "../src/ast/graph/ops/index.js"
import { fromArray, scalar, type Tensor } from "../src/ast/graph/tensor.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { UnsupportedModelError } from "../src/ast/onnx/errors.js"
import { cpuAttrs, type TargetKind } from "../src/ast/target.js"
import { backendOf } from "../src/backend/index.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { eliminateCommonSubexprSync, eliminateDeadCodeSync, foldConstantsSync, fuseOpsSync } from "../src/rewrite/index.js"
import { randQ, randScale, randZp, range8, rng, runOrt, type Q8 } from "./support/contrib-quant-cases.js"

const ms = (op: string, inputs: readonly string[], outputs: readonly string[], attrs = {}, name = outputs[0]): Node => node(op, inputs, outputs, attrs, name, MICROSOFT_DOMAIN)
const p = (init: Map<string, Tensor>, name: string, dtype: Q8, s: number, z: number) => {
  init.set(`${name}_s`, scalar("float32", s))
  init.set(`${name}_z`, scalar(dtype, z))
}

const chainGraph = (nodes: Node[], init: Map<string, Tensor>, outputs = ["y"]): Graph =>
  makeGraph({
    opset: 13,
    inputs: [{ name: "x", type: { dtype: "int8", shape: [2, 8] } }],
    outputs: outputs.map((name) => ({ name, type: { dtype: "int8", shape: [2, 8] } })),
    initializers: init,
    nodes,
  })

const baseInit = () => {
  const init = new Map<string, Tensor>()
  p(init, "x", "int8", 0.05, 3)
  p(init, "t", "int8", 0.08, -4)
  p(init, "u", "int8", 0.03, 1)
  p(init, "y", "int8", 0.1, 0)
  init.set("k", fromArray("int8", [8], [1, -2, 3, -4, 5, -6, 7, -8]))
  return init
}

describe("decoding the com.microsoft domain", () => {
  const model = (op: string, domain: string, version = 1) => {
    const g = chainGraph([node(op, ["x"], ["y"], {}, "the_node", domain)], new Map())
    const bytes = encodeOnnx(g)
    if (version === 1) return bytes
    // the encoder writes every non-default domain at version 1: import another one
    const m = fromBinary(ModelProtoSchema, bytes)
    for (const o of m.opsetImport) if (o.domain === domain) o.version = BigInt(version)
    return toBinary(ModelProtoSchema, m)
  }
  it("a com.microsoft op Tessera does not implement is an UnsupportedOpError naming node, op and domain", () => {
    const e = (() => {
      try {
        decodeModelSync(model("FusedConv", MICROSOFT_DOMAIN))
      } catch (err) {
        return err
      }
    })()
    expect(e).toBeInstanceOf(UnsupportedOpError)
    const u = e as UnsupportedOpError
    expect([u.node, u.op, u.domain]).toEqual(["the_node", "FusedConv", MICROSOFT_DOMAIN])
    expect(u.message).toMatch(/com\.microsoft\.FusedConv.*not implemented.*QLinearAdd/)
  })
  it("an ONNX op name in the com.microsoft domain is not taken for the ONNX op", () => {
    expect(() => decodeModelSync(model("Relu", MICROSOFT_DOMAIN))).toThrow(UnsupportedOpError)
  })
  it("any other domain is an UnsupportedOpError naming it", () => {
    expect(() => decodeModelSync(model("QLinearAdd", "com.example"))).toThrow(/operator domain 'com.example' is not supported/)
    expect(() => decodeModelSync(model("LayoutTransform", "tessera"))).toThrow(UnsupportedOpError)
  })
  it("a com.microsoft opset other than 1 is an UnsupportedModelError", () => {
    expect(() => decodeModelSync(model("QLinearSigmoid", MICROSOFT_DOMAIN, 2))).toThrow(UnsupportedModelError)
  })
})

describe("graph passes over com.microsoft ops", () => {
  const nodes = [
    ms("QLinearAdd", ["x", "x_s", "x_z", "k", "x_s", "x_z", "t_s", "t_z"], ["t"]),
    ms("QLinearLeakyRelu", ["t", "t_s", "t_z", "u_s", "u_z"], ["u"], { alpha: attr.float(0.2) }),
    ms("QLinearMul", ["u", "u_s", "u_z", "x", "x_s", "x_z", "y_s", "y_z"], ["y"]),
  ]
  it("fuse: a chain of elementwise/broadcast contrib ops is one group", () => {
    const f = fuseOpsSync(chainGraph(nodes, baseInit()))
    expect(f.groups.map((g) => g.ops)).toEqual([["QLinearAdd", "QLinearLeakyRelu", "QLinearMul"]])
  })
  it("CSE merges two equal contrib nodes (same domain, op, inputs and attributes), and not an op of another domain", () => {
    const twice = [nodes[0], { ...nodes[0], name: "t2", outputs: ["t2"] }, ms("QLinearAdd", ["t", "t_s", "t_z", "t2", "t_s", "t_z", "y_s", "y_z"], ["y"])]
    const g = eliminateCommonSubexprSync(chainGraph(twice, baseInit()))
    expect(g.nodes.map((n) => n.name)).toEqual(["t", "y"])
    const feeds = new Map([["x", randQ(rng(3), "int8", [2, 8])]])
    expect([...runGraph(g, feeds)[0].data]).toEqual([...runGraph(chainGraph(twice, baseInit()), feeds)[0].data])
  })
  it("dead-code elimination drops an unused contrib node", () => {
    const g = eliminateDeadCodeSync(chainGraph([...nodes, ms("QLinearSigmoid", ["u", "u_s", "u_z", "y_s", "y_z"], ["dead"])], baseInit()))
    expect(g.nodes.map((n) => n.op)).toEqual(["QLinearAdd", "QLinearLeakyRelu", "QLinearMul"])
  })
  it("constant folding evaluates a contrib node on constants with its reference kernel", () => {
    const init = baseInit()
    init.set("k2", fromArray("int8", [8], [9, 8, 7, 6, 5, 4, 3, 2]))
    const g0 = chainGraph([ms("QLinearAdd", ["k", "x_s", "x_z", "k2", "x_s", "x_z", "t_s", "t_z"], ["t"]), ms("QLinearAdd", ["x", "x_s", "x_z", "t", "t_s", "t_z", "y_s", "y_z"], ["y"])], init)
    const g = foldConstantsSync(g0)
    expect(g.nodes.map((n) => n.name)).toEqual(["y"])
    const feeds = new Map([["x", randQ(rng(4), "int8", [2, 8])]])
    expect([...runGraph(g, feeds)[0].data]).toEqual([...runGraph(g0, feeds)[0].data])
  })
})

// ---------------------------------------------------------------------------------------------
// Seeded random QOperator graphs: a chain over an NCHW int8/uint8 image with a side branch

interface Built {
  readonly graph: Graph
  readonly feeds: ReadonlyMap<string, Tensor>
}

const randomGraph = (seed: number): Built => {
  const r = rng(seed)
  const dtype: Q8 = r() < 0.5 ? "int8" : "uint8"
  const C = 4 + Math.floor(r() * 5)
  const H = 5 + Math.floor(r() * 4)
  const shape = [1, C, H, H]
  const init = new Map<string, Tensor>()
  const nodes: Node[] = []
  let k = 0
  const fresh = (s: number, z: number) => {
    const n = `v${k++}`
    p(init, n, dtype, s, z)
    return n
  }
  const x = "x"
  p(init, "x", dtype, randScale(r, 0.01, 0.1), randZp(r, dtype))
  let cur = x
  let curShape = shape
  const live: string[] = [x]
  const steps = 3 + Math.floor(r() * 4)
  for (let s = 0; s < steps; s++) {
    const pick = Math.floor(r() * 8)
    const args = (v: string) => [v, `${v}_s`, `${v}_z`]
    if (pick === 0 || pick === 1) {
      // with an earlier value of the same shape, or a per-channel constant
      const other = live.filter((v) => v !== cur).length && r() < 0.6 ? live[Math.floor(r() * live.length)] : undefined
      let b = other
      if (!b) {
        b = `c${k}`
        init.set(b, randQ(r, dtype, [C, 1, 1]))
        p(init, b, dtype, randScale(r, 0.01, 0.1), randZp(r, dtype))
      }
      const op = pick === 0 ? "QLinearAdd" : "QLinearMul"
      const y = fresh(op === "QLinearAdd" ? randScale(r, 0.02, 0.15) : randScale(r, 0.001, 0.01), randZp(r, dtype))
      nodes.push(ms(op, [...args(cur), ...args(b), `${y}_s`, `${y}_z`], [y]))
      cur = y
    } else if (pick === 2 || pick === 3) {
      const op = pick === 2 ? "QLinearSigmoid" : "QLinearLeakyRelu"
      const y = fresh(op === "QLinearSigmoid" ? Math.fround(1 / 256) : randScale(r, 0.01, 0.1), op === "QLinearSigmoid" ? range8(dtype)[0] : randZp(r, dtype))
      nodes.push(ms(op, [...args(cur), `${y}_s`, `${y}_z`], [y], op === "QLinearLeakyRelu" ? { alpha: attr.float(0.1) } : {}))
      cur = y
    } else if (pick === 4) {
      const y = fresh(randScale(r, 0.01, 0.1), randZp(r, dtype))
      nodes.push(ms("QLinearAveragePool", [...args(cur), `${y}_s`, `${y}_z`], [y], { kernel_shape: attr.ints([3, 3]), pads: attr.ints([1, 1, 1, 1]), count_include_pad: attr.int(r() < 0.5 ? 1 : 0) }))
      cur = y
    } else if (pick === 5) {
      // concatenated with an earlier value of the same shape along H (values before it no longer match)
      const other = live[Math.floor(r() * live.length)]
      const y = fresh(randScale(r, 0.01, 0.1), randZp(r, dtype))
      nodes.push(ms("QLinearConcat", [`${y}_s`, `${y}_z`, ...args(cur), ...args(other)], [y], { axis: attr.int(2) }))
      curShape = [curShape[0], curShape[1], curShape[2] * 2, curShape[3]]
      cur = y
      live.length = 0
    } else if (pick === 7) {
      // over the channels, with the tool's fixed output params (1/256 and the type's lowest value)
      const y = fresh(Math.fround(1 / 256), range8(dtype)[0])
      nodes.push(ms("QLinearSoftmax", [...args(cur), `${y}_s`, `${y}_z`], [y], { axis: attr.int(1), opset: attr.int(13) }))
      cur = y
    } else {
      // the standard MaxPool on 8-bit values keeps its input's params (as onnxruntime's tool leaves it)
      const y = `v${k++}`
      nodes.push(node("MaxPool", [cur], [y], { kernel_shape: attr.ints([2, 2]), pads: attr.ints([0, 0, 1, 1]), strides: attr.ints([1, 1]) }, y))
      init.set(`${y}_s`, init.get(`${cur}_s`)!)
      init.set(`${y}_z`, init.get(`${cur}_z`)!)
      cur = y
    }
    live.push(cur)
  }
  const y = "y"
  p(init, "y", dtype, randScale(r, 0.005, 0.05), randZp(r, dtype))
  nodes.push(ms("QLinearGlobalAveragePool", [cur, `${cur}_s`, `${cur}_z`, "y_s", "y_z"], [y]))
  const graph = makeGraph({
    opset: 13,
    inputs: [{ name: x, type: { dtype, shape } }],
    outputs: [{ name: y, type: { dtype, shape: [1, C, 1, 1] } }],
    initializers: init,
    nodes,
  })
  return { graph, feeds: new Map([[x, randQ(r, dtype, shape)]]) }
}

const SEEDS = Array.from({ length: 12 }, (_, i) => 9001 + i * 17)
const TARGETS: TargetKind[] = ["js", "wasm", "c"]

describe("seeded random QOperator graphs agree with onnxruntime-node", () => {
  it.each(SEEDS)("seed %i: interp and every compiled target", async (seed) => {
    const { graph, feeds } = randomGraph(seed)
    const bytes = encodeOnnx(graph)
    const want = await runOrt(bytes, feeds)
    const decoded = decodeModelSync(bytes)
    const [got] = runGraph(decoded, feeds)
    expect(Array.from(got.data as ArrayLike<number>), `interp, seed ${seed}: ${graph.nodes.map((n) => n.op).join(" → ")}`).toEqual(want)
    for (const kind of TARGETS) {
      const backend = backendOf(kind)
      if (backend.unavailable() !== undefined || (kind === "c" && seed % 3 !== 0)) continue
      const target = backend.target(cpuAttrs(), 1)
      const program = await Effect.runPromise(compileGraph(decoded, target))
      expect(program.kernels.filter((k) => k.kind !== "compiled").length, kind).toBe(0)
      const exec = await Effect.runPromise(loadProgram(program, target))
      try {
        expect(Array.from(exec.run(feeds).get("y")!.data as ArrayLike<number>), `${kind}, seed ${seed}`).toEqual(want)
      } finally {
        exec.module.close()
      }
    }
  }, 300_000)
})
