// The compile-time weight transforms, each written for speed over whole runs of lanes, against their
// definitions written element by element: the blocked kernel layout (packKernel, OIHW →
// OIHW[ib]i[ob]o, the channels past O and I zero), the Winograd kernel transform (winogradKernel,
// U = G g Gᵀ per channel pair, F(2×2) and F(4×4)) and raw tensor bytes read whole (copyRaw against
// the DataView read of each element). Equal bit for bit on random shapes (blocks that divide the
// channels or not, 1×1 to 7×7 kernels) and random weights (signed zeros, tiny, huge and infinite
// values among them): a compiled model's constants are their bytes. And the chain as the passes
// build it — SimplifyInference's BatchNorm fold (scaledRows), AlterLayout's pack, the Winograd
// transform — deferred and read through (deferred.ts: one array written, not three) against the
// same chain computed step by step, each step stored: the same bits; likewise any stretch of a
// deferred tensor read on its own (readInto, what EliminateCommonSubexpr compares), and the
// tensor written a few units at a time (writeRangeInto, how constants.bin is written). And a model's
// bytes decoded as the file reader does (adoptBytes: each tensor's raw data moved over its field's
// header to its alignment, in memory or read again from the file, then viewed) against a copy
// decoded the ordinary way: the same tensors,
// bit for bit; every tensor of 128 bytes or more of a 1-, 2- or 4-byte type a view; and a model cut
// short anywhere a typed error or a graph, never a read past its end; and raw data written before
// its tensor's name (another encoder's order) moved no further than its own header.
import * as fc from "fast-check"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it, onTestFinished } from "vitest"
import { readModelSync } from "../../src/device/files.js"
import { allocate, type DType } from "../../src/ast/graph/dtype.js"
import { packDense, packKernel } from "../../src/ast/graph/ops/layout.js"
import { WINOGRAD, winogradKernel } from "../../src/ast/graph/ops/winograd.js"
import { tensor, type Tensor } from "../../src/ast/graph/tensor.js"
import { copyRaw, readRawByElement } from "../../src/ast/onnx/tensor-proto.js"
import { rangeUnit, readInto, scaledMatrix, scaledRows, writeInto, writeRangeInto } from "../../src/ast/graph/deferred.js"
import { decodeModelSync } from "../../src/ast/onnx/decode.js"
import { encodeOnnx } from "../../src/ast/onnx/encode.js"
import { encodeTensor } from "../../src/ast/onnx/tensor-proto.js"
import { create, toBinary } from "@bufbuild/protobuf"
import { TensorProtoSchema } from "onnx-buf"
import { DecodeError, UnsupportedModelError } from "../../src/ast/onnx/errors.js"
import type { Graph } from "../../src/ast/graph/graph.js"
import { lawParams } from "../support.js"

/** packKernel's definition: out[oo, ii, kh, kw, i, o] = w[oo·ob + o, ii·ib + i, kh, kw], 0 past O or I. */
const packKernelByElement = (w: Tensor, ib: number, ob: number): Tensor => {
  const [O, I, KH, KW] = w.shape
  const [OB, IB] = [Math.ceil(O / ob), Math.ceil(I / ib)]
  const out = allocate(w.dtype, OB * IB * KH * KW * ib * ob)
  let k = 0
  for (let oo = 0; oo < OB; oo++)
    for (let ii = 0; ii < IB; ii++)
      for (let kh = 0; kh < KH; kh++)
        for (let kw = 0; kw < KW; kw++)
          for (let i = 0; i < ib; i++)
            for (let o = 0; o < ob; o++, k++) {
              const [oc, ic] = [oo * ob + o, ii * ib + i]
              out[k] = oc < O && ic < I ? w.data[((oc * I + ic) * KH + kh) * KW + kw] : 0
            }
  return tensor(w.dtype, [OB, IB, KH, KW, ib, ob], out)
}

/**
 * winogradKernel's definition, one channel pair at a time: (G g)[e, c] = Σ_r G[e, r]·g[r, c], then
 * U[e, n] = Σ_c (G g)[e, c]·G[n, c], in float64 and in that order of terms, U laid out
 * [a, a, OB, I, ob] at ((e·a + n)·OB + oo)·I·ob + (ii·ib + i)·ob + o.
 */
const winogradKernelByPair = (w: Tensor, m: 2 | 4): Tensor => {
  const [OB, IB, , , ib, ob] = w.shape
  const a = m + 2
  const G = WINOGRAD[m].G
  const I = IB * ib
  const out = allocate(w.dtype, a * a * OB * I * ob)
  for (let oo = 0; oo < OB; oo++)
    for (let ii = 0; ii < IB; ii++)
      for (let i = 0; i < ib; i++)
        for (let o = 0; o < ob; o++) {
          const g = (r: number, c: number) => w.data[((((oo * IB + ii) * 3 + r) * 3 + c) * ib + i) * ob + o]
          const gg = Array.from({ length: a }, (_, e) => [0, 1, 2].map((c) => G[e][0] * g(0, c) + G[e][1] * g(1, c) + G[e][2] * g(2, c)))
          for (let e = 0; e < a; e++)
            for (let n = 0; n < a; n++)
              out[((e * a + n) * OB + oo) * I * ob + (ii * ib + i) * ob + o] = gg[e][0] * G[n][0] + gg[e][1] * G[n][1] + gg[e][2] * G[n][2]
        }
  return tensor(w.dtype, [a, a, OB, I, ob], out)
}

/** The BatchNorm fold's definition: w[o, …] · s[o], each element rounded into the dtype's array. */
const scaleRowsByElement = (w: Tensor, s: Float64Array): Tensor => {
  const out = allocate(w.dtype, w.data.length)
  const per = w.data.length / w.shape[0]
  for (let j = 0; j < out.length; j++) out[j] = w.data[j] * s[Math.floor(j / per)]
  return tensor(w.dtype, w.shape, out)
}

/** Weights of every kind a float32 may hold, beside ordinary ones. */
const arbWeight = fc.oneof(
  { weight: 8, arbitrary: fc.float({ min: -2, max: 2, noNaN: true }) },
  { weight: 1, arbitrary: fc.constantFrom(0, -0, 1e-40, -3e38, 3e38, Infinity, -Infinity) },
)

const arbWeights = (n: number) => fc.array(arbWeight, { minLength: n, maxLength: n }).map((xs) => Float32Array.from(xs))

/** Bitwise equality of two tensors' data (NaN payloads, signed zeros and all). */
const sameBits = (got: Tensor, want: Tensor) => {
  expect(got.dtype).toBe(want.dtype)
  expect(got.shape).toEqual(want.shape)
  const bytes = (t: Tensor) => new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)
  expect(Buffer.compare(bytes(got), bytes(want))).toBe(0)
}

describe("compile-time weight transforms equal their element-wise definitions, bit for bit", () => {
  const arbPack = fc
    .record({ O: fc.integer({ min: 1, max: 21 }), I: fc.integer({ min: 1, max: 19 }), k: fc.constantFrom(1, 3, 5, 7), kw: fc.constantFrom(1, 3), ib: fc.constantFrom(1, 2, 4, 8, 16), ob: fc.constantFrom(1, 3, 4, 8, 16) })
    .chain((c) => arbWeights(c.O * c.I * c.k * c.kw).map((data) => ({ ...c, w: tensor("float32", [c.O, c.I, c.k, c.kw], data) })))

  it("packKernel (OIHW → OIHW[ib]i[ob]o, padded lanes zero)", () => {
    fc.assert(
      fc.property(arbPack, ({ w, ib, ob }) => sameBits(packKernel(w, ib, ob), packKernelByElement(w, ib, ob))),
      lawParams(60),
    )
  })

  const arbWinograd = fc
    .record({ OB: fc.integer({ min: 1, max: 4 }), IB: fc.integer({ min: 1, max: 4 }), ib: fc.constantFrom(1, 2, 4, 16), ob: fc.constantFrom(1, 4, 8, 16), m: fc.constantFrom<2 | 4>(2, 4) })
    .chain((c) => arbWeights(c.OB * c.IB * 9 * c.ib * c.ob).map((data) => ({ ...c, w: tensor("float32", [c.OB, c.IB, 3, 3, c.ib, c.ob], data) })))

  it("winogradKernel (U = G g Gᵀ per channel pair, F(2×2) and F(4×4))", () => {
    fc.assert(
      fc.property(arbWinograd, ({ w, m }) => sameBits(winogradKernel(w, m), winogradKernelByPair(w, m))),
      lawParams(60),
    )
  })

  /** The checks of a deferred tensor against its stored values: a stretch read alone, pieces of a few units, written whole, computed. */
  const sameDeferred = (t: Tensor, want: Tensor, units: number) => {
    const n = want.data.length
    const [start, len] = [Math.floor(n / 3), Math.min(n - Math.floor(n / 3), 700)]
    sameBits(tensor("float32", [len], readInto(t, start, allocate("float32", len))), tensor("float32", [len], want.data.slice(start, start + len)))
    const pieces = allocate("float32", n)
    for (let at = 0, count = 0; at < n; at += count) {
      count = Math.min(n - at, rangeUnit(t) * units)
      const piece = allocate("float32", count)
      writeRangeInto(t, at, piece)
      pieces.set(piece, at)
    }
    sameBits(tensor("float32", want.shape, pieces), want)
    const whole = allocate("float32", n)
    writeInto(t, whole)
    sameBits(tensor("float32", want.shape, whole), want)
    sameBits(t, want)
  }

  const arbChain = fc
    .record({ O: fc.integer({ min: 1, max: 21 }), I: fc.integer({ min: 1, max: 19 }), k: fc.constantFrom(1, 3), kw: fc.constantFrom(1, 3, 5), ib: fc.constantFrom(1, 2, 4, 8, 16), ob: fc.constantFrom(1, 3, 4, 8, 16), m: fc.constantFrom<2 | 4>(2, 4), units: fc.integer({ min: 1, max: 3 }) })
    .chain((c) =>
      fc
        .tuple(arbWeights(c.O * c.I * c.k * c.kw), fc.array(fc.double({ min: -4, max: 4, noNaN: true }), { minLength: c.O, maxLength: c.O }))
        .map(([data, s]) => ({ ...c, w: tensor("float32", [c.O, c.I, c.k, c.kw], data), s: Float64Array.from(s) })),
    )

  it("the deferred chain (fold, pack, Winograd) read through equals the chain stored step by step", () => {
    fc.assert(
      fc.property(arbChain, ({ w, s, ib, ob, k, kw, m, units }) => {
        const folded = scaleRowsByElement(w, s)
        const packed = packKernelByElement(folded, ib, ob)
        // each deferred tensor fresh: read through by the next step, never computed whole
        sameBits(packKernel(scaledRows(w, s), ib, ob), packed)
        const wino = k === 3 && kw === 3 ? winogradKernelByPair(packed, m) : undefined
        if (wino) sameBits(winogradKernel(packKernel(scaledRows(w, s), ib, ob), m), wino)
        // read in stretches (EliminateCommonSubexpr's chunks), written whole into an array (the
        // artifact's constants), both before being computed, then computed
        const chain: [() => Tensor, Tensor][] = [
          [() => scaledRows(w, s), folded],
          [() => packKernel(scaledRows(w, s), ib, ob), packed],
          ...(wino ? [[() => winogradKernel(packKernel(scaledRows(w, s), ib, ob), m), wino] as [() => Tensor, Tensor]] : []),
        ]
        for (const [make, want] of chain) sameDeferred(make(), want, units)
      }),
      lawParams(60),
    )
  })

  /** packDense's definition: out[p, k, j] = w[k, p·b + j], 0 past N. */
  const packDenseByElement = (w: Tensor, b: number): Tensor => {
    const [K, N] = w.shape
    const P = Math.ceil(N / b)
    const out = allocate(w.dtype, P * K * b)
    for (let p = 0; p < P; p++) for (let k = 0; k < K; k++) for (let j = 0; j < b; j++) out[(p * K + k) * b + j] = p * b + j < N ? w.data[k * N + p * b + j] : 0
    return tensor(w.dtype, [P, K, b], out)
  }

  /** Gemm's fold of B: alpha · B, transposed or not, each element rounded into the dtype's array. */
  const scaledMatrixByElement = (w: Tensor, alpha: number, transpose: boolean): Tensor => {
    const [r, c] = w.shape
    const out = allocate(w.dtype, r * c)
    for (let i = 0; i < r; i++) for (let j = 0; j < c; j++) out[transpose ? j * r + i : i * c + j] = w.data[i * c + j] * alpha
    return tensor(w.dtype, transpose ? [c, r] : [r, c], out)
  }

  const arbDense = fc
    .record({ r: fc.integer({ min: 1, max: 70 }), c: fc.integer({ min: 1, max: 45 }), b: fc.constantFrom(1, 4, 8, 16, 48), transpose: fc.boolean(), alpha: fc.constantFrom(1, 0.5, -1.7, 3e-3), units: fc.integer({ min: 1, max: 3 }) })
    .chain((d) => arbWeights(d.r * d.c).map((data) => ({ ...d, w: tensor("float32", [d.r, d.c], data) })))

  it("the dense chain (Gemm's fold of B, the column panels) read through equals the chain stored step by step; each alone too", () => {
    fc.assert(
      fc.property(arbDense, ({ w, b, transpose, alpha, units }) => {
        const folded = scaledMatrixByElement(w, alpha, transpose)
        const packed = packDenseByElement(folded, b)
        sameDeferred(scaledMatrix(w, alpha, transpose), folded, units)
        sameDeferred(packDense(scaledMatrix(w, alpha, transpose), b), packed, units)
        sameDeferred(packDense(folded, b), packed, units)
      }),
      lawParams(60),
    )
  })

  const RAW: readonly DType[] = ["float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32"]
  const WIDTH: Record<string, number> = { float32: 4, float64: 8, int8: 1, uint8: 1, int16: 2, uint16: 2, int32: 4, uint32: 4 }
  const arbRaw = fc
    .record({ dtype: fc.constantFrom(...RAW), n: fc.integer({ min: 0, max: 40 }), at: fc.integer({ min: 0, max: 7 }) })
    .chain((c) => fc.uint8Array({ minLength: c.at + c.n * WIDTH[c.dtype], maxLength: c.at + c.n * WIDTH[c.dtype] }).map((buf) => ({ ...c, bytes: buf.subarray(c.at) })))

  it("copyRaw reads what readRawByElement reads (any byte offset; NaNs compared as values)", () => {
    fc.assert(
      fc.property(arbRaw, ({ dtype, n, bytes }) => {
        const got = copyRaw(dtype, bytes, n)
        const want = readRawByElement(dtype, bytes, n)
        expect(got.constructor).toBe(want.constructor)
        expect(Array.from(got as ArrayLike<number>)).toEqual(Array.from(want as ArrayLike<number>))
      }),
      lawParams(200),
    )
  })

  const VIEWED: readonly DType[] = ["float32", "int32", "uint32", "int16", "uint16", "int8", "uint8", "float64"]
  const arbModel = fc
    .array(
      fc
        .record({ dtype: fc.constantFrom(...VIEWED), n: fc.integer({ min: 0, max: 70 }), name: fc.stringMatching(/^[a-z]{1,13}$/) })
        .chain((c) => fc.uint8Array({ minLength: c.n * WIDTH[c.dtype], maxLength: c.n * WIDTH[c.dtype] }).map((raw) => ({ ...c, raw }))),
      { minLength: 1, maxLength: 8 },
    )
    .map((ts): Graph => {
      const initializers = new Map<string, Tensor>()
      ts.forEach((t, k) => {
        const data = allocate(t.dtype, t.n)
        new Uint8Array(data.buffer).set(t.raw)
        initializers.set(`${t.name}${k}`, tensor(t.dtype, [t.n], data))
      })
      const [first, t0] = [...initializers][0]
      return { name: "g", opset: 17, inputs: [], outputs: [{ name: first, type: { dtype: t0.dtype, shape: [...t0.shape] } }], initializers, nodes: [], valueTypes: new Map() }
    })

  it("a model's adopted bytes decode, viewed in place, to what a copy decodes (and cut short: a typed error or a graph)", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-adopt-"))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    fc.assert(
      fc.property(arbModel, fc.integer({ min: 0, max: 1 << 20 }), (g, cut) => {
        const bytes = encodeOnnx(g)
        const want = decodeModelSync(bytes.slice())
        const adopted = bytes.slice()
        const got = decodeModelSync(adopted, { adoptBytes: true })
        for (const [name, t] of want.initializers) {
          const u = got.initializers.get(name)!
          sameBits(u, t)
          expect(Buffer.compare(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength), Buffer.from(g.initializers.get(name)!.data.buffer))).toBe(0)
          if (t.data.byteLength >= 128 && t.dtype !== "float64") expect(u.data.buffer).toBe(adopted.buffer)
        }
        // the file reader's way: the model written to a file, moved by reading it again
        const file = path.join(dir, "m.onnx")
        writeFileSync(file, bytes)
        const read = readModelSync(file)
        for (const [name, t] of want.initializers) sameBits(read.initializers.get(name)!, t)
        const short = bytes.slice(0, cut % bytes.length)
        try {
          decodeModelSync(short, { adoptBytes: true })
        } catch (e) {
          expect(e instanceof DecodeError || e instanceof UnsupportedModelError).toBe(true)
        }
      }),
      lawParams(150),
    )
  })

  /** A varint's bytes. */
  const varint = (n: number): number[] => {
    const out: number[] = []
    for (; n >= 128; n = Math.floor(n / 128)) out.push((n % 128) | 128)
    return [...out, n]
  }
  /** A length-delimited field (number < 16). */
  const field = (num: number, body: Uint8Array): Uint8Array => Uint8Array.from([(num << 3) | 2, ...varint(body.length), ...body])

  it("raw data written before a tensor's name (another encoder's field order) is moved no further than its own header: the tensor before it keeps its bytes", () => {
    // bytes of 1-byte tensors never move, so an 8-byte one right behind them is where a move past its header would show
    const arbTensors = fc.array(
      fc
        .record({ dtype: fc.constantFrom<DType>("uint8", "float64"), n: fc.integer({ min: 1, max: 14 }), pad: fc.integer({ min: 0, max: 7 }) })
        .chain((c) => fc.uint8Array({ minLength: c.n * WIDTH[c.dtype], maxLength: c.n * WIDTH[c.dtype] }).map((raw) => ({ ...c, raw }))),
      { minLength: 2, maxLength: 6 },
    )
    fc.assert(
      fc.property(arbTensors, (ts) => {
        // a graph whose output is its input; its initializers appended as a second `graph` field (protobuf merges them)
        const g: Graph = { name: "g", opset: 17, inputs: [{ name: "x", type: { dtype: "float32", shape: [1] } }], outputs: [{ name: "x", type: { dtype: "float32", shape: [1] } }], initializers: new Map(), nodes: [], valueTypes: new Map() }
        const inits = ts.map(({ dtype, n, raw: bytesOf, pad }, k) => {
          const data = allocate(dtype, n)
          new Uint8Array(data.buffer).set(bytesOf)
          const tp = encodeTensor(tensor(dtype, [n], data), `t${"_".repeat(pad)}${k}`)
          const raw = toBinary(TensorProtoSchema, create(TensorProtoSchema, { rawData: tp.rawData }))
          const rest = toBinary(TensorProtoSchema, create(TensorProtoSchema, { name: tp.name, dims: tp.dims, dataType: tp.dataType }))
          // raw_data last in every other tensor (as Tessera writes it), first in the next: its bytes right behind the other's
          return field(5, Uint8Array.from(k % 2 ? [...raw, ...rest] : [...rest, ...raw]))
        })
        const extra = field(7, Uint8Array.from(inits.flatMap((b) => [...b])))
        const bytes = Uint8Array.from([...encodeOnnx(g), ...extra])
        const want = decodeModelSync(bytes.slice())
        const got = decodeModelSync(bytes.slice(), { adoptBytes: true })
        ts.forEach(({ raw }, k) => {
          const name = [...want.initializers.keys()][k]
          const w = want.initializers.get(name)!.data
          expect(Buffer.compare(Buffer.from(w.buffer, w.byteOffset, w.byteLength), Buffer.from(raw))).toBe(0)
          sameBits(got.initializers.get(name)!, want.initializers.get(name)!)
        })
      }),
      lawParams(200),
    )
  })
})
