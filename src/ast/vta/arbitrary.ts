// Generators for the VTA laws: configurations that VTA can be built with, and instructions and
// micro-ops whose every field is drawn uniformly within that configuration's bit widths.
import * as fc from "fast-check"
import { defaultVtaConfig, deriveVta, VTA_ISA, type VtaConfig, type VtaDerived } from "./config.js"
import { layoutOf, VTA_ALU_OPS, VTA_MEM_TYPES, type VtaDeps, type VtaInsn, type VtaUop } from "./isa.js"

/** The published configuration, BLOCK 32, and BLOCK 32 with every buffer as large as the ISA allows. */
export const lawConfigs: readonly { readonly name: string; readonly config: VtaConfig }[] = [
  { name: "default (BLOCK 16)", config: defaultVtaConfig },
  { name: "BLOCK 32", config: { ...defaultVtaConfig, logBlock: 5 } },
  { name: "BLOCK 32, 64 KiB input, 1 MiB weight, 256 KiB accumulator, 128-bit bus", config: { ...defaultVtaConfig, logBlock: 5, logInpBuffSize: 16, logWgtBuffSize: 20, logAccBuffSize: 18, logBusWidth: 7 } },
]

const bits = (n: number): fc.Arbitrary<number> => fc.integer({ min: 0, max: 2 ** n - 1 })

export const arbDeps: fc.Arbitrary<VtaDeps> = fc.record({ popPrev: fc.boolean(), popNext: fc.boolean(), pushPrev: fc.boolean(), pushNext: fc.boolean() })

/** Any instruction of configuration `d`, each field uniform over its whole range. */
export const arbInsn = (d: VtaDerived): fc.Arbitrary<VtaInsn> => {
  const I = VTA_ISA
  const mem = fc.record({
    op: fc.constantFrom("LOAD" as const, "STORE" as const),
    deps: arbDeps,
    memType: fc.constantFrom(...VTA_MEM_TYPES),
    sramBase: bits(I.sramAddrBits),
    dramBase: bits(I.dramAddrBits),
    ySize: bits(I.sizeBits),
    xSize: bits(I.sizeBits),
    xStride: bits(I.strideBits),
    yPad0: bits(I.padBits),
    yPad1: bits(I.padBits),
    xPad0: bits(I.padBits),
    xPad1: bits(I.padBits),
  })
  const loop = {
    deps: arbDeps,
    reset: fc.boolean(),
    uopBgn: bits(d.logUopDepth),
    uopEnd: bits(d.logUopDepth + 1),
    iterOut: bits(I.loopIterBits),
    iterIn: bits(I.loopIterBits),
    dstFactorOut: bits(d.logAccDepth),
    dstFactorIn: bits(d.logAccDepth),
  }
  const gemm = fc.record({ op: fc.constant("GEMM" as const), ...loop, srcFactorOut: bits(d.logInpDepth), srcFactorIn: bits(d.logInpDepth), wgtFactorOut: bits(d.logWgtDepth), wgtFactorIn: bits(d.logWgtDepth) })
  const alu = fc.record({
    op: fc.constant("ALU" as const),
    ...loop,
    srcFactorOut: bits(d.logAccDepth),
    srcFactorIn: bits(d.logAccDepth),
    aluOp: fc.constantFrom(...VTA_ALU_OPS),
    useImm: fc.boolean(),
    imm: fc.integer({ min: -(2 ** (I.aluImmBits - 1)), max: 2 ** (I.aluImmBits - 1) - 1 }),
  })
  const finish = fc.record({ op: fc.constant("FINISH" as const), deps: arbDeps })
  return fc.oneof(mem, gemm, alu, finish)
}

export const arbUop = (d: VtaDerived): fc.Arbitrary<VtaUop> => {
  const L = layoutOf(d).uop
  return fc.record({ dst: bits(L[0].bits), src: bits(L[1].bits), wgt: bits(L[2].bits) })
}

export const lawDerived = (): { readonly name: string; readonly d: VtaDerived }[] => lawConfigs.map((c) => ({ name: c.name, d: deriveVta(c.config) }))
