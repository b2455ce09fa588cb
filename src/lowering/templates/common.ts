// What the CPU templates share: the group's anchor stage, its data loops, the parallel and
// vectorized loops every root stage gets, the stages a register tile is made of, and the register
// tile of vector accumulators a target's register file holds.
import * as S from "../../ast/schedule/schedule.js"
import { collect, freeVars, type Expr } from "../../ast/te/expr.js"
import type { Knob, ScheduleTarget } from "./template.js"

export const divisors = (n: number, max = 64): number[] => {
  const out: number[] = []
  for (let d = 1; d <= Math.min(n, max); d++) if (n % d === 0) out.push(d)
  return out
}

/** The root reduction stage a group is built around (conv, matmul, pooling), if any. */
export const anchorStage = (s: S.Schedule): S.Stage | undefined => {
  const roots = s.order.map((n) => s.stages.get(n)!).filter((st) => st.attach.kind === "root")
  return [...roots].reverse().find((st) => st.op.body.kind === "reduce" && st.op.body.axes.length > 0 && st.op.axes.length >= 2)
}

export const dataLeaves = (st: S.Stage) => st.leaf.filter((a) => st.axes.get(a)!.type === "data")

/**
 * The int32 stage a stage narrows (its body a cast of a read of it: the requantization's saturated
 * values, op-library-quant-int.ts), inline and of the same shape — the stage a schedule computes in
 * whole vectors of int32 lanes at the narrowing's loop: a loop that stores 8-bit values takes the
 * 8-bit type's vectors, at 16 lanes 16 bytes, for every int32 and float step (gcc).
 */
/**
 * Whether an int8 epilogue stores its 8-bit values from the loop that requantizes them (no int32
 * stage narrowed after it): where the emitter vectorizes by the lanes (js, wasm), or renders the
 * requantizing store in whole 16-lane vectors itself (c with AVX-512: requantize-store.ts). Else
 * gcc would take the 8-bit store's 16-byte vectors for every int32 and float step.
 */
export const fusedEpilogue = (target: ScheduleTarget): boolean => target.outerLoopVectorizer === false || target.requantizeStores === true

export const narrowedStage = (s: S.Schedule, stage: string): string | undefined => {
  const st = s.stages.get(stage)!
  const body = st.op.body
  const source = body.kind === "cast" && body.value.kind === "read" ? body.value.source : undefined
  // (the values in the narrowing's shape, or in blocks of channels as many: the channels-in-lanes depthwise forms')
  const size = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1)
  const wide = st.op.inputs.find((t) => t.name === source && t.kind === "compute" && t.dtype === "int32" && size(t.shape) === size(st.op.shape) && s.stages.get(t.name)?.attach.kind === "inline")
  return wide?.name
}

/** Iterations a parallel loop gathers by default (parallelOuter fuses the loops it is given until it has as many). */
export const PARALLEL_MIN_EXTENT = 32

/**
 * Parallel over the leading loops `axes` (adjacent, outermost first): they are fused until the loop
 * has at least `minExtent` iterations, so batch 1 does not leave cores idle and a static split over
 * a few cores stays balanced (9 channel blocks on 2 cores would leave one idle a ninth of the time).
 */
export const parallelOuter = (s0: S.Schedule, stage: string, axes: readonly string[], minExtent = PARALLEL_MIN_EXTENT): S.Schedule => {
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
 * data and no longer than the vectorize primitive takes: every root stage but those in `skip`.
 */
export const parallelize = (s0: S.Schedule, vectorize: boolean, skip?: string | readonly string[]): S.Schedule => {
  let s = s0
  const skipped = typeof skip === "string" ? [skip] : skip ?? []
  for (const name of s.order) {
    if (skipped.includes(name)) continue
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
 * The stage a tile is made of and the stage computed at it: the anchor's one epilogue stage (root,
 * elementwise, of the anchor's shape) and the anchor; or, when nothing reads the anchor, the anchor
 * itself and a local copy of it (cacheWrite). Undefined for any other reader pattern.
 */
export const tileStages = (s: S.Schedule, anchor: S.Stage): { schedule: S.Schedule; out: string; local: string } | undefined => {
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

/** The knob's candidates (numbers: a split's factors). */
export const candidatesOf = (knobs: readonly Knob[], name: string): number[] => knobs.find((k) => k.name === name)!.candidates as number[]

/** The largest candidate ≤ max (1 when none is). */
export const largest = (xs: readonly number[], max: number): number => [...xs].reverse().find((d) => d <= max) ?? 1

/** The register tile's choices: positions as columns (and rows), channel blocks up to a cap. */
export interface TileChoices {
  /** Columns (output columns, Winograd tiles): candidates. */
  readonly cols: readonly number[]
  /**
   * The columns' extent, where a candidate may not divide it (a tail tile: the last tile of a row
   * cut short). Absent: every candidate divides. Only mulAddRegisterTile counts a tail's cost;
   * convRegisterTile keeps the divisors.
   */
  readonly colsExtent?: number
  /** Rows of positions (output rows): candidates (absent: one row). */
  readonly rows?: readonly number[]
  /** Output channel blocks: candidates, at most `blockCap` of them. */
  readonly blocks: readonly number[]
  readonly blockCap?: number
}

/** Accumulators an unrolled register tile holds at most (the conv template unrolls up to this many). */
export const MAX_TILE_ACCUMULATORS = 32

/** Accumulators a register tile may hold on a target with this many vector registers: half of them (the rest hold inputs and weights), at most MAX_TILE_ACCUMULATORS. */
export const accumulatorCap = (vectorRegisters: number): number => Math.min(MAX_TILE_ACCUMULATORS, Math.floor(vectorRegisters / 2))

/**
 * The share of the FMA pipes' peak a register tile of `acc` accumulators sustains, each reduction
 * step issuing `loads` loads (a broadcast or a vector load each): a step takes the longest of its
 * FMAs over the pipes (`rate` FMAs a cycle at this width), its loads over as many load ports (a
 * vector FMA takes at most one memory operand, and a core feeds each FMA pipe one a cycle: Zen 4
 * one 512-bit FMA and one 512-bit load, two of each at 256 bits; Skylake-X and Zen 5 two and two
 * at 512), and the FMA latency (each accumulator is updated once a step: acc ≥ rate × latency
 * hides it).
 */
export const tileFmaShare = (acc: number, loads: number, rate: number, latency: number): number => {
  const fma = acc / rate
  return fma / Math.max(fma, loads / rate, latency)
}

/**
 * Positions at most across which gcc folds a block's weight vector into every FMA (a vector load
 * each) rather than loading it into a register once: on Zen 4, 4 × 4 and 4 × 3 tiles' weight
 * loads were all folded (16 vector loads for 16 FMAs a step: the Winograd products at 56×56 ran
 * 0.78 ms against 0.72 for 7 × 2), 7 × 2 and 8 × 2 tiles' loaded once. A property of the compiler
 * the c target emits for, like the 16-register rule below, not of the CPU.
 */
export const GCC_FOLDED_POSITIONS = 4

/**
 * Loads a reduction step of a register tile issues: an input element per position (broadcast,
 * once for all blocks) and a weight vector per block — a vector per FMA where gcc folds the
 * weights of two or more blocks into the FMAs (positions ≤ GCC_FOLDED_POSITIONS); `depthwise`: an
 * input vector per FMA and a weight vector per block.
 */
export const tileLoads = (positions: number, blocks: number, depthwise: boolean): number =>
  depthwise ? positions * blocks + blocks : positions + (blocks > 1 && positions <= GCC_FOLDED_POSITIONS ? positions * blocks : blocks)

/**
 * FMAs a cycle at a block's width (the record's pipes; a block narrower than the target's vectors
 * issues units × lanes / block a cycle) and the independent accumulators that keeps busy: that
 * rate × the FMA latency (Zen 4's record at 16 lanes: 1 pipe × 4; Zen 5's: 2 × 4).
 */
export const fmaRate = (target: ScheduleTarget, block: number): { rate: number; latency: number; wanted: number } => {
  const lanes = Math.max(1, target.vectorLanes)
  const width = Math.max(1, Math.min(block, lanes))
  const rate = (target.fmaUnits ?? 2) * Math.max(1, Math.floor(lanes / width))
  const latency = target.fmaLatency ?? 4
  return { rate, latency, wanted: rate * latency }
}

/**
 * A register tile of vector accumulators (one per position and channel block, each `block`
 * lanes) sized from the target record, as the matmul rule sizes its tile:
 * - at most half the vector registers: gcc keeps the other half for the operands of the unrolled
 *   kernel taps it hoists (AVX2's 16 registers: 8 accumulators ran at 82–84% of peak in a 3×3
 *   conv's tile, 14 spilled to 45–55%);
 * - the largest share of the FMA pipes' peak (`tileFmaShare`): the FMA pipes at this width (a
 *   block narrower than the target's vectors issues units × lanes / block FMAs a cycle), their
 *   latency, and a step's loads over as many load ports (`tileLoads`: a broadcast per position, a
 *   weight vector per block, or per FMA where gcc folds them). One block alone broadcasts once
 *   for every FMA, a load more than the FMAs each step: ResNet-18's Winograd products on Zen 4 (one 512-bit FMA and load a cycle) ran
 *   16 tiles × 1 block at 7×7 in 2.23 ms, 8 × 2 in 1.51, 4 × 4 in 1.71 (caches swept);
 * - one row of positions where one row holds at least half the accumulators the pipes want
 *   (rate × latency): a row more is another input row's stream, and a strided
 *   conv's rows share no input (ResNet-18's 3×3 stride-2 conv to 28×28 on Zen 4: 4 columns × 4
 *   rows 1.15 ms, 7 columns × 2 blocks 1.04); rows fill a narrow image's tile;
 * - then the fewest bytes loaded per FMA (a weight vector of block × 4 bytes per block, 4 bytes
 *   per position): wide columns of few blocks win — ResNet-18's stem on Zen 4 ran 8 columns × 2
 *   blocks in 2.22 ms, 4 × 4 in 2.62;
 * - with 16 registers or fewer, one block: gcc kept one block's weight vector in a register but
 *   folded the loads of two or more blocks into every FMA (AVX2 on Zen 3: one block of 8 columns
 *   at 82–84% of peak, two blocks at 65–70%);
 * - then fewer rows, then wider columns.
 */
export const convRegisterTile = (target: ScheduleTarget, block: number, choices: TileChoices, depthwise = false): { cols: number; rows: number; blocks: number } => {
  // (a multiply-add of two instructions and a splat load: mulAddRegisterTile, below)
  if (target.fusedMultiplyAdd === false && !depthwise) return mulAddRegisterTile(target, block, choices)
  const extent = choices.colsExtent
  const cols = extent === undefined ? choices.cols : choices.cols.filter((c) => extent % c === 0)
  const lanes = Math.max(1, target.vectorLanes)
  const registers = target.vectorRegisters ?? 16
  const width = Math.max(1, Math.min(block, lanes))
  // FMAs a cycle at the block's width, their latency, and the accumulators they want
  const { rate, latency, wanted: need } = fmaRate(target, block)
  const cap = accumulatorCap(registers)
  // (16 registers or fewer: one block — with two, gcc reloaded the weights in every FMA)
  const blocks = choices.blocks.filter((b) => b <= (choices.blockCap ?? Infinity) && (registers > 16 || b === 1))
  const tiles = (blocks.length ? blocks : [1])
    .flatMap((b) => (choices.rows ?? [1]).flatMap((r) => cols.map((c) => ({ cols: c, rows: r, blocks: b, acc: c * r * b }))))
    .filter((t) => t.acc <= cap || t.acc === 1)
    .map((t) => ({ ...t, share: tileFmaShare(t.acc, tileLoads(t.cols * t.rows, t.blocks, depthwise), rate, latency) }))
  // one row where one row holds at least half the accumulators the pipes want
  const oneRow = tiles.filter((t) => t.rows === 1)
  const pool = oneRow.some((t) => Math.min(t.acc, need) >= need / 2) ? oneRow : tiles
  let best: { cols: number; rows: number; blocks: number; score: number[] } | undefined
  for (const t of pool) {
    const bytes = (4 * width) / (t.cols * t.rows) + (depthwise ? 4 * width : 4 / t.blocks)
    const score = [t.share, -bytes, -t.rows, t.cols]
    if (!best || lexGreater(score, best.score)) best = { ...t, score }
  }
  return best ? { cols: best.cols, rows: best.rows, blocks: best.blocks } : { cols: 1, rows: 1, blocks: 1 }
}

/**
 * The register tile of a conv (not depthwise) on a target without a fused multiply-add
 * (`fusedMultiplyAdd: false`: WebAssembly SIMD128). Each product there is three instructions of its
 * own — the input element's broadcast load (`v128.load32_splat`, once per position and reduction
 * step, shared by the blocks), `f32x4.mul`, `f32x4.add` — and a weight vector is loaded once per
 * block and step into a local the engine keeps in a register (none of gcc's folding of loads into
 * FMAs, which limits convRegisterTile to one block with 16 registers). So:
 * - registers: the accumulators, one weight vector per block, each position's broadcast input and
 *   the product before its add — at most the ISA's vector registers less the engine's scratch
 *   (`ENGINE_SCRATCH_REGISTERS`; `mulAddLiveRegisters`). A broadcast shared by several blocks
 *   counts once a position: V8 issues a straight-line region's loads ahead of its arithmetic
 *   (docs/scheduling.md), so those splats are live together. Counting one broadcast let 3
 *   columns × 3 blocks and 6 × 2 through (16 live values): MobileNetV2's 1×1 convs ran at about
 *   half their speed with them (Node 20, Zen 5, CPU time alternated);
 * - accumulators at least the adds' pipes × latency, where the candidates allow (the multiply is
 *   off the accumulator's chain);
 * - one row where one row holds half of those (as convRegisterTile);
 * - then the fewest loads per product, (positions + blocks) / (positions × blocks): a tile of two
 *   blocks and four columns loads 0.75 a product, eight columns of one block 1.125 — over a whole
 *   row of tiles where a width does not divide the row (`colsExtent`): its last tile cut short
 *   loads (rest × rows + blocks) for rest × rows × blocks products (`rowLoadsPerProduct`). A row
 *   of 7 as one tile of 7 columns × 1 block loads 1.14 a product; as 4 + 3 columns × 2 blocks, 0.79;
 * - then fewer rows, wider columns.
 */
export const mulAddRegisterTile = (target: ScheduleTarget, block: number, choices: TileChoices): { cols: number; rows: number; blocks: number } => {
  const lanes = Math.max(1, target.vectorLanes)
  const registers = target.vectorRegisters ?? 16
  const need = fmaRate(target, block).wanted
  const extent = choices.colsExtent
  const blocks = choices.blocks.filter((b) => b <= (choices.blockCap ?? Infinity))
  const tiles = (blocks.length ? blocks : [1])
    .flatMap((b) => (choices.rows ?? [1]).flatMap((r) => choices.cols.map((c) => ({ cols: c, rows: r, blocks: b, acc: c * r * b }))))
    .filter((t) => mulAddLiveRegisters(t.cols * t.rows, t.blocks) <= registers - ENGINE_SCRATCH_REGISTERS || t.acc === 1)
  const oneRow = tiles.filter((t) => t.rows === 1)
  const pool = oneRow.some((t) => Math.min(t.acc, need) >= need / 2) ? oneRow : tiles
  let best: { cols: number; rows: number; blocks: number; score: number[] } | undefined
  for (const t of pool) {
    const score = [Math.min(t.acc, need), -rowLoadsPerProduct(t.cols, t.rows, t.blocks, extent ?? t.cols), -t.rows, t.cols]
    if (!best || lexGreater(score, best.score)) best = { ...t, score }
  }
  return best ? { cols: best.cols, rows: best.rows, blocks: best.blocks } : { cols: 1, rows: 1, blocks: 1 }
}

/**
 * Vector registers the engine keeps for itself on a target without FMA (WebAssembly: V8's
 * optimizing tier holds xmm15 as scratch, so 15 of x64's 16 are allocated).
 */
export const ENGINE_SCRATCH_REGISTERS = 1

/**
 * Values a mul + add register tile keeps live in a reduction step: its accumulators, a weight
 * vector a block, the product, and the broadcasts — each position's where it feeds several blocks
 * (it lives until its last product), one where it feeds one block (each dies at its product: 7
 * columns of one block, 16 live values counted the other way, ran ResNet-18's Winograd products at
 * 28×28 ~15% faster than 1 column of 4 blocks).
 */
export const mulAddLiveRegisters = (positions: number, blocks: number): number => positions * blocks + (blocks > 1 ? positions : 1) + blocks + 1

/**
 * Loads a product of a row of `extent` columns tiled `cols` wide (`rows` × `blocks` a tile) issues
 * on a target without FMA: a broadcast a position and a weight vector a block each step, the last
 * tile cut short where `cols` does not divide the row.
 */
export const rowLoadsPerProduct = (cols: number, rows: number, blocks: number, extent: number): number => {
  const whole = Math.floor(extent / cols)
  const rest = extent - whole * cols
  const loads = whole * (cols * rows + blocks) + (rest > 0 ? rest * rows + blocks : 0)
  return loads / (extent * rows * blocks)
}

const lexGreater = (a: readonly number[], b: readonly number[]): boolean => {
  for (let i = 0; i < a.length; i++) if (Math.abs(a[i] - b[i]) > 1e-12) return a[i] > b[i]
  return false
}

/**
 * Whether a reduction runs along its inputs' innermost (contiguous) dimension: every read that
 * depends on a reduce variable has one as its last index (a softmax's sum over the last axis, a
 * ReduceSum or LayerNorm's statistics over it) — its sum vectorizes along the reduce loop, which
 * must stay innermost. A matrix product (B[k, j]) or a convolution (x[…, w + kw]) is not one.
 */
export const innerReduction = (st: S.Stage): boolean => {
  const body = st.op.body
  if (body.kind !== "reduce") return false
  const red = new Set(body.axes.map((a) => a.var.name))
  const reads = collect(body.source, (x) => x.kind === "read") as Extract<Expr, { kind: "read" }>[]
  const dependent = reads.filter((r) => r.indices.some((x) => [...freeVars(x)].some((n) => red.has(n))))
  return dependent.length > 0 && dependent.every((r) => {
    const last = r.indices[r.indices.length - 1]
    return last.kind === "var" && red.has(last.name)
  })
}

/**
 * The tiles of a channel's pixels (the vector loop, at most MAX_VECTORIZED long): the divisors of
 * the pixels and the multiples of 4 (the narrowest vector's lanes) that fit, the last tile of those
 * cut short (a guarded tail loop partitioning peels off).
 */
export const pixelTiles = (pixels: number): number[] => {
  const cap = Math.min(pixels, S.MAX_VECTORIZED)
  const fours = Array.from({ length: Math.floor(cap / 4) }, (_, k) => 4 * (k + 1))
  return [...new Set([...divisors(pixels, cap), ...fours])].sort((x, y) => x - y)
}

/**
 * A channel's pixel tile by default (of pixelTiles' candidates): all of its pixels where the vector
 * loop takes them, else the most whole vectors it takes.
 */
export const pixelTileDefault = (tiles: readonly number[], target: ScheduleTarget): number => {
  const lanes = Math.max(1, target.vectorLanes)
  const all = tiles[tiles.length - 1]
  const whole = tiles.filter((t) => t % lanes === 0)
  // (a channel of fewer pixels than whole vectors, 7² = 49, through the C compiler: one vector a
  // tile, the last cut short — gcc's vector loop of 49 steps 32 byte lanes and leaves 17 a
  // channel to its scalar epilogue where vectorized epilogues are off, C_FLAGS's OpenMP build; 16
  // steps it takes whole. With them, the pool's build: 16 and 49 equal, MobileNetV2's 7² convs 0.068 ms)
  const ragged = all < S.MAX_VECTORIZED && all % lanes !== 0 && all > lanes && target.outerLoopVectorizer !== false && tiles.includes(lanes)
  return ragged ? lanes : all < S.MAX_VECTORIZED || whole.length === 0 ? all : whole[whole.length - 1]
}
