// VTA's configuration and ISA against the facts of apache/tvm-vta: the sizes hw_spec_const.h
// derives from config/vta_config.json, the bit positions of hw_spec.h's structs (as
// hardware/chisel's Decode.scala and ISA.scala spell them out), known encodings, decode errors,
// and the disassembler's format.
import { describe, expect, it } from "vitest"
import { VTA_DEFAULT } from "../src/ast/target.js"
import { defaultVtaConfig, deriveVta, vtaConfigOfAttrs, VtaConfigError } from "../src/ast/vta/config.js"
import { disassemble, formatUop } from "../src/ast/vta/disasm.js"
import { decodeInsnWord, decodeProgram, encodeInsnWord, encodeProgram, encodeUop, layoutOf, noDeps, VtaDecodeError, VtaEncodeError, type VtaInsn } from "../src/ast/vta/isa.js"
import { alu, deps, mem } from "../laws/vta/programs.js"

const d = deriveVta(defaultVtaConfig)
const pos = (fields: readonly { name: string; lo: number; bits: number }[]) => Object.fromEntries(fields.map((f) => [f.name, [f.lo, f.bits]]))

describe("VTA configuration", () => {
  it("derives hw_spec_const.h's sizes from vta_config.json", () => {
    expect([d.batch, d.blockIn, d.blockOut, d.busBytes]).toEqual([1, 16, 16, 8])
    expect([d.inpElemBytes, d.wgtElemBytes, d.accElemBytes, d.outElemBytes, d.uopElemBytes, d.insElemBytes]).toEqual([16, 256, 64, 16, 4, 16])
    expect([d.uopDepth, d.inpDepth, d.wgtDepth, d.accDepth]).toEqual([8192, 2048, 1024, 2048])
    expect([d.logUopDepth, d.logInpDepth, d.logWgtDepth, d.logAccDepth]).toEqual([13, 11, 10, 11])
  })
  it("the target record's default VTA attributes are the same configuration", () => {
    expect(vtaConfigOfAttrs(VTA_DEFAULT)).toEqual(defaultVtaConfig)
    expect(() => vtaConfigOfAttrs({ ...VTA_DEFAULT, logBlockOut: 5 })).toThrow(VtaConfigError)
  })
  it("BLOCK 32: 32-byte input rows, 1 KiB weight blocks, smaller depths", () => {
    const d32 = deriveVta({ ...defaultVtaConfig, logBlock: 5 })
    expect([d32.inpElemBytes, d32.wgtElemBytes, d32.accElemBytes]).toEqual([32, 1024, 128])
    expect([d32.logInpDepth, d32.logWgtDepth, d32.logAccDepth]).toEqual([10, 8, 10])
    expect(pos(layoutOf(d32).uop)).toEqual({ dst: [0, 10], src: [10, 10], wgt: [20, 8] })
  })
  it("a configuration whose fields do not fit 128 bits is a VtaConfigError", () => {
    // BLOCK 16 with a 256 KiB accumulator: 12-bit accumulator indices, 4·12 + 20 = 68 bits in the ALU's second word.
    expect(() => layoutOf(deriveVta({ ...defaultVtaConfig, logAccBuffSize: 18 }))).toThrow(VtaConfigError)
    expect(() => deriveVta({ ...defaultVtaConfig, logWgtBuffSize: 7 })).toThrow(VtaConfigError)
    expect(() => deriveVta({ ...defaultVtaConfig, logAccWidth: 4 })).toThrow(VtaConfigError)
  })
})

describe("VTA instruction layout (hw_spec.h, default configuration)", () => {
  const L = layoutOf(d)
  it("memory instructions: y_size starts the second word after 6 bits of padding (MemDecode's empty_0)", () => {
    expect(pos(L.mem)).toMatchObject({ opcode: [0, 3], popPrev: [3, 1], pushNext: [6, 1], memType: [7, 3], sramBase: [10, 16], dramBase: [26, 32], ySize: [64, 16], xSize: [80, 16], xStride: [96, 16], yPad0: [112, 4], yPad1: [116, 4], xPad0: [120, 4], xPad1: [124, 4] })
  })
  it("GEMM: the loop in the first word (bit 63 empty), the index factors in the second", () => {
    expect(pos(L.gemm)).toMatchObject({ reset: [7, 1], uopBgn: [8, 13], uopEnd: [21, 14], iterOut: [35, 14], iterIn: [49, 14], dstFactorOut: [64, 11], dstFactorIn: [75, 11], srcFactorOut: [86, 11], srcFactorIn: [97, 11], wgtFactorOut: [108, 10], wgtFactorIn: [118, 10] })
  })
  it("ALU: opcode at bit 108, use_imm at 111, a 16-bit immediate at 112 (ISA.scala's alu pattern)", () => {
    expect(pos(L.alu)).toMatchObject({ dstFactorOut: [64, 11], srcFactorIn: [97, 11], aluOp: [108, 3], useImm: [111, 1], imm: [112, 16] })
  })
  it("micro-ops: dst 11, src 11, wgt 10 bits", () => {
    expect(pos(L.uop)).toEqual({ dst: [0, 11], src: [11, 11], wgt: [22, 10] })
    expect(encodeUop(d, { dst: 1, src: 2, wgt: 3 })).toBe(1 + (2 << 11) + 3 * 2 ** 22)
  })
  it("known words", () => {
    const gemm: VtaInsn = { op: "GEMM", deps: deps({ popPrev: true }), reset: false, uopBgn: 1, uopEnd: 2, iterOut: 3, iterIn: 4, dstFactorOut: 5, dstFactorIn: 0, srcFactorOut: 0, srcFactorIn: 0, wgtFactorOut: 0, wgtFactorIn: 7 }
    expect(encodeInsnWord(d, gemm)).toBe(2n | (1n << 3n) | (1n << 8n) | (2n << 21n) | (3n << 35n) | (4n << 49n) | (5n << 64n) | (7n << 118n))
    expect(encodeInsnWord(d, alu("SHR", 0, 1, -1))).toBe(4n | (1n << 21n) | (1n << 35n) | (1n << 49n) | (1n << 64n) | (3n << 108n) | (1n << 111n) | (0xffffn << 112n))
    expect(encodeInsnWord(d, { op: "FINISH", deps: deps({ pushNext: true }) })).toBe(3n | (1n << 6n))
    expect(Array.from(encodeProgram(d, [{ op: "FINISH", deps: noDeps }]))).toEqual([3, ...new Array(15).fill(0)])
  })
})

describe("VTA encode and decode errors", () => {
  it("a field out of range is a VtaEncodeError, not a truncated word", () => {
    expect(() => encodeInsnWord(d, mem("LOAD", "inp", 2 ** 16, 0, 1, 1, 1))).toThrow(VtaEncodeError)
    expect(() => encodeInsnWord(d, alu("ADD", 0, 1, 2 ** 15))).toThrow(/imm = 32768 does not fit its 16 bits/)
    expect(() => encodeUop(d, { dst: 2048, src: 0, wgt: 0 })).toThrow(VtaEncodeError)
  })
  it("unknown opcodes, ALU opcodes, memory types and stray bits are VtaDecodeErrors", () => {
    expect(() => decodeInsnWord(d, 7n)).toThrow(VtaDecodeError)
    expect(() => decodeInsnWord(d, 4n | (6n << 108n))).toThrow(/unknown ALU opcode 6/)
    expect(() => decodeInsnWord(d, 0n | (5n << 7n))).toThrow(/ACC_8BIT/)
    expect(() => decodeInsnWord(d, 3n | (1n << 100n))).toThrow(/bits set outside its fields/)
    expect(() => decodeInsnWord(d, 0n | (1n << 60n))).toThrow(/bits set outside its fields/) // the memory instruction's 6 padding bits
    expect(() => decodeProgram(d, new Uint8Array(17))).toThrow(VtaDecodeError)
  })
})

describe("VTA disassembler", () => {
  it("prints every field, one numbered line per instruction", () => {
    const prog: VtaInsn[] = [
      mem("LOAD", "inp", 0, 0x40, 4, 8, 14, { popNext: true, pushNext: true }, { yPad0: 1, yPad1: 1, xPad0: 1, xPad1: 1 }),
      { op: "GEMM", deps: deps({ popPrev: true }), reset: false, uopBgn: 0, uopEnd: 9, iterOut: 8, iterIn: 2, dstFactorOut: 14, dstFactorIn: 1, srcFactorOut: 16, srcFactorIn: 1, wgtFactorOut: 0, wgtFactorIn: 9 },
      alu("SHR", 3, 16, 8),
      alu("ADD", 4, 16, undefined, { pushNext: true }, 1),
      mem("STORE", "out", 0, 0x1000, 16, 1, 4, { popPrev: true }),
      { op: "FINISH", deps: noDeps },
    ]
    expect(disassemble(prog)).toBe(
      [
        "0000  LOAD INP  sram 0x0000  dram 0x00000040  y 4 pad [1, 1]  x 8 stride 14 pad [1, 1]  ; pop next, push next",
        "0001  GEMM  uop [0, 9)  loop 8 × 2  dst +14/+1  src +16/+1  wgt +0/+9  ; pop prev",
        "0002  ALU SHR  uop [3, 4)  loop 16 × 1  dst +1/+0  src +0/+0  imm 8  ; -",
        "0003  ALU ADD  uop [4, 5)  loop 16 × 1  dst +1/+0  src +1/+0  acc  ; push next",
        "0004  STORE OUT  sram 0x0000  dram 0x00001000  y 16 pad [0, 0]  x 1 stride 4 pad [0, 0]  ; pop prev",
        "0005  FINISH  ; -",
        "",
      ].join("\n"),
    )
    expect(formatUop({ dst: 1, src: 2, wgt: 3 })).toBe("dst 1 src 2 wgt 3")
  })
})
