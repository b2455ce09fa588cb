// The int8 depthwise template: the int32 sums of a depthwise 8-bit conv (op-library-int8-depthwise.ts,
// tag int8_depthwise: [n, o, oh, ow], reduce [kh, kw] over the int16 copies of the padded input) as a
// tile of `tile_px` output pixels of one channel — whole rows of its fused pixels where a row is at
// most a vector loop long, else columns of a row — in the vector lanes, the sums held in a local
// copy across the unrolled taps, computed at the tile of the epilogue (the requantization), which
// stores the tile's bytes contiguously. Knobs: the tile, whether the kernel loops are unrolled,
// and whether the taps run inside the tile's pixel loop (each pixel's sum across its taps: the C
// compiler's outer-loop vectorizer takes the pixel loop) or outside it (a vector loop over the
// pixels a tap: what an emitter that vectorizes only an innermost loop takes, js and wasm).
import * as S from "../../ast/schedule/schedule.js"
import type { Reduce } from "../../ast/te/expr.js"
import { anchorStage, candidatesOf, dataLeaves, divisors, parallelize, parallelOuter } from "./common.js"
import type { Knob, Template } from "./template.js"

/** The padded, zero-shifted input the product reads (its 6-D operand). */
const padOf = (anchor: S.Stage): string | undefined => anchor.op.inputs.find((t) => t.kind === "compute" && t.shape.length === 6)?.name

/**
 * The epilogue the tile is made of: the one stage that reads the sums (the requantization, or the
 * sums' copy), root, of shape [n, o, oh, ow] over the sums' [n, o, oh·ow]; undefined for any other
 * reader pattern.
 */
const epilogue = (s: S.Schedule, anchor: S.Stage): string | undefined => {
  const readers = S.effectiveConsumers(s, anchor.name)
  if (readers.length !== 1) return undefined
  const st = s.stages.get(readers[0])!
  const [n, o, oh, ow] = st.op.shape
  const [an, ao, ap] = anchor.op.shape
  if (st.attach.kind !== "root" || st.op.body.kind === "reduce" || st.op.shape.length !== 4 || n !== an || o !== ao || oh * ow !== ap) return undefined
  return readers[0]
}

/**
 * The tiles of a channel's pixels (the vector loop, at most MAX_VECTORIZED long): the divisors of
 * the pixels and the multiples of 4 (the narrowest vector's lanes) that fit, the last tile of those
 * cut short (a guarded tail loop partitioning peels off).
 */
const pixelTiles = (pixels: number): number[] => {
  const cap = Math.min(pixels, S.MAX_VECTORIZED)
  const fours = Array.from({ length: Math.floor(cap / 4) }, (_, k) => 4 * (k + 1))
  return [...new Set([...divisors(pixels, cap), ...fours])].sort((x, y) => x - y)
}

/** The padded input's rows vectorized, split where longer than a vector loop (at the largest divisor of a row that is). */
const vectorizeRows = (s: S.Schedule, pad: string): S.Schedule => {
  const st = s.stages.get(pad)!
  const j = st.leaf[st.leaf.length - 1]
  const ext = st.axes.get(j)!.extent
  if (ext <= S.MAX_VECTORIZED) return S.vectorize(s, pad, j)
  const sp = S.split(s, pad, j, { factor: Math.max(...divisors(ext, S.MAX_VECTORIZED)) })
  return S.vectorize(sp.schedule, pad, sp.inner)
}

export const int8DepthwiseTemplate: Template = {
  name: "int8_depthwise",
  tunable: true,
  space: (_outputs, base) => {
    const st = anchorStage(base)!
    const axes = (st.op.body as Reduce).axes
    const [kh, kw] = axes.map((a) => a.dom.extent).slice(-2)
    // (a grouped conv's taps are outside the pixel loop already, with its channel loop)
    const tapsKnob = epilogue(base, st) !== undefined && axes.length === 2
    return [
      { kind: "split", name: "tile_px", extent: st.op.shape[2], candidates: pixelTiles(st.op.shape[2]) },
      ...(kh > 1 ? [{ kind: "choice", name: "unroll_kh", candidates: [true, false], extent: kh } as const] : []),
      ...(kw > 1 ? [{ kind: "choice", name: "unroll_kw", candidates: [true, false], extent: kw } as const] : []),
      ...(epilogue(base, st) ? [{ kind: "choice", name: "at", candidates: ["tile", "channel"] } as const] : []),
      ...(tapsKnob ? [{ kind: "choice", name: "taps", candidates: ["inside", "outside"], absent: "inside" } as const] : []),
    ] satisfies Knob[]
  },
  defaults: (knobs, target) => {
    // all of a channel's pixels where the vector loop takes them, else the most whole vectors it
    // takes (their sums in registers across the taps)
    const tiles = candidatesOf(knobs, "tile_px")
    const lanes = Math.max(1, target.vectorLanes)
    const all = tiles[tiles.length - 1]
    const whole = tiles.filter((t) => t % lanes === 0)
    const cfg: Record<string, string | number | boolean> = { tile_px: all < S.MAX_VECTORIZED || whole.length === 0 ? all : whole[whole.length - 1] }
    // the padded input whole first, the sums a tile at a time (in L1 across the taps); a channel
    // at a time is the tuner's to try. Zen 4, 1 thread, each conv in a C loop timing CPU time, tile
    // → channel: 112×112×32 0.70 → 0.59 ms, 56×56×144 0.96 → 1.29 (gcc leaves that epilogue's
    // loop scalar: "control flow in loop"), 14×14×384 0.15 → 0.21
    if (knobs.some((k) => k.name === "at")) cfg.at = "tile"
    // kernels of up to 3×3 unrolled (their weights broadcast once a channel)
    const taps = knobs.reduce((p, k) => (k.kind === "choice" && k.extent !== undefined ? p * k.extent : p), 1)
    for (const k of knobs) if (k.name === "unroll_kh" || k.name === "unroll_kw") cfg[k.name] = taps <= 9
    // the taps inside the pixel loop where the C compiler vectorizes that loop around them; outside
    // it where the emitter vectorizes only an innermost loop (inside, the pixel loop stays scalar:
    // MobileNetV2 int8's depthwise convs on wasm ran their products one pixel at a time)
    if (knobs.some((k) => k.name === "taps")) cfg.taps = target.outerLoopVectorizer === false ? "outside" : "inside"
    return cfg
  },
  apply: (_outputs, base, config) => {
    const anchor = anchorStage(base)!
    let s = base
    // the weights and the epilogue's per-channel multipliers: computed once, before the tiles; the
    // padded input too, or a channel's of it at that channel (below)
    const pad = padOf(anchor)
    for (const t of anchor.op.inputs) if (t.kind === "compute" && s.stages.get(t.name)?.attach.kind === "inline") s = S.computeRoot(s, t.name)
    for (const name of s.order) {
      const st = s.stages.get(name)!
      if (st.attach.kind === "inline" && st.op.shape.length === 1) s = S.computeRoot(s, name)
    }
    const tile = Number(config.tile_px)
    const out = epilogue(s, anchor)
    if (!out) {
      // no epilogue to tile: the sums computed at root, a tile of pixels in the vector lanes
      const [n, m, p] = dataLeaves(anchor)
      const red = anchor.leaf.filter((a) => anchor.axes.get(a)!.type === "reduce")
      const sp = S.split(s, anchor.name, p, { factor: tile })
      s = S.reorder(sp.schedule, anchor.name, [n, m, sp.outer, ...red, sp.inner])
      s = S.vectorize(parallelOuter(s, anchor.name, [n, m]), anchor.name, sp.inner)
      return parallelize(s, true, anchor.name)
    }
    // the epilogue's tile: its pixels fused (the output's rows are contiguous), split by the tile
    const [n, m, oh, ow] = dataLeaves(s.stages.get(out)!)
    const px = S.fuse(s, out, oh, ow)
    const sp = S.split(px.schedule, out, px.fused, { factor: tile })
    s = parallelOuter(sp.schedule, out, [n, m])
    s = S.vectorize(s, out, sp.inner)
    // the sums computed at the tile (a buffer of the tile's) or at the channel (its pixels' sums in
    // L2, its padded input computed there too, into L2, not the whole input's copies through L3
    // first), their pixels split by the tile as the epilogue's are (at the tile, the loop over the
    // tile's pixels as long as the tile, the outer one a single iteration there), the taps outside
    // each tile's pixels (its sums stay in L1 across them)
    const local = anchor.name
    const leaves = s.stages.get(out)!.leaf
    const channel = config.at === "channel"
    s = S.computeAt(s, local, out, channel ? leaves[leaves.indexOf(sp.outer) - 1] : sp.outer)
    const ls = s.stages.get(local)!
    const [ln, lm, lp] = dataLeaves(ls)
    const red = ls.leaf.filter((a) => ls.axes.get(a)!.type === "reduce")
    const [rkh, rkw] = red.slice(-2)
    const lsp = S.split(s, local, lp, { factor: tile })
    // (a grouped conv's channel loop outside the tile's vector loop, the taps inside it with it)
    const outside = red.length > 2 || config.taps === "outside"
    s = S.reorder(lsp.schedule, local, outside ? [ln, lm, lsp.outer, ...red, lsp.inner] : [ln, lm, lsp.outer, lsp.inner, rkh, rkw])
    s = S.vectorize(s, local, lsp.inner)
    if (config.unroll_kh) s = S.unroll(s, local, rkh)
    if (config.unroll_kw) s = S.unroll(s, local, rkw)
    if (pad && channel) s = S.computeAt(s, pad, local, lm)
    if (pad) s = vectorizeRows(s, pad)
    // the padded input the copies read: at the copies' channel, or before them
    const padded = pad ? s.stages.get(pad)!.op.inputs.find((t) => t.kind === "compute")?.name : undefined
    if (pad && padded) {
      const ps = s.stages.get(pad)!
      s = channel ? S.computeAt(s, padded, pad, ps.leaf[1]) : S.computeRoot(s, padded)
    }
    return parallelize(s, true, out)
  },
}
