// Shared pieces of the operator library: the compute context, the NoComputeError escape (a group
// with such an op falls back to its reference kernels), broadcast reads and the unary/binary builders.
import { Data } from "effect"
import type { DType } from "../ast/graph/dtype.js"
import type { Node } from "../ast/graph/graph.js"
import type { ValueType } from "../ast/graph/op.js"
import { c, cast, type Expr, type Var } from "../ast/te/expr.js"
import { at, compute, type ComputeTensor, type TeTensor } from "../ast/te/tensor.js"

/**
 * A group lowering has no compute for: an op without one here, a configuration its compute
 * declines (an output it does not produce, a non-constant shape input), a symbolic or empty shape.
 * The group runs through its nodes' reference kernels, with this as the reason.
 */
export class NoComputeError extends Data.TaggedError("NoComputeError")<{ readonly reason: string }> {
  override get message(): string {
    return this.reason
  }
}

/** Declines to compute: throws NoComputeError (an op compute's escape, typed `never` for use in expressions). */
export const none = (why: string): never => {
  throw new NoComputeError({ reason: why })
}

export interface OpComputeCtx {
  readonly node: Node
  readonly attrs: Record<string, unknown>
  /** Input tensors (undefined for omitted optional inputs). */
  readonly inputs: readonly (TeTensor | undefined)[]
  /** Static output types. */
  readonly outputs: readonly ValueType[]
  /** Names for the computes this op makes (unique in the group). */
  readonly name: (suffix?: string) => string
  /** Values of constant inputs where known (shapes, axes, clip bounds). */
  readonly constants: readonly (ArrayLike<number> | undefined)[]
  /** The model's default-domain opset (ops whose meaning changed between opsets). */
  readonly opset: number
}

export type OpCompute = (ctx: OpComputeCtx) => readonly ComputeTensor[]

export const shapeOf = (t: ValueType): number[] => t.shape.map((d) => (typeof d === "number" ? d : none(`dim '${d}' is not static`)))
export const inp = (ctx: OpComputeCtx, k: number): TeTensor => ctx.inputs[k] ?? none(`input ${k} is missing`)
export const fl = (dtype: DType, x: number): Expr => c(dtype === "float32" ? Math.fround(x) : x, dtype)
export const num = (v: unknown, d: number): number => (typeof v === "number" ? v : d)
export const ints = (v: unknown): number[] | undefined => (Array.isArray(v) ? (v as number[]) : undefined)
export const isFloatDtype = (d: DType): boolean => d.startsWith("float") || d === "bfloat16"
export const normAxis = (a: number, rank: number): number => {
  const r = a < 0 ? a + rank : a
  return r >= 0 && r < rank ? r : none(`axis ${a} out of range for rank ${rank}`)
}

/** A constant input's values (as integers), or undefined when the input is omitted. */
export const constInts = (ctx: OpComputeCtx, k: number, what: string): number[] | undefined => {
  if (!ctx.node.inputs[k]) return undefined
  const v = ctx.constants[k] ?? none(`${what} (input ${k}) is not a constant`)
  return Array.from(v, Number)
}

/** Reads `t` broadcast (NumPy rules) to an output index. */
export const bread = (t: TeTensor, idx: readonly Var[] | readonly Expr[]): Expr => {
  const off = idx.length - t.shape.length
  return at(t, ...t.shape.map((d, k) => (d === 1 ? c(0) : idx[k + off])))
}

/**
 * Reads a binary op's second operand: NumPy broadcasting from opset 7; before, `broadcast=1`
 * aligns B with A's dims from `axis` (default: trailing).
 */
export const breadB = (ctx: OpComputeCtx, t: TeTensor, idx: readonly Expr[]): Expr => {
  if (ctx.opset < 7 && num(ctx.attrs.broadcast, 0) === 1 && ctx.attrs.axis !== undefined) {
    const rank = idx.length
    const axis = normAxis(num(ctx.attrs.axis, 0), rank)
    return at(t, ...t.shape.map((d, k) => (d === 1 ? c(0) : idx[axis + k])))
  }
  return bread(t, idx)
}

/**
 * 8- and 16-bit integers wrap after every op, as ONNX (onnxruntime) and NumPy compute them. An
 * emitter holds them in a wider register (C's int64_t, a JS number, a wasm i32), so a fused chain
 * (Add then Sub) would carry an unwrapped sum into the next op; the ops that can leave the type's
 * range are therefore computed on the values widened to int32 and cast back, a cast every emitter
 * narrows (the cast constructor drops one to the value's own type).
 */
const NARROW_INTS: ReadonlySet<DType> = new Set<DType>(["int8", "uint8", "int16", "uint16"])
const WRAPPING_OPS: ReadonlySet<string> = new Set(["Add", "Sub", "Mul", "Neg", "Abs"])
const widened = (ctx: OpComputeCtx, dtype: DType): ((e: Expr) => Expr) =>
  NARROW_INTS.has(dtype) && WRAPPING_OPS.has(ctx.node.op) ? (e) => (e.dtype === dtype ? cast("int32", e) : e) : (e) => e

export const unary =
  (f: (x: Expr, ctx: OpComputeCtx) => Expr): OpCompute =>
  (ctx) => {
    const x = inp(ctx, 0)
    const dtype = ctx.outputs[0].dtype
    const w = widened(ctx, dtype)
    return [compute(ctx.name(), shapeOf(ctx.outputs[0]), (...i) => cast(dtype, f(w(bread(x, i)), ctx)), dtype)]
  }

/** A unary op on floats only (integer inputs keep their reference kernels). */
export const floatUnary = (f: (x: Expr, ctx: OpComputeCtx) => Expr): OpCompute =>
  unary((x, ctx) => (isFloatDtype(x.dtype) ? f(x, ctx) : none(`${ctx.node.op} of ${x.dtype}`)))

export const binary =
  (f: (a: Expr, b: Expr, ctx: OpComputeCtx) => Expr): OpCompute =>
  (ctx) => {
    const a = inp(ctx, 0)
    const b = inp(ctx, 1)
    const dtype = ctx.outputs[0].dtype
    const w = widened(ctx, dtype)
    return [compute(ctx.name(), shapeOf(ctx.outputs[0]), (...i) => cast(dtype, f(w(bread(a, i)), w(breadB(ctx, b, i)), ctx)), dtype)]
  }
