// Hand-written VTA programs for the simulator's tests and laws, each with its expected result
// computed here in plain integer arithmetic (never by the simulator).
//
// tiledGemm: C = clip(A · Wᵀ >> shift, 0, 127) as int8, A M×(K·BLOCK_IN), W (N·BLOCK_OUT)×(K·BLOCK_IN),
// tiled over the N output column blocks. The load module brings each tile's weights into one of
// `depth` weight slots, compute resets, multiplies and shifts/clips into one of `depth` accumulator
// slots, store writes the tile out. Tokens: a weight load pushes load→compute and, from tile
// `depth` on, first pops compute→load (its slot freed by tile t−depth's GEMM); the GEMM pops
// load→compute and pushes compute→load when a later tile will reuse the slot; the last ALU
// pushes compute→store; the store pops it and pushes store→compute when tile t+depth will reuse the
// accumulator slot, which that tile's reset pops. depth 1 runs the tiles one after the other;
// depth 2 is the same computation with latency hiding (two virtual threads' worth of buffers).
import type { VtaDerived } from "../../src/ast/vta/config.js"
import { layoutDram, writeInt8, writeUops, type DramLayout } from "../../src/ast/vta/dram-image.js"
import { noDeps, type VtaAluInsn, type VtaDeps, type VtaInsn, type VtaMemInsn } from "../../src/ast/vta/isa.js"

export interface TiledGemmCase {
  readonly M: number
  readonly K: number
  readonly N: number
  readonly shift: number
  readonly depth: 1 | 2
  /** A, row-major M × K·BLOCK_IN. */
  readonly a: Int8Array
  /** W, row-major N·BLOCK_OUT × K·BLOCK_IN. */
  readonly w: Int8Array
}

export interface BuiltProgram {
  readonly insns: VtaInsn[]
  readonly dram: Uint8Array
  readonly layout: DramLayout
  readonly expected: Int8Array
}

export const deps = (p: Partial<VtaDeps>): VtaDeps => ({ ...noDeps, ...p })

export const mem = (op: "LOAD" | "STORE", memType: VtaMemInsn["memType"], sramBase: number, dramBase: number, ySize: number, xSize: number, xStride: number, dp: Partial<VtaDeps> = {}, pads: Partial<Pick<VtaMemInsn, "yPad0" | "yPad1" | "xPad0" | "xPad1">> = {}): VtaMemInsn => ({
  op, deps: deps(dp), memType, sramBase, dramBase, ySize, xSize, xStride, yPad0: 0, yPad1: 0, xPad0: 0, xPad1: 0, ...pads,
})

const loop0 = { reset: false, uopBgn: 0, uopEnd: 1, iterOut: 1, iterIn: 1, dstFactorOut: 0, dstFactorIn: 0, srcFactorOut: 0, srcFactorIn: 0 }

export const alu = (aluOp: VtaAluInsn["aluOp"], uop: number, rows: number, imm: number | undefined, dp: Partial<VtaDeps> = {}, srcFactorOut = 0): VtaAluInsn => ({
  op: "ALU", deps: deps(dp), ...loop0, uopBgn: uop, uopEnd: uop + 1, iterOut: rows, dstFactorOut: 1, srcFactorOut, aluOp, useImm: imm !== undefined, imm: imm ?? 0,
})

/** C = clip(A·Wᵀ >> shift, 0, 127) in plain integers: the oracle. */
export const tiledGemmReference = (d: VtaDerived, c: TiledGemmCase): Int8Array => {
  const KI = c.K * d.blockIn
  const NO = c.N * d.blockOut
  const out = new Int8Array(c.M * NO)
  for (let m = 0; m < c.M; m++) {
    for (let j = 0; j < NO; j++) {
      let s = 0
      for (let k = 0; k < KI; k++) s += c.a[m * KI + k] * c.w[j * KI + k]
      out[m * NO + j] = Math.min(127, Math.max(0, (s | 0) >> c.shift))
    }
  }
  return out
}

export const buildTiledGemm = (d: VtaDerived, c: TiledGemmCase): BuiltProgram => {
  const { M, K, N, depth } = c
  const BI = d.blockIn
  const BO = d.blockOut
  if (d.batch !== 1) throw new RangeError("tiledGemm is written for BATCH 1")
  const layout = layoutDram(d, [
    { name: "uop", kind: "uop", elems: depth },
    { name: "a", kind: "inp", elems: M * K },
    { name: "w", kind: "wgt", elems: N * K },
    { name: "c", kind: "out", elems: M * N },
  ])
  const dram = new Uint8Array(layout.bytes)
  const R = (n: string) => layout.regions.get(n)!
  // A as input elements (m, kb), W as weight blocks (n, kb) = W[n·BO + oc][kb·BI + ic].
  const aPacked = new Int8Array(M * K * BI)
  for (let m = 0; m < M; m++) for (let kb = 0; kb < K; kb++) for (let ic = 0; ic < BI; ic++) aPacked[(m * K + kb) * BI + ic] = c.a[m * K * BI + kb * BI + ic]
  const wPacked = new Int8Array(N * K * BO * BI)
  for (let n = 0; n < N; n++) for (let kb = 0; kb < K; kb++) for (let oc = 0; oc < BO; oc++) for (let ic = 0; ic < BI; ic++) {
    wPacked[((n * K + kb) * BO + oc) * BI + ic] = c.w[(n * BO + oc) * K * BI + kb * BI + ic]
  }
  writeInt8(dram, layout, "a", aPacked)
  writeInt8(dram, layout, "w", wPacked)
  writeUops(d, dram, layout, "uop", Array.from({ length: depth }, (_, s) => ({ dst: s * M, src: 0, wgt: s * K })))

  const insns: VtaInsn[] = [mem("LOAD", "uop", 0, R("uop").base, 1, depth, depth), mem("LOAD", "inp", 0, R("a").base, 1, M * K, M * K)]
  for (let t = 0; t < N; t++) {
    const s = t % depth
    const reuse = t + depth < N
    insns.push(mem("LOAD", "wgt", s * K, R("w").base + t * K, 1, K, K, { popNext: t >= depth, pushNext: true }))
    insns.push({ op: "GEMM", deps: deps({ popNext: t >= depth }), ...loop0, reset: true, uopBgn: s, uopEnd: s + 1, iterOut: M, dstFactorOut: 1, wgtFactorOut: 0, wgtFactorIn: 0 })
    insns.push({ op: "GEMM", deps: deps({ popPrev: true, pushPrev: reuse }), ...loop0, uopBgn: s, uopEnd: s + 1, iterOut: M, iterIn: K, dstFactorOut: 1, srcFactorOut: K, srcFactorIn: 1, wgtFactorOut: 0, wgtFactorIn: 1 })
    insns.push(alu("SHR", s, M, c.shift))
    insns.push(alu("MAX", s, M, 0))
    insns.push(alu("MIN", s, M, 127, { pushNext: true }))
    insns.push(mem("STORE", "out", s * M, R("c").base + t, M, 1, N, { popPrev: true, pushPrev: reuse }))
  }
  insns.push({ op: "FINISH", deps: noDeps })
  return { insns, dram, layout, expected: tiledGemmReference(d, c) }
}

/** The stored C, unpacked from output elements (m, n) to row-major M × N·BLOCK_OUT. */
export const readTiledGemm = (d: VtaDerived, c: TiledGemmCase, dram: Uint8Array, layout: DramLayout): Int8Array => {
  const r = layout.regions.get("c")!
  return new Int8Array(dram.buffer, dram.byteOffset + r.byteOffset, c.M * c.N * d.blockOut).slice()
}

/** Seeded int8 values in [lo, hi]. */
export const seededInt8 = (seed: number, n: number, lo = -8, hi = 8): Int8Array => {
  let x = seed >>> 0 || 1
  const out = new Int8Array(n)
  for (let i = 0; i < n; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    out[i] = lo + ((x >>> 0) % (hi - lo + 1))
  }
  return out
}
