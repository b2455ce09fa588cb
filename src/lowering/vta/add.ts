// A residual add of two int8 activations in VTA's packed layout, on the accelerator: out =
// clip(a + b, lo, 127) element-wise, with a and b [E entries of BATCH×BLOCK] int8 in DRAM and out the
// same. VTA's ALU adds accumulator rows, and the accumulator is filled only by GEMM (or by an int32
// LOAD, which would need the operands widened on the CPU): so each chunk of entries is LOADed into
// the input buffer and moved into the accumulator by one GEMM with the identity weight block
// (acc += inp · Iᵀ widens int8 to int32 exactly), then ALU ADD (acc operand), MAX lo, MIN 127, and
// STORE.
//
// Virtual threads: the input and accumulator buffers are split into V slots (1 to 4), chunk t in
// slot t mod V, so the loads of one slot run under the GEMM and ALU of another and the store of a
// third. Tokens, per chunk t (for V = 1 the serial protocol): its second LOAD pushes load→compute
// and its GEMM pops it; its first LOAD pops compute→load from t ≥ V (chunk t−V's GEMM, which
// pushes it, is done reading the slot's input rows); its reset pops store→compute from t ≥ V
// (chunk t−V's STORE, which pushes it, has read the slot's accumulators); its last ALU pushes
// compute→store and its STORE pops it. A push is emitted only where its pop exists (t + V < T), so
// every token is taken.
import type { VtaDerived } from "../../ast/vta/config.js"
import { layoutDram, type DramLayout } from "../../ast/vta/dram-image.js"
import { encodeUops, noDeps, type VtaAluInsn, type VtaDeps, type VtaInsn, type VtaMemInsn } from "../../ast/vta/isa.js"
import { VtaScheduleError } from "./conv2d.js"

export interface VtaAdd {
  /** Entries (BATCH×BLOCK int8 rows) of each operand and of the result. */
  readonly entries: number
  /** The clip's lower bound: 0 is the ReLU after a residual add, −128 none. */
  readonly clipLo: number
  /** Virtual threads, 1 (serial, the default) to 4: slots of the input and accumulator buffers used in turn. */
  readonly vthreads?: number
}

export interface VtaAddProgram {
  readonly insns: VtaInsn[]
  readonly layout: DramLayout
  /** DRAM with the micro-ops and the identity weights in place; the operands go in regions a and b. */
  readonly dram: Uint8Array
  readonly chunks: number
  /** Entries a chunk (the last may have fewer). */
  readonly chunk: number
  readonly vthreads: number
}

const mem = (op: "LOAD" | "STORE", memType: VtaMemInsn["memType"], sramBase: number, dramBase: number, xSize: number, deps: VtaDeps): VtaMemInsn => ({
  op, deps, memType, sramBase, dramBase, ySize: 1, xSize, xStride: xSize, yPad0: 0, yPad1: 0, xPad0: 0, xPad1: 0,
})

/** The most entries a chunk can take with V slots: each slot holds a chunk of both operands in the input and the accumulator buffers. */
export const addChunkLimit = (d: VtaDerived, vthreads: number): number => Math.min(Math.floor(d.inpDepth / (2 * vthreads)), Math.floor(d.accDepth / (2 * vthreads)), 2 ** 14 - 1)

/** The add's program in chunks of `chunk` entries (default: the most that fit a slot; see `addChunkLimit`). */
export const lowerAdd = (d: VtaDerived, x: VtaAdd, chunk?: number): VtaAddProgram => {
  const V = x.vthreads ?? 1
  if (d.batch !== 1) throw new VtaScheduleError({ reason: "the residual add is written for BATCH 1" })
  if (!(x.clipLo >= -128 && x.clipLo <= 0)) throw new VtaScheduleError({ reason: `a clip lower bound of ${x.clipLo} (the add clips to [lo, 127], lo in [-128, 0])` })
  if (!(Number.isInteger(V) && V >= 1 && V <= 4)) throw new VtaScheduleError({ reason: `${V} virtual threads (the add takes 1 to 4)` })
  const n = Math.min(chunk ?? Infinity, addChunkLimit(d, V), Math.max(1, x.entries))
  if (!(n >= 1)) throw new VtaScheduleError({ reason: `a chunk of ${n} entries` })
  const T = Math.ceil(x.entries / n)
  // slot s: input rows [2ns, 2ns + 2n) (a, then b) and the same accumulator rows; its micro-ops 2s (GEMM a and b in, the immediate passes) and 2s + 1 (ADD b to a)
  const base = (s: number) => 2 * n * s
  const uops = Array.from({ length: V }, (_, s) => [{ dst: base(s), src: base(s), wgt: 0 }, { dst: base(s), src: base(s) + n, wgt: 0 }]).flat()
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
    const s = t % V
    const m = Math.min(n, x.entries - t * n)
    // chunk t waits for chunk t − V to leave its slot; it releases its own for chunk t + V
    const reuse = t >= V
    const released = t + V < T
    insns.push(mem("LOAD", "inp", base(s), R("a").base + t * n, m, { ...noDeps, popNext: reuse }))
    insns.push(mem("LOAD", "inp", base(s) + n, R("b").base + t * n, m, { ...noDeps, pushNext: true }))
    const rows = { uopBgn: 2 * s, uopEnd: 2 * s + 1, iterOut: 2, iterIn: m, dstFactorOut: n, dstFactorIn: 1 }
    insns.push({ op: "GEMM", deps: { ...noDeps, popNext: reuse }, reset: true, ...rows, srcFactorOut: 0, srcFactorIn: 0, wgtFactorOut: 0, wgtFactorIn: 0 })
    insns.push({ op: "GEMM", deps: { ...noDeps, popPrev: true, pushPrev: released }, reset: false, ...rows, srcFactorOut: n, srcFactorIn: 1, wgtFactorOut: 0, wgtFactorIn: 0 })
    const alu = (aluOp: VtaAluInsn["aluOp"], uop: number, useImm: boolean, imm: number, deps: VtaDeps): VtaAluInsn => ({
      op: "ALU", deps, reset: false, uopBgn: uop, uopEnd: uop + 1, iterOut: 1, iterIn: m, dstFactorOut: 0, dstFactorIn: 1, srcFactorOut: 0, srcFactorIn: useImm ? 0 : 1, aluOp, useImm, imm,
    })
    insns.push(alu("ADD", 2 * s + 1, false, 0, noDeps), alu("MAX", 2 * s, true, x.clipLo, noDeps), alu("MIN", 2 * s, true, 127, { ...noDeps, pushNext: true }))
    insns.push(mem("STORE", "out", base(s), R("out").base + t * n, m, { ...noDeps, popPrev: true, pushPrev: released }))
  }
  insns.push({ op: "FINISH", deps: noDeps })
  return { insns, layout, dram, chunks: T, chunk: n, vthreads: V }
}
