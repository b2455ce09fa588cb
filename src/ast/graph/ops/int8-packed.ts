// QLinearConvPacked (domain "tessera"): a QLinearConv whose constant weights rewrite.AlterLayout's
// int8 rule (src/rewrite/pack-int8.ts) re-laid at compile time in the layout AVX-512 VNNI's vpdpbusd
// reads, as MLAS and oneDNN pack them: s8 weights w' = w − w_zp (0 for int8 weights, 128 for uint8)
// in [⌈M/16⌉, ⌈C/4⌉, kh, kw, 16, 4] (zeros past M and C), and their column sums Σw' per output
// channel (int32, ⌈M/16⌉·16 of them), which the product subtracts times u's zero point. Inputs as
// QLinearConv's, with the packed weights at 3 and the column sums in place of w's zero point (5):
// x, x_scale, x_zero_point, w_packed, w_scale, colsum, y_scale, y_zero_point[, B[, multiplier]]
// — the last the requantizing multipliers x_scale·w_scale/y_scale per output channel where the
// scales are constants (requantMultipliers, at compile time, the value the compute would compute on
// every run). Its meaning is QLinearConv's over the unpacked s8 weights (zero point 0), which
// equals the original's exactly (the multipliers are a cache of the scales, not read by it).
import { A, attrs } from "../attrs.js"
import { check, defineOp, type AnyOpDef, type InferCtx, type KernelCtx } from "../op.js"
import { tensor, type Tensor } from "../tensor.js"
import { windowAttrs } from "./nn-common.js"
import { convOps } from "./nn-conv.js"
import { matmulOps } from "./nn-matmul.js"
import { arity, inputType, req } from "./util.js"

/** The VNNI dot: 16 int32 lanes (output channels), each the sum of 4 u8 × s8 products (input channels). */
export const INT8_LANES = 16
export const INT8_DEPTH = 4

const ceilDiv = (a: number, b: number) => Math.ceil(a / b)

/**
 * w [M, C, kh, kw] (int8 or uint8) minus `shift` (0 or 128: the zero point that makes it s8) in the
 * packed layout [⌈M/16⌉, ⌈C/4⌉, kh, kw, 16, 4], and the packed weights' column sums (int32 [⌈M/16⌉·16]).
 */
export const packInt8Conv = (w: Tensor, shift: number): { readonly packed: Tensor; readonly colsum: Tensor } => {
  const [M, C, KH, KW] = w.shape
  const Mb = ceilDiv(M, INT8_LANES)
  const Cb = ceilDiv(C, INT8_DEPTH)
  const out = new Int8Array(Mb * Cb * KH * KW * INT8_LANES * INT8_DEPTH)
  const cs = new Int32Array(Mb * INT8_LANES)
  const K = KH * KW
  for (let o = 0; o < M; o++)
    for (let ch = 0; ch < C; ch++)
      for (let k = 0; k < K; k++) {
        const v = Number(w.data[(o * C + ch) * K + k]) - shift
        const at = ((((Math.floor(o / INT8_LANES) * Cb + Math.floor(ch / INT8_DEPTH)) * K + k) * INT8_LANES + (o % INT8_LANES)) * INT8_DEPTH) + (ch % INT8_DEPTH)
        out[at] = v
        cs[o] += v
      }
  return { packed: tensor("int8", [Mb, Cb, KH, KW, INT8_LANES, INT8_DEPTH], out), colsum: tensor("int32", [Mb * INT8_LANES], cs) }
}

/**
 * w [M, C, kh, kw] minus `shift` packed with the dot's 4 bytes along the kernel's width instead of
 * its channels (QLinearConvPacked's `dot_kw`): [⌈M/16⌉, C, kh, ⌈kw/4⌉, 16, 4], byte r of group g
 * tap 4·g + r (zeros past kw and M), and the column sums — for a conv of few channels, where the
 * channels' 4 bytes would carry zeros (3 channels: a fourth of every dot). Its column sums equal
 * packInt8Conv's (the same weights, other zeros).
 */
export const packInt8ConvTaps = (w: Tensor, shift: number): { readonly packed: Tensor; readonly colsum: Tensor } => {
  const [M, C, KH, KW] = w.shape
  const Mb = ceilDiv(M, INT8_LANES)
  const G = ceilDiv(KW, INT8_DEPTH)
  const out = new Int8Array(Mb * C * KH * G * INT8_LANES * INT8_DEPTH)
  const cs = new Int32Array(Mb * INT8_LANES)
  for (let o = 0; o < M; o++)
    for (let ch = 0; ch < C; ch++)
      for (let kh = 0; kh < KH; kh++)
        for (let kw = 0; kw < KW; kw++) {
          const v = Number(w.data[((o * C + ch) * KH + kh) * KW + kw]) - shift
          out[tapsIndex(o, ch, kh, kw, C, KH, G)] = v
          cs[o] += v
        }
  return { packed: tensor("int8", [Mb, C, KH, G, INT8_LANES, INT8_DEPTH], out), colsum: tensor("int32", [Mb * INT8_LANES], cs) }
}

/** Where weight (o, ch, kh, kw) lies in packInt8ConvTaps's layout [⌈M/16⌉, C, kh, G, 16, 4]. */
const tapsIndex = (o: number, ch: number, kh: number, kw: number, C: number, KH: number, G: number): number =>
  (((((Math.floor(o / INT8_LANES) * C + ch) * KH + kh) * G + Math.floor(kw / INT8_DEPTH)) * INT8_LANES + (o % INT8_LANES)) * INT8_DEPTH) + (kw % INT8_DEPTH)

/**
 * Whether a pixels-in-lanes conv (int8PixelLanes) takes its dot's 4 bytes along the kernel's width
 * (packInt8ConvTaps) rather than its channels: where that takes fewer dots a pixel — C·kh·⌈kw/4⌉
 * against ⌈C/4⌉·kh·kw, a 7×7 stem over 3 channels 42 against 49, a 3×3 one 9 against 9: not
 * taken — and a group's 4 taps are whole columns of the width-strided copy the product reads (4·dw
 * a multiple of sw: the next group's taps then start 4·dw / sw columns on).
 */
export const int8DotAlongWidth = (channels: number, kernel: readonly [number, number], dilation: number, stride: number): boolean => {
  const [KH, KW] = kernel
  return KW > 1 && (INT8_DEPTH * dilation) % stride === 0 && channels * KH * ceilDiv(KW, INT8_DEPTH) < ceilDiv(channels, INT8_DEPTH) * KH * KW
}

/**
 * The requantizing multipliers x_scale·w_scale[o]/y_scale of `m` output channels (a b_scale's
 * columns), each step rounded in the scales' type as QLinear*'s compute rounds it
 * (op-library-quant-int.ts's multiplier: float32 — the product rounded, then the quotient —, or
 * float64), computed once at compile time from constant scales: x's and y's scalars, w's a scalar
 * or `m` values. Undefined where the compute would not fold them (scales of other or differing
 * types, other shapes): it then computes them itself.
 */
export const requantMultipliers = (xs: Tensor, ws: Tensor, ys: Tensor, m: number): Tensor | undefined => {
  const dt = xs.dtype
  if ((dt !== "float32" && dt !== "float64") || ws.dtype !== dt || ys.dtype !== dt) return undefined
  if (xs.data.length !== 1 || ys.data.length !== 1 || (ws.data.length !== 1 && (ws.shape.length !== 1 || ws.shape[0] !== m))) return undefined
  const [x, y] = [Number(xs.data[0]), Number(ys.data[0])]
  const at = (o: number) => Number(ws.data[ws.data.length === 1 ? 0 : o])
  if (dt === "float64") return tensor("float64", [m], Float64Array.from({ length: m }, (_, o) => (x * at(o)) / y))
  return tensor("float32", [m], Float32Array.from({ length: m }, (_, o) => Math.fround(Math.fround(x * at(o)) / y)))
}

/** A folded multiplier input's type checked: the scales' type, [m] (`k` its input index). */
const checkMultiplier = (ctx: InferCtx<unknown>, k: number, scale: number, m: number): void => {
  const t = ctx.inputs[k]
  if (!t) return
  const s = inputType(ctx, scale)
  check(t.dtype === s.dtype && t.shape.length === 1 && t.shape[0] === m, () => `input ${k} (the multipliers) must be ${s.dtype} [${m}], not ${t.dtype} [${t.shape.join(", ")}]`)
}

/**
 * A grouped conv's weights w [M, C/group, kh, kw] (int8 or uint8) minus their zero point (absent:
 * 0; one, or one per output channel) widened to int16, as the depthwise compute reads them
 * (op-library-int8-depthwise.ts: |w − w_zp| ≤ 255).
 */
export const widenInt8Weights = (w: Tensor, zp: Tensor | undefined): Tensor => {
  const per = w.data.length / w.shape[0]
  const z = (o: number) => (zp ? Number(zp.data[zp.data.length === 1 ? 0 : o]) : 0)
  return tensor("int16", w.shape, Int16Array.from({ length: w.data.length }, (_, k) => Number(w.data[k]) - z(Math.floor(k / per))))
}

/**
 * A depthwise conv's widened weights w16 [M, 1, kh, kw] (widenInt8Weights) as the VNNI dot's 4-deep
 * operand with a kernel row's taps in its depth (op-library-int8-depthwise.ts's depthwiseWindow):
 * s8 [M, kh, 4], taps past kw 0, and their sums per filter (int32 [M], what the product subtracts
 * times u's zero point). Undefined where that form does not hold them: more than one input channel
 * a group, a row of more than 4 taps, or a weight outside s8 (a zero point that is not the
 * weights' shift).
 */
export const packDepthwiseTaps = (w16: Tensor): { readonly taps: Tensor; readonly tapsum: Tensor } | undefined => {
  const [M, Cg, KH, KW] = w16.shape
  if (w16.shape.length !== 4 || Cg !== 1 || KW > INT8_DEPTH) return undefined
  const taps = new Int8Array(M * KH * INT8_DEPTH)
  const sums = new Int32Array(M)
  for (let o = 0; o < M; o++)
    for (let kh = 0; kh < KH; kh++)
      for (let kw = 0; kw < KW; kw++) {
        const v = Number(w16.data[(o * KH + kh) * KW + kw])
        if (v < -128 || v > 127) return undefined
        taps[(o * KH + kh) * INT8_DEPTH + kw] = v
        sums[o] += v
      }
  return { taps: tensor("int8", [M, KH, INT8_DEPTH], taps), tapsum: tensor("int32", [M], sums) }
}

/** The bytes of a vector loop (the schedule's MAX_VECTORIZED lanes): a strided rows form's plane row at most this (depthwiseWindowGrid). */
const ROW_LOOP = 4 * INT8_LANES

/** The most pixels a depthwise conv's VNNI window grid rounded up to whole vectors may have (depthwiseWindowGrid): 4 vector loops of 64. */
export const DOT_ROOT_GRID = 4 * 4 * INT8_LANES

/**
 * The grid of a depthwise conv's VNNI form (op-library-int8-depthwise.ts's depthwiseWindow): p =
 * oh·width + ow over rows of `width` output columns (at least the padded row a row of output reads,
 * ⌈((OW − 1)·sw + (KW − 1)·dw + 1) / sw⌉, so the taps of 16 consecutive p are one run of the padded
 * row). `rows`: where the output's rows are at least a vector of 16, the least multiple of 16
 * that holds the padded row adds at most a third of OW, and (stride 1) the rows' tail past whole
 * vectors is at most a quarter of OW or (strided) a plane row is one vector loop (112² and 56² under
 * 3×3: 128 and 64; 56² → 28²: 32), that width, the sums [oh, width / 16, 16] read by the epilogue where they are (size OH · width); else
 * the least width within 16 for which the pixels the output reads, (OH − 1)·width + OW, are whole
 * vectors of 16 — the product then computed a channel at a time over exactly them, and compacted —
 * where it adds at most a third of OW;
 * else, for rows wider than half a vector and at most DOT_ROOT_GRID pixels, the least width with
 * the pixels rounded up to whole vectors (14²: 224, the product at root); undefined otherwise, or
 * where the window gather does not take the row (a row of more than 4 taps; 3·(sw + dw) ≥ 16).
 */
export const depthwiseWindowGrid = (
  out: readonly [number, number],
  kernel: readonly [number, number],
  dilations: readonly [number, number],
  strides: readonly [number, number],
): { readonly width: number; readonly size: number; readonly rows: boolean } | undefined => {
  const [OH, OW] = out
  const [sw, dw, KW] = [strides[1], dilations[1], kernel[1]]
  if (KW > INT8_DEPTH || 3 * (sw + dw) >= 16) return undefined
  const least = Math.ceil(((OW - 1) * sw + (KW - 1) * dw + 1) / sw)
  // rows of whole vectors (the output's rows at least a vector, the width the least multiple of 16
  // that holds the padded row, adding at most a third of OW): the sums [oh, width / 16, 16] read by
  // the epilogue where they are, a row's columns its vector loop, no compaction. At stride 1 where
  // that loop's tail (OW mod 16) is at most a quarter of the row (112², 56² under 3×3: rows of 128,
  // 64; at 28², 12 of 28 left to the narrower vectors, the int16 grid's fused pixels were faster:
  // 0.053 against 0.069 ms); strided (the plane's rows sw·width bytes in sh row phases) where a
  // plane row is one vector loop, ROW_LOOP bytes (56² → 28²: rows of 32, 0.093 → 0.060 ms against
  // the int16 phases; 112² → 56², rows of 2 · 64 split in two loops with a guarded tail: 0.19 → 0.58)
  const wide = ceilDiv(least, INT8_LANES) * INT8_LANES
  const rowsFit = strides[0] === 1 && sw === 1 ? (OW % INT8_LANES) * 4 <= OW : sw * wide <= ROW_LOOP
  if (OW >= INT8_LANES && (wide - OW) * 3 <= OW && rowsFit) return { width: wide, size: OH * wide, rows: true }
  // (the grid: strided, the phase rows' copy ran scalar — gcc left its edge rows' guarded loads
  // unvectorized, the 112² → 56² conv 0.19 → 0.7 ms)
  if (strides[0] !== 1 || sw !== 1) return undefined
  for (let w = least; w < least + 16; w++) if (((OH - 1) * w + OW) % INT8_LANES === 0 && (w - OW) * 3 <= OW) return { width: w, size: (OH - 1) * w + OW, rows: false }
  // (else a small plane, 14² under 3×3: the least width, the pixels rounded up to whole vectors,
  // 222 → 224; the product then at root, its region at a channel being the compaction's cut —
  // not rows of at most half a vector, the channels-in-lanes form's (7²: 0.038 against 0.045 ms),
  // nor a grid past 4 vector loops of 64 (28²'s 848 at root: 0.045 → 0.049 ms))
  const size = ceilDiv((OH - 1) * least + OW, INT8_LANES) * INT8_LANES
  return 2 * OW > INT8_LANES && size <= DOT_ROOT_GRID && (size - OH * OW) * 3 <= OH * OW ? { width: least, size, rows: false } : undefined
}

/** The widest pixel tile of the pixels-in-lanes product, in vectors of 16 (the grid is rounded up to whole tiles of it where that is cheap). */
export const INT8_GRID_TILE = 4

/**
 * The grid a K×K conv's pixels-in-lanes product computes its sums over (op-library-int8-blocked.ts's
 * packedConvPixels): p = oh·width + ow over the width of the padded input's stride phases (OW + the
 * taps' reach in phase columns, (KW − 1)·dw div sw; at stride 1 the padded input itself), so tap
 * (kh, kw) reads its phase (kh·dh mod sh, kw·dw mod sw) at p + (kh·dh div sh)·width + (kw·dw div
 * sw), one run across rows; the last row cut at OW, then rounded up to whole vectors of 16 — to whole
 * tiles of 4 or 2 vectors where that adds at most a sixteenth (56² under 3×3: 3246 → 3264, 51 tiles
 * of 4; 28²: 838 → 864). The columns ow ≥ OW are computed and never read.
 */
export const int8PixelGrid = (
  out: readonly [number, number],
  kernel: readonly [number, number],
  dilations: readonly [number, number],
  strides: readonly [number, number] = [1, 1],
): { readonly width: number; readonly size: number } => {
  const [OH, OW] = out
  const width = OW + Math.floor(((kernel[1] - 1) * dilations[1]) / strides[1])
  const cut = (OH - 1) * width + OW
  for (let k = INT8_GRID_TILE; k >= 1; k = Math.floor(k / 2)) {
    const size = ceilDiv(cut, INT8_LANES * k) * INT8_LANES * k
    if (k === 1 || (size - cut) * 16 <= cut) return { width, size }
  }
  return { width, size: ceilDiv(cut, INT8_LANES) * INT8_LANES }
}

/** The s8 weights [m, c, kh, kw] of a packed [⌈m/16⌉, ⌈c/4⌉, kh, kw, 16, 4] (packInt8Conv's inverse, past its shift), or with `kw` of packInt8ConvTaps's [⌈m/16⌉, c, kh, ⌈kw/4⌉, 16, 4]. */
export const unpackInt8Conv = (p: Tensor, m: number, c: number, kw = 0): Tensor => {
  const [, Cb, KH, KW] = p.shape
  if (kw > 0) {
    const out = new Int8Array(m * c * KH * kw)
    for (let o = 0; o < m; o++)
      for (let ch = 0; ch < c; ch++)
        for (let kh = 0; kh < KH; kh++)
          for (let t = 0; t < kw; t++) out[((o * c + ch) * KH + kh) * kw + t] = Number(p.data[tapsIndex(o, ch, kh, t, c, KH, KW)])
    return tensor("int8", [m, c, KH, kw], out)
  }
  const K = KH * KW
  const out = new Int8Array(m * c * K)
  for (let o = 0; o < m; o++)
    for (let ch = 0; ch < c; ch++)
      for (let k = 0; k < K; k++)
        out[(o * c + ch) * K + k] = Number(p.data[((((Math.floor(o / INT8_LANES) * Cb + Math.floor(ch / INT8_DEPTH)) * K + k) * INT8_LANES + (o % INT8_LANES)) * INT8_DEPTH) + (ch % INT8_DEPTH)])
  return tensor("int8", [m, c, KH, KW], out)
}

/**
 * A constant B [K, N] (int8 or uint8) minus `shift` (0 or 128) packed for the dot as a conv's
 * weights are, B's columns as the output channels: [⌈N/16⌉, ⌈K/4⌉, 16, 4] (zeros past N and K),
 * and its column sums (int32 [⌈N/16⌉·16]).
 */
export const packInt8Matmul = (b: Tensor, shift: number): { readonly packed: Tensor; readonly colsum: Tensor } => {
  const [K, N] = b.shape
  const Nb = ceilDiv(N, INT8_LANES)
  const Kb = ceilDiv(K, INT8_DEPTH)
  const out = new Int8Array(Nb * Kb * INT8_LANES * INT8_DEPTH)
  const cs = new Int32Array(Nb * INT8_LANES)
  for (let k = 0; k < K; k++)
    for (let j = 0; j < N; j++) {
      const v = Number(b.data[k * N + j]) - shift
      out[((Math.floor(j / INT8_LANES) * Kb + Math.floor(k / INT8_DEPTH)) * INT8_LANES + (j % INT8_LANES)) * INT8_DEPTH + (k % INT8_DEPTH)] = v
      cs[j] += v
    }
  return { packed: tensor("int8", [Nb, Kb, INT8_LANES, INT8_DEPTH], out), colsum: tensor("int32", [Nb * INT8_LANES], cs) }
}

/** The s8 B [k, n] of a packed [⌈n/16⌉, ⌈k/4⌉, 16, 4] (packInt8Matmul's inverse, past its shift). */
export const unpackInt8Matmul = (p: Tensor, k: number, n: number): Tensor => {
  const Kb = p.shape[1]
  const out = new Int8Array(k * n)
  for (let r = 0; r < k; r++)
    for (let j = 0; j < n; j++)
      out[r * n + j] = Number(p.data[((Math.floor(j / INT8_LANES) * Kb + Math.floor(r / INT8_DEPTH)) * INT8_LANES + (j % INT8_LANES)) * INT8_DEPTH + (r % INT8_DEPTH)])
  return tensor("int8", [k, n], out)
}

/** A packed B's shape checked against A's last dim K and n: the plain B type it stands for (int8 [K, n]). */
const plainB = (ctx: InferCtx<{ readonly n: number }>, bi: number) => {
  const a = inputType(ctx, 0)
  const p = inputType(ctx, bi)
  const K = a.shape[a.shape.length - 1]
  check(a.shape.length >= 2 && typeof K === "number", "input 0 must be [..., M, K] with K static")
  check(p.dtype === "int8" && p.shape.length === 4 && p.shape.every((d) => typeof d === "number"), `input ${bi} must be static int8 packed B [N/16, K/4, 16, 4]`)
  const [Nb, Kb, l, r] = p.shape as number[]
  const n = ctx.attrs.n
  check(l === INT8_LANES && r === INT8_DEPTH && Nb === ceilDiv(n, INT8_LANES) && Kb === ceilDiv(K as number, INT8_DEPTH), () =>
    `packed B [${p.shape.join(", ")}] does not hold n = ${n} columns of ${K} rows`)
  return { dtype: "int8" as const, shape: [K as number, n] }
}

const plainQLinearConv: AnyOpDef = convOps.QLinearConv
const plainMatMulInteger: AnyOpDef = matmulOps.MatMulInteger
const plainQLinearMatMul: AnyOpDef = matmulOps.QLinearMatMul
const ZERO_S8 = tensor("int8", [], Int8Array.of(0))

/** The packed weights' shape checked against x's channels and m: the plain weight type it stands for. */
const plainWeight = (ctx: InferCtx<{ readonly m: number; readonly dot_kw: number }>) => {
  const x = inputType(ctx, 0)
  const p = inputType(ctx, 3)
  check(p.dtype === "int8" && p.shape.length === 6 && p.shape.every((d) => typeof d === "number"), "input 3 must be static int8 packed weights [M/16, C/4, kh, kw, 16, 4]")
  const [Mb, Cb, KH, KW, l, r] = p.shape as number[]
  const C = x.shape[1]
  const m = ctx.attrs.m
  const kw = ctx.attrs.dot_kw
  check(x.shape.length === 4 && typeof C === "number", "input 0 must be [N, C, H, W] with C static")
  check(l === INT8_LANES && r === INT8_DEPTH && Mb === ceilDiv(m, INT8_LANES) && (kw > 0 ? Cb === C && KW === ceilDiv(kw, INT8_DEPTH) : Cb === ceilDiv(C as number, INT8_DEPTH)), () =>
    `packed weights [${p.shape.join(", ")}] do not hold m = ${m} filters of ${C} channels${kw > 0 ? ` and ${kw} taps a row` : ""}`)
  return { dtype: "int8" as const, shape: [m, C as number, KH, kw > 0 ? kw : KW] }
}

export const int8PackedOps = {
  /** QLinearConv over weights packed for the VNNI dot (2-D, group 1), with their column sums. */
  QLinearConvPacked: defineOp({
    // (pixel_lanes: 1 where the layout rewrite chose the pixels-in-lanes product for a 1×1 conv —
    // a choice of the compute's form, not of the meaning)
    // (dot_kw: the kernel's width where the layout rewrite packed the dot's 4 bytes along it,
    // packInt8ConvTaps — with pixel_lanes; 0: along the channels)
    // (channel_lanes L > 0: the channels-in-lanes product's requantized values in blocks of L
    // channels, [n, M / L, oh, ow, L], before their narrowing to NCHW — int8EpilogueLanes)
    attrs: attrs({ ...windowAttrs, group: A.int(1), m: A.int(), pixel_lanes: A.int(0), dot_kw: A.int(0), channel_lanes: A.int(0) }),
    inputs: arity.range(8, 10),
    outputs: arity.one,
    kind: "opaque",
    infer: (ctx) => {
      check(ctx.attrs.group === 1, "group must be 1")
      const L = ctx.attrs.channel_lanes
      check(L === 0 || (L > 0 && ctx.attrs.m % L === 0 && ctx.attrs.pixel_lanes === 0), () => `channel_lanes ${L} must be 0, or divide m = ${ctx.attrs.m} without pixel_lanes`)
      checkMultiplier(ctx as InferCtx<unknown>, 9, 4, ctx.attrs.m)
      const inputs = ctx.inputs.slice(0, 9)
      inputs[3] = plainWeight(ctx)
      inputs[5] = undefined
      return plainQLinearConv.infer({ ...ctx, inputs, values: [] } as unknown as InferCtx<unknown>)
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0, "x")
      const inputs = ctx.inputs.slice(0, 9)
      inputs[3] = unpackInt8Conv(req(ctx.inputs, 3, "w_packed"), ctx.attrs.m, x.shape[1], ctx.attrs.dot_kw)
      inputs[5] = undefined
      return plainQLinearConv.kernel({ ...ctx, inputs } as unknown as KernelCtx<unknown>)
    },
  }),
  /**
   * A grouped (depthwise) QLinearConv over constant weights, as rewrite.AlterLayout's int8 rule
   * leaves one: QLinearConv's inputs (0–8: its meaning, read from them alone), then the
   * requantizing multipliers (9: requantMultipliers; "" where the scales are not constants) and the
   * weights minus their zero point widened to int16 (10: widenInt8Weights), which the compute reads
   * instead of computing them on every run; where the layout rewrite chose the VNNI form of a
   * depthwise conv, the weights with a kernel row's taps in the dot's depth (11: s8 [M, kh, 4],
   * packDepthwiseTaps) and their sums (12: int32 [M]) — a choice of the compute's form, not of the
   * meaning. `channel_lanes` L > 0: the layout rewrite chose the form with blocks of L channels in
   * the vector lanes (a depthwise conv whose output rows are narrower than the target's vector:
   * pack-int8.ts's int8DepthwiseChannels) — a choice of the form too.
   */
  QLinearConvGrouped: defineOp({
    attrs: attrs({ ...windowAttrs, group: A.int(1), channel_lanes: A.int(0) }),
    inputs: arity.range(11, 13),
    outputs: arity.one,
    kind: "opaque",
    infer: (ctx) => {
      const w = inputType(ctx, 3)
      const w16 = inputType(ctx, 10)
      check(w16.dtype === "int16" && w16.shape.join(",") === w.shape.join(","), () => `input 10 (the widened weights) must be int16 [${w.shape.join(", ")}]`)
      checkMultiplier(ctx as InferCtx<unknown>, 9, 4, w.shape[0] as number)
      if (ctx.inputs[11] || ctx.inputs[12]) {
        const [taps, sums] = [inputType(ctx, 11), inputType(ctx, 12)]
        check(taps.dtype === "int8" && taps.shape.join(",") === [w.shape[0], w.shape[2], INT8_DEPTH].join(",") && sums.dtype === "int32" && sums.shape.join(",") === String(w.shape[0]), () =>
          `inputs 11 and 12 (the taps' weights and sums) must be int8 [${w.shape[0]}, ${w.shape[2]}, ${INT8_DEPTH}] and int32 [${w.shape[0]}]`)
      }
      return plainQLinearConv.infer({ ...ctx, inputs: ctx.inputs.slice(0, 9), values: [] } as unknown as InferCtx<unknown>)
    },
    kernel: (ctx) => plainQLinearConv.kernel({ ...ctx, inputs: ctx.inputs.slice(0, 9) } as unknown as KernelCtx<unknown>),
  }),
  /**
   * MatMulInteger over a constant B packed for the dot (rewrite.AlterLayout's int8 rule): inputs
   * A, B packed, a_zero_point (per tensor, or absent), B's column sums; n: B's columns. Its
   * meaning is MatMulInteger's over the unpacked s8 B (zero point 0), the original's exactly.
   */
  MatMulIntegerPacked: defineOp({
    attrs: attrs({ n: A.int() }),
    inputs: arity.range(4, 4),
    outputs: arity.one,
    kind: "opaque",
    infer: (ctx) => {
      const inputs = [ctx.inputs[0], plainB(ctx, 1), ctx.inputs[2]]
      return plainMatMulInteger.infer({ ...ctx, inputs, values: [] } as unknown as InferCtx<unknown>)
    },
    kernel: (ctx) => {
      const a = req(ctx.inputs, 0, "A")
      const inputs = [a, unpackInt8Matmul(req(ctx.inputs, 1, "B_packed"), a.shape[a.shape.length - 1], ctx.attrs.n), ctx.inputs[2]]
      return plainMatMulInteger.kernel({ ...ctx, inputs } as unknown as KernelCtx<unknown>)
    },
  }),
  /**
   * QLinearMatMul over a constant B packed for the dot: QLinearMatMul's inputs with B packed at 3
   * and its column sums in b_zero_point's place (5), and where the scales are constants the
   * requantizing multipliers per column (8: requantMultipliers); n: B's columns.
   */
  QLinearMatMulPacked: defineOp({
    attrs: attrs({ n: A.int() }),
    inputs: arity.range(8, 9),
    outputs: arity.one,
    kind: "opaque",
    infer: (ctx) => {
      checkMultiplier(ctx as InferCtx<unknown>, 8, 4, ctx.attrs.n)
      const inputs = ctx.inputs.slice(0, 8)
      inputs[3] = plainB(ctx, 3)
      inputs[5] = { dtype: "int8", shape: [] }
      return plainQLinearMatMul.infer({ ...ctx, inputs, values: [] } as unknown as InferCtx<unknown>)
    },
    kernel: (ctx) => {
      const a = req(ctx.inputs, 0, "a")
      const inputs = ctx.inputs.slice(0, 8)
      inputs[3] = unpackInt8Matmul(req(ctx.inputs, 3, "b_packed"), a.shape[a.shape.length - 1], ctx.attrs.n)
      inputs[5] = ZERO_S8
      return plainQLinearMatMul.kernel({ ...ctx, inputs } as unknown as KernelCtx<unknown>)
    },
  }),
} satisfies Record<string, AnyOpDef>
