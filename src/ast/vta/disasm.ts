// The disassembler: one VTA instruction per line, readable like VTA's own debug print
// (runtime.cc's PrintInsn), and the golden format of instruction streams. Every field appears, so
// two streams that differ in any bit print differently.
import type { VtaAluInsn, VtaDeps, VtaGemmInsn, VtaInsn, VtaMemInsn, VtaUop } from "./isa.js"

const hex = (n: number, digits: number): string => `0x${n.toString(16).padStart(digits, "0")}`

/** "pop prev, push next", or "-" when the instruction touches no token queue. */
export const formatDeps = (d: VtaDeps): string => {
  const parts = [d.popPrev && "pop prev", d.popNext && "pop next", d.pushPrev && "push prev", d.pushNext && "push next"].filter((p): p is string => typeof p === "string")
  return parts.length === 0 ? "-" : parts.join(", ")
}

const mem = (i: VtaMemInsn): string =>
  `${i.op} ${i.memType.toUpperCase().padEnd(3)}  sram ${hex(i.sramBase, 4)}  dram ${hex(i.dramBase, 8)}  ` +
  `y ${i.ySize} pad [${i.yPad0}, ${i.yPad1}]  x ${i.xSize} stride ${i.xStride} pad [${i.xPad0}, ${i.xPad1}]`

const loop = (i: VtaGemmInsn | VtaAluInsn): string =>
  `uop [${i.uopBgn}, ${i.uopEnd})  loop ${i.iterOut} × ${i.iterIn}  dst +${i.dstFactorOut}/+${i.dstFactorIn}  src +${i.srcFactorOut}/+${i.srcFactorIn}`

export const formatInsn = (i: VtaInsn): string => {
  const body = (() => {
    switch (i.op) {
      case "LOAD":
      case "STORE":
        return mem(i)
      case "GEMM":
        return `GEMM${i.reset ? " RESET" : ""}  ${loop(i)}  wgt +${i.wgtFactorOut}/+${i.wgtFactorIn}`
      case "ALU":
        return `ALU ${i.aluOp}${i.reset ? " RESET" : ""}  ${loop(i)}  ${i.useImm ? `imm ${i.imm}` : "acc"}`
      case "FINISH":
        return "FINISH"
    }
  })()
  return `${body}  ; ${formatDeps(i.deps)}`
}

/** A whole stream, one numbered line per instruction. */
export const disassemble = (insns: readonly VtaInsn[]): string =>
  insns.map((insn, k) => `${String(k).padStart(4, "0")}  ${formatInsn(insn)}`).join("\n") + (insns.length > 0 ? "\n" : "")

export const formatUop = (u: VtaUop): string => `dst ${u.dst} src ${u.src} wgt ${u.wgt}`
