// Selection: TopK (the k largest or smallest along an axis, ties to the lower index) and Unique
// (distinct elements or slices along an axis, with first-occurrence indices, inverse indices
// and counts). Both have data-dependent output shapes where k or the input is not constant.
import { A, attrs } from "../attrs.js"
import { allocate } from "../dtype.js"
import { check, defineOp, fail, type AnyOpDef, type Dim } from "../op.js"
import { sizeOf, tensor, type Tensor } from "../tensor.js"
import { inputType, req } from "./util.js"
import { axisIn, scalarOf, symDim } from "./tensor-common.js"

// ---------------------------------------------------------------------------------------------
// TopK

/** k from the attribute (before opset 10) or from input 1. */
const topkK = (opset: number, attrK: number | undefined, kInput: Tensor | undefined): number | undefined => {
  if (kInput) return scalarOf(kInput, "k")
  if (opset < 10) return attrK ?? fail("attribute 'k' is required before opset 10")
  return undefined
}

/** Orders `a` before `b` (positions in the row, values va/vb): larger (or smaller) first, then lower index. NaN counts as largest. */
const before = (largest: boolean, va: number, vb: number, a: number, b: number): number => {
  if (va === vb || (va !== va && vb !== vb)) return a - b
  if (va !== va) return largest ? -1 : 1
  if (vb !== vb) return largest ? 1 : -1
  return largest ? (va > vb ? -1 : 1) : va < vb ? -1 : 1
}

const TopK = defineOp({
  attrs: attrs({ axis: A.int(-1), largest: A.int(1), sorted: A.int(1), k: A.optInt() }),
  inputs: [1, 2],
  outputs: [2, 2],
  kind: "opaque",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const axis = axisIn(ctx.attrs.axis, x.shape.length)
    const k = topkK(ctx.opset, ctx.attrs.k, ctx.values[1])
    if (k !== undefined) check(k >= 0, () => `k ${k} must be non-negative`)
    const shape: Dim[] = x.shape.map((d, i) => (i === axis ? (k ?? symDim(ctx, 0, i)) : d))
    return [
      { dtype: x.dtype, shape },
      { dtype: "int64", shape },
    ]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const axis = axisIn(ctx.attrs.axis, x.shape.length)
    const k = topkK(ctx.opset, ctx.attrs.k, ctx.inputs[1]) ?? fail("input 'K' is required from opset 10")
    const dim = x.shape[axis]
    check(Number.isInteger(k) && k >= 0 && k <= dim, () => `k ${k} out of range [0, ${dim}] on axis ${axis}`)
    const outer = sizeOf(x.shape.slice(0, axis))
    const inner = sizeOf(x.shape.slice(axis + 1))
    const largest = ctx.attrs.largest !== 0
    const d = x.data
    const vals = allocate(x.dtype, outer * k * inner)
    const idxs = new Float64Array(outer * k * inner)
    const row = new Float64Array(dim)
    const order = Array.from({ length: dim }, (_, i) => i)
    for (let o = 0; o < outer; o++)
      for (let j = 0; j < inner; j++) {
        const base = o * dim * inner + j
        for (let q = 0; q < dim; q++) {
          row[q] = d[base + q * inner]
          order[q] = q
        }
        order.sort((a, b) => before(largest, row[a], row[b], a, b))
        const ob = o * k * inner + j
        for (let q = 0; q < k; q++) {
          vals[ob + q * inner] = row[order[q]]
          idxs[ob + q * inner] = order[q]
        }
      }
    const shape = x.shape.map((s, i) => (i === axis ? k : s))
    return [tensor(x.dtype, shape, vals), tensor("int64", shape, idxs)]
  },
})

// ---------------------------------------------------------------------------------------------
// Unique

/** Lexicographic comparison of two slices (NaN after every number, NaNs equal). */
const compareSlices = (a: Float64Array, b: Float64Array): number => {
  for (let i = 0; i < a.length; i++) {
    const x = a[i]
    const y = b[i]
    if (x === y || (x !== x && y !== y)) continue
    if (x !== x) return 1
    if (y !== y) return -1
    return x < y ? -1 : 1
  }
  return 0
}

const Unique = defineOp({
  attrs: attrs({ sorted: A.int(1), axis: A.optInt() }),
  inputs: [1, 1],
  outputs: [1, 4],
  kind: "opaque",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const u = symDim(ctx, 0, 0)
    let y: Dim[]
    let n: Dim
    if (ctx.attrs.axis === undefined) {
      y = [u]
      n = x.shape.some((d) => typeof d !== "number") ? symDim(ctx, 2, 0) : sizeOf(x.shape as number[])
    } else {
      const axis = axisIn(ctx.attrs.axis, x.shape.length)
      y = x.shape.map((d, i) => (i === axis ? u : d))
      n = x.shape[axis]
    }
    const types = [
      { dtype: x.dtype, shape: y },
      { dtype: "int64" as const, shape: [u] },
      { dtype: "int64" as const, shape: [n] },
      { dtype: "int64" as const, shape: [u] },
    ]
    return types.slice(0, ctx.outputs)
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    // slices: along the axis, or single elements of the flattened input
    const axis = ctx.attrs.axis === undefined ? undefined : axisIn(ctx.attrs.axis, x.shape.length)
    const dim = axis === undefined ? x.data.length : x.shape[axis]
    const outer = axis === undefined ? 1 : sizeOf(x.shape.slice(0, axis))
    const inner = axis === undefined ? 1 : sizeOf(x.shape.slice(axis + 1))
    const width = outer * inner
    const slices: Float64Array[] = []
    for (let k = 0; k < dim; k++) {
      const s = new Float64Array(width)
      for (let o = 0; o < outer; o++) for (let j = 0; j < inner; j++) s[o * inner + j] = x.data[(o * dim + k) * inner + j]
      slices.push(s)
    }
    // groups in order of first occurrence (a sort keeps equal slices adjacent, stably)
    const order = Array.from({ length: dim }, (_, i) => i).sort((a, b) => compareSlices(slices[a], slices[b]) || a - b)
    const groupOf = new Int32Array(dim)
    const firsts: number[] = [] // first occurrence of each group, in sorted order
    const counts: number[] = []
    for (let q = 0; q < dim; q++) {
      const i = order[q]
      if (q === 0 || compareSlices(slices[order[q - 1]], slices[i]) !== 0) {
        firsts.push(i)
        counts.push(0)
      }
      groupOf[i] = firsts.length - 1
      counts[counts.length - 1]++
    }
    // output order: sorted, or by first occurrence
    const rank = firsts.map((_, g) => g)
    if (ctx.attrs.sorted === 0) rank.sort((a, b) => firsts[a] - firsts[b])
    const pos = new Int32Array(rank.length) // group → output position
    rank.forEach((g, p) => (pos[g] = p))
    const u = rank.length
    const y = allocate(x.dtype, outer * u * inner)
    rank.forEach((g, p) => {
      const s = slices[firsts[g]]
      for (let o = 0; o < outer; o++) for (let j = 0; j < inner; j++) y[(o * u + p) * inner + j] = s[o * inner + j]
    })
    const yShape = axis === undefined ? [u] : x.shape.map((d, i) => (i === axis ? u : d))
    const outs: Tensor[] = [
      tensor(x.dtype, yShape, y),
      tensor("int64", [u], Float64Array.from(rank, (g) => firsts[g])),
      tensor("int64", [dim], Float64Array.from(groupOf, (g) => pos[g])),
      tensor("int64", [u], Float64Array.from(rank, (g) => counts[g])),
    ]
    return outs.slice(0, ctx.outputs)
  },
})

export const reduceSelectOps = { TopK, Unique } satisfies Record<string, AnyOpDef>
