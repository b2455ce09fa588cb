// QuantizeLinear / DequantizeLinear (per tensor, per axis, blocked) with the reference's rounding
// at each step (src/ast/graph/ops/norm-quant.ts): the division rounded to its float type, then
// half to even, plus the zero point, saturated; dequantization in float32 unless numpy widens.
import type { DType } from "../ast/graph/dtype.js"
import { add, c, call, cast, div, floordiv, max, min, mul, sub, type Expr } from "../ast/te/expr.js"
import { at, compute, type TeTensor } from "../ast/te/tensor.js"
import { inp, none, normAxis, num, shapeOf, type OpCompute, type OpComputeCtx } from "./op-library-common.js"

const W: DType = "float64"
const RANGE: Partial<Record<DType, readonly [number, number]>> = { uint8: [0, 255], int8: [-128, 127], uint16: [0, 65535], int16: [-32768, 32767] }

/** The scale / zero-point element for output index `i`: per tensor, per axis or blocked along the axis. */
const paramAt = (ctx: OpComputeCtx, t: TeTensor, xRank: number, i: readonly Expr[]): Expr => {
  const block = num(ctx.attrs.block_size, 0)
  const n = t.shape.reduce((a, b) => a * b, 1)
  if (n === 1 && (t.shape.length === 0 || block <= 0)) return at(t, ...t.shape.map(() => c(0)))
  const axis = normAxis(num(ctx.attrs.axis, 1), xRank)
  if (block <= 0) return at(t, i[axis])
  return at(t, ...i.map((e, k) => (k === axis ? floordiv(e, c(block)) : e)))
}

/** The float type numpy computes `x / s` in (float16 / bfloat16 keep their kernels). */
const promoted = (x: DType, s: DType, precision: number): "float32" | "float64" => {
  const p = precision === 1 ? "float32" : precision === 11 ? "float64" : precision !== 0 ? none(`QuantizeLinear precision ${precision}`) : undefined
  if ([x, s].some((d) => d === "float16" || d === "bfloat16") && !p) return none("QuantizeLinear in float16 / bfloat16")
  return p ?? (x === "float64" || s === "float64" || !x.startsWith("float") ? "float64" : "float32")
}

const quantize: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const s = inp(ctx, 1)
  const zp = ctx.inputs[2]
  const out = ctx.outputs[0].dtype
  const [lo, hi] = RANGE[out] ?? none(`QuantizeLinear to ${out}`)
  const rank = x.shape.length
  // the quotient in float64 rounded to the promoted type, then the steps after it in that type: for
  // float32 its rounding to an integer is exact, and so is adding a zero point below 2^24 (beyond,
  // float32 may round the sum, which saturates to the same bound); the c target then divides in
  // float32 too (its narrowedFloatOp), 16 lanes a vector, not 8
  const F = promoted(x.dtype, s.dtype, num(ctx.attrs.precision, 0))
  return [
    compute(ctx.name(), shapeOf(ctx.outputs[0]), (...i) => {
      const q0 = call("round", cast(F, div(cast(W, at(x, ...i)), cast(W, paramAt(ctx, s, rank, i)))))
      const q = zp ? add(q0, cast(F, paramAt(ctx, zp, rank, i))) : q0
      // saturated by max / min against the bounds (NaN passes through both and stores as 0): a clamp
      // the c emitter converts without tessera_f2i, which gcc vectorizes (and the rounding is
      // written once, where nested selects repeat it)
      return cast(out, max(c(lo, F), min(c(hi, F), q)))
    }, out),
  ]
}

const dequantize: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const s = inp(ctx, 1)
  const zp = ctx.inputs[2]
  const out = ctx.outputs[0].dtype
  const wide = s.dtype === "float64" || x.dtype === "int32" || x.dtype === "uint32" || x.dtype === "int64" || x.dtype === "uint64"
  const rank = x.shape.length
  return [
    compute(ctx.name(), shapeOf(ctx.outputs[0]), (...i) => {
      const xf = cast(W, cast("float32", cast(W, at(x, ...i))))
      const d = zp ? sub(xf, cast(W, paramAt(ctx, zp, rank, i))) : xf
      const v = mul(d, cast(W, paramAt(ctx, s, rank, i)))
      return cast(out, wide ? v : cast(W, cast("float32", v)))
    }, out),
  ]
}

export const QUANT: Record<string, OpCompute> = { QuantizeLinear: quantize, DequantizeLinear: dequantize }
