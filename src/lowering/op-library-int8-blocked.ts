// The integer products (QLinearConv / ConvInteger 2-D ungrouped, QLinearMatMul / MatMulInteger over
// a 2-D B) in the layout AVX-512 VNNI's vpdpbusd reads (u8 × s8 → s32, 4-wide dots into 16 lanes),
// as MLAS and oneDNN arrange them:
// - activations as u8: an int8 x plus 128; the padded input holds x's zero point (shifted), so a
//   padded tap contributes (u − u_zp) · w = 0 after the correction below;
// - weights as s8 packed [M/16, C/4, kh, kw, 16, 4] (uint8 weights minus 128): a conv's constant
//   weights packed at compile time (QLinearConvPacked, rewrite.AlterLayout's int8 rule), else a stage
//   of the kernel, O(weights) beside the product's O(weights · pixels);
// - sum = Σ u·w' − u_zp · Σw' (the column sums of the packed weights), exact in int32.
// Applies where the weights' zero point is the one that makes w' = w − w_zp an s8 value (0 for
// int8 weights, 128 for uint8) and known at compile time, and x's zero point is per tensor; the
// tagged product ("int8_dot") is what the int8 template tensorizes onto the VNNI dot.
import { windowOf, type WindowAttrs } from "../ast/graph/ops/nn-common.js"
import { int8PixelGrid } from "../ast/graph/ops/int8-packed.js"
import type { DType } from "../ast/graph/dtype.js"
import { add, and, c, cast, floordiv, floormod, ge, lt, mul, select, sub, type Expr } from "../ast/te/expr.js"
import { at, compute, reduceAxis, sum, type ComputeTensor, type TeTensor } from "../ast/te/tensor.js"
import { none, num, shapeOf, type OpComputeCtx } from "./op-library-common.js"

const I32: DType = "int32"
export const DOT_LANES = 16
export const DOT_DEPTH = 4
const ceilDiv = (a: number, b: number) => Math.ceil(a / b)
const i32 = (e: Expr) => cast(I32, e)

/** The shift that makes the weights s8 (0 for int8, 128 for uint8) when every weight zero point equals it (known at compile time); undefined otherwise. */
const weightShift = (ctx: OpComputeCtx, w: TeTensor, wzpi: number): number | undefined => {
  const shift = w.dtype === "uint8" ? 128 : w.dtype === "int8" ? 0 : undefined
  if (shift === undefined) return undefined
  if (!ctx.node.inputs[wzpi]) return shift === 0 ? 0 : undefined
  const zp = ctx.constants[wzpi]
  return zp && Array.from(zp).every((z) => Number(z) === shift) ? shift : undefined
}

/** A tap's stride phase and its offset in that phase's rows (or columns): (t·d mod s, t·d div s); at stride 1 the phase 0 and the tap's offset itself. */
export const tapPhase = (t: Expr, d: number, s: number): [Expr, Expr] => {
  const v = d === 1 ? t : mul(t, c(d))
  return s === 1 ? [c(0), v] : [floormod(v, c(s)), floordiv(v, c(s))]
}

/** x's zero point plus the activation shift (128 for int8), as an int32 expression: u's zero point. */
const activationZero = (x: TeTensor, zp: TeTensor | undefined): Expr => {
  const shift = x.dtype === "int8" ? 128 : 0
  return zp ? add(i32(at(zp, ...zp.shape.map(() => c(0)))), c(shift)) : c(shift)
}

/** A blocked product and what completes it: sum[…, o] = acc[…, o / 16, …, o % 16] − u_zp · colsum[o]. */
export interface BlockedProduct {
  /** The corrected int32 sum at output index `idx` (the op's own output layout). */
  readonly sumAt: (idx: readonly Expr[]) => Expr
}

/** The packed weights' column sums, one per output channel (padded to whole blocks). */
const columnSums = (ctx: OpComputeCtx, wp: TeTensor): ComputeTensor => {
  const inner = wp.shape.slice(1, -2)
  const rs = [...inner, DOT_DEPTH].map((d, k) => reduceAxis(d, `${ctx.name()}.cs${k}`))
  return compute(ctx.name("colsum"), [wp.shape[0] * DOT_LANES], (o) => {
    const r = rs.map((a) => a.var)
    return sum(i32(at(wp, floordiv(o, c(DOT_LANES)), ...r.slice(0, -1), floormod(o, c(DOT_LANES)), r[r.length - 1])), rs)
  }, I32)
}

/** QLinearConv / ConvInteger, 2-D and ungrouped, in the blocked form; undefined where it does not apply. */
export const blockedConv = (ctx: OpComputeCtx, x: TeTensor, w: TeTensor, xzp: TeTensor | undefined, wzpi: number): BlockedProduct | undefined => {
  if (x.shape.length !== 4 || num(ctx.attrs.group, 1) !== 1) return undefined
  if (xzp && xzp.shape.reduce((a, b) => a * b, 1) !== 1) return undefined
  const shiftW = weightShift(ctx, w, wzpi)
  if (shiftW === undefined) return undefined
  const C = x.shape[1]
  const [M, , KH, KW] = w.shape
  const wp = compute(ctx.name("wpack"), [ceilDiv(M, DOT_LANES), ceilDiv(C, DOT_DEPTH), KH, KW, DOT_LANES, DOT_DEPTH], (mb, cb, kh, kw, l, r) => {
    const o = add(mul(mb, c(DOT_LANES)), l)
    const ch = add(mul(cb, c(DOT_DEPTH)), r)
    return cast("int8", select(and(lt(o, c(M)), lt(ch, c(C))), sub(i32(at(w, o, ch, kh, kw)), c(shiftW)), c(0)))
  }, "int8")
  return packedConv(ctx, x, xzp, wp, columnSums(ctx, wp))
}

/**
 * The blocked convolution over packed s8 weights `wp` [M/16, C/4, kh, kw, 16, 4] and their column
 * sums `cs` (QLinearConvPacked's inputs, packed at compile time, or blockedConv's stages); x's zero
 * point per tensor.
 */
export const packedConv = (ctx: OpComputeCtx, x: TeTensor, xzp: TeTensor | undefined, wp: TeTensor, cs: TeTensor): BlockedProduct => {
  const [N, C, H, W] = x.shape
  const [, Cb, KH, KW] = wp.shape
  const win = windowOf([H, W], [KH, KW], ctx.attrs as unknown as WindowAttrs)
  const [, , OH, OW] = shapeOf(ctx.outputs[0])
  const [sh, sw] = win.strides
  const [dh, dw] = win.dilations
  const Mb = wp.shape[0]
  // (a strided 1×1 kernel reads only every stride-th pixel: the copy holds those, the output's
  // pixels, and the product reads it unstrided — ResNet-18's 1×1 / 2 downsamples copied the whole
  // input, (2·OH − 1)² pixels for OH²)
  const [ys, xs] = KH === 1 && KW === 1 ? [sh, sw] : [1, 1]
  const Hp = ys > 1 ? OH : (OH - 1) * sh + (KH - 1) * dh + 1
  const Wp = xs > 1 ? OW : (OW - 1) * sw + (KW - 1) * dw + 1
  const uzp = activationZero(x, xzp)
  const shiftX = x.dtype === "int8" ? 128 : 0
  const u = compute(ctx.name("u8"), [N, Cb, Hp, Wp, DOT_DEPTH], (n, cb, h, q, r) => {
    const ch = add(mul(cb, c(DOT_DEPTH)), r)
    const ih = sub(ys > 1 ? mul(h, c(ys)) : h, c(win.padBegin[0]))
    const iw = sub(xs > 1 ? mul(q, c(xs)) : q, c(win.padBegin[1]))
    const inside = and(and(lt(ch, c(C)), and(ge(ih, c(0)), lt(ih, c(H)))), and(ge(iw, c(0)), lt(iw, c(W))))
    return cast("uint8", select(inside, add(i32(at(x, n, ch, ih, iw)), c(shiftX)), uzp))
  }, "uint8")
  const rc = reduceAxis(Cb, `${ctx.name()}.rcb`)
  const rh = reduceAxis(KH, `${ctx.name()}.rkh`)
  const rw = reduceAxis(KW, `${ctx.name()}.rkw`)
  const rr = reduceAxis(DOT_DEPTH, `${ctx.name()}.rr`)
  const acc = compute(ctx.name("dot"), [N, Mb, OH, OW, DOT_LANES], (n, mb, oh, ow, l) => {
    const a = at(u, n, rc.var, add(mul(oh, c(sh / ys)), mul(rh.var, c(dh))), add(mul(ow, c(sw / xs)), mul(rw.var, c(dw))), rr.var)
    return sum(mul(i32(a), i32(at(wp, mb, rc.var, rh.var, rw.var, l, rr.var))), [rc, rh, rw, rr])
  }, I32, "int8_dot")
  return {
    sumAt: ([n, o, oh, ow]) => sub(at(acc, n, floordiv(o, c(DOT_LANES)), oh, ow, floormod(o, c(DOT_LANES))), mul(uzp, at(cs, o))),
  }
}

/**
 * A blocked convolution with the output's pixels in the dot's lanes (QLinearConvPacked's
 * `pixel_lanes`, chosen by the layout rewrite: src/rewrite/pack-int8.ts's int8PixelLanes): the
 * same packed weights read 4 bytes (one channel's 4 weights) at a time, sums [N, M, P] (tag
 * int8_dot_px: its template splits P by the dot's 16 lanes) — so the requantizing epilogue reads a
 * channel's sums and writes its bytes along the pixels.
 * - 1×1 (any stride), the output's pixels whole vectors of 16: the activations u8 [N, C/4, P, 4]
 *   (the P = OH·OW output pixels' input pixels, 4 channels interleaved); the sums' index is the
 *   epilogue's fused pixel index, so it can compute them at its own tile.
 * - K×K: the activations are the padded input's stride phases one after another, u8 [N, C/4,
 *   sh·sw·Q, 4] — phase (a, b) holds the padded input's rows a, a + sh, … and columns b, b + sw, …,
 *   Hq rows of Wq = OW + (KW − 1)·dw div sw (at stride 1 one phase, the padded input itself) —, and
 *   the sums are over int8PixelGrid's grid p = oh·Wq + ow, so tap (kh, kw) reads its phase
 *   (kh·dh mod sh, kw·dw mod sw) at p + (kh·dh div sh)·Wq + (kw·dw div sw): 16 consecutive p are 64
 *   contiguous bytes, the dot's lanes loaded as they are (one read of each input byte into the
 *   phases, where a tap of a strided conv would read every sw-th pixel). The grid's columns ow ≥ OW
 *   (and its tail) are computed and never read; the sums are compacted to the output's pixels (rows
 *   of OW) for the epilogue.
 */
export const packedConvPixels = (ctx: OpComputeCtx, x: TeTensor, xzp: TeTensor | undefined, wp: TeTensor, cs: TeTensor, M: number): BlockedProduct => {
  const [N, C, H, W] = x.shape
  const [, Cb, KH, KW] = wp.shape
  const [, , OH, OW] = shapeOf(ctx.outputs[0])
  const P = OH * OW
  const win = windowOf([H, W], [KH, KW], ctx.attrs as unknown as WindowAttrs)
  const [sh, sw] = win.strides
  const [dh, dw] = win.dilations
  const taps = KH !== 1 || KW !== 1
  const uzp = activationZero(x, xzp)
  const shiftX = x.dtype === "int8" ? 128 : 0
  const u8 = (n: Expr, cb: Expr, r: Expr, ih: Expr, iw: Expr) => {
    const ch = add(mul(cb, c(DOT_DEPTH)), r)
    const inside = and(lt(ch, c(C)), and(and(ge(ih, c(0)), lt(ih, c(H))), and(ge(iw, c(0)), lt(iw, c(W)))))
    return cast("uint8", select(inside, add(i32(at(x, n, ch, ih, iw)), c(shiftX)), uzp))
  }
  const rc = reduceAxis(Cb, `${ctx.name()}.rcb`)
  const rr = reduceAxis(DOT_DEPTH, `${ctx.name()}.rr`)
  const weight = (o: Expr, kh: Expr, kw: Expr) => i32(at(wp, floordiv(o, c(DOT_LANES)), rc.var, kh, kw, floormod(o, c(DOT_LANES)), rr.var))
  if (!taps && P % DOT_LANES === 0) {
    const u = compute(ctx.name("u8"), [N, Cb, P, DOT_DEPTH], (n, cb, p, r) =>
      u8(n, cb, r, sub(mul(floordiv(p, c(OW)), c(sh)), c(win.padBegin[0])), sub(mul(floormod(p, c(OW)), c(sw)), c(win.padBegin[1]))), "uint8")
    const acc = compute(ctx.name("dot"), [N, M, P], (n, o, p) => sum(mul(i32(at(u, n, rc.var, p, rr.var)), weight(o, c(0), c(0))), [rc, rr]), I32, "int8_dot_px")
    return { sumAt: ([n, o, oh, ow]) => sub(at(acc, n, o, add(mul(oh, c(OW)), ow)), mul(uzp, at(cs, o))) }
  }
  const kw = num(ctx.attrs.dot_kw, 0)
  if (kw > 0) return pixelsAlongWidth(ctx, x, wp, cs, M, kw, uzp, shiftX)
  const grid = int8PixelGrid([OH, OW], [KH, KW], [dh, dw], [sh, sw])
  const Wq = grid.width
  const [ph, pw] = win.padBegin
  // each phase's rows: every row a tap reads, then the grid's tail past them, never read into an
  // output (its rows past the input's: x's zero point), in whole rows (the template copies the
  // input a row at a time)
  const Hq = ceilDiv(grid.size + Math.floor(((KH - 1) * dh) / sh) * Wq + Math.floor(((KW - 1) * dw) / sw), Wq)
  const Q = Hq * Wq
  // the phases the taps read: a 1×1 kernel's only phase (0, 0)
  const [rp, cp] = [KH === 1 ? 1 : sh, KW === 1 ? 1 : sw]
  const strided = sh > 1 || sw > 1
  const u = compute(ctx.name("u8"), [N, Cb, rp * cp * Q, DOT_DEPTH], (n, cb, q, r) => {
    if (!strided) return u8(n, cb, r, sub(floordiv(q, c(Wq)), c(ph)), sub(floormod(q, c(Wq)), c(pw)))
    // the phases' rows one after another: row i of phase (a, b) is the padded row i·sh + a, its column j the padded column j·sw + b
    const row = floordiv(q, c(Wq))
    if (rp * cp === 1) return u8(n, cb, r, sub(mul(row, c(sh)), c(ph)), sub(mul(floormod(q, c(Wq)), c(sw)), c(pw)))
    const phase = floordiv(row, c(Hq))
    const ih = add(mul(floormod(row, c(Hq)), c(sh)), floordiv(phase, c(cp)))
    const iw = add(mul(floormod(q, c(Wq)), c(sw)), floormod(phase, c(cp)))
    return u8(n, cb, r, sub(ih, c(ph)), sub(iw, c(pw)))
  }, "uint8")
  const rh = reduceAxis(KH, `${ctx.name()}.rkh`)
  const rw = reduceAxis(KW, `${ctx.name()}.rkw`)
  const [py, oy] = tapPhase(rh.var, dh, rp)
  const [px, ox] = tapPhase(rw.var, dw, cp)
  const offset = strided ? add(mul(add(mul(py, c(cp)), px), c(Q)), add(mul(oy, c(Wq)), ox)) : add(mul(rh.var, c(dh * Wq)), mul(rw.var, c(dw)))
  const acc = compute(ctx.name("dot"), [N, M, grid.size], (n, o, p) => {
    const a = at(u, n, rc.var, add(p, offset), rr.var)
    return sum(mul(i32(a), weight(o, rh.var, rw.var)), [rc, rh, rw, rr])
  }, I32, "int8_dot_px")
  // the sums compacted to the output's pixels (a row's OW of the grid's Wq), what the epilogue reads
  // as one run across rows (read on the grid, its rows of OW leave a scalar tail a row)
  const dense = compute(ctx.name("dotsum"), [N, M, OH, OW], (n, o, oh, ow) => at(acc, n, o, add(mul(oh, c(Wq)), ow)), I32)
  return { sumAt: ([n, o, oh, ow]) => sub(at(dense, n, o, oh, ow), mul(uzp, at(cs, o))) }
}

/**
 * packedConvPixels with the dot's 4 bytes along the kernel's width (QLinearConvPacked's `dot_kw`,
 * the weights packInt8ConvTaps's [M/16, C, kh, G = ⌈kw/4⌉, 16, 4]): the activations u8 [N, C,
 * rp·Q, 4] hold, for each channel and row phase, column j's 4 taps — byte r the padded input's
 * column j·sw + r·dw —, so a group of 4 taps is one column and group g of output column ow reads
 * column ow + g·(4·dw / sw) (the rule takes the form only where sw divides 4·dw): the grid is
 * int8PixelGrid's for a kernel of G columns at that dilation and stride 1 (in rows, the conv's own
 * stride phases as before). Taps past kw have zero weights: their bytes (any u8) add nothing.
 */
const pixelsAlongWidth = (ctx: OpComputeCtx, x: TeTensor, wp: TeTensor, cs: TeTensor, M: number, KW: number, uzp: Expr, shiftX: number): BlockedProduct => {
  const [N, C, H, W] = x.shape
  const [, , KH, G] = wp.shape
  const [, , OH, OW] = shapeOf(ctx.outputs[0])
  const win = windowOf([H, W], [KH, KW], ctx.attrs as unknown as WindowAttrs)
  const [sh, sw] = win.strides
  const [dh, dw] = win.dilations
  const [ph, pw] = win.padBegin
  const step = (DOT_DEPTH * dw) / sw
  const grid = int8PixelGrid([OH, OW], [KH, G], [dh, step], [sh, 1])
  const Wq = grid.width
  const Hq = ceilDiv(grid.size + Math.floor(((KH - 1) * dh) / sh) * Wq + (G - 1) * step, Wq)
  const Q = Hq * Wq
  const rp = KH === 1 ? 1 : sh
  const u = compute(ctx.name("u8"), [N, C, rp * Q, DOT_DEPTH], (n, ch, q, r) => {
    // row i of phase a is the padded row i·sh + a
    const row = floordiv(q, c(Wq))
    const ih = sub(rp === 1 ? mul(row, c(sh)) : add(mul(floormod(row, c(Hq)), c(sh)), floordiv(row, c(Hq))), c(ph))
    const iw = sub(add(mul(floormod(q, c(Wq)), c(sw)), mul(r, c(dw))), c(pw))
    const inside = and(and(ge(ih, c(0)), lt(ih, c(H))), and(ge(iw, c(0)), lt(iw, c(W))))
    return cast("uint8", select(inside, add(i32(at(x, n, ch, ih, iw)), c(shiftX)), uzp))
  }, "uint8")
  const rc = reduceAxis(C, `${ctx.name()}.rc`)
  const rh = reduceAxis(KH, `${ctx.name()}.rkh`)
  const rg = reduceAxis(G, `${ctx.name()}.rkg`)
  const rr = reduceAxis(DOT_DEPTH, `${ctx.name()}.rr`)
  const [py, oy] = tapPhase(rh.var, dh, rp)
  const offset = add(mul(add(mul(py, c(Hq)), oy), c(Wq)), mul(rg.var, c(step)))
  const acc = compute(ctx.name("dot"), [N, M, grid.size], (n, o, p) => {
    const a = at(u, n, rc.var, add(p, offset), rr.var)
    return sum(mul(i32(a), i32(at(wp, floordiv(o, c(DOT_LANES)), rc.var, rh.var, rg.var, floormod(o, c(DOT_LANES)), rr.var))), [rc, rh, rg, rr])
  }, I32, "int8_dot_px")
  const dense = compute(ctx.name("dotsum"), [N, M, OH, OW], (n, o, oh, ow) => at(acc, n, o, add(mul(oh, c(Wq)), ow)), I32)
  return { sumAt: ([n, o, oh, ow]) => sub(at(dense, n, o, oh, ow), mul(uzp, at(cs, o))) }
}

/** QLinearMatMul / MatMulInteger over a 2-D B, in the blocked form (B packed by a stage of the kernel); undefined where it does not apply. */
export const blockedMatmul = (ctx: OpComputeCtx, a: TeTensor, b: TeTensor, azp: TeTensor | undefined, bzpi: number): BlockedProduct | undefined => {
  if (b.shape.length !== 2 || a.shape.length < 2) return undefined
  if (azp && azp.shape.reduce((x, y) => x * y, 1) !== 1) return undefined
  const shiftW = weightShift(ctx, b, bzpi)
  if (shiftW === undefined) return undefined
  const K = a.shape[a.shape.length - 1]
  const N = b.shape[1]
  const wp = compute(ctx.name("wpack"), [ceilDiv(N, DOT_LANES), ceilDiv(K, DOT_DEPTH), DOT_LANES, DOT_DEPTH], (nb, kb, l, r) => {
    const j = add(mul(nb, c(DOT_LANES)), l)
    const k = add(mul(kb, c(DOT_DEPTH)), r)
    return cast("int8", select(and(lt(j, c(N)), lt(k, c(K))), sub(i32(at(b, k, j)), c(shiftW)), c(0)))
  }, "int8")
  return packedMatmul(ctx, a, azp, wp, columnSums(ctx, wp))
}

/**
 * The blocked product over a B packed [N/16, K/4, 16, 4] s8 `wp` and its column sums `cs`
 * (MatMulIntegerPacked's / QLinearMatMulPacked's inputs, packed at compile time, or
 * blockedMatmul's stages); A's zero point per tensor.
 */
export const packedMatmul = (ctx: OpComputeCtx, a: TeTensor, azp: TeTensor | undefined, wp: TeTensor, cs: TeTensor): BlockedProduct => {
  const lead = a.shape.slice(0, -1)
  const K = a.shape[a.shape.length - 1]
  const [Nb, Kb] = wp.shape
  const uzp = activationZero(a, azp)
  const shiftX = a.dtype === "int8" ? 128 : 0
  // (a uint8 A whose rows are whole dots is read as it is)
  const direct = shiftX === 0 && K % DOT_DEPTH === 0
  const u = direct
    ? undefined
    : compute(ctx.name("u8"), [...lead, Kb, DOT_DEPTH], (...idx) => {
        const [kb, r] = idx.slice(-2)
        const k = add(mul(kb, c(DOT_DEPTH)), r)
        return cast("uint8", select(lt(k, c(K)), add(i32(at(a, ...idx.slice(0, -2), k)), c(shiftX)), uzp))
      }, "uint8")
  const rk = reduceAxis(Kb, `${ctx.name()}.rkb`)
  const rr = reduceAxis(DOT_DEPTH, `${ctx.name()}.rr`)
  const acc = compute(ctx.name("dot"), [...lead, Nb, DOT_LANES], (...idx) => {
    const [nb, l] = idx.slice(-2)
    const rows = idx.slice(0, -2)
    const av = u ? at(u, ...rows, rk.var, rr.var) : at(a, ...rows, add(mul(rk.var, c(DOT_DEPTH)), rr.var))
    return sum(mul(i32(av), i32(at(wp, nb, rk.var, l, rr.var))), [rk, rr])
  }, I32, "int8_dot")
  return {
    sumAt: (idx) => {
      const j = idx[idx.length - 1]
      return sub(at(acc, ...idx.slice(0, -1), floordiv(j, c(DOT_LANES)), floormod(j, c(DOT_LANES))), mul(uzp, at(cs, j)))
    },
  }
}
