// What rewrite.QdqToInteger reads of the QuantizeLinear / DequantizeLinear nodes around an op: their
// scale and zero point, checked (constant, float32, 8-bit, per tensor or per axis, a scale that is a
// normal float32 whose multiples by 255 stay finite) and never assumed. A check that fails says why,
// in words the pass report shows per node.
import { resolveNode } from "../ast/graph/evaluate.js"
import type { Node } from "../ast/graph/graph.js"
import { rint } from "../ast/graph/ops/nn-quant.js"
import { fromArray, type Tensor } from "../ast/graph/tensor.js"
import type { RuleCtx } from "./rules.js"

/** The parameters of one quantized tensor: its 8-bit type, scale and zero point. */
export interface QParams {
  readonly dtype: "int8" | "uint8"
  /** float32 scale: a scalar (or one value), or one per slice of `axis`. */
  readonly scale: Tensor
  /** The zero point as a tensor of `dtype` shaped like the scale (zeros where the node had none). */
  readonly zp: Tensor
  /** The axis (normalized) of a per-axis scale; undefined per tensor. */
  readonly axis: number | undefined
}

/** A check's result: the value, or why the pattern does not qualify. */
export type Checked<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly reason: string }
export const ok = <A>(value: A): Checked<A> => ({ ok: true, value })
export const no = <A = never>(reason: string): Checked<A> => ({ ok: false, reason })

const F32_MIN_NORMAL = 2 ** -126
const F32_MAX = 3.4028234663852886e38

interface QuantAttrs {
  readonly axis: number
  readonly block_size: number
  readonly output_dtype: number
  readonly precision?: number
}

/** Scale values every quantized op here can take: positive normal float32 numbers with 255·s finite. */
const goodScale = (s: Tensor, what: string): Checked<Tensor> => {
  if (s.dtype !== "float32") return no(`${what} is ${s.dtype}, not float32`)
  for (const v of s.data as Float32Array)
    if (!(v >= F32_MIN_NORMAL && v * 255 < F32_MAX)) return no(`${what} holds ${v}, not a positive normal float32 (the pass does not reason about such scales)`)
  return ok(s)
}

/**
 * The parameters of a QuantizeLinear or DequantizeLinear node `n` (its quantized side has `rank`
 * dims): constant scale and zero point, no blocks, an 8-bit type, float32 on the float side.
 */
export const quantParams = (n: Node, ctx: RuleCtx, rank: number): Checked<QParams> => {
  const what = `${n.op} ${n.name}`
  const a = resolveNode(n).attrs as QuantAttrs
  if (a.block_size !== 0) return no(`${what} is blocked (block_size ${a.block_size})`)
  if (n.op === "QuantizeLinear" && a.precision) return no(`${what} sets precision`)
  if (n.op === "DequantizeLinear" && a.output_dtype !== 0 && a.output_dtype !== 1) return no(`${what} dequantizes to a type other than float32`)
  const s = ctx.constant(n.inputs[1])
  if (!s) return no(`${what}: its scale is not a constant`)
  const scale = goodScale(s, `${what}'s scale`)
  if (!scale.ok) return scale
  const z = n.inputs[2] ? ctx.constant(n.inputs[2]) : undefined
  if (n.inputs[2] && !z) return no(`${what}: its zero point is not a constant`)
  const qType = n.op === "DequantizeLinear" ? ctx.type(n.inputs[0])?.dtype : ctx.type(n.outputs[0])?.dtype
  if (qType !== "int8" && qType !== "uint8") return no(`${what} quantizes to ${qType ?? "an unknown type"}, not int8 or uint8`)
  const floatSide = n.op === "DequantizeLinear" ? n.outputs[0] : n.inputs[0]
  if (ctx.type(floatSide)?.dtype !== "float32") return no(`${what}'s float side is ${ctx.type(floatSide)?.dtype ?? "of unknown type"}, not float32`)
  const perAxis = s.data.length !== 1
  const axis = perAxis ? (a.axis < 0 ? a.axis + rank : a.axis) : undefined
  if (axis !== undefined && (axis < 0 || axis >= rank)) return no(`${what}: axis ${a.axis} out of range`)
  const zp = z ?? fromArray(qType, s.shape, new Array<number>(s.data.length).fill(0))
  if (zp.data.length !== s.data.length) return no(`${what}: zero point and scale differ in size`)
  return ok({ dtype: qType, scale: s, zp, axis })
}

/** Whether the params are per tensor. */
export const perTensor = (p: QParams): boolean => p.axis === undefined

/** Two per-tensor params that are the same (type, scale bits and zero point). */
export const sameParams = (a: QParams, b: QParams): boolean =>
  perTensor(a) && perTensor(b) && a.dtype === b.dtype && a.scale.data[0] === b.scale.data[0] && a.zp.data[0] === b.zp.data[0]

/** A scalar constant of `p`'s zero point (per tensor) as QLinear ops take it. */
export const scalarZp = (p: QParams): Tensor => fromArray(p.dtype, [], [p.zp.data[0] as number])

/** A scalar float32 scale (per tensor). */
export const scalarScale = (p: QParams): Tensor => fromArray("float32", [], [p.scale.data[0] as number])

/** The quantized value of the float `v` under per-tensor `p`, as QuantizeLinear computes it: rint(fround(v / s)) + zp, saturated. */
export const quantizeValue = (v: number, p: QParams): number => {
  const [lo, hi] = p.dtype === "int8" ? [-128, 127] : [0, 255]
  const q = rint(Math.fround(v / (p.scale.data[0] as number))) + (p.zp.data[0] as number)
  return q < lo ? lo : q > hi ? hi : q
}

/** The DequantizeLinear producing `v` (the one node that defines it), if it is one. */
export const dqOf = (ctx: RuleCtx, v: string): Node | undefined => {
  const p = ctx.producer(v)
  return p && p.op === "DequantizeLinear" && p.domain === "" ? p : undefined
}

/** A value's static rank, if known. */
export const rankOf = (ctx: RuleCtx, v: string): number | undefined => ctx.type(v)?.shape.length

/** The DequantizeLinear params of the value `v` that `op` reads as `what`, or why not. */
export const dqParams = (ctx: RuleCtx, v: string, what: string): Checked<{ node: Node; params: QParams }> => {
  const dq = dqOf(ctx, v)
  if (!dq) return no(`${what} is not the output of a DequantizeLinear`)
  const rank = rankOf(ctx, dq.inputs[0])
  if (rank === undefined) return no(`${what}: the rank of ${dq.inputs[0]} is unknown`)
  const p = quantParams(dq, ctx, rank)
  return p.ok ? ok({ node: dq, params: p.value }) : p
}
