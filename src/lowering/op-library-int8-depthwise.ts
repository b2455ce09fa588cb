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
import { add, and, c, cast, floordiv, floormod, ge, gt, lt, mul, select, sub, type Expr } from "../ast/te/expr.js"
import { at, compute, reduceAxis, sum, type TeTensor } from "../ast/te/tensor.js"
import { tapPhase, type BlockedProduct } from "./op-library-int8-blocked.js"
import { none, num, shapeOf, type OpComputeCtx } from "./op-library-common.js"
import { depthwiseWindowGrid } from "../ast/graph/ops/int8-packed.js"

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

/** A grouped conv's window: the output channels a group, the output's rows and columns, strides, dilations and leading pads. */
const windowParts = (ctx: OpComputeCtx, x: TeTensor, M: number, KH: number, KW: number) => {
  const win = windowOf([x.shape[2], x.shape[3]], [KH, KW], ctx.attrs as unknown as WindowAttrs)
  const [, , OH, OW] = shapeOf(ctx.outputs[0])
  const [[sh, sw], [dh, dw], [ph, pw]] = [win.strides, win.dilations, win.padBegin]
  return { opg: M / num(ctx.attrs.group, 1), OH, OW, sh, sw, dh, dw, ph, pw }
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
  const { opg, OH, OW, sh, sw, dh, dw, ph, pw } = windowParts(ctx, x, M, KH, KW)
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

/**
 * The depthwise product on the VNNI dot over a sliding window (QLinearConvGrouped with its taps' s8
 * weights, 11, and their sums, 12: the layout rewrite's choice, pack-int8.ts's int8DepthwiseWindow),
 * the output's pixels in the dot's 16 lanes and a kernel row's taps in its 4-deep operand — one
 * vpdpbusd a kernel row and 16 pixels (vnniDotWindow), where the int16 form takes a widened load, a
 * vpmulld and a vpaddd a tap:
 * - the plane: the padded input in u8 (x + 128 for int8, as it is for uint8; the padding u's zero
 *   point x_zp + 128, whose products the correction takes off: a padded tap contributes nothing),
 *   its rows `sw`·Wq bytes (Wq: depthwiseWindowGrid's width), in sh row phases where the kernel has
 *   more than one row (phase py: the padded rows py, py + sh, …), [n, c, phases, Q] (rows flat);
 * - sum[n, o, p] over the grid p = oh·Wq + ow (ow < Wq, the last row cut at OW) = Σ_{kh, r}
 *   plane[n, c, py(kh), oy(kh)·sw·Wq + p·sw + r·dw] · w[o, kh, r] (taps past kw: weight 0), which
 *   is affine in p: 16 consecutive p read one run of the row (the window the instruction gathers);
 * - compacted to the output's pixels, minus u_zp · Σw[o];
 * or, where the grid is `rows` (the width whole vectors of 16: 112², 56², 28²), sum[n, o, oh, v, l]
 * at p = oh·Wq + 16·v + l, read by the epilogue at [oh, ow div 16, ow mod 16] — no compaction.
 * `xzp` reads x's zero point at an input channel (per tensor or per channel).
 */
export const depthwiseWindow = (
  ctx: OpComputeCtx,
  x: TeTensor,
  KW: number,
  taps: TeTensor,
  tapsum: TeTensor,
  xzp: ((ch: Expr) => Expr) | undefined,
): BlockedProduct => {
  const [N, C, H, W] = x.shape
  const [M, KH, depth] = taps.shape
  const { opg, OH, OW, sh, sw, dh, dw, ph, pw } = windowParts(ctx, x, M, KH, KW)
  const grid = depthwiseWindowGrid([OH, OW], [KH, KW], [dh, dw], [sh, sw]) ?? none(`a depthwise conv's window form for a ${KH}×${KW} kernel, strides ${sh}, ${sw} at ${OH}×${OW} (depthwiseWindowGrid has no grid)`)
  const Wq = grid.width
  const Wp = Wq * sw
  // (the row phases the taps read: a kernel of one row, its only one; each phase's rows: the last
  // window's, (size − 1)·sw + 3·dw, past the largest tap's row offset)
  const rp = KH === 1 ? 1 : sh
  const Hq = Math.floor(((KH - 1) * dh) / rp) + Math.ceil(((grid.size - 1) * sw + (depth - 1) * dw + 1) / Wp)
  const Q = Hq * Wp
  const padEnd = Wp - 1 - pw - (W - 1)
  const shift = x.dtype === "int8" ? 128 : 0
  const uzp = (ch: Expr): Expr => (xzp ? add(i32(xzp(ch)), c(shift)) : c(shift))
  const u8 = (n: Expr, ch: Expr, ih: Expr, iw: Expr): Expr => add(i32(at(x, n, ch, ih, iw)), c(shift))
  // (whether a padded column holds an input column: a row of bytes the rows' selects read — a
  // comparison of the column's index a lane was 8 int64 compares and their masks packed a vector)
  const cols = compute(ctx.name("dwcols"), [Wp], (q) => cast("uint8", and(ge(q, c(pw)), lt(q, c(pw + W)))), "uint8")
  const plane = compute(ctx.name("dwu8"), [N, C, rp, Q], (n, ch, py, g) => {
    const ih = sub(add(mul(floordiv(g, c(Wp)), c(sh)), py), c(ph))
    const q = floormod(g, c(Wp))
    const iw = sub(q, c(pw))
    const colIn = gt(i32(at(cols, q)), c(0))
    const plain = select(and(and(ge(ih, c(0)), lt(ih, c(H))), colIn), u8(n, ch, ih, iw), uzp(ch))
    if (pw > W || padEnd > W || H < 3) return cast("uint8", plain)
    // (as the int16 form's: a row with a row above and below read through the channel's pixels as one run)
    const a = add(iw, c(W))
    const flat = u8(n, ch, add(sub(ih, c(1)), floordiv(a, c(W))), floormod(a, c(W)))
    return cast("uint8", select(and(ge(ih, c(1)), lt(ih, c(H - 1))), select(colIn, flat, uzp(ch)), plain))
  }, "uint8")
  const rh = reduceAxis(KH, `${ctx.name()}.rkh`)
  const rr = reduceAxis(depth, `${ctx.name()}.rr`)
  const [py, oy] = tapPhase(rh.var, dh, rp)
  const chOf = (o: Expr): Expr => (opg === 1 ? o : floordiv(o, c(opg)))
  const product = (n: Expr, o: Expr, p: Expr): Expr => {
    const f = add(add(mul(oy, c(Wp)), mul(p, c(sw))), mul(rr.var, c(dw)))
    return sum(mul(i32(at(plane, n, chOf(o), py, f)), i32(at(taps, o, rh.var, rr.var))), [rh, rr])
  }
  if (grid.rows) {
    // rows of whole vectors: sum[n, o, oh, v, l] at p = oh·Wq + 16·v + l, read where it is (no compaction)
    const V = Wq / GRID_LANES
    const rows = compute(ctx.name("dw"), [N, M, OH, V, GRID_LANES], (n, o, oh, v, l) => product(n, o, add(add(mul(oh, c(Wq)), mul(v, c(GRID_LANES))), l)), I32, "int8_depthwise")
    return { sumAt: ([n, o, oh, ow]) => sub(at(rows, n, o, oh, floordiv(ow, c(GRID_LANES)), floormod(ow, c(GRID_LANES))), mul(uzp(chOf(o)), at(tapsum, o))) }
  }
  const acc = compute(ctx.name("dw"), [N, M, grid.size], (n, o, p) => product(n, o, p), I32, "int8_depthwise")
  const dense = compute(ctx.name("dwsum"), [N, M, OH, OW], (n, o, oh, ow) => at(acc, n, o, add(mul(oh, c(Wq)), ow)), I32)
  return { sumAt: ([n, o, oh, ow]) => sub(at(dense, n, o, oh, ow), mul(uzp(chOf(o)), at(tapsum, o))) }
}

/**
 * The depthwise product with blocks of L channels in the vector lanes (QLinearConvGrouped with
 * `channel_lanes` L: the layout rewrite's choice where a channel's output rows are narrower than
 * the target's vector, pack-int8.ts's int8DepthwiseChannels) — the small planes (14², 7²), where a
 * channel's pixels in the lanes leave most of a vector a row and the padded plane of a channel
 * (9 × 9 int16 at 7²) is too small to vectorize:
 * - the plane: the padded input widened to int16 minus x's zero point (0 in the padding: a padded
 *   tap contributes nothing), its block's L channels innermost, [n, C / L, Hp, Wp, L] — the one
 *   transposing copy, from the graph's NCHW;
 * - sum[n, b, oh, ow, l] = Σ_{kh, kw} plane[n, b, oh·sh + kh·dh, ow·sw + kw·dw, l] · w'[b·L + l, kh, kw]
 *   in int32: each tap a vector of L channels (a stride or dilation moves only the pixel read, no
 *   phases), exactly the plain compute's sum (|x'|, |w'| ≤ 255);
 * - read back at [n, o, oh, ow] = sum[n, o div L, oh, ow, o mod L] by the requantizing epilogue.
 * One input channel a group, one output channel each (C = M = group), C a multiple of L.
 */
export const depthwiseChannels = (
  ctx: OpComputeCtx,
  x: TeTensor,
  w: TeTensor,
  xzp: ((ch: Expr) => Expr) | undefined,
  L: number,
): BlockedProduct => {
  const [N, C, H, W] = x.shape
  const [M, Cg, KH, KW] = w.shape
  if (Cg !== 1 || M !== C || C % L !== 0 || w.dtype !== I16) return none(`a depthwise conv's channels-in-lanes form for ${M} output channels of ${C} × ${Cg} (one a channel, a multiple of ${L}, int16 weights)`)
  const { OH, OW, sh, sw, dh, dw, ph, pw } = windowParts(ctx, x, M, KH, KW)
  const Hp = (OH - 1) * sh + (KH - 1) * dh + 1
  const Wp = (OW - 1) * sw + (KW - 1) * dw + 1
  const plane = compute(ctx.name("dwlanes"), [N, C / L, Hp, Wp, L], (n, b, r, q, l) => {
    const ch = add(mul(b, c(L)), l)
    const ih = sub(r, c(ph))
    const iw = sub(q, c(pw))
    const inside = and(and(ge(ih, c(0)), lt(ih, c(H))), and(ge(iw, c(0)), lt(iw, c(W))))
    return cast(I16, select(inside, shifted(at(x, n, ch, ih, iw), xzp?.(ch)), c(0, I32)))
  }, I16)
  // (the weights a block's taps a vector of L channels each: [C / L, KH, KW, L])
  const wl = compute(ctx.name("dwwlanes"), [C / L, KH, KW, L], (b, kh, kw, l) => at(w, add(mul(b, c(L)), l), c(0), kh, kw), I16)
  const rh = reduceAxis(KH, `${ctx.name()}.rkh`)
  const rw = reduceAxis(KW, `${ctx.name()}.rkw`)
  const acc = compute(ctx.name("dw"), [N, C / L, OH, OW, L], (n, b, oh, ow, l) => {
    const a = at(plane, n, b, add(mul(oh, c(sh)), mul(rh.var, c(dh))), add(mul(ow, c(sw)), mul(rw.var, c(dw))), l)
    return sum(mul(i32(a), i32(at(wl, b, rh.var, rw.var, l))), [rh, rw])
  }, I32, "int8_depthwise")
  return { sumAt: ([n, o, oh, ow]) => at(acc, n, floordiv(o, c(L)), oh, ow, floormod(o, c(L))) }
}

/**
 * The channels-in-lanes form on the VNNI dot (QLinearConvGrouped with `channel_lanes` 16 and its
 * taps' s8 weights, 11, and their sums, 12: the layout rewrite's choice, pack-int8.ts's
 * int8DepthwiseChannelsDot) — MLAS's depthwise form, a block of 16 channels in the dot's lanes and
 * a kernel row's taps in its 4-deep operand, one vpdpbusd (vnniDotChannels16x4) a kernel row, 16
 * channels and a pixel, where the int16 form takes a widened load, a multiply and an add a tap:
 * - the plane: the padded input in u8 (x + 128 for int8, as it is for uint8; the padding u's zero
 *   point x_zp + 128, whose products the correction takes off), its block's 16 channels innermost,
 *   [n, C / 16, Hp, Wp, 16], Wp reaching the 4th tap of the last window (its weight 0) — the one
 *   transposing copy, from the graph's NCHW;
 * - the taps a block's [C / 16, KH, 16, 4] (channel l's 4 taps of row kh: one 64-byte operand);
 * - sum[n, b, oh, ow, l] = Σ_{kh, r<4} plane[n, b, oh·sh + kh·dh, ow·sw + r, l] · taps[b·16 + l, kh, r],
 *   read back at [n, o, oh, ow] = sum[n, o div 16, oh, ow, o mod 16] − u_zp · Σw[o].
 * One input channel a group, one output channel each (C = M = group), C a multiple of 16, a kernel
 * row of at most 4 taps, no dilation along the row (the operand is one run of 4 pixels).
 */
export const depthwiseChannelsDot = (
  ctx: OpComputeCtx,
  x: TeTensor,
  KW: number,
  taps: TeTensor,
  tapsum: TeTensor,
  xzp: ((ch: Expr) => Expr) | undefined,
  L: number,
): BlockedProduct => {
  const [N, C, H, W] = x.shape
  const [M, KH, depth] = taps.shape
  const { OH, OW, sh, sw, dh, dw, ph, pw } = windowParts(ctx, x, M, KH, KW)
  if (M !== C || C % L !== 0 || L !== GRID_LANES || dw !== 1 || KW > depth) return none(`a depthwise conv's channels-in-lanes dot for ${M} output channels of ${C} (one a channel, a multiple of ${GRID_LANES}), a row of ${KW} taps at dilation ${dw} (at most ${depth}, 1)`)
  const Hp = (OH - 1) * sh + (KH - 1) * dh + 1
  const Wp = (OW - 1) * sw + depth
  const shift = x.dtype === "int8" ? 128 : 0
  const uzp = (ch: Expr): Expr => (xzp ? add(i32(xzp(ch)), c(shift)) : c(shift))
  // (the transposing copy dense and unpadded, [n, C / 16, H, W, 16], which the template computes with
  // the pixels its vector loop and the 16 channels unrolled — a store the C compiler interleaves with
  // permutes — then the padded plane from it, 16 channels a vector: a copy that gathered the padded
  // plane's bytes 16 channels apart, behind its bounds tests, ran scalar)
  const dense = compute(ctx.name("dwu8dense"), [N, C / L, H, W, L], (n, b, h, w, l) => cast("uint8", add(i32(at(x, n, add(mul(b, c(L)), l), h, w)), c(shift))), "uint8")
  const plane = compute(ctx.name("dwu8lanes"), [N, C / L, Hp, Wp, L], (n, b, r, q, l) => {
    const ih = sub(r, c(ph))
    const iw = sub(q, c(pw))
    const inside = and(and(ge(ih, c(0)), lt(ih, c(H))), and(ge(iw, c(0)), lt(iw, c(W))))
    return cast("uint8", select(inside, i32(at(dense, n, b, ih, iw, l)), uzp(add(mul(b, c(L)), l))))
  }, "uint8")
  // (a block's taps: channel l's row kh the 4 bytes at [b, kh, l])
  const wl = compute(ctx.name("dwtapslanes"), [C / L, KH, L, depth], (b, kh, l, r) => at(taps, add(mul(b, c(L)), l), kh, r), "int8")
  const rh = reduceAxis(KH, `${ctx.name()}.rkh`)
  const rr = reduceAxis(depth, `${ctx.name()}.rr`)
  const acc = compute(ctx.name("dw"), [N, C / L, OH, OW, L], (n, b, oh, ow, l) => {
    const a = at(plane, n, b, add(mul(oh, c(sh)), mul(rh.var, c(dh))), add(mul(ow, c(sw)), rr.var), l)
    return sum(mul(i32(a), i32(at(wl, b, rh.var, l, rr.var))), [rh, rr])
  }, I32, "int8_depthwise")
  return { sumAt: ([n, o, oh, ow]) => sub(at(acc, n, floordiv(o, c(L)), oh, ow, floormod(o, c(L))), mul(uzp(o), at(tapsum, o))) }
}
