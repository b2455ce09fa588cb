// The Winograd convolution's template (ConvWinogradNCHWc): the input transform at root, the
// batched products M tiled like a GEMM, the output transform inlined into the epilogue.
import * as S from "../../ast/schedule/schedule.js"
import type { ComputeTensor } from "../../ast/te/tensor.js"
import { anchorStage, candidatesOf, convRegisterTile, dataLeaves, divisors, parallelOuter } from "./common.js"
import type { Template } from "./template.js"

/**
 * How the threads divide a Winograd conv (`image_parts`). 1: the products by the 36 tile positions,
 * the input transform by input tiles, the output and the padded copy by channel blocks — each stage
 * reads what the other cores wrote (a position's products read every tile's V, an output block
 * every position's M). k > 1: every stage by the same contiguous part of the image — the padded
 * copy's rows, V's tiles, the products' groups of tiles split in k parts outermost, the output's
 * tile rows — so with k cores a core reads the V and M it wrote itself (crossCoreReads), and the
 * image rows an image partition of the previous kernel left in its L2; each core then reads all the
 * transformed weights U, not its share of them. The tuner's to try; the defaults keep 1.
 */
const IMAGE_PARTS = [1, 2, 4, 8] as const

/**
 * `bands` (with image_parts 1): the padded copy and the output split by rows, not channel blocks —
 * the products still by positions, each core its share of U. The copy then reads the band of the
 * input its core's part of the previous kernel wrote (a conv in bands: conv2d-nchwc.ts, imageBands)
 * and V's tiles read the rows their core copied; the output leaves its core a band of the image for
 * the next kernel. The defaults take it on more than one core.
 */
const BANDS = [false, true] as const

/**
 * `at_tiles`: the input transform V and the products M computed per row of input tiles inside
 * the output's loop, the output transform of the row right after its products: V and M are then a
 * block of the row's tiles (all 36 positions, every channel), written and read by one core while
 * still in its caches, never a whole-image buffer another core wrote. The products then run by rows
 * of tiles, each core streaming all of the transformed weights U once a row (the positions are no
 * longer split), so it pays where U stays in the core's L2 between rows and each U vector serves
 * many tiles (a row × one channel block, the tuner's to pick; docs/scheduling.md, fifteenth session). The
 * padded copy stays at root.
 */
const AT_TILES = [false, true] as const

/**
 * The Winograd convolution's schedule (ConvWinogradNCHWc): the padded input and the input
 * transform V computed at root, V's tile loops (6×6) unrolled so its selects fold to one short
 * sum per store, vectorized over the channel lanes; the 36 batched products M tiled like a GEMM:
 * `tile_p` input tiles × `tile_oc` output channel blocks of accumulators, the input channels the
 * reduction outside them; the output transform (inlined into the epilogue) unrolled over the 4×4
 * places of an output tile. Parallel loops: tiles × channel blocks for V, the 36 products × channel
 * blocks for M, channel blocks × tile rows for the output.
 */
export const winogradTemplate: Template = {
  name: "winograd_NCHWc",
  tunable: true,
  space: (_outputs, base) => {
    const M = anchorStage(base)!
    const [, , P, OCB, ob] = M.op.shape
    return [
      { kind: "split", name: "tile_p", extent: P, candidates: divisors(P, 16) },
      { kind: "split", name: "tile_oc", extent: OCB, candidates: divisors(OCB, 8), lanes: ob },
      { kind: "choice", name: "image_parts", candidates: [...IMAGE_PARTS], absent: 1 },
      { kind: "choice", name: "bands", candidates: [...BANDS], absent: false },
      { kind: "choice", name: "at_tiles", candidates: [...AT_TILES], absent: false, when: { knob: "image_parts", value: 1 } },
    ]
  },
  defaults: (knobs, target) => {
    // the direct conv's register tile, its positions the input tiles
    const oc = knobs.find((k) => k.name === "tile_oc")
    const block = oc?.kind === "split" && oc.lanes !== undefined ? oc.lanes : target.vectorLanes
    const tile = convRegisterTile(target, block, { cols: candidatesOf(knobs, "tile_p"), blocks: candidatesOf(knobs, "tile_oc") })
    // (image_parts: 1, the products by positions — the image partition, timed on ResNet-18's four
    // 56×56 convs in a row on Zen 5, 2 threads, ran no faster: docs/backends.md)
    // (bands on more than one core: the copy and the output split by rows, as the convs beside it)
    // (at_tiles off: on ResNet-50's 56×56 convs, 2 cores of Zen 5, with a row × one channel block it
    // won 1–3% of the network in sittings where the shared caches were contested and lost ~2% where
    // they were not, and the kernels lost 1.2× at one thread with the tiles above: docs/scheduling.md)
    return { tile_p: tile.cols, tile_oc: tile.blocks, image_parts: 1, bands: target.cores > 1, at_tiles: false }
  },
  apply: (outputs, base, config) => {
    const M = anchorStage(base)!
    const V = M.op.inputs.find((t): t is ComputeTensor => t.kind === "compute")!
    // V = (Bᵀ d) B: its first product T, and T's input, the padded image
    const T = V.inputs.find((t): t is ComputeTensor => t.kind === "compute")!
    const pad = T.inputs.find((t): t is ComputeTensor => t.kind === "compute")
    let s = base
    const parts = Number(config.image_parts ?? 1)
    const image = parts > 1
    // (the padded copy and the output by rows: every part of the image, or bands)
    const rows = image || config.bands === true
    const lanesOf = (stage: string) => {
      const st = s.stages.get(stage)!
      return st.axes.get(st.leaf[st.leaf.length - 1])!.extent
    }
    const fused = config.at_tiles === true && !image
    if (pad) {
      s = S.computeRoot(s, pad.name)
      const [pn, pc, py] = s.stages.get(pad.name)!.leaf
      // (by rows: rows outside the channel blocks, the rows parallel)
      if (rows) s = S.reorder(s, pad.name, [pn, py, pc])
      s = parallelOuter(s, pad.name, rows ? [pn, py, pc] : [pn, pc, py])
      const leaf = s.stages.get(pad.name)!.leaf
      if (lanesOf(pad.name) > 1) s = S.vectorize(s, pad.name, leaf[leaf.length - 1])
    }
    if (fused) return applyAtTiles(s, outputs[outputs.length - 1].name, M, V, T, Number(config.tile_p), Number(config.tile_oc), lanesOf)
    // V: [p, cb] parallel, the 6×6 transform unrolled, the lanes vectorized
    s = S.computeRoot(s, V.name)
    const [ve, vn, vp, vc, vi] = s.stages.get(V.name)!.leaf
    s = S.reorder(s, V.name, [vp, vc, ve, vn, vi])
    s = parallelOuter(s, V.name, [vp, vc])
    s = S.unroll(S.unroll(s, V.name, ve), V.name, vn)
    if (lanesOf(V.name) > 1) s = S.vectorize(s, V.name, vi)
    // T: a 6×6 tile of vectors per (p, cb), computed there into a local buffer
    const vLeaf = s.stages.get(V.name)!.leaf
    s = S.computeAt(s, T.name, V.name, vLeaf[vLeaf.indexOf(ve) - 1])
    s = S.setScope(s, T.name, "local")
    const [te, ts, , , ti] = s.stages.get(T.name)!.leaf
    s = S.unroll(S.unroll(s, T.name, te), T.name, ts)
    if (lanesOf(T.name) > 1) s = S.vectorize(s, T.name, ti)
    // M: a register tile of tile_p × tile_oc vector accumulators, the reduction outside it
    const w = S.cacheWrite(s, M.name, "local")
    s = w.schedule
    const [me, mn, mp, mc, mi] = s.stages.get(M.name)!.leaf
    const tp = Number(config.tile_p)
    const toc = Number(config.tile_oc)
    const spp = S.split(s, M.name, mp, { factor: tp })
    const spc = S.split(spp.schedule, M.name, mc, { factor: toc })
    s = S.reorder(spc.schedule, M.name, [me, mn, spc.outer, spp.outer, spc.inner, spp.inner, mi])
    // (image: the groups of input tiles split in `parts` parts, outermost — the fused loop's static
    // split then hands each of as many cores its part, every position's products of it)
    const part = image ? S.split(s, M.name, spp.outer, { nparts: parts }) : undefined
    if (part) s = S.reorder(part.schedule, M.name, [part.outer, me, mn, spc.outer, part.inner])
    const tileLoop = part ? part.inner : spp.outer
    // (not fused as far as the tile loop: the products are computed at it)
    s = parallelOuter(s, M.name, part ? [part.outer, me, mn, spc.outer] : [me, mn, spc.outer])
    const vector = lanesOf(M.name) > 1
    if (vector) s = S.vectorize(s, M.name, mi)
    s = S.computeAt(s, w.stage, M.name, tileLoop)
    const ls = s.stages.get(w.stage)!
    const [, , lp, lc, li] = dataLeaves(ls)
    const [lic] = ls.leaf.filter((a) => ls.axes.get(a)!.type === "reduce")
    s = S.reorder(s, w.stage, [...dataLeaves(ls).slice(0, 2), lic, lc, lp, li])
    if (vector) s = S.vectorize(s, w.stage, li)
    if (tp > 1 && tp <= 16) s = S.unroll(s, w.stage, lp)
    if (toc > 1 && tp * toc <= 32) s = S.unroll(s, w.stage, lc)
    // the output (the transform inlined into it): 4×4 places of a tile unrolled
    const out = outputs[outputs.length - 1].name
    const [on, oc, oh, ow, oi] = s.stages.get(out)!.leaf
    // the output tile: α - 2 (U's leading dim is α, M's too)
    const m = M.op.shape[0] - 2
    const sph = S.split(s, out, oh, { factor: m })
    const spw = S.split(sph.schedule, out, ow, { factor: m })
    s = S.reorder(spw.schedule, out, rows ? [on, sph.outer, oc, spw.outer, sph.inner, spw.inner, oi] : [on, oc, sph.outer, spw.outer, sph.inner, spw.inner, oi])
    s = parallelOuter(s, out, rows ? [on, sph.outer, oc] : [on, oc, sph.outer])
    s = S.unroll(S.unroll(s, out, sph.inner), out, spw.inner)
    if (lanesOf(out) > 1) s = S.vectorize(s, out, oi)
    return s
  },
}

/**
 * at_tiles: the output's loops [n, tile row, (the row in one group), channel block, tile, 4×4,
 * lanes], the first two parallel; at the row M, its products M.local at M's position row e, V at
 * M.local's e (T inside it, as at root), each for the row's tiles only.
 */
const applyAtTiles = (
  s0: S.Schedule,
  out: string,
  M: NonNullable<ReturnType<typeof anchorStage>>,
  V: ComputeTensor,
  T: ComputeTensor,
  tp: number,
  toc: number,
  lanesOf: (stage: string) => number,
): S.Schedule => {
  let s = s0
  const m = M.op.shape[0] - 2
  const [, , , OW] = s.stages.get(out)!.op.shape
  const nW = Math.ceil(OW / m)
  // the group: a row of tiles (groups of tile_p tiles — 7 of a 56² image's 14 — lost as much at
  // one thread: docs/scheduling.md; the more tiles a group, the fewer times U comes from L2)
  const group = nW
  const [on, oc, oh, ow, oi] = s.stages.get(out)!.leaf
  const sph = S.split(s, out, oh, { factor: m })
  const spw = S.split(sph.schedule, out, ow, { factor: m })
  const spg = S.split(spw.schedule, out, spw.outer, { factor: group })
  s = S.reorder(spg.schedule, out, [on, sph.outer, spg.outer, oc, spg.inner, sph.inner, spw.inner, oi])
  s = S.unroll(S.unroll(s, out, sph.inner), out, spw.inner)
  if (lanesOf(out) > 1) s = S.vectorize(s, out, oi)
  // (parallel over the groups, fused with the rows and images: V and M attach inside the fused loop)
  const before = s.stages.get(out)!.leaf
  s = parallelOuter(s, out, [on, sph.outer, spg.outer], Number.POSITIVE_INFINITY)
  const at = s.stages.get(out)!.leaf.find((a) => !before.includes(a)) ?? spg.outer
  // M at the group; its products M.local at M's position row e, summed in a local block of the
  // group's tiles × channel blocks (tile_p × tile_oc of them inside the reduction, unrolled: the
  // compiler keeps them in registers), V at M.local's e — V[e, 0..α) of the group's tiles, T its
  // row e: the transform's arithmetic as at root — and e unrolled so the selects fold
  const w = S.cacheWrite(s, M.name, "local")
  s = w.schedule
  const [me, , , , mi] = s.stages.get(M.name)!.leaf
  const vector = lanesOf(M.name) > 1
  if (vector) s = S.vectorize(s, M.name, mi)
  s = S.computeAt(s, M.name, out, at)
  s = S.computeAt(s, w.stage, M.name, me)
  s = S.unroll(s, M.name, me)
  const ls = s.stages.get(w.stage)!
  const [le, ln, lp, lc, li] = dataLeaves(ls)
  const [lic] = ls.leaf.filter((a) => ls.axes.get(a)!.type === "reduce")
  const spp = S.split(s, w.stage, lp, { factor: tp })
  const spc = S.split(spp.schedule, w.stage, lc, { factor: toc })
  s = S.reorder(spc.schedule, w.stage, [le, ln, spc.outer, spp.outer, lic, spc.inner, spp.inner, li])
  if (vector) s = S.vectorize(s, w.stage, li)
  if (tp > 1 && tp <= 16) s = S.unroll(s, w.stage, spp.inner)
  if (toc > 1 && tp * toc <= 32) s = S.unroll(s, w.stage, spc.inner)
  s = S.computeAt(s, V.name, w.stage, le)
  const [ve, vn, vp, vc, vi] = s.stages.get(V.name)!.leaf
  s = S.reorder(s, V.name, [vp, vc, ve, vn, vi])
  s = S.unroll(S.unroll(s, V.name, ve), V.name, vn)
  if (lanesOf(V.name) > 1) s = S.vectorize(s, V.name, vi)
  s = S.computeAt(s, T.name, V.name, vc)
  s = S.setScope(s, T.name, "local")
  const [te, ts, , , ti] = s.stages.get(T.name)!.leaf
  s = S.unroll(S.unroll(s, T.name, te), T.name, ts)
  if (lanesOf(T.name) > 1) s = S.vectorize(s, T.name, ti)
  return s
}
