// onnx.TensorProto ⇄ Tensor. Every storage form ONNX allows: raw_data (little endian), the typed
// repeated fields, and external data read through a callback the caller supplies (the decoder
// itself does no I/O). Sizes are checked against dims before anything is allocated, so a hostile
// dims field cannot make us allocate.
import { create } from "@bufbuild/protobuf"
import { TensorProtoSchema, type TensorProto } from "onnx-buf"
import {
  allocate,
  bf16BitsToNumber,
  BYTES,
  DTYPE_INFO,
  DTYPE_ONNX,
  f16BitsToNumber,
  numberToBF16Bits,
  numberToF16Bits,
  ONNX_DTYPE,
  ONNX_DTYPE_NAME,
  type DType,
} from "../graph/dtype.js"
import { stored, type ByteSource } from "../graph/deferred.js"
import { allocateBig, isWide, wrapWide } from "../graph/int64.js"
import { LIMITS } from "../graph/limits.js"
import { exactValues, wideTensor, type Tensor } from "../graph/tensor.js"
import { DecodeError, UnsupportedModelError } from "./errors.js"

/** Reads `length` bytes (or to the end) at `offset` of an external data file named by `location`. */
export type ExternalReader = (location: string, offset: number, length: number | undefined) => Uint8Array

/** Raw data a reader left out of the model's bytes (DecodeOptions.unread): how to read it, for a raw_data view; undefined for raw data that is there. */
export type UnreadRaw = (raw: Uint8Array) => ByteSource | undefined

/** The largest tensor we agree to materialise (elements). */
export const MAX_ELEMENTS = LIMITS.tensorElements

const dimsOf = (tp: TensorProto, where: string): number[] =>
  tp.dims.map((d, k) => {
    if (d < 0n) throw new DecodeError({ where, reason: `dim ${k} is negative (${d})` })
    if (d > BigInt(MAX_ELEMENTS)) throw new DecodeError({ where, reason: `dim ${k} is too large (${d})` })
    return Number(d)
  })

const countOf = (dims: readonly number[], where: string): number => {
  let n = 1
  for (const d of dims) {
    n *= d
    if (n > MAX_ELEMENTS) throw new DecodeError({ where, reason: `has more than ${MAX_ELEMENTS} elements (dims [${dims.join(", ")}])` })
  }
  return n
}

/** A safe relative location inside the model's folder, or a DecodeError. */
export const checkExternalLocation = (location: string, where: string): string => {
  const parts = location.split(/[\\/]+/)
  if (location === "" || location.startsWith("/") || location.startsWith("\\") || /^[A-Za-z]:/.test(location) || parts.includes(".."))
    throw new DecodeError({ where, reason: `external data location '${location}' leaves the model's folder; only paths inside it are allowed` })
  if (location.includes("\0")) throw new DecodeError({ where, reason: "external data location contains a NUL byte" })
  return location
}

/** Whether this host lays numbers out little-endian, as raw_data holds them (a fact of the host, the same on every call). */
const LITTLE_ENDIAN = new Uint8Array(Uint32Array.of(1).buffer)[0] === 1

/** The dtypes whose array holds each element as raw_data does (same width, same encoding): their raw bytes are the array's. */
const SAME_BYTES: ReadonlySet<DType> = new Set(["float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32"])

const readRaw = (dtype: DType, code: number, bytes: Uint8Array, n: number, where: string, views: boolean): Tensor["data"] => {
  const width = BYTES[dtype]
  if (bytes.length !== n * width)
    throw new DecodeError({ where, reason: `raw data has ${bytes.length} bytes, ${n} ${dtype} elements need ${n * width}` })
  void code
  if (!LITTLE_ENDIAN || !SAME_BYTES.has(dtype)) return readRawByElement(dtype, bytes, n)
  return views && bytes.byteOffset % width === 0 ? viewRaw(dtype, bytes, n) : copyRaw(dtype, bytes, n)
}

/**
 * Raw bytes as `dtype`'s array without a copy: a view onto them (they start at a multiple of the
 * element's width; the caller has checked that they hold exactly n elements). The tensor then
 * aliases the bytes, so only for bytes nobody writes afterwards (DecodeOptions.adoptBytes).
 */
const viewRaw = (dtype: DType, bytes: Uint8Array, n: number): Tensor["data"] => new DTYPE_INFO[dtype].array(bytes.buffer, bytes.byteOffset, n)

/** Copies `length` bytes of `buffer` from offset `from` to `to` (they may overlap): DecodeOptions.moveBytes. */
export type ByteMove = (buffer: Uint8Array, to: number, from: number, length: number) => void

const copyWithin: ByteMove = (buffer, to, from, length) => void buffer.copyWithin(to, from, from + length)

/** How many bytes the shortest varint encoding of `n` takes. */
const varintBytes = (n: number): number => {
  let k = 1
  for (let v = n; v >= 128; v = Math.floor(v / 128)) k++
  return k
}

/**
 * Moves a TensorProto's raw_data left inside the model's bytes until it starts at a multiple of its
 * element's width, so that decodeTensor can view it instead of copying it (a fresh page costs more
 * than the copy on some VMs: ResNet-50's 100 MB of weights were 25,000 first touches). It moves only
 * over the bytes of its own field's header — the tag (1 byte) and the length's varint, which the
 * protobuf reader has already consumed — so nothing else the message holds is overwritten, and
 * never outside the model's bytes; where that header is shorter than the move, it stays (and is
 * copied when decoded). Points `tp.rawData` at the moved bytes, so every later read sees the same
 * values. The bytes must belong to the decode (DecodeOptions.adoptBytes). `move` copies `length`
 * bytes of the buffer from `from` to `to` (byte offsets in it); by default copyWithin, which on a VM
 * that charges the first write to a page (this one: ~8 µs a page, 0.2 s for ResNet-50's 100 MB even
 * right after read() filled them) costs more than reading the bytes from the file again.
 */
export const alignRawData = (tp: TensorProto, move: ByteMove = copyWithin): void => {
  const raw = tp.rawData
  const dtype = ONNX_DTYPE[tp.dataType]
  if (raw.length === 0 || dtype === undefined || tp.dataLocation === 1) return
  const shift = raw.byteOffset % BYTES[dtype]
  if (shift === 0 || shift > 1 + varintBytes(raw.length)) return
  const whole = new Uint8Array(raw.buffer)
  move(whole, raw.byteOffset - shift, raw.byteOffset, raw.length)
  tp.rawData = whole.subarray(raw.byteOffset - shift, raw.byteOffset - shift + raw.length)
}

/**
 * Raw bytes copied whole into `dtype`'s array (a little-endian host, a dtype of SAME_BYTES): what
 * readRawByElement reads, a memcpy instead of a DataView call per element (that loop was ~5–8% of a
 * cold ResNet-18 compile's profile in Node). A NaN keeps its payload bit for bit.
 */
export const copyRaw = (dtype: DType, bytes: Uint8Array, n: number): Tensor["data"] => {
  const out = allocate(dtype, n)
  new Uint8Array(out.buffer, out.byteOffset, out.byteLength).set(bytes)
  return out
}

/** Raw little-endian bytes as `dtype`'s array, element by element (any host; not int64 / uint64, read by wideRaw). */
export const readRawByElement = (dtype: DType, bytes: Uint8Array, n: number): Tensor["data"] => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const out = allocate(dtype, n)
  switch (dtype) {
    case "float32":
      for (let i = 0; i < n; i++) out[i] = view.getFloat32(i * 4, true)
      break
    case "float64":
      for (let i = 0; i < n; i++) out[i] = view.getFloat64(i * 8, true)
      break
    case "float16":
      for (let i = 0; i < n; i++) out[i] = f16BitsToNumber(view.getUint16(i * 2, true))
      break
    case "bfloat16":
      for (let i = 0; i < n; i++) out[i] = bf16BitsToNumber(view.getUint16(i * 2, true))
      break
    case "int8":
      for (let i = 0; i < n; i++) out[i] = view.getInt8(i)
      break
    case "uint8":
    case "bool":
      for (let i = 0; i < n; i++) out[i] = dtype === "bool" ? (view.getUint8(i) ? 1 : 0) : view.getUint8(i)
      break
    case "int16":
      for (let i = 0; i < n; i++) out[i] = view.getInt16(i * 2, true)
      break
    case "uint16":
      for (let i = 0; i < n; i++) out[i] = view.getUint16(i * 2, true)
      break
    case "int32":
      for (let i = 0; i < n; i++) out[i] = view.getInt32(i * 4, true)
      break
    case "uint32":
      for (let i = 0; i < n; i++) out[i] = view.getUint32(i * 4, true)
      break
    case "int64":
    case "uint64":
      throw new Error("unreachable: int64 / uint64 are read by wideRaw")
  }
  return out
}

/** int64 / uint64 raw data, exactly. */
const wideRaw = (dtype: "int64" | "uint64", bytes: Uint8Array, n: number, shape: readonly number[], where: string): Tensor => {
  if (bytes.length !== n * 8) throw new DecodeError({ where, reason: `raw data has ${bytes.length} bytes, ${n} ${dtype} elements need ${n * 8}` })
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const out = allocateBig(dtype, n)
  for (let i = 0; i < n; i++) out[i] = dtype === "int64" ? view.getBigInt64(i * 8, true) : view.getBigUint64(i * 8, true)
  return wideTensor(dtype, shape, out)
}

/** A tensor of raw little-endian bytes. */
const fromRaw = (dtype: DType, code: number, bytes: Uint8Array, n: number, shape: number[], where: string, views: boolean): Tensor =>
  isWide(dtype) ? wideRaw(dtype, bytes, n, shape, where) : { dtype, shape, data: readRaw(dtype, code, bytes, n, where, views) }

const readTyped = (dtype: DType, tp: TensorProto, n: number, shape: number[], where: string): Tensor => {
  const field: ArrayLike<number | bigint> =
    dtype === "float32"
      ? tp.floatData
      : dtype === "float64"
        ? tp.doubleData
        : dtype === "int64"
          ? tp.int64Data
          : dtype === "uint32" || dtype === "uint64"
            ? tp.uint64Data
            : tp.int32Data
  if (field.length !== n) throw new DecodeError({ where, reason: `holds ${field.length} values, dims need ${n}` })
  if (isWide(dtype)) {
    // the int64_data / uint64_data fields hold BigInts: kept exactly
    const big = allocateBig(dtype, n)
    for (let i = 0; i < n; i++) big[i] = wrapWide(dtype, BigInt(field[i]))
    return wideTensor(dtype, shape, big)
  }
  const out = allocate(dtype, n)
  for (let i = 0; i < n; i++) {
    const v = Number(field[i])
    out[i] = dtype === "float16" ? f16BitsToNumber(v) : dtype === "bfloat16" ? bf16BitsToNumber(v) : dtype === "bool" ? (v ? 1 : 0) : v
  }
  return { dtype, shape, data: out }
}

/**
 * Decodes one TensorProto. `where` names it in errors. With `views`, raw data that starts at a
 * multiple of its element's width becomes a view onto its bytes (the model's, or what
 * `readExternal` returned), not a copy: only for bytes that belong to the decode. Raw data the
 * reader left out (`unread`) becomes a stored tensor, or is read into place first.
 */
export const decodeTensor = (tp: TensorProto, where: string, readExternal?: ExternalReader, views = false, unread?: UnreadRaw): Tensor => {
  const dtype = ONNX_DTYPE[tp.dataType]
  if (!dtype) {
    const name = ONNX_DTYPE_NAME[tp.dataType]
    if (name) throw new UnsupportedModelError({ where, feature: `tensor element type ${name}` })
    throw new DecodeError({ where, reason: `unknown tensor element type ${tp.dataType}` })
  }
  const shape = dimsOf(tp, where)
  const n = countOf(shape, where)
  if (tp.dataLocation === 1) {
    const entries = new Map(tp.externalData.map((e) => [e.key, e.value] as const))
    const location = entries.get("location")
    if (location === undefined) throw new DecodeError({ where, reason: "external data without a 'location'" })
    checkExternalLocation(location, where)
    if (!readExternal)
      throw new DecodeError({ where, reason: `stored in external file '${location}', but no model folder was given to read it from` })
    const offset = Number(entries.get("offset") ?? "0")
    const lengthS = entries.get("length")
    const length = lengthS === undefined ? undefined : Number(lengthS)
    if (!Number.isSafeInteger(offset) || offset < 0 || (length !== undefined && (!Number.isSafeInteger(length) || length < 0)))
      throw new DecodeError({ where, reason: "external data offset/length are not valid non-negative integers" })
    const bytes = readExternal(location, offset, length ?? n * BYTES[dtype])
    return fromRaw(dtype, tp.dataType, bytes, n, shape, where, views)
  }
  const source = tp.rawData.length > 0 ? unread?.(tp.rawData) : undefined
  if (source !== undefined) {
    // left in the file: a stored tensor (read when asked) where raw_data's bytes are its array's
    if (LITTLE_ENDIAN && SAME_BYTES.has(dtype) && tp.rawData.length === n * BYTES[dtype]) return stored(dtype, shape, source)
    source(0, tp.rawData)
  }
  if (tp.rawData.length > 0 || (n === 0 && tp.floatData.length + tp.int32Data.length + tp.int64Data.length + tp.doubleData.length + tp.uint64Data.length === 0))
    return fromRaw(dtype, tp.dataType, tp.rawData, n, shape, where, views)
  return readTyped(dtype, tp, n, shape, where)
}

/** Encodes a tensor as a TensorProto with raw_data (how exporters write weights). */
export const encodeTensor = (t: Tensor, name: string): TensorProto => {
  const n = t.data.length
  const width = BYTES[t.dtype]
  const bytes = new Uint8Array(n * width)
  const view = new DataView(bytes.buffer)
  const d = t.data
  const wide = isWide(t.dtype) ? exactValues(t) : undefined
  // float32 storage on a little-endian host is raw_data already: copied whole, not element by
  // element (ViT-B/16's 86M weights took seconds); the bits go as stored (a signalling NaN is
  // no longer quieted on the way)
  const copied = t.dtype === "float32" && d instanceof Float32Array && LITTLE_ENDIAN
  if (copied) bytes.set(new Uint8Array(d.buffer, d.byteOffset, d.byteLength))
  for (let i = 0; i < (copied ? 0 : n); i++) {
    const v = d[i]
    switch (t.dtype) {
      case "float32":
        view.setFloat32(i * 4, v, true)
        break
      case "float64":
        view.setFloat64(i * 8, v, true)
        break
      case "float16":
        view.setUint16(i * 2, numberToF16Bits(v), true)
        break
      case "bfloat16":
        view.setUint16(i * 2, numberToBF16Bits(v), true)
        break
      case "int8":
        view.setInt8(i, v)
        break
      case "uint8":
      case "bool":
        view.setUint8(i, v)
        break
      case "int16":
        view.setInt16(i * 2, v, true)
        break
      case "uint16":
        view.setUint16(i * 2, v, true)
        break
      case "int32":
        view.setInt32(i * 4, v, true)
        break
      case "uint32":
        view.setUint32(i * 4, v, true)
        break
      case "int64":
        view.setBigInt64(i * 8, wide![i], true)
        break
      case "uint64":
        view.setBigUint64(i * 8, wide![i], true)
        break
    }
  }
  return create(TensorProtoSchema, {
    name,
    dims: t.shape.map((x) => BigInt(x)),
    dataType: DTYPE_ONNX[t.dtype],
    rawData: bytes,
  })
}
