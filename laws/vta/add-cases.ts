// The residual add's reference and a runner of its VTA program (src/lowering/vta/add.ts), shared by
// its law and tests.
import { defaultVtaConfig, deriveVta } from "../../src/ast/vta/config.js"
import { VTA_CYCLE_MODEL, type VtaCycleModel } from "../../src/device/vta/cycle-model.js"
import { runVtaSync } from "../../src/device/vta/simulator.js"
import { lowerAdd, type VtaAdd } from "../../src/lowering/vta/add.js"

const d = deriveVta(defaultVtaConfig)

/** The add's meaning: int8 out = clip(a + b, lo, 127). */
export const addReference = (a: Int8Array, b: Int8Array, lo: number): Int8Array => Int8Array.from(a, (v, i) => Math.min(127, Math.max(lo, v + b[i])))

/** Runs the add's program on a and b (int8, entries × BLOCK each); the stored output. */
export const runAdd = (x: VtaAdd, a: Int8Array, b: Int8Array, chunk?: number, model: VtaCycleModel = VTA_CYCLE_MODEL) => {
  const p = lowerAdd(d, x, chunk)
  const dram = p.dram.slice()
  const R = (n: string) => p.layout.regions.get(n)!
  dram.set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength), R("a").byteOffset)
  dram.set(new Uint8Array(b.buffer, b.byteOffset, b.byteLength), R("b").byteOffset)
  const r = runVtaSync(d, p.insns, dram, model)
  const out = R("out")
  return { p, r, out: new Int8Array(r.dram.buffer.slice(r.dram.byteOffset + out.byteOffset, r.dram.byteOffset + out.byteOffset + x.entries * d.outElemBytes)) }
}

