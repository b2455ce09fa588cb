// The depthwise 8-bit convolution (QLinearConv / ConvInteger, 2-D, one group per input channel, one
// input channel a group), and the grouped one (more than one group, a reduction over a group's
// input channels besides the taps), in the form its template vectorizes, NCHW as the int8 graph keeps its
// activations, the output pixels in the vector lanes (channels in the lanes would need a transposed
// copy in and out of every layer, the graph's other kernels reading and writing NCHW):
// - the input widened to int16 minus its zero point (per tensor or per channel), padded with 0 (a
//   padded tap holds x's zero point: it contributes nothing); with a stride, its phases read from
//   it (inlined: from the input directly, or a copy; the template's `padded` knob): xs[n, c, py, px, i, j] = x'[i·sh + py − ph, j·sw + px − pw], Hq × Wq each,
//   Wq = OW + the taps' reach in phase columns ((KW − 1)·dw div sw) — one read of each input
//   element (a stride of 1: the padded input itself is the one phase);
// - the weights widened to int16 minus their zero point (per tensor or per output channel): at
//   compile time where they are constants (QLinearConvGrouped's input 10), else a stage;
// - the sums over a grid of the phases' width: sum[n, o, p], p = oh·Wq + ow, = Σ_{c of o's group, kh,
//   kw} x'·w' in int32, exactly the plain compute's sum (|x'|, |w'| ≤ 255). Tap (kh, kw) reads its
//   phase (kh·dh mod sh, kw·dw mod sw) at p + (kh·dh div sh)·Wq + (kw·dw div sw): affine in p, one
//   run across rows, with no copy per tap (the columns ow ≥ OW of a row are computed and never
//   read; the grid is whole vectors, the phases hold every row its taps read);
// - the sums compacted to the output's pixels, dense[n, o, oh, ow] = sum[n, o, oh·Wq + ow] (rows of
//   OW int32), which the epilogue reads as one run across rows (a read of the grid itself would
//   be oh·Wq + ow over the fused pixels, not affine).
// The grid costs (Wq − OW) / OW more products (3% at 56 wide, 29% at 7) where one copy per kernel
// column and stride phase of the input (KW · sh reads of each input element) took a
// third to a half of these convs' time.
// The tagged product ("int8_depthwise") is what the int8 depthwise template tiles.
import { windowOf, type WindowAttrs } from "../ast/graph/ops/nn-common.js"
import type { DType } from "../ast/graph/dtype.js"
import { add, and, c, cast, floordiv, floormod, ge, lt, mul, select, sub, type Expr } from "../ast/te/expr.js"
import { at, compute, reduceAxis, sum, type TeTensor } from "../ast/te/tensor.js"
import { tapPhase, type BlockedProduct } from "./op-library-int8-blocked.js"
import { num, shapeOf, type OpComputeCtx } from "./op-library-common.js"

const I32: DType = "int32"
const I16: DType = "int16"
const i32 = (e: Expr) => cast(I32, e)

/**
 * The sums' grid is whole vectors of this many int32 lanes (AVX-512's 16: whole vectors of AVX2's
 * 8 and SIMD128's 4 too), so the product's vector loop has no scalar tail (a 7×7 output's grid of
 * 61 pixels left 13 a channel scalar, 9 taps each).
 */
const GRID_LANES = 16

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
  // each phase's columns: the output's and the largest tap's offset in phase columns; the grid's
  // pixels, (OH − 1)·Wq + OW, rounded up to whole vectors (GRID_LANES); each phase's rows: those
  // the last pixel's largest tap reads
  // (a stride of 1: rounded up to whole vectors, GRID_LANES, where that adds at most an eighth —
  // the padded rows then vectorize without a scalar tail: 114 → 128 int16 at 112², 58 → 64 at
  // 56²; measured, those convs 0.43 → 0.33 and 0.46 → 0.37 ms, the stride-2 ones not faster)
  const reach = OW + Math.floor(((KW - 1) * dw) / sw)
  const rounded = Math.ceil(reach / GRID_LANES) * GRID_LANES
  const Wq = sh === 1 && sw === 1 && rounded - reach <= reach / 8 ? rounded : reach
  const grid = Math.ceil(((OH - 1) * Wq + OW) / GRID_LANES) * GRID_LANES
  const Hq = Math.ceil((grid + Math.floor(((KH - 1) * dh) / sh) * Wq + (Wq - OW)) / Wq)
  // (the padded input's rows and columns: every phase's the grid reads, beyond the window padded too)
  const Hp = Math.max((OH - 1) * sh + (KH - 1) * dh + 1, Hq * sh)
  const Wp = Math.max((OW - 1) * sw + (KW - 1) * dw + 1, Wq * sw)
  const padEnd = Wp - 1 - pw - (W - 1)
  // the padded input's element (r, q): its bounds tests make loads conditional, which the C
  // compiler does not vectorize, except on the rows with a row above and below them (below)
  const padded = (n: Expr, ch: Expr, r: Expr, q: Expr): Expr => {
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
  }
  // the plane the taps read: the padded input (a stride of 1: one phase), or the stride's phases
  // of it — the template inlines the padded input into them (each phase element read from the
  // input once) or computes it first (its rows contiguous runs, which vectorize: the phases' rows,
  // read from the input strided behind bounds tests, do not)
  const strided = sh > 1 || sw > 1
  const pad = compute(ctx.name("dwpadded"), [N, C, Hp, Wp], (n, ch, r, q) => padded(n, ch, r, q), I16)
  const plane = strided
    ? compute(ctx.name("dwphase"), [N, C, sh, sw, Hq, Wq], (n, ch, py, px, i, j) => at(pad, n, ch, add(mul(i, c(sh)), py), add(mul(j, c(sw)), px)), I16)
    : pad
  // (int16 weights: widened at compile time, QLinearConvGrouped's, read as they are)
  const wq = w.dtype === I16 && !wzp ? w : compute(ctx.name("dwweight"), [M, Cg, KH, KW], (o, ci, kh, kw) => cast(I16, shifted(at(w, o, ci, kh, kw), wzp?.(o))), I16)
  const rc = Cg > 1 ? reduceAxis(Cg, `${ctx.name()}.rc`) : undefined
  const rh = reduceAxis(KH, `${ctx.name()}.rkh`)
  const rw = reduceAxis(KW, `${ctx.name()}.rkw`)
  // a tap's phase and its offset in that phase's rows / columns (a stride of 1: the tap itself)
  const [py, oy] = tapPhase(rh.var, dh, sh)
  const [px, ox] = tapPhase(rw.var, dw, sw)
  // the grid: pixel p = oh·Wq + ow (ow < OW; the columns past it, and the pixels past the last
  // row's OW, are computed and never read; the phases hold the rows their taps read)
  const acc = compute(ctx.name("dw"), [N, M, grid], (n, o, p) => {
    const g = opg === 1 ? o : floordiv(o, c(opg))
    const ch = rc ? add(mul(g, c(Cg)), rc.var) : g
    const f = add(p, add(mul(oy, c(Wq)), ox))
    const a = strided ? at(plane, n, ch, py, px, floordiv(f, c(Wq)), floormod(f, c(Wq))) : at(plane, n, ch, floordiv(f, c(Wq)), floormod(f, c(Wq)))
    return sum(mul(i32(a), i32(at(wq, o, rc ? rc.var : c(0), rh.var, rw.var))), rc ? [rc, rh, rw] : [rh, rw])
  }, I32, "int8_depthwise")
  // the sums compacted to the output's pixels (a row's OW of the grid's Wq), what the epilogue reads
  // as one run across rows
  const dense = compute(ctx.name("dwsum"), [N, M, OH, OW], (n, o, oh, ow) => at(acc, n, o, add(mul(oh, c(Wq)), ow)), I32)
  return { sumAt: ([n, o, oh, ow]) => at(dense, n, o, oh, ow) }
}
