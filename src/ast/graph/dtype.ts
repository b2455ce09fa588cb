// Element types of the graph IR and their storage.
//
// Storage is chosen so kernels can read and write plain JS numbers:
// - float16 / bfloat16 are held in a Float32Array whose values are always rounded to the
//   narrow type (the evaluator rounds every kernel output of those types);
// - int64 / uint64 are held in a Float64Array of the values — and where some value is not a double
//   (2^53 + 1, 2^63 - 1), a tensor carries its exact values beside it (Tensor.exact, see int64.ts);
//   the interpreter computes them exactly (ops/exact-int64.ts). The c target stores int64 as
//   int64_t and uint64 as uint64_t (its device hands those buffers as BigInt64Arrays /
//   BigUint64Arrays: the `cArray` column); the js and wasm devices do the same (`bigArray`).
// - bool is a Uint8Array of 0/1.

export const DTYPES = [
  "float32",
  "float64",
  "float16",
  "bfloat16",
  "int8",
  "int16",
  "int32",
  "int64",
  "uint8",
  "uint16",
  "uint32",
  "uint64",
  "bool",
] as const
export type DType = (typeof DTYPES)[number]

export type TypedArray =
  | Float32Array
  | Float64Array
  | Int8Array
  | Int16Array
  | Int32Array
  | Uint8Array
  | Uint16Array
  | Uint32Array

type ArrayCtor = { new (n: number): TypedArray; new (src: ArrayLike<number>): TypedArray; new (buffer: ArrayBufferLike, byteOffset: number, length: number): TypedArray; readonly BYTES_PER_ELEMENT: number; readonly name: string }

/** A wasm load / store of a storage element, its natural alignment (log2) and the class its value computes in. */
export interface WasmStorage {
  readonly vclass: "i32" | "i64" | "f32" | "f64"
  readonly load: "f32.load" | "f64.load" | "i32.load" | "i64.load" | "i32.load16_s" | "i32.load16_u" | "i32.load8_s" | "i32.load8_u"
  readonly store: "f32.store" | "f64.store" | "i32.store" | "i64.store" | "i32.store16" | "i32.store8"
  readonly align: number
}

/** Everything each stage needs to know about a dtype's storage, in one row per dtype. */
export interface DTypeInfo {
  /** Bytes per element in ONNX / numpy (not our storage). */
  readonly bytes: number
  /** ONNX TensorProto.DataType. */
  readonly onnx: number
  /** The typed array our storage uses (float16 / bfloat16 as rounded float32, int64 / uint64 as double; the devices of c, js and wasm hold them as BigInt arrays: `bigArray`). */
  readonly array: ArrayCtor
  /** The C type of the c target's buffers and the FFI's pointers (our storage's, but int64's and uint64's: int64_t, uint64_t). */
  readonly c: "float" | "double" | "int8_t" | "int16_t" | "int32_t" | "int64_t" | "uint8_t" | "uint16_t" | "uint32_t" | "uint64_t"
  /** The wasm target's access to that storage. */
  readonly wasm: WasmStorage
}

const F32: WasmStorage = { vclass: "f32", load: "f32.load", store: "f32.store", align: 2 }
const F64: WasmStorage = { vclass: "f64", load: "f64.load", store: "f64.store", align: 3 }
/** int64 / uint64 in wasm memory: their exact 64 bits (the wasm device's BigInt64Array / BigUint64Array views). */
const I64: WasmStorage = { vclass: "i64", load: "i64.load", store: "i64.store", align: 3 }

export const DTYPE_INFO: { readonly [D in DType]: DTypeInfo } = {
  float32: { bytes: 4, onnx: 1, array: Float32Array, c: "float", wasm: F32 },
  float64: { bytes: 8, onnx: 11, array: Float64Array, c: "double", wasm: F64 },
  float16: { bytes: 2, onnx: 10, array: Float32Array, c: "float", wasm: F32 },
  bfloat16: { bytes: 2, onnx: 16, array: Float32Array, c: "float", wasm: F32 },
  int8: { bytes: 1, onnx: 3, array: Int8Array, c: "int8_t", wasm: { vclass: "i32", load: "i32.load8_s", store: "i32.store8", align: 0 } },
  int16: { bytes: 2, onnx: 5, array: Int16Array, c: "int16_t", wasm: { vclass: "i32", load: "i32.load16_s", store: "i32.store16", align: 1 } },
  int32: { bytes: 4, onnx: 6, array: Int32Array, c: "int32_t", wasm: { vclass: "i32", load: "i32.load", store: "i32.store", align: 2 } },
  int64: { bytes: 8, onnx: 7, array: Float64Array, c: "int64_t", wasm: I64 },
  uint8: { bytes: 1, onnx: 2, array: Uint8Array, c: "uint8_t", wasm: { vclass: "i32", load: "i32.load8_u", store: "i32.store8", align: 0 } },
  uint16: { bytes: 2, onnx: 4, array: Uint16Array, c: "uint16_t", wasm: { vclass: "i32", load: "i32.load16_u", store: "i32.store16", align: 1 } },
  uint32: { bytes: 4, onnx: 12, array: Uint32Array, c: "uint32_t", wasm: { vclass: "i32", load: "i32.load", store: "i32.store", align: 2 } },
  uint64: { bytes: 8, onnx: 13, array: Float64Array, c: "uint64_t", wasm: I64 },
  bool: { bytes: 1, onnx: 9, array: Uint8Array, c: "uint8_t", wasm: { vclass: "i32", load: "i32.load8_u", store: "i32.store8", align: 0 } },
}

const column = <K extends keyof DTypeInfo>(k: K): { readonly [D in DType]: DTypeInfo[K] } =>
  Object.fromEntries(DTYPES.map((d) => [d, DTYPE_INFO[d][k]])) as { readonly [D in DType]: DTypeInfo[K] }

/** Bytes per element in ONNX / numpy (not our storage). */
export const BYTES: { readonly [D in DType]: number } = column("bytes")

/** Bytes per element of our storage (float16 takes 4: it is held as float32). */
export const storageBytes = (d: DType): number => DTYPE_INFO[d].array.BYTES_PER_ELEMENT

export const isFloat = (d: DType): boolean =>
  d === "float32" || d === "float64" || d === "float16" || d === "bfloat16"
export const isInteger = (d: DType): boolean => !isFloat(d) && d !== "bool"
export const isSigned = (d: DType): boolean =>
  isFloat(d) || d === "int8" || d === "int16" || d === "int32" || d === "int64"

export const allocate = (dtype: DType, n: number): TypedArray => new DTYPE_INFO[dtype].array(n)

/** A device buffer's host array: our storage, or (int64_t / uint64_t buffers) a BigInt64Array / BigUint64Array. */
export type DeviceArray = TypedArray | BigInt64Array | BigUint64Array

/** Whether a device array holds BigInts (an int64_t or uint64_t buffer). */
export const isBigArray = (a: unknown): a is BigInt64Array | BigUint64Array => a instanceof BigInt64Array || a instanceof BigUint64Array

type DeviceArrayCtor = { new (n: number): DeviceArray; new (buffer: ArrayBuffer, offset: number, length: number): DeviceArray; readonly name: string }

/** The array a device's buffers of `d` are where 64-bit integers are exact (c, js, wasm): int64 a BigInt64Array, uint64 a BigUint64Array, the rest our storage. */
export const bigArray = (d: DType): DeviceArrayCtor =>
  (d === "int64" ? BigInt64Array : d === "uint64" ? BigUint64Array : DTYPE_INFO[d].array) as unknown as DeviceArrayCtor

/** The array the c device's buffers of `d` are: int64 as int64_t, uint64 as uint64_t (every value exact), the rest our storage. */
export const cArray = bigArray

/** Copies `src` into fresh storage for `dtype`, converting each value as ONNX Cast does. */
export const fromNumbers = (dtype: DType, src: ArrayLike<number>): TypedArray => {
  const out = allocate(dtype, src.length)
  const conv = converter(dtype)
  for (let i = 0; i < src.length; i++) out[i] = conv(src[i])
  return out
}

const f32 = new Float32Array(1)
const u32 = new Uint32Array(f32.buffer)

/** Rounds a number to the nearest float16 value (round half to even), as a JS number. */
export const roundF16 = (x: number): number => f16BitsToNumber(numberToF16Bits(x))

/** Rounds a number to the nearest bfloat16 value (round half to even). */
export const roundBF16 = (x: number): number => {
  if (Number.isNaN(x)) return x
  f32[0] = x
  const bits = u32[0]
  const rounded = (bits + 0x7fff + ((bits >>> 16) & 1)) & 0xffff0000
  u32[0] = rounded >>> 0
  return f32[0]
}

/** float16 bits → number. */
export const f16BitsToNumber = (h: number): number => {
  const s = h & 0x8000 ? -1 : 1
  const e = (h >> 10) & 0x1f
  const m = h & 0x3ff
  if (e === 0) return s * m * Math.pow(2, -24)
  if (e === 31) return m ? NaN : s * Infinity
  return s * (1 + m / 1024) * Math.pow(2, e - 15)
}

/** number → float16 bits (through float32, round half to even). */
export const numberToF16Bits = (x: number): number => {
  f32[0] = x
  const b = u32[0]
  const sign = (b >>> 16) & 0x8000
  let e = (b >>> 23) & 0xff
  const m = b & 0x7fffff
  if (e === 255) return sign | 0x7c00 | (m ? 0x200 : 0)
  e = e - 127 + 15
  if (e >= 31) return sign | 0x7c00
  if (e <= 0) {
    if (e < -10) return sign
    const full = m | 0x800000
    const shift = 14 - e
    let hm = full >>> shift
    const rem = full & ((1 << shift) - 1)
    const half = 1 << (shift - 1)
    if (rem > half || (rem === half && hm & 1)) hm++
    return sign | hm
  }
  let hm = m >>> 13
  const rem = m & 0x1fff
  if (rem > 0x1000 || (rem === 0x1000 && hm & 1)) {
    hm++
    if (hm === 0x400) {
      hm = 0
      e++
      if (e >= 31) return sign | 0x7c00
    }
  }
  return sign | (e << 10) | hm
}

export const bf16BitsToNumber = (h: number): number => {
  u32[0] = (h & 0xffff) << 16
  return f32[0]
}
export const numberToBF16Bits = (x: number): number => {
  f32[0] = roundBF16(x)
  return u32[0] >>> 16
}

const wrapInt = (bits: number, signed: boolean) => (x: number): number => {
  if (!Number.isFinite(x)) return 0
  const t = Math.trunc(x)
  const m = Math.pow(2, bits)
  let r = ((t % m) + m) % m
  if (signed && r >= m / 2) r -= m
  return r
}

/**
 * The conversion ONNX Cast applies when a number is stored in `dtype`: floats round to the
 * narrow type, integers truncate toward zero and wrap, bool is x != 0.
 */
export const converter = (dtype: DType): ((x: number) => number) => {
  switch (dtype) {
    case "float32":
      return Math.fround
    case "float64":
      return (x) => x
    case "float16":
      return roundF16
    case "bfloat16":
      return roundBF16
    case "bool":
      return (x) => (x !== 0 ? 1 : 0)
    case "int8":
      return wrapInt(8, true)
    case "int16":
      return wrapInt(16, true)
    case "int32":
      return wrapInt(32, true)
    case "uint8":
      return wrapInt(8, false)
    case "uint16":
      return wrapInt(16, false)
    case "uint32":
      return wrapInt(32, false)
    // truncate, wrap modulo 2^64 (as C's and the c target's int64_t), NaN/Inf → 0, never -0
    case "int64":
      return (x) => (x >= -(2 ** 63) && x < 2 ** 63 ? Math.trunc(x) + 0 : Number.isFinite(x) ? Number(BigInt.asIntN(64, BigInt(Math.trunc(x)))) : 0)
    case "uint64":
      return (x) => (x > -1 && x < 2 ** 64 ? Math.trunc(x) + 0 : Number.isFinite(x) ? Number(BigInt.asUintN(64, BigInt(Math.trunc(x)))) : 0)
  }
}

/** ONNX TensorProto.DataType numbering → dtype. */
export const ONNX_DTYPE: { readonly [code: number]: DType } = Object.fromEntries(DTYPES.map((d) => [DTYPE_INFO[d].onnx, d]))
export const ONNX_DTYPE_NAME: { readonly [code: number]: string } = {
  0: "undefined",
  8: "string",
  14: "complex64",
  15: "complex128",
  17: "float8e4m3fn",
  18: "float8e4m3fnuz",
  19: "float8e5m2",
  20: "float8e5m2fnuz",
  21: "uint4",
  22: "int4",
  23: "float4e2m1",
  24: "float8e8m0",
  25: "uint2",
  26: "int2",
}
/** dtype → ONNX TensorProto.DataType. */
export const DTYPE_ONNX: { readonly [D in DType]: number } = column("onnx")
