// After emission, before the tokens: a LOAD into the input or weight buffer whose every entry
// already holds what it would write (the same DRAM element, or a pad's zero) since an earlier
// LOAD, is dropped — only LOADs write those buffers, so the entries cannot have changed. With
// virtual threads over output tiles this keeps a thread's weights (or input rows) in its slot
// across the tiles that share them (the generator's stationary buffers), without a schedule knob.
import type { VtaDerived } from "../../../ast/vta/config.js"
import type { VtaInsn } from "../../../ast/vta/isa.js"

export const dropRedundantLoads = (d: VtaDerived, insns: readonly VtaInsn[]): VtaInsn[] => {
  // per buffer and entry: 0 unknown, -1 a pad's zero, k + 1 the DRAM element k
  const held = { inp: new Float64Array(d.inpDepth), wgt: new Float64Array(d.wgtDepth) }
  return insns.filter((insn) => {
    if (insn.op !== "LOAD" || (insn.memType !== "inp" && insn.memType !== "wgt")) return true
    const buf = held[insn.memType]
    const cols = insn.xPad0 + insn.xSize + insn.xPad1
    const rows = insn.yPad0 + insn.ySize + insn.yPad1
    const wants: number[] = []
    for (let y = 0; y < rows; y++)
      for (let x = 0; x < cols; x++) {
        const inside = y >= insn.yPad0 && y < insn.yPad0 + insn.ySize && x >= insn.xPad0 && x < insn.xPad0 + insn.xSize
        wants.push(inside ? insn.dramBase + (y - insn.yPad0) * insn.xStride + (x - insn.xPad0) + 1 : -1)
      }
    const at = insn.sramBase
    if (at + wants.length <= buf.length && wants.every((w, k) => buf[at + k] === w)) return false
    wants.forEach((w, k) => {
      if (at + k < buf.length) buf[at + k] = w
    })
    return true
  })
}
