// .npy reading and writing, checked against bytes written by NumPy 2.4 (np.save / write_array).
import { fc, test as fcTest } from "@fast-check/vitest"
import { describe, expect, it } from "vitest"
import { DTYPES, type DType } from "../src/ast/graph/dtype.js"
import { fromArray, type Tensor } from "../src/ast/graph/tensor.js"
import { NpyError, parseNpy, serializeNpy } from "../src/device/npy.js"

const b64 = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, "base64"))

// Each: the array NumPy saved, and what it holds.
const NUMPY: Record<string, { bytes: string; dtype: DType; shape: number[]; values: number[] }> = {
  f4: {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnPGY0JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsIDMpLCB9ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAMA/AAAAwAAAQEAAAIBAAACgQAAAyEA=",
    dtype: "float32", shape: [2, 3], values: [1.5, -2, 3, 4, 5, 6.25],
  },
  f8: {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnPGY4JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDMsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAqamZmZmZm5P5x1AIg85Df+AAAAAAAA8H8=",
    dtype: "float64", shape: [3], values: [0.1, -1e300, Infinity],
  },
  f2: {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnPGYyJywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDQsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAPAA4//sBAA==",
    dtype: "float16", shape: [4], values: [1, 0.5, -65504, 5.960464477539063e-8],
  },
  i1: {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnfGkxJywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDMsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAqAAH8=",
    dtype: "int8", shape: [3], values: [-128, 0, 127],
  },
  i2: {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnPGkyJywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDMsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAgAEA/38=",
    dtype: "int16", shape: [3], values: [-32768, 1, 32767],
  },
  i4: {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnPGk0JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsIDEpLCB9ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAACA////fw==",
    dtype: "int32", shape: [2, 1], values: [-2147483648, 2147483647],
  },
  i8: {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnPGk4JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDQsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAr//////////wAAAAAAACAA/f/////+//8HAAAAAAAAAA==",
    dtype: "int64", shape: [4], values: [-1, 2 ** 53, -(2 ** 40) - 3, 7],
  },
  u1: {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnfHUxJywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoA/w==",
    dtype: "uint8", shape: [2], values: [0, 255],
  },
  u2: {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnPHUyJywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAP//",
    dtype: "uint16", shape: [2], values: [0, 65535],
  },
  u4: {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnPHU0JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAAAA/////w==",
    dtype: "uint32", shape: [2], values: [0, 4294967295],
  },
  u8: {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnPHU4JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDMsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAAAAAAAAAAAAAAAAACAAAQAAAAEAAAA=",
    dtype: "uint64", shape: [3], values: [0, 2 ** 53, 2 ** 32 + 1],
  },
  b1: {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnfGIxJywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDMsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoBAAE=",
    dtype: "bool", shape: [3], values: [1, 0, 1],
  },
  scalar: {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnPGY0JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKCksIH0gICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAGBA",
    dtype: "float32", shape: [], values: [3.5],
  },
  empty: {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnPGY0JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsIDAsIDMpLCB9ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAo=",
    dtype: "float32", shape: [2, 0, 3], values: [],
  },
}

// NumPy writes these too, but not the way we write them back (we write little-endian 1.0).
const NUMPY_OTHER: Record<string, { bytes: string; dtype: DType; shape: number[]; values: number[] }> = {
  "big-endian f4": {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnPmY0JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAo/wAAAwAAAAA==",
    dtype: "float32", shape: [2], values: [1.5, -2],
  },
  "big-endian i8": {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnPmk4JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAr//////////wAAAAAAAAEs",
    dtype: "int64", shape: [2], values: [-1, 300],
  },
  "version 2.0": {
    bytes: "k05VTVBZAgB0AAAAeydkZXNjcic6ICc8aTQnLCAnZm9ydHJhbl9vcmRlcic6IEZhbHNlLCAnc2hhcGUnOiAoMiwpLCB9ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoBAAAAAgAAAA==",
    dtype: "int32", shape: [2], values: [1, 2],
  },
  "version 3.0": {
    bytes: "k05VTVBZAwB0AAAAeydkZXNjcic6ICc8aTQnLCAnZm9ydHJhbl9vcmRlcic6IEZhbHNlLCAnc2hhcGUnOiAoMiwpLCB9ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoBAAAAAgAAAA==",
    dtype: "int32", shape: [2], values: [1, 2],
  },
}

// Arrays NumPy writes that we refuse, with what the message must say.
const REFUSED: Record<string, { bytes: string; says: RegExp }> = {
  "Fortran order": {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnPGY0JywgJ2ZvcnRyYW5fb3JkZXInOiBUcnVlLCAnc2hhcGUnOiAoMiwgMyksIH0gICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAAAAAABAQAAAgD8AAIBAAAAAQAAAoEA=",
    says: /Fortran order.*C order/,
  },
  "unicode strings": {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnPFUyJywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAphAAAAYgAAAGMAAAAAAAAA",
    says: /'<U2' holds unicode strings/,
  },
  complex: {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiAnPGM4JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDEsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAIA/AAAAQA==",
    says: /complex numbers/,
  },
  structured: {
    bytes: "k05VTVBZAQB2AHsnZGVzY3InOiBbKCdhJywgJzxpNCcpLCAoJ2InLCAnPGY0JyldLCAnZm9ydHJhbl9vcmRlcic6IEZhbHNlLCAnc2hhcGUnOiAoMiwpLCB9ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAAAAAAAAAAAAAAAAAAAA",
    says: /structured dtypes/,
  },
}

const npyError = (f: () => unknown): NpyError => {
  try {
    f()
  } catch (e) {
    expect(e).toBeInstanceOf(NpyError)
    expect((e as NpyError)._tag).toBe("NpyError")
    return e as NpyError
  }
  throw new Error("expected an NpyError")
}

describe("parseNpy reads what NumPy writes", () => {
  for (const [name, c] of Object.entries({ ...NUMPY, ...NUMPY_OTHER }))
    it(name, () => {
      const t = parseNpy(b64(c.bytes))
      expect(t.dtype).toBe(c.dtype)
      expect(t.shape).toEqual(c.shape)
      expect(Array.from(t.data)).toEqual(c.values)
    })
})

describe("serializeNpy writes what NumPy writes, byte for byte", () => {
  for (const [name, c] of Object.entries(NUMPY))
    it(name, () => {
      const t = fromArray(c.dtype, c.shape, c.values)
      expect(Buffer.from(serializeNpy(t)).toString("base64")).toBe(c.bytes)
    })
})

describe("parseNpy refuses with a reason", () => {
  for (const [name, c] of Object.entries(REFUSED)) it(name, () => expect(npyError(() => parseNpy(b64(c.bytes))).message).toMatch(c.says))

  const good = b64(NUMPY.f4.bytes)
  it("not a .npy file", () => expect(npyError(() => parseNpy(new TextEncoder().encode("hello, world"))).message).toMatch(/not a \.npy file/))
  it("empty bytes", () => expect(npyError(() => parseNpy(new Uint8Array(0))).message).toMatch(/not a \.npy file/))
  it("truncated data", () => expect(npyError(() => parseNpy(good.subarray(0, good.length - 3))).message).toMatch(/truncated/))
  it("truncated header", () => expect(npyError(() => parseNpy(good.subarray(0, 40))).message).toMatch(/truncated/))
  it("trailing bytes", () => expect(npyError(() => parseNpy(new Uint8Array([...good, 0, 0]))).message).toMatch(/2 bytes after/))
  it("unknown version", () => {
    const b = good.slice()
    b[6] = 9
    expect(npyError(() => parseNpy(b)).message).toMatch(/version 9\.0/)
  })
  const withHeader = (dict: string, data = new Uint8Array(0)): Uint8Array => {
    const text = dict + " ".repeat(64 - ((10 + dict.length + 1) % 64)) + "\n"
    const out = new Uint8Array(10 + text.length + data.length)
    out.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0])
    new DataView(out.buffer).setUint16(8, text.length, true)
    out.set(new TextEncoder().encode(text), 10)
    out.set(data, 10 + text.length)
    return out
  }
  it("negative dim", () =>
    expect(npyError(() => parseNpy(withHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }"))).message).toMatch(/dim 1 is negative/))
  it("overflowing shape (checked before allocating)", () =>
    expect(npyError(() => parseNpy(withHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000), }"))).message).toMatch(/more than/))
  it("huge dim", () =>
    expect(npyError(() => parseNpy(withHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"))).message).toMatch(/dim 0/))
  it("Python objects", () =>
    expect(npyError(() => parseNpy(withHeader("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }"))).message).toMatch(/'\|O' holds Python objects/))
  it("missing key", () => expect(npyError(() => parseNpy(withHeader("{'descr': '<f4', 'shape': (2,), }"))).message).toMatch(/no 'fortran_order'/))
  it("garbled header", () => expect(npyError(() => parseNpy(withHeader("{'descr': '<f4', 'fortran_order': Fals"))).message).toMatch(/header/))
  it("unknown dtype", () => expect(npyError(() => parseNpy(withHeader("{'descr': '<f3', 'fortran_order': False, 'shape': (), }"))).message).toMatch(/'<f3'/))
  it("reads Python 2 long dims and double quotes", () => {
    const t = parseNpy(withHeader(`{"descr": "<i2", "fortran_order": False, "shape": (2L,)}`, new Uint8Array([1, 0, 2, 0])))
    expect(t.shape).toEqual([2])
    expect(Array.from(t.data)).toEqual([1, 2])
  })
})

describe("round trip", () => {
  it("bfloat16 is written as float32 (exact)", () => {
    const t = fromArray("bfloat16", [3], [1, -2.5, 3.140625])
    const back = parseNpy(serializeNpy(t))
    expect(back.dtype).toBe("float32")
    expect(Array.from(back.data)).toEqual(Array.from(t.data))
  })
  it("int64/uint64 out of range wrap as a C cast does", () => {
    expect(Array.from(parseNpy(serializeNpy(fromArray("uint64", [1], [-1]))).data)).toEqual([2 ** 64])
    expect(Array.from(parseNpy(serializeNpy(fromArray("int64", [2], [2 ** 63, -(2 ** 63)]))).data)).toEqual([-(2 ** 63), -(2 ** 63)])
  })
  it("a header too long for version 1.0 is written as 2.0", () => {
    const t = fromArray("uint8", new Array(30000).fill(1), [1])
    const bytes = serializeNpy(t)
    expect(bytes[6]).toBe(2)
    expect(parseNpy(bytes).shape).toEqual(t.shape)
  })

  const arbTensor: fc.Arbitrary<Tensor> = fc
    .tuple(fc.constantFrom(...DTYPES.filter((d) => d !== "bfloat16")), fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 4 }))
    .chain(([dtype, shape]) => {
      const n = shape.reduce((a, b) => a * b, 1)
      return fc.array(fc.double({ min: -1e6, max: 1e6, noNaN: true }), { minLength: n, maxLength: n }).map((v) => fromArray(dtype, shape, dtype === "uint64" ? v.map(Math.abs) : v))
    })
  fcTest.prop([arbTensor], { seed: 42, numRuns: 300 })("parseNpy ∘ serializeNpy = id", (t) => {
    const back = parseNpy(serializeNpy(t))
    expect(back.dtype).toBe(t.dtype)
    expect(back.shape).toEqual(t.shape)
    const plain = (xs: ArrayLike<number>) => Array.from(xs, (x) => (x === 0 ? 0 : x)) // -0 and 0 are one integer
    expect(plain(back.data)).toEqual(plain(t.data))
    const bytes = serializeNpy(t)
    const headerLen = bytes.length - back.data.length * (back.dtype === "bool" || back.dtype.endsWith("8") ? 1 : Number(/\d+$/.exec(back.dtype)![0]) / 8)
    expect(headerLen % 64).toBe(0)
  })
})
