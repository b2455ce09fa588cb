// The depthwise 8-bit convolution (QLinearConv / ConvInteger, 2-D, one group per input channel, one
// input channel a group), and the grouped one (more than one group, a reduction over a group's
// input channels besides the taps), in the form its template vectorizes, NCHW as the int8 graph keeps its
// activations, the output pixels in the vector lanes (channels in the lanes would need a transposed
// copy in and out of every layer, the graph's other kernels reading and writing NCHW):
// - the input widened to int16 minus its zero point (per tensor or per channel), padded with 0 (a
//   padded tap holds x's zero point: it contributes nothing), then one copy of that per kernel column
//   kw and row phase py of the stride: xs[n, c, py, kw, i, ow] = x'[i·sh + py − ph, ow·sw + kw·dw − pw],
//   rows of the output's width. Tap (kh, kw) of output (oh, ow) reads xs[n, c, kh·dh mod sh, kw,
//   oh + kh·dh div sh, ow]: as the output pixel oh·OW + ow steps by one, so does the read, across
//   rows too — the template runs a channel's pixels as one axis, vectors of whole rows or several
//   (rows of 14 or 7 are shorter than a vector);
// - the weights widened to int16 minus their zero point (per tensor or per output channel);
// - sum[n, o, oh·OW + ow] = Σ_{c of o's group, kh, kw} x'·w' in int32, exactly the plain compute's sum (|x'|, |w'| ≤
//   255), a channel's pixels one axis (its reads of xs, oh·OW + ow + the tap's row offset · OW, are
//   affine in it: a tile of the pixels reads and is read contiguously).
// The copies cost KW · sh reads of each input element, beside KH · KW products an output.
// The tagged product ("int8_depthwise") is what the int8 depthwise template tiles.
import { windowOf, type WindowAttrs } from "../ast/graph/ops/nn-common.js"
import type { DType } from "../ast/graph/dtype.js"
import { add, and, c, cast, floordiv, floormod, ge, lt, mul, select, sub, type Expr } from "../ast/te/expr.js"
import { at, compute, reduceAxis, sum, type TeTensor } from "../ast/te/tensor.js"
import type { BlockedProduct } from "./op-library-int8-blocked.js"
import { num, shapeOf, type OpComputeCtx } from "./op-library-common.js"

const I32: DType = "int32"
const I16: DType = "int16"
const i32 = (e: Expr) => cast(I32, e)

/** An 8-bit value widened to int32 minus its zero point (when there is one). */
const shifted = (v: Expr, zp: Expr | undefined): Expr => (zp ? sub(i32(v), i32(zp)) : i32(v))

/**
 * Whether a 2-D integer conv is grouped (depthwise the case of one input channel a group): more
 * than one group, whole input and output channels per group.
 */
export const isGrouped = (ctx: OpComputeCtx, x: TeTensor, w: TeTensor): boolean => {
  if (x.shape.length !== 4 || w.shape.length !== 4) return false
  const C = x.shape[1]
  const group = num(ctx.attrs.group, 1)
  return group > 1 && C % group === 0 && w.shape[1] === C / group && w.shape[0] % group === 0
}

/**
 * The depthwise product: sum[n, o, oh, ow] from an int32 compute over the int16 phases of the padded
 * input and the int16 weights (see above). `xzp` / `wzp` read x's zero point at an input channel
 * and w's at an output channel (per tensor or per channel: both are exact here).
 */
export const depthwiseConv = (
  ctx: OpComputeCtx,
  x: TeTensor,
  w: TeTensor,
  xzp: ((ch: Expr) => Expr) | undefined,
  wzp: ((o: Expr) => Expr) | undefined,
): BlockedProduct => {
  const [N, C, H, W] = x.shape
  const [M, Cg, KH, KW] = w.shape
  // output channel o reads its group's input channels: (o div the outputs a group) · Cg + c
  const opg = M / num(ctx.attrs.group, 1)
  const win = windowOf([H, W], [KH, KW], ctx.attrs as unknown as WindowAttrs)
  const [, , OH, OW] = shapeOf(ctx.outputs[0])
  const [sh, sw] = win.strides
  const [dh, dw] = win.dilations
  const [ph, pw] = win.padBegin
  // rows of each phase the taps read: the output rows and the largest tap's offset in phases
  const Hs = OH + Math.floor(((KH - 1) * dh) / sh)
  // (the padded input first, whole: its bounds tests make loads conditional, which the C compiler
  // does not vectorize; the copies then read it unconditionally, vectorized)
  // (rows: every phase's rows the copies hold, the last phase's beyond the window padded too)
  const Hp = Math.max((OH - 1) * sh + (KH - 1) * dh + 1, Hs * sh)
  const Wp = (OW - 1) * sw + (KW - 1) * dw + 1
  const padEnd = Wp - 1 - pw - (W - 1)
  const xp = compute(ctx.name("dwpadded"), [N, C, Hp, Wp], (n, ch, r, q) => {
    const ih = sub(r, c(ph))
    const iw = sub(q, c(pw))
    const colIn = and(ge(iw, c(0)), lt(iw, c(W)))
    const plain = select(and(and(ge(ih, c(0)), lt(ih, c(H))), colIn), shifted(at(x, n, ch, ih, iw), xzp?.(ch)), c(0, I32))
    if (pw > W || padEnd > W || H < 3) return cast(I16, plain)
    // a row with a row above and below it: its columns read unconditionally through the channel's
    // pixels as one run (a column left of the row is the last of the row above, one right of it
    // the first of the row below), the padding masked off — the loads the C compiler vectorizes
    const a = add(iw, c(W))
    const flat = shifted(at(x, n, ch, add(sub(ih, c(1)), floordiv(a, c(W))), floormod(a, c(W))), xzp?.(ch))
    return cast(I16, select(and(ge(ih, c(1)), lt(ih, c(H - 1))), mul(flat, cast(I32, colIn)), plain))
  }, I16)
  const xs = compute(ctx.name("dwpad"), [N, C, sh, KW, Hs, OW], (n, ch, py, kw, i, j) => at(xp, n, ch, add(mul(i, c(sh)), py), add(mul(j, c(sw)), mul(kw, c(dw)))), I16)
  const wq = compute(ctx.name("dwweight"), [M, Cg, KH, KW], (o, ci, kh, kw) => cast(I16, shifted(at(w, o, ci, kh, kw), wzp?.(o))), I16)
  const rc = Cg > 1 ? reduceAxis(Cg, `${ctx.name()}.rc`) : undefined
  const rh = reduceAxis(KH, `${ctx.name()}.rkh`)
  const rw = reduceAxis(KW, `${ctx.name()}.rkw`)
  // a row tap's phase and its offset in that phase's rows (a stride of 1: one phase, the tap itself)
  const t = dh === 1 ? rh.var : mul(rh.var, c(dh))
  const [py, oy] = sh === 1 ? [c(0), t] : [floormod(t, c(sh)), floordiv(t, c(sh))]
  const acc = compute(ctx.name("dw"), [N, M, OH * OW], (n, o, p) => {
    const g = opg === 1 ? o : floordiv(o, c(opg))
    const ch = rc ? add(mul(g, c(Cg)), rc.var) : g
    const a = at(xs, n, ch, py, rw.var, add(floordiv(p, c(OW)), oy), floormod(p, c(OW)))
    return sum(mul(i32(a), i32(at(wq, o, rc ? rc.var : c(0), rh.var, rw.var))), rc ? [rc, rh, rw] : [rh, rw])
  }, I32, "int8_depthwise")
  return { sumAt: ([n, o, oh, ow]) => at(acc, n, o, add(mul(oh, c(OW)), ow)) }
}
