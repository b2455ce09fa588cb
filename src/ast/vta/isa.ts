// VTA's instruction set as data, bit-exact to include/vta/hw_spec.h (apache/tvm-vta): 128-bit
// LOAD / STORE / GEMM / ALU / FINISH instructions and 32-bit micro-ops.
//
// hw_spec.h declares each instruction as a C struct of uint64_t bit-fields; the field widths that
// index a buffer come from the configuration (config.ts). Under the C ABI VTA is built with
// (System V, GCC and Clang), a uint64_t bit-field never straddles a 64-bit word: a field that does
// not fit in the rest of the current word starts the next one. `layoutOf` applies that rule, so the
// positions here are the ones the hardware decodes — e.g. a memory instruction's y_size starts at
// bit 64 (six bits of padding after dram_base), as hardware/chisel's MemDecode spells out.
import { Data } from "effect"
import { VTA_ISA, VtaConfigError, type VtaDerived } from "./config.js"

export interface VtaDeps {
  readonly popPrev: boolean
  readonly popNext: boolean
  readonly pushPrev: boolean
  readonly pushNext: boolean
}

export const noDeps: VtaDeps = { popPrev: false, popNext: false, pushPrev: false, pushNext: false }

/** Memory ids of hw_spec_const.h (VTA_MEM_ID_*), in id order. ACC_8BIT (5) is not supported. */
export const VTA_MEM_TYPES = ["uop", "wgt", "inp", "acc", "out"] as const
export type VtaMemType = (typeof VTA_MEM_TYPES)[number]

/** ALU opcodes of hw_spec_const.h (VTA_ALU_OPCODE_*), in id order. */
export const VTA_ALU_OPS = ["MIN", "MAX", "ADD", "SHR", "MUL"] as const
export type VtaAluOp = (typeof VTA_ALU_OPS)[number]

/** A 2-D strided DMA with padding (VTAMemInsn); `op` says which module runs it. */
export interface VtaMemInsn {
  readonly op: "LOAD" | "STORE"
  readonly deps: VtaDeps
  readonly memType: VtaMemType
  readonly sramBase: number
  readonly dramBase: number
  readonly ySize: number
  readonly xSize: number
  readonly xStride: number
  readonly yPad0: number
  readonly yPad1: number
  readonly xPad0: number
  readonly xPad1: number
}

/** The micro-op loop shared by GEMM and ALU: for o < iterOut, i < iterIn, u in [uopBgn, uopEnd). */
interface VtaUopLoop {
  readonly deps: VtaDeps
  readonly reset: boolean
  readonly uopBgn: number
  readonly uopEnd: number
  readonly iterOut: number
  readonly iterIn: number
  readonly dstFactorOut: number
  readonly dstFactorIn: number
  readonly srcFactorOut: number
  readonly srcFactorIn: number
}

export interface VtaGemmInsn extends VtaUopLoop {
  readonly op: "GEMM"
  readonly wgtFactorOut: number
  readonly wgtFactorIn: number
}

export interface VtaAluInsn extends VtaUopLoop {
  readonly op: "ALU"
  readonly aluOp: VtaAluOp
  readonly useImm: boolean
  /** Signed, 16 bits. */
  readonly imm: number
}

export interface VtaFinishInsn {
  readonly op: "FINISH"
  readonly deps: VtaDeps
}

export type VtaInsn = VtaMemInsn | VtaGemmInsn | VtaAluInsn | VtaFinishInsn

/** A micro-op: accumulator index, source index (input for GEMM, accumulator for ALU), weight index. */
export interface VtaUop {
  readonly dst: number
  readonly src: number
  readonly wgt: number
}

/** A field value that does not fit its bits: never truncated. */
export class VtaEncodeError extends Data.TaggedError("VtaEncodeError")<{
  readonly insn: string
  readonly field: string
  readonly value: number
  readonly bits: number
  readonly signed: boolean
}> {
  override get message(): string {
    const range = this.signed ? `[${-(2 ** (this.bits - 1))}, ${2 ** (this.bits - 1) - 1}]` : `[0, ${2 ** this.bits - 1}]`
    return `${this.insn}: field ${this.field} = ${this.value} does not fit its ${this.bits} bits ${range}`
  }
}

/** Bytes that are no VTA instruction or micro-op of this configuration. */
export class VtaDecodeError extends Data.TaggedError("VtaDecodeError")<{ readonly index: number; readonly reason: string }> {
  override get message(): string {
    return `VTA instruction ${this.index}: ${this.reason}`
  }
}

// ---------------------------------------------------------------- layouts

export interface FieldSpec {
  readonly name: string
  readonly bits: number
  readonly signed?: boolean
}
export interface PlacedField extends FieldSpec {
  readonly lo: number
}

const OPCODES = { LOAD: 0, STORE: 1, GEMM: 2, FINISH: 3, ALU: 4 } as const
const OPCODE_NAMES: Record<number, VtaInsn["op"]> = { 0: "LOAD", 1: "STORE", 2: "GEMM", 3: "FINISH", 4: "ALU" }

/** Places bit-fields of `unitBits`-wide C storage units in order: a field never straddles a unit. */
export const placeFields = (fields: readonly FieldSpec[], unitBits: number, totalBits: number, what: string): PlacedField[] => {
  let pos = 0
  const placed = fields.map((f) => {
    if (f.bits > unitBits) throw new VtaConfigError({ reason: `${what}.${f.name} is ${f.bits} bits, wider than its ${unitBits}-bit word` })
    if (Math.floor(pos / unitBits) !== Math.floor((pos + f.bits - 1) / unitBits)) pos = Math.ceil(pos / unitBits) * unitBits
    const p = { ...f, lo: pos }
    pos += f.bits
    return p
  })
  if (pos > totalBits) throw new VtaConfigError({ reason: `${what} needs ${pos} bits, more than its ${totalBits}` })
  return placed
}

const depFields: FieldSpec[] = [
  { name: "opcode", bits: VTA_ISA.opcodeBits },
  { name: "popPrev", bits: 1 },
  { name: "popNext", bits: 1 },
  { name: "pushPrev", bits: 1 },
  { name: "pushNext", bits: 1 },
]

export interface VtaLayouts {
  readonly generic: readonly PlacedField[]
  readonly mem: readonly PlacedField[]
  readonly gemm: readonly PlacedField[]
  readonly alu: readonly PlacedField[]
  readonly uop: readonly PlacedField[]
}

const layoutCache = new WeakMap<VtaDerived, VtaLayouts>()

/** The bit positions of every field, for this configuration (hw_spec.h's structs). */
export const layoutOf = (d: VtaDerived): VtaLayouts => {
  const hit = layoutCache.get(d)
  if (hit) return hit
  const I = VTA_ISA
  const loop = (srcBits: number): FieldSpec[] => [
    ...depFields,
    { name: "reset", bits: 1 },
    { name: "uopBgn", bits: d.logUopDepth },
    { name: "uopEnd", bits: d.logUopDepth + 1 },
    { name: "iterOut", bits: I.loopIterBits },
    { name: "iterIn", bits: I.loopIterBits },
    { name: "dstFactorOut", bits: d.logAccDepth },
    { name: "dstFactorIn", bits: d.logAccDepth },
    { name: "srcFactorOut", bits: srcBits },
    { name: "srcFactorIn", bits: srcBits },
  ]
  const layouts: VtaLayouts = {
    generic: placeFields(depFields, 64, I.insBits, "FINISH"),
    mem: placeFields(
      [
        ...depFields,
        { name: "memType", bits: I.memIdBits },
        { name: "sramBase", bits: I.sramAddrBits },
        { name: "dramBase", bits: I.dramAddrBits },
        { name: "ySize", bits: I.sizeBits },
        { name: "xSize", bits: I.sizeBits },
        { name: "xStride", bits: I.strideBits },
        { name: "yPad0", bits: I.padBits },
        { name: "yPad1", bits: I.padBits },
        { name: "xPad0", bits: I.padBits },
        { name: "xPad1", bits: I.padBits },
      ],
      64,
      I.insBits,
      "LOAD/STORE",
    ),
    gemm: placeFields(
      [...loop(d.logInpDepth), { name: "wgtFactorOut", bits: d.logWgtDepth }, { name: "wgtFactorIn", bits: d.logWgtDepth }],
      64,
      I.insBits,
      "GEMM",
    ),
    alu: placeFields(
      [...loop(d.logAccDepth), { name: "aluOp", bits: I.aluOpcodeBits }, { name: "useImm", bits: 1 }, { name: "imm", bits: I.aluImmBits, signed: true }],
      64,
      I.insBits,
      "ALU",
    ),
    uop: placeFields(
      [
        { name: "dst", bits: d.logAccDepth },
        { name: "src", bits: Math.max(d.logAccDepth, d.logInpDepth) },
        { name: "wgt", bits: d.logWgtDepth },
      ],
      32,
      I.uopBits,
      "micro-op",
    ),
  }
  layoutCache.set(d, layouts)
  return layouts
}

// ---------------------------------------------------------------- encode

const flag = (b: boolean): number => (b ? 1 : 0)

/** The numeric value of every field of an instruction, by field name. */
const fieldValues = (insn: VtaInsn): Record<string, number> => {
  const deps = { opcode: OPCODES[insn.op], popPrev: flag(insn.deps.popPrev), popNext: flag(insn.deps.popNext), pushPrev: flag(insn.deps.pushPrev), pushNext: flag(insn.deps.pushNext) }
  switch (insn.op) {
    case "LOAD":
    case "STORE":
      return { ...deps, memType: VTA_MEM_TYPES.indexOf(insn.memType), sramBase: insn.sramBase, dramBase: insn.dramBase, ySize: insn.ySize, xSize: insn.xSize, xStride: insn.xStride, yPad0: insn.yPad0, yPad1: insn.yPad1, xPad0: insn.xPad0, xPad1: insn.xPad1 }
    case "GEMM":
    case "ALU": {
      const loop = { ...deps, reset: flag(insn.reset), uopBgn: insn.uopBgn, uopEnd: insn.uopEnd, iterOut: insn.iterOut, iterIn: insn.iterIn, dstFactorOut: insn.dstFactorOut, dstFactorIn: insn.dstFactorIn, srcFactorOut: insn.srcFactorOut, srcFactorIn: insn.srcFactorIn }
      return insn.op === "GEMM"
        ? { ...loop, wgtFactorOut: insn.wgtFactorOut, wgtFactorIn: insn.wgtFactorIn }
        : { ...loop, aluOp: VTA_ALU_OPS.indexOf(insn.aluOp), useImm: flag(insn.useImm), imm: insn.imm }
    }
    case "FINISH":
      return deps
  }
}

const layoutFor = (L: VtaLayouts, op: VtaInsn["op"]): readonly PlacedField[] =>
  op === "LOAD" || op === "STORE" ? L.mem : op === "GEMM" ? L.gemm : op === "ALU" ? L.alu : L.generic

const packFields = (fields: readonly PlacedField[], values: Record<string, number>, what: string): bigint => {
  let word = 0n
  for (const f of fields) {
    const v = values[f.name]
    const lo = f.signed ? -(2 ** (f.bits - 1)) : 0
    const hi = f.signed ? 2 ** (f.bits - 1) - 1 : 2 ** f.bits - 1
    if (!Number.isInteger(v) || v < lo || v > hi) throw new VtaEncodeError({ insn: what, field: f.name, value: v, bits: f.bits, signed: f.signed === true })
    const raw = BigInt(v) & ((1n << BigInt(f.bits)) - 1n)
    word |= raw << BigInt(f.lo)
  }
  return word
}

const unpackFields = (fields: readonly PlacedField[], word: bigint): Record<string, number> => {
  const out: Record<string, number> = {}
  for (const f of fields) {
    const raw = Number((word >> BigInt(f.lo)) & ((1n << BigInt(f.bits)) - 1n))
    out[f.name] = f.signed && raw >= 2 ** (f.bits - 1) ? raw - 2 ** f.bits : raw
  }
  return out
}

const usedMask = (fields: readonly PlacedField[]): bigint => fields.reduce((m, f) => m | (((1n << BigInt(f.bits)) - 1n) << BigInt(f.lo)), 0n)

/** One instruction as its 128-bit word; a field out of range is a VtaEncodeError. */
export const encodeInsnWord = (d: VtaDerived, insn: VtaInsn): bigint => {
  if ((insn.op === "LOAD" || insn.op === "STORE") && !VTA_MEM_TYPES.includes(insn.memType)) {
    throw new VtaEncodeError({ insn: insn.op, field: "memType", value: NaN, bits: VTA_ISA.memIdBits, signed: false })
  }
  if (insn.op === "ALU" && !VTA_ALU_OPS.includes(insn.aluOp)) throw new VtaEncodeError({ insn: "ALU", field: "aluOp", value: NaN, bits: VTA_ISA.aluOpcodeBits, signed: false })
  return packFields(layoutFor(layoutOf(d), insn.op), fieldValues(insn), insn.op)
}

const toBytes = (word: bigint, bytes: number): Uint8Array => {
  const out = new Uint8Array(bytes)
  for (let i = 0; i < bytes; i++) out[i] = Number((word >> BigInt(8 * i)) & 0xffn)
  return out
}
const fromBytes = (b: Uint8Array, at: number, bytes: number): bigint => {
  let w = 0n
  for (let i = bytes - 1; i >= 0; i--) w = (w << 8n) | BigInt(b[at + i])
  return w
}

/** A program as VTA reads it from DRAM: 16 bytes per instruction, little-endian. */
export const encodeProgram = (d: VtaDerived, insns: readonly VtaInsn[]): Uint8Array => {
  const out = new Uint8Array(insns.length * d.insElemBytes)
  insns.forEach((insn, i) => out.set(toBytes(encodeInsnWord(d, insn), d.insElemBytes), i * d.insElemBytes))
  return out
}

const depsOf = (v: Record<string, number>): VtaDeps => ({ popPrev: v.popPrev === 1, popNext: v.popNext === 1, pushPrev: v.pushPrev === 1, pushNext: v.pushNext === 1 })

/** The instruction a 128-bit word holds; unknown opcodes, ids or bits outside every field are a VtaDecodeError. */
export const decodeInsnWord = (d: VtaDerived, word: bigint, index = 0): VtaInsn => {
  const L = layoutOf(d)
  const opcode = Number(word & 7n)
  const op = OPCODE_NAMES[opcode]
  if (op === undefined) throw new VtaDecodeError({ index, reason: `unknown opcode ${opcode}` })
  const fields = layoutFor(L, op)
  const stray = word & ~usedMask(fields) & ((1n << 128n) - 1n)
  if (stray !== 0n) throw new VtaDecodeError({ index, reason: `${op} has bits set outside its fields (0x${stray.toString(16)})` })
  const v = unpackFields(fields, word)
  const deps = depsOf(v)
  switch (op) {
    case "LOAD":
    case "STORE": {
      const memType = VTA_MEM_TYPES[v.memType]
      if (memType === undefined) throw new VtaDecodeError({ index, reason: `${op} of memory type ${v.memType}${v.memType === 5 ? " (ACC_8BIT)" : ""} is not supported` })
      return { op, deps, memType, sramBase: v.sramBase, dramBase: v.dramBase, ySize: v.ySize, xSize: v.xSize, xStride: v.xStride, yPad0: v.yPad0, yPad1: v.yPad1, xPad0: v.xPad0, xPad1: v.xPad1 }
    }
    case "GEMM":
    case "ALU": {
      const loop = { deps, reset: v.reset === 1, uopBgn: v.uopBgn, uopEnd: v.uopEnd, iterOut: v.iterOut, iterIn: v.iterIn, dstFactorOut: v.dstFactorOut, dstFactorIn: v.dstFactorIn, srcFactorOut: v.srcFactorOut, srcFactorIn: v.srcFactorIn }
      if (op === "GEMM") return { op, ...loop, wgtFactorOut: v.wgtFactorOut, wgtFactorIn: v.wgtFactorIn }
      const aluOp = VTA_ALU_OPS[v.aluOp]
      if (aluOp === undefined) throw new VtaDecodeError({ index, reason: `unknown ALU opcode ${v.aluOp}` })
      return { op, ...loop, aluOp, useImm: v.useImm === 1, imm: v.imm }
    }
    case "FINISH":
      return { op, deps }
  }
}

export const decodeProgram = (d: VtaDerived, bytes: Uint8Array): VtaInsn[] => {
  if (bytes.length % d.insElemBytes !== 0) throw new VtaDecodeError({ index: Math.floor(bytes.length / d.insElemBytes), reason: `${bytes.length} bytes is not a whole number of ${d.insElemBytes}-byte instructions` })
  return Array.from({ length: bytes.length / d.insElemBytes }, (_, i) => decodeInsnWord(d, fromBytes(bytes, i * d.insElemBytes, d.insElemBytes), i))
}

/** A micro-op as its 32-bit word. */
export const encodeUop = (d: VtaDerived, u: VtaUop): number => Number(packFields(layoutOf(d).uop, { dst: u.dst, src: u.src, wgt: u.wgt }, "micro-op"))

export const decodeUop = (d: VtaDerived, word: number): VtaUop => {
  const v = unpackFields(layoutOf(d).uop, BigInt(word >>> 0))
  return { dst: v.dst, src: v.src, wgt: v.wgt }
}

/** Micro-ops as VTA reads them from DRAM: 4 bytes each, little-endian. */
export const encodeUops = (d: VtaDerived, uops: readonly VtaUop[]): Uint8Array => {
  const out = new Uint8Array(uops.length * d.uopElemBytes)
  const view = new DataView(out.buffer)
  uops.forEach((u, i) => view.setUint32(i * d.uopElemBytes, encodeUop(d, u), true))
  return out
}
