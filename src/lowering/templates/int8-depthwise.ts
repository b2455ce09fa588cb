// The int8 depthwise template: the int32 sums of a depthwise 8-bit conv (op-library-int8-depthwise.ts,
// tag int8_depthwise: [n, o, p] over a grid of the phases' width, reduce [kh, kw] over the int16
// phases of the padded input) computed at the channel of the epilogue (the requantization), its
// grid's pixels in the vector lanes (`tile_px` a vector loop), the sums held in registers across
// the unrolled taps; then compacted to the output's pixels, which the epilogue reads a tile of
// `tile_px` fused pixels at a time and stores contiguously. Knobs: the tile, whether the kernel
// loops are unrolled, where the padded input (and its phases) is computed (whole first, or a
// channel's at that channel), and whether the taps run inside the tile's pixel loop (each pixel's
// sum across its taps: the C compiler's outer-loop vectorizer takes the pixel loop) or outside it
// (a vector loop over the pixels a tap: what an emitter that vectorizes only an innermost loop
// takes, js and wasm). The window form (QLinearConvGrouped with its taps' s8 weights: a VNNI
// target's) computes a kernel row of 16 pixels a vpdpbusd (`dot`; dotProduct below).
import * as S from "../../ast/schedule/schedule.js"
import { c, collect, substitute, type Reduce } from "../../ast/te/expr.js"
import { vnniDotWindow } from "../../ast/te/intrinsic.js"
import { simplify } from "../../ast/te/simplify.js"
import { DOT_LANES } from "../op-library-int8-blocked.js"
import { anchorStage, candidatesOf, dataLeaves, divisors, fusedEpilogue, narrowedStage, parallelize, parallelOuter, pixelTileDefault, pixelTiles } from "./common.js"
import { halfL2 } from "./conv2d-nchwc.js"
import { channelsProduct, isChannelsForm } from "./int8-depthwise-channels.js"
import { dotPlane, isRowsForm, planeOf, rowsKnobs, rowsProduct, vectorizeInner, vectorizeRows, windowSteps } from "./int8-depthwise-window.js"
import type { Knob, Template } from "./template.js"

/**
 * The epilogue the tile is made of: the one stage that reads the sums (the requantization, or the
 * sums' copy), root, of shape [n, o, oh, ow] over the sums' grid [n, o, (oh − 1)·Wq + ow]; undefined
 * for any other reader pattern.
 */
const epilogue = (s: S.Schedule, anchor: S.Stage): string | undefined => {
  const readers = S.effectiveConsumers(s, anchor.name)
  if (readers.length !== 1) return undefined
  const st = s.stages.get(readers[0])!
  const [n, o, oh, ow] = st.op.shape
  const [an, ao, ap] = anchor.op.shape
  if (st.attach.kind !== "root" || st.op.body.kind === "reduce" || st.op.shape.length !== 4 || n !== an) return undefined
  // (the window form's rows: [n, o, oh, width / 16, 16])
  if (isRowsForm(anchor)) return anchor.op.shape[1] === o && anchor.op.shape[2] === oh ? readers[0] : undefined
  // (the channels-in-lanes form's sums: [n, o / L, oh, ow, L])
  if (isChannelsForm(anchor)) {
    const [, b, sh, sw, l] = anchor.op.shape
    return b * l === o && sh === oh && sw === ow ? readers[0] : undefined
  }
  return o !== ao || ap < oh * ow ? undefined : readers[0]
}

/**
 * Whether the product is the VNNI window form (op-library-int8-depthwise.ts's depthwiseWindow): its
 * plane the u8 padded rows [n, c, phases, rows · width], a kernel row's taps in the dot's depth.
 */
const isDotForm = (s: S.Schedule, anchor: S.Stage): boolean => {
  const plane = planeOf(anchor)
  return plane !== undefined && s.stages.get(plane)?.op.dtype === "uint8"
}

/** The window form's pixel tile: the most whole vectors of 16, up to 4 (64, a vector loop), that divide the product's pixels (themselves whole vectors). */
const dotTile = (pixels: number): number => Math.max(...[1, 2, 3, 4].filter((k) => pixels % (k * DOT_LANES) === 0)) * DOT_LANES

/**
 * The pixels of the grid `local` the compaction `dense` reads (its last pixel's index, plus one):
 * the window form's product at the compaction's channel covers exactly them, so where they are not
 * whole vectors (depthwiseWindowGrid's rounded grid, 14²: 222 of 224) the product is at root.
 */
const compactedPixels = (dense: S.Stage, local: string): number => {
  const reads = collect(dense.op.body, (e) => e.kind === "read" && e.source === local)
  const idx = reads[0]?.kind === "read" ? reads[0].indices[reads[0].indices.length - 1] : c(0)
  const last = simplify(substitute(idx, new Map(dense.op.axes.map((a) => [a.var.name, c(a.dom.min + a.dom.extent - 1)]))))
  return last.kind === "const" ? last.value + 1 : 0
}

/** The padded input a stride's phases read (inline in the base schedule); undefined for a stride of 1. */
const paddedOf = (s: S.Schedule, plane: string | undefined): string | undefined => {
  const t = plane ? s.stages.get(plane)?.op.inputs.find((i) => i.kind === "compute") : undefined
  return t && s.stages.get(t.name)?.attach.kind === "inline" ? t.name : undefined
}

/**
 * The window form's product at the compaction's channel (its pixels exactly the ones the compaction
 * reads: whole vectors): split into tiles of whole vectors (dotTile), each tile's vectors unrolled
 * inside the kernel rows (their sums in registers across them), the [16 × 4] window innermost,
 * tensorized onto vnniDotWindow (`dot`: vnni) or vectorized over the 16 pixels with the 4 taps
 * unrolled; the plane a channel's at the product's channel (`plane`: channel) or whole first.
 */
const dotProduct = (s0: S.Schedule, anchor: S.Stage, out: string, plane: string | undefined, config: Record<string, unknown>, atRoot: boolean): S.Schedule => {
  const local = anchor.name
  const [stride, dilation] = windowSteps(anchor)
  const ls = s0.stages.get(local)!
  const [ln, lm, lp] = dataLeaves(ls)
  const [rkh, rr] = ls.leaf.filter((a) => ls.axes.get(a)!.type === "reduce")
  const so = S.split(s0, local, lp, { factor: dotTile(ls.axes.get(lp)!.extent) })
  const sv = S.split(so.schedule, local, so.inner, { factor: DOT_LANES })
  let s = S.reorder(sv.schedule, local, [ln, lm, so.outer, rkh, sv.outer, sv.inner, rr])
  if (s.stages.get(local)!.axes.get(sv.outer)!.extent > 1) s = S.unroll(s, local, sv.outer)
  if (config.unroll_kh && s.stages.get(local)!.axes.get(rkh)!.extent > 1) s = S.unroll(s, local, rkh)
  s = config.dot === "vnni" ? S.tensorize(s, local, sv.inner, vnniDotWindow(stride, dilation)) : S.unroll(S.vectorize(s, local, sv.inner), local, rr)
  if (atRoot) s = parallelOuter(s, local, [ln, lm])
  if (plane) {
    const leaves = s.stages.get(local)!.leaf
    if (config.plane === "channel") s = S.computeAt(s, plane, local, leaves[leaves.indexOf(so.outer) - 1])
    s = dotPlane(s, plane)
  }
  return parallelize(s, true, [out, local])
}

export const int8DepthwiseTemplate: Template = {
  name: "int8_depthwise",
  tunable: true,
  space: (_outputs, base) => {
    const st = anchorStage(base)!
    const axes = (st.op.body as Reduce).axes
    const [kh, kw] = axes.map((a) => a.dom.extent).slice(-2)
    const out = epilogue(base, st)
    // (the window form: a kernel row's taps in the dot's depth, no kernel column to unroll)
    const dot = isDotForm(base, st)
    // (a grouped conv's taps are outside the pixel loop already, with its channel loop)
    const tapsKnob = out !== undefined && axes.length === 2 && !dot
    // (the window form's rows: its own tile, a few output rows)
    if (isRowsForm(st)) return rowsKnobs(kh, out !== undefined && narrowedStage(base, out) !== undefined)
    const [, , oh, ow] = out ? base.stages.get(out)!.op.shape : [0, 0, 1, st.op.shape[2]]
    // (the padded input's int16 bytes, all channels: what its copy at root holds in the cache)
    const padded = dot ? undefined : paddedOf(base, planeOf(st))
    const paddedBytes = padded ? 2 * base.stages.get(padded)!.op.shape.reduce((p, d) => p * d, 1) : 0
    return [
      { kind: "split", name: "tile_px", extent: oh * ow, candidates: pixelTiles(oh * ow) },
      ...(kh > 1 ? [{ kind: "choice", name: "unroll_kh", candidates: [true, false], extent: kh } as const] : []),
      ...(kw > 1 && !dot ? [{ kind: "choice", name: "unroll_kw", candidates: [true, false], extent: kw } as const] : []),
      // (the window form's [16 × 4] window: tensorized onto vnniDotWindow, or loops)
      ...(dot ? [{ kind: "choice", name: "dot", candidates: ["vnni", "loops"] } as const] : []),
      // (the channels-in-lanes form's plane: a block's at that block)
      ...(out && !isChannelsForm(st) ? [{ kind: "choice", name: "plane", candidates: ["root", "channel"] } as const] : []),
      ...(padded ? [{ kind: "choice", name: "padded", candidates: ["inline", "root"], extent: paddedBytes, absent: "inline" } as const] : []),
      ...(tapsKnob ? [{ kind: "choice", name: "taps", candidates: ["inside", "outside"], absent: "inside" } as const] : []),
      // (the requantized values: in the narrowing's loop, or an int32 stage of their own at the channel;
      // its extent the run of output bytes one channel's loop stores contiguously — the channels-in-lanes
      // form stores each of its 16 lanes to a plane of its own: 1)
      ...(out && narrowedStage(base, out) ? [{ kind: "choice", name: "epilogue", candidates: ["fused", "int32"], absent: "fused", extent: isChannelsForm(st) ? 1 : oh * ow } as const] : []),
    ] satisfies Knob[]
  },
  defaults: (knobs, target) => {
    // all of a channel's pixels where the vector loop takes them, else the most whole vectors it
    // takes (their sums in registers across the taps)
    if (!knobs.some((k) => k.name === "tile_px")) {
      // the window form's rows (no tile): the plane a channel's, the requantized values an int32
      // stage, the dot and the kernel rows unrolled, as the grid form's (below)
      const rows: Record<string, string | number | boolean> = { plane: target.outerLoopVectorizer === false ? "root" : "channel", dot: target.int8Dot === "vnni" ? "vnni" : "loops" }
      if (knobs.some((k) => k.name === "unroll_kh")) rows.unroll_kh = true
      if (knobs.some((k) => k.name === "epilogue")) rows.epilogue = fusedEpilogue(target) ? "fused" : "int32"
      return rows
    }
    const cfg: Record<string, string | number | boolean> = { tile_px: pixelTileDefault(candidatesOf(knobs, "tile_px"), target) }
    // the plane (padded input or its phases) a channel's at that channel where the C compiler
    // vectorizes: the product reads it from L1 right after its copy, and the kernel runs one parallel
    // loop less (MobileNetV2 int8's 56² conv 0.25 → 0.20 ms, its 10 kinds of depthwise conv 1.22 → 1.04
    // alone, 1 thread, 2026-11-27, the vectorized epilogue loops of C_POOL_FLAGS on); whole first elsewhere
    if (knobs.some((k) => k.name === "plane")) cfg.plane = target.outerLoopVectorizer === false ? "root" : "channel"
    // a stride's phases: copied from the padded input computed whole first where that copy fits
    // half the L2 (its rows are contiguous runs, which vectorize; the phases' rows read the input
    // strided, behind bounds tests, and ran scalar: MobileNetV2 int8's 28² → 14² conv, 192
    // channels, 0.16 → 0.10 ms); else read from the input (the copy of a 112² or 56² plane, past
    // the L2, cost more than it saved)
    const pad = knobs.find((k) => k.name === "padded")
    if (pad?.kind === "choice") cfg.padded = (pad.extent ?? Infinity) <= halfL2(target) ? "root" : "inline"
    // kernels of up to 3×3 unrolled (their weights broadcast once a channel)
    const taps = knobs.reduce((p, k) => (k.kind === "choice" && k.name.startsWith("unroll_") && k.extent !== undefined ? p * k.extent : p), 1)
    for (const k of knobs) if (k.name === "unroll_kh" || k.name === "unroll_kw") cfg[k.name] = taps <= 9
    // the taps inside the pixel loop where the C compiler vectorizes that loop around them; outside
    // it where the emitter vectorizes only an innermost loop (inside, the pixel loop stays scalar:
    // MobileNetV2 int8's depthwise convs on wasm ran their products one pixel at a time)
    if (knobs.some((k) => k.name === "taps")) cfg.taps = target.outerLoopVectorizer === false ? "outside" : "inside"
    // the requantized values an int32 stage where the C compiler picks the loop's vector width by
    // its narrowest type (the 8-bit store); an emitter that vectorizes by the lanes keeps them fused,
    // and so does c's requantizing store where the bytes it stores are whole vectors of a plane (the
    // channels-in-lanes form stores a byte a plane: its int32 stage at the channel is the transposition,
    // MobileNetV2 int8's 7² convs 0.044 → 0.048 ms fused, 2026-11-27)
    const epi = knobs.find((k) => k.name === "epilogue")
    if (epi) cfg.epilogue = target.outerLoopVectorizer === false || (fusedEpilogue(target) && (epi.extent ?? 0) >= DOT_LANES) ? "fused" : "int32"
    // the window form's dot where the target's is VNNI (the layout rewrite chooses the form there only)
    if (knobs.some((k) => k.name === "dot")) cfg.dot = target.int8Dot === "vnni" ? "vnni" : "loops"
    return cfg
  },
  apply: (_outputs, base, config) => {
    const anchor = anchorStage(base)!
    let s = base
    // the weights and the epilogue's per-channel multipliers: computed once, before the tiles; the
    // plane too, or a channel's of it at that channel (below)
    const plane = planeOf(anchor)
    for (const t of anchor.op.inputs) if (t.kind === "compute" && s.stages.get(t.name)?.attach.kind === "inline") s = S.computeRoot(s, t.name)
    for (const name of s.order) {
      const st = s.stages.get(name)!
      if (st.attach.kind === "inline" && st.op.shape.length === 1) s = S.computeRoot(s, name)
    }
    const tile = Number(config.tile_px)
    const local = anchor.name
    if (isRowsForm(anchor)) {
      const out = epilogue(s, anchor)
      if (out) return rowsProduct(s, anchor, out, config)
      // (no one reader to tile: the sums at root, a row's vectors each a window of 16 pixels)
      const [ln, lm, lh, lv, ll] = dataLeaves(anchor)
      const [rkh, rr] = anchor.leaf.filter((a) => anchor.axes.get(a)!.type === "reduce")
      const [stride, dilation] = windowSteps(anchor)
      s = S.reorder(parallelOuter(s, local, [ln, lm, lh]), local, [ln, lm, lh, rkh, lv, ll, rr])
      s = config.dot === "vnni" ? S.tensorize(s, local, ll, vnniDotWindow(stride, dilation)) : S.unroll(S.vectorize(s, local, ll), local, rr)
      return parallelize(s, true, local)
    }
    if (isChannelsForm(anchor)) {
      const out = epilogue(s, anchor)
      // (no one reader to tile: the sums at root, the lanes vectorized)
      return out ? channelsProduct(s, anchor, out, config) : parallelize(S.vectorize(parallelOuter(s, local, dataLeaves(anchor).slice(0, 2)), local, dataLeaves(anchor)[4]), true, local)
    }
    // (the grid's pixels one vector loop where it takes them all, else split by the tile)
    const grid = anchor.op.shape[2]
    const gridTile = grid <= S.MAX_VECTORIZED ? grid : tile
    const out = epilogue(s, anchor)
    if (!out) {
      // no epilogue to tile: the sums computed at root, a tile of the grid's pixels in the vector lanes
      const [n, m, p] = dataLeaves(anchor)
      const red = anchor.leaf.filter((a) => anchor.axes.get(a)!.type === "reduce")
      const sp = S.split(s, local, p, { factor: gridTile })
      s = S.reorder(sp.schedule, local, [n, m, sp.outer, ...red, sp.inner])
      s = S.vectorize(parallelOuter(s, local, [n, m]), local, sp.inner)
      return parallelize(s, true, local)
    }
    // the epilogue's tile: its pixels fused (the output's rows are contiguous), split by the tile
    const [n, m, oh, ow] = dataLeaves(s.stages.get(out)!)
    const px = S.fuse(s, out, oh, ow)
    const sp = S.split(px.schedule, out, px.fused, { factor: tile })
    s = parallelOuter(sp.schedule, out, [n, m])
    s = S.vectorize(s, out, sp.inner)
    // at the channel: the sums' grid (in L1 / L2), then its compaction to the output's pixels (rows
    // of the grid's rows, vectorized), which the epilogue's tiles read as one run
    const leaves = s.stages.get(out)!.leaf
    const channel = leaves[leaves.indexOf(sp.outer) - 1]
    const dense = S.consumersOf(s, local)[0]
    // the requantized values in int32 at the channel, in the epilogue's tiles, where the epilogue
    // narrows them (common.ts narrowedStage; `epilogue` "int32": a 7² channel's tiles of 16 pixels
    // stored int8 ran every int32 and float step 4 lanes a vector), the compaction at their channel
    const wide = config.epilogue === "int32" ? narrowedStage(s, out) : undefined
    if (wide) {
      s = S.computeAt(s, wide, out, channel)
      const [, wo, wh, ww] = dataLeaves(s.stages.get(wide)!)
      const wf = S.fuse(s, wide, wh, ww)
      const ws = S.split(wf.schedule, wide, wf.fused, { factor: tile })
      s = S.computeAt(S.vectorize(ws.schedule, wide, ws.inner), dense, wide, wo)
    } else s = S.computeAt(s, dense, out, channel)
    s = vectorizeRows(s, dense)
    // (a grid of at most one vector loop, whole vectors: at root, all of it — at the channel its
    // region would be the compaction's, cut at the last row's OW, and leave a scalar tail; the
    // window form's region is whole vectors, depthwiseWindowGrid's — except where that grid was
    // rounded up to whole vectors (14²), whose product is then at root)
    const dot = isDotForm(s, anchor)
    const atRoot = grid <= S.MAX_VECTORIZED || (dot && compactedPixels(s.stages.get(dense)!, local) % DOT_LANES !== 0)
    if (!atRoot) s = S.computeAt(s, local, dense, s.stages.get(dense)!.leaf[1])
    if (dot) return dotProduct(s, anchor, out, plane, config, atRoot)
    // the grid's pixels split by the tile, the taps inside each vector loop (its sums stay in
    // registers across them) or outside it (in L1)
    const ls = s.stages.get(local)!
    const [ln, lm, lp] = dataLeaves(ls)
    const red = ls.leaf.filter((a) => ls.axes.get(a)!.type === "reduce")
    const [rkh, rkw] = red.slice(-2)
    const lsp = S.split(s, local, lp, { factor: gridTile })
    // (a grouped conv's channel loop outside the tile's vector loop, the taps inside it with it)
    const outside = red.length > 2 || config.taps === "outside"
    s = S.reorder(lsp.schedule, local, outside ? [ln, lm, lsp.outer, ...red, lsp.inner] : [ln, lm, lsp.outer, lsp.inner, rkh, rkw])
    s = S.vectorize(s, local, lsp.inner)
    if (config.unroll_kh) s = S.unroll(s, local, rkh)
    if (config.unroll_kw) s = S.unroll(s, local, rkw)
    if (atRoot) s = parallelOuter(s, local, [ln, lm])
    // the plane (the padded input, or its phases) before the sums, or a channel's at that channel
    const sumLeaves = s.stages.get(local)!.leaf
    if (plane && config.plane === "channel") s = S.computeAt(s, plane, local, sumLeaves[sumLeaves.indexOf(lsp.outer) - 1])
    if (plane) s = vectorizeRows(s, plane)
    // a stride's phases copied from the padded input, that computed whole first (its rows one
    // contiguous run each) — or inlined into the phases, each phase's element read from the input
    const padded = paddedOf(s, plane)
    if (padded && config.padded === "root") s = vectorizeRows(S.computeRoot(s, padded), padded)
    return parallelize(s, true, [out, local])
  },
}
