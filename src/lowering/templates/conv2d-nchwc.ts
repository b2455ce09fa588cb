// TVM's x86 conv2d_NCHWc schedule as a template: the blocked convolution's output tiled into
// registers (columns × rows × channel blocks × the vector lanes), the conv computed at the tile
// with its reduction outside, defaults sized from the target's lanes and caches.
import * as S from "../../ast/schedule/schedule.js"
import { c, collect, freeVars, substitute, type Read, type Reduce } from "../../ast/te/expr.js"
import { anchorStage, candidatesOf, convRegisterTile, dataLeaves, divisors, fmaRate, largest, parallelize, parallelOuter, tileStages, type TileChoices } from "./common.js"
import type { Knob, ScheduleTarget, Template } from "./template.js"

/**
 * The anchor's input copy, inlined in the base schedule: its zero-padding producer (the conv's
 * data_pad, a select), or the pixels a 1×1 kernel at a stride reads (a read of every stride-th
 * pixel: the op library's convNCHWc).
 */
const padProducer = (s: S.Schedule, anchor: S.Stage): string | undefined =>
  anchor.op.inputs.find((t) => {
    if (t.kind !== "compute") return false
    const st = s.stages.get(t.name)
    return st !== undefined && st.attach.kind === "inline" && (t.body.kind === "select" || t.body.kind === "read") && S.consumersOf(s, t.name).length === 1
  })?.name

const REDUCE_ORDERS = ["ic_kernel", "kernel_ic", "ic_only"] as const

/**
 * A blocked conv's input as its image tiles read it (its anchor stage): the elements of the tensor
 * its data read (rank 5, NCHW[x]c) reads — the padded copy where there is one — and whether its
 * reduction runs over every channel of it (a dense conv: each channel tile reads the whole input;
 * a grouped or depthwise conv's tiles read their own groups'). Undefined where there is no such read.
 */
export const convInput = (st: S.Stage): { readonly floats: number; readonly dense: boolean } | undefined => {
  const body = st.op.body
  if (body.kind !== "reduce") return undefined
  const read = collect(body.source, (x) => x.kind === "read" && x.indices.length === 5)[0] as Read | undefined
  const shape = read?.tensor?.shape
  if (!shape || shape.length !== 5) return undefined
  const channels = shape[1] * shape[4]
  return { floats: shape.reduce((a, b) => a * b, 1), dense: (body.axes[0]?.dom.extent ?? 0) === channels }
}

/**
 * Input columns between adjacent output columns of a blocked conv (its anchor stage): the step of
 * the data read's column index (rank 5, NCHW[x]c; the kernel is rank 6) as the output column
 * steps by one, every other variable held — the stride. 1 where there is no such read or the step
 * is not a constant.
 */
export const inputStride = (st: S.Stage): number => {
  const body = st.op.body as Reduce
  const column = st.op.axes[3]?.var.name
  const read = collect(body.source, (x) => x.kind === "read" && x.indices.length === 5)[0] as Read | undefined
  if (!read || column === undefined) return 1
  const idx = read.indices[3]
  const at = (k: number) => substitute(idx, new Map([...freeVars(idx)].map((n) => [n, c(n === column ? k : 0)] as const)))
  const [x0, x1] = [at(0), at(1)]
  return x0.kind === "const" && x1.kind === "const" && x1.value - x0.value >= 1 ? x1.value - x0.value : 1
}

/**
 * Whether the channel loops go outside the unrolled kernel taps (`ic_only`): where a row's taps
 * share their input, each input element broadcast once feeds kw / stride taps' FMAs in the unrolled
 * body (3 at stride 1 for a 3-wide kernel) — at least two. At stride 2 (1.5) the taps share too
 * little to pay for the body's nine live weight vectors, and the kernel loops outside the inner
 * channels (`ic_kernel`, one tap's weights streamed contiguously) ran faster: ResNet-50's stride-2
 * 3×3 convs timed alone (Zen 4, 1 thread, best of 41 alternating): 256 ch 28→14 2.71 → 2.23 ms,
 * 512 ch 14→7 3.08 → 2.47, 128 ch 56→28 2.56 → 2.38 (docs/scheduling.md).
 */
export const tapsShareInput = (kw: number, stride: number): boolean => kw / stride >= 2

/**
 * Where a conv tile's output channel loop goes: outermost (weights reused), inside the image loops
 * (inputs reused), or `rows`: between the row tiles and the column tiles, the rows outermost — the
 * parallel loop then hands each core a contiguous band of the image, every channel tile of it
 * (imageBands).
 */
const OC_ORDERS = ["outer", "inner", "rows"] as const

/** A core's L2 where the target record does not say (the portable CpuAttrs default). */
const DEFAULT_L2_BYTES = 256 * 1024

/**
 * Half the target record's L2, in bytes: what a block reused across a loop may keep there — the
 * weights a conv tile of output channel blocks reads while it walks the image (the other half
 * holds the input rows and outputs the tile streams through; 128 KiB of a 256 KiB L2, 512 KiB of
 * Zen 4's 1 MiB), an int8 depthwise conv's padded input.
 */
export const halfL2 = (target: ScheduleTarget): number => Math.floor((target.l2Bytes ?? DEFAULT_L2_BYTES) / 2)

/** IC·KH·KW of a conv template's space: the reduction's extent (tile_ic's and the unroll knobs'). */
const reduceVolume = (knobs: readonly Knob[]): number => {
  const ic = knobs.find((k) => k.name === "tile_ic")
  return (ic?.kind === "split" ? ic.extent : 1) * kernelTaps(knobs)
}

/** Lanes of a conv's output channel block (tile_oc's units; the target's lanes where the knob does not say). */
const blockLanes = (knobs: readonly Knob[], lanes: number): number => {
  const oc = knobs.find((k) => k.name === "tile_oc")
  return oc?.kind === "split" && oc.lanes !== undefined ? oc.lanes : lanes
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
 * Whether a 1×1 conv's input (IC × OH × OW floats: the pixels it reads, at any stride) fits half the
 * record's L2 (halfL2) and its weights (IC × OC floats) do not. Its channel tiles inside the image
 * tiles would then read every weight once per image tile (ResNet-50's 7×7 conv of 2048 → 512
 * channels: 4 MiB of weights 7 times, 28 MiB from L3; at 2 threads 14 MiB a core), outermost once
 * (4 MiB; 2 a core), the input (392 KiB) kept in L2 across the channel tiles.
 */
export const inputStaysWeightsStream = (knobs: readonly Knob[], lanes: number, target: ScheduleTarget): boolean => {
  const extent = (name: string) => {
    const k = knobs.find((x) => x.name === name)
    return k?.kind === "split" ? k.extent : 1
  }
  const input = reduceVolume(knobs) * extent("tile_oh") * extent("tile_ow") * 4
  const weights = reduceVolume(knobs) * ocBlocks(knobs) * blockLanes(knobs, lanes) * 4
  return input <= halfL2(target) && weights > halfL2(target)
}

/**
 * Where a projection's channel tiles go (a 1×1 conv with more input than output channels; the
 * defaults' oc_order): inside the image tiles where its weights fit half the record's L2 (halfL2:
 * the input, the larger tensor, read once, the weights kept in L2); outermost where they do not and
 * the input does (inputStaysWeightsStream); where neither fits, inside the row tiles (`rows`)
 * where one output row's input (IC × OW floats, at any stride) fits half the L2 — inside the image
 * tiles every weight streams from L3 again for every image tile, inside the row tiles once a row,
 * the row's input kept in cache while each channel tile reads it. ResNet-50's 14×14 convs of 1024
 * → 256 channels (1 MiB of weights, 784 KiB of input; Zen 5, 1 MiB L2, tiles of 7 columns): the
 * weights streamed 14 times instead of 28; in the sequence, CPU time, 0.92–0.95 of their time
 * (docs/scheduling.md); outermost, the input read 8 times, 1.05–1.27.
 */
export const projectionOrder = (knobs: readonly Knob[], lanes: number, target: ScheduleTarget): "inner" | "outer" | "rows" => {
  const extent = (name: string) => {
    const k = knobs.find((x) => x.name === name)
    return k?.kind === "split" ? k.extent : 1
  }
  const fits = (floats: number) => floats * 4 <= halfL2(target)
  if (fits(reduceVolume(knobs) * ocBlocks(knobs) * blockLanes(knobs, lanes))) return "inner"
  if (inputStaysWeightsStream(knobs, lanes, target)) return "outer"
  return fits(reduceVolume(knobs) * extent("tile_ow")) ? "rows" : "inner"
}

/** A core's L1 data cache where the target record does not say (the portable CpuAttrs default). */
const DEFAULT_L1_BYTES = 32 * 1024

/** Half the target record's L1 data cache, in bytes: what a batch of weights read by every tile of the image may keep there (the other half: the input lines a tile reads). */
export const halfL1 = (target: ScheduleTarget): number => Math.floor((target.l1Bytes ?? DEFAULT_L1_BYTES) / 2)

/**
 * The input-channel batch (`ic_batch`) of a projection whose weights and input both exceed half
 * the record's L2, or undefined where no batch fits: the largest candidate below the input
 * channels whose weights for a channel tile of `blocks` blocks (batch × blocks × the block's lanes
 * floats) fit half the L1 and whose input (batch × OH × OW floats) half the L2. Each channel tile
 * then walks the image once a batch with that batch's weights in L1 and the batch's input in L2 —
 * every weight read from memory once, in order, the input from L2 once a channel tile (onnxruntime's
 * NCHWc order: filter sets × batches of 128 channels) — where `rows` (projectionOrder) streams all
 * the weights from beyond the L2 again for every row of the image. ResNet-50's 14×14 convs of 1024
 * → 256 and 1024 → 512 channels (Zen 5: 48 KiB L1, 1 MiB L2; batches of 128, 16 KiB of weights a
 * channel tile of 2 blocks): 0.83–0.89 of their time in the sequence against `rows`, CPU time;
 * batches of 256 (32 KiB, past half the L1) 0.86–0.94 (docs/scheduling.md).
 */
export const projectionBatch = (knobs: readonly Knob[], lanes: number, target: ScheduleTarget, blocks: number): number | undefined => {
  const extent = (name: string) => {
    const k = knobs.find((x) => x.name === name)
    return k?.kind === "split" ? k.extent : 1
  }
  const batch = knobs.find((k) => k.name === "ic_batch")
  if (batch?.kind !== "choice") return undefined
  const channels = reduceVolume(knobs)
  const fits = batch.candidates
    .map(Number)
    .filter((b) => b < channels && b * blocks * blockLanes(knobs, lanes) * 4 <= halfL1(target) && b * extent("tile_oh") * extent("tile_ow") * 4 <= halfL2(target))
  return fits.length ? Math.max(...fits) : undefined
}

/**
 * Whether a conv with its channel tiles outermost walks the image in bands instead (`oc_order`
 * "rows"): on more than one core, where all its weights (IC·KH·KW × OC floats), the input a row of
 * outputs reads (IC·KH·KW × OW) and that row (OC × OW) fit the record's L2 — what a core walking its
 * band reads again at every row tile, each channel tile's weights in turn. With the
 * channel tiles outermost the parallel loop gives each core half the output channels of the whole
 * image, and the next kernel — split by rows (a projection's channel tiles inside its rows, a
 * padded copy, the Winograd input transform's tiles) or by other channels — reads half its input
 * from the other core's cache: on the 2-core Zen 5 of 2026-11-27 a 1.6 MB tensor the other core
 * wrote read in 44 µs, one this core wrote in 16 (docs/backends.md). In bands, a 1×1 conv reads
 * only the rows its own core wrote, a 3×3 conv the halo rows beside them. One core: no split, the
 * order as it was. Nor where the channel tiles outermost read less than bands do (bandsReadLess).
 */
export const imageBands = (knobs: readonly Knob[], lanes: number, target: ScheduleTarget): boolean => {
  const ow = knobs.find((k) => k.name === "tile_ow")
  const cols = ow?.kind === "split" ? ow.extent : 1
  const oc = ocBlocks(knobs) * blockLanes(knobs, lanes)
  const bytes = (reduceVolume(knobs) * oc + reduceVolume(knobs) * cols + oc * cols) * 4
  return target.cores > 1 && bytes <= (target.l2Bytes ?? DEFAULT_L2_BYTES) && bandsReadLess(knobs, lanes)
}

/**
 * Whether bands read less than the channel tiles outermost do: the two orders trade one re-read for
 * another — in bands every row tile reads all the weights again (a channel tile's own, outermost,
 * stay cached while it walks the image), outermost every channel tile reads the input again (in
 * bands a row's input stays cached while every channel tile reads it). So bands only where each
 * channel tile reads the whole input (a dense conv: a grouped or depthwise conv's tiles read their
 * own channels, once either way, and bands only add the weights' re-reads) and the input is at
 * least the weights (IC·KH·KW × OC floats). Measured on the 2-core Zen 5 (CPU time, one thread,
 * the 2-core program against the 1-core one in one process, alternated; docs/scheduling.md): the
 * 7×7 and 14×14 expansions of MobileNetV2, EfficientNet-B0 and RegNet (weights 0.3–0.9 MB, inputs
 * 31–163 KB) ran 1.15–1.43× slower in bands, their grouped and depthwise convs 1.13–1.32×;
 * ResNet-50's 3×3/2 conv to 28² (590 KB of weights, a 1.6 MB input) 0.87×. A space without the
 * oc_order knob's `input` (none read): the L2 bound alone, as before.
 */
export const bandsReadLess = (knobs: readonly Knob[], lanes: number): boolean => {
  const order = knobs.find((k) => k.name === "oc_order")
  const input = order?.kind === "choice" ? order.input : undefined
  if (input === undefined) return true
  return input.dense && input.floats >= reduceVolume(knobs) * ocBlocks(knobs) * blockLanes(knobs, lanes)
}

/** Output channel blocks whose weights (IC·KH·KW × the block's lanes, fp32) fit `bytes` (halfL2): at least one. */
export const weightBlockCap = (knobs: readonly Knob[], lanes: number, target: ScheduleTarget, bytes = halfL2(target)): number =>
  Math.max(1, Math.floor(bytes / (reduceVolume(knobs) * blockLanes(knobs, lanes) * 4)))

/**
 * The conv's register tile (convRegisterTile) under the weight tile's cap: the blocks whose weights
 * fit half the L2 (weightBlockCap); where every tile those allow holds fewer accumulators than the
 * record's FMA pipes × latency want (`fmaRate`), the fewest more blocks, their weights within the
 * whole L2, with which a tile holds them. A tile short of them leaves the pipes idle at every
 * reduction step (7 accumulators where 8 are wanted: at most 7/8 of the peak, and a broadcast per
 * FMA); a weight tile past half the L2 only shares it with the input rows. On Zen 5 (2 pipes × 4 at
 * 16 lanes) ResNet-50's stride-2 3×3 conv to 7×7 (512 channels, 295 KB of weights a block) went
 * from 7 columns × 1 block to 7 × 2 (2.75 → 2.24 ms in the sequence, CPU time, the core shared);
 * on Zen 4 (1 pipe × 4) 7 accumulators are already enough, and its tile stays.
 */
export const cappedConvTile = (knobs: readonly Knob[], target: ScheduleTarget, choices: Omit<TileChoices, "blockCap">, depthwise: boolean): { cols: number; rows: number; blocks: number } => {
  const lanes = Math.max(target.vectorLanes, 1)
  const block = blockLanes(knobs, lanes)
  const half = weightBlockCap(knobs, lanes, target)
  const tile = convRegisterTile(target, block, { ...choices, blockCap: half }, depthwise)
  const { wanted } = fmaRate(target, block)
  if (tile.cols * tile.rows * tile.blocks >= wanted) return tile
  const whole = weightBlockCap(knobs, lanes, target, target.l2Bytes ?? DEFAULT_L2_BYTES)
  for (const cap of choices.blocks.filter((b) => b > half && b <= whole)) {
    const t = convRegisterTile(target, block, { ...choices, blockCap: cap }, depthwise)
    if (t.cols * t.rows * t.blocks >= wanted) return t
  }
  return tile
}

/**
 * Input-channel batches a conv's reduction may be split into outside its column tiles (`ic_batch`):
 * divisors of the channels from 32 up to half of them, where a row holds more than one tile.
 */
/**
 * Widest tile of columns that leaves a tail (a width that does not divide the row: its last tile
 * cut short, peeled off by LoopPartition): a register tile's columns on the narrowest vectors.
 */
const TAIL_TILE_COLUMNS = 8

/** tile_ow's candidates: the row's divisors up to 32, and the widths up to TAIL_TILE_COLUMNS that leave a tail. */
export const columnTiles = (ow: number): number[] =>
  [...new Set([...divisors(ow, 32), ...Array.from({ length: Math.min(ow - 1, TAIL_TILE_COLUMNS) }, (_, k) => k + 1)])].sort((a, b) => a - b)

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
 * weights stay cached while it walks the image), inside the image tiles (a tile of input pixels
 * stays cached while every channel tile reads it; the parallel loop is then over rows), or inside
 * the row tiles only (`rows`: each core a band of the image, the padded copy split by rows too).
 * `ic_batch` below the input channels splits the reduction outside the image's tiles: the
 * channel tile's sums for the whole image stay in a local buffer across the batches (see apply).
 */
export const convTemplate: Template = {
  name: "conv2d_NCHWc",
  tunable: true,
  space: (_outputs, base) => {
    const st = anchorStage(base)!
    const [, ocb, oh, ow, ob] = st.op.shape
    const [ic, kh, kw] = (st.op.body as Reduce).axes.map((a) => a.dom.extent)
    const stride = inputStride(st)
    const input = convInput(st)
    // knobs that cannot change the loops are left out (a tuner would spend trials on them): no
    // channel split for one input channel (depthwise), no order for a 1×1 kernel, no unrolling of
    // a loop of one
    return [
      { kind: "split", name: "tile_ow", extent: ow, candidates: columnTiles(ow) },
      { kind: "split", name: "tile_oh", extent: oh, candidates: divisors(oh, 8) },
      { kind: "split", name: "tile_oc", extent: ocb, candidates: divisors(ocb, 8), lanes: ob },
      ...(ic > 1 ? [{ kind: "split", name: "tile_ic", extent: ic, candidates: divisors(ic, 64) } as const] : []),
      ...(ic > 1 && kh * kw > 1 ? [{ kind: "choice", name: "reduce_order", candidates: [...REDUCE_ORDERS], inputStride: stride } as const] : []),
      ...(kh > 1 ? [{ kind: "choice", name: "unroll_kh", candidates: [false, true], extent: kh } as const] : []),
      ...(kw > 1 ? [{ kind: "choice", name: "unroll_kw", candidates: [false, true], extent: kw } as const] : []),
      ...(padProducer(base, st) ? [{ kind: "choice", name: "pad_root", candidates: [true, false] } as const] : []),
      ...(ocb > 1 ? [{ kind: "choice", name: "oc_order", candidates: [...OC_ORDERS], absent: "outer", ...(input ? { input } : {}) } as const] : []),
      ...(icBatches(ic, ow).length ? [{ kind: "choice", name: "ic_batch", candidates: [ic, ...icBatches(ic, ow)], absent: ic } as const] : []),
    ]
  },
  defaults: (knobs, target) => {
    const lanes = Math.max(target.vectorLanes, 1)
    const has = (name: string) => knobs.some((k) => k.name === name)
    const cand = (name: string) => candidatesOf(knobs, name)
    // (tile_ow's widths that divide the row: the rules below but the one without FMA count no tail)
    const owKnob = knobs.find((k) => k.name === "tile_ow")
    const ow = owKnob?.kind === "split" ? owKnob.extent : undefined
    const wholeCols = cand("tile_ow").filter((c) => ow === undefined || ow % c === 0)
    // the weights one tile of output channel blocks reads, kept in L2 while the tile walks the
    // image: at most half the L2 (halfL2; else every output column streams them from L3
    // again: ResNet-18's 512-channel layers ran at a third of their speed with 8 blocks per tile)
    // (cappedConvTile; more blocks, within the whole L2, where those leave the FMA pipes short of
    // accumulators). The register tile from the target record (common.ts): columns × rows ×
    // channel blocks of the block's lanes (the output's last axis)
    const tile = cappedConvTile(knobs, target, { cols: cand("tile_ow"), ...(ow === undefined ? {} : { colsExtent: ow }), rows: cand("tile_oh"), blocks: cand("tile_oc") }, !has("tile_ic"))
    let tw = tile.cols
    const toc = tile.blocks
    let th = tile.rows
    // AVX2, a 1x1 conv: two rows of up to 7 columns, 14 accumulators beside the weight vector and
    // one broadcast (all 16 registers; a 1x1 conv keeps nothing else live). Timed in a C loop on
    // Zen 3 against one row of 7-8 columns, MobileNetV2's 14x14 and 28x28 1x1 convs ran 2-25%
    // faster, its 56x56 ones -2 to +12%, ResNet-18's 1x1 stride-2 ones 2-3% (docs/tuning.md);
    // the tuner's rounds had picked it on most of those tasks. 8 columns x 2 rows spill.
    const pointwise = kernelTaps(knobs) === 1 && has("tile_ic")
    if (lanes === 8 && pointwise && toc === 1 && cand("tile_oh").includes(2) && wholeCols.some((c) => c >= 4 && c <= 7)) {
      tw = largest(wholeCols, 7)
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
      tw = largest(wholeCols, 2)
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
    // (ic_only only where the unrolled taps of a row share their input: tapsShareInput)
    const order = knobs.find((k) => k.name === "reduce_order")
    const shared = tapsShareInput(kw?.extent ?? 1, order?.kind === "choice" ? (order.inputStride ?? 1) : 1)
    if (has("reduce_order")) cfg.reduce_order = small && (kh || kw) && shared ? "ic_only" : "ic_kernel"
    // a padded copy pays for itself when every input pixel feeds many channels' FMAs; a depthwise
    // conv (one input channel per output) reads each pixel only KH·KW times: bounds tests instead
    if (has("pad_root")) cfg.pad_root = !depthwise
    // a 1x1 conv with more input channels than output channels (MobileNetV2's projections):
    // channel tiles inside the image tiles, so its input (the larger tensor, in L3 after the
    // depthwise conv wrote it) is read once, not once per channel tile. In MobileNetV2 run whole
    // on this machine they went from 1.9x onnxruntime's time to parity (144 -> 24 at 56x56:
    // 0.62 -> 0.39 ms); expansions and ResNet-18's 3x3 convs ran slower in that order, so they
    // keep their channel tiles outermost. Not where the input stays in half the L2 while the
    // weights do not (inputStaysWeightsStream): the input is then read from L2 by every channel
    // tile anyway, and channel tiles inside stream all the weights again for every image tile;
    // where neither fits, inside the row tiles (projectionOrder)
    const projection = kernelTaps(knobs) === 1 && reduceVolume(knobs) > ocBlocks(knobs) * lanes
    if (has("oc_order")) cfg.oc_order = projection ? projectionOrder(knobs, lanes, target) : "outer"
    if (has("oc_order") && cfg.oc_order === "outer" && imageBands(knobs, lanes, target)) cfg.oc_order = "rows"
    // the whole reduction inside the register tile; batches outside the image's tiles are the
    // tuner's to try (2-5% on the layers timed alone: docs/tuning.md), but for the projections below
    const batch = knobs.find((k) => k.name === "ic_batch")
    if (batch?.kind === "choice") cfg.ic_batch = batch.candidates[0]
    // a projection whose weights and input both exceed half the L2: the input channels in batches
    // whose channel tile's weights fit half the L1 (projectionBatch), the channel tiles outermost
    const weightsFit = reduceVolume(knobs) * ocBlocks(knobs) * blockLanes(knobs, lanes) * 4 <= halfL2(target)
    const inBatches = projection && !weightsFit && !inputStaysWeightsStream(knobs, lanes, target) ? projectionBatch(knobs, lanes, target, toc) : undefined
    if (inBatches !== undefined) {
      cfg.ic_batch = inBatches
      cfg.oc_order = "outer"
    }
    return cfg
  },
  apply: (_outputs, base, config) => {
    const anchor = anchorStage(base)!
    let s = base
    const pad = padProducer(s, anchor)
    if (pad && config.pad_root) s = S.computeRoot(s, pad)
    // (in bands: the padded copy's rows outside its channel blocks, so its parallel loop splits the rows too)
    if (pad && config.pad_root && config.oc_order === "rows") {
      const [pn, pc, py, ...rest] = s.stages.get(pad)!.leaf
      s = S.reorder(s, pad, [pn, py, pc, ...rest])
    }
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
    // batches of 128. A batch's filters (ic_batch x the lanes of tile_oc blocks) are then read
    // from L1 by every tile of the image; the register tile is tile_oc channel blocks x tile_oh x
    // tile_ow (the blocks inside the image's tiles, as unbatched), its sums kept in registers
    // within a batch by PromoteAccumulators. Channel tiles outermost.
    const icBatch = Number(config.ic_batch ?? Infinity)
    const lst = s.stages.get(local)!
    const channels = lst.leaf.map((a) => lst.axes.get(a)!).find((ax) => ax.type === "reduce")?.extent ?? 0
    const batched = icBatch < channels
    const ocInner = config.oc_order === "inner" && !batched
    // (a row's last tile cut short, tile_ow not dividing it: its tile loop stays serial and inside
    // the parallel loop, so LoopPartition peels the short tile off — fused into the parallel loop,
    // its guard would reach every tile; with channel tiles inside, the channel tiles go outside it)
    const tail = s.stages.get(out)!.axes.get(ow)!.extent % tw !== 0
    // (in bands: the row tiles outermost, the channel tiles inside them, each walking the row's columns)
    const bands = config.oc_order === "rows" && !batched
    s = S.reorder(
      spc.schedule,
      out,
      ocInner ? [n, sph.outer, ...(tail ? [spc.outer, spw.outer] : [spw.outer, spc.outer]), spc.inner, sph.inner, spw.inner, oi] : bands ? [n, sph.outer, spc.outer, spw.outer, spc.inner, sph.inner, spw.inner, oi] : [n, spc.outer, sph.outer, spw.outer, spc.inner, sph.inner, spw.inner, oi],
    )
    // (channel tiles inside: a small image's few tiles — 7 rows of a 7x7 image — are fused with
    // the channel tiles into the parallel loop, else two cores split 7 rows 4 : 3)
    s = parallelOuter(s, out, ocInner ? (tail ? [n, sph.outer, spc.outer] : [n, sph.outer, spw.outer, spc.outer]) : batched ? [n, spc.outer] : bands ? [n, sph.outer, spc.outer] : [n, spc.outer, sph.outer])
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
      // the image: its tiles inside the batches, each batch's channels inside a tile, the tile's
      // channel blocks inside those (one broadcast of an input element feeds every block's FMA)
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
      s = S.reorder(s, local, [ln, spb.outer, spr.outer, spl.outer, ...inner.filter((a) => a !== undefined), loc, loh, low, loi])
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
    if (toc > 1 && tw * th * toc <= MAX_UNROLLED) s = S.unroll(s, local, loc)
    if (config.unroll_kh) s = S.unroll(s, local, rky)
    if (config.unroll_kw) s = S.unroll(s, local, rkx)
    return parallelize(s, vector, out)
  },
}
