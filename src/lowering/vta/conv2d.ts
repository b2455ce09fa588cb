// An int8 conv2d with its requantize epilogue (>> shift, clip to [0, 127]), in VTA's packed layouts,
// as TE (the reference) and as a VTA program (what the schedule below means on the accelerator).
//
// Layouts (TVM's graph pack at batch 1, NCHW1n16c): data [CI][H][W][BATCH][BLOCK_IN], kernel
// [CO][CI][KH][KW][BLOCK_OUT][BLOCK_IN], out [CO][OH][OW][BATCH][BLOCK_OUT], CI and CO counted in
// blocks; the BATCH axis is the GEMM intrinsic's row axis, as in TVM's packed conv2d. In
// DRAM they are exactly VTA's input, weight and output elements, so packing is a byte copy.
//
// The schedule (TVM's conv2d_packed shape, knobs as data): output tiles of `tileCo` channel blocks ×
// `tileOh` rows × all columns. Per tile the load module brings the tile's input window (one padded
// 2-D LOAD per input channel block: the zero rows and columns of the convolution's padding are the
// LOAD's pads) and its weights; compute resets the tile's accumulators, runs ONE GEMM whose
// micro-ops enumerate (co, ci, kh, kw) and whose two loop levels walk the output rows and columns
// (folded into the GEMM's dst/src factors), then ALU SHR, MAX 0, MIN 127; store writes each channel
// block's rows. With `vthreads` 2 consecutive tiles alternate between two halves of every buffer
// (two virtual threads); a slot keeps its weights while its tiles stay in one channel tile. Dependency tokens let tile t+1's loads run under tile t's compute:
//   a tile's first LOAD pops compute→load from tile t−V (its buffers' previous user) when t ≥ V,
//   its last LOAD pushes load→compute; the GEMM pops it and pushes compute→load when a tile t+V
//   will reuse the buffers; the reset pops store→compute when t ≥ V; the last ALU pushes
//   compute→store; the tile's first STORE pops it and its last pushes store→compute when t+V < T.
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

/** The accumulator rows the bias takes beside `vthreads` tiles of `tileCo` channel blocks (none without bias). */
const biasRowsOf = (x: VtaConv2d, tileCo: number, vthreads: number): number => (x.bias ? vthreads * tileCo : 0)

export interface VtaConv2dSchedule {
  readonly tileOh: number
  readonly tileCo: number
  readonly vthreads: 1 | 2
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

const mem = (op: "LOAD" | "STORE", memType: VtaMemInsn["memType"], sramBase: number, dramBase: number, ySize: number, xSize: number, xStride: number, deps: VtaDeps, pads: Partial<Pick<VtaMemInsn, "yPad0" | "yPad1" | "xPad0" | "xPad1">> = {}): VtaMemInsn => ({
  op, deps, memType, sramBase, dramBase, ySize, xSize, xStride, yPad0: 0, yPad1: 0, xPad0: 0, xPad1: 0, ...pads,
})

const need = (ok: boolean, reason: string): void => {
  if (!ok) throw new VtaScheduleError({ reason })
}

/** The layer's VTA program under the schedule; a tile that does not fit is a VtaScheduleError. */
export const lowerConv2d = (d: VtaDerived, x: VtaConv2d, s: VtaConv2dSchedule): VtaConv2dProgram => {
  const { oh: OH, ow: OW } = outSize(x)
  const V = s.vthreads
  need(d.batch === 1, "the conv2d schedule is written for BATCH 1")
  need(x.co % s.tileCo === 0, `tileCo ${s.tileCo} does not divide ${x.co} output channel blocks`)
  need(s.tileOh >= 1 && s.tileOh <= OH, `tileOh ${s.tileOh} is not in [1, ${OH}]`)
  need(x.pad <= 15, "padding above 15 does not fit a LOAD's 4-bit pad fields")
  const colsIn = x.w + 2 * x.pad
  const rowsMax = (s.tileOh - 1) * x.stride + x.kh
  const inpSlot = x.ci * rowsMax * colsIn
  const wgtSlot = s.tileCo * x.ci * x.kh * x.kw
  const accSlot = s.tileCo * s.tileOh * OW
  const gemmUops = s.tileCo * x.ci * x.kh * x.kw
  need(V * inpSlot <= d.inpDepth, `a tile's input window is ${inpSlot} entries; ${V} of them exceed the input buffer's ${d.inpDepth}`)
  need(V * wgtSlot <= d.wgtDepth, `a tile's weights are ${wgtSlot} entries; ${V} of them exceed the weight buffer's ${d.wgtDepth}`)
  const biasRows = biasRowsOf(x, s.tileCo, V)
  need(V * accSlot + biasRows <= d.accDepth, `a tile's accumulators are ${accSlot} entries; ${V} of them${biasRows ? ` and ${biasRows} bias rows` : ""} exceed the accumulator buffer's ${d.accDepth}`)
  need(V * (gemmUops + (x.bias ? 2 : 1)) <= d.uopDepth, `${V * (gemmUops + (x.bias ? 2 : 1))} micro-ops exceed the micro-op buffer's ${d.uopDepth}`)
  need(s.tileOh * OW < 2 ** 14, "a tile's rows × columns exceed the 14-bit loop count")

  const ohTiles = Math.ceil(OH / s.tileOh)
  const coTiles = x.co / s.tileCo
  const T = ohTiles * coTiles
  const uops: VtaUop[] = []
  for (let v = 0; v < V; v++) {
    for (let col = 0; col < s.tileCo; col++)
      for (let ci = 0; ci < x.ci; ci++)
        for (let kh = 0; kh < x.kh; kh++)
          for (let kw = 0; kw < x.kw; kw++) {
            uops.push({ dst: v * accSlot + col * s.tileOh * OW, src: v * inpSlot + ci * rowsMax * colsIn + kh * colsIn + kw, wgt: v * wgtSlot + ((col * x.ci + ci) * x.kh + kh) * x.kw + kw })
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

  const insns: VtaInsn[] = [mem("LOAD", "uop", 0, R("uop").base, 1, uops.length, uops.length, noDeps)]
  let t = 0
  for (let cot = 0; cot < coTiles; cot++) {
    for (let oht = 0; oht < ohTiles; oht++, t++) {
      const v = t % V
      const reuse = t + V < T
      const oh0 = oht * s.tileOh
      const th = Math.min(s.tileOh, OH - oh0)
      const y0 = oh0 * x.stride - x.pad
      const y1 = y0 + (th - 1) * x.stride + x.kh
      // The window's rows inside the image (none when it reads only padding: then it is all pads).
      const vy0 = Math.min(Math.max(y0, 0), x.h)
      const vy1 = Math.max(Math.min(y1, x.h), vy0)
      need(vy0 - y0 <= 15 && y1 - vy1 <= 15, "a tile's vertical padding exceeds 15 rows")
      // loads: the input window, one channel block at a time, then the weights
      // The slot's weights are still tile t−V's: reloaded only when the channel tile changes.
      const loadWeights = t < V || Math.floor((t - V) / ohTiles) !== cot
      for (let ci = 0; ci < x.ci; ci++) {
        const last = ci === x.ci - 1 && !loadWeights
        insns.push(mem("LOAD", "inp", v * inpSlot + ci * rowsMax * colsIn, R("data").base + (ci * x.h + vy0) * x.w, vy1 - vy0, x.w, x.w, { ...noDeps, popNext: ci === 0 && t >= V, pushNext: last }, { yPad0: vy0 - y0, yPad1: y1 - vy1, xPad0: x.pad, xPad1: x.pad }))
      }
      if (loadWeights) insns.push(mem("LOAD", "wgt", v * wgtSlot, R("kernel").base + cot * wgtSlot, 1, wgtSlot, wgtSlot, { ...noDeps, pushNext: true }))
      // compute: reset, one GEMM, the epilogue
      const rows = { uopBgn: epilogueUop + v, uopEnd: epilogueUop + v + 1, iterOut: s.tileCo, iterIn: th * OW, dstFactorOut: s.tileOh * OW, dstFactorIn: 1, srcFactorOut: 0, srcFactorIn: 0 }
      insns.push({ op: "GEMM", deps: { ...noDeps, popNext: t >= V }, reset: true, ...rows, wgtFactorOut: 0, wgtFactorIn: 0 })
      insns.push({
        op: "GEMM", deps: { ...noDeps, popPrev: true, pushPrev: reuse }, reset: false,
        uopBgn: v * gemmUops, uopEnd: (v + 1) * gemmUops,
        iterOut: th, iterIn: OW, dstFactorOut: OW, dstFactorIn: 1, srcFactorOut: x.stride * colsIn, srcFactorIn: x.stride, wgtFactorOut: 0, wgtFactorIn: 0,
      })
      const aluInsn = (aluOp: VtaAluInsn["aluOp"], imm: number, deps: VtaDeps): VtaAluInsn => ({ op: "ALU", deps, reset: false, ...rows, aluOp, useImm: true, imm })
      if (x.bias) {
        // the tile's bias rows (compute's own LOAD: only compute reads them), added row by row
        insns.push(mem("LOAD", "acc", V * accSlot + v * s.tileCo, R("bias").base + cot * s.tileCo, 1, s.tileCo, s.tileCo, noDeps))
        insns.push({ op: "ALU", deps: noDeps, reset: false, ...rows, uopBgn: biasUop + v, uopEnd: biasUop + v + 1, srcFactorOut: 1, srcFactorIn: 0, aluOp: "ADD", useImm: false, imm: 0 })
      }
      insns.push(aluInsn("SHR", x.shift, noDeps), aluInsn("MAX", x.clipLo ?? 0, noDeps), aluInsn("MIN", 127, { ...noDeps, pushNext: true }))
      // store: each output channel block's rows
      for (let col = 0; col < s.tileCo; col++) {
        const co = cot * s.tileCo + col
        insns.push(mem("STORE", "out", v * accSlot + col * s.tileOh * OW, R("out").base + (co * OH + oh0) * OW, 1, th * OW, th * OW, { ...noDeps, popPrev: col === 0, pushPrev: col === s.tileCo - 1 && reuse }))
      }
    }
  }
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
 * A schedule from the configuration's buffer depths (never from this machine): the most output
 * channel blocks per tile whose weights fit `vthreads` slots, then the most output rows whose input
 * window and accumulators fit. A starting point for the tuner, not a tuned one.
 */
export const defaultConv2dSchedule = (d: VtaDerived, x: VtaConv2d, vthreads: 1 | 2): VtaConv2dSchedule => {
  const { oh: OH, ow: OW } = outSize(x)
  const V = vthreads
  const colsIn = x.w + 2 * x.pad
  const divisors = Array.from({ length: x.co }, (_, k) => x.co - k).filter((n) => x.co % n === 0)
  const extraUops = x.bias ? 2 : 1
  const tileCo = divisors.find((n) => V * n * x.ci * x.kh * x.kw <= d.wgtDepth && V * (n * x.ci * x.kh * x.kw + extraUops) <= d.uopDepth && V * n * OW + biasRowsOf(x, n, V) <= d.accDepth) ?? 1
  let tileOh = 1
  for (let r = OH; r >= 1; r--) {
    const rows = (r - 1) * x.stride + x.kh
    if (V * x.ci * rows * colsIn <= d.inpDepth && V * tileCo * r * OW + biasRowsOf(x, tileCo, V) <= d.accDepth && r * OW < 2 ** 14) {
      tileOh = r
      break
    }
  }
  return { tileOh, tileCo, vthreads }
}
