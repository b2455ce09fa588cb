// Softmax, LogSoftmax and Hardmax, and the scans CumSum / CumProd.
//
// The softmax family has two meanings: before opset 13 the input is coerced to 2-D at `axis`
// (default 1), [prod(dims before axis), prod(dims from axis)], and each row is normalised; from
// opset 13 it works along the single axis `axis` (default -1). Both are a loop over
// (outer, dim, inner) blocks: the old form is the new one with inner = 1 and dim = the product.
import { A, attrs } from "../attrs.js"
import { allocate, converter, isFloat } from "../dtype.js"
import { check, defineOp, type AnyOpDef, type KernelCtx } from "../op.js"
import { sizeOf, tensor, type Tensor } from "../tensor.js"
import { inputType, req } from "./util.js"
import { axisIn, scalarOf } from "./tensor-common.js"

const softmaxAttrs = attrs({ axis: A.optInt() })

/** The (outer, dim, inner) blocking of the softmax family for this opset. */
const softmaxBlocks = (shape: readonly number[], axisAttr: number | undefined, opset: number) => {
  const rank = shape.length
  if (opset < 13) {
    // coerced to 2-D: axis may equal rank (every row has one element)
    const a = axisAttr ?? 1
    const axis = a < 0 ? a + rank : a
    check(axis >= 0 && axis <= rank, () => `axis ${a} out of range for rank ${rank}`)
    return { outer: sizeOf(shape.slice(0, axis)), dim: sizeOf(shape.slice(axis)), inner: 1 }
  }
  const axis = axisIn(axisAttr ?? -1, rank)
  return { outer: sizeOf(shape.slice(0, axis)), dim: shape[axis], inner: sizeOf(shape.slice(axis + 1)) }
}

type RowFn = (src: ArrayLike<number>, dst: Float64Array, base: number, dim: number, stride: number) => void

/** Softmax (log = false) or LogSoftmax of one row, with the max subtracted first. */
const softmaxRow =
  (log: boolean): RowFn =>
  (src, dst, base, dim, stride) => {
    let mx = -Infinity
    for (let k = 0, p = base; k < dim; k++, p += stride) if (src[p] > mx) mx = src[p]
    if (mx === Infinity || mx !== mx) mx = 0
    let sum = 0
    for (let k = 0, p = base; k < dim; k++, p += stride) sum += Math.exp(src[p] - mx)
    if (log) {
      const ls = Math.log(sum)
      for (let k = 0, p = base; k < dim; k++, p += stride) dst[p] = src[p] - mx - ls
    } else for (let k = 0, p = base; k < dim; k++, p += stride) dst[p] = Math.exp(src[p] - mx) / sum
  }

/** 1 at the first maximum of the row, 0 elsewhere. */
const hardmaxRow: RowFn = (src, dst, base, dim, stride) => {
  if (dim === 0) return
  let at = 0
  let best = src[base]
  for (let k = 1, p = base + stride; k < dim; k++, p += stride)
    if (src[p] > best) {
      best = src[p]
      at = k
    }
  dst[base + at * stride] = 1
}

const rowwise = (row: RowFn) => (ctx: KernelCtx<{ axis: number | undefined }>): readonly Tensor[] => {
  const x = req(ctx.inputs, 0)
  const { outer, dim, inner } = softmaxBlocks(x.shape, ctx.attrs.axis, ctx.opset)
  const tmp = new Float64Array(x.data.length)
  for (let o = 0; o < outer; o++) for (let j = 0; j < inner; j++) row(x.data, tmp, o * dim * inner + j, dim, inner)
  const out = allocate(x.dtype, tmp.length)
  out.set(tmp)
  return [tensor(x.dtype, x.shape, out)]
}

const softmaxOp = (row: RowFn) =>
  defineOp({
    attrs: softmaxAttrs,
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "opaque",
    infer: (ctx) => {
      const x = inputType(ctx, 0)
      check(isFloat(x.dtype), () => `input must be a float tensor, got ${x.dtype}`)
      const rank = x.shape.length
      const a = ctx.attrs.axis ?? (ctx.opset < 13 ? 1 : -1)
      if (ctx.opset < 13) check((a < 0 ? a + rank : a) >= 0 && (a < 0 ? a + rank : a) <= rank, () => `axis ${a} out of range for rank ${rank}`)
      else axisIn(a, rank)
      return [x]
    },
    kernel: rowwise(row),
  })

export const reduceSoftmaxOps = {
  Softmax: softmaxOp(softmaxRow(false)),
  LogSoftmax: softmaxOp(softmaxRow(true)),
  Hardmax: softmaxOp(hardmaxRow),
} satisfies Record<string, AnyOpDef>

// ---------------------------------------------------------------------------------------------
// CumSum / CumProd: inclusive or exclusive, forward or reverse, along the axis given as input 1.

const scanOp = (prod: boolean) =>
  defineOp({
    attrs: attrs({ exclusive: A.int(0), reverse: A.int(0) }),
    inputs: [2, 2],
    outputs: [1, 1],
    kind: "opaque",
    infer: (ctx) => {
      const x = inputType(ctx, 0)
      const ax = ctx.values[1]
      if (ax) axisIn(scalarOf(ax, "axis"), x.shape.length)
      return [x]
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const axis = axisIn(scalarOf(req(ctx.inputs, 1, "axis"), "axis"), x.shape.length)
      const dim = x.shape[axis]
      const outer = sizeOf(x.shape.slice(0, axis))
      const inner = sizeOf(x.shape.slice(axis + 1))
      const excl = ctx.attrs.exclusive !== 0
      const rev = ctx.attrs.reverse !== 0
      const d = x.data
      const out = allocate(x.dtype, d.length)
      const conv = isFloat(x.dtype) ? (v: number) => v : converter(x.dtype)
      for (let o = 0; o < outer; o++)
        for (let j = 0; j < inner; j++) {
          const base = o * dim * inner + j
          let acc = prod ? 1 : 0
          for (let s = 0; s < dim; s++) {
            const k = rev ? dim - 1 - s : s
            const p = base + k * inner
            if (excl) {
              out[p] = conv(acc)
              acc = prod ? acc * d[p] : acc + d[p]
            } else {
              acc = prod ? acc * d[p] : acc + d[p]
              out[p] = conv(acc)
            }
          }
        }
      return [tensor(x.dtype, x.shape, out)]
    },
  })

export const reduceScanOps = {
  CumSum: scanOp(false),
  CumProd: scanOp(true),
} satisfies Record<string, AnyOpDef>
