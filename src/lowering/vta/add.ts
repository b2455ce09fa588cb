// A residual add of two int8 activations in VTA's packed layout, on the accelerator: out =
// clip(a + b, lo, 127) element-wise, with a and b [E entries of BATCH×BLOCK] int8 in DRAM and out the
// same. VTA's ALU adds accumulator rows, and the accumulator is filled only by GEMM (or by an int32
// LOAD, which would need the operands widened on the CPU): so each chunk of entries is LOADed into
// the input buffer and moved into the accumulator by one GEMM with the identity weight block
// (acc += inp · Iᵀ widens int8 to int32 exactly), then ALU ADD (acc operand), MAX lo, MIN 127, and
// STORE. One slot, serial tokens: a chunk's first LOAD pops compute→load (the previous chunk's GEMM
// is done with the input rows), its last pushes load→compute; the reset pops store→compute (the
// previous chunk's STORE has read the accumulators); the last ALU pushes compute→store.
import type { VtaDerived } from "../../ast/vta/config.js"
import { layoutDram, type DramLayout } from "../../ast/vta/dram-image.js"
import { encodeUops, noDeps, type VtaAluInsn, type VtaDeps, type VtaInsn, type VtaMemInsn } from "../../ast/vta/isa.js"
import { VtaScheduleError } from "./conv2d.js"

export interface VtaAdd {
  /** Entries (BATCH×BLOCK int8 rows) of each operand and of the result. */
  readonly entries: number
  /** The clip's lower bound: 0 is the ReLU after a residual add, −128 none. */
  readonly clipLo: number
}

export interface VtaAddProgram {
  readonly insns: VtaInsn[]
  readonly layout: DramLayout
  /** DRAM with the micro-ops and the identity weights in place; the operands go in regions a and b. */
  readonly dram: Uint8Array
  readonly chunks: number
}

const mem = (op: "LOAD" | "STORE", memType: VtaMemInsn["memType"], sramBase: number, dramBase: number, xSize: number, deps: VtaDeps): VtaMemInsn => ({
  op, deps, memType, sramBase, dramBase, ySize: 1, xSize, xStride: xSize, yPad0: 0, yPad1: 0, xPad0: 0, xPad1: 0,
})

/** The add's program in chunks of `chunk` entries (default: the most that fit twice in the input and accumulator buffers). */
export const lowerAdd = (d: VtaDerived, x: VtaAdd, chunk?: number): VtaAddProgram => {
  if (d.batch !== 1) throw new VtaScheduleError({ reason: "the residual add is written for BATCH 1" })
  if (!(x.clipLo >= -128 && x.clipLo <= 0)) throw new VtaScheduleError({ reason: `a clip lower bound of ${x.clipLo} (the add clips to [lo, 127], lo in [-128, 0])` })
  const n = Math.min(chunk ?? Infinity, Math.floor(d.inpDepth / 2), Math.floor(d.accDepth / 2), 2 ** 14 - 1, Math.max(1, x.entries))
  if (!(n >= 1)) throw new VtaScheduleError({ reason: `a chunk of ${n} entries` })
  const T = Math.ceil(x.entries / n)
  const uops = [{ dst: 0, src: 0, wgt: 0 }, { dst: 0, src: n, wgt: 0 }]
  const layout = layoutDram(d, [
    { name: "uop", kind: "uop", elems: uops.length },
    { name: "ident", kind: "wgt", elems: 1 },
    { name: "a", kind: "inp", elems: x.entries },
    { name: "b", kind: "inp", elems: x.entries },
    { name: "out", kind: "out", elems: x.entries },
  ])
  const R = (name: string) => layout.regions.get(name)!
  const dram = new Uint8Array(layout.bytes)
  dram.set(encodeUops(d, uops), R("uop").byteOffset)
  for (let k = 0; k < Math.min(d.blockIn, d.blockOut); k++) dram[R("ident").byteOffset + k * d.blockIn + k] = 1
  const insns: VtaInsn[] = [mem("LOAD", "uop", 0, R("uop").base, uops.length, noDeps), mem("LOAD", "wgt", 0, R("ident").base, 1, noDeps)]
  for (let t = 0; t < T; t++) {
    const m = Math.min(n, x.entries - t * n)
    const more = t + 1 < T
    insns.push(mem("LOAD", "inp", 0, R("a").base + t * n, m, { ...noDeps, popNext: t > 0 }))
    insns.push(mem("LOAD", "inp", n, R("b").base + t * n, m, { ...noDeps, pushNext: true }))
    const rows = { uopBgn: 0, uopEnd: 1, iterOut: 2, iterIn: m, dstFactorOut: n, dstFactorIn: 1 }
    insns.push({ op: "GEMM", deps: { ...noDeps, popNext: t > 0 }, reset: true, ...rows, srcFactorOut: 0, srcFactorIn: 0, wgtFactorOut: 0, wgtFactorIn: 0 })
    insns.push({ op: "GEMM", deps: { ...noDeps, popPrev: true, pushPrev: more }, reset: false, ...rows, srcFactorOut: n, srcFactorIn: 1, wgtFactorOut: 0, wgtFactorIn: 0 })
    const alu = (aluOp: VtaAluInsn["aluOp"], uop: number, useImm: boolean, imm: number, deps: VtaDeps): VtaAluInsn => ({
      op: "ALU", deps, reset: false, uopBgn: uop, uopEnd: uop + 1, iterOut: 1, iterIn: m, dstFactorOut: 0, dstFactorIn: 1, srcFactorOut: 0, srcFactorIn: useImm ? 0 : 1, aluOp, useImm, imm,
    })
    insns.push(alu("ADD", 1, false, 0, noDeps), alu("MAX", 0, true, x.clipLo, noDeps), alu("MIN", 0, true, 127, { ...noDeps, pushNext: true }))
    insns.push(mem("STORE", "out", 0, R("out").base + t * n, m, { ...noDeps, popPrev: true, pushPrev: more }))
  }
  insns.push({ op: "FINISH", deps: noDeps })
  return { insns, layout, dram, chunks: T }
}
