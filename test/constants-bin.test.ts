// constants.bin made piece by piece (src/cli/constants-bin.ts) against its definition: every
// constant's stored bytes (int64 as their exact values, a deferred weight computed) at the next
// multiple of 64 bytes, in the graph's order, the gaps zero. The same bytes through buffers of any
// size (smaller than a deferred weight's unit, between, larger than everything), and the deferred
// weights never kept: written, they are still pending (their arrays never held in memory).
import { describe, expect, it } from "vitest"
import { pendingRecipe, scaledRows } from "../src/ast/graph/deferred.js"
import type { Graph } from "../src/ast/graph/graph.js"
import { packKernel } from "../src/ast/graph/ops/layout.js"
import { winogradKernel } from "../src/ast/graph/ops/winograd.js"
import { exactValues, fromArray, tensor, wideTensor, type Tensor } from "../src/ast/graph/tensor.js"
import { ALIGN, constantsBin, PIECE_BYTES } from "../src/cli/constants-bin.js"
import { packConstants } from "../src/cli/compile.js"
import { wholeBytes } from "../src/device/files.js"

/** Seeded values (a few signed zeros among them). */
const values = (n: number, seed: number): Float32Array => Float32Array.from({ length: n }, (_, j) => (j % 17 === 5 ? -0 : Math.sin(seed * 7.1 + j * 0.37) * 3))

/** A graph of constants of every kind constants.bin holds; its deferred weights fresh on every call. */
const constantsGraph = (): Graph => {
  const oihw = (o: number, i: number, k: number, seed: number) => tensor("float32", [o, i, k, k], values(o * i * k * k, seed))
  const scale = (o: number) => Float64Array.from({ length: o }, (_, j) => 0.5 + j / 7)
  const initializers = new Map<string, Tensor>([
    ["bias", fromArray("float32", [5], [1, -2, 3, -4, 5])],
    // the chain as the passes build it: a BatchNorm fold, packed, Winograd-transformed (F(4×4): a unit of 6 planes)
    ["wino", winogradKernel(packKernel(scaledRows(oihw(20, 12, 3, 1), scale(20)), 4, 8), 4)],
    ["odd_bytes", fromArray("int8", [7], [1, -1, 2, -2, 3, -3, 127])],
    ["packed", packKernel(scaledRows(oihw(13, 9, 1, 2), scale(13)), 4, 4)],
    ["exact", wideTensor("int64", [3], BigInt64Array.from([1n, -(2n ** 62n), 2n ** 53n + 1n]))],
    ["folded", scaledRows(oihw(6, 5, 3, 3), scale(6))],
    ["wide", fromArray("float64", [3], [Math.PI, -1e300, 5e-324])],
    ["stored", tensor("float32", [3000], values(3000, 4))],
    ["empty", tensor("float32", [0], new Float32Array(0))],
    ["half", fromArray("float16", [3], [1, 0.5, -2])],
  ])
  return { name: "constants", opset: 17, inputs: [], outputs: [], initializers, nodes: [], valueTypes: new Map() }
}

/** constants.bin by its definition: each constant's stored bytes (computed) at the next multiple of 64. */
const byDefinition = (g: Graph): Uint8Array => {
  const parts: Uint8Array[] = []
  let size = 0
  for (const [, t] of g.initializers) {
    const a = t.dtype === "int64" || t.dtype === "uint64" ? exactValues(t) : t.data
    const bytes = new Uint8Array(a.buffer, a.byteOffset, a.byteLength).slice()
    size = Math.ceil(size / ALIGN) * ALIGN
    const padded = new Uint8Array(size + bytes.length)
    for (const p of parts) padded.set(p)
    padded.set(bytes, size)
    parts.splice(0, parts.length, padded)
    size += bytes.length
  }
  return parts[0] ?? new Uint8Array(0)
}

describe("constants.bin, made piece by piece", () => {
  const want = byDefinition(constantsGraph())

  it.each([16, 64, 100, 1000, 4096, PIECE_BYTES])("through a buffer of %i bytes: the bytes of its definition, each piece at most the buffer (or one stored constant as large), the deferred weights never kept", (pieceBytes) => {
    const g = constantsGraph()
    const { bytes, index } = constantsBin(g, pieceBytes)
    expect(bytes.byteLength).toBe(want.length)
    const pieces: Uint8Array[] = []
    // copies: a piece is a view of the buffer reused, good until the next one is made
    bytes.write((piece) => pieces.push(piece.slice()))
    const got = Buffer.concat(pieces)
    expect(Buffer.compare(got, Buffer.from(want))).toBe(0)
    // the largest unit here: a Winograd row of 6 planes of 3·12·8 values
    const unitBytes = 6 * 3 * 12 * 8 * 4
    for (const p of pieces) expect(p.length === 3000 * 4 || p.length <= Math.max(pieceBytes, unitBytes)).toBe(true)
    for (const name of ["wino", "packed", "folded"]) expect(pendingRecipe(g.initializers.get(name)!), name).toBeDefined()
    const offsets = (index as { name: string; offset: number; bytes: number }[]).map((e) => [e.name, e.offset, e.bytes])
    expect(offsets[1]).toEqual(["wino", 64, 6 * 6 * 3 * 12 * 8 * 4])
    for (const [, offset] of offsets) expect(Number(offset) % ALIGN).toBe(0)
  })

  it("packConstants (one array) and wholeBytes hold the same bytes", () => {
    expect(Buffer.compare(Buffer.from(packConstants(constantsGraph()).bin), Buffer.from(want))).toBe(0)
    expect(Buffer.compare(Buffer.from(wholeBytes(constantsBin(constantsGraph(), 16).bytes)), Buffer.from(want))).toBe(0)
  })
})
