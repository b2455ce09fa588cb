// An int8 conv2d with its requantize epilogue (+ bias, >> shift, clip to [clipLo, 127]), in VTA's
// packed layouts: the layer, its schedule's knobs, its TE (the reference), the checks every
// schedule must pass to fit the accelerator, the DRAM image's tensors, and the default schedule.
// Its VTA program comes from the pass pipeline (src/lowering/vta/tir/) or the direct generator
// (conv2d-generator.ts); conv2d.ts chooses.
//
// Layouts (TVM's graph pack at batch 1, NCHW1n16c): data [CI][H][W][BATCH][BLOCK_IN], kernel
// [CO][CI][KH][KW][BLOCK_OUT][BLOCK_IN], out [CO][OH][OW][BATCH][BLOCK_OUT], CI and CO counted in
// blocks; the BATCH axis is the GEMM intrinsic's row axis, as in TVM's packed conv2d. In
// DRAM they are exactly VTA's input, weight and output elements, so packing is a byte copy.
import { Data } from "effect"
import type { VtaDerived } from "../../ast/vta/config.js"
import { VTA_CYCLE_MODEL, type VtaCycleModel } from "../../ast/vta/cycle-model.js"
import type { DramLayout } from "../../ast/vta/dram-image.js"
import type { VtaInsn } from "../../ast/vta/isa.js"
import { and, c, cast, floordiv, ge, lt, max, min, mul, select, add, sub, type Expr } from "../../ast/te/expr.js"
import { at, compute, placeholder, reduceAxis, sum, type ComputeTensor, type Placeholder } from "../../ast/te/tensor.js"

export interface VtaConv2d {
  /** Input and output channels, in blocks of BLOCK_IN / BLOCK_OUT. */
  readonly ci: number
  readonly co: number
  readonly h: number
  readonly w: number
  readonly kh: number
  readonly kw: number
  readonly stride: number
  readonly pad: number
  /** The requantize shift: out = clip((acc + bias) >> shift, lower, 127), lower below (0 or −128); 0–31, a shift over 15 emitted as SHRs of at most 15 each (the SHR reads its amount as signed 5 bits). */
  readonly shift: number
  /**
   * Optional epilogue of a graph's conv (issue 21's graph side, src/rewrite/vta-partition.ts): an
   * int32 bias per output channel added before the shift (ALU ADD from bias rows loaded into the
   * accumulator), and the clip's lower bound (0, the default, is ReLU; −128 is no ReLU).
   */
  readonly bias?: boolean
  readonly clipLo?: number
}

/** The loop order of the output tiles: channel tiles outer (weights stationary) or row tiles outer (inputs stationary). */
export type VtaLoopOrder = "co-oh" | "oh-co"

/** The accumulator rows the bias takes beside `vthreads` tiles of `tileCo` channel blocks (none without bias). */
export const biasRowsOf = (x: VtaConv2d, tileCo: number, vthreads: number): number => (x.bias ? vthreads * tileCo : 0)

/**
 * The epilogue's micro-ops besides the GEMM kernels: one a chunk and slot for the immediate ALU
 * passes (the first chunk's is the reset's), one more a chunk and slot for the bias ADD.
 */
export const epilogueUopsOf = (x: VtaConv2d, vthreads: number, chunks = 1): number => vthreads * chunks * (x.bias ? 2 : 1)

export interface VtaConv2dSchedule {
  /** Output rows per tile. */
  readonly tileOh: number
  /** Output channel blocks per tile (a divisor of `co`). */
  readonly tileCo: number
  /** Input channel blocks per reduction step (a divisor of `ci`; absent: all of them, one step a tile). */
  readonly tileCi?: number
  /** Absent: "co-oh". */
  readonly order?: VtaLoopOrder
  /** Virtual threads: every buffer split into this many slots, used in turn (1 to 4). */
  readonly vthreads: number
  /**
   * The least accumulator entries of an epilogue chunk — a chunk's ALU passes, then its STORE, so
   * that each chunk's STORE runs under the next chunk's passes and only the last chunk's is left
   * after the tile's last ALU op (`epilogueChunkOf` gives the chunk's shape). 0: the whole tile's
   * passes, then its stores. Absent: with virtual threads `defaultEpilogueChunk`, with one thread 0
   * (the serial baseline stays serial). The direct generator ignores it (the whole tile).
   */
  readonly epilogueChunk?: number
}

/**
 * The requantize epilogue's ALU instructions a tile (SHR, MAX 0, MIN 127) for a shift of 1 to
 * VTA_SHR_MAX, each one pass over the tile's accumulators. Three is the least for clip(acc >> s, 0,
 * 127) with VTA's two-operand ALU: each of the three ops changes values the other two keep.
 */
export const EPILOGUE_ALU_PASSES = 3

/**
 * The largest right shift one ALU SHR makes: its operand is read as a signed LOG_ACC_WIDTH-bit
 * amount (VTA_SHR_ARG_BIT_WIDTH; accumulators are always 32-bit here, so 5 bits, −16..15) — an
 * immediate of 16..31 would shift LEFT (src/device/vta/execute.ts, as the hardware's ap_int does).
 */
export const VTA_SHR_MAX = 15

/** The SHR amounts that make a right shift by k: none for 0, k itself up to VTA_SHR_MAX, else steps of VTA_SHR_MAX and the rest (⌊⌊x/2^a⌋/2^b⌋ = ⌊x/2^(a+b)⌋). */
export const shrStepsOf = (k: number): number[] => {
  const steps: number[] = []
  for (let r = k; r > 0; r -= VTA_SHR_MAX) steps.push(Math.min(r, VTA_SHR_MAX))
  return steps
}

/** The layer's ALU passes a tile: its shift's SHRs (one for 1..15), MAX and MIN, and the bias's ADD when it has one. */
export const epilogueAluPasses = (x: VtaConv2d): number => 2 + shrStepsOf(x.shift).length + (x.bias ? 1 : 0)

/**
 * The least entries of an epilogue chunk, from the cycle model (the target's record, never this
 * machine): a chunk of E accumulator entries takes passes·aluII·E cycles of ALU and its STORE
 * dmaLatency + E·outBytes/busBytes, so chunks of at least dmaLatency / (passes·aluII −
 * outBytes/busBytes) entries keep the store module up with the ALU (smaller ones queue their
 * latencies behind it). 0 (no chunks) where a STORE can never keep up. Default model and
 * configuration: 64 / (3·2 − 16/8) = 16 entries.
 */
export const defaultEpilogueChunk = (d: VtaDerived, x: VtaConv2d, model: VtaCycleModel = VTA_CYCLE_MODEL): number => {
  const perEntry = epilogueAluPasses(x) * model.aluII - d.outElemBytes / d.busBytes
  return perEntry <= 0 ? 0 : Math.ceil(model.dmaLatency / perEntry)
}

/**
 * The shape of the schedule's epilogue chunks, each one STORE of at least the least entries:
 * `rows` output rows of one channel block (contiguous in DRAM) where a block's tile rows hold
 * them; else, when the tile holds every output row (its blocks' rows contiguous in DRAM too),
 * `blocks` channel blocks of all the tile's rows. undefined: the whole tile at once (no chunk
 * size, one chunk would be the whole tile, or a chunk would be several STOREs, each too small to
 * keep up with the ALU).
 */
export const epilogueChunkOf = (d: VtaDerived, x: VtaConv2d, s: VtaConv2dSchedule): { readonly rows: number } | { readonly blocks: number } | undefined => {
  const E = s.epilogueChunk ?? (s.vthreads > 1 ? defaultEpilogueChunk(d, x) : 0)
  if (E <= 0) return undefined
  const { ow } = outSize(x)
  const rows = Math.max(1, Math.ceil(E / ow))
  if (rows <= s.tileOh) return s.tileCo === 1 && rows >= s.tileOh ? undefined : { rows }
  if (s.tileOh < outSize(x).oh) return undefined
  const blocks = Math.ceil(E / (s.tileOh * ow))
  return blocks >= s.tileCo ? undefined : { blocks }
}

/** Epilogue chunks a full tile has (1 without chunks). */
export const epilogueChunksOf = (d: VtaDerived, x: VtaConv2d, s: VtaConv2dSchedule): number => {
  const k = epilogueChunkOf(d, x, s)
  return k === undefined ? 1 : "rows" in k ? s.tileCo * Math.ceil(s.tileOh / k.rows) : Math.ceil(s.tileCo / k.blocks)
}

/** A schedule the accelerator cannot hold: a tile larger than its buffer, a loop longer than its field. */
export class VtaScheduleError extends Data.TaggedError("VtaScheduleError")<{ readonly reason: string }> {
  override get message(): string {
    return `VTA schedule: ${this.reason}`
  }
}

export const outSize = (x: VtaConv2d): { oh: number; ow: number } => ({
  oh: Math.floor((x.h + 2 * x.pad - x.kh) / x.stride) + 1,
  ow: Math.floor((x.w + 2 * x.pad - x.kw) / x.stride) + 1,
})

/** The TE of the layer: placeholders data and kernel, the int32 conv, the requantized int8 out. */
export const conv2dTE = (d: VtaDerived, x: VtaConv2d): { data: Placeholder; kernel: Placeholder; bias?: Placeholder; pad: ComputeTensor; conv: ComputeTensor; out: ComputeTensor } => {
  const { oh, ow } = outSize(x)
  const BI = d.blockIn
  const BO = d.blockOut
  const B = d.batch
  const data = placeholder("data", [x.ci, x.h, x.w, B, BI], "int8")
  const kernel = placeholder("kernel", [x.co, x.ci, x.kh, x.kw, BO, BI], "int8")
  const H = x.h + 2 * x.pad
  const W = x.w + 2 * x.pad
  const inside = (e: Expr, n: number): Expr => and(ge(e, c(0)), lt(e, c(n)))
  const pad = compute("pad", [x.ci, H, W, B, BI], (ci, y, xx, b, ic) => {
    const yy = sub(y, c(x.pad))
    const xs = sub(xx, c(x.pad))
    return select(and(inside(yy, x.h), inside(xs, x.w)), at(data, ci, yy, xs, b, ic), c(0, "int8"))
  }, "int8")
  const rci = reduceAxis(x.ci, "rci")
  const rkh = reduceAxis(x.kh, "rkh")
  const rkw = reduceAxis(x.kw, "rkw")
  const ric = reduceAxis(BI, "ric")
  const conv = compute("conv", [x.co, oh, ow, B, BO], (co, y, xx, b, oc) =>
    sum(
      mul(
        cast("int32", at(pad, rci.var, add(mul(y, c(x.stride)), rkh.var), add(mul(xx, c(x.stride)), rkw.var), b, ric.var)),
        cast("int32", at(kernel, co, rci.var, rkh.var, rkw.var, oc, ric.var)),
      ),
      [rci, rkh, rkw, ric],
    ), "int32")
  const bias = x.bias ? placeholder("bias", [x.co, BO], "int32") : undefined
  const out = compute("out", [x.co, oh, ow, B, BO], (co, y, xx, b, oc) => {
    const sum = bias ? add(at(conv, co, y, xx, b, oc), at(bias, co, oc)) : at(conv, co, y, xx, b, oc)
    return cast("int8", min(max(floordiv(sum, c(2 ** x.shift, "int32")), c(x.clipLo ?? 0, "int32")), c(127, "int32")))
  }, "int8")
  return { data, kernel, ...(bias ? { bias } : {}), pad, conv, out }
}

export interface VtaConv2dProgram {
  readonly insns: VtaInsn[]
  readonly layout: DramLayout
  /** DRAM with the micro-ops in place; `withTensors` adds the data and kernel. */
  readonly dram: Uint8Array
  readonly tiles: number
}

const need = (ok: boolean, reason: string): void => {
  if (!ok) throw new VtaScheduleError({ reason })
}

/**
 * What every schedule of the layer must satisfy, whichever path lowers it (the tuner's space and
 * the partition's fit test are these): BATCH 1, 1–4 virtual threads, tiles that divide, V slots of a
 * tile's input window, weights and accumulators (and the bias rows) within the buffers, a tile's
 * rows × columns within a loop field.
 */
export const checkConv2dSchedule = (d: VtaDerived, x: VtaConv2d, s: VtaConv2dSchedule): void => {
  const { oh: OH, ow: OW } = outSize(x)
  const V = s.vthreads
  const tileCi = s.tileCi ?? x.ci
  need(d.batch === 1, "the conv2d schedule is written for BATCH 1")
  need(Number.isInteger(V) && V >= 1 && V <= 4, `vthreads ${V} is not in 1..4`)
  need(x.co % s.tileCo === 0, `tileCo ${s.tileCo} does not divide ${x.co} output channel blocks`)
  need(x.ci % tileCi === 0, `tileCi ${tileCi} does not divide ${x.ci} input channel blocks`)
  need(s.tileOh >= 1 && s.tileOh <= OH, `tileOh ${s.tileOh} is not in [1, ${OH}]`)
  need(x.pad <= 15, "padding above 15 does not fit a LOAD's 4-bit pad fields")
  need(s.epilogueChunk === undefined || (Number.isInteger(s.epilogueChunk) && s.epilogueChunk >= 0), `epilogueChunk ${s.epilogueChunk} is not a whole number ≥ 0`)
  const colsIn = x.w + 2 * x.pad
  const rowsMax = (s.tileOh - 1) * x.stride + x.kh
  const inpSlot = tileCi * rowsMax * colsIn
  const wgtSlot = s.tileCo * tileCi * x.kh * x.kw
  const accSlot = s.tileCo * s.tileOh * OW
  need(V * inpSlot <= d.inpDepth, `a tile's input window is ${inpSlot} entries; ${V} of them exceed the input buffer's ${d.inpDepth}`)
  need(V * wgtSlot <= d.wgtDepth, `a tile's weights are ${wgtSlot} entries; ${V} of them exceed the weight buffer's ${d.wgtDepth}`)
  const biasRows = biasRowsOf(x, s.tileCo, V)
  need(V * accSlot + biasRows <= d.accDepth, `a tile's accumulators are ${accSlot} entries; ${V} of them${biasRows ? ` and ${biasRows} bias rows` : ""} exceed the accumulator buffer's ${d.accDepth}`)
  need(s.tileOh * OW < 2 ** 14, "a tile's rows × columns exceed the 14-bit loop count")
}

/** The program's DRAM with the data and kernel (int8, in the packed layouts) in place. */
export const withTensors = (p: VtaConv2dProgram, data: ArrayLike<number>, kernel: ArrayLike<number>, bias?: ArrayLike<number>): Uint8Array => {
  const dram = p.dram.slice()
  const put = (name: string, values: ArrayLike<number>) => {
    const at0 = p.layout.regions.get(name)!.byteOffset
    for (let i = 0; i < values.length; i++) dram[at0 + i] = values[i] & 0xff
  }
  put("data", data)
  put("kernel", kernel)
  if (bias) {
    const r = p.layout.regions.get("bias")!
    const view = new DataView(dram.buffer, dram.byteOffset, dram.byteLength)
    for (let i = 0; i < bias.length; i++) view.setInt32(r.byteOffset + 4 * i, bias[i], true)
  }
  return dram
}

/** The int8 output [CO][OH][OW][BLOCK_OUT] read back from DRAM. */
export const readOut = (d: VtaDerived, x: VtaConv2d, p: VtaConv2dProgram, dram: Uint8Array): Int8Array => {
  const { oh, ow } = outSize(x)
  const r = p.layout.regions.get("out")!
  return new Int8Array(dram.buffer, dram.byteOffset + r.byteOffset, x.co * oh * ow * d.blockOut).slice()
}

/**
 * A schedule's time as the cycle model prices it, statically (no simulation: what the default
 * schedule of a 1×1 kernel is chosen by). Per tile: its GEMM work G (rows · columns · channel
 * blocks · ci·kh·kw iterations), its epilogue E (a reset and the ALU passes per output vector) and
 * its loads L (one LOAD an input block and one of the weights a reduction step, the weights once an
 * output channel tile when a tile is one step: stationary; each a DMA of its bytes and zero-filled
 * entries). The V virtual threads run their tiles' steps interleaved, then their epilogues one after
 * the other, so a group of V tiles takes max(ΣG, ΣL − P) + ΣE, where P is what the load module can
 * fetch ahead during the group before's epilogues — at most the step slots (V, or 2V
 * double-buffered) and the epilogues' time — plus the first step's loads, never less than the load
 * module's and the fetch's whole work; one thread runs its loads, GEMMs and epilogues one after the
 * other. Order "co-oh".
 */
export const estimateConv2dCycles = (d: VtaDerived, x: VtaConv2d, s: VtaConv2dSchedule, model: VtaCycleModel = VTA_CYCLE_MODEL): number => {
  const { oh: OH, ow: OW } = outSize(x)
  const V = s.vthreads
  const tileCi = s.tileCi ?? x.ci
  const nci = x.ci / tileCi
  const colsIn = x.w + 2 * x.pad
  const dma = (bytes: number, pads: number) => model.dmaLatency + Math.ceil(bytes / d.busBytes) + pads * model.padEntryCycles
  const inpStep = (th: number) => {
    // a strided 1×1 kernel loads only the rows its windows touch (src/lowering/vta/tir/schedule.ts)
    const rowsIn = x.kh === 1 && x.stride > 1 && x.pad === 0 ? th : (th - 1) * x.stride + x.kh
    const valid = Math.min(rowsIn, x.h)
    return tileCi * dma(valid * x.w * d.inpElemBytes, rowsIn * colsIn - valid * x.w)
  }
  const wgtStep = dma(s.tileCo * tileCi * x.kh * x.kw * d.wgtElemBytes, 0)
  const stationary = nci === 1
  const ohTiles = Math.ceil(OH / s.tileOh)
  const coTiles = x.co / s.tileCo
  const passes = epilogueAluPasses(x)
  const rowsOf = (t: number) => Math.min(s.tileOh, OH - (t % ohTiles) * s.tileOh)
  const tile = (t: number) => {
    const th = rowsOf(t)
    const G = th * OW * s.tileCo * x.ci * x.kh * x.kw * model.gemmII
    const E = th * OW * s.tileCo * (model.gemmII + passes * model.aluII)
    const L = nci * (inpStep(th) + (stationary ? 0 : wgtStep))
    return { G, E, L, step: L / nci }
  }
  const T = ohTiles * coTiles
  // the stationary weights, once an output channel tile (a step's weights are in its tile's L)
  const wgtTotal = stationary ? coTiles * wgtStep : 0
  let loadTotal = wgtTotal
  let total = inpStep(rowsOf(0)) + wgtStep
  let ahead = 0
  for (let g = 0; g < T; g += V) {
    const ts = Array.from({ length: Math.min(V, T - g) }, (_, k) => tile(g + k))
    const G = ts.reduce((n, t) => n + t.G, 0)
    const E = ts.reduce((n, t) => n + t.E, 0)
    const L = ts.reduce((n, t) => n + t.L, 0)
    loadTotal += L
    total += V > 1 ? Math.max(G, L - ahead) + E : G + E + L
    const slots = (nci > 1 && 2 * V * tileCi * ((s.tileOh - 1) * x.stride + x.kh) * colsIn <= d.inpDepth ? 2 : 1) * V
    ahead = Math.min(slots * ts[0].step, E, L)
  }
  if (V === 1) return total + wgtTotal
  const chunks = epilogueChunksOf(d, x, s)
  const insns = T * nci * (tileCi + 2) + T * (1 + chunks * (passes + 1))
  return Math.max(total, loadTotal, Math.ceil((16 * insns) / d.busBytes))
}

/**
 * A schedule from the configuration's buffer depths and the cycle model (never from this machine),
 * `vthreads` slots of each buffer. A k×k kernel (k > 1): the reduction split into steps of one
 * input channel block — each step's weights and input rows load while the step before it
 * multiplies, and the input window is one block deep, so a tile can hold many rows; then the most
 * output rows whose input window and accumulators fit a slot (so the deep layers' whole image is
 * one row tile and their weights load once), then the most output channel blocks whose weights and
 * accumulators fit (a bias takes one accumulator row and one micro-op a channel block and slot). A
 * 1×1 kernel does one GEMM iteration per input entry, so what its tiles reload (the input once an
 * output channel tile, the weights once a row tile) and the first step's loads weigh against its
 * work: of the schedules that fit, the one `estimateConv2dCycles` prices lowest (the fewest steps
 * on a tie). A starting point for the tuner.
 */
export const defaultConv2dSchedule = (d: VtaDerived, x: VtaConv2d, vthreads: number): VtaConv2dSchedule => {
  const { oh: OH, ow: OW } = outSize(x)
  const V = vthreads
  const colsIn = x.w + 2 * x.pad
  const accSlot = Math.floor(d.accDepth / V)
  // with a bias each slot also holds its tile's bias rows, one per output channel block
  const biasRow = x.bias ? 1 : 0
  const divisorsDown = (n: number) => Array.from({ length: n }, (_, k) => n - k).filter((m) => n % m === 0)
  const rowsFit = (r: number, tileCi: number) => V * tileCi * ((r - 1) * x.stride + x.kh) * colsIn <= d.inpDepth && r * OW + biasRow <= accSlot && r * OW < 2 ** 14
  const coFits = (n: number, tileOh: number, tileCi: number) => {
    const chunks = epilogueChunksOf(d, x, { tileOh, tileCo: n, tileCi, vthreads })
    return V * n * tileCi * x.kh * x.kw <= d.wgtDepth && n * (tileOh * OW + biasRow) <= accSlot && V * V * n * tileCi * x.kh * x.kw + epilogueUopsOf(x, V, chunks) <= d.uopDepth
  }
  if (x.kh * x.kw === 1) {
    let best: { s: VtaConv2dSchedule; cycles: number; steps: number } | undefined
    const rows = [...new Set(Array.from({ length: OH }, (_, k) => Math.ceil(OH / (k + 1))))]
    for (const tileCi of divisorsDown(x.ci)) for (const tileOh of rows) {
      if (!rowsFit(tileOh, tileCi)) continue
      for (const tileCo of divisorsDown(x.co)) {
        if (!coFits(tileCo, tileOh, tileCi)) continue
        const s: VtaConv2dSchedule = { tileOh, tileCo, tileCi, order: "co-oh", vthreads }
        const cycles = estimateConv2dCycles(d, x, s)
        const steps = Math.ceil(OH / tileOh) * (x.co / tileCo) * (x.ci / tileCi)
        if (!best || cycles < best.cycles || (cycles === best.cycles && steps < best.steps)) best = { s, cycles, steps }
      }
    }
    if (best) return best.s
  }
  const tileCi = x.kh * x.kw === 1 ? x.ci : 1
  let tileOh = 1
  for (let r = OH; r >= 1; r--) {
    if (rowsFit(r, tileCi)) {
      tileOh = r
      break
    }
  }
  const tileCo = divisorsDown(x.co).find((n) => coFits(n, tileOh, tileCi)) ?? 1
  return { tileOh, tileCo, tileCi, order: "co-oh", vthreads }
}
