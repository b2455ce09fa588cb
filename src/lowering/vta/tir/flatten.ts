// Emission of VTA's TIR, after the passes: the host side of TVM's VTA runtime, run at compile time.
// The remaining loops are unrolled (VTA's stream has no control flow) and guards decided; every
// allocation gets a fixed SRAM base in its scope (in order of appearance; their sum must fit the
// buffer); DMA statements become LOAD / STORE instructions (DRAM addresses in the tensor's region of
// the layer's DRAM image); micro-op kernels are placed in the micro-op buffer, identical kernels
// once, and loaded by one LOAD first; GEMM and ALU kernels become their instructions. A statement a
// pass should have lowered (a copy, an elementwise statement, a loop-nested intrinsic, a vthread
// loop) is a VtaTirError naming the pass. No dependency tokens yet: insert-tokens.ts adds them.
import { evalExpr } from "../../../ast/te/eval-expr.js"
import type { Expr } from "../../../ast/te/expr.js"
import type { VtaDerived } from "../../../ast/vta/config.js"
import type { DramLayout } from "../../../ast/vta/dram-image.js"
import { noDeps, type VtaInsn, type VtaUop } from "../../../ast/vta/isa.js"
import { VtaScheduleError } from "../conv2d-layer.js"
import { VtaTirError, type Ref, type VFunc, type VStmt, type VtaScope } from "./ir.js"

export interface Flattened {
  /** The stream without tokens and without FINISH, the micro-op LOAD first (its size: `uops`). */
  readonly insns: VtaInsn[]
  readonly uops: VtaUop[]
}

const DEPTH = (d: VtaDerived, s: VtaScope) => (s === "inp" ? d.inpDepth : s === "wgt" ? d.wgtDepth : d.accDepth)

/** The SRAM base of every allocation (by name; names are unique), checked against the buffers' depths. */
export const placeAllocations = (d: VtaDerived, f: VFunc): Map<string, { scope: VtaScope; base: number; elems: number }> => {
  const out = new Map<string, { scope: VtaScope; base: number; elems: number }>()
  const used: Record<VtaScope, number> = { inp: 0, wgt: 0, acc: 0 }
  const rec = (s: VStmt): void => {
    if (s.kind === "alloc") {
      if (out.has(s.name)) throw new VtaTirError({ pass: "flatten", reason: `${s.name} is allocated twice` })
      out.set(s.name, { scope: s.scope, base: used[s.scope], elems: s.elems })
      used[s.scope] += s.elems
      rec(s.body)
    } else if (s.kind === "for") rec(s.body)
    else if (s.kind === "if") rec(s.then)
    else if (s.kind === "seq") s.body.forEach(rec)
  }
  rec(f.body)
  for (const scope of ["inp", "wgt", "acc"] as const)
    if (used[scope] > DEPTH(d, scope)) throw new VtaScheduleError({ reason: `the ${scope} buffers take ${used[scope]} entries; the ${scope} buffer holds ${DEPTH(d, scope)}` })
  return out
}

export const flattenVFunc = (d: VtaDerived, f: VFunc, layout: DramLayout): Flattened => {
  const allocs = placeAllocations(d, f)
  const env = new Map<string, number>()
  const num = (e: Expr): number => evalExpr(e, env, () => {
    throw new VtaTirError({ pass: "flatten", reason: "an instruction field reads a buffer" })
  })
  const sram = (r: Ref | undefined, scope: VtaScope): number => {
    if (!r) return 0
    const a = allocs.get(r.buf)
    if (!a || a.scope !== scope) throw new VtaTirError({ pass: "flatten", reason: `${r.buf} is not an allocation in the ${scope} scope` })
    return a.base + num(r.idx)
  }
  const uops: VtaUop[] = []
  const kernels = new Map<string, number>()
  const kernel = (us: readonly VtaUop[]): [number, number] => {
    const key = us.map((u) => `${u.dst},${u.src},${u.wgt}`).join(";")
    let at = kernels.get(key)
    if (at === undefined) {
      at = uops.length
      kernels.set(key, at)
      uops.push(...us)
    }
    return [at, at + us.length]
  }
  const iter = (e: Expr, what: string): number => {
    const n = num(e)
    if (n >= 2 ** 14) throw new VtaScheduleError({ reason: `a ${what} loop of ${n} iterations exceeds the 14-bit loop count` })
    return n
  }
  const body: VtaInsn[] = []
  const pending = (pass: string) => {
    throw new VtaTirError({ pass: "flatten", reason: `a statement ${pass} lowers is still there (run that pass first)` })
  }
  const exec = (s: VStmt): void => {
    switch (s.kind) {
      case "for": {
        if (s.vthread) return pending("inject-vthread")
        const n = num(s.extent)
        const prev = env.get(s.var)
        for (let i = 0; i < n; i++) {
          env.set(s.var, i)
          exec(s.body)
        }
        if (prev === undefined) env.delete(s.var)
        else env.set(s.var, prev)
        return
      }
      case "seq":
        s.body.forEach(exec)
        return
      case "if":
        if (num(s.cond)) exec(s.then)
        return
      case "alloc":
        exec(s.body)
        return
      case "copy":
        return pending("inject-dma")
      case "ew":
        return pending("match-alu")
      case "gemm":
      case "alu":
        return pending("fold-uops")
      case "dma": {
        const a = allocs.get(s.sram.buf)
        const region = layout.regions.get(s.dram.buf)
        if (!a || !region) throw new VtaTirError({ pass: "flatten", reason: `a transfer between ${s.sram.buf} and ${s.dram.buf}: not an allocation and a DRAM tensor` })
        const f = s.f
        body.push({
          op: s.op, deps: noDeps, memType: s.op === "STORE" ? "out" : a.scope,
          sramBase: a.base + num(s.sram.idx), dramBase: region.base + num(s.dram.idx),
          ySize: num(f.ySize), xSize: num(f.xSize), xStride: num(f.xStride), yPad0: num(f.yPad0), yPad1: num(f.yPad1), xPad0: num(f.xPad0), xPad1: num(f.xPad1),
        })
        return
      }
      case "gemmKernel": {
        const [uopBgn, uopEnd] = kernel(s.uops.map((u) => ({ dst: sram(u.dst, "acc"), src: sram(u.src, "inp"), wgt: sram(u.wgt, "wgt") })))
        body.push({
          op: "GEMM", deps: noDeps, reset: s.reset, uopBgn, uopEnd, iterOut: iter(s.iterOut, "GEMM"), iterIn: iter(s.iterIn, "GEMM"),
          dstFactorOut: s.dstFactor[0], dstFactorIn: s.dstFactor[1], srcFactorOut: s.srcFactor[0], srcFactorIn: s.srcFactor[1], wgtFactorOut: s.wgtFactor[0], wgtFactorIn: s.wgtFactor[1],
        })
        return
      }
      case "aluKernel": {
        const imm = s.imm !== undefined
        const [uopBgn, uopEnd] = kernel(s.uops.map((u) => ({ dst: sram(u.dst, "acc"), src: imm ? 0 : sram(u.src, "acc"), wgt: 0 })))
        body.push({
          op: "ALU", deps: noDeps, reset: false, uopBgn, uopEnd, iterOut: iter(s.iterOut, "ALU"), iterIn: iter(s.iterIn, "ALU"),
          dstFactorOut: s.dstFactor[0], dstFactorIn: s.dstFactor[1], srcFactorOut: imm ? 0 : s.srcFactor[0], srcFactorIn: imm ? 0 : s.srcFactor[1],
          aluOp: s.op, useImm: imm, imm: s.imm ?? 0,
        })
        return
      }
    }
  }
  exec(f.body)
  if (uops.length > d.uopDepth) throw new VtaScheduleError({ reason: `${uops.length} micro-ops exceed the micro-op buffer's ${d.uopDepth}` })
  const uopRegion = layout.regions.get("uop")
  if (!uopRegion || uopRegion.elems < uops.length) throw new VtaTirError({ pass: "flatten", reason: `the DRAM image's uop region holds ${uopRegion?.elems ?? 0} micro-ops, ${uops.length} needed` })
  const loadUops: VtaInsn = { op: "LOAD", deps: noDeps, memType: "uop", sramBase: 0, dramBase: uopRegion.base, ySize: 1, xSize: uops.length, xStride: uops.length, yPad0: 0, yPad1: 0, xPad0: 0, xPad1: 0 }
  return { insns: [loadUops, ...body], uops }
}
