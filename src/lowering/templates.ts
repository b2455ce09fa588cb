// Schedule templates: for each kind of fused group (by its anchor op), the schedule as a function
// of knobs declared as data — split factors, reorder choices, unroll / vectorize / parallel — with
// defaults per target. The defaults are the untuned schedules; the auto-tuner searches the knobs.
import type { FusedGroup } from "../rewrite/fuse-ops.js"
import * as S from "../ast/schedule/schedule.js"
import type { Reduce } from "../ast/te/expr.js"
import type { ComputeTag, ComputeTensor } from "../ast/te/tensor.js"
import type { ScheduleFn } from "./lower-group.js"

export type Knob =
  | { readonly kind: "split"; readonly name: string; readonly extent: number; readonly candidates: readonly number[] }
  | {
      readonly kind: "choice"
      readonly name: string
      readonly candidates: readonly (string | number | boolean)[]
      /** The extent of the loop the choice is about, where there is one (an unroll's loop). */
      readonly extent?: number
      /**
       * What a config without this knob means: for a knob added to a template later, the value
       * that gives the schedule its records were tuned with (so older tuning logs still apply).
       */
      readonly absent?: string | number | boolean
    }

export type Config = Readonly<Record<string, string | number | boolean>>

/** A config's value of a knob: the knob's `absent` value where the config lacks it. */
export const knobValue = (knob: Knob, config: Config): string | number | boolean | undefined =>
  config[knob.name] ?? (knob.kind === "choice" ? knob.absent : undefined)

/**
 * `config` with the `absent` values of the knobs it lacks filled in: a config from before a knob
 * was added and the same config with the knob's absent value are one schedule (one hash).
 */
export const completeConfig = (knobs: readonly Knob[], config: Config): Config => {
  const missing = knobs.filter((k) => k.kind === "choice" && k.absent !== undefined && config[k.name] === undefined)
  return missing.length ? { ...config, ...Object.fromEntries(missing.map((k) => [k.name, (k as { absent: string | number | boolean }).absent])) } : config
}

export interface ScheduleTarget {
  /** fp32 lanes of the vector unit (16 AVX-512, 8 AVX2, 4 SIMD128, 1 scalar). */
  readonly vectorLanes: number
  readonly cores: number
}

export interface Template {
  readonly name: string
  /** Whether the auto-tuner searches this template's knobs (a task per workload). */
  readonly tunable: boolean
  /** The knobs of this group's schedule (depends on its shapes). */
  readonly space: (outputs: readonly ComputeTensor[], base: S.Schedule) => readonly Knob[]
  readonly defaults: (knobs: readonly Knob[], target: ScheduleTarget) => Config
  /** The schedule for a config (every config of the space is legal). */
  readonly apply: (outputs: readonly ComputeTensor[], base: S.Schedule, config: Config) => S.Schedule
}

/** The widest column tile of a one-row reduction (2 KB of float32 accumulators). */
const ONE_ROW_MAX_TILE = 512

const divisors = (n: number, max = 64): number[] => {
  const out: number[] = []
  for (let d = 1; d <= Math.min(n, max); d++) if (n % d === 0) out.push(d)
  return out
}

/** The root reduction stage a group is built around (conv, matmul, pooling), if any. */
const anchorStage = (s: S.Schedule): S.Stage | undefined => {
  const roots = s.order.map((n) => s.stages.get(n)!).filter((st) => st.attach.kind === "root")
  return [...roots].reverse().find((st) => st.op.body.kind === "reduce" && st.op.body.axes.length > 0 && st.op.axes.length >= 2)
}

const dataLeaves = (st: S.Stage) => st.leaf.filter((a) => st.axes.get(a)!.type === "data")

/**
 * Parallel over the leading loops `axes` (adjacent, outermost first): they are fused until the loop
 * has at least `minExtent` iterations, so batch 1 does not leave cores idle and a static split over
 * a few cores stays balanced (9 channel blocks on 2 cores would leave one idle a ninth of the time).
 */
const parallelOuter = (s0: S.Schedule, stage: string, axes: readonly string[], minExtent = 32): S.Schedule => {
  if (axes.length === 0) return s0
  let s = s0
  let cur = axes[0]
  const extent = (a: string) => s.stages.get(stage)!.axes.get(a)!.extent
  for (const next of axes.slice(1)) {
    if (extent(cur) >= minExtent) break
    const f = S.fuse(s, stage, cur, next)
    s = f.schedule
    cur = f.fused
  }
  return extent(cur) > 1 ? S.parallel(s, stage, cur) : s
}

/**
 * Parallel over the outermost data loop, and (with `vectorize`) the innermost vectorized where it is
 * data and no longer than the vectorize primitive takes: every root stage but `skip`.
 */
const parallelize = (s0: S.Schedule, vectorize: boolean, skip?: string): S.Schedule => {
  let s = s0
  for (const name of s.order) {
    if (name === skip) continue
    const st = s.stages.get(name)!
    if (st.attach.kind !== "root") continue
    const data = dataLeaves(st)
    if (data.length === 0) continue
    const last = st.leaf[st.leaf.length - 1]
    const lastAxis = st.axes.get(last)!
    const vec = vectorize && data.length > 1 && lastAxis.type === "data" && lastAxis.extent <= S.MAX_VECTORIZED
    const lead: string[] = []
    for (const a of st.leaf) {
      if (st.axes.get(a)!.type !== "data" || (vec && a === last)) break
      lead.push(a)
    }
    s = parallelOuter(s, name, lead)
    if (vec) s = S.vectorize(s, name, last)
  }
  return s
}

/**
 * The reduction template (conv, matmul, pooling, blocked conv): the innermost data axis split by
 * `tile_inner` and moved inside the reduction (register tiling over output width / columns),
 * the reduce axes in order, the outer data axes parallel, the innermost vectorized.
 */
export const reductionTemplate: Template = {
  name: "reduction",
  tunable: true,
  space: (_outputs, base) => {
    const st = anchorStage(base)
    if (!st) return []
    const data = dataLeaves(st)
    const inner = st.axes.get(data[data.length - 1])!.extent
    const second = data.length >= 2 ? st.axes.get(data[data.length - 2])!.extent : 1
    // one output row (a matrix-vector product): column tiles up to 512 wide, whose accumulators
    // stay in L1 while each weight row's stretch is read in order
    return [
      { kind: "split", name: "tile_inner", extent: inner, candidates: divisors(inner, second === 1 ? ONE_ROW_MAX_TILE : 64) },
      { kind: "split", name: "tile_second", extent: second, candidates: divisors(second, 16) },
      { kind: "choice", name: "vectorize", candidates: [true, false] },
      { kind: "choice", name: "unroll_tile", candidates: [true, false] },
      { kind: "choice", name: "fuse_epilogue", candidates: [true, false] },
    ]
  },
  defaults: (knobs, target) => {
    const cfg: Record<string, string | number | boolean> = {}
    const lanes = Math.max(target.vectorLanes, 1)
    // one output row (a batch-1 dense layer, a matrix-vector product). With 8 or 16 lanes (the c
    // target): the widest column tile up to 256 that leaves two tiles per core, its accumulators
    // in L1 while the weights stream past in order (MobileNetV2's 1280 -> 1000 classifier, weights
    // out of cache, AVX-512, 1 thread: 0.225 ms at 10 columns, 0.095 at 40, 0.071 at 250). Else up
    // to 6 vectors of columns, so each weight row's cache line is read whole and 5-6 FMA chains
    // overlap (timed alone: 0.18 ms at one vector, 0.12 at five).
    const second = knobs.find((k) => k.name === "tile_second")
    const oneRow = second?.kind === "split" && second.extent === 1
    for (const k of knobs) {
      if (k.kind === "split" && k.name === "tile_inner") {
        const streaming = oneRow && lanes >= 8 ? [...k.candidates].reverse().find((d) => d > 64 && d <= 256 && k.extent / d >= 2 * target.cores) : undefined
        const wide = oneRow && lanes > 1 ? [...k.candidates].reverse().find((d) => d % lanes === 0 && d <= 6 * lanes) : undefined
        cfg[k.name] = streaming ?? wide ?? [...k.candidates].reverse().find((d) => d <= lanes) ?? 1
      }
      else if (k.kind === "split") {
        // register rows: up to 4, or up to 8 where nothing in 2..4 divides the axis (7 wide: 7)
        const four = [...k.candidates].reverse().find((d) => d <= 4) ?? 1
        cfg[k.name] = four > 1 ? four : ([...k.candidates].reverse().find((d) => d <= 8) ?? 1)
      }
      else cfg[k.name] = k.name === "vectorize" ? target.vectorLanes > 1 : k.name === "fuse_epilogue" || k.name === "unroll_tile"
    }
    return cfg
  },
  apply: (_outputs, base, config) => {
    const st = anchorStage(base)
    if (!st) return base
    if (config.fuse_epilogue) {
      const fused = fusedEpilogue(base, st, config)
      if (fused) return fused
    }
    let s = base
    const data = dataLeaves(st)
    const red = st.leaf.filter((a) => st.axes.get(a)!.type === "reduce")
    const lastData = data[data.length - 1]
    const ti = Number(config.tile_inner ?? 1)
    const t2 = Number(config.tile_second ?? 1)
    const sp = S.split(s, st.name, lastData, { factor: ti })
    s = sp.schedule
    let outerData = [...data.slice(0, -1), sp.outer]
    let innerTile = [sp.inner]
    if (data.length >= 2 && t2 > 1) {
      const sp2 = S.split(s, st.name, data[data.length - 2], { factor: t2 })
      s = sp2.schedule
      outerData = [...data.slice(0, -2), sp2.outer, sp.outer]
      innerTile = [sp2.inner, sp.inner]
    }
    s = S.reorder(s, st.name, [...outerData, ...red, ...innerTile])
    s = parallelOuter(s, st.name, outerData)
    if (config.vectorize && ti > 1 && ti <= S.MAX_VECTORIZED) s = S.vectorize(s, st.name, sp.inner)
    if (config.unroll_tile && innerTile.length === 2) s = S.unroll(s, st.name, innerTile[0])
    return parallelize(s, !!config.vectorize, st.name)
  },
}

/**
 * TVM's CPU convolution schedule: the output (the epilogue stage, or a copy of the anchor through
 * cacheWrite when the anchor is the output) is tiled — the innermost data axis by `tile_inner`
 * (vector lanes), the next by `tile_second` (register rows) — and the anchor is computed at the
 * tile, its reduction outside its tile loops: the partial sums stay in a small local buffer.
 */
/**
 * The stage a tile is made of and the stage computed at it: the anchor's one epilogue stage (root,
 * elementwise, of the anchor's shape) and the anchor; or, when nothing reads the anchor, the anchor
 * itself and a local copy of it (cacheWrite). Undefined for any other reader pattern.
 */
const tileStages = (s: S.Schedule, anchor: S.Stage): { schedule: S.Schedule; out: string; local: string } | undefined => {
  const readers = S.effectiveConsumers(s, anchor.name)
  if (readers.length === 0) {
    const w = S.cacheWrite(s, anchor.name, "local")
    return { schedule: w.schedule, out: anchor.name, local: w.stage }
  }
  if (readers.length > 1) return undefined
  const o = s.stages.get(readers[0])!
  if (o.attach.kind !== "root" || o.op.body.kind === "reduce" || o.op.shape.join() !== anchor.op.shape.join()) return undefined
  return { schedule: s, out: readers[0], local: anchor.name }
}

const fusedEpilogue = (base: S.Schedule, anchor: S.Stage, config: Config): S.Schedule | undefined => {
  const tiled = tileStages(base, anchor)
  if (!tiled) return undefined
  let s = tiled.schedule
  const { out, local } = tiled
  const os = s.stages.get(out)!
  const data = dataLeaves(os)
  if (data.length !== os.leaf.length || data.length < 2) return undefined
  const ti = Number(config.tile_inner ?? 1)
  const t2 = Number(config.tile_second ?? 1)
  const sp = S.split(s, out, data[data.length - 1], { factor: ti })
  const sp2 = S.split(sp.schedule, out, data[data.length - 2], { factor: t2 })
  s = S.reorder(sp2.schedule, out, [...data.slice(0, -2), sp2.outer, sp.outer, sp2.inner, sp.inner])
  // batch-1 dense layers (one output row): the column tiles are the parallel loop
  const outerAxes = [...data.slice(0, -2), sp2.outer]
  const extentOf = (a: string) => s.stages.get(out)!.axes.get(a)!.extent
  s = outerAxes.every((a) => extentOf(a) === 1) && extentOf(sp.outer) > 1 ? S.parallel(s, out, sp.outer) : parallelOuter(s, out, outerAxes)
  if (config.vectorize && ti > 1 && ti <= S.MAX_VECTORIZED) s = S.vectorize(s, out, sp.inner)
  s = S.computeAt(s, local, out, sp.outer)
  // the anchor inside the tile: reduction outside, the tile's data loops inside (accumulators)
  const ls = s.stages.get(local)!
  const lred = ls.leaf.filter((a) => ls.axes.get(a)!.type === "reduce")
  const ldata = dataLeaves(ls)
  s = S.reorder(s, local, [...lred, ...ldata])
  // (the schedule checks the axis's full extent, though the region it covers in the tile is tile_inner long)
  if (config.vectorize && ti > 1 && ls.axes.get(ldata[ldata.length - 1])!.extent <= S.MAX_VECTORIZED) s = S.vectorize(s, local, ldata[ldata.length - 1])
  if (config.unroll_tile && t2 > 1 && ldata.length >= 2) s = S.unroll(s, local, ldata[ldata.length - 2])
  return parallelize(s, !!config.vectorize, out)
}

/** The anchor's zero-padding producer (the conv's data_pad), inlined in the base schedule. */
const padProducer = (s: S.Schedule, anchor: S.Stage): string | undefined =>
  anchor.op.inputs.find((t) => {
    if (t.kind !== "compute") return false
    const st = s.stages.get(t.name)
    return st !== undefined && st.attach.kind === "inline" && t.body.kind === "select" && S.consumersOf(s, t.name).length === 1
  })?.name

const REDUCE_ORDERS = ["ic_kernel", "kernel_ic", "ic_only"] as const

/** Where a conv tile's output channel loop goes: outermost (weights reused) or inside the image loops (inputs reused). */
const OC_ORDERS = ["outer", "inner"] as const

/** The knob's candidates (numbers: a split's factors). */
const candidatesOf = (knobs: readonly Knob[], name: string): number[] => knobs.find((k) => k.name === name)!.candidates as number[]

/** The largest candidate ≤ max (1 when none is). */
const largest = (xs: readonly number[], max: number): number => [...xs].reverse().find((d) => d <= max) ?? 1

/**
 * A register tile of vector accumulators for `lanes`: `cols` (tile positions: output columns,
 * Winograd tiles) × `blocks` (output channel blocks, at most `blockCap`), from the knobs'
 * candidates. AVX2's 16 vector registers under gcc: one channel block across 7–8 positions (7–8
 * accumulators, the weight vector loaded once per tap) ran at 82–84% of peak in a microkernel;
 * two or more blocks let gcc reload the weights per FMA (1.5 loads per FMA on two load ports:
 * 65–70%), and 14 accumulators spill (45–55%) in a 3×3 conv's tile (a 1×1 conv's fit: see
 * `defaults`). Otherwise 16 accumulators of AVX-512's 32, 8 of SSE / SIMD128's 16, half the
 * budget in positions. `budget` is undefined on AVX2.
 */
const registerTile = (lanes: number, cols: readonly number[], blocks: readonly number[], blockCap = Infinity): { cols: number; blocks: number; budget?: number } => {
  if (lanes === 8) return { cols: largest(cols, 8), blocks: 1 }
  const budget = lanes >= 16 ? 16 : 8
  const c = largest(cols, budget / 2)
  return { cols: c, blocks: largest(blocks, Math.min(blockCap, Math.max(1, Math.floor(budget / c)))), budget }
}

/** Bytes of weights a conv tile of output channel blocks may keep in L2 (half of a 256 KiB L2). */
const WEIGHT_TILE_BYTES = 128 * 1024

/** IC·KH·KW of a conv template's space: the reduction's extent (tile_ic's and the unroll knobs'). */
const reduceVolume = (knobs: readonly Knob[]): number => {
  const ic = knobs.find((k) => k.name === "tile_ic")
  return (ic?.kind === "split" ? ic.extent : 1) * kernelTaps(knobs)
}

/** Output channel blocks of a conv template's space (tile_oc's extent). */
const ocBlocks = (knobs: readonly Knob[]): number => {
  const oc = knobs.find((k) => k.name === "tile_oc")
  return oc?.kind === "split" ? oc.extent : 1
}

/** KH·KW of a conv template's space (its unroll knobs carry the kernel loops' extents). */
const kernelTaps = (knobs: readonly Knob[]): number =>
  knobs.reduce((p, k) => (k.kind === "choice" && (k.name === "unroll_kh" || k.name === "unroll_kw") ? p * (k.extent ?? 1) : p), 1)

/**
 * Input-channel batches a conv's reduction may be split into outside its column tiles (`ic_batch`):
 * divisors of the channels from 32 up to half of them, where a row holds more than one tile.
 */
const icBatches = (ic: number, ow: number): number[] => (ow < 4 ? [] : [32, 64, 96, 128, 192, 256].filter((b) => b < ic && ic % b === 0))

/**
 * TVM's x86 conv2d_NCHWc schedule as a template. The output is tiled by `tile_ow` columns ×
 * `tile_oh` rows × `tile_oc` channel blocks × the vector lanes (register blocking: one accumulator
 * per tile point, the tile unrolled up to 32 of them); the leading loops are fused and parallel.
 * The conv is computed at the tile with its reduction outside the tile: the input channels split by
 * `tile_ic`, in the order `reduce_order` (ic_kernel: ic outer, kh, kw, ic inner; kernel_ic: kh, kw,
 * ic outer, ic inner; ic_only: ic outer, ic inner, kh, kw); `unroll_kh` / `unroll_kw` unroll the
 * kernel loops. With `pad_root` the zero padding is computed into a buffer of its own first, so
 * the inner loops read without bounds tests. `oc_order` puts the channel tiles outermost (a tile's
 * weights stay cached while it walks the image) or inside the image tiles (a tile of input pixels
 * stays cached while every channel tile reads it; the parallel loop is then over rows).
 * `ic_batch` below the input channels splits the reduction outside the image's tiles: the
 * channel tile's sums for the whole image stay in a local buffer across the batches (see apply).
 */
export const convTemplate: Template = {
  name: "conv2d_NCHWc",
  tunable: true,
  space: (_outputs, base) => {
    const st = anchorStage(base)!
    const [, ocb, oh, ow] = st.op.shape
    const [ic, kh, kw] = (st.op.body as Reduce).axes.map((a) => a.dom.extent)
    // knobs that cannot change the loops are left out (a tuner would spend trials on them): no
    // channel split for one input channel (depthwise), no order for a 1×1 kernel, no unrolling of
    // a loop of one
    return [
      { kind: "split", name: "tile_ow", extent: ow, candidates: divisors(ow, 32) },
      { kind: "split", name: "tile_oh", extent: oh, candidates: divisors(oh, 8) },
      { kind: "split", name: "tile_oc", extent: ocb, candidates: divisors(ocb, 8) },
      ...(ic > 1 ? [{ kind: "split", name: "tile_ic", extent: ic, candidates: divisors(ic, 64) } as const] : []),
      ...(ic > 1 && kh * kw > 1 ? [{ kind: "choice", name: "reduce_order", candidates: [...REDUCE_ORDERS] } as const] : []),
      ...(kh > 1 ? [{ kind: "choice", name: "unroll_kh", candidates: [false, true], extent: kh } as const] : []),
      ...(kw > 1 ? [{ kind: "choice", name: "unroll_kw", candidates: [false, true], extent: kw } as const] : []),
      ...(padProducer(base, st) ? [{ kind: "choice", name: "pad_root", candidates: [true, false] } as const] : []),
      ...(ocb > 1 ? [{ kind: "choice", name: "oc_order", candidates: [...OC_ORDERS], absent: "outer" } as const] : []),
      ...(icBatches(ic, ow).length ? [{ kind: "choice", name: "ic_batch", candidates: [ic, ...icBatches(ic, ow)], absent: ic } as const] : []),
    ]
  },
  defaults: (knobs, target) => {
    const lanes = Math.max(target.vectorLanes, 1)
    const has = (name: string) => knobs.some((k) => k.name === name)
    const cand = (name: string) => candidatesOf(knobs, name)
    // the weights one tile of output channel blocks reads, kept in L2 while the tile walks the
    // image: at most WEIGHT_TILE_BYTES (else every output column streams them from L3 again:
    // ResNet-18's 512-channel layers ran at a third of their speed with 8 blocks per tile)
    const ocCap = Math.max(1, Math.floor(WEIGHT_TILE_BYTES / (reduceVolume(knobs) * lanes * 4)))
    const tile = registerTile(lanes, cand("tile_ow"), cand("tile_oc"), ocCap)
    let tw = tile.cols
    const toc = tile.blocks
    // fewer blocks than the budget allows (their weights would not stay in L2): wider columns
    if (tile.budget !== undefined && toc * tw < tile.budget / 2) tw = largest(cand("tile_ow"), Math.floor(tile.budget / toc))
    // a narrow image: rows fill the tile
    let th = tw * toc < 4 ? largest(cand("tile_oh"), Math.floor(8 / (tw * toc))) : 1
    // AVX2, a 1x1 conv: two rows of up to 7 columns, 14 accumulators beside the weight vector and
    // one broadcast (all 16 registers; a 1x1 conv keeps nothing else live). Timed in a C loop on
    // Zen 3 against one row of 7-8 columns, MobileNetV2's 14x14 and 28x28 1x1 convs ran 2-25%
    // faster, its 56x56 ones -2 to +12%, ResNet-18's 1x1 stride-2 ones 2-3% (docs/tuning.md);
    // the tuner's rounds had picked it on most of those tasks. 8 columns x 2 rows spill.
    const pointwise = kernelTaps(knobs) === 1 && has("tile_ic")
    if (lanes === 8 && pointwise && toc === 1 && cand("tile_oh").includes(2) && cand("tile_ow").some((c) => c >= 4 && c <= 7)) {
      tw = largest(cand("tile_ow"), 7)
      th = 2
    }
    const depthwise = !has("tile_ic")
    // AVX-512, a depthwise conv of up to 3x3: one channel block, a tile 2 columns wide and up to 7
    // rows high, only the kernel's column loop unrolled. The tuner's confirmed winners on every
    // MobileNetV2 depthwise task (Zen 5, 1 thread, caches swept) unrolled one kernel loop, not
    // both, in one block; 1.1-1.8x the former default (7-8 columns, both loops unrolled, up to two
    // blocks), most often at 2 x 7 (docs/tuning.md)
    const dwTall = lanes >= 16 && depthwise && kernelTaps(knobs) <= 9 && kernelTaps(knobs) > 1 && has("unroll_kw")
    if (dwTall) {
      tw = largest(cand("tile_ow"), 2)
      th = largest(cand("tile_oh"), 7)
    }
    const cfg: Record<string, string | number | boolean> = { tile_ow: tw, tile_oh: th, tile_oc: dwTall ? 1 : toc }
    if (!depthwise) cfg.tile_ic = largest(cand("tile_ic"), lanes)
    // kernel loops of up to 3×3 unrolled, the channel loops outside them: the best configs the
    // tuner found on every ResNet-18 and MobileNetV2 task measured (docs/tuning.md) unroll both
    const [kh, kw] = [knobs.find((k) => k.name === "unroll_kh"), knobs.find((k) => k.name === "unroll_kw")]
    const small = kernelTaps(knobs) <= 9
    if (kh) cfg.unroll_kh = small && !dwTall
    if (kw) cfg.unroll_kw = small
    if (has("reduce_order")) cfg.reduce_order = small && (kh || kw) ? "ic_only" : "ic_kernel"
    // a padded copy pays for itself when every input pixel feeds many channels' FMAs; a depthwise
    // conv (one input channel per output) reads each pixel only KH·KW times: bounds tests instead
    if (has("pad_root")) cfg.pad_root = !depthwise
    // a 1x1 conv with more input channels than output channels (MobileNetV2's projections):
    // channel tiles inside the image tiles, so its input (the larger tensor, in L3 after the
    // depthwise conv wrote it) is read once, not once per channel tile. In MobileNetV2 run whole
    // on this machine they went from 1.9x onnxruntime's time to parity (144 -> 24 at 56x56:
    // 0.62 -> 0.39 ms); expansions and ResNet-18's 3x3 convs ran slower in that order, so they
    // keep their channel tiles outermost
    if (has("oc_order")) cfg.oc_order = kernelTaps(knobs) === 1 && reduceVolume(knobs) > ocBlocks(knobs) * lanes ? "inner" : "outer"
    // the whole reduction inside the register tile; batches outside the image's tiles are the
    // tuner's to try (2-5% on the layers timed alone: docs/tuning.md)
    const batch = knobs.find((k) => k.name === "ic_batch")
    if (batch?.kind === "choice") cfg.ic_batch = batch.candidates[0]
    return cfg
  },
  apply: (_outputs, base, config) => {
    const anchor = anchorStage(base)!
    let s = base
    const pad = padProducer(s, anchor)
    if (pad && config.pad_root) s = S.computeRoot(s, pad)
    // the tile's output: the epilogue, or a local copy of the anchor when it is the output
    // (templateFor chose this template only where tileStages fits)
    const tiled = tileStages(s, anchor)!
    s = tiled.schedule
    const { out, local } = tiled
    const [n, oc, oh, ow, oi] = s.stages.get(out)!.leaf
    // the lanes of the channel block are the vector (the block is the target's vector width)
    const vector = s.stages.get(out)!.axes.get(oi)!.extent > 1
    const tw = Number(config.tile_ow)
    const th = Number(config.tile_oh ?? 1)
    const toc = Number(config.tile_oc)
    const spw = S.split(s, out, ow, { factor: tw })
    const sph = S.split(spw.schedule, out, oh, { factor: th })
    const spc = S.split(sph.schedule, out, oc, { factor: toc })
    // channel tiles outermost (a tile's weights stay cached while it walks the image), or innermost
    // (a tile of input pixels stays cached while every channel tile reads it).
    //
    // ic_batch below the channels: the accumulators of the whole image for the tile's channel
    // blocks (tile_oc of them: a filter set) stay in a local buffer while the input channels run
    // in batches outside the image's tiles, as onnxruntime's NCHWc kernels accumulate across
    // batches of 128. A batch's filters (ic_batch x 8 lanes per block) are then read from L1 by
    // every tile of the image; the register tile is one channel block x tile_oh x tile_ow, its
    // sums kept in registers within a batch by PromoteAccumulators. Channel tiles outermost.
    const icBatch = Number(config.ic_batch ?? Infinity)
    const lst = s.stages.get(local)!
    const channels = lst.leaf.map((a) => lst.axes.get(a)!).find((ax) => ax.type === "reduce")?.extent ?? 0
    const batched = icBatch < channels
    const ocInner = config.oc_order === "inner" && !batched
    s = S.reorder(
      spc.schedule,
      out,
      ocInner ? [n, sph.outer, spw.outer, spc.outer, spc.inner, sph.inner, spw.inner, oi] : [n, spc.outer, sph.outer, spw.outer, spc.inner, sph.inner, spw.inner, oi],
    )
    // (channel tiles inside: a small image's few tiles — 7 rows of a 7x7 image — are fused with
    // the channel tiles into the parallel loop, else two cores split 7 rows 4 : 3)
    s = parallelOuter(s, out, ocInner ? [n, sph.outer, spw.outer, spc.outer] : batched ? [n, spc.outer] : [n, spc.outer, sph.outer])
    if (vector) s = S.vectorize(s, out, oi)
    // (batched: at the channel tile, the loop just outside the rows; channel tiles inside: at the
    // channel tile, the loop just outside the channel blocks; either may be the parallel loop
    // the channel tiles were fused into)
    const before = (axis: string) => {
      const leaves = s.stages.get(out)!.leaf
      return leaves[leaves.indexOf(axis) - 1]
    }
    s = S.computeAt(s, local, out, batched ? before(sph.outer) : ocInner ? before(spc.inner) : spw.outer)
    const ls = s.stages.get(local)!
    const [ln, loc, loh0, low0, loi] = dataLeaves(ls)
    const [ric, rky, rkx] = ls.leaf.filter((a) => ls.axes.get(a)!.type === "reduce")
    let low = low0
    let loh = loh0
    if (batched) {
      // the image: its tiles inside the batches, each batch's channels inside a tile
      const spr = S.split(s, local, loh0, { factor: th })
      const spl = S.split(spr.schedule, local, low0, { factor: tw })
      const spb = S.split(spl.schedule, local, ric, { factor: icBatch })
      // a batch's channels split by tile_ic as well (the input's channel block: its index then
      // simplifies to the block and the lane, no division left in the loop)
      const tic = Number(config.tile_ic ?? 1)
      const spt = icBatch % tic === 0 && tic > 1 ? S.split(spb.schedule, local, spb.inner, { factor: tic }) : undefined
      s = spt ? spt.schedule : spb.schedule
      low = spl.inner
      const chans = spt ? [spt.outer, spt.inner] : [spb.inner]
      const inner = config.reduce_order === "ic_only" ? [...chans, rky, rkx] : [rky, rkx, ...chans]
      loh = spr.inner
      s = S.reorder(s, local, [ln, spb.outer, loc, spr.outer, spl.outer, ...inner.filter((a) => a !== undefined), loh, low, loi])
    } else {
      const spi = S.split(s, local, ric, { factor: Number(config.tile_ic ?? 1) })
      s = spi.schedule
      const red =
        config.reduce_order === "kernel_ic" ? [rky, rkx, spi.outer, spi.inner]
        : config.reduce_order === "ic_only" ? [spi.outer, spi.inner, rky, rkx]
        : [spi.outer, rky, rkx, spi.inner]
      s = S.reorder(s, local, [ln, ...red.filter((a) => a !== undefined), loc, loh, low, loi])
    }
    if (vector) s = S.vectorize(s, local, loi)
    // the register tile: unrolled (innermost first, up to 32 vector accumulators, what the register
    // file can hold), so its accumulators stay in registers; larger tiles spill anyway, and
    // unrolling them would only cost compile time
    const MAX_UNROLLED = 32
    if (tw > 1 && tw <= MAX_UNROLLED) s = S.unroll(s, local, low)
    if (th > 1 && tw * th <= MAX_UNROLLED) s = S.unroll(s, local, loh)
    if (toc > 1 && tw * th * toc <= MAX_UNROLLED && !batched) s = S.unroll(s, local, loc)
    if (config.unroll_kh) s = S.unroll(s, local, rky)
    if (config.unroll_kw) s = S.unroll(s, local, rkx)
    return parallelize(s, vector, out)
  },
}

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
    const [, , P, OCB] = M.op.shape
    return [
      { kind: "split", name: "tile_p", extent: P, candidates: divisors(P, 16) },
      { kind: "split", name: "tile_oc", extent: OCB, candidates: divisors(OCB, 8) },
    ]
  },
  defaults: (knobs, target) => {
    // the direct conv's register tile, its positions the input tiles
    const tile = registerTile(Math.max(target.vectorLanes, 1), candidatesOf(knobs, "tile_p"), candidatesOf(knobs, "tile_oc"))
    return { tile_p: tile.cols, tile_oc: tile.blocks }
  },
  apply: (outputs, base, config) => {
    const M = anchorStage(base)!
    const V = M.op.inputs.find((t): t is ComputeTensor => t.kind === "compute")!
    // V = (Bᵀ d) B: its first product T, and T's input, the padded image
    const T = V.inputs.find((t): t is ComputeTensor => t.kind === "compute")!
    const pad = T.inputs.find((t): t is ComputeTensor => t.kind === "compute")
    let s = base
    const lanesOf = (stage: string) => {
      const st = s.stages.get(stage)!
      return st.axes.get(st.leaf[st.leaf.length - 1])!.extent
    }
    if (pad) {
      s = S.computeRoot(s, pad.name)
      const [pn, pc, py] = s.stages.get(pad.name)!.leaf
      s = parallelOuter(s, pad.name, [pn, pc, py])
      const leaf = s.stages.get(pad.name)!.leaf
      if (lanesOf(pad.name) > 1) s = S.vectorize(s, pad.name, leaf[leaf.length - 1])
    }
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
    // (not fused as far as the tile loop: the products are computed at it)
    s = parallelOuter(s, M.name, [me, mn, spc.outer])
    const vector = lanesOf(M.name) > 1
    if (vector) s = S.vectorize(s, M.name, mi)
    s = S.computeAt(s, w.stage, M.name, spp.outer)
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
    s = S.reorder(spw.schedule, out, [on, oc, sph.outer, spw.outer, sph.inner, spw.inner, oi])
    s = parallelOuter(s, out, [on, oc, sph.outer])
    s = S.unroll(S.unroll(s, out, sph.inner), out, spw.inner)
    if (lanesOf(out) > 1) s = S.vectorize(s, out, oi)
    return s
  },
}

/** Groups without a reduction anchor (elementwise, injective, layout transforms). */
export const injectiveTemplate: Template = {
  name: "injective",
  tunable: false,
  space: () => [{ kind: "choice", name: "vectorize", candidates: [true, false] }],
  defaults: (_k, target) => ({ vectorize: target.vectorLanes > 1 }),
  apply: (_outputs, base, config) => parallelize(base, !!config.vectorize),
}

/** The template of each tag an anchor may carry (an anchor without a tag: the reduction template). */
const TEMPLATE_OF_TAG: { readonly [T in ComputeTag]: Template } = {
  conv2d_nchwc: convTemplate,
  conv2d_winograd_product: winogradTemplate,
  conv2d_nchw: reductionTemplate,
  conv_nd: reductionTemplate,
  conv_transpose: reductionTemplate,
  dense: reductionTemplate,
  dense_pack: reductionTemplate,
  matmul: reductionTemplate,
  pool: reductionTemplate,
  global_pool: reductionTemplate,
}

/**
 * A group's template: the injective one without a reduction anchor, else the one its anchor's tag
 * names. The conv template tiles the anchor's epilogue (or a copy of the anchor): where the anchor
 * has another pattern of readers (tileStages), the reduction template.
 */
export const templateFor = (base: S.Schedule): Template => {
  const anchor = anchorStage(base)
  if (!anchor) return injectiveTemplate
  const t = anchor.op.tag ? TEMPLATE_OF_TAG[anchor.op.tag] : reductionTemplate
  return t === convTemplate && !tileStages(base, anchor) ? reductionTemplate : t
}

/** The untuned schedule for a target: each group's template at its defaults. */
export const defaultSchedule =
  (
    target: ScheduleTarget,
    tuned?: (group: FusedGroup, template: Template, knobs: readonly Knob[], outputs: readonly ComputeTensor[]) => Config | undefined,
  ): ScheduleFn =>
  (outputs, base, group) => {
    const t = templateFor(base)
    const knobs = t.space(outputs, base)
    const config = tuned?.(group, t, knobs, outputs) ?? t.defaults(knobs, target)
    return t.apply(outputs, base, config)
  }
