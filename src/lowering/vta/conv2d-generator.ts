// The direct generator of a conv2d's VTA program: the first path, written instruction by
// instruction from the knobs; lowerConv2d now lowers through the pass pipeline
// (src/lowering/vta/tir/), and this one stays for comparison (scripts/vta-tir-report.ts) and as
// `lowerConv2d(…, "generator")`.
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
// ALU SHR (shrStepsOf: none for a shift of 0, several above 15), MAX clipLo (0), MIN 127; store writes each channel block's rows. With `vthreads` V every buffer has V slots
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
import type { VtaDerived } from "../../ast/vta/config.js"
import { layoutDram } from "../../ast/vta/dram-image.js"
import { encodeUops, noDeps, type VtaAluInsn, type VtaDeps, type VtaInsn, type VtaMemInsn, type VtaUop } from "../../ast/vta/isa.js"
import { checkConv2dSchedule, epilogueUopsOf, shrStepsOf, outSize, VtaScheduleError, type VtaConv2d, type VtaConv2dProgram, type VtaConv2dSchedule } from "./conv2d-layer.js"

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
export const lowerConv2dGenerator = (d: VtaDerived, x: VtaConv2d, s: VtaConv2dSchedule): VtaConv2dProgram => {
  checkConv2dSchedule(d, x, s)
  const { oh: OH, ow: OW } = outSize(x)
  const V = s.vthreads
  const tileCi = s.tileCi ?? x.ci
  const colsIn = x.w + 2 * x.pad
  const rowsMax = (s.tileOh - 1) * x.stride + x.kh
  const inpSlot = tileCi * rowsMax * colsIn
  const wgtSlot = s.tileCo * tileCi * x.kh * x.kw
  const accSlot = s.tileCo * s.tileOh * OW
  const gemmUops = wgtSlot

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
    insns.push(...shrStepsOf(x.shift).map((k) => aluInsn("SHR", k, noDeps)), aluInsn("MAX", x.clipLo ?? 0, noDeps), aluInsn("MIN", 127, { ...noDeps, pushNext: true }))
    // store: each output channel block's rows
    for (let col = 0; col < s.tileCo; col++) {
      const co = cot * s.tileCo + col
      insns.push(mem("STORE", "out", v * accSlot + col * s.tileOh * OW, R("out").base + (co * OH + oh0) * OW, 1, th * OW, th * OW, { ...noDeps, popPrev: col === 0, pushPrev: col === s.tileCo - 1 && reuse }))
    }
  })
  insns.push({ op: "FINISH", deps: noDeps })
  return { insns, layout, dram, tiles: T }
}
