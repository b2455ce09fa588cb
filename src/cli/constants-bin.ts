// constants.bin: every constant of a compiled graph, little-endian, each at a multiple of 64 bytes,
// in the graph's order, and its index (name, dtype, storage, shape, offset, bytes). Written piece
// by piece through one buffer reused (1 MiB, or a deferred weight's unit if larger): small
// constants are gathered into it, a deferred weight (deferred.ts: a BatchNorm fold, a pack, a
// Winograd transform) is computed into it a few units at a time, a large stored one is handed
// over as it is. Written whole into one fresh array, ResNet-50's 159 MB took ~39 k first touches
// of a page (2026-11-27, tenth session, Zen 5 VM: ~14 µs each, 0.55 s); through the buffer, ~1.6 k.
// The bytes are the same either way (test/constants-bin.test.ts writes them through buffers of
// several sizes).
import { lendingSources, pendingRecipe, rangeUnit, sourceBytes, writeRangeInto } from "../ast/graph/deferred.js"
import { DTYPE_INFO } from "../ast/graph/dtype.js"
import type { Graph } from "../ast/graph/graph.js"
import { exactValues, sizeOf, type Tensor } from "../ast/graph/tensor.js"
import type { StreamedBytes } from "../device/files.js"

export const ALIGN = 64

/** The buffer's size unless a deferred weight's unit needs more: large enough that a write costs little next to its bytes, small enough to stay in cache. */
export const PIECE_BYTES = 1 << 20

/** The stored array of a constant: our storage, but int64 / uint64 as their exact values (int64_t / uint64_t, as the c, js and wasm targets and ONNX hold them). */
const storedOf = (t: Tensor): { readonly buffer: ArrayBufferLike; readonly byteOffset: number; readonly byteLength: number; readonly constructor: { readonly name: string } } =>
  t.dtype === "int64" || t.dtype === "uint64" ? exactValues(t) : t.data

/** The stored bytes of a constant (little-endian, as the typed array holds it). */
const bytesOf = (t: Tensor): Uint8Array => {
  const a = storedOf(t)
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength)
}

/** A constant's stored bytes, known from its dtype and shape (a deferred weight is not computed to learn it). */
const byteLengthOf = (t: Tensor): number => sizeOf(t.shape) * DTYPE_INFO[t.dtype].array.BYTES_PER_ELEMENT

const ZEROS = new Uint8Array(ALIGN)

/** constants.bin made piece by piece (`pieceBytes`: the reused buffer's size, at least) and its index. */
export const constantsBin = (graph: Graph, pieceBytes: number = PIECE_BYTES): { bytes: StreamedBytes; index: object[] } => {
  const entries = [...graph.initializers].map(([name, t]) => ({ name, t, deferred: pendingRecipe(t) !== undefined }))
  const index: object[] = []
  let size = 0
  for (const { name, t, deferred } of entries) {
    size = Math.ceil(size / ALIGN) * ALIGN
    index.push({ name, dtype: t.dtype, storage: deferred ? DTYPE_INFO[t.dtype].array.name : storedOf(t).constructor.name, shape: t.shape, offset: size, bytes: byteLengthOf(t) })
    size += byteLengthOf(t)
  }
  // a deferred weight computes whole units at a time: the buffer holds at least one
  const capacity = entries.reduce((c, e) => (e.deferred ? Math.max(c, rangeUnit(e.t) * DTYPE_INFO[e.t.dtype].array.BYTES_PER_ELEMENT) : c), pieceBytes)
  // a deferred weight's sources still in the model's file (stored) are read whole into one scratch
  // buffer reused, each once, while it is computed (lendingSources); a stored weight written as it is
  // is read straight into the buffer, a piece at a time
  const lent = entries.reduce((n, e) => (e.deferred && pendingRecipe(e.t)?.kind !== "stored" ? Math.max(n, sourceBytes(e.t)) : n), 0)
  const write = (sink: (piece: Uint8Array) => void): void => {
    const buffer = new Uint8Array(capacity)
    const scratch = new ArrayBuffer(lent)
    let used = 0
    const flush = () => {
      if (used > 0) sink(buffer.subarray(0, used))
      used = 0
    }
    // bytes gathered into the buffer, or, as large as it, handed over as they are
    const put = (bytes: Uint8Array) => {
      if (used + bytes.length > capacity) flush()
      if (bytes.length >= capacity) sink(bytes)
      else {
        buffer.set(bytes, used)
        used += bytes.length
      }
    }
    let off = 0
    for (const { t, deferred } of entries) {
      const aligned = Math.ceil(off / ALIGN) * ALIGN
      put(ZEROS.subarray(0, aligned - off))
      if (deferred) {
        // whole units computed into the buffer's free part (viewed as the dtype's array: flushed
        // first where that part does not start at a multiple of the element's size)
        const { array } = DTYPE_INFO[t.dtype]
        const [width, unit, n] = [array.BYTES_PER_ELEMENT, rangeUnit(t), sizeOf(t.shape)]
        const fill = () => {
          for (let start = 0; start < n; ) {
            if (used % width !== 0) flush()
            const count = Math.min(n - start, Math.floor((capacity - used) / width / unit) * unit)
            if (count === 0) {
              flush()
              continue
            }
            writeRangeInto(t, start, new array(buffer.buffer, used, count))
            used += count * width
            start += count
          }
        }
        if (pendingRecipe(t)?.kind === "stored") fill()
        else lendingSources(t, scratch, fill)
      } else put(bytesOf(t))
      off = aligned + byteLengthOf(t)
    }
    flush()
  }
  return { bytes: { byteLength: size, write }, index }
}
