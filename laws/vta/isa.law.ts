// VTA's instruction encoding (src/ast/vta/isa.ts), on three configurations (the published one,
// BLOCK 32, BLOCK 32 with the largest buffers the ISA can address):
// - decode ∘ encode is the identity on random instructions and micro-ops, every field drawn over
//   its whole range, and encode ∘ decode is the identity on the bytes of random programs;
// - any one field set just outside its range (one past the top, −1, or past a signed immediate's
//   ends) is a VtaEncodeError naming that field — never a truncated word.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbInsn, arbUop, lawDerived } from "../../src/ast/vta/arbitrary.js"
import { decodeInsnWord, decodeProgram, decodeUop, encodeInsnWord, encodeProgram, encodeUop, layoutOf, VtaEncodeError, type VtaInsn } from "../../src/ast/vta/isa.js"
import { lawParams } from "../support.js"

/** The instruction's field of `name` set to `value` (booleans and names are not numeric fields). */
const withField = (insn: VtaInsn, name: string, value: number): VtaInsn => {
  if (name === "opcode" || name === "memType" || name === "aluOp" || name === "useImm" || name === "reset") return insn
  if (name === "popPrev" || name === "popNext" || name === "pushPrev" || name === "pushNext") return insn
  return { ...insn, [name]: value } as VtaInsn
}

describe.each(lawDerived())("VTA ISA, $name", ({ d }) => {
  it("decode ∘ encode is the identity on instructions", () => {
    fc.assert(fc.property(arbInsn(d), (insn) => {
      expect(decodeInsnWord(d, encodeInsnWord(d, insn))).toEqual(insn)
    }), lawParams(2000))
  })

  it("encode ∘ decode is the identity on the bytes of programs", () => {
    fc.assert(fc.property(fc.array(arbInsn(d), { maxLength: 8 }), (insns) => {
      const bytes = encodeProgram(d, insns)
      expect(bytes.length).toBe(16 * insns.length)
      expect(encodeProgram(d, decodeProgram(d, bytes))).toEqual(bytes)
    }), lawParams(300))
  })

  it("decode ∘ encode is the identity on micro-ops, which fit 32 bits", () => {
    fc.assert(fc.property(arbUop(d), (u) => {
      const w = encodeUop(d, u)
      expect(w).toBeGreaterThanOrEqual(0)
      expect(w).toBeLessThan(2 ** 32)
      expect(decodeUop(d, w)).toEqual(u)
    }), lawParams(1000))
  })

  it("a field one step outside its range is a VtaEncodeError naming it", () => {
    const L = layoutOf(d)
    fc.assert(fc.property(arbInsn(d), fc.nat(), fc.boolean(), (insn, pick, below) => {
      const fields = (insn.op === "LOAD" || insn.op === "STORE" ? L.mem : insn.op === "GEMM" ? L.gemm : insn.op === "ALU" ? L.alu : L.generic)
        .filter((f) => withField(insn, f.name, 0) !== insn)
      fc.pre(fields.length > 0)
      const f = fields[pick % fields.length]
      const bad = f.signed ? (below ? -(2 ** (f.bits - 1)) - 1 : 2 ** (f.bits - 1)) : below ? -1 : 2 ** f.bits
      const err = (() => {
        try {
          encodeInsnWord(d, withField(insn, f.name, bad))
          return undefined
        } catch (e) {
          return e
        }
      })()
      expect(err).toBeInstanceOf(VtaEncodeError)
      expect((err as VtaEncodeError).field).toBe(f.name)
    }), lawParams(1000))
  })
})
