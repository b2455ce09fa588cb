// A DRAM image for VTA: named regions, each aligned to its element size so that VTA's DRAM
// addresses (counted in elements of the buffer a LOAD or STORE names) reach it, plus the packing of
// values into the element layouts the hardware reads: an input element is BATCH×BLOCK_IN int8
// (row-major), a weight element BLOCK_OUT×BLOCK_IN int8 ([out][in]), an accumulator element
// BATCH×BLOCK_OUT int32 little-endian, an output element BATCH×BLOCK_OUT int8, a micro-op 32 bits.
import type { VtaDerived } from "./config.js"
import { encodeUops, type VtaUop } from "./isa.js"

export type VtaElemKind = "inp" | "wgt" | "acc" | "out" | "uop"

export interface DramRegion {
  readonly name: string
  readonly kind: VtaElemKind
  readonly byteOffset: number
  /** Elements of `kind`. */
  readonly elems: number
  /** The region's first element as a VTA DRAM address (byteOffset / element bytes). */
  readonly base: number
}

export interface DramLayout {
  readonly regions: ReadonlyMap<string, DramRegion>
  readonly bytes: number
}

export const elemBytesOf = (d: VtaDerived, kind: VtaElemKind): number =>
  kind === "inp" ? d.inpElemBytes : kind === "wgt" ? d.wgtElemBytes : kind === "acc" ? d.accElemBytes : kind === "out" ? d.outElemBytes : d.uopElemBytes

/** Lays regions out one after another, each aligned to its element size. */
export const layoutDram = (d: VtaDerived, regions: readonly { readonly name: string; readonly kind: VtaElemKind; readonly elems: number }[]): DramLayout => {
  let at = 0
  const out = new Map<string, DramRegion>()
  for (const r of regions) {
    const e = elemBytesOf(d, r.kind)
    at = Math.ceil(at / e) * e
    out.set(r.name, { ...r, byteOffset: at, base: at / e })
    at += r.elems * e
  }
  return { regions: out, bytes: at }
}

const region = (L: DramLayout, name: string): DramRegion => {
  const r = L.regions.get(name)
  if (r === undefined) throw new RangeError(`no DRAM region ${name}`)
  return r
}

/** Writes int8 values (inp, wgt or out elements, already in element order) into a region. */
export const writeInt8 = (dram: Uint8Array, L: DramLayout, name: string, values: ArrayLike<number>): void => {
  const r = region(L, name)
  for (let i = 0; i < values.length; i++) dram[r.byteOffset + i] = values[i] & 0xff
}

/** Writes int32 values (acc elements, in element order) into a region, little-endian. */
export const writeInt32 = (dram: Uint8Array, L: DramLayout, name: string, values: ArrayLike<number>): void => {
  const r = region(L, name)
  const view = new DataView(dram.buffer, dram.byteOffset, dram.byteLength)
  for (let i = 0; i < values.length; i++) view.setInt32(r.byteOffset + 4 * i, values[i], true)
}

export const writeUops = (d: VtaDerived, dram: Uint8Array, L: DramLayout, name: string, uops: readonly VtaUop[]): void => {
  dram.set(encodeUops(d, uops), region(L, name).byteOffset)
}

/** Reads `count` int8 values from a region. */
export const readInt8 = (dram: Uint8Array, L: DramLayout, name: string, count: number): Int8Array => {
  const r = region(L, name)
  return new Int8Array(dram.buffer, dram.byteOffset + r.byteOffset, count).slice()
}
