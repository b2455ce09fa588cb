// The normalization group on one-node graphs: BatchNormalization's formula and training mode,
// LayerNormalization over several axes, GroupNormalization's opset-18 and -21 parameter shapes,
// QuantizeLinear's half-to-even rounding and saturation, blocked and per-axis scales,
// DynamicQuantizeLinear's worked example and NegativeLogLikelihoodLoss with ignore_index.
import { describe, expect, it } from "vitest"
import { attr, type Attrs } from "../src/ast/graph/attrs.js"
import type { DType } from "../src/ast/graph/dtype.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { tensor, toNumbers, type Tensor } from "../src/ast/graph/tensor.js"

const f32 = (shape: number[], values: number[]): Tensor => tensor("float32", shape, Float32Array.from(values))
const u8 = (shape: number[], values: number[]): Tensor => tensor("uint8", shape, Uint8Array.from(values))
const i8 = (shape: number[], values: number[]): Tensor => tensor("int8", shape, Int8Array.from(values))
const i64 = (shape: number[], values: number[]): Tensor => tensor("int64", shape, Float64Array.from(values))

/** Runs `op` on one node with `outputs` outputs; inputs given as undefined are omitted (""). */
const runN = (op: string, inputs: (Tensor | undefined)[], attrs: Attrs = {}, opset = 21, outputs = 1): Tensor[] => {
  const names = inputs.map((t, k) => (t ? `x${k}` : ""))
  const outs = Array.from({ length: outputs }, (_, j) => `y${j}`)
  const g = makeGraph({
    opset,
    inputs: inputs.flatMap((t, k) => (t ? [{ name: `x${k}`, type: { dtype: t.dtype, shape: t.shape } }] : [])),
    outputs: outs.map((name) => ({ name, type: { dtype: "float32" as DType, shape: [] } })),
    nodes: [node(op, names, outs, attrs)],
  })
  return runGraph(g, new Map(inputs.flatMap((t, k) => (t ? [[`x${k}`, t] as const] : []))))
}
const run = (op: string, inputs: (Tensor | undefined)[], attrs: Attrs = {}, opset = 21): Tensor => runN(op, inputs, attrs, opset)[0]

const close = (got: Tensor, want: number[], digits = 5) => {
  const g = toNumbers(got)
  expect(g.length).toBe(want.length)
  g.forEach((v, i) => expect(v).toBeCloseTo(want[i], digits))
}

const ramp = (n: number, f = (i: number) => Math.sin(i * 1.7) * 3 + i * 0.1): number[] => Array.from({ length: n }, (_, i) => f(i))

describe("BatchNormalization", () => {
  const xs = ramp(2 * 3 * 4)
  const x = f32([2, 3, 2, 2], xs)
  const [scale, bias, mean, variance] = [[1, 2, 0.5], [0, -1, 3], [0.2, -0.1, 1], [1, 4, 0.25]]
  const params = [scale, bias, mean, variance].map((v) => f32([3], v))

  it("inference: y = scale·(x − mean)/√(var + ε) + B per channel", () => {
    const eps = 1e-3
    const want = xs.map((v, i) => {
      const c = Math.floor(i / 4) % 3
      return (scale[c] * (v - mean[c])) / Math.sqrt(variance[c] + eps) + bias[c]
    })
    close(run("BatchNormalization", [x, ...params], { epsilon: attr.float(eps) }, 15), want, 4)
  })

  it("training mode normalizes with the batch statistics and blends them into the running ones", () => {
    const [y, runMean, runVar] = runN("BatchNormalization", [x, ...params], { training_mode: attr.int(1), momentum: attr.float(0.8) }, 15, 3)
    const of = (c: number) => xs.filter((_, i) => Math.floor(i / 4) % 3 === c)
    const bm = [0, 1, 2].map((c) => of(c).reduce((a, b) => a + b) / 8)
    const bv = [0, 1, 2].map((c) => of(c).reduce((a, b) => a + (b - bm[c]) ** 2, 0) / 8)
    close(runMean, bm.map((m, c) => mean[c] * 0.8 + m * 0.2))
    close(runVar, bv.map((v, c) => variance[c] * 0.8 + v * 0.2), 4)
    close(y, xs.map((v, i) => {
      const c = Math.floor(i / 4) % 3
      return (scale[c] * (v - bm[c])) / Math.sqrt(bv[c] + 1e-5) + bias[c]
    }), 4)
  })
})

describe("LayerNormalization", () => {
  const xs = ramp(2 * 3 * 4)
  const x = f32([2, 3, 4], xs)
  const normalize = (rows: number, len: number, s: (i: number) => number, b: (i: number) => number) =>
    Array.from({ length: rows }, (_, r) => {
      const row = xs.slice(r * len, (r + 1) * len)
      const m = row.reduce((a, v) => a + v) / len
      const inv = 1 / Math.sqrt(row.reduce((a, v) => a + (v - m) ** 2, 0) / len + 1e-5)
      return row.map((v, i) => (v - m) * inv * s(i) + b(i))
    }).flat()

  it("normalizes the dims from axis on, for every axis, with scale and bias over those dims", () => {
    for (const [axis, rows, shape] of [[0, 1, [2, 3, 4]], [1, 2, [3, 4]], [2, 6, [4]], [-1, 6, [4]], [-2, 2, [3, 4]]] as const) {
      const len = 24 / rows
      const s = f32([...shape], ramp(len, (i) => 1 + i / 10))
      const b = f32([...shape], ramp(len, (i) => i / 5 - 1))
      close(run("LayerNormalization", [x, s, b], { axis: attr.int(axis) }, 17), normalize(rows, len, (i) => 1 + i / 10, (i) => i / 5 - 1), 4)
    }
  })

  it("gives Mean and InvStdDev of the statistics' shape, in the stash type", () => {
    const [, m, inv] = runN("LayerNormalization", [x, f32([4], [1, 1, 1, 1])], { axis: attr.int(2) }, 17, 3)
    expect(m.shape).toEqual([2, 3, 1])
    expect(inv.dtype).toBe("float32")
    close(m, Array.from({ length: 6 }, (_, r) => xs.slice(r * 4, r * 4 + 4).reduce((a, v) => a + v) / 4))
  })
})

describe("GroupNormalization", () => {
  const x = f32([1, 4, 2], ramp(8))
  it("takes per-group scale and bias at opset 18 and per-channel ones at opset 21, alike when they agree", () => {
    const g18 = run("GroupNormalization", [x, f32([2], [2, 3]), f32([2], [1, -1])], { num_groups: attr.int(2) }, 18)
    const g21 = run("GroupNormalization", [x, f32([4], [2, 2, 3, 3]), f32([4], [1, 1, -1, -1])], { num_groups: attr.int(2) }, 21)
    close(g18, toNumbers(g21))
    // per group of 4 values: mean 0, scaled by 2 / 3 and shifted by 1 / −1
    const y = toNumbers(g21)
    expect(y.slice(0, 4).reduce((a, v) => a + v) / 4).toBeCloseTo(1, 5)
    expect(y.slice(4).reduce((a, v) => a + v) / 4).toBeCloseTo(-1, 5)
  })
})

describe("QuantizeLinear", () => {
  const x = f32([8], [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 300, -300])
  it("rounds half to even and saturates to uint8 and int8", () => {
    expect(toNumbers(run("QuantizeLinear", [x, f32([], [1]), u8([], [0])]))).toEqual([0, 2, 2, 0, 0, 0, 255, 0])
    expect(toNumbers(run("QuantizeLinear", [x, f32([], [1]), i8([], [0])]))).toEqual([0, 2, 2, 0, -2, -2, 127, -128])
    // the zero point is added after rounding: 2.5 → 2, + 1
    expect(toNumbers(run("QuantizeLinear", [x, f32([], [1]), u8([], [1])]))).toEqual([1, 3, 3, 1, 0, 0, 255, 0])
  })
  it("defaults to uint8 without a zero point, or to output_dtype", () => {
    expect(run("QuantizeLinear", [x, f32([], [2])]).dtype).toBe("uint8")
    const y = run("QuantizeLinear", [x, f32([], [2])], { output_dtype: attr.int(5) })
    expect(y.dtype).toBe("int16")
    expect(toNumbers(y)).toEqual([0, 1, 1, 0, -1, -1, 150, -150])
  })
  it("applies a scale per axis slice, or per block along the axis", () => {
    const m = f32([2, 3], [1, 2, 3, 4, 5, 6])
    expect(toNumbers(run("QuantizeLinear", [m, f32([3], [1, 2, 4]), u8([3], [0, 10, 20])], { axis: attr.int(1) }))).toEqual([1, 11, 21, 4, 12, 22])
    // blocks of 2 along axis 1: columns {0, 1} and {2}
    const blocked = run("QuantizeLinear", [m, f32([2, 2], [1, 10, 0.5, 2])], { axis: attr.int(1), block_size: attr.int(2) })
    expect(toNumbers(blocked)).toEqual([1, 2, 0, 8, 10, 3])
  })
  it("round-trips through DequantizeLinear", () => {
    const q = run("QuantizeLinear", [f32([4], [-1, 0, 0.5, 1]), f32([], [1 / 64]), i8([], [-3])])
    close(run("DequantizeLinear", [q, f32([], [1 / 64]), i8([], [-3])]), [-1, 0, 0.5, 1])
  })
})

describe("DynamicQuantizeLinear", () => {
  it("computes scale and zero point from the range including 0 (the spec's example)", () => {
    const [y, scale, zp] = runN("DynamicQuantizeLinear", [f32([6], [0, 2, -3, -2.5, 1.34, 0.5])], {}, 11, 3)
    expect(toNumbers(scale)[0]).toBeCloseTo(5 / 255, 7)
    expect(toNumbers(zp)).toEqual([153])
    expect(toNumbers(y)).toEqual([153, 255, 0, 26, 221, 179])
  })
})

describe("NegativeLogLikelihoodLoss", () => {
  const logp = f32([2, 3], [-1, -2, -3, -4, -5, -6])
  it("skips ignore_index targets and divides a weighted mean by the counted weights", () => {
    const attrs = { ignore_index: attr.int(1) }
    close(run("NegativeLogLikelihoodLoss", [logp, i64([2], [2, 1])], { ...attrs, reduction: attr.str("none") }, 13), [3, 0])
    close(run("NegativeLogLikelihoodLoss", [logp, i64([2], [2, 0]), f32([3], [0.5, 1, 2])], { reduction: attr.str("mean") }, 13), [(3 * 2 + 4 * 0.5) / 2.5])
    close(run("NegativeLogLikelihoodLoss", [logp, i64([2], [2, 1])], attrs, 13), [3])
  })
})
