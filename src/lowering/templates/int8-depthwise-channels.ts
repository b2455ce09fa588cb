// The int8 depthwise template's schedule of the channels-in-lanes form (op-library-int8-depthwise.ts's
// depthwiseChannels: sums [n, C / L, oh, ow, L] over the padded int16 plane [n, C / L, Hp, Wp, L]):
// the epilogue (the requantization, NCHW bytes) a block of L channels at a time, a channel's pixels
// a tile (`tile_px`) in its vector loop; at the block, first the block's plane (its L channels the
// vector), then its sums (the L channels the vector, the taps unrolled inside it: each sum in a
// register across them, or outside it), read back by the channel's epilogue tiles.
import * as S from "../../ast/schedule/schedule.js"
import { vnniDotChannels16x4 } from "../../ast/te/intrinsic.js"
import { dataLeaves, narrowedStage, parallelize, parallelOuter } from "./common.js"
import { vectorizeInner } from "./int8-depthwise-window.js"

/**
 * Whether the product is the channels-in-lanes form: its sums [n, blocks, oh, ow, lanes] over a plane
 * [n, blocks, Hp, Wp, lanes] (int16, or u8 on the VNNI dot; the window form's rows read a 4-D u8 one).
 */
export const isChannelsForm = (anchor: S.Stage): boolean =>
  anchor.op.shape.length === 5 && anchor.op.inputs.find((t) => t.kind === "compute")?.shape.length === 5

/** A stage's innermost loop vectorized where a vector loop takes it. */
const vectorizeLast = (s: S.Schedule, stage: string): S.Schedule => {
  const st = s.stages.get(stage)!
  const last = st.leaf[st.leaf.length - 1]
  return st.axes.get(last)!.extent <= S.MAX_VECTORIZED ? S.vectorize(s, stage, last) : s
}

/**
 * The schedule (knobs as the int16 form's: `tile_px`, `unroll_kh` / `unroll_kw`, `taps`,
 * `epilogue`): `out` [n, o, oh, ow] split into blocks of the sums' L channels, parallel over the
 * blocks, a channel's pixels fused and tiled (the tile the vector loop); the requantized int32
 * values at the channel (`epilogue`: int32); the sums and the plane at the block.
 */
export const channelsProduct = (s0: S.Schedule, anchor: S.Stage, out: string, config: Record<string, unknown>): S.Schedule => {
  const L = anchor.op.shape[4]
  const tile = Number(config.tile_px)
  const [n, m, oh, ow] = dataLeaves(s0.stages.get(out)!)
  const blocks = S.split(s0, out, m, { factor: L })
  const px = S.fuse(blocks.schedule, out, oh, ow)
  const sp = S.split(px.schedule, out, px.fused, { factor: tile })
  let s = parallelOuter(sp.schedule, out, [n, blocks.outer])
  const leaves = s.stages.get(out)!.leaf
  const block = leaves[leaves.indexOf(blocks.inner) - 1]
  // the requantized values in int32 at the block (`epilogue`: int32), in the epilogue's tiles
  const wide = config.epilogue === "int32" ? narrowedStage(s, out) : undefined
  // (fused: the requantization in the narrowing's loop, the block's channels its vector loop — the
  // sums read contiguously, the bytes stored a channel's plane apart)
  const blocked = wide !== undefined && s.stages.get(wide)!.op.shape.length === 5
  const pixelsOuter = [...leaves.slice(0, leaves.indexOf(blocks.inner)), sp.outer, sp.inner, blocks.inner]
  // (the int32 values in blocks, [n, C / L, oh, ow, L]: the narrowing's tile of pixels its vector
  // loop, the block's L channels unrolled inside it — each channel's bytes stored contiguously, the
  // values read L apart, which the C compiler loads as one interleaved group of L and takes apart
  // with permutes; a channel's pixels the vector loop over the channel-major values read them
  // strided, and the channels over pixel-major values stored them a plane apart)
  s = blocked ? S.unroll(S.vectorize(S.reorder(s, out, pixelsOuter), out, sp.inner), out, blocks.inner) : wide ? S.vectorize(s, out, sp.inner) : S.vectorize(S.reorder(s, out, pixelsOuter), out, blocks.inner)
  let reader: [string, string] = [out, block]
  if (wide) {
    // (the block's L channels its vector loop: the sums read contiguously, each channel's values
    // stored to its own row (channel-major) or its pixel's (blocked), which the narrowing reads)
    s = S.computeAt(s, wide, out, block)
    const wl = dataLeaves(s.stages.get(wide)!)
    if (blocked) s = S.vectorize(s, wide, wl[4])
    else {
      const [wn, wo, wh, ww] = wl
      const split = S.split(s, wide, wo, { factor: L })
      s = S.vectorize(S.reorder(split.schedule, wide, [wn, split.outer, wh, ww, split.inner]), wide, split.inner)
    }
    reader = [wide, wl[0]]
  }
  // the block's sums (at their one reader's block): the L channels the vector loop, the taps
  // inside it (unrolled: each sum in a register across them) or outside it
  const local = anchor.name
  s = S.computeAt(s, local, reader[0], reader[1])
  const ls = s.stages.get(local)!
  const [ln, lb, lh, lw, ll] = dataLeaves(ls)
  const [rkh, rkw] = ls.leaf.filter((a) => ls.axes.get(a)!.type === "reduce")
  if (config.dot !== undefined) {
    // (the VNNI dot's: a kernel row's 4 taps of the L channels one vpdpbusd, `dot`: vnni; or the L
    // channels the vector loop, the 4 taps unrolled inside it)
    s = S.reorder(s, local, [ln, lb, lh, lw, rkh, ll, rkw])
    s = config.dot === "vnni" ? S.tensorize(s, local, ll, vnniDotChannels16x4) : S.unroll(S.vectorize(s, local, ll), local, rkw)
  } else {
    s = S.reorder(s, local, config.taps === "outside" ? [ln, lb, lh, lw, rkh, rkw, ll] : [ln, lb, lh, lw, ll, rkh, rkw])
    s = S.vectorize(s, local, ll)
    if (config.unroll_kw) s = S.unroll(s, local, rkw)
  }
  if (config.unroll_kh) s = S.unroll(s, local, rkh)
  // the block's plane and weights before its sums, the L channels their vector loop
  for (const t of anchor.op.inputs) if (t.kind === "compute") s = vectorizeLast(S.computeAt(s, t.name, local, lb), t.name)
  // (the VNNI dot's plane from a dense transposing copy, [n, blocks, H, W, L]: at the plane's block, its
  // pixels fused into the vector loop and the L channels unrolled inside — the C compiler's
  // interleaved store; with the channels the vector loop each lane's byte is a load of its own)
  const plane = anchor.op.inputs.find((t) => t.kind === "compute")
  const dense = plane?.kind === "compute" ? plane.inputs.find((t) => t.kind === "compute" && t.shape.length === 5) : undefined
  if (dense && s.stages.get(dense.name)?.attach.kind === "inline") {
    s = S.computeAt(s, dense.name, plane!.name, dataLeaves(s.stages.get(plane!.name)!)[1])
    const [, , dh, dw, dl] = dataLeaves(s.stages.get(dense.name)!)
    const px = S.fuse(s, dense.name, dh, dw)
    s = S.unroll(vectorizeInner(px.schedule, dense.name, px.fused), dense.name, dl)
  }
  return parallelize(s, true, [out, local])
}
