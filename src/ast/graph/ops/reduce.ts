// Reductions: the Reduce* family and ArgMax/ArgMin. Axes come from the `axes` attribute before
// opset 13 (ReduceSum) / 18 (the others) and from the optional second input after; an empty or
// absent axes list reduces everything unless noop_with_empty_axes is set, in which case every
// element is its own (singleton) set. An empty set reduces to the op's identity. Softmax and
// friends, the scans, TopK and Unique live in reduce-softmax.ts and reduce-select.ts.
import { A, attrs } from "../attrs.js"
import { allocate, converter, isFloat, type DType } from "../dtype.js"
import { check, defineOp, unsupported, type AnyOpDef, type Dim, type InferCtx, type KernelCtx, type ValueType } from "../op.js"
import { sizeOf, stridesOf, tensor, type Tensor } from "../tensor.js"
import { inputType, req } from "./util.js"
import { axisIn, constInts, intValues, staticLength, symDim, uniqueAxes } from "./tensor-common.js"
import { reduceScanOps, reduceSoftmaxOps } from "./reduce-softmax.js"
import { reduceSelectOps } from "./reduce-select.js"

// ---------------------------------------------------------------------------------------------
// The reduction walk

/**
 * For each flat index of `shape`, the flat index of the output element it reduces into when the
 * axes marked in `reduced` collapse (output laid out as the kept axes, in order).
 */
export const reductionIndex = (shape: readonly number[], reduced: readonly boolean[]): Int32Array => {
  const n = sizeOf(shape)
  const rank = shape.length
  const outStrides = stridesOf(shape.map((d, i) => (reduced[i] ? 1 : d)))
  const eff = shape.map((_, i) => (reduced[i] ? 0 : outStrides[i]))
  const idx = new Int32Array(n)
  const counter = new Array<number>(rank).fill(0)
  let cur = 0
  for (let i = 0; i < n; i++) {
    idx[i] = cur
    for (let d = rank - 1; d >= 0; d--) {
      counter[d]++
      cur += eff[d]
      if (counter[d] < shape[d]) break
      cur -= eff[d] * counter[d]
      counter[d] = 0
    }
  }
  return idx
}

/** The smallest / largest value of an integer dtype (identity of Max / Min over an empty set). */
const dtypeRange = (dtype: DType): [number, number] => {
  switch (dtype) {
    case "int8":
      return [-128, 127]
    case "int16":
      return [-32768, 32767]
    case "int32":
      return [-(2 ** 31), 2 ** 31 - 1]
    case "int64":
      return [-(2 ** 63), 2 ** 63]
    case "uint8":
      return [0, 255]
    case "uint16":
      return [0, 65535]
    case "uint32":
      return [0, 2 ** 32 - 1]
    case "uint64":
      return [0, 2 ** 64]
    case "bool":
      return [0, 1]
    default:
      return [-Infinity, Infinity]
  }
}

/** How one Reduce* op folds a set: start value, step, and the final map (given the set's size). */
interface Fold {
  readonly init: (dtype: DType) => number
  readonly step: (acc: number, v: number) => number
  readonly finish?: (acc: number, count: number) => number
}

const zero = () => 0
const FOLDS = {
  ReduceSum: { init: zero, step: (a, v) => a + v },
  ReduceSumSquare: { init: zero, step: (a, v) => a + v * v },
  ReduceL1: { init: zero, step: (a, v) => a + Math.abs(v) },
  ReduceL2: { init: zero, step: (a, v) => a + v * v, finish: (a) => Math.sqrt(a) },
  ReduceLogSum: { init: zero, step: (a, v) => a + v, finish: (a) => Math.log(a) },
  ReduceMean: { init: zero, step: (a, v) => a + v, finish: (a, n) => a / n },
  ReduceProd: { init: () => 1, step: (a, v) => a * v },
  // NaN propagates as in numpy's maximum/minimum
  ReduceMax: { init: (d) => dtypeRange(d)[0], step: (a, v) => (v > a || v !== v ? v : a) },
  ReduceMin: { init: (d) => dtypeRange(d)[1], step: (a, v) => (v < a || v !== v ? v : a) },
} satisfies Record<string, Fold>

/** ReduceLogSumExp, stable: the max of each set first, then log Σ exp(x - max) + max. */
const logSumExp = (x: Tensor, map: Int32Array, m: number): Float64Array => {
  const mx = new Float64Array(m).fill(-Infinity)
  const d = x.data
  for (let i = 0; i < map.length; i++) if (d[i] > mx[map[i]]) mx[map[i]] = d[i]
  const s = new Float64Array(m)
  for (let i = 0; i < map.length; i++) {
    const o = map[i]
    s[o] += Number.isFinite(mx[o]) ? Math.exp(d[i] - mx[o]) : Math.exp(d[i])
  }
  for (let o = 0; o < m; o++) s[o] = Number.isFinite(mx[o]) ? Math.log(s[o]) + mx[o] : Math.log(s[o])
  return s
}

export type ReduceName = keyof typeof FOLDS | "ReduceLogSumExp"

/** The opset from which an op takes its axes as an input. */
const axesInputFrom = (op: ReduceName): number => (op === "ReduceSum" ? 13 : 18)

const reduceAttrs = attrs({ axes: A.optInts(), keepdims: A.int(1), noop_with_empty_axes: A.int(0) })
export type ReduceAttrs = { axes: readonly number[] | undefined; keepdims: number; noop_with_empty_axes: number }

/**
 * The reduced axes as a mask over `rank`, from the attribute or the input; undefined when the
 * axes input is present but not known (type relation without values).
 */
export const reducedMask = (
  op: ReduceName,
  a: ReduceAttrs,
  opset: number,
  rank: number,
  axesInput: number[] | undefined,
  hasAxesInput: boolean,
): boolean[] | undefined => {
  let axes: readonly number[] | undefined
  // the attribute (opsets before axesInputFrom) wins; an axes input is read whenever given
  if (hasAxesInput && (a.axes === undefined || opset >= axesInputFrom(op))) {
    if (axesInput === undefined) return undefined
    axes = axesInput
  } else axes = a.axes
  if (axes === undefined || axes.length === 0) return new Array<boolean>(rank).fill(a.noop_with_empty_axes === 0)
  const mask = new Array<boolean>(rank).fill(false)
  for (const ax of uniqueAxes(axes, rank)) mask[ax] = true
  return mask
}

export const reduceShape = <D>(shape: readonly D[], mask: readonly boolean[], keep: boolean, one: D): D[] =>
  keep ? shape.map((d, i) => (mask[i] ? one : d)) : shape.filter((_, i) => !mask[i])

const inferReduce = (op: ReduceName) => (ctx: InferCtx<ReduceAttrs>): readonly ValueType[] => {
  const x = inputType(ctx, 0)
  const rank = x.shape.length
  const hasInput = ctx.inputs[1] !== undefined
  const mask = reducedMask(op, ctx.attrs, ctx.opset, rank, hasInput ? constInts(ctx, 1, "axes") : undefined, hasInput)
  if (mask) return [{ dtype: x.dtype, shape: reduceShape<Dim>(x.shape, mask, ctx.attrs.keepdims !== 0, 1) }]
  // axes known only at run time
  const n = staticLength(ctx.inputs[1])
  if (ctx.attrs.keepdims !== 0) return [{ dtype: x.dtype, shape: x.shape.map((_, d) => symDim(ctx, 0, d)) }]
  if (n === undefined) return unsupported("the axes input is not constant and its length is not static, so the output rank is unknown")
  if (n === 0)
    return ctx.attrs.noop_with_empty_axes !== 0 ? [{ dtype: x.dtype, shape: x.shape }] : [{ dtype: x.dtype, shape: [] }]
  return [{ dtype: x.dtype, shape: Array.from({ length: rank - n }, (_, d) => symDim(ctx, 0, d)) }]
}

const reduceKernel = (op: ReduceName) => (ctx: KernelCtx<ReduceAttrs>): readonly Tensor[] => {
  const x = req(ctx.inputs, 0)
  const axesT = ctx.inputs[1]
  const mask = reducedMask(op, ctx.attrs, ctx.opset, x.shape.length, axesT ? intValues(axesT, "axes") : undefined, axesT !== undefined)!
  const outShape = reduceShape(x.shape, mask, ctx.attrs.keepdims !== 0, 1)
  const m = sizeOf(outShape)
  const map = reductionIndex(x.shape, mask)
  let acc: Float64Array
  if (op === "ReduceLogSumExp") acc = logSumExp(x, map, m)
  else {
    const f: Fold = FOLDS[op]
    acc = new Float64Array(m).fill(f.init(x.dtype))
    const d = x.data
    const step = f.step
    for (let i = 0; i < map.length; i++) acc[map[i]] = step(acc[map[i]], d[i])
    if (f.finish) {
      const count = m === 0 ? 0 : map.length / m
      for (let o = 0; o < m; o++) acc[o] = f.finish(acc[o], count)
    }
  }
  const out = allocate(x.dtype, m)
  if (isFloat(x.dtype)) out.set(acc)
  else {
    const conv = converter(x.dtype)
    for (let o = 0; o < m; o++) out[o] = conv(acc[o])
  }
  return [tensor(x.dtype, outShape, out)]
}

const reduceOp = (op: ReduceName) =>
  defineOp({
    attrs: reduceAttrs,
    inputs: [1, 2],
    outputs: [1, 1],
    kind: "reduction",
    infer: inferReduce(op),
    kernel: reduceKernel(op),
  })

// ---------------------------------------------------------------------------------------------
// ArgMax / ArgMin

const argAttrs = attrs({ axis: A.int(0), keepdims: A.int(1), select_last_index: A.int(0) })

const argOp = (largest: boolean) =>
  defineOp({
    attrs: argAttrs,
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "reduction",
    infer: (ctx) => {
      const x = inputType(ctx, 0)
      const axis = axisIn(ctx.attrs.axis, x.shape.length)
      const mask = x.shape.map((_, i) => i === axis)
      return [{ dtype: "int64", shape: reduceShape<Dim>(x.shape, mask, ctx.attrs.keepdims !== 0, 1) }]
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const axis = axisIn(ctx.attrs.axis, x.shape.length)
      const dim = x.shape[axis]
      const mask = x.shape.map((_, i) => i === axis)
      const outShape = reduceShape(x.shape, mask, ctx.attrs.keepdims !== 0, 1)
      const outer = sizeOf(x.shape.slice(0, axis))
      const inner = sizeOf(x.shape.slice(axis + 1))
      check(dim > 0 || outer * inner === 0, `${largest ? "ArgMax" : "ArgMin"} over an empty axis ${axis}`)
      const last = ctx.attrs.select_last_index !== 0
      const d = x.data
      const out = new Float64Array(outer * inner)
      for (let o = 0; o < outer; o++)
        for (let j = 0; j < inner; j++) {
          const base = o * dim * inner + j
          let best = d[base]
          let at = 0
          if (best !== best) {
            out[o * inner + j] = 0
            continue
          }
          for (let k = 1; k < dim; k++) {
            const v = d[base + k * inner]
            // the first NaN wins, as in numpy
            if (v !== v) {
              at = k
              break
            }
            if (largest ? v > best || (last && v === best) : v < best || (last && v === best)) {
              best = v
              at = k
            }
          }
          out[o * inner + j] = at
        }
      return [tensor("int64", outShape, out)]
    },
  })

export const reduceOps = {
  ReduceSum: reduceOp("ReduceSum"),
  ReduceSumSquare: reduceOp("ReduceSumSquare"),
  ReduceL1: reduceOp("ReduceL1"),
  ReduceL2: reduceOp("ReduceL2"),
  ReduceLogSum: reduceOp("ReduceLogSum"),
  ReduceLogSumExp: reduceOp("ReduceLogSumExp"),
  ReduceMean: reduceOp("ReduceMean"),
  ReduceProd: reduceOp("ReduceProd"),
  ReduceMax: reduceOp("ReduceMax"),
  ReduceMin: reduceOp("ReduceMin"),
  ArgMax: argOp(true),
  ArgMin: argOp(false),
  ...reduceSoftmaxOps,
  ...reduceScanOps,
  ...reduceSelectOps,
} satisfies Record<string, AnyOpDef>
