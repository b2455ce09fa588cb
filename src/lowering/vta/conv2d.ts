// An int8 conv2d with its requantize epilogue (+ bias, >> shift, clip to [clipLo, 127]), in VTA's packed layouts,
// as TE (the reference) and as a VTA program (what the schedule below means on the accelerator).
//
// Layouts (TVM's graph pack at batch 1, NCHW1n16c): data [CI][H][W][BATCH][BLOCK_IN], kernel
// [CO][CI][KH][KW][BLOCK_OUT][BLOCK_IN], out [CO][OH][OW][BATCH][BLOCK_OUT], CI and CO counted in
// blocks; the BATCH axis is the GEMM intrinsic's row axis, as in TVM's packed conv2d. In
// DRAM they are exactly VTA's input, weight and output elements, so packing is a byte copy.
//
// The schedule (TVM's conv2d_packed shape, knobs as data): output tiles of `tileCo` channel blocks ×
// `tileOh` rows × all columns, in the loop order `order` (channel tiles outer: "co-oh"; row tiles
// outer: "oh-co"); each tile's reduction split into steps of `tileCi` input channel blocks. Per
// step the load module brings the step's input window (one padded 2-D LOAD per input channel
// block: the zero rows and columns of the convolution's padding are the LOAD's pads) and its
// weights; compute resets the tile's accumulators before its first step, runs ONE GEMM a step
// whose micro-ops enumerate (co, ci, kh, kw) and whose two loop levels walk the output rows and
// columns (folded into the GEMM's dst/src factors), and after the last step — with a bias, first
// a LOAD of the tile's bias rows into the accumulator (after the V slots) and an ALU ADD of them —
// ALU SHR, MAX clipLo (0), MIN 127; store writes each channel block's rows. With `vthreads` V every buffer has V slots
// (V virtual threads): step j's input and weights go to slot j mod V and tile t's accumulators to
// slot t mod V — except the buffer the outer loop walks when a tile is one step, which is
// stationary: weights (co-oh) or inputs (oh-co) load once per outer index into slot index mod V
// and stay for the inner loop. A slot still holding what a step needs is not reloaded.
// Dependency tokens let step j+1's loads run under step j's compute:
//   step j's first LOAD pops compute→load from step j−V's GEMM (its slots' previous user) when
//   j ≥ V, its last LOAD pushes load→compute; the GEMM pops it (a step with nothing to load pops
//   and pushes nothing) and pushes compute→load when step j+V will pop it; tile t's reset pops
//   store→compute when t ≥ V; the last ALU pushes compute→store; the tile's first STORE pops it
//   and its last pushes store→compute when t+V < T.
import { Data } from "effect"
import type { VtaDerived } from "../../ast/vta/config.js"
import { layoutDram, type DramLayout } from "../../ast/vta/dram-image.js"
import { encodeUops, noDeps, type VtaAluInsn, type VtaDeps, type VtaInsn, type VtaMemInsn, type VtaUop } from "../../ast/vta/isa.js"
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
  /** The requantize shift: out = clip(acc >> shift, 0, 127). */
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
const biasRowsOf = (x: VtaConv2d, tileCo: number, vthreads: number): number => (x.bias ? vthreads * tileCo : 0)

/** The epilogue's micro-ops besides the GEMM kernels: one a slot for the reset and the immediate ALU passes, one more a slot for the bias ADD. */
const epilogueUopsOf = (x: VtaConv2d, vthreads: number): number => vthreads * (x.bias ? 2 : 1)

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
}

/**
 * The requantize epilogue's ALU instructions a tile (SHR, MAX 0, MIN 127), each one pass over the
 * tile's accumulators. Three is the least for clip(acc >> s, 0, 127) with VTA's two-operand ALU:
 * each of the three ops changes values the other two keep.
 */
export const EPILOGUE_ALU_PASSES = 3

/** The layer's ALU passes a tile: the requantize's three, and the bias's ADD when it has one. */
export const epilogueAluPasses = (x: VtaConv2d): number => EPILOGUE_ALU_PASSES + (x.bias ? 1 : 0)

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

const mem = (op: "LOAD" | "STORE", memType: VtaMemInsn["memType"], sramBase: number, dramBase: number, ySize: number, xSize: number, xStride: number, deps: VtaDeps, pads: Partial<Pick<VtaMemInsn, "yPad0" | "yPad1" | "xPad0" | "xPad1">> = {}): VtaMemInsn => ({
  op, deps, memType, sramBase, dramBase, ySize, xSize, xStride, yPad0: 0, yPad1: 0, xPad0: 0, xPad1: 0, ...pads,
})

const need = (ok: boolean, reason: string): void => {
  if (!ok) throw new VtaScheduleError({ reason })
}

/** One reduction step of a tile: its loads (into slots) and its GEMM. */
interface Step {
  readonly t: number
  readonly cot: number
  readonly oht: number
  readonly chunk: number
  readonly inpSlot: number
  readonly wgtSlot: number
  readonly loadInp: boolean
  readonly loadWgt: boolean
}

/**
 * The steps of a schedule in program order, with the slot each buffer uses and whether it is
 * loaded. The buffer the outer loop walks (weights under "co-oh", inputs under "oh-co") is
 * stationary when a tile is one step: its slot is the outer index mod V, loaded at the first step
 * of that index and kept across the inner loop. Any other buffer uses slot j mod V and is loaded
 * unless step j−V left the same data there. Either way a slot's previous users are steps ≤ j−V,
 * whose GEMMs the load's compute→load token covers.
 */
const stepsOf = (x: VtaConv2d, s: VtaConv2dSchedule, ohTiles: number, coTiles: number, nci: number): Step[] => {
  const V = s.vthreads
  const order = s.order ?? "co-oh"
  const tiles: { cot: number; oht: number }[] = []
  if (order === "co-oh") for (let cot = 0; cot < coTiles; cot++) for (let oht = 0; oht < ohTiles; oht++) tiles.push({ cot, oht })
  else for (let oht = 0; oht < ohTiles; oht++) for (let cot = 0; cot < coTiles; cot++) tiles.push({ cot, oht })
  const stationary = nci === 1 ? (order === "co-oh" ? "wgt" : "inp") : undefined
  const raw = tiles.flatMap((tile, t) => Array.from({ length: nci }, (_, chunk) => ({ t, ...tile, chunk })))
  return raw.map((r, j) => {
    const prev = raw[j - 1]
    const back = raw[j - V]
    const wgt = stationary === "wgt"
      ? { wgtSlot: r.cot % V, loadWgt: prev === undefined || prev.cot !== r.cot }
      : { wgtSlot: j % V, loadWgt: back === undefined || back.cot !== r.cot || back.chunk !== r.chunk }
    const inp = stationary === "inp"
      ? { inpSlot: r.oht % V, loadInp: prev === undefined || prev.oht !== r.oht }
      : { inpSlot: j % V, loadInp: back === undefined || back.oht !== r.oht || back.chunk !== r.chunk }
    return { ...r, ...wgt, ...inp }
  })
}

/** The layer's VTA program under the schedule; a tile that does not fit is a VtaScheduleError. */
export const lowerConv2d = (d: VtaDerived, x: VtaConv2d, s: VtaConv2dSchedule): VtaConv2dProgram => {
  const { oh: OH, ow: OW } = outSize(x)
  const V = s.vthreads
  const tileCi = s.tileCi ?? x.ci
  need(d.batch === 1, "the conv2d schedule is written for BATCH 1")
  need(Number.isInteger(V) && V >= 1 && V <= 4, `vthreads ${V} is not in 1..4`)
  need(x.co % s.tileCo === 0, `tileCo ${s.tileCo} does not divide ${x.co} output channel blocks`)
  need(x.ci % tileCi === 0, `tileCi ${tileCi} does not divide ${x.ci} input channel blocks`)
  need(s.tileOh >= 1 && s.tileOh <= OH, `tileOh ${s.tileOh} is not in [1, ${OH}]`)
  need(x.pad <= 15, "padding above 15 does not fit a LOAD's 4-bit pad fields")
  const colsIn = x.w + 2 * x.pad
  const rowsMax = (s.tileOh - 1) * x.stride + x.kh
  const inpSlot = tileCi * rowsMax * colsIn
  const wgtSlot = s.tileCo * tileCi * x.kh * x.kw
  const accSlot = s.tileCo * s.tileOh * OW
  const gemmUops = wgtSlot
  need(V * inpSlot <= d.inpDepth, `a tile's input window is ${inpSlot} entries; ${V} of them exceed the input buffer's ${d.inpDepth}`)
  need(V * wgtSlot <= d.wgtDepth, `a tile's weights are ${wgtSlot} entries; ${V} of them exceed the weight buffer's ${d.wgtDepth}`)
  const biasRows = biasRowsOf(x, s.tileCo, V)
  need(V * accSlot + biasRows <= d.accDepth, `a tile's accumulators are ${accSlot} entries; ${V} of them${biasRows ? ` and ${biasRows} bias rows` : ""} exceed the accumulator buffer's ${d.accDepth}`)
  need(s.tileOh * OW < 2 ** 14, "a tile's rows × columns exceed the 14-bit loop count")

  const ohTiles = Math.ceil(OH / s.tileOh)
  const coTiles = x.co / s.tileCo
  const nci = x.ci / tileCi
  const T = ohTiles * coTiles
  const steps = stepsOf(x, s, ohTiles, coTiles, nci)
  const S = steps.length
  // One GEMM kernel per (input slot, weight slot, accumulator slot) the steps use, in order of first use.
  const kernels = new Map<string, number>()
  const kernelKey = (st: Step) => `${st.inpSlot},${st.wgtSlot},${st.t % V}`
  for (const st of steps) if (!kernels.has(kernelKey(st))) kernels.set(kernelKey(st), kernels.size * gemmUops)
  const uopCount = kernels.size * gemmUops + epilogueUopsOf(x, V)
  need(uopCount <= d.uopDepth, `${uopCount} micro-ops exceed the micro-op buffer's ${d.uopDepth}`)
  const uops: VtaUop[] = []
  for (const key of kernels.keys()) {
    const [iS, wS, aS] = key.split(",").map(Number)
    for (let col = 0; col < s.tileCo; col++)
      for (let ci = 0; ci < tileCi; ci++)
        for (let kh = 0; kh < x.kh; kh++)
          for (let kw = 0; kw < x.kw; kw++) {
            uops.push({ dst: aS * accSlot + col * s.tileOh * OW, src: iS * inpSlot + ci * rowsMax * colsIn + kh * colsIn + kw, wgt: wS * wgtSlot + ((col * tileCi + ci) * x.kh + kh) * x.kw + kw })
          }
  }
  const epilogueUop = uops.length
  for (let v = 0; v < V; v++) uops.push({ dst: v * accSlot, src: 0, wgt: 0 })
  // the bias epilogue's micro-ops: dst the slot's accumulators, src its bias rows (after every slot)
  const biasUop = uops.length
  if (x.bias) for (let v = 0; v < V; v++) uops.push({ dst: v * accSlot, src: V * accSlot + v * s.tileCo, wgt: 0 })

  const layout = layoutDram(d, [
    { name: "uop", kind: "uop", elems: uops.length },
    { name: "data", kind: "inp", elems: x.ci * x.h * x.w },
    { name: "kernel", kind: "wgt", elems: x.co * x.ci * x.kh * x.kw },
    { name: "out", kind: "out", elems: x.co * OH * OW },
    ...(x.bias ? [{ name: "bias", kind: "acc" as const, elems: x.co }] : []),
  ])
  const R = (n: string) => layout.regions.get(n)!
  const dram = new Uint8Array(layout.bytes)
  dram.set(encodeUops(d, uops), R("uop").byteOffset)

  const hasLoads = (j: number) => steps[j].loadInp || steps[j].loadWgt
  // Step j's loads wait for step j−V's GEMM (the slots' previous users); that GEMM pushes the token.
  const popsFree = (j: number) => j >= V && j < S && hasLoads(j)
  const insns: VtaInsn[] = [mem("LOAD", "uop", 0, R("uop").base, 1, uops.length, uops.length, noDeps)]
  steps.forEach((st, j) => {
    const { t, cot, oht, chunk } = st
    const v = t % V
    const first = chunk === 0
    const last = chunk === nci - 1
    const oh0 = oht * s.tileOh
    const th = Math.min(s.tileOh, OH - oh0)
    const y0 = oh0 * x.stride - x.pad
    const y1 = y0 + (th - 1) * x.stride + x.kh
    // The window's rows inside the image (none when it reads only padding: then it is all pads).
    const vy0 = Math.min(Math.max(y0, 0), x.h)
    const vy1 = Math.max(Math.min(y1, x.h), vy0)
    need(vy0 - y0 <= 15 && y1 - vy1 <= 15, "a tile's vertical padding exceeds 15 rows")
    // loads: the input window, one channel block at a time, then the weights
    const loads: VtaMemInsn[] = []
    if (st.loadInp) {
      for (let c = 0; c < tileCi; c++) {
        const ci = chunk * tileCi + c
        loads.push(mem("LOAD", "inp", st.inpSlot * inpSlot + c * rowsMax * colsIn, R("data").base + (ci * x.h + vy0) * x.w, vy1 - vy0, x.w, x.w, noDeps, { yPad0: vy0 - y0, yPad1: y1 - vy1, xPad0: x.pad, xPad1: x.pad }))
      }
    }
    if (st.loadWgt) {
      const base = R("kernel").base + (cot * s.tileCo * x.ci + chunk * tileCi) * x.kh * x.kw
      loads.push(nci === 1 ? mem("LOAD", "wgt", st.wgtSlot * wgtSlot, base, 1, wgtSlot, wgtSlot, noDeps) : mem("LOAD", "wgt", st.wgtSlot * wgtSlot, base, s.tileCo, tileCi * x.kh * x.kw, x.ci * x.kh * x.kw, noDeps))
    }
    loads.forEach((l, k) => insns.push({ ...l, deps: { ...noDeps, popNext: k === 0 && popsFree(j), pushNext: k === loads.length - 1 } }))
    // compute: the tile's reset, the step's GEMM, and after the tile's last step the epilogue
    const rows = { uopBgn: epilogueUop + v, uopEnd: epilogueUop + v + 1, iterOut: s.tileCo, iterIn: th * OW, dstFactorOut: s.tileOh * OW, dstFactorIn: 1, srcFactorOut: 0, srcFactorIn: 0 }
    if (first) insns.push({ op: "GEMM", deps: { ...noDeps, popNext: t >= V }, reset: true, ...rows, wgtFactorOut: 0, wgtFactorIn: 0 })
    const k0 = kernels.get(kernelKey(st))!
    insns.push({
      op: "GEMM", deps: { ...noDeps, popPrev: hasLoads(j), pushPrev: popsFree(j + V) }, reset: false,
      uopBgn: k0, uopEnd: k0 + gemmUops,
      iterOut: th, iterIn: OW, dstFactorOut: OW, dstFactorIn: 1, srcFactorOut: x.stride * colsIn, srcFactorIn: x.stride, wgtFactorOut: 0, wgtFactorIn: 0,
    })
    if (!last) return
    const reuse = t + V < T
    const aluInsn = (aluOp: VtaAluInsn["aluOp"], imm: number, deps: VtaDeps): VtaAluInsn => ({ op: "ALU", deps, reset: false, ...rows, aluOp, useImm: true, imm })
    if (x.bias) {
      // the tile's bias rows, once a tile after its last step (compute's own LOAD: only compute
      // reads them; slot v's previous reader is tile t−V's ADD, earlier in the same module), added row by row
      insns.push(mem("LOAD", "acc", V * accSlot + v * s.tileCo, R("bias").base + cot * s.tileCo, 1, s.tileCo, s.tileCo, noDeps))
      insns.push({ op: "ALU", deps: noDeps, reset: false, ...rows, uopBgn: biasUop + v, uopEnd: biasUop + v + 1, srcFactorOut: 1, srcFactorIn: 0, aluOp: "ADD", useImm: false, imm: 0 })
    }
    insns.push(aluInsn("SHR", x.shift, noDeps), aluInsn("MAX", x.clipLo ?? 0, noDeps), aluInsn("MIN", 127, { ...noDeps, pushNext: true }))
    // store: each output channel block's rows
    for (let col = 0; col < s.tileCo; col++) {
      const co = cot * s.tileCo + col
      insns.push(mem("STORE", "out", v * accSlot + col * s.tileOh * OW, R("out").base + (co * OH + oh0) * OW, 1, th * OW, th * OW, { ...noDeps, popPrev: col === 0, pushPrev: col === s.tileCo - 1 && reuse }))
    }
  })
  insns.push({ op: "FINISH", deps: noDeps })
  return { insns, layout, dram, tiles: T }
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
 * A schedule from the configuration's buffer depths (never from this machine), `vthreads` slots of
 * each buffer. The reduction is split into steps of one input channel block for a k×k kernel
 * (k > 1) — each step's weights and input rows load while the step before it multiplies, and the
 * input window is one block deep, so a tile can hold many rows; a 1×1 kernel does kh·kw = 1
 * micro-op per input entry a step, too little work to cover a step's DMA latency, so its tile is
 * one step of every input block. Then the most output rows whose input window and accumulators fit
 * a slot (so the deep layers' whole image is one row tile and their weights load once), then the
 * most output channel blocks whose weights and accumulators fit (a bias takes one accumulator row
 * and one micro-op a channel block and slot). A starting point for the tuner.
 */
export const defaultConv2dSchedule = (d: VtaDerived, x: VtaConv2d, vthreads: number): VtaConv2dSchedule => {
  const { oh: OH, ow: OW } = outSize(x)
  const V = vthreads
  const colsIn = x.w + 2 * x.pad
  const tileCi = x.kh * x.kw === 1 ? x.ci : 1
  const accSlot = Math.floor(d.accDepth / V)
  // with a bias each slot also holds its tile's bias rows, one per output channel block
  const biasRow = x.bias ? 1 : 0
  let tileOh = 1
  for (let r = OH; r >= 1; r--) {
    const rows = (r - 1) * x.stride + x.kh
    if (V * tileCi * rows * colsIn <= d.inpDepth && r * OW + biasRow <= accSlot && r * OW < 2 ** 14) {
      tileOh = r
      break
    }
  }
  const divisors = Array.from({ length: x.co }, (_, k) => x.co - k).filter((n) => x.co % n === 0)
  const tileCo = divisors.find((n) => V * n * tileCi * x.kh * x.kw <= d.wgtDepth && n * (tileOh * OW + biasRow) <= accSlot && V * V * n * tileCi * x.kh * x.kw + epilogueUopsOf(x, V) <= d.uopDepth) ?? 1
  return { tileOh, tileCo, tileCi, order: "co-oh", vthreads }
}
