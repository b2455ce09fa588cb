// The kernels every elementwise, broadcasting and activation op is built from: a unary map, a
// broadcasting zip of two tensors and a broadcasting fold of many, each computing in float64 and
// storing with the output dtype's semantics, plus the op builders that wrap them.
//
// Storing: a plain store into the output's typed array already is ONNX's conversion for float32
// (round to nearest), float16/bfloat16 (held in float32; the evaluator rounds them) and every
// integer type up to 32 bits (truncate toward zero, wrap, NaN/Inf → 0). Only int64/uint64 (held in
// float64) and bool need a conversion function: `storeOf` gives it.
import { A, attrs, type AttrCodec } from "../attrs.js"
import { allocate, type DType, type TypedArray } from "../dtype.js"
import { check, defineOp, fail, type Dim, type InferCtx, type ValueType } from "../op.js"
import { broadcastIndex, broadcastShapes, showShape, sizeOf, tensor, type Tensor } from "../tensor.js"
import { broadcastDims, inputType, req } from "./util.js"

export type Scalar1 = (x: number) => number
export type Scalar2 = (x: number, y: number) => number

const TWO53 = 2 ** 53
const TWO63 = 2 ** 63
const TWO64 = 2 ** 64

/** int64 semantics of a number: truncate toward zero, wrap modulo 2^64, NaN/Inf → 0 (never -0). */
export const toInt64: Scalar1 = (x) => {
  if (x >= -TWO63 && x < TWO63) return Math.trunc(x) + 0
  return Number.isFinite(x) ? Number(BigInt.asIntN(64, BigInt(Math.trunc(x)))) : 0
}
/** uint64 semantics of a number: truncate toward zero, wrap modulo 2^64, NaN/Inf → 0. */
export const toUint64: Scalar1 = (x) => {
  if (x > -1 && x < TWO64) return Math.trunc(x) + 0
  return Number.isFinite(x) ? Number(BigInt.asUintN(64, BigInt(Math.trunc(x)))) : 0
}
const toBool: Scalar1 = (x) => (x !== 0 ? 1 : 0)

/** The conversion a plain typed-array store does not make for `dtype`; undefined where it does. */
export const storeOf = (dtype: DType): Scalar1 | undefined =>
  dtype === "int64" ? toInt64 : dtype === "uint64" ? toUint64 : dtype === "bool" ? toBool : undefined

export const is64 = (d: DType): boolean => d === "int64" || d === "uint64"
export const isNarrowInt = (d: DType): boolean => d === "int8" || d === "int16" || d === "uint8" || d === "uint16"

/**
 * Wraps a 64-bit integer scalar function so that results beyond 2^53 (inexact in a double) are
 * recomputed exactly with BigInt and wrapped to 64 bits.
 */
export const exact64 = (f: Scalar2, big: (x: bigint, y: bigint) => bigint, dtype: DType): Scalar2 => {
  const wrap = dtype === "uint64" ? (v: bigint) => BigInt.asUintN(64, v) : (v: bigint) => BigInt.asIntN(64, v)
  return (x, y) => {
    const r = f(x, y)
    return r > -TWO53 && r < TWO53 ? r : Number(wrap(big(BigInt(x), BigInt(y))))
  }
}

// ---------------------------------------------------------------------------------------------
// Kernels

/** out[i] = f(x[i]), stored in `dtype` (default: the input's). */
export const mapUnary = (x: Tensor, f: Scalar1, dtype: DType = x.dtype): Tensor => {
  const src = x.data
  const n = src.length
  const out = allocate(dtype, n)
  const s = storeOf(dtype)
  if (s) for (let i = 0; i < n; i++) out[i] = s(f(src[i]))
  else for (let i = 0; i < n; i++) out[i] = f(src[i])
  return tensor(dtype, x.shape, out)
}

/**
 * out[i] = f(a[ia(i)], b[ib(i)]) over `shape` (both operands broadcast to it). The trailing run
 * of dims where each operand is either whole or broadcast is one contiguous inner loop, so equal
 * shapes, scalars and per-channel operands ([C,1,1] against [N,C,H,W]) need no index maps; only
 * the outer dims go through broadcastIndex.
 */
export const zipInto = (
  out: TypedArray,
  ad: ArrayLike<number>,
  aShape: readonly number[],
  bd: ArrayLike<number>,
  bShape: readonly number[],
  shape: readonly number[],
  f: Scalar2,
): void => {
  const n = sizeOf(shape)
  if (n === 0) return
  const r = shape.length
  const dimA = (d: number) => (d - (r - aShape.length) >= 0 ? aShape[d - (r - aShape.length)] : 1)
  const dimB = (d: number) => (d - (r - bShape.length) >= 0 ? bShape[d - (r - bShape.length)] : 1)
  // the inner run: trailing dims sharing one (a whole?, b whole?) pattern; size-1 dims fit any
  let k = r
  let wa = true
  let wb = true
  let fixed = false
  let inner = 1
  while (k > 0) {
    const d = k - 1
    if (shape[d] !== 1) {
      const pa = dimA(d) === shape[d]
      const pb = dimB(d) === shape[d]
      if (!fixed) {
        wa = pa
        wb = pb
        fixed = true
      } else if (pa !== wa || pb !== wb) break
    }
    inner *= shape[d]
    k--
  }
  const outer = shape.slice(0, k)
  const ia = broadcastIndex(Array.from({ length: k }, (_, d) => dimA(d)), outer)
  const ib = broadcastIndex(Array.from({ length: k }, (_, d) => dimB(d)), outer)
  const aInner = wa ? inner : 1
  const bInner = wb ? inner : 1
  for (let o = 0, base = 0; o < ia.length; o++, base += inner) {
    const ao = ia[o] * aInner
    const bo = ib[o] * bInner
    if (wa && wb) for (let j = 0; j < inner; j++) out[base + j] = f(ad[ao + j], bd[bo + j])
    else if (wa) {
      const y = bd[bo]
      for (let j = 0; j < inner; j++) out[base + j] = f(ad[ao + j], y)
    } else if (wb) {
      const x = ad[ao]
      for (let j = 0; j < inner; j++) out[base + j] = f(x, bd[bo + j])
    } else {
      const v = f(ad[ao], bd[bo])
      for (let j = 0; j < inner; j++) out[base + j] = v
    }
  }
}

const withStore = (f: Scalar2, dtype: DType): Scalar2 => {
  const s = storeOf(dtype)
  return s ? (x, y) => s(f(x, y)) : f
}

export const broadcastOrFail = (a: readonly number[], b: readonly number[]): number[] =>
  broadcastShapes(a, b) ?? fail(`shapes ${showShape(a)} and ${showShape(b)} do not broadcast`)

/** out = f(a, b) with NumPy broadcasting (b's shape may be given re-aligned), stored in `dtype`. */
export const mapBinary = (a: Tensor, b: Tensor, f: Scalar2, dtype: DType, bShape: readonly number[] = b.shape): Tensor => {
  const shape = broadcastOrFail(a.shape, bShape)
  const out = allocate(dtype, sizeOf(shape))
  zipInto(out, a.data, a.shape, b.data, bShape, shape, withStore(f, dtype))
  return tensor(dtype, shape, out)
}

/**
 * Folds any number of inputs with `f` under NumPy broadcasting, in a float64 accumulator, then
 * stores `finish(acc)` in `dtype`.
 */
export const foldBroadcast = (xs: readonly Tensor[], f: Scalar2, dtype: DType, finish?: Scalar1): Tensor => {
  const shape = xs.map((t) => t.shape).reduce<readonly number[]>((s, t) => broadcastOrFail(s, t), [])
  const n = sizeOf(shape)
  const acc = new Float64Array(n)
  zipInto(acc, xs[0].data, xs[0].shape, xs[0].data, [], shape, (x) => x)
  for (let k = 1; k < xs.length; k++) zipInto(acc, acc, shape, xs[k].data, xs[k].shape, shape, f)
  const out = allocate(dtype, n)
  const s = storeOf(dtype)
  const g: Scalar1 = finish && s ? (v) => s(finish(v)) : (finish ?? s ?? ((v) => v))
  for (let i = 0; i < n; i++) out[i] = g(acc[i])
  return tensor(dtype, shape, out)
}

// ---------------------------------------------------------------------------------------------
// Pre-opset-7 broadcasting: binary ops broadcast only with `broadcast=1`, B onto A, B's dims
// lined up with A's from `axis` (by default, with A's trailing dims).

export const legacyProps = { broadcast: A.optInt(), axis: A.optInt() }
export interface LegacyBroadcast {
  readonly broadcast?: number
  readonly axis?: number
}

/** B's shape padded with 1s to line up with A as the legacy attributes say (unchanged from opset 7). */
export const alignLegacy = <D extends Dim>(a: readonly D[], b: readonly D[], at: LegacyBroadcast, opset: number): readonly (D | 1)[] => {
  if (opset >= 7 || at.broadcast !== 1 || b.length >= a.length) return b
  const axis = at.axis === undefined ? a.length - b.length : at.axis < 0 ? at.axis + a.length : at.axis
  check(axis >= 0 && axis + b.length <= a.length, () => `broadcast axis ${at.axis} does not fit B ${showShape(b)} into A ${showShape(a)}`)
  const ones = (k: number): 1[] => new Array<1>(k).fill(1)
  return [...ones(axis), ...b, ...ones(a.length - axis - b.length)]
}

// ---------------------------------------------------------------------------------------------
// Op builders

/** A unary op; `fn` picks the scalar function from the attributes and the input dtype. */
export const unaryOp = <At>(spec: {
  readonly attrs: AttrCodec<At>
  readonly fn: (attrs: At, dtype: DType) => Scalar1
  /** Output dtype (default: the input's). */
  readonly out?: DType
  /** The input dtypes the op takes (others are invalid input). */
  readonly accepts?: (dtype: DType) => boolean
}) =>
  defineOp({
    attrs: spec.attrs,
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "elementwise",
    infer: (ctx) => {
      const t = inputType(ctx, 0)
      return [{ dtype: spec.out ?? t.dtype, shape: t.shape }]
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      if (spec.accepts) check(spec.accepts(x.dtype), () => `input of type ${x.dtype} is not accepted`)
      return [mapUnary(x, spec.fn(ctx.attrs, x.dtype), spec.out ?? x.dtype)]
    },
  })

/** A unary op without attributes. */
export const unary = (f: Scalar1, opts: { out?: DType; accepts?: (dtype: DType) => boolean } = {}) =>
  unaryOp({ attrs: attrs({}), fn: () => f, ...opts })

/** Output type of a binary op under (legacy or NumPy) broadcasting. */
export const inferBinary =
  (out?: DType) =>
  <At extends LegacyBroadcast>(ctx: InferCtx<At>): readonly ValueType[] => {
    const a = inputType(ctx, 0)
    const b = inputType(ctx, 1)
    return [{ dtype: out ?? a.dtype, shape: broadcastDims(a.shape, alignLegacy(a.shape, b.shape, ctx.attrs, ctx.opset)) }]
  }

/**
 * A broadcasting binary op; `fn` picks the scalar function from the attributes and the dtype of
 * input A. Inputs must share one dtype unless `mixed`; the output has A's dtype unless `out`.
 */
export const binaryOp = <At extends LegacyBroadcast>(spec: {
  readonly attrs: AttrCodec<At>
  readonly fn: (attrs: At, dtype: DType) => Scalar2
  readonly out?: DType
  readonly mixed?: boolean
  readonly accepts?: (dtype: DType) => boolean
}) =>
  defineOp({
    attrs: spec.attrs,
    inputs: [2, 2],
    outputs: [1, 1],
    kind: "broadcast",
    infer: inferBinary(spec.out),
    kernel: (ctx) => {
      const a = req(ctx.inputs, 0)
      const b = req(ctx.inputs, 1)
      if (!spec.mixed) check(a.dtype === b.dtype, () => `inputs have different types: ${a.dtype} and ${b.dtype}`)
      if (spec.accepts) check(spec.accepts(a.dtype), () => `input of type ${a.dtype} is not accepted`)
      const bShape = alignLegacy(a.shape, b.shape, ctx.attrs, ctx.opset)
      return [mapBinary(a, b, spec.fn(ctx.attrs, a.dtype), spec.out ?? a.dtype, bShape)]
    },
  })

/** Codec of a binary op's attributes: its own plus the legacy broadcast pair. */
export const binaryAttrs = <P extends Parameters<typeof attrs>[0]>(props: P) => attrs({ ...legacyProps, ...props })
