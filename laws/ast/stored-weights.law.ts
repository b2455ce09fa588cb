// Weights left in the model's file (deferred.ts `stored`, src/device/model-bytes.ts): a stored
// tensor read whole, by the range (readInto, writeRangeInto) or through the deferred chain built on
// it (BatchNorm fold, pack, Winograd; Gemm's fold, panels), computed with its source lent a scratch
// buffer (lendingSources, how constants.bin computes it) or not, holds the bytes it was given, bit
// for bit, and a lent source is pending again afterwards, read once. And a model written to a file
// and read as the CLI reads it (its large initializers' raw data left in the file) decodes to the
// tensors a copy decodes to; the walk leaves exactly the large raw_data fields unread and loads
// every other byte; cut short anywhere, it gives the error (or graph) the whole bytes give.
import * as fc from "fast-check"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it, onTestFinished } from "vitest"
import { lendingSources, pendingRecipe, readInto, rangeUnit, scaledMatrix, scaledRows, stored, writeRangeInto, type ByteSource } from "../../src/ast/graph/deferred.js"
import { allocate, type DType, type TypedArray } from "../../src/ast/graph/dtype.js"
import type { Graph } from "../../src/ast/graph/graph.js"
import { packDense, packKernel } from "../../src/ast/graph/ops/layout.js"
import { winogradKernel } from "../../src/ast/graph/ops/winograd.js"
import { tensor, type Tensor } from "../../src/ast/graph/tensor.js"
import { decodeModelSync } from "../../src/ast/onnx/decode.js"
import { encodeOnnx } from "../../src/ast/onnx/encode.js"
import { constantsBin } from "../../src/cli/constants-bin.js"
import { readModelSync, wholeBytes } from "../../src/device/files.js"
import { unreadRawData } from "../../src/device/model-bytes.js"
import { lawParams } from "../support.js"

/** The bytes of float32 weights of every kind but NaN (signed zeros, subnormals, infinities): a NaN's bits through arithmetic are the JIT's to choose (raw NaNs, copied, are the model law's below). */
const arbBytes = (n: number) =>
  fc.array(fc.oneof({ weight: 6, arbitrary: fc.float({ noNaN: true }) }, { weight: 1, arbitrary: fc.constantFrom(-0, 1e-40, -3e38, Infinity) }), { minLength: n, maxLength: n }).map((xs) => new Uint8Array(Float32Array.from(xs).buffer))

/** A stored float32 tensor over `bytes`, counting its reads (whole or by the range). */
const storedOver = (bytes: Uint8Array, shape: number[]) => {
  const reads = { count: 0, bytes: 0 }
  const read: ByteSource = (at, out) => {
    reads.count++
    reads.bytes += out.length
    out.set(bytes.subarray(at, at + out.length))
  }
  return { t: stored("float32", shape, read), reads }
}

/** The same bytes as an ordinary tensor. */
const plain = (bytes: Uint8Array, shape: number[]): Tensor => tensor("float32", shape, new Float32Array(bytes.slice().buffer))

const bits = (t: Tensor | TypedArray): Buffer => {
  const a = "data" in t ? t.data : t
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength)
}

/** A tensor's values by the range, a few units at a time (constants.bin's way), as bytes. */
const byRanges = (t: Tensor, n: number, units: number): Buffer => {
  const out = new Float32Array(n)
  for (let at = 0, count = 0; at < n; at += count) {
    count = Math.min(n - at, rangeUnit(t) * units)
    const piece = new Float32Array(count)
    writeRangeInto(t, at, piece)
    out.set(piece, at)
  }
  return bits(out)
}

describe("stored weights: read when asked, the same bits however read", () => {
  const arbChain = fc
    .record({ O: fc.integer({ min: 1, max: 17 }), I: fc.integer({ min: 1, max: 13 }), k: fc.constantFrom(1, 3), ib: fc.constantFrom(1, 4, 8), ob: fc.constantFrom(1, 4, 16), m: fc.constantFrom<2 | 4>(2, 4), units: fc.integer({ min: 1, max: 3 }) })
    .chain((c) =>
      fc
        .tuple(arbBytes(c.O * c.I * c.k * c.k), fc.array(fc.double({ min: -4, max: 4, noNaN: true }), { minLength: c.O, maxLength: c.O }))
        .map(([bytes, s]) => ({ ...c, bytes, s: Float64Array.from(s) })),
    )

  it("a stored tensor and the deferred chain on it (fold, pack, Winograd) hold what the same chain on the bytes holds: by the range, lent a scratch buffer, whole", () => {
    fc.assert(
      fc.property(arbChain, ({ O, I, k, ib, ob, m, units, bytes, s }) => {
        const shape = [O, I, k, k]
        const n = O * I * k * k
        const w = plain(bytes, shape)
        // each with whether it reads its source by the range (a pack reads all of it: lent in constants.bin)
        const chains: [(t: Tensor) => Tensor, Tensor, boolean][] = [
          [(t) => t, w, true],
          [(t) => scaledRows(t, s), scaledRows(w, s), true],
          [(t) => packKernel(scaledRows(t, s), ib, ob), packKernel(scaledRows(w, s), ib, ob), false],
          [(t) => packKernel(t, ib, ob), packKernel(w, ib, ob), false],
          ...(k === 3 ? [[(t: Tensor) => winogradKernel(packKernel(scaledRows(t, s), ib, ob), m), winogradKernel(packKernel(scaledRows(w, s), ib, ob), m), false] as [(t: Tensor) => Tensor, Tensor, boolean]] : []),
        ]
        for (const [make, want, ranged] of chains) {
          const size = want.data.length
          // by the range: a fold never reads its source whole
          const a = storedOver(bytes, shape)
          expect(byRanges(make(a.t), size, units).equals(bits(want))).toBe(true)
          if (ranged) expect(pendingRecipe(a.t)?.kind).toBe("stored")
          // a stretch alone (EliminateCommonSubexpr's chunks)
          const [start, len] = [Math.floor(size / 3), Math.min(size - Math.floor(size / 3), 300)]
          const b = storedOver(bytes, shape)
          expect(bits(readInto(make(b.t), start, new Float32Array(len))).equals(bits(want.data.subarray(start, start + len)))).toBe(true)
          // lent a scratch buffer (dirty: what an earlier weight left), the source read once, whole; pending afterwards
          const c = storedOver(bytes, shape)
          const t = make(c.t)
          const scratch = new ArrayBuffer(4 * n + 12)
          new Uint8Array(scratch).fill(0xa5)
          const lent = lendingSources(t, scratch, () => byRanges(t, size, units))
          expect(lent.equals(bits(want))).toBe(true)
          if (t !== c.t) expect(c.reads).toEqual({ count: 1, bytes: 4 * n })
          expect(pendingRecipe(c.t)?.kind).toBe("stored")
          // whole, then kept
          const d = storedOver(bytes, shape)
          expect(bits(make(d.t)).equals(bits(want))).toBe(true)
        }
      }),
      lawParams(60),
    )
  })

  const arbDense = fc
    .record({ r: fc.integer({ min: 1, max: 40 }), c: fc.integer({ min: 1, max: 30 }), b: fc.constantFrom(1, 4, 16), transpose: fc.boolean(), alpha: fc.constantFrom(1, 0.5, -1.7), units: fc.integer({ min: 1, max: 3 }) })
    .chain((d) => arbBytes(d.r * d.c).map((bytes) => ({ ...d, bytes })))

  it("the dense chain (Gemm's fold, panels) on a stored weight holds what it holds on the bytes", () => {
    fc.assert(
      fc.property(arbDense, ({ r, c, b, transpose, alpha, units, bytes }) => {
        const w = plain(bytes, [r, c])
        for (const [make, want] of [
          [(t: Tensor) => scaledMatrix(t, alpha, transpose), scaledMatrix(w, alpha, transpose)],
          [(t: Tensor) => packDense(scaledMatrix(t, alpha, transpose), b), packDense(scaledMatrix(w, alpha, transpose), b)],
        ] as [(t: Tensor) => Tensor, Tensor][]) {
          const a = storedOver(bytes, [r, c])
          expect(byRanges(make(a.t), want.data.length, units).equals(bits(want))).toBe(true)
          const e = storedOver(bytes, [r, c])
          const t = make(e.t)
          expect(lendingSources(t, new ArrayBuffer(4 * r * c), () => byRanges(t, want.data.length, units)).equals(bits(want))).toBe(true)
        }
      }),
      lawParams(60),
    )
  })

  it("constants.bin of stored weights (unchanged, and under the chain) holds the bytes of the same graph on plain ones", () => {
    fc.assert(
      fc.property(arbChain, fc.integer({ min: 16, max: 5000 }), ({ O, I, k, ib, ob, m, bytes, s }, pieceBytes) => {
        const shape = [O, I, k, k]
        const graphOf = (w: () => Tensor): Graph => {
          const initializers = new Map<string, Tensor>([
            ["raw", w()],
            ["folded", scaledRows(w(), s)],
            ["packed", packKernel(scaledRows(w(), s), ib, ob)],
            ...(k === 3 ? [["wino", winogradKernel(packKernel(w(), ib, ob), m)] as [string, Tensor]] : []),
          ])
          return { name: "g", opset: 17, inputs: [], outputs: [], initializers, nodes: [], valueTypes: new Map() }
        }
        const want = wholeBytes(constantsBin(graphOf(() => plain(bytes, shape)), pieceBytes).bytes)
        const g = graphOf(() => storedOver(bytes, shape).t)
        const got = wholeBytes(constantsBin(g, pieceBytes).bytes)
        expect(Buffer.from(got).equals(Buffer.from(want))).toBe(true)
        for (const t of g.initializers.values()) expect(pendingRecipe(t)).toBeDefined()
      }),
      lawParams(40),
    )
  })
})

describe("a model read with its large raw data left in the file", () => {
  const WIDTH: Record<string, number> = { float32: 4, float64: 8, int8: 1, uint8: 1, int16: 2, int32: 4, float16: 2 }
  const arbModel = fc
    .array(
      fc
        .record({ dtype: fc.constantFrom<DType>("float32", "float64", "int8", "uint8", "int16", "int32", "float16"), n: fc.integer({ min: 0, max: 300 }), name: fc.stringMatching(/^[a-z]{1,9}$/) })
        .chain((c) => fc.uint8Array({ minLength: c.n * WIDTH[c.dtype], maxLength: c.n * WIDTH[c.dtype] }).map((raw) => ({ ...c, raw }))),
      { minLength: 1, maxLength: 7 },
    )
    .map((ts): Graph => {
      const initializers = new Map<string, Tensor>()
      ts.forEach((t, k) => {
        const data = allocate(t.dtype, t.n)
        if (t.dtype === "float16") data.set(Array.from({ length: t.n }, (_, j) => t.raw[2 * j] / 8 - 16))
        else new Uint8Array(data.buffer).set(t.raw)
        initializers.set(`${t.name}${k}`, tensor(t.dtype, [t.n], data))
      })
      const [first, t0] = [...initializers][0]
      return { name: "g", opset: 17, inputs: [], outputs: [{ name: first, type: { dtype: t0.dtype, shape: [...t0.shape] } }], initializers, nodes: [], valueTypes: new Map() }
    })

  it("the walk leaves exactly the raw_data fields of at least minBytes, loads every other byte, and the file decodes to what a copy decodes to", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-stored-"))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    fc.assert(
      fc.property(arbModel, fc.integer({ min: 1, max: 600 }), fc.integer({ min: 0, max: 1 << 20 }), (g, minBytes, cut) => {
        const bytes = encodeOnnx(g)
        // the walk over the bytes in memory: what it loads, and what it leaves
        const seen = new Uint8Array(bytes.length)
        let front = 0
        const load = (hi: number) => {
          for (; front < hi; front++) seen[front] = bytes[front]
        }
        const left: [number, number][] = []
        const unread = unreadRawData(seen, bytes.length, load, (from, to) => {
          left.push([from, to])
          front = Math.max(front, to)
        }, minBytes)
        expect(unread).toBeDefined()
        // every raw_data of at least minBytes left, and only those (each tensor's bytes appear in the model once)
        const large = [...g.initializers.values()].filter((t) => t.data.length * WIDTH[t.dtype] >= minBytes).length
        expect(unread!.size).toBe(large)
        const inLeft = (i: number) => left.some(([a, b]) => i >= a && i < b)
        for (let i = 0; i < bytes.length; i++) if (!inLeft(i)) expect(seen[i]).toBe(bytes[i])
        // the CLI's read of the file: the same tensors, bit for bit
        const want = decodeModelSync(bytes.slice())
        const file = path.join(dir, "m.onnx")
        writeFileSync(file, bytes)
        const read = readModelSync(file, minBytes)
        for (const [name, t] of want.initializers) {
          const u = read.initializers.get(name)!
          expect(u.dtype).toBe(t.dtype)
          expect(Buffer.from(u.data.buffer, u.data.byteOffset, u.data.byteLength).equals(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength))).toBe(true)
        }
        // cut short: the error (or graph) the whole bytes give
        const short = bytes.slice(0, cut % bytes.length)
        writeFileSync(file, short)
        const outcome = (f: () => Graph) => {
          try {
            return `graph ${f().initializers.size}`
          } catch (e) {
            return `${(e as { _tag?: string })._tag}: ${(e as Error).message}`
          }
        }
        expect(outcome(() => readModelSync(file, minBytes))).toBe(outcome(() => decodeModelSync(short.slice(), { adoptBytes: true })))
      }),
      lawParams(100),
    )
  })
})
