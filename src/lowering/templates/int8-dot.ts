// The int8 template: the 8-bit products in the VNNI layout (op-library-int8-blocked.ts, tag
// int8_dot: [..., pixels or rows, ..., 16 lanes] int32 sums, reduce [..., 4]) as a register tile of
// `tile_blocks` × `tile_px` vectors of 16 int32 accumulators (one per output-channel block and
// output pixel / row), computed in a local copy across the whole reduction, its inner [16 × 4] dot
// tensorized onto the VNNI instruction (vnniDot16x4) or its AVX2 form (avx2Dot16x4: vpmaddubsw /
// vpmaddwd, exact), or its lanes split in groups of 4 (outside
// the tile's pixels, so a group's weights serve every pixel) and each [4 × 4] dot tensorized onto
// SIMD128's i16 dot (simd128Dot4x4, the wasm target), or, with `dot: loops` (a target without
// either), left as loops the vectorizer and gcc take; a target without the chosen instruction
// lowers it to its loops. Knobs: the pixel tile, the channel blocks per tile, whether the tile's
// loops are unrolled, and the dot; the defaults from the target record (the accumulators its
// vector registers hold beside a broadcast and a weight vector — a block's 16 int32 sums are
// 16 / lanes of its vectors —, at least the FMA pipes × latency where the axis allows).
import * as S from "../../ast/schedule/schedule.js"
import { collect, type ComputeTensor } from "../../ast/te/expr.js"
import { avx2Dot16x4, simd128Dot4x4, vnniDot16x4, vnniDotPx16x4 } from "../../ast/te/intrinsic.js"
import { DOT_LANES } from "../op-library-int8-blocked.js"
import { LOOP_PARTITION_HINT } from "../../ast/tir/tir.js"
import { accumulatorCap, anchorStage, candidatesOf, dataLeaves, divisors, fusedEpilogue, largest, narrowedStage, parallelize, parallelOuter, pixelTileDefault, pixelTiles } from "./common.js"
import { halfL2 } from "./conv2d-nchwc.js"
import type { Config, Knob, ScheduleTarget, Template } from "./template.js"

/** Where the product's pixel axis (output columns of a conv, rows of a product) and channel-block axis are among its data axes. */
const positions = (anchor: S.Stage): { readonly pixel: number; readonly block: number } => {
  const n = dataLeaves(anchor).length
  // conv: [n, block, oh, ow, lane] (its packed weight is 6-D); product: [..., rows, block, lane]
  return anchor.op.inputs.some((t) => t.shape.length === 6) ? { pixel: 3, block: 1 } : { pixel: n - 3, block: n - 2 }
}

/** A stage's pixel, block and lane data axes at the anchor's positions. */
const axesAt = (st: S.Stage, at: { readonly pixel: number; readonly block: number }) => {
  const data = dataLeaves(st)
  return { pixel: data[at.pixel], block: data[at.block], lane: data[data.length - 1], data }
}

/**
 * A conv's epilogues (the root stages of its output's shape [n, o, oh, ow]: the requantization and
 * what is fused after it) with the channel split by the product's lanes and those innermost (the
 * vectorized loop): they read the int32 sums [n, o / 16, oh, ow, 16] contiguously, 16 channels a
 * vector, where over the output columns they read them 16 apart, which gcc does not vectorize (the
 * stores go 16 channels apart instead, one byte each). Channels that are not whole blocks keep the
 * plain order.
 */
const epiloguesInLaneOrder = (s0: S.Schedule, anchor: S.Stage, config: Config): { schedule: S.Schedule; done: string[] } => {
  const [N, blocks, OH, OW, lanes] = anchor.op.shape
  let s = s0
  const done: string[] = []
  for (const name of s.order) {
    const st = s.stages.get(name)!
    if (name === anchor.name || st.attach.kind !== "root" || st.leaf.length !== 4) continue
    const [n, o, oh, ow] = st.op.shape
    if (n !== N || oh !== OH || ow !== OW || o !== blocks * lanes) continue
    const data = dataLeaves(st)
    if (data.length !== 4) continue
    const blocked = narrowedStage(s, name)
    if (blocked && s.stages.get(blocked)!.op.shape.length === 5) {
      s = blockedNarrowing(s, name, blocked, lanes, Number(config.epilogue_px ?? S.MAX_VECTORIZED))
      done.push(name)
      continue
    }
    const sp = S.split(s, name, data[1], { factor: lanes })
    s = S.reorder(sp.schedule, name, [data[0], sp.outer, data[2], data[3], sp.inner])
    // (its int32 values narrowed by it computed at its pixel, a vector of its channels: common.ts narrowedStage)
    const wide = narrowedStage(s, name)
    if (wide) {
      s = S.computeAt(s, wide, name, data[3])
      const wl = S.split(s, wide, dataLeaves(s.stages.get(wide)!)[1], { factor: lanes })
      s = S.vectorize(wl.schedule, wide, wl.inner)
      // (its parallel loop outside the pixel it is computed at)
      s = S.vectorize(parallelOuter(s, name, [data[0], sp.outer, data[2]]), name, sp.inner)
      done.push(name)
    }
  }
  return { schedule: s, done }
}

/**
 * The epilogue over requantized values in blocks (QLinearConvPacked's `channel_lanes`: [n, o / L, oh,
 * ow, L] int32): parallel over the blocks of L channels, at each block its int32 values (L channels
 * a vector: the sums read and the values stored contiguously), then the narrowing with a channel's
 * pixels fused and tiled by `tile` (the vector loop) and the block's L channels unrolled inside it —
 * each channel's bytes stored contiguously, the values read L apart, which the C compiler loads as
 * one interleaved group of L and takes apart with permutes (the depthwise channels form's epilogue,
 * int8-depthwise-channels.ts).
 */
const blockedNarrowing = (s0: S.Schedule, out: string, wide: string, lanes: number, tile: number): S.Schedule => {
  const [n, o, oh, ow] = dataLeaves(s0.stages.get(out)!)
  const sb = S.split(s0, out, o, { factor: lanes })
  const px = S.fuse(sb.schedule, out, oh, ow)
  const sp = S.split(px.schedule, out, px.fused, { factor: tile })
  let s = S.reorder(sp.schedule, out, [n, sb.outer, sp.outer, sp.inner, sb.inner])
  s = parallelOuter(s, out, [n, sb.outer])
  const leaves = s.stages.get(out)!.leaf
  const block = leaves[leaves.indexOf(sp.outer) - 1]
  s = S.unroll(S.vectorize(s, out, sp.inner), out, sb.inner)
  s = S.computeAt(s, wide, out, block)
  return S.vectorize(s, wide, dataLeaves(s.stages.get(wide)!)[4])
}

/** The epilogue's blocked int32 values (blockedNarrowing) where the conv's output stage narrows them: that output's pixels (oh · ow), else undefined. */
const blockedPixels = (s: S.Schedule, anchor: S.Stage): number | undefined => {
  if (positions(anchor).block !== 1) return undefined
  for (const name of s.order) {
    const st = s.stages.get(name)!
    const wide = st.attach.kind === "root" && st.op.shape.length === 4 ? narrowedStage(s, name) : undefined
    if (wide && s.stages.get(wide)!.op.shape.length === 5) return st.op.shape[2] * st.op.shape[3]
  }
  return undefined
}

/** The widest pixel tile: the CPU pipeline unrolls loops up to 16 copies (a longer tile would keep its accumulators in memory). */
const MAX_TILE = 16

export const int8DotTemplate: Template = {
  name: "int8_dot",
  tunable: true,
  space: (_outputs, base) => {
    const st = anchorStage(base)!
    const { pixel, block } = axesAt(st, positions(st))
    const px = st.axes.get(pixel)!.extent
    const blocks = st.axes.get(block)!.extent
    // (the blocked epilogue's tile of a channel's pixels, where the output narrows blocked int32 values)
    const epx = blockedPixels(base, st)
    return [
      { kind: "split", name: "tile_px", extent: px, candidates: divisors(px, MAX_TILE) },
      { kind: "split", name: "tile_blocks", extent: blocks, candidates: divisors(blocks, 4) },
      { kind: "choice", name: "unroll", candidates: [true, false] },
      { kind: "choice", name: "dot", candidates: ["vnni", "avx2", "simd128", "loops"] },
      ...(epx !== undefined ? [{ kind: "split", name: "epilogue_px", extent: epx, candidates: pixelTiles(epx) } as const] : []),
    ] satisfies Knob[]
  },
  defaults: (knobs, target) => {
    const split = (name: string) => knobs.find((k) => k.name === name) as Knob & { kind: "split" }
    // accumulators: half the vector registers (the rest hold the broadcast activations gcc hoists
    // and the weight vectors; at 28 of 32, gcc spilled accumulators every dot)
    // (counted in blocks of 16 int32 sums: a block is 16 / lanes of the target's vectors)
    const perBlock = Math.max(1, Math.ceil(DOT_LANES / target.vectorLanes))
    const cap = Math.max(1, Math.floor(accumulatorCap(target.vectorRegisters ?? 16) / perBlock))
    const want = Math.ceil(((target.fmaUnits ?? 2) * (target.fmaLatency ?? 4)) / perBlock)
    const px = split("tile_px")
    const tpx = largest(px.candidates, cap)
    // more channel blocks while their accumulators fit (each block's weight vector is shared by the
    // tile's pixels, each pixel's broadcast by the blocks), at least the pipes × latency where the axes allow
    const blocks = split("tile_blocks")
    const fit = blocks.candidates.filter((b) => b * tpx <= cap)
    const tb = largest(fit, Math.max(fit[fit.length - 1] ?? 1, Math.ceil(want / tpx)))
    const epx: Record<string, number> = knobs.some((k) => k.name === "epilogue_px") ? { epilogue_px: pixelTileDefault(candidatesOf(knobs, "epilogue_px"), target) } : {}
    return { tile_px: tpx, tile_blocks: tb, unroll: true, dot: target.int8Dot ?? "loops", ...epx }
  },
  apply: (_outputs, base, config) => {
    const anchor = anchorStage(base)!
    const pos = positions(anchor)
    let s = base
    // the activations and packed weights the product reads: computed once each, before it
    for (const t of anchor.op.inputs) if (t.kind === "compute" && s.stages.get(t.name)?.attach.kind === "inline") s = S.computeRoot(s, t.name)
    const cut = paddedColumnsCut(s, anchor)
    s = cut.schedule
    // and the epilogue's per-channel vectors (requantization multipliers): once, not per output
    for (const name of s.order) {
      const st = s.stages.get(name)!
      if (st.attach.kind === "inline" && st.op.shape.length === 1) s = S.computeRoot(s, name)
    }
    const w = S.cacheWrite(s, anchor.name, "local")
    s = w.schedule
    const local = w.stage
    const { pixel, block, lane, data } = axesAt(s.stages.get(anchor.name)!, pos)
    const sp = S.split(s, anchor.name, pixel, { factor: Number(config.tile_px) })
    const sb = S.split(sp.schedule, anchor.name, block, { factor: Number(config.tile_blocks) })
    s = sb.schedule
    const outer = data.filter((a) => a !== lane).map((a) => (a === pixel ? sp.outer : a === block ? sb.outer : a))
    s = S.reorder(s, anchor.name, [...outer, sb.inner, sp.inner, lane])
    s = S.computeAt(s, local, anchor.name, outer[outer.length - 1])
    const ls = s.stages.get(local)!
    const ldata = dataLeaves(ls)
    const red = ls.leaf.filter((a) => ls.axes.get(a)!.type === "reduce")
    // the reduction outside the tile (the sums stay in registers), the 4-deep dot innermost
    const lpos = axesAt(ls, pos)
    const tileAxes = [lpos.block, lpos.pixel]
    const rest = ldata.filter((a) => !tileAxes.includes(a) && a !== lpos.lane)
    s = S.reorder(s, local, [...rest, ...red.slice(0, -1), ...tileAxes, lpos.lane, red[red.length - 1]])
    if (config.dot === "simd128") {
      // the lanes in groups of the dot's 4, the groups outside the pixels: [block, group, pixel, 4 lanes, 4 deep]
      const g = S.split(s, local, lpos.lane, { factor: simd128Dot4x4.compute.shape[0] })
      s = S.reorder(g.schedule, local, [lpos.block, g.outer, lpos.pixel, g.inner, red[red.length - 1]])
      if (config.unroll) for (const a of [lpos.block, g.outer, lpos.pixel]) if (s.stages.get(local)!.axes.get(a)!.extent > 1) s = S.unroll(s, local, a)
      s = S.tensorize(s, local, g.inner, simd128Dot4x4)
    } else {
      if (config.unroll) for (const a of tileAxes) if (s.stages.get(local)!.axes.get(a)!.extent > 1) s = S.unroll(s, local, a)
      if (config.dot === "vnni" || config.dot === "avx2") s = S.tensorize(s, local, lpos.lane, config.dot === "vnni" ? vnniDot16x4 : avx2Dot16x4)
      else s = S.unroll(S.vectorize(s, local, lpos.lane), local, red[red.length - 1])
    }
    s = parallelOuter(s, anchor.name, outer.slice(0, -1).length ? outer.slice(0, -1) : outer)
    s = S.vectorize(s, anchor.name, lane)
    const ordered = pos.block === 1 ? epiloguesInLaneOrder(s, anchor, config) : { schedule: s, done: [] }
    return parallelize(ordered.schedule, true, [anchor.name, ...ordered.done, ...cut.done])
  },
}

/**
 * A K×K conv's padded activations u8 [n, C/4, rows, columns, 4] (the channels-in-lanes form's
 * copy): the column loop marked for lowering.LoopPartition, which cuts it where the padding's
 * column bounds change, so the interior copies its 4 channels without the column test (only the
 * row's, invariant in the loop), and the 4 channels unrolled inside. Its select per byte left gcc
 * a 4-lane loop (ResNet-18 int8's 14² 3×3 / 2 conv in a C harness: 0.185 → 0.168 ms, Zen 5).
 * A 1×1 conv's copy (no taps, no column padding) is left as it was.
 */
const paddedColumnsCut = (s0: S.Schedule, anchor: S.Stage): { schedule: S.Schedule; done: string[] } => {
  const body = anchor.op.body
  const done: string[] = []
  if (body.kind !== "reduce" || !body.axes.some((a, k) => k > 0 && k < body.axes.length - 1 && a.dom.extent > 1)) return { schedule: s0, done }
  let s = s0
  for (const t of anchor.op.inputs) {
    const st = s.stages.get(t.name)
    if (!st || st.attach.kind !== "root" || t.kind !== "compute" || t.dtype !== "uint8" || t.shape.length !== 5) continue
    const [n, cb, row, col, r] = dataLeaves(st)
    // (its parallel loop over the channel blocks and rows, outside the marked column loop)
    s = parallelOuter(S.unroll(S.pragma(s, t.name, col, LOOP_PARTITION_HINT, "1"), t.name, r), t.name, [n, cb, row])
    done.push(t.name)
  }
  return { schedule: s, done }
}

/** The row width of a flat [n, C/4, rows · width, 4] copy: the constant its pixel index is divided by, where it divides the pixels. */
const rowWidth = (t: ComputeTensor): number | undefined => {
  const q = t.axes[2].var.name
  const widths = collect(t.body, (e) => e.kind === "bin" && e.op === "floordiv" && e.a.kind === "var" && e.a.name === q && e.b.kind === "const").map((e) => (e.kind === "bin" && e.b.kind === "const" ? e.b.value : 0))
  const w = widths[0]
  return w !== undefined && w > 1 && widths.every((x) => x === w) && t.shape[2] % w === 0 ? w : undefined
}

/**
 * The pixels-in-lanes product's activations u8 [n, C/4, pixels, 4] (a copy of the NCHW input, 4
 * channels interleaved): the pixels split by the widest vector loop that divides them, 4 channels
 * unrolled inside, so the stores run along the pixels (the C compiler's interleaved stores) rather
 * than 4 bytes at a time. With `tile` (the product's parallel loop is over tiles of that many
 * pixels), the pixels split by the tile and its parallel loop over the tiles, outside the
 * channels: a static split gives each thread the same pixels the product's loop gives it, so a
 * thread's copies are in its own core's cache when its dots read them (over the channels, half of
 * each tile was the other core's: at 2 threads the 56² 144 → 24 conv took as long as at 1).
 */
/** Whether the product sums over taps besides the channels (a K×K conv's grid), not only over [C / 4, 4] (a 1×1 conv). */
const hasTaps = (anchor: S.Stage): boolean => anchor.op.body.kind === "reduce" && anchor.op.body.axes.length > 2

/**
 * Whether the activations copy can take the product's pixel tiles: a 1×1 conv whose copy reads the
 * input's pixels as one flat run (the input's planes as many pixels as the output's: unstrided,
 * unpadded). Otherwise it reads rows, and a tile of 16 pixels that is not whole rows divides every
 * pixel's index (ResNet-18's 28² 1×1 / 2 conv: its copy 1.26× slower, one thread).
 */
const pixelTiled = (anchor: S.Stage): boolean =>
  !hasTaps(anchor) &&
  anchor.op.inputs.every((t) => t.kind !== "compute" || t.dtype !== "uint8" || t.shape.length !== 4 || t.inputs.some((x) => x.shape.length === 4 && x.shape[2] * x.shape[3] === t.shape[2]))

const activationsAlongPixels = (s0: S.Schedule, anchor: S.Stage, tile?: number): { schedule: S.Schedule; done: string[] } => {
  let s = s0
  const done: string[] = []
  // (a K×K conv's grid: the padded input in whole rows, split by its rows — then a pixel's row and
  // column are the loops', not a division of the flat index; so is a 1×1 conv's copy that reads
  // rows, strided or padded, not by pixel tiles: split by 56 over 28-pixel rows, ResNet-18 int8's
  // 1×1 / 2 copy divided every index and gcc left it scalar, by its rows it takes 16-byte vectors)
  const taps = hasTaps(anchor)
  for (const t of anchor.op.inputs) {
    const st = s.stages.get(t.name)
    if (!st || st.attach.kind !== "root" || t.kind !== "compute" || t.dtype !== "uint8" || t.shape.length !== 4) continue
    const [n, cb, p, r] = dataLeaves(st)
    const byTile = !taps && tile !== undefined && t.shape[2] % tile === 0
    // (a flat copy, unstrided and unpadded, reads one run of pixels: no rows to split it by)
    const row = byTile || (!taps && pixelTiled(anchor)) ? undefined : rowWidth(t)
    const sp = S.split(s, t.name, p, { factor: byTile ? tile : row ?? Math.max(...divisors(t.shape[2], S.MAX_VECTORIZED)) })
    s = S.unroll(sp.schedule, t.name, r)
    // a padded row: its columns cut where the padding's bounds change (LoopPartition), so the interior copies without a select
    if (row !== undefined) s = S.pragma(s, t.name, sp.inner, LOOP_PARTITION_HINT, "1")
    if (byTile) s = parallelOuter(S.reorder(s, t.name, [n, sp.outer, cb, sp.inner, r]), t.name, [n, sp.outer])
    else s = parallelOuter(s, t.name, [n, cb, sp.outer])
    done.push(t.name)
  }
  return { schedule: s, done }
}

/**
 * The register tile of the pixels-in-lanes product, at the stage `name` computed at its tile
 * ([n, o, p] over tile_o channels and tile_pv · 16 pixels): the pixels split by the dot's 16
 * lanes, the reduction outside the tile (the sums stay in registers), the 4-deep dot innermost,
 * the tile's channels and pixel vectors unrolled, the [16 × 4] dot tensorized onto vnniDotPx16x4
 * (the activations' 64 bytes loaded, the channel's 4 weights broadcast) or left as loops.
 */
const pxTile = (s0: S.Schedule, name: string, config: Config): S.Schedule => {
  const st = s0.stages.get(name)!
  const [n, o, p] = dataLeaves(st)
  const red = st.leaf.filter((a) => st.axes.get(a)!.type === "reduce")
  const sl = S.split(s0, name, p, { factor: DOT_LANES })
  let s = S.reorder(sl.schedule, name, [n, ...red.slice(0, -1), o, sl.outer, sl.inner, red[red.length - 1]])
  if (config.unroll) for (const a of [o, sl.outer]) if (s.stages.get(name)!.axes.get(a)!.extent > 1) s = S.unroll(s, name, a)
  if (config.dot === "vnni") return S.tensorize(s, name, sl.inner, vnniDotPx16x4)
  return S.unroll(S.vectorize(s, name, sl.inner), name, red[red.length - 1])
}

/**
 * The pixels-in-lanes sums at root, in a local copy a register tile (`tile_o` channels × `tile_pv`
 * vectors of pixels) at a time, the parallel loop over the pixel tiles (outside the channel tiles:
 * a pixel tile's activations stay in the L1 across them) or over the channel tiles (each a run of
 * the sums the epilogue then reads a channel tile at a time).
 */
const sumsAtRoot = (s0: S.Schedule, anchor: S.Stage, config: Config, outer: "pixels" | "channels"): S.Schedule => {
  const w = S.cacheWrite(s0, anchor.name, "local")
  const [n, o, p] = dataLeaves(w.schedule.stages.get(anchor.name)!)
  const so = S.split(w.schedule, anchor.name, o, { factor: Number(config.tile_o) })
  const sp = S.split(so.schedule, anchor.name, p, { factor: DOT_LANES * Number(config.tile_pv) })
  const [first, second] = outer === "pixels" ? [sp.outer, so.outer] : [so.outer, sp.outer]
  let s = S.reorder(sp.schedule, anchor.name, [n, first, second, so.inner, sp.inner])
  s = pxTile(S.computeAt(s, w.stage, anchor.name, second), w.stage, config)
  return S.vectorize(parallelOuter(s, anchor.name, [n, first]), anchor.name, sp.inner)
}

/**
 * Whether the one stage reading a K×K conv's grid sums (op-library-int8-blocked.ts's
 * packedConvPixels: [n, o, p] over p = oh·Wq + ow) is the epilogue over the output's pixels,
 * through the sums' compaction (inline, [n, o, oh, ow]): root, elementwise, of the output's shape,
 * fewer pixels than the grid.
 */
const gridEpilogue = (s: S.Schedule, anchor: S.Stage, out: S.Stage): boolean => {
  const [N, M, P] = anchor.op.shape
  const [n, o, oh, ow] = out.op.shape
  const direct = S.consumersOf(s, anchor.name)
  const dense = direct.length === 1 ? s.stages.get(direct[0]) : undefined
  return (
    out.attach.kind === "root" && out.op.body.kind !== "reduce" && out.op.shape.length === 4 && n === N && o === M && oh * ow < P &&
    dense !== undefined && dense.attach.kind === "inline" && dense.op.shape.join() === out.op.shape.join()
  )
}

/**
 * The grid form: the grid's sums at root, a channel tile (`tile_o` channels) at a time in the
 * parallel loop, each its register tiles of `tile_o` × `tile_pv` vectors (the grid's pixels are
 * whole tiles; the epilogue reads only [0, (OH − 1)·Wq + OW) of them, so a tile computed at the
 * epilogue would be cut short); then the epilogue a channel tile at a time, its pixels fused (the
 * output's rows are contiguous) in vector loops of a multiple of 16 where one divides them, the
 * tile's sums compacted to the output's pixels before it (rows vectorized), so the epilogue reads
 * and writes whole vectors along the pixels.
 */
const gridAtRoot = (s0: S.Schedule, anchor: S.Stage, out: S.Stage, config: Config): S.Schedule => {
  const to = Number(config.tile_o)
  const dense = S.consumersOf(s0, anchor.name)[0]
  const atTile = config.sums === "channel_tile"
  let s = atTile ? s0 : sumsAtRoot(s0, anchor, config, "channels")
  if (config.compaction === "none") return gridByRows(s, anchor, out, config)
  // the epilogue
  const [n, o, oh, ow] = dataLeaves(out)
  const f = S.fuse(s, out.name, oh, ow)
  const sv = S.split(f.schedule, out.name, f.fused, { factor: gridVectorLoop(out.op.shape[2] * out.op.shape[3]) })
  const so = S.split(sv.schedule, out.name, o, { factor: to })
  s = S.reorder(so.schedule, out.name, [n, so.outer, so.inner, sv.outer, sv.inner])
  // (the parallel loop over the channel tiles, n and so.outer fused where n is short: the compaction at it)
  s = parallelOuter(S.vectorize(s, out.name, sv.inner), out.name, [n, so.outer])
  const leaves = s.stages.get(out.name)!.leaf
  const tileLoop = leaves[leaves.indexOf(so.inner) - 1]
  s = S.computeAt(s, dense, out.name, tileLoop)
  // (the sums computed at the compaction's outermost loop, its batch: the compaction is what reads them)
  if (atTile) s = sumsAtTile(s, anchor, dense, s.stages.get(dense)!.leaf[0], config)
  // (its rows vectorized: a row longer than a vector loop takes, 112 at a 112² output, split by the widest one that divides it)
  const ds = s.stages.get(dense)!
  const row = ds.leaf[ds.leaf.length - 1]
  const width = ds.axes.get(row)!.extent
  if (width <= S.MAX_VECTORIZED) return S.vectorize(s, dense, row)
  const factor = Math.max(...divisors(width, S.MAX_VECTORIZED))
  if (factor === 1) return s
  const sr = S.split(s, dense, row, { factor })
  return S.vectorize(sr.schedule, dense, sr.inner)
}

/**
 * The grid form's epilogue reading the grid's sums itself (`compaction: none`): a channel tile at a
 * time in the parallel loop, then the output's rows, each row's pixels the vector loop (a row wider
 * than a vector loop takes, 112 at the stem, split by the widest multiple of 16 that divides it, else
 * the widest divisor) — the compaction stays inline, so a row reads the grid's row [oh·Wq, oh·Wq +
 * OW) contiguously and there is no pass copying the tile's sums (ResNet-18 int8's stem: 3.2 MB of
 * int32 read and written a run, 28²: rows of 28 int32 copied with gcc's scalar tails). A row of OW
 * pixels that is not whole vectors stores its last vector over its last 16 pixels again (c's
 * requantizing stores, requantize-store.ts), so it suits where the c emitter renders those.
 */
const gridByRows = (s0: S.Schedule, anchor: S.Stage, out: S.Stage, config: Config): S.Schedule => {
  const [n, o, oh, ow] = dataLeaves(out)
  const so = S.split(s0, out.name, o, { factor: Number(config.tile_o) })
  let s = S.reorder(so.schedule, out.name, [n, so.outer, so.inner, oh, ow])
  const width = out.op.shape[3]
  let lanes = ow
  if (width > S.MAX_VECTORIZED) {
    const sr = S.split(s, out.name, ow, { factor: gridVectorLoop(width) })
    s = sr.schedule
    lanes = sr.inner
  }
  s = parallelOuter(S.vectorize(s, out.name, lanes), out.name, [n, so.outer])
  if (config.sums !== "channel_tile") return s
  const leaves = s.stages.get(out.name)!.leaf
  // (the sums computed at the channel tile: the loop just outside its channels)
  return sumsAtTile(s, anchor, out.name, leaves[leaves.indexOf(so.inner) - 1], config)
}

/**
 * The grid's sums computed at the epilogue's channel tile (`sums: channel_tile`): the tile's
 * `tile_o` channels over the whole grid, each register tile (`tile_o` × `tile_pv` vectors) in a local
 * copy, just before the compaction and the epilogue read them — a channel tile's sums (tile_o · P
 * int32) stay in the L2 between the dot and the epilogue, where the whole grid's sums at root
 * (ResNet-18 int8's stem: 64 × 12,800 int32, 3.3 MB) went out to the L3 and back. The region the
 * compaction reads is the grid's first (OH − 1)·Wq + OW pixels; the pixel tiles that run past it
 * are computed whole (the grid holds them) and stored up to it.
 */
const sumsAtTile = (s0: S.Schedule, anchor: S.Stage, reader: string, at: string, config: Config): S.Schedule => {
  const w = S.cacheWrite(s0, anchor.name, "local")
  const [n, o, p] = dataLeaves(w.schedule.stages.get(anchor.name)!)
  const sp = S.split(w.schedule, anchor.name, p, { factor: DOT_LANES * Number(config.tile_pv) })
  let s = S.reorder(sp.schedule, anchor.name, [n, sp.outer, o, sp.inner])
  s = pxTile(S.computeAt(s, w.stage, anchor.name, sp.outer), w.stage, config)
  return S.vectorize(S.computeAt(s, anchor.name, reader, at), anchor.name, sp.inner)
}

/** The grid form's epilogue vector loop over a channel's OH·OW output pixels: the widest multiple of 16 that divides them (up to a vector loop's widest), else the widest divisor. */
const gridVectorLoop = (pixels: number): number => {
  const whole = divisors(pixels, S.MAX_VECTORIZED).filter((d) => d % DOT_LANES === 0)
  return whole.length ? whole[whole.length - 1] : Math.max(...divisors(pixels, S.MAX_VECTORIZED))
}

/**
 * A grid form's requantized int32 stage (common.ts narrowedStage) and its epilogue's pixels, where
 * the one epilogue reading the sums reads fewer pixels than the grid (a K×K conv's grid, through its
 * compaction) and narrows an int32 stage to 8 bits.
 */
const gridNarrowed = (s: S.Schedule, anchor: S.Stage): { readonly wide: string; readonly pixels: number } | undefined => {
  const readers = S.effectiveConsumers(s, anchor.name)
  const out = readers.length === 1 ? s.stages.get(readers[0])! : undefined
  if (!out || out.op.shape.length !== 4) return undefined
  const pixels = out.op.shape[2] * out.op.shape[3]
  const wide = pixels < anchor.op.shape[2] ? narrowedStage(s, out.name) : undefined
  return wide ? { wide, pixels } : undefined
}

/** The bytes of a grid form's sums (the product's whole [n, o, p] int32), where its one epilogue reads them through the compaction (gridEpilogue); undefined elsewhere. */
const gridSumsBytes = (s: S.Schedule, anchor: S.Stage): number | undefined => {
  const readers = S.effectiveConsumers(s, anchor.name)
  const out = readers.length === 1 ? s.stages.get(readers[0])! : undefined
  return out && gridEpilogue(s, anchor, out) ? anchor.op.shape.reduce((a, b) => a * b, 4) : undefined
}

/**
 * Whether a grid's sums can be computed at the epilogue's channel tile: where the whole grid's
 * (`bytes`) exceed half the target's L2 (what a block reused across a loop may keep there: beside
 * them the padded input the dot reads and the output the epilogue writes) and a tile's (`tileO`
 * of the `channels`) fit that half.
 */
export const sumsAtChannelTile = (bytes: number, channels: number, tileO: number, target: ScheduleTarget): boolean => {
  const half = halfL2(target)
  return bytes > half && (bytes / channels) * tileO <= half
}

/**
 * The pixels-in-lanes form's requantized int32 stage (common.ts narrowedStage), where the one
 * epilogue reading the sums reads all of its pixels (not a grid's compaction): a root stage narrowed
 * after it when the pixel tile is shorter than a vector loop's widest (`epilogue` int32, the knob's
 * absent value: the schedule before the knob), or fused into the 8-bit store.
 */
const pixelsNarrowed = (s: S.Schedule, anchor: S.Stage): string | undefined => {
  const first = S.effectiveConsumers(s, anchor.name)
  const epiPixels = first.length === 1 ? s.stages.get(first[0])!.op.shape.slice(2).reduce((a, b) => a * b, 1) : 0
  return epiPixels === anchor.op.shape[2] ? narrowedStage(s, first[0]) : undefined
}

/** The pixels-in-lanes product's default register tile: at most 4 pixel vectors (each a load beside the channels' broadcasts; 64 pixels, the widest vector loop of the epilogue). */
const MAX_PX_VECTORS = 4
/**
 * Pixel vectors the knob offers at most where no grid is involved (a 1×1 conv): a tile past 4 —
 * 7 of 28²'s 49 vectors, 7 × 2 issuing 9 loads a 14 dots where 1 × 16 issues 17 a 16 — is the
 * tuner's to try, its epilogue's pixels in vector loops of whole vectors that divide them. Not the
 * default: measured neither faster on ResNet-18's 28² 1×1 / 2 conv nor on MobileNetV2's long
 * reductions (docs/backends.md, 2026-11-28, sixteenth session).
 */
const MAX_PX_VECTORS_SPACE = 16

/**
 * The int8 template of a conv with the output's pixels in the lanes (tag int8_dot_px: [n, o,
 * pixels] int32 sums, reduce [C / 4, 4]): a register tile of `tile_o` channels × `tile_pv` vectors
 * of 16 pixels (16 int32 accumulators each) across the whole reduction, the channels' 4 weights
 * broadcast and each pixel vector's 64 bytes loaded once a reduction step (pxTile). Where one
 * epilogue stage reads the sums (the requantization [n, o, oh, ow]), the tile is computed at that
 * stage's tile — its output pixels fused into one loop, split by the tile's pixels (vectorized)
 * outside the tile's channels — so the sums go from registers to the epilogue through a small
 * local buffer instead of a round trip through memory (at 112×112 × 96 channels, 4.8 MB of int32);
 * else the product is a root stage with its tile in a local copy. Pixel tiles are the parallel
 * loop, outside the channel tiles (a pixel tile's activations, C bytes a pixel, stay in the L1
 * across every channel tile). Defaults: as many pixel vectors as divide the pixels up to 4, the
 * channels to fill the accumulator cap (half the vector registers).
 */
export const int8DotPxTemplate: Template = {
  name: "int8_dot_px",
  tunable: true,
  space: (_outputs, base) => {
    const st = anchorStage(base)!
    const [, o, p] = dataLeaves(st)
    const M = st.axes.get(o)!.extent
    const PV = Math.floor(st.axes.get(p)!.extent / DOT_LANES)
    const grid = gridNarrowed(base, st)
    const sums = gridSumsBytes(base, st)
    return [
      { kind: "split", name: "tile_o", extent: M, candidates: divisors(M, MAX_TILE) },
      { kind: "split", name: "tile_pv", extent: PV, candidates: divisors(PV, grid || sums ? MAX_PX_VECTORS : MAX_PX_VECTORS_SPACE) },
      { kind: "choice", name: "unroll", candidates: [true, false] },
      { kind: "choice", name: "dot", candidates: ["vnni", "loops"] },
      // (a 1×1 conv's activations copy: its parallel loop over the product's pixel tiles, or over the channels)
      ...(pixelTiled(st) ? [{ kind: "choice", name: "activations", candidates: ["pixel_tiles", "channels"] } satisfies Knob] : []),
      // (a grid's epilogue: the requantization in the loop that stores the 8-bit values, or an int32 stage narrowed after it)
      ...(grid ? [{ kind: "choice", name: "epilogue", candidates: ["fused", "int32"], extent: grid.pixels, absent: "fused" } satisfies Knob] : []),
      // (the epilogue over all the product's pixels: an int32 stage narrowed after it where the pixel tile is under a vector loop's widest, or fused)
      ...(!grid && pixelsNarrowed(base, st) ? [{ kind: "choice", name: "epilogue", candidates: ["int32", "fused"], absent: "int32" } satisfies Knob] : []),
      // (a grid's sums: at root, or computed at the epilogue's channel tile; its extent the bytes of the whole grid's sums)
      ...(sums ? [{ kind: "choice", name: "sums", candidates: ["root", "channel_tile"], extent: sums, absent: "root" } satisfies Knob] : []),
      // (a grid's sums compacted to the output's pixels at the epilogue's channel tile, or read by the epilogue's rows from the grid itself: gridByRows)
      ...(sums ? [{ kind: "choice", name: "compaction", candidates: ["tile", "none"], absent: "tile" } satisfies Knob] : []),
    ] satisfies Knob[]
  },
  defaults: (knobs, target) => {
    const split = (name: string) => knobs.find((k) => k.name === name) as Knob & { kind: "split" }
    const perBlock = Math.max(1, Math.ceil(DOT_LANES / target.vectorLanes))
    const cap = Math.max(1, Math.floor(accumulatorCap(target.vectorRegisters ?? 16) / perBlock))
    const pv = largest(split("tile_pv").candidates, Math.min(MAX_PX_VECTORS, cap))
    const to = largest(split("tile_o").candidates, Math.max(1, Math.floor(cap / pv)))
    const base: Config = { tile_o: to, tile_pv: pv, unroll: true, dot: target.int8Dot === "vnni" ? "vnni" : "loops" }
    // (a grid epilogue whose vector loop is shorter than the widest, 16 at 28²'s 784 pixels: stored
    // int8 in that loop, every int32 and float step took gcc's 16-byte vectors; the int32 stage's
    // loop is whole vectors of int32. Where the C compiler does not vectorize outer loops (js,
    // wasm), nothing to gain from the extra pass; nor where the c emitter renders the requantizing
    // store in whole vectors itself, common.ts fusedEpilogue)
    // The pixels-in-lanes epilogue (no grid: the knob without an extent) likewise fused only where c
    // renders the requantizing store itself; js and wasm keep the int32 stage they had before the knob
    const epilogue = knobs.find((k) => k.name === "epilogue")
    const gridEpilogueDefault = (e: Knob) => (!fusedEpilogue(target) && gridVectorLoop(e.extent ?? 0) < S.MAX_VECTORIZED ? "int32" : "fused")
    const withEpilogue: Config = epilogue ? { ...base, epilogue: epilogue.extent === undefined ? (target.requantizeStores === true ? "fused" : "int32") : gridEpilogueDefault(epilogue) } : base
    // (a grid's sums past half the L2 are evicted between the dot and the epilogue: computed a
    // channel tile at a time where a tile's fit half the L2 and the epilogue is fused — with the
    // int32 stage, ResNet-18 int8's three 28² convs read 15–18% slower that way, Zen 5)
    const sums = knobs.find((k) => k.name === "sums")
    const config: Config = sums ? { ...withEpilogue, sums: withEpilogue.epilogue !== "int32" && sumsAtChannelTile(sums.extent ?? 0, split("tile_o").extent, to, target) ? "channel_tile" : "root" } : withEpilogue
    // (a grid's epilogue by rows, reading the grid without the compaction, where the c emitter renders
    // the requantizing store in 16-lane statements — a row of 28 or 56 pixels then two or four of
    // them, the last over its last 16 pixels; elsewhere a row not whole vectors is a scalar tail —
    // and the epilogue is fused: an int32 stage keeps the compaction)
    const withCompaction: Config = knobs.some((k) => k.name === "compaction") ? { ...config, compaction: target.requantizeStores === true && config.epilogue !== "int32" ? "none" : "tile" } : config
    return knobs.some((k) => k.name === "activations") ? { ...withCompaction, activations: "pixel_tiles" } : withCompaction
  },
  apply: (_outputs, base, config) => {
    const anchor = anchorStage(base)!
    let s = base
    for (const t of anchor.op.inputs) if (t.kind === "compute" && s.stages.get(t.name)?.attach.kind === "inline") s = S.computeRoot(s, t.name)
    for (const name of s.order) {
      const st = s.stages.get(name)!
      if (st.attach.kind === "inline" && st.op.shape.length === 1) s = S.computeRoot(s, name)
    }
    const [N, M, P] = anchor.op.shape
    const to = Number(config.tile_o)
    const F = DOT_LANES * Number(config.tile_pv)
    // (a tile of fewer pixels than a vector loop's widest, 16 where 16 · 4 does not divide them —
    // 28² is 49 vectors: the requantized values an int32 stage at root, the tile computed at it,
    // then narrowed in a loop of its own; computed in the loop that stores the 8-bit values, they
    // took gcc's 16-byte vectors for every int32 and float step, common.ts narrowedStage)
    // (the tile at the epilogue's, not the grid form's: the epilogue's pixels are the product's)
    const wide = F < S.MAX_VECTORIZED && config.epilogue !== "fused" ? pixelsNarrowed(s, anchor) : undefined
    if (wide) s = S.computeRoot(s, wide)
    // (a grid's epilogue as an int32 stage: it is then the stage that reads the compacted sums, the 8-bit narrowing a root loop of its own)
    const gridWide = config.epilogue === "int32" ? gridNarrowed(s, anchor) : undefined
    if (gridWide) s = S.computeRoot(s, gridWide.wide)
    const readers = S.effectiveConsumers(s, anchor.name)
    const out = readers.length === 1 ? s.stages.get(readers[0])! : undefined
    const [on, om, oh, ow] = out?.op.shape ?? []
    let skip: string[]
    if (out && out.attach.kind === "root" && out.op.body.kind !== "reduce" && out.op.shape.length === 4 && on === N && om === M && oh * ow === P && dataLeaves(out).length === 4) {
      // the tile computed at the epilogue's tile: [n, pixel tiles, channel tiles, channels, pixels]
      const [n, o, y, x] = dataLeaves(out)
      const f = S.fuse(s, out.name, y, x)
      const sf = S.split(f.schedule, out.name, f.fused, { factor: F })
      const so = S.split(sf.schedule, out.name, o, { factor: to })
      s = S.reorder(so.schedule, out.name, [n, sf.outer, so.outer, so.inner, sf.inner])
      s = S.computeAt(s, anchor.name, out.name, so.outer)
      s = pxTile(s, anchor.name, config)
      s = parallelOuter(s, out.name, [n, sf.outer])
      // (a tile past a vector loop's widest — 7 vectors, 112 pixels — its pixels in vector loops of
      // whole vectors of 16 that divide it)
      const pv = Number(config.tile_pv)
      const vl = DOT_LANES * largest(divisors(pv, Math.floor(S.MAX_VECTORIZED / DOT_LANES)), S.MAX_VECTORIZED / DOT_LANES)
      if (F > S.MAX_VECTORIZED) {
        const sv = S.split(s, out.name, sf.inner, { factor: vl })
        s = S.vectorize(sv.schedule, out.name, sv.inner)
      } else s = S.vectorize(s, out.name, sf.inner)
      skip = [out.name]
    } else if (out && gridEpilogue(s, anchor, out)) {
      s = gridAtRoot(s, anchor, out, config)
      skip = [out.name, anchor.name]
    } else {
      s = sumsAtRoot(s, anchor, config, "pixels")
      skip = [anchor.name]
    }
    // (the grid form's parallel loop is over channel tiles; a configuration without the knob, a tuning record's of before it, over the channels)
    const u = activationsAlongPixels(s, anchor, config.activations === "pixel_tiles" && pixelTiled(anchor) ? F : undefined)
    return parallelize(u.schedule, true, [...skip, ...u.done])
  },
}
