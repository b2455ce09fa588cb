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
//
// An op gives its scalar function, or a loop written out for it (a "run"). Calling a closure per
// element from one shared loop is slow in V8: the call site sees every op, so nothing is inlined
// and every double crosses the call boxed. An op's own loop literal keeps its arithmetic inline,
// several times faster; the hot ops (Add, Mul, Relu, Sigmoid...) give one. A run stores raw values,
// so it serves only dtypes that `storeOf` leaves alone; the op builders pick it only for those.

/** out[i] = f(x[i]) for i < n. */
export type Run1 = (out: TypedArray, x: ArrayLike<number>, n: number) => void
/** out[o + j] = f(a[ai + j·sa], b[bi + j·sb]) for j < n, with sa, sb ∈ {0, 1}: one run of a broadcasting zip. */
export type Run2 = (out: TypedArray, o: number, a: ArrayLike<number>, ai: number, sa: number, b: ArrayLike<number>, bi: number, sb: number, n: number) => void

export type Unary = Scalar1 | { readonly run: Run1 }
export type Binary = Scalar2 | { readonly run: Run2 }

const run1Of = (f: Scalar1): Run1 => (out, x, n) => {
  for (let i = 0; i < n; i++) out[i] = f(x[i])
}
const run2Of = (f: Scalar2): Run2 => (out, o, a, ai, sa, b, bi, sb, n) => {
  for (let j = 0; j < n; j++) out[o + j] = f(a[ai + j * sa], b[bi + j * sb])
}

const rawRun = <R>(run: R, dtype: DType): R => {
  if (storeOf(dtype)) throw new Error(`a raw run cannot store ${dtype}: give the scalar function (see fast1/fast2)`)
  return run
}
const unaryRun = (op: Unary, dtype: DType): Run1 => {
  if (typeof op !== "function") return rawRun(op.run, dtype)
  const s = storeOf(dtype)
  return run1Of(s ? (x) => s(op(x)) : op)
}
const binaryRun = (op: Binary, dtype: DType): Run2 => {
  if (typeof op !== "function") return rawRun(op.run, dtype)
  const s = storeOf(dtype)
  return run2Of(s ? (x, y) => s(op(x, y)) : op)
}

/** The op's run where `dtype` needs no store conversion, else its scalar function. */
export const fast1 = (dtype: DType, run: Run1, f: Scalar1): Unary => (storeOf(dtype) ? f : { run })
export const fast2 = (dtype: DType, run: Run2, f: Scalar2): Binary => (storeOf(dtype) ? f : { run })

/** out[i] = f(x[i]), stored in `dtype` (default: the input's). */
export const mapUnary = (x: Tensor, op: Unary, dtype: DType = x.dtype): Tensor => {
  const out = allocate(dtype, x.data.length)
  unaryRun(op, dtype)(out, x.data, x.data.length)
  return tensor(dtype, x.shape, out)
}

/**
 * Writes op(a, b) over `shape` (both operands broadcast to it) into `out`. The trailing dims where
 * each operand is either whole or broadcast form one run (equal shapes, a scalar, a per-channel
 * [C,1,1] against [N,C,H,W], a row...); only the outer dims go through broadcastIndex.
 */
export const zipInto = (
  out: TypedArray,
  ad: ArrayLike<number>,
  aShape: readonly number[],
  bd: ArrayLike<number>,
  bShape: readonly number[],
  shape: readonly number[],
  run: Run2,
): void => {
  if (sizeOf(shape) === 0) return
  const r = shape.length
  const dimA = (d: number) => (d >= r - aShape.length ? aShape[d - (r - aShape.length)] : 1)
  const dimB = (d: number) => (d >= r - bShape.length ? bShape[d - (r - bShape.length)] : 1)
  // the run: trailing dims sharing one (a whole?, b whole?) pattern; size-1 dims fit any
  let k = r
  let wa = true
  let wb = true
  let fixed = false
  let inner = 1
  for (; k > 0; k--) {
    const d = k - 1
    if (shape[d] !== 1) {
      const pa = dimA(d) === shape[d]
      const pb = dimB(d) === shape[d]
      if (!fixed) [wa, wb, fixed] = [pa, pb, true]
      else if (pa !== wa || pb !== wb) break
    }
    inner *= shape[d]
  }
  const outer = shape.slice(0, k)
  const ia = broadcastIndex(Array.from({ length: k }, (_, d) => dimA(d)), outer)
  const ib = broadcastIndex(Array.from({ length: k }, (_, d) => dimB(d)), outer)
  const [aStep, sa] = wa ? [inner, 1] : [1, 0]
  const [bStep, sb] = wb ? [inner, 1] : [1, 0]
  for (let o = 0; o < ia.length; o++) run(out, o * inner, ad, ia[o] * aStep, sa, bd, ib[o] * bStep, sb, inner)
}

export const broadcastOrFail = (a: readonly number[], b: readonly number[]): number[] =>
  broadcastShapes(a, b) ?? fail(`shapes ${showShape(a)} and ${showShape(b)} do not broadcast`)

/** out = op(a, b) with NumPy broadcasting (b's shape may be given re-aligned), stored in `dtype`. */
export const mapBinary = (a: Tensor, b: Tensor, op: Binary, dtype: DType, bShape: readonly number[] = b.shape): Tensor => {
  const shape = broadcastOrFail(a.shape, bShape)
  const out = allocate(dtype, sizeOf(shape))
  zipInto(out, a.data, a.shape, b.data, bShape, shape, binaryRun(op, dtype))
  return tensor(dtype, shape, out)
}

const copyRun: Run2 = (out, o, a, ai, sa, _b, _bi, _sb, n) => {
  for (let j = 0; j < n; j++) out[o + j] = a[ai + j * sa]
}

/**
 * Folds any number of inputs with `op` under NumPy broadcasting in a float64 accumulator (so `op`
 * may always be a run), then stores `finish(acc)` in `dtype`.
 */
export const foldBroadcast = (xs: readonly Tensor[], op: Binary, dtype: DType, finish?: Scalar1): Tensor => {
  const shape = xs.map((t) => t.shape).reduce<readonly number[]>((s, t) => broadcastOrFail(s, t), [])
  const n = sizeOf(shape)
  const acc = new Float64Array(n)
  if (xs[0].data.length === n) acc.set(xs[0].data)
  else zipInto(acc, xs[0].data, xs[0].shape, xs[0].data, [], shape, copyRun)
  const run = binaryRun(op, "float64")
  for (let k = 1; k < xs.length; k++) zipInto(acc, acc, shape, xs[k].data, xs[k].shape, shape, run)
  const out = allocate(dtype, n)
  if (!finish && !storeOf(dtype)) out.set(acc) // converts as element stores do
  else unaryRun(finish ?? ((v) => v), dtype)(out, acc, n)
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

/** A unary op; `fn` picks the scalar function (or run) from the attributes and the input dtype. */
export const unaryOp = <At>(spec: {
  readonly attrs: AttrCodec<At>
  readonly fn: (attrs: At, dtype: DType) => Unary
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
      if (spec.accepts) check(spec.accepts(t.dtype), () => `input of type ${t.dtype} is not accepted`)
      return [{ dtype: spec.out ?? t.dtype, shape: t.shape }]
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      if (spec.accepts) check(spec.accepts(x.dtype), () => `input of type ${x.dtype} is not accepted`)
      return [mapUnary(x, spec.fn(ctx.attrs, x.dtype), spec.out ?? x.dtype)]
    },
  })

/** A unary op without attributes; `run`, when given, is `f` written out as a loop (see Run1). */
export const unary = (f: Scalar1, opts: { out?: DType; accepts?: (dtype: DType) => boolean; run?: Run1 } = {}) => {
  const { run, ...rest } = opts
  return unaryOp({ attrs: attrs({}), fn: (_, dtype) => (run ? fast1(opts.out ?? dtype, run, f) : f), ...rest })
}

/**
 * Output type of a binary op under (legacy or NumPy) broadcasting; its inputs must share one dtype
 * unless `mixed` (checked here too, so that no compiled target runs what the evaluator refuses).
 */
export const inferBinary =
  (out?: DType, mixed = false) =>
  <At extends LegacyBroadcast>(ctx: InferCtx<At>): readonly ValueType[] => {
    const a = inputType(ctx, 0)
    const b = inputType(ctx, 1)
    if (!mixed) check(a.dtype === b.dtype, () => `inputs have different types: ${a.dtype} and ${b.dtype}`)
    return [{ dtype: out ?? a.dtype, shape: broadcastDims(a.shape, alignLegacy(a.shape, b.shape, ctx.attrs, ctx.opset)) }]
  }

/**
 * A broadcasting binary op; `fn` picks the scalar function (or run) from the attributes and the
 * dtype of input A. Inputs must share one dtype unless `mixed`; the output has A's dtype unless `out`.
 */
export const binaryOp = <At extends LegacyBroadcast>(spec: {
  readonly attrs: AttrCodec<At>
  readonly fn: (attrs: At, dtype: DType) => Binary
  readonly out?: DType
  readonly mixed?: boolean
  readonly accepts?: (dtype: DType) => boolean
}) =>
  defineOp({
    attrs: spec.attrs,
    inputs: [2, 2],
    outputs: [1, 1],
    kind: "broadcast",
    infer: inferBinary(spec.out, spec.mixed),
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
