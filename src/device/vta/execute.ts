// What each VTA instruction does to the accelerator's explicit state (its four SRAM buffers and
// DRAM), bit-exact to VTA's functional simulator (apache/tvm-vta src/sim/sim_driver.cc) and HLS
// source (hardware/xilinx/src/vta.cc), and what it costs under the cycle model. Pure over the
// state it is given: no clock, no I/O.
//
// Semantics, from those sources:
// - LOAD (inp / wgt / acc): a 2-D strided copy of `ySize` rows of `xSize` elements, rows `xStride`
//   elements apart in DRAM, packed densely in SRAM from `sramBase`, with `yPad0`/`yPad1` zero rows
//   and `xPad0`/`xPad1` zero elements around them. DRAM addresses count elements of that buffer
//   (byte address = dramBase · element bytes). LOAD uop copies `xSize` 32-bit micro-ops.
// - GEMM: for o < iterOut, i < iterIn, u in [uopBgn, uopEnd): acc[dst] += inp[src] · wgt[wgt]ᵀ, each
//   index the micro-op's plus o·factorOut + i·factorIn; int8 × int8 products summed in int32 that
//   wraps. With `reset` the accumulator rows are zeroed instead.
// - ALU: acc[dst] = op(acc[dst], imm or acc[src]) element-wise in int32: MIN, MAX, ADD (wrapping),
//   SHR by the operand's low LOG_ACC_WIDTH bits read as signed (a negative amount shifts left, as
//   ap_int does), MUL by the operand's low 8 bits read as signed (VTA_MUL_ARG_BIT_WIDTH), wrapping.
// - STORE: the accumulator rows narrowed to int8 by keeping their low 8 bits (sim_driver's
//   TruncStore; the hardware writes the same bits to its output buffer) — clipping is the program's
//   job (ALU MIN/MAX before the store).
// Indices outside a buffer, DRAM outside the image, and instructions no module runs as written
// are typed errors where the hardware would wrap or ignore them.
//
// Time: an instruction reads what it reads when it starts and its writes land when it ends —
// `executeInsn` reads the state now and returns the writes as a `commit` the simulator applies at
// the instruction's last cycle. So a consumer that starts before its producer finished (a missing
// token) sees the old contents, as on the hardware.
import { VTA_ISA, type VtaDerived } from "../../ast/vta/config.js"
import { formatInsn } from "../../ast/vta/disasm.js"
import { layoutOf, type VtaAluInsn, type VtaGemmInsn, type VtaInsn, type VtaMemInsn } from "../../ast/vta/isa.js"
import { dmaCycles, type VtaCycleModel } from "./cycle-model.js"
import { VtaDramAddressError, VtaIllegalInsnError, VtaSramAddressError } from "./errors.js"

/** The accelerator's memories: on-chip buffers (entry-major) and the DRAM image. */
export interface VtaState {
  readonly inp: Int8Array
  readonly wgt: Int8Array
  readonly acc: Int32Array
  readonly uopDst: Int32Array
  readonly uopSrc: Int32Array
  readonly uopWgt: Int32Array
  readonly dram: Uint8Array
}

export const freshState = (d: VtaDerived, dram: Uint8Array): VtaState => ({
  inp: new Int8Array(d.inpDepth * d.batch * d.blockIn),
  wgt: new Int8Array(d.wgtDepth * d.blockOut * d.blockIn),
  acc: new Int32Array(d.accDepth * d.batch * d.blockOut),
  uopDst: new Int32Array(d.uopDepth),
  uopSrc: new Int32Array(d.uopDepth),
  uopWgt: new Int32Array(d.uopDepth),
  dram: dram.slice(),
})

/** A half-open range of entries of one buffer (bytes of DRAM) an instruction reads or writes. */
export interface VtaRange {
  readonly space: "uop" | "inp" | "wgt" | "acc" | "dram"
  readonly lo: number
  readonly hi: number
}

/** What one instruction did: its cycles, DRAM bytes per buffer, micro-op iterations, its writes, what it touches. */
export interface VtaEffect {
  readonly commit: () => void
  readonly reads: readonly VtaRange[]
  readonly writes: readonly VtaRange[]
  readonly cycles: number
  readonly buffer?: "inp" | "wgt" | "acc" | "uop" | "out"
  readonly bytes: number
  readonly gemmOps: number
  readonly gemmResetOps: number
  readonly aluOps: number
}

const none = { bytes: 0, gemmOps: 0, gemmResetOps: 0, aluOps: 0, commit: () => {}, reads: [] as VtaRange[], writes: [] as VtaRange[] }

/** The DRAM bytes a 2-D access spans (a bounding range). */
const dramSpan = (i: VtaMemInsn, elemBytes: number): VtaRange[] =>
  i.ySize * i.xSize === 0 ? [] : [{ space: "dram", lo: i.dramBase * elemBytes, hi: (i.dramBase + (i.ySize - 1) * i.xStride + i.xSize) * elemBytes }]

/** Tracks the lowest and highest index an instruction touches in one space. */
const span = (space: VtaRange["space"]) => {
  let lo = Infinity
  let hi = -Infinity
  return {
    add: (e: number): void => {
      if (e < lo) lo = e
      if (e > hi) hi = e
    },
    ranges: (): VtaRange[] => (lo <= hi ? [{ space, lo, hi: hi + 1 }] : []),
  }
}

const commitAll = (writes: (() => void)[]) => () => {
  for (const w of writes) w()
}

interface Ctx {
  readonly d: VtaDerived
  readonly m: VtaCycleModel
  readonly s: VtaState
  readonly index: number
  readonly insn: VtaInsn
  /** False: the arithmetic of GEMM and ALU is skipped (timing only; indices, ranges and cycles are the same). */
  readonly functional: boolean
}

const illegal = (c: Ctx, reason: string): never => {
  throw new VtaIllegalInsnError({ index: c.index, insn: formatInsn(c.insn), reason })
}
const sramCheck = (c: Ctx, buffer: VtaSramAddressError["buffer"], entry: number, depth: number): void => {
  if (entry < 0 || entry >= depth) throw new VtaSramAddressError({ index: c.index, insn: formatInsn(c.insn), buffer, entry, depth })
}
const dramCheck = (c: Ctx, byteAddress: number, bytes: number): void => {
  if (bytes > 0 && (byteAddress < 0 || byteAddress + bytes > c.s.dram.length)) {
    throw new VtaDramAddressError({ index: c.index, insn: formatInsn(c.insn), byteAddress, bytes, dramBytes: c.s.dram.length })
  }
}

/** A padded 2-D load into an entry-major buffer of `lanes` values per entry. */
const loadPadded = (c: Ctx, i: VtaMemInsn, buffer: "inp" | "wgt" | "acc", depth: number, elemBytes: number, write: (entry: number, byteAddr: number) => () => void, zero: (entry: number) => () => void): VtaEffect => {
  const xTotal = i.xPad0 + i.xSize + i.xPad1
  const entries = xTotal * (i.yPad0 + i.ySize + i.yPad1)
  if (entries > 0) {
    sramCheck(c, buffer, i.sramBase, depth)
    sramCheck(c, buffer, i.sramBase + entries - 1, depth)
  }
  for (let y = 0; y < i.ySize; y++) dramCheck(c, (i.dramBase + y * i.xStride) * elemBytes, i.xSize * elemBytes)
  const writes: (() => void)[] = []
  let e = i.sramBase
  // timing only: the data moved never changes what any instruction costs or touches
  if (!c.functional) e = Infinity
  const z = (): void => {
    writes.push(zero(e++))
  }
  for (let k = 0; e !== Infinity && k < i.yPad0 * xTotal; k++) z()
  for (let y = 0; e !== Infinity && y < i.ySize; y++) {
    for (let k = 0; k < i.xPad0; k++) z()
    for (let x = 0; x < i.xSize; x++) writes.push(write(e++, (i.dramBase + y * i.xStride + x) * elemBytes))
    for (let k = 0; k < i.xPad1; k++) z()
  }
  for (let k = 0; e !== Infinity && k < i.yPad1 * xTotal; k++) z()
  const bytes = i.ySize * i.xSize * elemBytes
  return {
    gemmOps: 0, gemmResetOps: 0, aluOps: 0, cycles: dmaCycles(c.m, c.d.busBytes, bytes, entries - i.ySize * i.xSize), buffer, bytes, commit: writes.length === 0 ? none.commit : commitAll(writes),
    reads: dramSpan(i, elemBytes), writes: entries > 0 ? [{ space: buffer, lo: i.sramBase, hi: i.sramBase + entries }] : [],
  }
}

const execLoad = (c: Ctx, i: VtaMemInsn): VtaEffect => {
  const { d, s } = c
  switch (i.memType) {
    case "inp":
    case "wgt": {
      const buf = i.memType === "inp" ? s.inp : s.wgt
      const lanes = i.memType === "inp" ? d.batch * d.blockIn : d.blockOut * d.blockIn
      const depth = i.memType === "inp" ? d.inpDepth : d.wgtDepth
      return loadPadded(c, i, i.memType, depth, lanes, (e, b) => {
        const row = s.dram.slice(b, b + lanes)
        return () => buf.set(new Int8Array(row.buffer), e * lanes)
      }, (e) => () => buf.fill(0, e * lanes, (e + 1) * lanes))
    }
    case "acc": {
      const lanes = d.batch * d.blockOut
      const view = new DataView(s.dram.buffer, s.dram.byteOffset, s.dram.byteLength)
      return loadPadded(c, i, "acc", d.accDepth, d.accElemBytes, (e, b) => {
        const row = Int32Array.from({ length: lanes }, (_, k) => view.getInt32(b + 4 * k, true))
        return () => s.acc.set(row, e * lanes)
      }, (e) => () => s.acc.fill(0, e * lanes, (e + 1) * lanes))
    }
    case "uop": {
      if (i.ySize !== 1 || i.yPad0 + i.yPad1 + i.xPad0 + i.xPad1 !== 0) illegal(c, "a micro-op load copies one unpadded row (ySize 1, no padding)")
      if (i.xSize > 0) {
        sramCheck(c, "uop", i.sramBase, d.uopDepth)
        sramCheck(c, "uop", i.sramBase + i.xSize - 1, d.uopDepth)
      }
      const bytes = i.xSize * d.uopElemBytes
      dramCheck(c, i.dramBase * d.uopElemBytes, bytes)
      const view = new DataView(s.dram.buffer, s.dram.byteOffset, s.dram.byteLength)
      const [fd, fs, fw] = layoutOf(d).uop
      const field = (w: number, f: typeof fd): number => Number((BigInt(w) >> BigInt(f.lo)) & ((1n << BigInt(f.bits)) - 1n))
      const words = Array.from({ length: i.xSize }, (_, x) => view.getUint32((i.dramBase + x) * d.uopElemBytes, true))
      const commit = (): void => words.forEach((w, x) => {
        s.uopDst[i.sramBase + x] = field(w, fd)
        s.uopSrc[i.sramBase + x] = field(w, fs)
        s.uopWgt[i.sramBase + x] = field(w, fw)
      })
      return {
        ...none, cycles: dmaCycles(c.m, d.busBytes, bytes, 0), buffer: "uop", bytes, commit,
        reads: dramSpan({ ...i, ySize: 1 }, d.uopElemBytes), writes: i.xSize > 0 ? [{ space: "uop", lo: i.sramBase, hi: i.sramBase + i.xSize }] : [],
      }
    }
    case "out":
      return illegal(c, "LOAD of the output buffer: VTA loads only uop, inp, wgt and acc")
  }
}

const execStore = (c: Ctx, i: VtaMemInsn): VtaEffect => {
  const { d, s } = c
  if (i.memType !== "out") illegal(c, `STORE from the ${i.memType} buffer: VTA stores only from the output buffer`)
  if (i.yPad0 + i.yPad1 + i.xPad0 + i.xPad1 !== 0) illegal(c, "a STORE cannot pad")
  const lanes = d.batch * d.blockOut
  const entries = i.ySize * i.xSize
  if (entries > 0) {
    sramCheck(c, "out", i.sramBase, d.outDepth)
    sramCheck(c, "out", i.sramBase + entries - 1, d.outDepth)
  }
  for (let y = 0; y < i.ySize; y++) dramCheck(c, (i.dramBase + y * i.xStride) * d.outElemBytes, i.xSize * d.outElemBytes)
  const writes: (() => void)[] = []
  let e = i.sramBase
  for (let y = 0; c.functional && y < i.ySize; y++) {
    for (let x = 0; x < i.xSize; x++, e++) {
      const b = (i.dramBase + y * i.xStride + x) * d.outElemBytes
      const row = Uint8Array.from(s.acc.subarray(e * lanes, (e + 1) * lanes), (v) => v & 0xff)
      writes.push(() => s.dram.set(row, b))
    }
  }
  const bytes = entries * d.outElemBytes
  return {
    ...none, cycles: dmaCycles(c.m, d.busBytes, bytes, 0), buffer: "out", bytes, commit: commitAll(writes),
    reads: entries > 0 ? [{ space: "acc", lo: i.sramBase, hi: i.sramBase + entries }] : [], writes: dramSpan(i, d.outElemBytes),
  }
}

/** The accumulator rows an instruction writes, read from the state on first touch and written back at commit. */
const accOverlay = (s: VtaState, lanes: number) => {
  const rows = new Map<number, Int32Array>()
  return {
    row: (e: number): Int32Array => {
      let r = rows.get(e)
      if (r === undefined) {
        r = s.acc.slice(e * lanes, (e + 1) * lanes)
        rows.set(e, r)
      }
      return r
    },
    read: (e: number): Int32Array => rows.get(e) ?? s.acc.subarray(e * lanes, (e + 1) * lanes),
    commit: (): void => rows.forEach((r, e) => s.acc.set(r, e * lanes)),
  }
}

const checkUopRange = (c: Ctx, i: VtaGemmInsn | VtaAluInsn): void => {
  if (i.uopBgn > i.uopEnd) illegal(c, `uop_bgn ${i.uopBgn} > uop_end ${i.uopEnd}`)
  if (i.uopEnd > c.d.uopDepth) sramCheck(c, "uop", i.uopEnd - 1, c.d.uopDepth)
}

/**
 * Timing only: the ranges a GEMM or ALU touches from its loops' corners (every index is a
 * micro-op's plus non-negative multiples of the factors, so its least is at o = n = 0 and its
 * greatest at the last o and n), or undefined when one may be out of range — then the loop runs
 * and raises the error the full run raises.
 */
const cornerRanges = (c: Ctx, i: VtaGemmInsn | VtaAluInsn, fields: readonly ("dst" | "src" | "wgt")[]): Record<"dst" | "src" | "wgt", VtaRange[]> | undefined => {
  const { d, s } = c
  const out: Record<"dst" | "src" | "wgt", VtaRange[]> = { dst: [], src: [], wgt: [] }
  if (i.uopEnd <= i.uopBgn || i.iterOut === 0 || i.iterIn === 0) return out
  const o = i.iterOut - 1
  const n = i.iterIn - 1
  for (const f of fields) {
    const [uops, fo, fi, depth, space] =
      f === "dst" ? [s.uopDst, i.dstFactorOut, i.dstFactorIn, d.accDepth, "acc" as const]
      : f === "src" ? [s.uopSrc, i.srcFactorOut, i.srcFactorIn, i.op === "GEMM" ? d.inpDepth : d.accDepth, i.op === "GEMM" ? ("inp" as const) : ("acc" as const)]
      : [s.uopWgt, (i as VtaGemmInsn).wgtFactorOut, (i as VtaGemmInsn).wgtFactorIn, d.wgtDepth, "wgt" as const]
    let lo = Infinity
    let hi = -Infinity
    for (let u = i.uopBgn; u < i.uopEnd; u++) {
      if (uops[u] < lo) lo = uops[u]
      if (uops[u] > hi) hi = uops[u]
    }
    hi += o * fo + n * fi
    if (lo < 0 || hi >= depth) return undefined
    out[f] = [{ space, lo, hi: hi + 1 }]
  }
  return out
}

const execGemm = (c: Ctx, i: VtaGemmInsn): VtaEffect => {
  const { d, s } = c
  checkUopRange(c, i)
  const B = d.batch
  const BI = d.blockIn
  const BO = d.blockOut
  const iters = i.iterOut * i.iterIn * (i.uopEnd - i.uopBgn)
  const uops: VtaRange[] = i.uopEnd > i.uopBgn ? [{ space: "uop", lo: i.uopBgn, hi: i.uopEnd }] : []
  const fast = c.functional ? undefined : cornerRanges(c, i, i.reset ? ["dst"] : ["dst", "src", "wgt"])
  if (fast) {
    return { ...none, cycles: iters * c.m.gemmII, gemmOps: i.reset ? 0 : iters, gemmResetOps: i.reset ? iters : 0, reads: [...uops, ...fast.dst, ...fast.src, ...fast.wgt], writes: fast.dst }
  }
  const ov = accOverlay(s, B * BO)
  const [accs, inps, wgts] = [span("acc"), span("inp"), span("wgt")]
  for (let o = 0; o < i.iterOut; o++) {
    for (let n = 0; n < i.iterIn; n++) {
      for (let u = i.uopBgn; u < i.uopEnd; u++) {
        const dst = s.uopDst[u] + o * i.dstFactorOut + n * i.dstFactorIn
        sramCheck(c, "acc", dst, d.accDepth)
        accs.add(dst)
        const acc = c.functional ? ov.row(dst) : undefined
        if (i.reset) {
          acc?.fill(0)
          continue
        }
        const src = s.uopSrc[u] + o * i.srcFactorOut + n * i.srcFactorIn
        const wgt = s.uopWgt[u] + o * i.wgtFactorOut + n * i.wgtFactorIn
        sramCheck(c, "inp", src, d.inpDepth)
        sramCheck(c, "wgt", wgt, d.wgtDepth)
        inps.add(src)
        wgts.add(wgt)
        if (acc === undefined) continue
        const i0 = src * B * BI
        const w0 = wgt * BO * BI
        for (let b = 0; b < B; b++) {
          for (let oc = 0; oc < BO; oc++) {
            let sum = 0
            for (let ic = 0; ic < BI; ic++) sum += s.inp[i0 + b * BI + ic] * s.wgt[w0 + oc * BI + ic]
            acc[b * BO + oc] = (acc[b * BO + oc] + sum) | 0
          }
        }
      }
    }
  }
  return {
    ...none, cycles: iters * c.m.gemmII, gemmOps: i.reset ? 0 : iters, gemmResetOps: i.reset ? iters : 0, commit: ov.commit,
    reads: [...uops, ...accs.ranges(), ...inps.ranges(), ...wgts.ranges()], writes: accs.ranges(),
  }
}

const signExtend = (v: number, bits: number): number => {
  const m = v & ((1 << bits) - 1)
  return m >= 1 << (bits - 1) ? m - (1 << bits) : m
}

/** One ALU lane: VTA's op on int32 x and operand y. */
export const aluLane = (op: VtaAluInsn["aluOp"], x: number, y: number, shrArgBits: number, mulArgBits: number): number => {
  switch (op) {
    case "MIN":
      return Math.min(x, y)
    case "MAX":
      return Math.max(x, y)
    case "ADD":
      return (x + y) | 0
    case "SHR": {
      const sh = signExtend(y, shrArgBits)
      return sh >= 0 ? x >> sh : (x << -sh) | 0
    }
    case "MUL":
      return Math.imul(x, signExtend(y, mulArgBits))
  }
}

const execAlu = (c: Ctx, i: VtaAluInsn): VtaEffect => {
  const { d, s } = c
  checkUopRange(c, i)
  if (i.reset) illegal(c, "the ALU has no reset (VTA ignores reset_reg on ALU instructions)")
  const lanes = d.batch * d.blockOut
  const iters = i.iterOut * i.iterIn * (i.uopEnd - i.uopBgn)
  const uops: VtaRange[] = i.uopEnd > i.uopBgn ? [{ space: "uop", lo: i.uopBgn, hi: i.uopEnd }] : []
  const fast = c.functional ? undefined : cornerRanges(c, i, i.useImm ? ["dst"] : ["dst", "src"])
  if (fast) return { ...none, cycles: iters * c.m.aluII, aluOps: iters, reads: [...uops, ...fast.dst, ...fast.src], writes: fast.dst }
  const ov = accOverlay(s, lanes)
  const [dsts, srcs] = [span("acc"), span("acc")]
  for (let o = 0; o < i.iterOut; o++) {
    for (let n = 0; n < i.iterIn; n++) {
      for (let u = i.uopBgn; u < i.uopEnd; u++) {
        const dst = s.uopDst[u] + o * i.dstFactorOut + n * i.dstFactorIn
        sramCheck(c, "acc", dst, d.accDepth)
        dsts.add(dst)
        if (!c.functional) {
          if (!i.useImm) {
            const src = s.uopSrc[u] + o * i.srcFactorOut + n * i.srcFactorIn
            sramCheck(c, "acc", src, d.accDepth)
            srcs.add(src)
          }
          continue
        }
        if (i.useImm) {
          const acc = ov.row(dst)
          for (let k = 0; k < lanes; k++) acc[k] = aluLane(i.aluOp, acc[k], i.imm, d.shrArgBits, VTA_ISA.mulArgBits)
        } else {
          const src = s.uopSrc[u] + o * i.srcFactorOut + n * i.srcFactorIn
          sramCheck(c, "acc", src, d.accDepth)
          srcs.add(src)
          const other = ov.read(src).slice()
          const acc = ov.row(dst)
          for (let k = 0; k < lanes; k++) acc[k] = aluLane(i.aluOp, acc[k], other[k], d.shrArgBits, VTA_ISA.mulArgBits)
        }
      }
    }
  }
  return { ...none, cycles: iters * c.m.aluII, aluOps: iters, commit: ov.commit, reads: [...uops, ...dsts.ranges(), ...srcs.ranges()], writes: dsts.ranges() }
}

/** Runs one instruction: reads the state now, says what it cost, and returns its writes as `commit`. */
export const executeInsn = (d: VtaDerived, m: VtaCycleModel, s: VtaState, index: number, insn: VtaInsn, functional = true): VtaEffect => {
  const c: Ctx = { d, m, s, index, insn, functional }
  switch (insn.op) {
    case "LOAD":
      return execLoad(c, insn)
    case "STORE":
      return execStore(c, insn)
    case "GEMM":
      return execGemm(c, insn)
    case "ALU":
      return execAlu(c, insn)
    case "FINISH":
      return { ...none, cycles: m.finishCycles }
  }
}
