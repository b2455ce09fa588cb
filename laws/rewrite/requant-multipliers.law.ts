// The weight-only stages the int8 layout rewrite folds at compile time: the requantizing multipliers
// (src/ast/graph/ops/int8-packed.ts's requantMultipliers, an input of QLinearConvPacked /
// QLinearMatMulPacked) against the stage QLinearConv's / QLinearMatMul's compute evaluates on every
// run without them (op-library-quant-int.ts's `mult`, evaluated from its TE): equal bit for bit on
// random scales — float32 over its whole positive range (subnormals, huge values, quotients that
// overflow to infinity or round to 0 among them) and float64 —, per tensor or per channel. Scales
// of float16 or of differing types are not folded (the compute rounds those itself). And the rule
// folds them exactly where the scales are constants of a type it folds (the compiled results of the
// folded and the computed multipliers are held equal by pack-int8.law.ts and pack-int8-matmul.law.ts).
// And a grouped conv's weights minus their zero point widened to int16 (widenInt8Weights,
// QLinearConvGrouped's input 10) against the depthwise compute's `dwweight` stage, on int8 and
// uint8 weights, zero points absent, per tensor or per output channel.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attr } from "../../src/ast/graph/attrs.js"
import { resolveNode } from "../../src/ast/graph/evaluate.js"
import { makeGraph, node } from "../../src/ast/graph/graph.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import { requantMultipliers, widenInt8Weights } from "../../src/ast/graph/ops/int8-packed.js"
import { tensor, type Tensor } from "../../src/ast/graph/tensor.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { placeholder, postOrder } from "../../src/ast/te/tensor.js"
import { OP_COMPUTES } from "../../src/lowering/op-library.js"
import { alterLayoutSync } from "../../src/rewrite/alter-layout.js"
import { lawParams } from "../support.js"

type Scales = { readonly dtype: "float32" | "float64"; readonly xs: number; readonly ws: readonly number[]; readonly ys: number }

const f32 = fc.float({ min: Math.fround(1e-45), max: Math.fround(3e38), noNaN: true, noDefaultInfinity: true })
const f64 = fc.double({ min: 1e-300, max: 1e300, noNaN: true, noDefaultInfinity: true })
const arbScales: fc.Arbitrary<Scales> = fc.oneof(
  fc.record({ dtype: fc.constant("float32" as const), xs: f32, ws: fc.array(f32, { minLength: 1, maxLength: 20 }), ys: f32 }),
  fc.record({ dtype: fc.constant("float64" as const), xs: f64, ws: fc.array(f64, { minLength: 1, maxLength: 20 }), ys: f64 }),
)
const scalar = (dtype: Scales["dtype"], v: number): Tensor => tensor(dtype, [], dtype === "float32" ? Float32Array.of(v) : Float64Array.of(v))

/** The op's `mult` stage evaluated from its TE: QLinearConv (1×1, M = ws's length or 3 for a scalar w_scale) or QLinearMatMul. */
const computed = (op: "QLinearConv" | "QLinearMatMul", s: Scales, M: number, perChannel: boolean): Tensor => {
  const ws = perChannel ? tensor(s.dtype, [M], s.dtype === "float32" ? Float32Array.from(s.ws) : Float64Array.from(s.ws)) : scalar(s.dtype, s.ws[0])
  const conv = op === "QLinearConv"
  const feeds: [string, Tensor][] = [
    ["x", tensor("int8", conv ? [1, 2, 1, 1] : [1, 2], new Int8Array(2))],
    ["xs", scalar(s.dtype, s.xs)],
    ["xzp", tensor("int8", [], new Int8Array(1))],
    ["w", tensor("int8", conv ? [M, 2, 1, 1] : [2, M], new Int8Array(2 * M))],
    ["ws", ws],
    ["wzp", tensor("int8", [], new Int8Array(1))],
    ["ys", scalar(s.dtype, s.ys)],
    ["yzp", tensor("int8", [], new Int8Array(1))],
  ]
  const n = node(op, feeds.map(([k]) => k), ["y"], conv ? { kernel_shape: attr.ints([1, 1]) } : {})
  const made = OP_COMPUTES[op]({
    node: n,
    attrs: resolveNode(n).attrs as Record<string, unknown>,
    inputs: feeds.map(([k, v]) => placeholder(k, v.shape, v.dtype)),
    outputs: [{ dtype: "int8", shape: conv ? [1, M, 1, 1] : [1, M] }],
    name: (suffix) => (suffix ? `y_${suffix}` : "y"),
    constants: feeds.map(([, v]) => v.data as ArrayLike<number>),
    opset: 19,
  })
  const mult = postOrder(made).find((t) => t.name.startsWith("y_mult"))
  if (!mult) throw new Error(`${op}'s compute has no multiplier stage`)
  return evaluateTE([mult], new Map(feeds))[0]
}

const bits = (t: Tensor): number[] => Array.from(t.data as ArrayLike<number>, Number)

describe("the requantizing multipliers folded at compile time (requantMultipliers)", () => {
  it("equal the multiplier stage QLinearConv's and QLinearMatMul's computes evaluate, bit for bit", () => {
    fc.assert(
      fc.property(arbScales, fc.boolean(), fc.constantFrom("QLinearConv" as const, "QLinearMatMul" as const), (s, perChannel, op) => {
        const M = perChannel ? s.ws.length : 3
        const ws = perChannel ? tensor(s.dtype, [M], s.dtype === "float32" ? Float32Array.from(s.ws) : Float64Array.from(s.ws)) : scalar(s.dtype, s.ws[0])
        const folded = requantMultipliers(scalar(s.dtype, s.xs), ws, scalar(s.dtype, s.ys), M)
        expect(folded?.dtype).toBe(s.dtype)
        expect(folded!.shape).toEqual([M])
        // (Object.is through toEqual: 0 and −0 apart, infinities equal)
        expect(bits(folded!)).toEqual(bits(computed(op, s, M, perChannel)))
      }),
      lawParams(300),
    )
  })

  it("decline float16 scales and scales of differing types", () => {
    const h = tensor("float16", [], Float32Array.of(0.5))
    const f = scalar("float32", 0.5)
    const d = scalar("float64", 0.5)
    expect(requantMultipliers(h, h, h, 1)).toBeUndefined()
    expect(requantMultipliers(f, d, f, 1)).toBeUndefined()
    expect(requantMultipliers(f, tensor("float32", [2], Float32Array.of(1, 2)), f, 3)).toBeUndefined()
  })

  it("are folded into the packed conv exactly where its scales are constants", () => {
    fc.assert(
      fc.property(fc.boolean(), fc.integer({ min: 1, max: 40 }), (constScales, M) => {
        const init = new Map<string, Tensor>([
          ["xzp", tensor("int8", [], Int8Array.of(3))],
          ["w", tensor("int8", [M, 4, 1, 1], Int8Array.from({ length: M * 4 }, (_, k) => (k * 37) % 255 - 127))],
          ["ws", tensor("float32", [M], Float32Array.from({ length: M }, (_, k) => 0.001 * (k + 1)))],
          ["yzp", tensor("int8", [], Int8Array.of(-2))],
        ])
        if (constScales) {
          init.set("xs", scalar("float32", 0.02))
          init.set("ys", scalar("float32", 0.07))
        }
        const scaleInputs = constScales ? [] : [{ name: "xs", type: { dtype: "float32" as const, shape: [] } }, { name: "ys", type: { dtype: "float32" as const, shape: [] } }]
        const g = makeGraph({
          opset: 13,
          inputs: [{ name: "x", type: { dtype: "int8", shape: [1, 4, 4, 4] } }, ...scaleInputs],
          outputs: [{ name: "y", type: { dtype: "int8", shape: [] } }],
          initializers: init,
          nodes: [node("QLinearConv", ["x", "xs", "xzp", "w", "ws", "", "ys", "yzp"], ["y"], {})],
        })
        const after = alterLayoutSync(bindSync(g), { vectorLanes: 16, fmaUnits: 2, fmaLatency: 4, vectorRegisters: 32 })
        const packed = after.nodes.find((n) => n.op === "QLinearConvPacked")!
        expect(packed.inputs.length).toBe(constScales ? 10 : 8)
        if (constScales) expect(bits(after.initializers.get(packed.inputs[9])!)).toEqual(bits(requantMultipliers(init.get("xs")!, init.get("ws")!, init.get("ys")!, M)!))
      }),
      lawParams(20),
    )
  })
})

describe("a grouped conv's weights widened at compile time (widenInt8Weights)", () => {
  it("equal the depthwise compute's dwweight stage, bit for bit", () => {
    const arb = fc.record({
      dtype: fc.constantFrom("int8" as const, "uint8" as const),
      M: fc.integer({ min: 2, max: 12 }),
      perGroup: fc.integer({ min: 1, max: 3 }),
      K: fc.integer({ min: 1, max: 3 }),
      zp: fc.constantFrom("absent" as const, "tensor" as const, "channel" as const),
      seed: fc.integer({ min: 0, max: 1 << 30 }),
    })
    fc.assert(
      fc.property(arb, ({ dtype, M, perGroup, K, zp, seed }) => {
        // (M groups, perGroup input channels each: depthwise where perGroup is 1)
        const C = M * perGroup
        let r = seed
        const next = (lo: number, hi: number) => ((r = (Math.imul(r, 1103515245) + 12345) >>> 0), lo + ((r >>> 8) % (hi - lo + 1)))
        const [lo, hi] = dtype === "int8" ? [-128, 127] : [0, 255]
        const arr = (n: number) => (dtype === "int8" ? Int8Array.from({ length: n }, () => next(lo, hi)) : Uint8Array.from({ length: n }, () => next(lo, hi)))
        const w = tensor(dtype, [M, perGroup, K, K], arr(M * perGroup * K * K))
        const wzp = zp === "absent" ? undefined : tensor(dtype, zp === "tensor" ? [] : [M], arr(zp === "tensor" ? 1 : M))
        const feeds: [string, Tensor][] = [
          ["x", tensor(dtype, [1, C, 4, 4], arr(C * 16))],
          ["xs", scalar("float32", 0.02)],
          ["xzp", tensor(dtype, [], arr(1))],
          ["w", w],
          ["ws", scalar("float32", 0.01)],
          ...(wzp ? [["wzp", wzp] as [string, Tensor]] : []),
          ["ys", scalar("float32", 0.3)],
          ["yzp", tensor(dtype, [], arr(1))],
        ]
        const names = feeds.map(([k]) => k)
        const inputs = wzp ? names : [...names.slice(0, 5), "", ...names.slice(5)]
        const n = node("QLinearConv", inputs, ["y"], { kernel_shape: attr.ints([K, K]), group: attr.int(M) })
        const byName = new Map(feeds)
        const made = OP_COMPUTES.QLinearConv({
          node: n,
          attrs: resolveNode(n).attrs as Record<string, unknown>,
          inputs: inputs.map((k) => (k ? placeholder(k, byName.get(k)!.shape, byName.get(k)!.dtype) : undefined)),
          outputs: [{ dtype, shape: [1, M, 5 - K, 5 - K] }],
          name: (suffix) => (suffix ? `y_${suffix}` : "y"),
          constants: inputs.map((k) => (k ? (byName.get(k)!.data as ArrayLike<number>) : undefined)),
          opset: 19,
        })
        const stage = postOrder(made).find((t) => t.name.startsWith("y_dwweight"))
        if (!stage) throw new Error("the grouped compute has no dwweight stage")
        const want = evaluateTE([stage], byName)[0]
        const got = widenInt8Weights(w, wzp)
        expect(got.dtype).toBe(want.dtype)
        expect(got.shape).toEqual(want.shape)
        expect(bits(got)).toEqual(bits(want))
      }),
      lawParams(200),
    )
  })
})
