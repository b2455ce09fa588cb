// The fast convolution and matrix-product paths against plain definitions on random small cases
// (seeded): groups, strides, dilations, pads and every auto_pad; batched, broadcast and 1-D
// products. Float32 inputs take the fast paths, the same inputs as float64 the plain ones.
import { describe, expect, it } from "vitest"
import { attr, type Attrs } from "../src/ast/graph/attrs.js"
import type { DType } from "../src/ast/graph/dtype.js"
import { resolveNode } from "../src/ast/graph/evaluate.js"
import { node } from "../src/ast/graph/graph.js"
import { fromArray, sizeOf, type Tensor } from "../src/ast/graph/tensor.js"
import { windowOf } from "../src/ast/graph/ops/nn-common.js"
import { convFast, convNaive } from "../src/ast/graph/ops/nn-conv-kernel.js"

/** A small deterministic generator (mulberry32). */
const rng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
type Rng = ReturnType<typeof rng>
const int = (r: Rng, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1))
const pick = <T>(r: Rng, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]
const values = (r: Rng, n: number) => Array.from({ length: n }, () => Math.round((r() * 2 - 1) * 64) / 64)

/** Runs one op through the registry: attributes decoded, type relation checked against the result. */
const runOp = (op: string, inputs: (Tensor | undefined)[], attrs: Attrs = {}, outputs = 1, opset = 22): readonly Tensor[] => {
  const n = node(op, inputs.map((t, i) => (t ? `i${i}` : "")), Array.from({ length: outputs }, (_, i) => `o${i}`), attrs)
  const { def, attrs: a } = resolveNode(n)
  const out = def.kernel({ node: n.name, attrs: a, opset, inputs, outputs, runSubgraph: () => [] })
  const types = def.infer({ node: n.name, attrs: a, opset, inputs: inputs.map((t) => t && { dtype: t.dtype, shape: t.shape }), values: [], outputs })
  out.forEach((t, i) => {
    expect(types[i].dtype).toBe(t.dtype)
    expect(types[i].shape).toEqual(t.shape)
  })
  return out
}

const as = (dtype: DType, t: Tensor) => fromArray(dtype, t.shape, t.data as ArrayLike<number>)

const expectClose = (got: Tensor, want: Tensor, tol = 1e-5) => {
  expect(got.shape).toEqual(want.shape)
  for (let i = 0; i < want.data.length; i++) expect(Math.abs(got.data[i] - want.data[i])).toBeLessThanOrEqual(tol * (1 + Math.abs(want.data[i])))
}

describe("Conv", () => {
  it("the im2col/gemm path equals the direct definition (random groups, strides, dilations, pads, auto_pad)", () => {
    const r = rng(7)
    for (let trial = 0; trial < 60; trial++) {
      const rank = pick(r, [1, 2, 2, 2, 3])
      const group = pick(r, [1, 1, 2, 3])
      const cg = int(r, 1, 3)
      const mg = int(r, 1, 3)
      const kernel = Array.from({ length: rank }, () => int(r, 1, 3))
      const strides = Array.from({ length: rank }, () => int(r, 1, 2))
      const dilations = Array.from({ length: rank }, () => int(r, 1, 2))
      const input = kernel.map((k, i) => (k - 1) * dilations[i] + 1 + int(r, 0, 5))
      const autoPad = pick(r, ["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"] as const)
      const pads = Array.from({ length: 2 * rank }, () => int(r, 0, 2))
      const win = windowOf(input, kernel, { auto_pad: autoPad, pads, strides, dilations, kernel_shape: undefined })
      const sizes = { batch: int(r, 1, 2), channels: cg * group, filters: mg * group, group }
      const x = Float32Array.from(values(r, sizes.batch * sizes.channels * sizeOf(input)))
      const w = Float32Array.from(values(r, sizes.filters * cg * sizeOf(kernel)))
      const bias = r() < 0.5 ? values(r, sizes.filters) : undefined
      const fast = convFast(x, w, bias, sizes, win)
      const naive = convNaive(x, w, bias, sizes, win)
      expect(fast.length).toBe(naive.length)
      for (let i = 0; i < naive.length; i++) expect(Math.abs(fast[i] - naive[i])).toBeLessThan(1e-5)
    }
  })

  it("depthwise, pointwise and strided 1×1 convolutions through the op equal the float64 path", () => {
    const r = rng(11)
    const cases: { c: number; m: number; group: number; k: number; attrs: Attrs }[] = [
      { c: 4, m: 4, group: 4, k: 3, attrs: { pads: attr.ints([1, 1, 1, 1]) } },
      { c: 3, m: 6, group: 3, k: 3, attrs: { strides: attr.ints([2, 2]), auto_pad: attr.str("SAME_UPPER") } },
      { c: 5, m: 7, group: 1, k: 1, attrs: {} },
      { c: 6, m: 4, group: 2, k: 1, attrs: { strides: attr.ints([2, 1]) } },
      { c: 2, m: 3, group: 1, k: 3, attrs: { dilations: attr.ints([2, 1]), auto_pad: attr.str("SAME_LOWER") } },
    ]
    for (const { c, m, group, k, attrs } of cases) {
      const x = fromArray("float32", [2, c, 7, 6], values(r, 2 * c * 42))
      const w = fromArray("float32", [m, c / group, k, k], values(r, (m * c * k * k) / group))
      const b = fromArray("float32", [m], values(r, m))
      const all = { ...attrs, group: attr.int(group) }
      const [fast] = runOp("Conv", [x, w, b], all)
      const [slow] = runOp("Conv", [as("float64", x), as("float64", w), as("float64", b)], all)
      expectClose(fast, slow)
    }
  })

  it("a hand-computed 1-D convolution", () => {
    const x = fromArray("float32", [1, 1, 4], [1, 2, 3, 4])
    const w = fromArray("float32", [1, 1, 2], [1, -1])
    const [y] = runOp("Conv", [x, w], { pads: attr.ints([1, 0]) })
    expect(Array.from(y.data)).toEqual([-1, -1, -1, -1])
  })
})

describe("ConvInteger and MatMulInteger", () => {
  it("keep sums beyond 2^24 exact (float64 accumulators and results)", () => {
    const k = 601 // 601 · 255 · 127 = 19,463,385: odd and above 2^24, so float32 could not hold it
    const x = fromArray("uint8", [1, k, 2, 1], new Array(2 * k).fill(255))
    const w = fromArray("int8", [1, k, 1, 1], new Array(k).fill(127))
    const [y] = runOp("ConvInteger", [x, w])
    expect(Array.from(y.data)).toEqual([19463385, 19463385])
    const a = fromArray("uint8", [5, k], new Array(5 * k).fill(255))
    const b = fromArray("int8", [k, 1], new Array(k).fill(127))
    const [z] = runOp("MatMulInteger", [a, b])
    expect(Array.from(z.data)).toEqual(new Array(5).fill(19463385))
  })
})

describe("ConvTranspose", () => {
  it("the gemm + col2im path equals the direct scatter", () => {
    const r = rng(3)
    for (let trial = 0; trial < 20; trial++) {
      const group = pick(r, [1, 2])
      const c = group * int(r, 1, 2)
      const mg = int(r, 1, 3)
      const strides = [int(r, 1, 3), int(r, 1, 2)]
      const attrs: Attrs = {
        group: attr.int(group),
        strides: attr.ints(strides),
        dilations: attr.ints([int(r, 1, 2), 1]),
        pads: attr.ints([int(r, 0, 1), 0, int(r, 0, 1), 1]),
        output_padding: attr.ints(strides.map((st) => int(r, 0, st - 1))),
      }
      const xShape = [1, c, int(r, 2, 4), int(r, 2, 4)]
      const xs = fromArray("float32", xShape, values(r, sizeOf(xShape)))
      const w = fromArray("float32", [c, mg, 3, 2], values(r, c * mg * 6))
      const [fast] = runOp("ConvTranspose", [xs, w], attrs)
      const [slow] = runOp("ConvTranspose", [as("float64", xs), as("float64", w)], attrs)
      expectClose(fast, slow)
    }
  })
})

describe("MatMul and Gemm", () => {
  it("the blocked float32 product equals the float64 loop (batched, broadcast, 1-D, row counts around the 4×4 block)", () => {
    const r = rng(5)
    const shapes: [number[], number[]][] = [
      [[7, 9], [9, 5]],
      [[1, 13], [13, 6]],
      [[3, 4, 10], [10, 11]],
      [[2, 1, 5, 8], [3, 8, 4]],
      [[9], [9, 3]],
      [[2, 6, 9], [9]],
      [[17], [17]],
      [[6, 33, 70], [6, 70, 9]],
      [[1, 40, 3], [5, 3, 2]],
    ]
    for (const [sa, sb] of shapes) {
      const a = fromArray("float32", sa, values(r, sizeOf(sa)))
      const b = fromArray("float32", sb, values(r, sizeOf(sb)))
      const [fast] = runOp("MatMul", [a, b])
      const [slow] = runOp("MatMul", [as("float64", a), as("float64", b)])
      expectClose(fast, slow)
    }
  })

  it("Gemm with transposes, alpha/beta and broadcast C equals the float64 loop", () => {
    const r = rng(9)
    for (let trial = 0; trial < 24; trial++) {
      const [m, k, n] = [int(r, 1, 9), int(r, 1, 12), int(r, 1, 9)]
      const transA = int(r, 0, 1)
      const transB = int(r, 0, 1)
      const a = fromArray("float32", transA ? [k, m] : [m, k], values(r, m * k))
      const b = fromArray("float32", transB ? [n, k] : [k, n], values(r, n * k))
      const cShape = pick(r, [[n], [m, n], [m, 1], [1], [1, n]])
      const c = r() < 0.8 ? fromArray("float32", cShape, values(r, sizeOf(cShape))) : undefined
      const attrs: Attrs = { transA: attr.int(transA), transB: attr.int(transB), alpha: attr.float(pick(r, [1, 0.5])), beta: attr.float(pick(r, [1, 2, 0])) }
      const [fast] = runOp("Gemm", [a, b, c], attrs)
      const [slow] = runOp("Gemm", [as("float64", a), as("float64", b), c && as("float64", c)], attrs)
      expectClose(fast, slow)
    }
  })
})

describe("Einsum", () => {
  it("matches MatMul, traces, diagonals and ellipsis broadcasting", () => {
    const r = rng(13)
    const a = fromArray("float64", [2, 3, 4], values(r, 24))
    const b = fromArray("float64", [2, 4, 5], values(r, 40))
    expectClose(runOp("Einsum", [a, b], { equation: attr.str("bij,bjk->bik") })[0], runOp("MatMul", [a, b])[0])
    expectClose(runOp("Einsum", [a, b], { equation: attr.str("...ij,...jk") })[0], runOp("MatMul", [a, b])[0])
    const sq = fromArray("float64", [3, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9])
    expect(Array.from(runOp("Einsum", [sq], { equation: attr.str("ii->i") })[0].data)).toEqual([1, 5, 9])
    expect(Array.from(runOp("Einsum", [sq], { equation: attr.str("ii") })[0].data)).toEqual([15])
    expect(Array.from(runOp("Einsum", [sq], { equation: attr.str("ij") })[0].data)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9])
    expect(Array.from(runOp("Einsum", [sq], { equation: attr.str("ji") })[0].data)).toEqual([1, 4, 7, 2, 5, 8, 3, 6, 9])
    // the MatMul path (float32) against the generic loop (a diagonal forces it)
    const p = fromArray("float32", [3, 2, 5], values(r, 30))
    const q = fromArray("float32", [5, 3, 4], values(r, 60))
    const [viaMatmul] = runOp("Einsum", [p, q], { equation: attr.str("bik,kbj->jbi") })
    const eye = fromArray("float32", [3, 3], [1, 0, 0, 0, 1, 0, 0, 0, 1])
    const [generic] = runOp("Einsum", [p, q, eye], { equation: attr.str("bik,kcj,bc->jbi") })
    expectClose(viaMatmul, generic)
    const v = fromArray("float64", [3], [1, 2, 3])
    expect(runOp("Einsum", [sq, v], { equation: attr.str("...j,j->...") })[0].data).toEqual(Float64Array.from([14, 32, 50]))
  })
})

/** Pooling by its definition: every tap of every window, tested against the padded and unpadded input. */
const naivePool = (x: Tensor, kernel: number[], strides: number[], dilations: number[], pads: number[], ceil: boolean, mode: "max" | "avg", includePad: boolean) => {
  const rank = kernel.length
  const input = x.shape.slice(2)
  const win = windowOf(input, kernel, { auto_pad: "NOTSET", pads, strides, dilations, kernel_shape: undefined }, ceil)
  const planes = x.shape[0] * x.shape[1]
  const outSize = sizeOf(win.output)
  const kSize = sizeOf(kernel)
  const y: number[] = []
  for (let c = 0; c < planes; c++)
    for (let o = 0; o < outSize; o++) {
      const oc = win.output.map((_, d) => Math.floor(o / sizeOf(win.output.slice(d + 1))) % win.output[d])
      let best = -Infinity
      let sum = 0
      let count = 0
      let padded = 0
      for (let t = 0; t < kSize; t++) {
        const pos = kernel.map((k, d) => oc[d] * strides[d] - pads[d] + (Math.floor(t / sizeOf(kernel.slice(d + 1))) % k) * dilations[d])
        if (pos.every((p, d) => p >= -pads[d] && p < input[d] + pads[d + rank])) padded++
        if (!pos.every((p, d) => p >= 0 && p < input[d])) continue
        const v = x.data[c * sizeOf(input) + pos.reduce((a, p, d) => a * input[d] + p, 0)]
        best = Math.max(best, v)
        sum += v
        count++
      }
      y.push(mode === "max" ? best : sum / (includePad ? padded : count))
    }
  return { shape: [x.shape[0], x.shape[1], ...win.output], y }
}

describe("MaxPool and AveragePool", () => {
  it("equal the definition on random windows (ceil_mode, dilations, pads, count_include_pad)", () => {
    const r = rng(17)
    for (let trial = 0; trial < 40; trial++) {
      const rank = pick(r, [1, 2, 2, 3])
      const kernel = Array.from({ length: rank }, () => int(r, 1, 3))
      const strides = Array.from({ length: rank }, () => int(r, 1, 3))
      const dilations = Array.from({ length: rank }, () => int(r, 1, 2))
      const pads = [...kernel, ...kernel].map((k) => int(r, 0, k - 1))
      const input = kernel.map((k, i) => (k - 1) * dilations[i] + 1 + int(r, 0, 4))
      const ceil = r() < 0.5
      const shape = [int(r, 1, 2), int(r, 1, 3), ...input]
      const xt = fromArray("float32", shape, values(r, sizeOf(shape)))
      const attrs: Attrs = {
        kernel_shape: attr.ints(kernel),
        strides: attr.ints(strides),
        dilations: attr.ints(dilations),
        pads: attr.ints(pads),
        ceil_mode: attr.int(ceil ? 1 : 0),
      }
      const [mx] = runOp("MaxPool", [xt], attrs)
      const want = naivePool(xt, kernel, strides, dilations, pads, ceil, "max", false)
      expect(mx.shape).toEqual(want.shape)
      expect(Array.from(mx.data)).toEqual(want.y.map(Math.fround))
      const includePad = r() < 0.5
      const [avg] = runOp("AveragePool", [xt], { ...attrs, count_include_pad: attr.int(includePad ? 1 : 0) })
      const wantAvg = naivePool(xt, kernel, strides, dilations, pads, ceil, "avg", includePad)
      expectClose(avg, fromArray("float64", wantAvg.shape, wantAvg.y))
    }
  })


  it("gives row-major and column-major Indices", () => {
    const x = fromArray("float32", [1, 1, 2, 3], [1, 6, 3, 4, 5, 2])
    const attrs = { kernel_shape: attr.ints([2, 2]) }
    const [y, i] = runOp("MaxPool", [x], attrs, 2)
    expect(Array.from(y.data)).toEqual([6, 6])
    expect(Array.from(i.data)).toEqual([1, 1])
    const [, ic] = runOp("MaxPool", [x], { ...attrs, storage_order: attr.int(1) }, 2)
    expect(Array.from(ic.data)).toEqual([2, 2])
  })
})
