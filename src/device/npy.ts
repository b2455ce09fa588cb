// NumPy .npy bytes ⇄ Tensor (format versions 1.0, 2.0 and 3.0). Pure: no I/O.
//
// The format: magic "\x93NUMPY", major and minor version bytes, the header length (uint16 LE
// for 1.0, uint32 LE for 2.0/3.0), a Python dict literal
// `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` padded with spaces to a
// 64-byte boundary and ended by '\n', then the data. We read C-order arrays of every dtype the
// graph IR has (either byte order), and write little-endian version 1.0 (2.0 when the header
// does not fit). bfloat16 has no NumPy dtype: it is written as float32, which holds it exactly.
import { Data } from "effect"
import {
  allocate,
  converter,
  f16BitsToNumber,
  numberToF16Bits,
  type DType,
  type TypedArray,
} from "../ast/graph/dtype.js"
import { exactValues, wideTensor, type Tensor } from "../ast/graph/tensor.js"
import { allocateBig, isWide } from "../ast/graph/int64.js"

/** Bytes that are not a .npy array we can read (or a tensor we cannot write as one). */
export class NpyError extends Data.TaggedError("NpyError")<{
  /** Which array: a file path, or "bytes". */
  readonly where: string
  readonly reason: string
}> {
  override get message(): string {
    return `cannot read .npy ${this.where}: ${this.reason}`
  }
}

/** The largest array we agree to materialise (elements), as for ONNX tensors. */
export const MAX_NPY_ELEMENTS = 2 ** 31 - 1

const MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59] // \x93NUMPY

/** NumPy type code (kind + width, without byte order) per dtype. */
const CODE: { readonly [D in DType]: string } = {
  float32: "f4",
  float64: "f8",
  float16: "f2",
  bfloat16: "f4", // written as float32 (exact); there is no NumPy bfloat16
  int8: "i1",
  int16: "i2",
  int32: "i4",
  int64: "i8",
  uint8: "u1",
  uint16: "u2",
  uint32: "u4",
  uint64: "u8",
  bool: "b1",
}

const FROM_CODE: { readonly [code: string]: DType } = {
  f4: "float32",
  f8: "float64",
  f2: "float16",
  i1: "int8",
  i2: "int16",
  i4: "int32",
  i8: "int64",
  u1: "uint8",
  u2: "uint16",
  u4: "uint32",
  u8: "uint64",
  b1: "bool",
}

const KIND_NAMES: { readonly [kind: string]: string } = {
  U: "unicode strings",
  S: "byte strings",
  a: "byte strings",
  O: "Python objects",
  V: "raw void / structured records",
  c: "complex numbers",
  M: "datetimes",
  m: "timedeltas",
}

// ---------------------------------------------------------------------------------------------
// The header: a small reader for the Python literals NumPy writes (dict, str, bool, int, tuple).

type PyValue = string | number | boolean | null | readonly PyValue[] | { readonly [k: string]: PyValue }

const parseHeader = (text: string, fail: (reason: string) => never): { readonly [k: string]: PyValue } => {
  let i = 0
  const ws = () => {
    while (i < text.length && /\s/.test(text[i])) i++
  }
  const value = (): PyValue => {
    ws()
    const c = text[i]
    if (c === "{") {
      i++
      const out: Record<string, PyValue> = {}
      for (;;) {
        ws()
        if (text[i] === "}") {
          i++
          return out
        }
        const k = value()
        if (typeof k !== "string") fail("header dict keys must be strings")
        ws()
        if (text[i] !== ":") fail(`expected ':' at header offset ${i}`)
        i++
        out[k] = value()
        ws()
        if (text[i] === ",") i++
        else if (text[i] !== "}") fail(`expected ',' or '}' at header offset ${i}`)
      }
    }
    if (c === "(" || c === "[") {
      const close = c === "(" ? ")" : "]"
      i++
      const out: PyValue[] = []
      for (;;) {
        ws()
        if (text[i] === close) {
          i++
          return out
        }
        out.push(value())
        ws()
        if (text[i] === ",") i++
        else if (text[i] !== close) fail(`expected ',' or '${close}' at header offset ${i}`)
      }
    }
    if (c === "'" || c === '"') {
      const end = text.indexOf(c, i + 1)
      if (end < 0) fail("unterminated string in header")
      const s = text.slice(i + 1, end)
      i = end + 1
      return s
    }
    const m = /^(True|False|None|-?\d+L?)/.exec(text.slice(i, i + 40))
    if (!m) fail(`unexpected character ${JSON.stringify(c ?? "end of header")} at header offset ${i}`)
    i += m[0].length
    if (m[0] === "True") return true
    if (m[0] === "False") return false
    if (m[0] === "None") return null
    return Number(m[0].replace("L", ""))
  }
  const v = value()
  ws()
  if (i !== text.length) fail(`unexpected text after the header dict at offset ${i}`)
  if (typeof v !== "object" || v === null || Array.isArray(v)) fail("the header is not a dict")
  return v as { readonly [k: string]: PyValue }
}

interface Descr {
  readonly dtype: DType
  readonly little: boolean
  readonly width: number
}

const parseDescr = (descr: PyValue, fail: (reason: string) => never): Descr => {
  if (typeof descr !== "string") fail("structured dtypes (a list 'descr') are not supported; save a plain numeric array")
  const m = /^([<>|=]?)([a-zA-Z])(\d+)$/.exec(descr)
  if (!m) {
    const kind = /^[<>|=]?([a-zA-Z])/.exec(descr)?.[1]
    fail(kind && KIND_NAMES[kind] ? `dtype '${descr}' holds ${KIND_NAMES[kind]}; only numeric and bool arrays are supported` : `unknown dtype '${descr}'`)
  }
  const [, order, kind, width] = m
  const dtype = FROM_CODE[`${kind}${width}`]
  if (!dtype)
    fail(KIND_NAMES[kind] ? `dtype '${descr}' holds ${KIND_NAMES[kind]}; only numeric and bool arrays are supported` : `unsupported dtype '${descr}'`)
  return { dtype, little: order !== ">", width: Number(width) }
}

const parseShape = (shape: PyValue, fail: (reason: string) => never): number[] => {
  if (!Array.isArray(shape)) fail("'shape' is not a tuple")
  const dims = (shape as readonly PyValue[]).map((d, k) => {
    if (typeof d !== "number" || !Number.isSafeInteger(d)) fail(`dim ${k} is not an integer`)
    if (d < 0) fail(`dim ${k} is negative (${d})`)
    if (d > MAX_NPY_ELEMENTS) fail(`dim ${k} is too large (${d})`)
    return d
  })
  let n = 1
  for (const d of dims) {
    n *= d
    if (n > MAX_NPY_ELEMENTS) fail(`has more than ${MAX_NPY_ELEMENTS} elements (shape (${dims.join(", ")}))`)
  }
  return dims
}

// ---------------------------------------------------------------------------------------------
// Data

const readData = (d: Descr, bytes: Uint8Array, n: number): TypedArray => {
  const { dtype, little, width } = d
  const out = allocate(dtype, n)
  // Same layout as our storage (little-endian, same width): one copy into aligned storage.
  const sameLayout = little && dtype !== "bool" && dtype !== "float16" && dtype !== "int64" && dtype !== "uint64"
  if (sameLayout) {
    new Uint8Array(out.buffer, out.byteOffset, n * width).set(bytes.subarray(0, n * width))
    return out
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, n * width)
  switch (dtype) {
    case "bool":
      for (let i = 0; i < n; i++) out[i] = bytes[i] !== 0 ? 1 : 0
      break
    case "float16":
      for (let i = 0; i < n; i++) out[i] = f16BitsToNumber(view.getUint16(i * 2, little))
      break
    case "float32":
      for (let i = 0; i < n; i++) out[i] = view.getFloat32(i * 4, little)
      break
    case "float64":
      for (let i = 0; i < n; i++) out[i] = view.getFloat64(i * 8, little)
      break
    case "int16":
      for (let i = 0; i < n; i++) out[i] = view.getInt16(i * 2, little)
      break
    case "uint16":
      for (let i = 0; i < n; i++) out[i] = view.getUint16(i * 2, little)
      break
    case "int32":
      for (let i = 0; i < n; i++) out[i] = view.getInt32(i * 4, little)
      break
    case "uint32":
      for (let i = 0; i < n; i++) out[i] = view.getUint32(i * 4, little)
      break
    case "int64":
    case "uint64":
      throw new Error("unreachable: int64 / uint64 are read by readWide")
    case "int8":
    case "uint8":
      out.set(dtype === "int8" ? new Int8Array(bytes.buffer, bytes.byteOffset, n) : bytes.subarray(0, n))
      break
    case "bfloat16":
      throw new Error("unreachable: no .npy descr maps to bfloat16")
  }
  return out
}

/** int64 / uint64, exactly (their `exact` beside the doubles where some value is not a double). */
const readWide = (dtype: "int64" | "uint64", little: boolean, bytes: Uint8Array, n: number, shape: readonly number[]): Tensor => {
  const out = allocateBig(dtype, n)
  const view = new DataView(bytes.buffer, bytes.byteOffset, n * 8)
  for (let i = 0; i < n; i++) out[i] = dtype === "int64" ? view.getBigInt64(i * 8, little) : view.getBigUint64(i * 8, little)
  return wideTensor(dtype, shape, out)
}

/** Parses .npy bytes into a Tensor; throws NpyError saying what is wrong. */
export const parseNpy = (bytes: Uint8Array, where = "bytes"): Tensor => {
  const fail = (reason: string): never => {
    throw new NpyError({ where, reason })
  }
  if (bytes.length < 10 || MAGIC.some((b, k) => bytes[k] !== b))
    fail("not a .npy file (no \\x93NUMPY magic)")
  const major = bytes[6]
  const minor = bytes[7]
  if (major < 1 || major > 3 || minor !== 0) fail(`unsupported .npy format version ${major}.${minor} (1.0, 2.0 and 3.0 are read)`)
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const lenBytes = major === 1 ? 2 : 4
  if (bytes.length < 8 + lenBytes) fail("truncated before the header length")
  const headerLen = major === 1 ? view.getUint16(8, true) : view.getUint32(8, true)
  const start = 8 + lenBytes
  if (start + headerLen > bytes.length) fail(`truncated: the header says ${headerLen} bytes, the file has ${bytes.length - start} after the preamble`)
  const raw = bytes.subarray(start, start + headerLen)
  const text = new TextDecoder(major === 3 ? "utf-8" : "latin1").decode(raw).trim()
  const header = parseHeader(text, fail)
  for (const key of ["descr", "fortran_order", "shape"])
    if (!(key in header)) fail(`the header has no '${key}'`)
  const descr = parseDescr(header.descr, fail)
  if (header.fortran_order !== false) {
    if (header.fortran_order === true) fail("the array is in Fortran order; save it in C order (numpy.ascontiguousarray)")
    fail("'fortran_order' is not a bool")
  }
  const shape = parseShape(header.shape, fail)
  let n = 1
  for (const d of shape) n *= d
  const data = bytes.subarray(start + headerLen)
  const need = n * descr.width
  if (data.length < need) fail(`truncated: ${data.length} data bytes, shape (${shape.join(", ")}) of ${descr.dtype} needs ${need}`)
  if (data.length > need) fail(`${data.length - need} bytes after the array's data (shape (${shape.join(", ")}) of ${descr.dtype} needs ${need})`)
  if (isWide(descr.dtype)) return readWide(descr.dtype, descr.little, data, n, shape)
  return { dtype: descr.dtype, shape, data: readData(descr, data, n) }
}

const showShapeTuple = (shape: readonly number[]): string =>
  shape.length === 0 ? "()" : shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(", ")})`

/** The .npy header bytes (preamble included) for a little-endian C-order array. */
const headerFor = (dtype: DType, shape: readonly number[]): Uint8Array => {
  const code = CODE[dtype]
  const order = code.endsWith("1") ? "|" : "<"
  const dict = `{'descr': '${order}${code}', 'fortran_order': False, 'shape': ${showShapeTuple(shape)}, }`
  // version 1.0 unless the padded header overflows a uint16
  const v1 = 10 + dict.length + 1 <= 0xffff
  const pre = v1 ? 10 : 12
  const total = Math.ceil((pre + dict.length + 1) / 64) * 64
  const text = dict + " ".repeat(total - pre - dict.length - 1) + "\n"
  const out = new Uint8Array(total)
  out.set(MAGIC)
  out[6] = v1 ? 1 : 2
  out[7] = 0
  const view = new DataView(out.buffer)
  if (v1) view.setUint16(8, text.length, true)
  else view.setUint32(8, text.length, true)
  for (let i = 0; i < text.length; i++) out[pre + i] = text.charCodeAt(i)
  return out
}

/** Serializes a Tensor as .npy bytes (little-endian, C order). */
export const serializeNpy = (t: Tensor): Uint8Array => {
  const header = headerFor(t.dtype, t.shape)
  const n = t.data.length
  const code = CODE[t.dtype]
  const width = Number(code.slice(1))
  const out = new Uint8Array(header.length + n * width)
  out.set(header)
  const body = out.subarray(header.length)
  const view = new DataView(out.buffer, header.length)
  const d = t.data
  switch (t.dtype) {
    case "float16":
      for (let i = 0; i < n; i++) view.setUint16(i * 2, numberToF16Bits(d[i]), true)
      break
    case "bfloat16": {
      const conv = converter("float32")
      for (let i = 0; i < n; i++) view.setFloat32(i * 4, conv(d[i]), true)
      break
    }
    case "bool":
      for (let i = 0; i < n; i++) body[i] = d[i] ? 1 : 0
      break
    case "int64":
    case "uint64": {
      // the exact values (wrapped to the type as a C cast would, should a double be out of its range)
      const v = exactValues(t)
      for (let i = 0; i < n; i++)
        if (t.dtype === "int64") view.setBigInt64(i * 8, v[i], true)
        else view.setBigUint64(i * 8, v[i], true)
      break
    }
    default:
      // float32/float64/intN/uintN: storage already has the .npy layout (little-endian hosts)
      body.set(new Uint8Array(d.buffer, d.byteOffset, n * width))
  }
  return out
}
