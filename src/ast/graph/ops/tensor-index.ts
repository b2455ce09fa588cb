// Indexing: Gather, GatherElements, GatherND, ScatterElements (and the deprecated Scatter),
// ScatterND, OneHot and NonZero. Negative indices wrap once; an index out of range is an error
// naming the index and the bound, never a silent wrong read.
import { A, attrs } from "../attrs.js"
import { allocate, isInteger } from "../dtype.js"
import { check, defineOp, fail, type AnyOpDef, type Dim } from "../op.js"
import { sizeOf, stridesOf, tensor, type Tensor } from "../tensor.js"
import { inputType, req } from "./util.js"
import { aroundAxis, axisIn, scalarOf, symDim, wrapIndex } from "./tensor-common.js"

/** Index values, each wrapped once into [0, bound). */
const indicesIn = (t: Tensor, bound: number, what = "index"): Int32Array => {
  check(isInteger(t.dtype), () => `indices must be int32 or int64, got ${t.dtype}`)
  const out = new Int32Array(t.data.length)
  for (let i = 0; i < out.length; i++) out[i] = wrapIndex(t.data[i], bound, what)
  return out
}

// ---------------------------------------------------------------------------------------------
// Gather family

const Gather = defineOp({
  attrs: attrs({ axis: A.int(0) }),
  inputs: [2, 2],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const idx = inputType(ctx, 1)
    const axis = axisIn(ctx.attrs.axis, x.shape.length)
    return [{ dtype: x.dtype, shape: [...x.shape.slice(0, axis), ...idx.shape, ...x.shape.slice(axis + 1)] }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const ind = req(ctx.inputs, 1, "indices")
    const axis = axisIn(ctx.attrs.axis, x.shape.length)
    const { outer, dim, inner } = aroundAxis(x.shape, axis)
    const idx = indicesIn(ind, dim, `index on axis ${axis}:`)
    const n = idx.length
    const out = allocate(x.dtype, outer * n * inner)
    for (let o = 0; o < outer; o++)
      for (let k = 0; k < n; k++) {
        const src = (o * dim + idx[k]) * inner
        out.set(x.data.subarray(src, src + inner), (o * n + k) * inner)
      }
    return [tensor(x.dtype, [...x.shape.slice(0, axis), ...ind.shape, ...x.shape.slice(axis + 1)], out)]
  },
})

/**
 * Walks every position of `shape` (the indices' shape), calling `f(flat, offset)` where `offset`
 * is the flat offset of that position in a tensor with `strides`, skipping axis `axis`.
 */
const walkExceptAxis = (shape: readonly number[], strides: readonly number[], axis: number, f: (flat: number, offset: number) => void): void => {
  const n = sizeOf(shape)
  const rank = shape.length
  const counter = new Array<number>(rank).fill(0)
  let off = 0
  for (let i = 0; i < n; i++) {
    f(i, off)
    for (let d = rank - 1; d >= 0; d--) {
      counter[d]++
      if (d !== axis) off += strides[d]
      if (counter[d] < shape[d]) break
      if (d !== axis) off -= strides[d] * counter[d]
      counter[d] = 0
    }
  }
}

/**
 * Checks GatherElements/ScatterElements index shapes against the data's (at bind too, where the
 * dims are static: a compiled target would read past the data's rows otherwise).
 */
const checkElementShapes = (data: { readonly shape: readonly Dim[] }, ind: { readonly shape: readonly Dim[] }, axis: number): void => {
  check(ind.shape.length === data.shape.length, () => `indices rank ${ind.shape.length} differs from data rank ${data.shape.length}`)
  ind.shape.forEach((d, i) => {
    const e = data.shape[i]
    check(i === axis || typeof d !== "number" || typeof e !== "number" || d <= e, () => `indices shape [${ind.shape.join(", ")}] exceeds data shape [${data.shape.join(", ")}] on axis ${i}`)
  })
}

const GatherElements = defineOp({
  attrs: attrs({ axis: A.int(0) }),
  inputs: [2, 2],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const idx = inputType(ctx, 1)
    checkElementShapes(x, idx, axisIn(ctx.attrs.axis, x.shape.length))
    return [{ dtype: x.dtype, shape: idx.shape }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const ind = req(ctx.inputs, 1, "indices")
    const axis = axisIn(ctx.attrs.axis, x.shape.length)
    checkElementShapes(x, ind, axis)
    const idx = indicesIn(ind, x.shape[axis], `index on axis ${axis}:`)
    const s = stridesOf(x.shape)
    const out = allocate(x.dtype, idx.length)
    walkExceptAxis(ind.shape, s, axis, (i, off) => (out[i] = x.data[off + idx[i] * s[axis]]))
    return [tensor(x.dtype, ind.shape, out)]
  },
})

/** GatherND's / ScatterND's geometry: batch count, tuples per batch, tuple length, slice size. */
const ndPlan = (data: readonly number[], ind: readonly number[], b: number) => {
  check(ind.length >= 1, "indices must have rank 1 or more")
  const m = ind[ind.length - 1]
  check(b >= 0 && b < Math.min(data.length, ind.length), () => `batch_dims ${b} out of range for ranks ${data.length} and ${ind.length}`)
  for (let i = 0; i < b; i++) check(data[i] === ind[i], () => `batch dim ${i} differs: data ${data[i]}, indices ${ind[i]}`)
  check(m >= 1 && m <= data.length - b, () => `index tuples of length ${m} do not fit data rank ${data.length} with batch_dims ${b}`)
  return {
    m,
    batches: sizeOf(data.slice(0, b)),
    tuples: sizeOf(ind.slice(b, -1)),
    slice: sizeOf(data.slice(b + m)),
    batchSize: sizeOf(data.slice(b)),
  }
}

/** The flat offset, within one batch, of index tuple `t`; each coordinate wrapped once and checked. */
const tupleOffset = (data: readonly number[], strides: readonly number[], b: number, m: number, ind: Tensor, t: number): number => {
  let off = 0
  for (let j = 0; j < m; j++) off += wrapIndex(ind.data[t * m + j], data[b + j], `index on axis ${b + j}:`) * strides[b + j]
  return off
}

const GatherND = defineOp({
  attrs: attrs({ batch_dims: A.int(0) }),
  inputs: [2, 2],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const idx = inputType(ctx, 1)
    const m = idx.shape[idx.shape.length - 1]
    if (typeof m !== "number") return fail("the index tuple length (last dim of indices) must be static")
    return [{ dtype: x.dtype, shape: [...idx.shape.slice(0, -1), ...x.shape.slice(ctx.attrs.batch_dims + m)] }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const ind = req(ctx.inputs, 1, "indices")
    check(isInteger(ind.dtype), () => `indices must be int32 or int64, got ${ind.dtype}`)
    const b = ctx.attrs.batch_dims
    const p = ndPlan(x.shape, ind.shape, b)
    const s = stridesOf(x.shape)
    const out = allocate(x.dtype, p.batches * p.tuples * p.slice)
    for (let bi = 0; bi < p.batches; bi++)
      for (let t = 0; t < p.tuples; t++) {
        const tt = bi * p.tuples + t
        const src = bi * p.batchSize + tupleOffset(x.shape, s, b, p.m, ind, tt)
        out.set(x.data.subarray(src, src + p.slice), tt * p.slice)
      }
    return [tensor(x.dtype, [...ind.shape.slice(0, -1), ...x.shape.slice(b + p.m)], out)]
  },
})

// ---------------------------------------------------------------------------------------------
// Scatter family

type Reduction = "none" | "add" | "mul" | "max" | "min"
const REDUCTIONS = ["none", "add", "mul", "max", "min"] as const

const combine: { readonly [R in Reduction]: (a: number, b: number) => number } = {
  none: (_, b) => b,
  add: (a, b) => a + b,
  mul: (a, b) => a * b,
  max: (a, b) => (a >= b || Number.isNaN(a) ? a : b),
  min: (a, b) => (a <= b || Number.isNaN(a) ? a : b),
}

const scatterElements = (x: Tensor, ind: Tensor, upd: Tensor, axisAttr: number, reduction: Reduction): Tensor => {
  const axis = axisIn(axisAttr, x.shape.length)
  checkElementShapes(x, ind, axis)
  check(upd.shape.length === ind.shape.length && upd.shape.every((d, i) => d === ind.shape[i]), () => `updates shape [${upd.shape.join(", ")}] differs from indices shape [${ind.shape.join(", ")}]`)
  check(upd.dtype === x.dtype, () => `updates dtype ${upd.dtype} differs from data dtype ${x.dtype}`)
  const idx = indicesIn(ind, x.shape[axis], `index on axis ${axis}:`)
  const s = stridesOf(x.shape)
  const out = allocate(x.dtype, x.data.length)
  out.set(x.data)
  const f = combine[reduction]
  walkExceptAxis(ind.shape, s, axis, (i, off) => {
    const dst = off + idx[i] * s[axis]
    out[dst] = f(out[dst], upd.data[i])
  })
  return tensor(x.dtype, x.shape, out)
}

const ScatterElements = defineOp({
  attrs: attrs({ axis: A.int(0), reduction: A.oneOf(REDUCTIONS, "none") }),
  inputs: [3, 3],
  outputs: [1, 1],
  kind: "opaque",
  infer: (ctx) => [inputType(ctx, 0)],
  kernel: (ctx) => [scatterElements(req(ctx.inputs, 0), req(ctx.inputs, 1, "indices"), req(ctx.inputs, 2, "updates"), ctx.attrs.axis, ctx.attrs.reduction)],
})

const Scatter = defineOp({
  attrs: attrs({ axis: A.int(0) }),
  inputs: [3, 3],
  outputs: [1, 1],
  kind: "opaque",
  infer: (ctx) => [inputType(ctx, 0)],
  kernel: (ctx) => [scatterElements(req(ctx.inputs, 0), req(ctx.inputs, 1, "indices"), req(ctx.inputs, 2, "updates"), ctx.attrs.axis, "none")],
})

const ScatterND = defineOp({
  attrs: attrs({ reduction: A.oneOf(REDUCTIONS, "none") }),
  inputs: [3, 3],
  outputs: [1, 1],
  kind: "opaque",
  infer: (ctx) => [inputType(ctx, 0)],
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const ind = req(ctx.inputs, 1, "indices")
    const upd = req(ctx.inputs, 2, "updates")
    check(isInteger(ind.dtype), () => `indices must be int32 or int64, got ${ind.dtype}`)
    check(upd.dtype === x.dtype, () => `updates dtype ${upd.dtype} differs from data dtype ${x.dtype}`)
    check(ind.shape.length >= 1, "indices must have rank 1 or more")
    const m = ind.shape[ind.shape.length - 1]
    check(m >= 1 && m <= x.shape.length, () => `index tuples of length ${m} do not fit data rank ${x.shape.length}`)
    const want = [...ind.shape.slice(0, -1), ...x.shape.slice(m)]
    check(upd.shape.length === want.length && upd.shape.every((d, i) => d === want[i]), () => `updates shape [${upd.shape.join(", ")}], expected [${want.join(", ")}]`)
    const s = stridesOf(x.shape)
    const slice = sizeOf(x.shape.slice(m))
    const tuples = sizeOf(ind.shape.slice(0, -1))
    const out = allocate(x.dtype, x.data.length)
    out.set(x.data)
    const f = combine[ctx.attrs.reduction]
    for (let t = 0; t < tuples; t++) {
      const dst = tupleOffset(x.shape, s, 0, m, ind, t)
      for (let j = 0; j < slice; j++) out[dst + j] = f(out[dst + j], upd.data[t * slice + j])
    }
    return [tensor(x.dtype, x.shape, out)]
  },
})

// ---------------------------------------------------------------------------------------------
// OneHot, NonZero

const oneHotAxis = (axis: number, rank: number): number => {
  const a = axis < 0 ? axis + rank + 1 : axis
  check(a >= 0 && a <= rank, () => `axis ${axis} out of range [${-rank - 1}, ${rank}]`)
  return a
}

const depthOf = (t: Tensor): number => {
  const d = Math.trunc(scalarOf(t, "depth"))
  check(d >= 1, () => `depth ${d} must be positive`)
  return d
}

const OneHot = defineOp({
  attrs: attrs({ axis: A.int(-1) }),
  inputs: [3, 3],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const ind = inputType(ctx, 0)
    const values = inputType(ctx, 2)
    const a = oneHotAxis(ctx.attrs.axis, ind.shape.length)
    const depth: Dim = ctx.values[1] ? depthOf(ctx.values[1]) : symDim(ctx, 0, a)
    return [{ dtype: values.dtype, shape: [...ind.shape.slice(0, a), depth, ...ind.shape.slice(a)] }]
  },
  kernel: (ctx) => {
    const ind = req(ctx.inputs, 0, "indices")
    const depth = depthOf(req(ctx.inputs, 1, "depth"))
    const values = req(ctx.inputs, 2, "values")
    check(values.data.length === 2, () => `values must hold [off, on], got shape [${values.shape.join(", ")}]`)
    const [off, on] = [values.data[0], values.data[1]]
    const a = oneHotAxis(ctx.attrs.axis, ind.shape.length)
    const shape = [...ind.shape.slice(0, a), depth, ...ind.shape.slice(a)]
    const { outer, inner } = aroundAxis(shape, a)
    // negative indices count from the end from opset 11; before, they are out of range
    const wrap = ctx.opset >= 11
    const out = allocate(values.dtype, sizeOf(shape))
    out.fill(off)
    for (let o = 0; o < outer; o++)
      for (let i = 0; i < inner; i++) {
        let k = Math.trunc(ind.data[o * inner + i])
        if (k < 0 && wrap) k += depth
        // out-of-range indices give an all-off row, as the spec says
        if (k >= 0 && k < depth) out[(o * depth + k) * inner + i] = on
      }
    return [tensor(values.dtype, shape, out)]
  },
})

const NonZero = defineOp({
  attrs: attrs({}),
  inputs: [1, 1],
  outputs: [1, 1],
  kind: "opaque",
  infer: (ctx) => [{ dtype: "int64", shape: [Math.max(inputType(ctx, 0).shape.length, 1), symDim(ctx, 0, 1)] }],
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    // a scalar counts as a 1-element vector (numpy's atleast_1d, as onnxruntime does)
    const shape = x.shape.length ? x.shape : [1]
    const rank = shape.length
    const hits: number[] = []
    for (let i = 0; i < x.data.length; i++) if (x.data[i] !== 0) hits.push(i)
    const n = hits.length
    const out = allocate("int64", rank * n)
    const s = stridesOf(shape)
    hits.forEach((flat, j) => {
      for (let d = 0; d < rank; d++) out[d * n + j] = Math.floor(flat / s[d]) % shape[d]
    })
    return [tensor("int64", [rank, n], out)]
  },
})

export const tensorIndexOps = {
  Gather,
  GatherElements,
  GatherND,
  Scatter,
  ScatterElements,
  ScatterND,
  OneHot,
  NonZero,
} satisfies Record<string, AnyOpDef>
