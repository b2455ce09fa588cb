// The standard ONNX integer ops: ConvInteger, QLinearConv, MatMulInteger, QLinearMatMul and
// DynamicQuantizeLinear. The products accumulate exactly in int32 over the zero-point-shifted 8-bit
// values (per tensor, or per output channel / row / column); QLinear* then requantize as
// onnxruntime's CPU kernels do (MlasRequantizeOutput): the int32 sum (bias added) converted to
// float32, times the float32 multiplier x_scale·w_scale/y_scale (each step rounded in the scales'
// type, as ONNX's reference computes it), rounded half to even, plus y's zero point, saturated.
import { windowOf, type WindowAttrs } from "../ast/graph/ops/nn-common.js"
import { converter, type DType } from "../ast/graph/dtype.js"
import { add, and, c, call, cast, div, floordiv, floormod, ge, gt, lt, max, min, mul, select, sub, type Expr } from "../ast/te/expr.js"
import { at, compute, maxReduce, minReduce, reduceAxis, sum, type ComputeTensor, type TeTensor } from "../ast/te/tensor.js"
import { inp, none, num, shapeOf, type OpCompute, type OpComputeCtx } from "./op-library-common.js"
import { blockedConv, blockedMatmul, packedConv, packedConvPixels, packedMatmul } from "./op-library-int8-blocked.js"
import { depthwiseChannels, depthwiseChannelsDot, depthwiseConv, depthwiseWindow, isGrouped } from "./op-library-int8-depthwise.js"

const I32: DType = "int32"
const F32: DType = "float32"
const is8 = (d: DType): boolean => d === "int8" || d === "uint8"
const need8 = (t: TeTensor, what: string): TeTensor => (is8(t.dtype) ? t : none(`${what} of type ${t.dtype} (int8 / uint8 only)`))
const elems = (t: TeTensor): number => t.shape.reduce((a, b) => a * b, 1)

/**
 * A per-tensor or per-slice parameter (zero point, scale): `t` with one element, or a 1-D tensor of
 * `n` elements read at `i`. Anything else declines, naming the parameter.
 */
const param = (t: TeTensor | undefined, n: number, what: string): ((i: Expr) => Expr) | undefined => {
  if (!t) return undefined
  if (elems(t) === 1) {
    const zero = t.shape.map(() => c(0))
    return () => at(t, ...zero)
  }
  if (t.shape.length === 1 && t.shape[0] === n) return (i) => at(t, i)
  return none(`${what} of shape [${t.shape.join(", ")}] (a scalar or ${n} values)`)
}

/** `v` (8-bit) widened to int32, minus its zero point `zp` (8-bit) when there is one. */
const shift = (v: Expr, zp: Expr | undefined): Expr => (zp ? sub(cast(I32, v), cast(I32, zp)) : cast(I32, v))

const W: DType = "float64"
/** `e` (float64) rounded to float32 and widened back: float32 arithmetic, exact on every target (a float32 cast of a float32 value is a no-op in TE, and js computes float32 in doubles). */
const f32 = (e: Expr): Expr => cast(W, cast(F32, e))

/**
 * The multiplier x_scale·w_scale/y_scale as a float64 expression holding a value of the scales'
 * type, each step rounded in that type (ONNX's reference; float32 in onnxruntime). float16 scales
 * are rounded at compile time from constant scalars (no target rounds float16 arithmetic alike).
 */
const multiplier = (ctx: OpComputeCtx, idx: readonly [number, number, number], at3: readonly [Expr, Expr, Expr]): Expr => {
  const dts = idx.map((k) => inp(ctx, k).dtype)
  if (dts.some((d) => d !== dts[0])) return none(`scales of different types (${dts.join(", ")})`)
  const [xs, ws, ys] = at3.map((e) => cast(W, e))
  if (dts[0] === "float32") return f32(div(f32(mul(xs, ws)), ys))
  if (dts[0] === "float64") return div(mul(xs, ws), ys)
  if (dts[0] !== "float16") return none(`scales of type ${dts[0]}`)
  const vals = idx.map((k) => ctx.constants[k])
  if (vals.some((v) => !v || v.length !== 1)) return none("float16 scales that are not constant scalars")
  const r = converter("float16")
  return c(r(r(vals[0]![0] * vals[1]![0]) / vals[2]![0]), W)
}

/**
 * onnxruntime's requantization of an int32 sum (MlasRequantizeOutput): float(acc) · multiplier in
 * float32 (float64 with float64 scales), round half to even, plus the zero point, saturated to the
 * 8-bit output type.
 *
 * With float32 scales the steps after the product run in float32 (the c target's vector loop then
 * converts, rounds and clamps 16 lanes a vector, not 8 doubles): rounding a float32 value to an
 * integer is exact in either type, and so is adding the zero point (|zp| ≤ 255) wherever the sum
 * is below 2^24 in magnitude — beyond, float32 may round it, but it saturates to the same bound.
 */
export const requantize = (acc: Expr, mult: Expr, zp: Expr | undefined, out: DType, wide: boolean, as: DType = out): Expr => {
  const [lo, hi] = out === "int8" ? [-128, 127] : [0, 255]
  // (q is never NaN: a finite sum times a finite multiplier; min / max evaluate the rounding once)
  if (wide) {
    const q = add(call("round", mul(cast(W, acc), mult)), zp ? cast(W, zp) : c(0, W))
    return cast(as, max(c(lo, W), min(c(hi, W), q)))
  }
  // (the int32 sum rounded to float32 once, directly: through float64 first is the same value — float64
  // holds every int32 — but the c target then converted 8 doubles a vector and narrowed them)
  const scaled = cast(F32, mul(cast(W, cast(F32, acc)), mult))
  const q = add(call("round", scaled), zp ? cast(F32, zp) : c(0, F32))
  return cast(as, max(c(lo, F32), min(c(hi, F32), q)))
}

/**
 * The int32 convolution of zero-shifted 8-bit operands, any spatial rank, grouped: out[n, o, y…] =
 * Σ_{c, k…} (x[n, g·Cg + c, y·s − p + k·d] − x_zp) · (w[o, c, k…] − w_zp[o]); a padded tap
 * contributes 0 (it holds x's zero point), plus an int32 bias per output channel when given. In
 * the blocked forms where they apply (depthwise: op-library-int8-depthwise.ts; 2-D ungrouped:
 * op-library-int8-blocked.ts), unless `plain` (the reference the laws hold them to).
 */
const intConv = (ctx: OpComputeCtx, xi: number, wi: number, xzpi: number, wzpi: number, bias: TeTensor | undefined, plain = false): ComputeTensor => {
  const x = need8(inp(ctx, xi), "x")
  const w = need8(inp(ctx, wi), "w")
  const sp = x.shape.length - 2
  if (sp < 1) return none(`integer Conv of rank ${x.shape.length}`)
  const C = x.shape[1]
  const M = w.shape[0]
  const Cg = w.shape[1]
  const kernel = w.shape.slice(2)
  const group = num(ctx.attrs.group, 1)
  const xzp = param(ctx.inputs[xzpi], C, "x_zero_point")
  const wzp = param(ctx.inputs[wzpi], M, "w_zero_point")
  if (bias && (bias.dtype !== I32 || bias.shape.length !== 1 || bias.shape[0] !== M))
    return none(`bias of type ${bias.dtype}, shape [${bias.shape.join(", ")}] (int32, [${M}])`)
  const win = windowOf(x.shape.slice(2), kernel, ctx.attrs as unknown as WindowAttrs)
  const out = shapeOf(ctx.outputs[0])
  const final = ctx.outputs[0].dtype === I32
  if (!plain && isGrouped(ctx, x, w)) {
    const dw = depthwiseConv(ctx, x, w, xzp, wzp)
    return compute(final ? ctx.name() : ctx.name("sum"), out, (n, o, ...ys) => {
      const s = dw.sumAt([n, o, ...ys])
      return bias ? add(s, at(bias, o)) : s
    }, I32)
  }
  const blocked = plain ? undefined : blockedConv(ctx, x, w, ctx.inputs[xzpi], wzpi)
  if (blocked)
    return compute(final ? ctx.name() : ctx.name("sum"), out, (n, o, ...ys) => {
      const s = blocked.sumAt([n, o, ...ys])
      return bias ? add(s, at(bias, o)) : s
    }, I32)
  const opg = M / group
  const rc = reduceAxis(Cg, `${ctx.name()}.rc`)
  const rk = kernel.map((k, j) => reduceAxis(k, `${ctx.name()}.rk${j}`))
  const acc = compute(final && !bias ? ctx.name() : ctx.name("acc"), out, (n, o, ...ys) => {
    const ci = group === 1 ? rc.var : add(mul(floordiv(o, c(opg)), c(Cg)), rc.var)
    const pos = ys.map((y, j) => add(sub(mul(y, c(win.strides[j])), c(win.padBegin[j])), mul(rk[j].var, c(win.dilations[j]))))
    const inside = pos.reduce<Expr>((a, p, j) => and(a, and(ge(p, c(0)), lt(p, c(win.input[j])))), c(1, "bool"))
    const pixel = select(inside, shift(at(x, n, ci, ...pos), xzp?.(ci)), c(0, I32))
    return sum(mul(pixel, shift(at(w, o, rc.var, ...rk.map((r) => r.var)), wzp?.(o))), [rc, ...rk])
  }, I32)
  if (!bias) return acc
  return compute(ctx.name("bias"), out, (n, o, ...ys) => add(at(acc, n, o, ...ys), at(bias, o)), I32)
}

const convInteger: OpCompute = (ctx) => [intConv(ctx, 0, 1, 2, 3, undefined)]
const convIntegerPlain: OpCompute = (ctx) => [intConv(ctx, 0, 1, 2, 3, undefined, true)]

/**
 * QLinearConv's requantization of its int32 sums `acc` (bias added), M output channels; `folded`
 * the multipliers where the layout rewrite computed them at compile time (QLinearConvPacked's
 * input 9: requantMultipliers, equal to this compute's bit for bit).
 */
const qlinearConvOver = (ctx: OpComputeCtx, M: number, acc: ComputeTensor, folded?: TeTensor, narrowed = false, lanes = 0): ComputeTensor[] => {
  const xs = inp(ctx, 1)
  const ws = inp(ctx, 4)
  const ys = inp(ctx, 6)
  const out = ctx.outputs[0].dtype
  const wsAt = param(ws, M, "w_scale")!
  const yzp = param(ctx.inputs[7], 1, "y_zero_point")
  const xsAt = param(xs, 1, "x_scale")!
  const ysAt = param(ys, 1, "y_scale")!
  // (one multiplier per output channel, a stage of its own: a schedule computes it once; held in
  // float32 where it is a float32 value — float32 or float16 scales — so the c target's product
  // of it and the float32 sum, rounded to float32, is one float32 multiply gcc narrows to)
  const wide = xs.dtype === W
  const mult =
    folded ??
    compute(ctx.name("mult"), [M], (o) => {
      const m = multiplier(ctx, [1, 4, 6], [xsAt(c(0)), wsAt(o), ysAt(c(0))])
      return wide ? m : cast(F32, m)
    }, wide ? W : F32)
  if (!narrowed) return [acc, compute(ctx.name(), acc.shape, (n, o, ...ys_) => requantize(at(acc, n, o, ...ys_), cast(W, at(mult, o)), yzp?.(c(0)), out, wide), out)]
  // (the saturated value in int32, then its narrowing: a stage of int32 values a schedule can
  // compute in whole vectors of 16 int32 lanes where a loop storing 8-bit values would take the
  // 8-bit type's vector width — at 16 lanes, 16 bytes: gcc's xmm vectors for every int32 and float step)
  const value = (n: Expr, o: Expr, ys_: Expr[]): Expr => requantize(at(acc, n, o, ...ys_), cast(W, at(mult, o)), yzp?.(c(0)), out, wide, I32)
  if (lanes > 0) {
    // (`lanes` L: the int32 values in blocks of L channels innermost, [n, M / L, ..., L] — the
    // channels-in-lanes sums' order, which the requantization reads and writes a vector of channels at
    // a time; the narrowing reads a block's channels at each pixel)
    const [N, , ...rest] = acc.shape
    const q = compute(ctx.name("q"), [N, M / lanes, ...rest, lanes], (n, b, ...ys_) => value(n, add(mul(b, c(lanes)), ys_[ys_.length - 1]), ys_.slice(0, -1)), I32)
    return [acc, q, compute(ctx.name(), acc.shape, (n, o, ...ys_) => cast(out, at(q, n, floordiv(o, c(lanes)), ...ys_, floormod(o, c(lanes)))), out)]
  }
  const q = compute(ctx.name("q"), acc.shape, (n, o, ...ys_) => value(n, o, ys_), I32)
  return [acc, q, compute(ctx.name(), acc.shape, (n, o, ...ys_) => cast(out, at(q, n, o, ...ys_)), out)]
}

/** The checks QLinearConv's compute makes before it computes: an 8-bit output, x and y scales scalars. */
const qlinearChecks = (ctx: OpComputeCtx): void => {
  const out = ctx.outputs[0].dtype
  if (!is8(out)) return none(`${ctx.node.op} to ${out}`)
  if (elems(inp(ctx, 1)) !== 1 || elems(inp(ctx, 6)) !== 1) return none(`${ctx.node.op} with x_scale or y_scale not a scalar`)
}

const qlinearConv: OpCompute = (ctx) => {
  qlinearChecks(ctx)
  // (a grouped conv's requantized values an int32 stage, as QLinearConvGrouped's: the same template tiles both)
  return qlinearConvOver(ctx, inp(ctx, 3).shape[0], intConv(ctx, 0, 3, 2, 5, ctx.inputs[8]), undefined, isGrouped(ctx, inp(ctx, 0), inp(ctx, 3)))
}
const qlinearConvPlain: OpCompute = (ctx) => {
  qlinearChecks(ctx)
  return qlinearConvOver(ctx, inp(ctx, 3).shape[0], intConv(ctx, 0, 3, 2, 5, ctx.inputs[8], true))
}

/** The integer convolutions' plain computes (one int32 reduction, no blocked form): the reference the blocked forms' laws compare with. */
export const QUANT_INT_PLAIN: Record<"QLinearConv" | "ConvInteger", OpCompute> = { QLinearConv: qlinearConvPlain, ConvInteger: convIntegerPlain }

/** QLinearConvPacked: the blocked product over the weights packed at compile time, then QLinearConv's requantization. */
const qlinearConvPacked: OpCompute = (ctx) => {
  qlinearChecks(ctx)
  const x = need8(inp(ctx, 0), "x")
  const xzp = ctx.inputs[2]
  if (xzp && elems(xzp) !== 1) return none("QLinearConvPacked with x_zero_point not a scalar")
  const M = num(ctx.attrs.m, 0)
  const bias = ctx.inputs[8]
  if (bias && (bias.dtype !== I32 || bias.shape.length !== 1 || bias.shape[0] !== M)) return none(`bias of type ${bias.dtype}, shape [${bias.shape.join(", ")}] (int32, [${M}])`)
  const blocked = num(ctx.attrs.pixel_lanes, 0) === 1 ? packedConvPixels(ctx, x, xzp, inp(ctx, 3), inp(ctx, 5), M) : packedConv(ctx, x, xzp, inp(ctx, 3), inp(ctx, 5))
  const acc = compute(ctx.name("sum"), shapeOf(ctx.outputs[0]), (n, o, ...ys) => {
    const s = blocked.sumAt([n, o, ...ys])
    return bias ? add(s, at(bias, o)) : s
  }, I32)
  // (the requantization's int32 values a stage of their own: with the channels in the dot's lanes
  // its template computes them a vector of channels at a time — in blocks of channel_lanes channels
  // where the layout rewrite chose them, int8EpilogueLanes; with the pixels, at root where the
  // pixel tile is short — else inline, the code as without the stage)
  return qlinearConvOver(ctx, M, acc, ctx.inputs[9], true, num(ctx.attrs.pixel_lanes, 0) === 1 ? 0 : num(ctx.attrs.channel_lanes, 0))
}

/** QLinearConvGrouped: the grouped product over the weights widened at compile time (input 10), then QLinearConv's requantization with the multipliers folded (9) where given. */
const qlinearConvGrouped: OpCompute = (ctx) => {
  qlinearChecks(ctx)
  const x = need8(inp(ctx, 0), "x")
  const w16 = inp(ctx, 10)
  if (!isGrouped(ctx, x, w16)) return none("QLinearConvGrouped that is not 2-D with whole channels a group")
  const M = w16.shape[0]
  const bias = ctx.inputs[8]
  if (bias && (bias.dtype !== I32 || bias.shape.length !== 1 || bias.shape[0] !== M)) return none(`bias of type ${bias.dtype}, shape [${bias.shape.join(", ")}] (int32, [${M}])`)
  const xzp = param(ctx.inputs[2], x.shape[1], "x_zero_point")
  // (the VNNI form where the layout rewrite packed the taps' weights: 11 and 12)
  const [taps, tapsum] = [ctx.inputs[11], ctx.inputs[12]]
  // (the channels-in-lanes form where it chose blocks of channel_lanes channels)
  const lanes = num(ctx.attrs.channel_lanes, 0)
  const dw = taps && tapsum
    ? lanes > 0 ? depthwiseChannelsDot(ctx, x, w16.shape[3], taps, tapsum, xzp, lanes) : depthwiseWindow(ctx, x, w16.shape[3], taps, tapsum, xzp)
    : lanes > 0 ? depthwiseChannels(ctx, x, w16, xzp, lanes) : depthwiseConv(ctx, x, w16, xzp, undefined)
  const acc = compute(ctx.name("sum"), shapeOf(ctx.outputs[0]), (n, o, ...ys) => {
    const s = dw.sumAt([n, o, ...ys])
    return bias ? add(s, at(bias, o)) : s
  }, I32)
  // (the requantization's int32 values a stage of their own: the depthwise template computes them in
  // whole int32 vectors where the C compiler vectorizes — the channels-in-lanes forms' in their blocks)
  return qlinearConvOver(ctx, M, acc, ctx.inputs[9], true, lanes)
}

/**
 * The int32 product of zero-shifted 8-bit matrices, batched and broadcast as MatMul: A's zero point
 * per tensor or per row (M values), B's per tensor or per column (N values).
 */
const intMatmul = (ctx: OpComputeCtx, ai: number, bi: number, azpi: number, bzpi: number, final: boolean): ComputeTensor => {
  const a = need8(inp(ctx, ai), "A")
  const b = need8(inp(ctx, bi), "B")
  if (a.shape.length < 2 || b.shape.length < 2) return none("integer MatMul of a 1-D operand")
  const out = shapeOf(ctx.outputs[0])
  const M = a.shape[a.shape.length - 2]
  const K = a.shape[a.shape.length - 1]
  const N = b.shape[b.shape.length - 1]
  const azp = param(ctx.inputs[azpi], M, "a_zero_point")
  const bzp = param(ctx.inputs[bzpi], N, "b_zero_point")
  const blocked = blockedMatmul(ctx, a, b, ctx.inputs[azpi], bzpi)
  if (blocked) return compute(final ? ctx.name() : ctx.name("sum"), out, (...idx) => blocked.sumAt(idx), I32)
  const k = reduceAxis(K, `${ctx.name()}.rk`)
  return compute(final ? ctx.name() : ctx.name("acc"), out, (...idx) => {
    const batch = idx.slice(0, -2)
    const [i, j] = idx.slice(-2)
    const ab = a.shape.slice(0, -2).map((d, q) => (d === 1 ? c(0) : batch[q + batch.length - (a.shape.length - 2)]))
    const bb = b.shape.slice(0, -2).map((d, q) => (d === 1 ? c(0) : batch[q + batch.length - (b.shape.length - 2)]))
    return sum(mul(shift(at(a, ...ab, i, k.var), azp?.(i)), shift(at(b, ...bb, k.var, j), bzp?.(j))), [k])
  }, I32)
}

/** The blocked product over a B packed at compile time (MatMulIntegerPacked: B at 1, its column sums at 3; QLinearMatMulPacked: at 3 and 5), A's zero point at 2. */
const intMatmulPacked = (ctx: OpComputeCtx, wpi: number, csi: number, final: boolean): ComputeTensor => {
  const a = need8(inp(ctx, 0), "A")
  if (a.shape.length < 2) return none(`${ctx.node.op} of a 1-D A`)
  const azp = ctx.inputs[2]
  if (azp && elems(azp) !== 1) return none(`${ctx.node.op} with a_zero_point not a scalar`)
  const blocked = packedMatmul(ctx, a, azp, inp(ctx, wpi), inp(ctx, csi))
  return compute(final ? ctx.name() : ctx.name("sum"), shapeOf(ctx.outputs[0]), (...idx) => blocked.sumAt(idx), I32)
}

const matmulInteger: OpCompute = (ctx) => [intMatmul(ctx, 0, 1, 2, 3, true)]
const matmulIntegerPacked: OpCompute = (ctx) => [intMatmulPacked(ctx, 1, 3, true)]

const qlinearMatmul: OpCompute = (ctx) => qlinearMatmulOver(ctx, inp(ctx, 3).shape[inp(ctx, 3).shape.length - 1], intMatmul(ctx, 0, 3, 2, 5, false))
const qlinearMatmulPacked: OpCompute = (ctx) => qlinearMatmulOver(ctx, num(ctx.attrs.n, 0), intMatmulPacked(ctx, 3, 5, false), ctx.inputs[8])

/** QLinearMatMul's requantization of its int32 sums `acc`, N columns; `folded` the multipliers computed at compile time (QLinearMatMulPacked's input 8). */
const qlinearMatmulOver = (ctx: OpComputeCtx, N: number, acc: ComputeTensor, folded?: TeTensor): ComputeTensor[] => {
  const a = inp(ctx, 0)
  const as = inp(ctx, 1)
  const bs = inp(ctx, 4)
  const ys = inp(ctx, 6)
  const out = ctx.outputs[0].dtype
  if (!is8(out)) return none(`${ctx.node.op} to ${out}`)
  const M = a.shape[a.shape.length - 2]
  const asAt = param(as, M, "a_scale")!
  const bsAt = param(bs, N, "b_scale")!
  const ysAt = param(ys, 1, "y_scale")!
  const yzp = param(inp(ctx, 7), 1, "y_zero_point")!
  // (per column where A's scale is per tensor: a stage of its own, computed once by a schedule)
  const mult = folded ?? (elems(as) === 1 ? compute(ctx.name("mult"), [N], (j) => multiplier(ctx, [1, 4, 6], [asAt(c(0)), bsAt(j), ysAt(c(0))]), W) : undefined)
  return [
    acc,
    compute(ctx.name(), acc.shape, (...idx) => {
      const [i, j] = idx.slice(-2)
      return requantize(at(acc, ...idx), mult ? cast(W, at(mult, j)) : multiplier(ctx, [1, 4, 6], [asAt(i), bsAt(j), ysAt(c(0))]), yzp(c(0)), out, as.dtype === W)
    }, out),
  ]
}

/**
 * DynamicQuantizeLinear, step by step in float32 as ONNX's reference (and onnxruntime) computes it:
 * the range [min(0, min x), max(0, max x)] over 0..255 gives the scale (1 for an all-zero x) and
 * the zero point round(clamp(−min / scale)); y = saturate(round(x / scale) + zero point).
 */
const dynamicQuantizeLinear: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  if (x.dtype !== F32) return none(`DynamicQuantizeLinear of ${x.dtype} (float32 only)`)
  const whole = (reduce: typeof maxReduce, suffix: string): ComputeTensor => {
    const r = x.shape.map((d, k) => reduceAxis(d, `${ctx.name()}.${suffix}${k}`))
    return compute(ctx.name(suffix), [], () => reduce(at(x, ...r.map((a) => a.var)), r), F32)
  }
  const hi = whole(maxReduce, "max")
  const lo = whole(minReduce, "min")
  const zero = c(0, W)
  const mx = () => max(cast(W, at(hi)), zero)
  const mn = () => min(cast(W, at(lo)), zero)
  const scale = compute(ctx.name("scale"), [], () => select(ge(mn(), mx()), c(1, F32), cast(F32, div(f32(sub(mx(), mn())), c(255, W)))), F32)
  const zp = compute(ctx.name("zp"), [], () => {
    const zpf = f32(sub(zero, f32(div(mn(), cast(W, at(scale))))))
    return cast("uint8", call("round", max(zero, min(c(255, W), zpf))))
  }, "uint8")
  const y = compute(ctx.name("y"), shapeOf(ctx.outputs[0]), (...i) => {
    const q = add(call("round", f32(div(cast(W, at(x, ...i)), cast(W, at(scale))))), cast(W, at(zp)))
    return cast("uint8", max(zero, min(c(255, W), q)))
  }, "uint8")
  return [y, scale, zp].slice(0, ctx.outputs.length)
}

export const QUANT_INT: Record<string, OpCompute> = {
  ConvInteger: convInteger,
  QLinearConv: qlinearConv,
  QLinearConvPacked: qlinearConvPacked,
  QLinearConvGrouped: qlinearConvGrouped,
  MatMulInteger: matmulInteger,
  MatMulIntegerPacked: matmulIntegerPacked,
  QLinearMatMul: qlinearMatmul,
  QLinearMatMulPacked: qlinearMatmulPacked,
  DynamicQuantizeLinear: dynamicQuantizeLinear,
}
