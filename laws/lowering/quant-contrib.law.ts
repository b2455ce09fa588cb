// The computes of onnxruntime's com.microsoft quantized ops (src/lowering/op-library-quant-contrib.ts)
// mean what their reference kernels mean, bit for bit: random ops, 8-bit types, shapes (broadcast
// operands, both pool layouts, softmax axes), scales and zero points, alone and chained two deep
// (so the fused kernel is checked too), compiled for js and run, equal the evaluator exactly.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attr } from "../../src/ast/graph/attrs.js"
import { runGraph } from "../../src/ast/graph/evaluate.js"
import { makeGraph, node, type Node } from "../../src/ast/graph/graph.js"
import { MICROSOFT_DOMAIN } from "../../src/ast/graph/ops/index.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import { fromArray, scalar, sizeOf, type Tensor } from "../../src/ast/graph/tensor.js"
import { makeTarget } from "../../src/ast/target.js"
import { compileGraph, loadProgram } from "../../src/pipeline.js"
import { lawParams } from "../support.js"
import { collect } from "../../src/ast/te/expr.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { placeholder } from "../../src/ast/te/tensor.js"
import { CONTRIB_QUANT } from "../../src/lowering/op-library-quant-contrib.js"

type Q8 = "int8" | "uint8"
const OPS = ["QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearAveragePool", "QLinearGlobalAveragePool", "QLinearConcat", "QLinearSoftmax", "QLinearWhere"] as const

interface Spec {
  readonly ops: readonly (typeof OPS)[number][]
  readonly dtype: Q8
  readonly shape: readonly number[]
  readonly channelsLast: boolean
  readonly bcast: number
  readonly params: readonly { s: number; z: number }[]
  readonly data: readonly number[]
}

const lo = (d: Q8) => (d === "int8" ? -128 : 0)

const arbSpec: fc.Arbitrary<Spec> = fc
  .record({
    ops: fc.array(fc.constantFrom(...OPS), { minLength: 1, maxLength: 2 }),
    dtype: fc.constantFrom<Q8>("int8", "uint8"),
    shape: fc.tuple(fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 2, max: 6 }), fc.integer({ min: 2, max: 6 })),
    channelsLast: fc.boolean(),
    bcast: fc.integer({ min: 0, max: 2 }),
    params: fc.array(fc.record({ s: fc.float({ min: Math.fround(0.002), max: Math.fround(0.3), noNaN: true }), z: fc.integer({ min: 0, max: 255 }) }), { minLength: 12, maxLength: 12 }),
    data: fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 2 * 5 * 6 * 6 * 2, maxLength: 2 * 5 * 6 * 6 * 2 }),
  })
  .map((r) => ({ ...r, shape: [...r.shape] }))

/** The graph of a spec: ops applied in turn to x, each with fresh output params (a second operand where the op takes one). */
const build = (sp: Spec) => {
  const { dtype } = sp
  const init = new Map<string, Tensor>()
  let pk = 0
  const param = (name: string) => {
    const p = sp.params[pk++ % sp.params.length]
    init.set(`${name}_s`, scalar("float32", p.s))
    init.set(`${name}_z`, scalar(dtype, lo(dtype) + p.z))
  }
  const vals = (shape: readonly number[], off: number) => fromArray(dtype, shape, Array.from({ length: sizeOf(shape) }, (_, i) => lo(dtype) + sp.data[(i + off) % sp.data.length]))
  param("x")
  const nodes: Node[] = []
  let cur = "x"
  let shape = [...sp.shape]
  sp.ops.forEach((op, k) => {
    const y = `y${k}`
    const args = (v: string) => [v, `${v}_s`, `${v}_z`]
    const ms = (ins: string[], attrs = {}) => nodes.push(node(op, ins, [y], attrs, y, MICROSOFT_DOMAIN))
    param(y)
    if (op === "QLinearAdd" || op === "QLinearMul") {
      const bShape = sp.bcast === 0 ? shape : sp.bcast === 1 ? [shape[1], 1, 1] : [1, ...shape.slice(1)]
      init.set(`b${k}`, vals(bShape, 7 * k + 3))
      param(`b${k}`)
      ms([...args(cur), ...args(`b${k}`), `${y}_s`, `${y}_z`])
    } else if (op === "QLinearSigmoid" || op === "QLinearLeakyRelu") ms([...args(cur), `${y}_s`, `${y}_z`], op === "QLinearLeakyRelu" ? { alpha: attr.float(0.125) } : {})
    else if (op === "QLinearAveragePool") {
      ms([...args(cur), `${y}_s`, `${y}_z`], { kernel_shape: attr.ints([2, 2]), pads: attr.ints([1, 0, 1, 1]), count_include_pad: attr.int(sp.bcast % 2), channels_last: attr.int(sp.channelsLast ? 1 : 0) })
    } else if (op === "QLinearGlobalAveragePool") ms([...args(cur), `${y}_s`, `${y}_z`], { channels_last: attr.int(sp.channelsLast ? 1 : 0) })
    else if (op === "QLinearConcat") {
      init.set(`b${k}`, vals(shape, 11 * k + 1))
      param(`b${k}`)
      ms([`${y}_s`, `${y}_z`, ...args(cur), ...args(`b${k}`)], { axis: attr.int(sp.bcast + 1) })
    } else if (op === "QLinearSoftmax") {
      // the tool's output params; a row of one value has no defined answer in onnxruntime
      init.set(`${y}_s`, scalar("float32", Math.fround(1 / 256)))
      init.set(`${y}_z`, scalar(dtype, lo(dtype)))
      const axis = shape.findIndex((d, j) => j > 0 && d > 1)
      ms([...args(cur), `${y}_s`, `${y}_z`], { axis: attr.int(axis < 0 ? 1 : axis), opset: attr.int(sp.bcast === 2 ? 11 : 13) })
      if (axis < 0) nodes.pop()
    } else {
      init.set(`c${k}`, fromArray("bool", [shape[shape.length - 1]], Array.from({ length: shape[shape.length - 1] }, (_, i) => (sp.data[i] + k) % 2)))
      init.set(`b${k}`, vals([1, shape[shape.length - 1]], 5 * k))
      param(`b${k}`)
      ms([`c${k}`, ...args(cur), ...args(`b${k}`), `${y}_s`, `${y}_z`])
    }
    if (nodes.length && nodes[nodes.length - 1].outputs[0] === y) {
      cur = y
      const partial = makeGraph({ opset: 13, inputs: [{ name: "x", type: { dtype, shape: sp.shape } }], outputs: [], initializers: init, nodes })
      shape = bindSync(partial).valueTypes.get(y)!.shape as number[]
    }
  })
  const g0 = makeGraph({ opset: 13, inputs: [{ name: "x", type: { dtype, shape: sp.shape } }], outputs: [], initializers: init, nodes })
  const types = bindSync(g0).valueTypes
  const graph = makeGraph({ ...g0, outputs: [{ name: cur, type: cur === "x" ? { dtype, shape: sp.shape } : types.get(cur)! }] })
  return { graph, feeds: new Map([["x", vals(sp.shape, 0)]]) }
}

describe("com.microsoft quantized computes", () => {
  it("compiled for js, equal the reference kernels bit for bit (alone and fused two deep)", async () => {
    const target = makeTarget("js")
    let compiled = 0
    for (const sp of fc.sample(arbSpec, lawParams(40))) {
      const { graph, feeds } = build(sp)
      if (graph.nodes.length === 0) continue
      const want = runGraph(graph, feeds)[0]
      const program = await Effect.runPromise(compileGraph(graph, target))
      expect(program.kernels.filter((k) => k.kind !== "compiled").map((k) => k.name), sp.ops.join(" → ")).toEqual([])
      compiled++
      const exec = await Effect.runPromise(loadProgram(program, target))
      const got = exec.run(feeds).get(graph.outputs[0].name)!
      expect([...got.data], `${sp.ops.join(" → ")} ${sp.dtype} [${sp.shape}]`).toEqual([...want.data])
    }
    expect(compiled).toBeGreaterThan(30)
  }, 300_000)
})

/** QLinearAdd's compute over every pair of 8-bit operands (a along rows, b along columns), by the TE evaluator, and the reference kernel's values. */
const addTable = (dtype: Q8, sa: number, za: number, sb: number, zb: number, sc: number, zc: number) => {
  // (both whole [256, 256] tensors: a broadcast operand would take the scalar-per-span forms)
  const a = fromArray(dtype, [256, 256], Array.from({ length: 65536 }, (_, k) => lo(dtype) + (k >> 8)))
  const b = fromArray(dtype, [256, 256], Array.from({ length: 65536 }, (_, k) => lo(dtype) + (k & 255)))
  const consts: [string, Tensor][] = [["A", a], ["as", scalar("float32", sa)], ["az", scalar(dtype, za)], ["B", b], ["bs", scalar("float32", sb)], ["bz", scalar(dtype, zb)], ["cs", scalar("float32", sc)], ["cz", scalar(dtype, zc)]]
  const n = node("QLinearAdd", consts.map(([k]) => k), ["y"], {}, "y", MICROSOFT_DOMAIN)
  const inputs = consts.map(([k, t]) => placeholder(k, t.shape, t.dtype))
  const made = CONTRIB_QUANT.QLinearAdd({
    node: n,
    attrs: {},
    inputs,
    outputs: [{ dtype, shape: [256, 256] }],
    name: (suffix) => (suffix ? `y_${suffix}` : "y"),
    constants: consts.map(([k, t]) => (k === "A" || k === "B" ? undefined : (t.data as ArrayLike<number>))),
    opset: 13,
  })
  const y = made[made.length - 1]
  const feeds = new Map(consts)
  const graph = makeGraph({ opset: 13, inputs: [], outputs: [{ name: "y", type: { dtype, shape: [256, 256] } }], initializers: feeds, nodes: [n] })
  return {
    got: [...evaluateTE([y], feeds)[0].data],
    want: [...runGraph(graph, new Map())[0].data],
    fused: collect(y.body, (e) => e.kind === "call" && e.fn === "fma").length > 0,
  }
}

describe("QLinearAdd's fused float32 form (qlinearAddFusable)", () => {
  // every pair of operands: the TE evaluator rounds the "fma" intrinsic once (exactly), the
  // reference kernel computes in float64 and rounds after; they agree where the check lets the
  // compute fuse, which it does for scales as a network's
  it("equals the reference kernel on every operand pair, fused where a network's scales are", () => {
    const arb = fc.record({
      dtype: fc.constantFrom<Q8>("int8", "uint8"),
      s: fc.tuple(...[0, 1, 2].map(() => fc.float({ min: Math.fround(0.002), max: Math.fround(0.3), noNaN: true }))),
      z: fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255)),
    })
    fc.assert(
      fc.property(arb, ({ dtype, s: [sa, sb, sc], z: [za, zb, zc] }) => {
        const r = addTable(dtype, sa, lo(dtype) + za, sb, lo(dtype) + zb, sc, lo(dtype) + zc)
        expect(r.fused).toBe(true)
        expect(r.got).toEqual(r.want)
      }),
      lawParams(6),
    )
  }, 120_000)

  it("keeps the float64 form where a sum is not exact in float64 (a fused rounding would differ)", () => {
    // a·ra = 3 · 6990507·2^-23 = 2.5 + 2^-23, a float32 midpoint between 2.5 and 2.5 + 2^-22; b·rb = 2^-60 above it:
    // rounded once that is 2.5 + 2^-22 (→ 3), through float64 the midpoint itself, to even 2.5 (→ 2)
    const r = addTable("int8", 6990507 * 2 ** -23, 0, 2 ** -60, 0, 1, 0)
    expect(r.want[(128 + 3) * 256 + 128 + 1]).toBe(2)
    expect(r.got).toEqual(r.want)
    expect(r.fused).toBe(false)
  })
})
