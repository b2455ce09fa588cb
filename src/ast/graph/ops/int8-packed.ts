// QLinearConvPacked (domain "tessera"): a QLinearConv whose constant weights rewrite.AlterLayout's
// int8 rule (src/rewrite/pack-int8.ts) re-laid at compile time in the layout AVX-512 VNNI's vpdpbusd
// reads, as MLAS and oneDNN pack them: s8 weights w' = w − w_zp (0 for int8 weights, 128 for uint8)
// in [⌈M/16⌉, ⌈C/4⌉, kh, kw, 16, 4] (zeros past M and C), and their column sums Σw' per output
// channel (int32, ⌈M/16⌉·16 of them), which the product subtracts times u's zero point. Inputs as
// QLinearConv's, with the packed weights at 3 and the column sums in place of w's zero point (5):
// x, x_scale, x_zero_point, w_packed, w_scale, colsum, y_scale, y_zero_point[, B]. Its meaning is
// QLinearConv's over the unpacked s8 weights (zero point 0), which equals the original's exactly.
import { A, attrs } from "../attrs.js"
import { check, defineOp, type AnyOpDef, type InferCtx, type KernelCtx } from "../op.js"
import { tensor, type Tensor } from "../tensor.js"
import { windowAttrs } from "./nn-common.js"
import { convOps } from "./nn-conv.js"
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

/** The s8 weights [m, c, kh, kw] of a packed [⌈m/16⌉, ⌈c/4⌉, kh, kw, 16, 4] (packInt8Conv's inverse, past its shift). */
export const unpackInt8Conv = (p: Tensor, m: number, c: number): Tensor => {
  const [, Cb, KH, KW] = p.shape
  const K = KH * KW
  const out = new Int8Array(m * c * K)
  for (let o = 0; o < m; o++)
    for (let ch = 0; ch < c; ch++)
      for (let k = 0; k < K; k++)
        out[(o * c + ch) * K + k] = Number(p.data[((((Math.floor(o / INT8_LANES) * Cb + Math.floor(ch / INT8_DEPTH)) * K + k) * INT8_LANES + (o % INT8_LANES)) * INT8_DEPTH) + (ch % INT8_DEPTH)])
  return tensor("int8", [m, c, KH, KW], out)
}

const plainQLinearConv: AnyOpDef = convOps.QLinearConv

/** The packed weights' shape checked against x's channels and m: the plain weight type it stands for. */
const plainWeight = (ctx: InferCtx<{ readonly m: number }>) => {
  const x = inputType(ctx, 0)
  const p = inputType(ctx, 3)
  check(p.dtype === "int8" && p.shape.length === 6 && p.shape.every((d) => typeof d === "number"), "input 3 must be static int8 packed weights [M/16, C/4, kh, kw, 16, 4]")
  const [Mb, Cb, KH, KW, l, r] = p.shape as number[]
  const C = x.shape[1]
  const m = ctx.attrs.m
  check(x.shape.length === 4 && typeof C === "number", "input 0 must be [N, C, H, W] with C static")
  check(l === INT8_LANES && r === INT8_DEPTH && Mb === ceilDiv(m, INT8_LANES) && Cb === ceilDiv(C as number, INT8_DEPTH), () =>
    `packed weights [${p.shape.join(", ")}] do not hold m = ${m} filters of ${C} channels`)
  return { dtype: "int8" as const, shape: [m, C as number, KH, KW] }
}

export const int8PackedOps = {
  /** QLinearConv over weights packed for the VNNI dot (2-D, group 1), with their column sums. */
  QLinearConvPacked: defineOp({
    // (pixel_lanes: 1 where the layout rewrite chose the pixels-in-lanes product for a 1×1 conv —
    // a choice of the compute's form, not of the meaning)
    attrs: attrs({ ...windowAttrs, group: A.int(1), m: A.int(), pixel_lanes: A.int(0) }),
    inputs: arity.range(8, 9),
    outputs: arity.one,
    kind: "opaque",
    infer: (ctx) => {
      check(ctx.attrs.group === 1, "group must be 1")
      const inputs = [...ctx.inputs]
      inputs[3] = plainWeight(ctx)
      inputs[5] = undefined
      return plainQLinearConv.infer({ ...ctx, inputs, values: [] } as unknown as InferCtx<unknown>)
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0, "x")
      const inputs = [...ctx.inputs]
      inputs[3] = unpackInt8Conv(req(ctx.inputs, 3, "w_packed"), ctx.attrs.m, x.shape[1])
      inputs[5] = undefined
      return plainQLinearConv.kernel({ ...ctx, inputs } as unknown as KernelCtx<unknown>)
    },
  }),
} satisfies Record<string, AnyOpDef>
