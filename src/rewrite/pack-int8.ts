// The layout rewrite of an int8 convolution's constant weights, a rule of rewrite.AlterLayout (as
// pack-dense.ts is for float products): a QLinearConv the blocked VNNI form computes (2-D, group 1,
// x's zero point per tensor, w's zero point the one that makes w − w_zp an s8 value: 0 for int8
// weights, 128 for uint8, every channel alike) over constant weights becomes QLinearConvPacked, its
// weights packed [⌈M/16⌉, ⌈C/4⌉, kh, kw, 16, 4] and their column sums computed here, once, instead
// of by a stage of the kernel on every run (O(weights): ResNet-18's 11 M weights, twice), and
// where the scales are constants its requantizing multipliers (one per output channel: else a
// stage, a parallel region, of every run — 53 of MobileNetV2's).
import { attr } from "../ast/graph/attrs.js"
import { resolveNode } from "../ast/graph/evaluate.js"
import type { Node } from "../ast/graph/graph.js"
import type { ValueType } from "../ast/graph/op.js"
import { depthwiseWindowGrid, INT8_DEPTH, INT8_LANES, int8DotAlongWidth, int8PixelGrid, packDepthwiseTaps, packInt8Conv, packInt8ConvTaps, packInt8Matmul, requantMultipliers, widenInt8Weights } from "../ast/graph/ops/int8-packed.js"
import { TESSERA_DOMAIN } from "../ast/graph/ops/index.js"
import type { Tensor } from "../ast/graph/tensor.js"
import type { Rule, RuleCtx } from "./rules.js"

/**
 * QLinearConv's / QLinearMatMul's multipliers x_scale·w_scale/y_scale per output channel (column)
 * from constant scales (inputs 1, 4, 6), as a constant named after the node; none where a scale is
 * not constant or requantMultipliers declines (the compute then computes them on every run).
 */
const foldedMultipliers = (n: Node, ctx: RuleCtx, m: number): { readonly name: string; readonly value: Tensor } | undefined => {
  const [xs, ws, ys] = [1, 4, 6].map((k) => (n.inputs[k] ? ctx.constant(n.inputs[k]) : undefined))
  const value = xs && ws && ys ? requantMultipliers(xs, ws, ys, m) : undefined
  return value && { name: ctx.fresh(`${n.outputs[0]}_mult`), value }
}

/** The shift that makes a QLinearConv's constant weights s8 (0 or 128), where the rule applies; undefined where it does not. */
export const int8PackShift = (n: Node, type: (v: string) => ValueType | undefined, constant: (v: string) => Tensor | undefined): number | undefined => {
  if (n.op !== "QLinearConv" || n.domain !== "") return undefined
  const a = resolveNode(n).attrs as { group: number }
  if (a.group !== 1) return undefined
  const x = type(n.inputs[0])
  const w = constant(n.inputs[3])
  if (!x || !w || x.shape.length !== 4 || typeof x.shape[1] !== "number" || w.shape.length !== 4) return undefined
  const xzp = n.inputs[2] ? type(n.inputs[2]) : undefined
  if (xzp && !xzp.shape.every((d) => d === 1)) return undefined
  const shift = w.dtype === "int8" ? 0 : w.dtype === "uint8" ? 128 : undefined
  if (shift === undefined) return undefined
  if (!n.inputs[5]) return shift === 0 ? 0 : undefined
  const zp = constant(n.inputs[5])
  return zp && Array.from(zp.data as ArrayLike<number>).every((z) => Number(z) === shift) ? shift : undefined
}

/** What the int8 rule reads of the target record: the 8-bit dot its emitter renders, and its vectors' 32-bit lanes. */
export interface Int8LayoutTarget {
  readonly int8Dot?: "vnni" | "avx2" | "simd128"
  readonly vectorLanes?: number
}

/** A conv's window as the int8 rule reads it: kernel, strides and dilations (2-D), and its output's rows × columns. */
export interface Int8ConvWindow {
  readonly kernel: readonly [number, number]
  readonly strides: readonly [number, number]
  readonly dilations: readonly [number, number]
  readonly out: readonly [number, number]
}

/**
 * Whether a packed conv computes with the output's pixels in the dot's 16 lanes (one channel's
 * sums over 16 consecutive pixels: the requantizing epilogue reads and stores them contiguously)
 * instead of its channels (16 channels a pixel: the epilogue's byte stores a channel plane apart,
 * OH·OW bytes, after a round trip of the sums in the transposing order), on a target whose dot has
 * the lanes-from-memory form (VNNI: vpdpbusd with the activations as the vector operand and the
 * weights broadcast):
 * - a 1×1 kernel (the product is then a GEMM over pixels: MLAS's and oneDNN's form) where the
 *   output's pixels are whole vectors of 16 (112², 56², 28²; not 14² or 7²);
 * - a K×K kernel (its taps shifted runs of the padded rows, or of their stride phases' rows:
 *   int8PixelGrid) where the output's rows are at least a vector of the target (the epilogue's
 *   rows, OW sums and bytes: a narrower row is a scalar loop) and the grid's extra columns add at
 *   most an eighth (56² and 28² under 3×3 on AVX-512: 4% and 10%; a 3×3 / 2 stem at 112²: 1%; not
 *   14² or 7², which keep the channels in the lanes).
 */
export const int8PixelLanes = (w: Int8ConvWindow, target: Int8LayoutTarget): boolean => {
  if (target.int8Dot !== "vnni") return false
  const [OH, OW] = w.out
  if (w.kernel.every((k) => k === 1)) return (OH * OW) % INT8_LANES === 0
  if (OW < (target.vectorLanes ?? INT8_LANES)) return false
  return (int8PixelGrid(w.out, w.kernel, w.dilations, w.strides).size - OH * OW) * 8 <= OH * OW
}

/**
 * The channel block of a channels-in-lanes packed conv's requantized values (QLinearConvPacked's
 * `channel_lanes`), or 0 for none: the dot's 16 lanes where the target's dot is VNNI with vectors of
 * 16 (AVX-512: the C compiler's interleaved loads of 16 int32 values take the block apart with
 * permutes) and the output channels are whole blocks, not the pixels-in-lanes form. The sums' blocks
 * [n, M / 16, oh, ow, 16] are then requantized 16 channels a vector into an int32 block of the same
 * order, and narrowed with a channel's pixels the vector loop, the block's 16 channels unrolled:
 * each channel's bytes stored contiguously, where the NCHW order's requantization stored one byte
 * a channel plane apart, 16 a pixel (MobileNetV2 int8's 64 → 384 14² conv alone, 0.048 → 0.029 ms).
 */
export const int8EpilogueLanes = (target: Int8LayoutTarget, m: number, pixelLanes: boolean): number =>
  target.int8Dot === "vnni" && target.vectorLanes === INT8_LANES && !pixelLanes && m % INT8_LANES === 0 ? INT8_LANES : 0

/** QLinearConv over constant weights → QLinearConvPacked over them packed for the VNNI dot, with their column sums (and the pixels-in-lanes form where `int8PixelLanes` says). */
export const int8ConvToPackedFor = (target: Int8LayoutTarget): Rule => ({
  name: "int8-conv-to-packed",
  apply: (n, ctx) => {
    const shift = int8PackShift(n, ctx.type, ctx.constant)
    if (shift === undefined) return undefined
    const w = ctx.constant(n.inputs[3])!
    const out = ctx.type(n.outputs[0])
    const a = resolveNode(n).attrs as { strides?: readonly number[]; dilations?: readonly number[] }
    const known = out && out.shape.length === 4 && out.shape.every((d) => typeof d === "number")
    const win = (d: readonly number[]) => [d[0] ?? 1, d[1] ?? 1] as const
    const [kernel, strides, dilations] = [win(w.shape.slice(2)), win(a.strides ?? []), win(a.dilations ?? [])]
    const px = known && int8PixelLanes({ kernel, strides, dilations, out: win(out.shape.slice(2) as number[]) }, target)
    // (a pixels-in-lanes conv of few channels: the dot's 4 bytes along the kernel's width where that takes fewer dots)
    const taps = px && int8DotAlongWidth(w.shape[1], kernel, dilations[1], strides[1])
    const { packed, colsum } = taps ? packInt8ConvTaps(w, shift) : packInt8Conv(w, shift)
    const wName = ctx.fresh(`${n.inputs[3]}_vnni`)
    const csName = ctx.fresh(`${n.inputs[3]}_colsum`)
    const y = ctx.fresh(`${n.outputs[0]}_packed`)
    const inputs = [...n.inputs]
    inputs[3] = wName
    inputs[5] = csName
    const mult = foldedMultipliers(n, ctx, w.shape[0])
    if (mult) inputs.splice(8, inputs.length - 8, n.inputs[8] ?? "", mult.name)
    const lanes = int8EpilogueLanes(target, w.shape[0], px === true)
    const form = { ...(px ? { pixel_lanes: attr.int(1) } : {}), ...(taps ? { dot_kw: attr.int(kernel[1]) } : {}), ...(lanes > 0 ? { channel_lanes: attr.int(lanes) } : {}) }
    return {
      nodes: [{ name: ctx.fresh(`${n.name}_packed`), op: "QLinearConvPacked", domain: TESSERA_DOMAIN, inputs, outputs: [y], attrs: { ...n.attrs, m: attr.int(w.shape[0]), ...form } }],
      outputs: [y],
      constants: new Map([[wName, packed], [csName, colsum], ...(mult ? [[mult.name, mult.value] as const] : [])]),
    }
  },
})

/** The rule on a target without a dot of its own (channels in the lanes everywhere). */
export const int8ConvToPacked: Rule = int8ConvToPackedFor({})

/**
 * The shift that makes a MatMulInteger's / QLinearMatMul's constant B s8 (0 for int8, 128 for
 * uint8; its zero point absent — MatMulInteger, int8 — or every value that shift), where A's zero
 * point is per tensor and B is 2-D; undefined where the rule does not apply.
 */
export const int8MatmulPackShift = (n: Node, type: (v: string) => ValueType | undefined, constant: (v: string) => Tensor | undefined): number | undefined => {
  if (n.domain !== "" || (n.op !== "MatMulInteger" && n.op !== "QLinearMatMul")) return undefined
  const [bi, bzpi] = n.op === "MatMulInteger" ? [1, 3] : [3, 5]
  const a = type(n.inputs[0])
  const b = n.inputs[bi] ? constant(n.inputs[bi]) : undefined
  if (!a || a.shape.length < 2 || typeof a.shape[a.shape.length - 1] !== "number" || !b || b.shape.length !== 2) return undefined
  const azp = n.inputs[2] ? type(n.inputs[2]) : undefined
  if (azp && !azp.shape.every((d) => d === 1)) return undefined
  const shift = b.dtype === "int8" ? 0 : b.dtype === "uint8" ? 128 : undefined
  if (shift === undefined) return undefined
  if (!n.inputs[bzpi]) return shift === 0 ? 0 : undefined
  const zp = constant(n.inputs[bzpi])
  return zp && Array.from(zp.data as ArrayLike<number>).every((z) => Number(z) === shift) ? shift : undefined
}

/**
 * MatMulInteger / QLinearMatMul over a constant B → MatMulIntegerPacked / QLinearMatMulPacked over
 * it packed for the dot [⌈N/16⌉, ⌈K/4⌉, 16, 4] with its column sums, computed here once instead of
 * by a stage of the kernel on every run (a classifier's 1280 × 1000 B: 1.3 MB a run).
 */
export const int8MatmulToPacked: Rule = {
  name: "int8-matmul-to-packed",
  apply: (n, ctx) => {
    const shift = int8MatmulPackShift(n, ctx.type, ctx.constant)
    if (shift === undefined) return undefined
    const q = n.op === "QLinearMatMul"
    const [bi, bzpi] = q ? [3, 5] : [1, 3]
    const b = ctx.constant(n.inputs[bi])!
    const { packed, colsum } = packInt8Matmul(b, shift)
    const bName = ctx.fresh(`${n.inputs[bi]}_vnni`)
    const csName = ctx.fresh(`${n.inputs[bi]}_colsum`)
    const y = ctx.fresh(`${n.outputs[0]}_packed`)
    const inputs = [...n.inputs]
    while (inputs.length <= bzpi) inputs.push("")
    inputs[bi] = bName
    inputs[bzpi] = csName
    const mult = q ? foldedMultipliers(n, ctx, b.shape[1]) : undefined
    if (mult) inputs.push(mult.name)
    return {
      nodes: [{ name: ctx.fresh(`${n.name}_packed`), op: q ? "QLinearMatMulPacked" : "MatMulIntegerPacked", domain: TESSERA_DOMAIN, inputs, outputs: [y], attrs: { n: attr.int(b.shape[1]) } }],
      outputs: [y],
      constants: new Map([[bName, packed], [csName, colsum], ...(mult ? [[mult.name, mult.value] as const] : [])]),
    }
  },
}

/**
 * Whether a depthwise conv (one input channel a group) computes on the VNNI dot over a sliding
 * window (op-library-int8-depthwise.ts's depthwiseWindow: one vpdpbusd a kernel row and 16 pixels,
 * where the int16 form takes a widened load, a vpmulld and a vpaddd a tap): where the target's dot
 * is VNNI and depthwiseWindowGrid has a grid for its window (packDepthwiseTaps then says whether
 * the weights are s8).
 */
export const int8DepthwiseWindow = (w: Int8ConvWindow, target: Int8LayoutTarget): boolean =>
  target.int8Dot === "vnni" && depthwiseWindowGrid(w.out, w.kernel, w.dilations, w.strides) !== undefined

/**
 * The channel block of a depthwise conv's channels-in-lanes form (op-library-int8-depthwise.ts's
 * depthwiseChannels / depthwiseChannelsDot), or 0 for none: the target's vector lanes L where the conv
 * has one input and one output channel a group, its channels are whole blocks of L, and
 * - on the VNNI dot (int8DepthwiseChannelsDot, `s8`: its weights fit the dot's s8 operand), a
 *   channel's output rows are at most a vector (OW ≤ L: a plane too small for the pixel lanes — a
 *   row of 14 or 7 leaves lanes of every vector empty, the window form's grid pads its rows): one
 *   vpdpbusd a kernel row of 16 channels, the transposes in and out through the C compiler's
 *   interleaved stores and loads (MobileNetV2's 14² and 7² convs, the strided 28² → 14² and 14² → 7²
 *   ones, 1.2–2.6× faster alone; at 28², rows of 2 vectors, a tie with the int16 grid, at 56² slower);
 *   and a strided conv the window form does not take (its alternative the int16 form over the
 *   stride's phases: MobileNetV2's 112² → 56², 96 channels, 0.29 → 0.24 ms in the network; the
 *   stride-1 convs of wider rows stay on the window rows or the int16 grid, which won there: 56² 1.7×,
 *   28² 1.3–1.5×, 56² → 28² on the window's phase rows 2.1× faster than this form, 2026-11-28);
 * - else, where a channel's output rows are at most half a vector (2·OW ≤ L: the padded plane's rows
 *   are too short to vectorize — the 7² convs; at 14², rows of 14 in 16 lanes, the pixel form was
 *   faster: 0.033 against 0.061 ms, the int16 transposes in and out costing more than the lanes
 *   gained), not where the VNNI window form takes the conv (int8DepthwiseWindow).
 */
export const int8DepthwiseChannels = (w: Int8ConvWindow, channels: { readonly in: number; readonly out: number; readonly group: number }, target: Int8LayoutTarget, s8 = true): number => {
  const lanes = target.vectorLanes ?? 0
  const depthwise = channels.group === channels.in && channels.out === channels.in
  const strided = w.strides[0] > 1 || w.strides[1] > 1
  const dot = s8 && (w.out[1] <= lanes || (strided && !int8DepthwiseWindow(w, target))) && int8DepthwiseChannelsDot(w, lanes, target)
  const int16 = 2 * w.out[1] <= lanes && !int8DepthwiseWindow(w, target)
  return lanes > 1 && depthwise && channels.in % lanes === 0 && (dot || int16) ? lanes : 0
}

/**
 * Whether a depthwise conv's channels-in-lanes form (int8DepthwiseChannels' `lanes`) computes on the
 * VNNI dot (op-library-int8-depthwise.ts's depthwiseChannelsDot: a block of 16 channels in the dot's
 * lanes, a kernel row's taps in its depth, one vpdpbusd a kernel row where the int16 form takes a
 * widened load, a multiply and an add a tap): where the target's dot is VNNI, the block is the
 * dot's 16 lanes, a kernel row has at most the dot's 4 taps and no dilation (its operand one run of
 * 4 pixels' 16 channels); packDepthwiseTaps then says whether the weights are s8.
 */
export const int8DepthwiseChannelsDot = (w: Int8ConvWindow, lanes: number, target: Int8LayoutTarget): boolean =>
  target.int8Dot === "vnni" && lanes === INT8_LANES && w.kernel[1] <= INT8_DEPTH && w.dilations[1] === 1

/**
 * A grouped QLinearConv (2-D, whole channels a group: depthwise among them) over constant weights
 * and a constant or absent weight zero point → QLinearConvGrouped, its weights minus their zero
 * point widened to int16 and (constant scales) its multipliers computed here, once, instead of by
 * two stages, two parallel regions, of every run (MobileNetV2's 17 depthwise convs: 34 of them);
 * where int8DepthwiseWindow says, the taps' s8 weights and their sums too (the VNNI form).
 */
export const int8GroupedToPackedFor = (target: Int8LayoutTarget): Rule => ({
  name: "int8-grouped-to-packed",
  apply: (n, ctx) => {
    if (n.op !== "QLinearConv" || n.domain !== "") return undefined
    const group = (resolveNode(n).attrs as { group: number }).group
    const x = ctx.type(n.inputs[0])
    const w = ctx.constant(n.inputs[3])
    const zp = n.inputs[5] ? ctx.constant(n.inputs[5]) : undefined
    if (group <= 1 || !x || !w || (n.inputs[5] && !zp) || x.shape.length !== 4 || w.shape.length !== 4) return undefined
    const C = x.shape[1]
    if (typeof C !== "number" || C % group !== 0 || w.shape[1] !== C / group || w.shape[0] % group !== 0) return undefined
    if (zp && zp.data.length !== 1 && zp.data.length !== w.shape[0]) return undefined
    const w16 = ctx.fresh(`${n.inputs[3]}_i16`)
    const widened = widenInt8Weights(w, zp)
    const mult = foldedMultipliers(n, ctx, w.shape[0])
    const out = ctx.type(n.outputs[0])
    const at = resolveNode(n).attrs as { strides?: readonly number[]; dilations?: readonly number[] }
    const win = (d: readonly number[]) => [d[0] ?? 1, d[1] ?? 1] as const
    const known = out && out.shape.length === 4 && out.shape.every((d) => typeof d === "number")
    const window = known ? { kernel: win(w.shape.slice(2)), strides: win(at.strides ?? []), dilations: win(at.dilations ?? []), out: win(out.shape.slice(2) as number[]) } : undefined
    // (the channels-in-lanes form where int8DepthwiseChannels says, on the VNNI dot where
    // int8DepthwiseChannelsDot says and the weights fit its s8 operand: its taps packed too; else the
    // window form's taps where int8DepthwiseWindow says)
    const taps = window && target.int8Dot === "vnni" ? packDepthwiseTaps(widened) : undefined
    const lanes = window ? int8DepthwiseChannels(window, { in: C, out: w.shape[0], group }, target, taps !== undefined) : 0
    const packed = window && (lanes > 0 ? int8DepthwiseChannelsDot(window, lanes, target) : int8DepthwiseWindow(window, target)) ? taps : undefined
    const dot = packed ? [[ctx.fresh(`${n.inputs[3]}_taps`), packed.taps], [ctx.fresh(`${n.inputs[3]}_tapsum`), packed.tapsum]] as const : []
    const y = ctx.fresh(`${n.outputs[0]}_grouped`)
    const inputs = Array.from({ length: 9 }, (_, k) => n.inputs[k] ?? "")
    return {
      nodes: [{ name: ctx.fresh(`${n.name}_grouped`), op: "QLinearConvGrouped", domain: TESSERA_DOMAIN, inputs: [...inputs, mult?.name ?? "", w16, ...dot.map(([name]) => name)], outputs: [y], attrs: lanes > 0 ? { ...n.attrs, channel_lanes: attr.int(lanes) } : n.attrs }],
      outputs: [y],
      constants: new Map([[w16, widened], ...(mult ? [[mult.name, mult.value] as const] : []), ...dot]),
    }
  },
})

/** The rule on a target without a dot of its own (the int16 form everywhere). */
export const int8GroupedToPacked: Rule = int8GroupedToPackedFor({})
