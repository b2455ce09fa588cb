// A model file's bytes as the decoder reads them, less the large initializers' raw data: those are
// left in the file (zero in the array, whose pages are then never touched) and read when asked —
// by the decoder's stored tensors (src/ast/graph/deferred.ts `stored`), a range at a time, straight
// into the array that wants them. On this VM a page costs ~28 µs of CPU the first time it is used
// (2026-11-27, Zen 5): ResNet-50's 102 MB read whole cost ~0.6 s before any work (readFileSync, then
// the weights' first reads), where constants.bin now copies or transforms each weight through one
// buffer reused. Only ModelProto.graph → GraphProto.initializer → TensorProto.raw_data fields are
// left out; everything else is read, in order, so the decoder sees the same bytes it always did.
import * as fs from "node:fs"

/** Raw data of at least this many bytes is left in the file (smaller: read with its neighbours; a page or so is not worth a read of its own). */
export const UNREAD_BYTES = 1 << 14

/** How far past what the walk needs each read goes: a few headers a read, at most a page of a weight left unread. */
const READ_AHEAD = 4096

/** ModelProto.graph, GraphProto.initializer, TensorProto.raw_data: the fields the walk enters (the first two) or leaves unread. */
const GRAPH = 7
const INITIALIZER = 5
const RAW_DATA = 9

/**
 * The raw_data fields of the graph's initializers of at least `minBytes`, as offset → length in
 * `bytes` (a model's `size` bytes, filled as the walk goes by `load(hi)`: every byte before `hi`
 * that is not in an earlier field left out). Everything else the file holds is loaded by the time
 * it returns. Undefined where the bytes are not a protobuf message of the shape it expects (a group,
 * a varint of more than 10 bytes or past 2⁵³, a field past its message): the caller reads the file
 * whole and leaves the errors to the decoder.
 */
export const unreadRawData = (bytes: Uint8Array, size: number, load: (hi: number) => void, leave: (from: number, to: number) => void, minBytes: number): Map<number, number> | undefined => {
  const unread = new Map<number, number>()
  // a varint at `pos` before `end`: its value and where the next field starts
  const varint = (pos: number, end: number): [number, number] | undefined => {
    let value = 0
    for (let k = 0, scale = 1; k < 10 && pos < end; k++, scale *= 128) {
      load(pos + 1)
      const b = bytes[pos++]
      value += (b & 0x7f) * scale
      if (b < 0x80) return value <= Number.MAX_SAFE_INTEGER ? [value, pos] : undefined
    }
    return undefined
  }
  // a message's fields in [start, end); depth 0 the model, 1 its graph, 2 an initializer
  const message = (start: number, end: number, depth: number): boolean => {
    let pos = start
    while (pos < end) {
      const tag = varint(pos, end)
      if (tag === undefined) return false
      const [key, at] = tag
      const [field, wire] = [Math.floor(key / 8), key % 8]
      if (wire === 0) {
        const v = varint(at, end)
        if (v === undefined) return false
        pos = v[1]
      } else if (wire === 1 || wire === 5) {
        pos = at + (wire === 1 ? 8 : 4)
        if (pos > end) return false
        load(pos)
      } else if (wire === 2) {
        const len = varint(at, end)
        if (len === undefined) return false
        const [n, from] = len
        pos = from + n
        if (pos > end) return false
        const inner = depth === 0 && field === GRAPH ? 1 : depth === 1 && field === INITIALIZER ? 2 : undefined
        if (inner !== undefined) {
          if (!message(from, pos, inner)) return false
        } else if (depth === 2 && field === RAW_DATA && n >= minBytes) {
          unread.set(from, n)
          leave(from, pos)
        } else load(pos)
      } else return false
    }
    return pos === end
  }
  return message(0, size, 0) ? unread : undefined
}

/** Reads `length` bytes at `position` of an open file into `out` from `at`; a short read (the file shrank) is an error. */
const readFully = (fd: number, out: Uint8Array, at: number, length: number, position: number): void => {
  for (let got = 0; got < length; ) {
    const r = fs.readSync(fd, out, at + got, length - got, position + got)
    if (r === 0) throw Object.assign(new Error("the file changed while it was read"), { code: "" })
    got += r
  }
}

export interface ModelBytes {
  /** The file's bytes; zero (never touched) where raw data was left in the file. */
  readonly bytes: Uint8Array
  /** The raw data left in the file: offset → length. */
  readonly unread: ReadonlyMap<number, number>
  /** Reads `out.length` bytes of the file from `position` (the file checked to be the one read: same size, modification time and inode). */
  readonly readAt: (position: number, out: Uint8Array) => void
}

/**
 * A regular file's bytes, its large initializers' raw data left in it (unreadRawData; all of it
 * read where the walk fails). Throws what fs throws (the caller maps it to a FileAccessError).
 */
export const readModelBytes = (file: string, minBytes: number = UNREAD_BYTES): ModelBytes => {
  const fd = fs.openSync(file, fs.constants.O_RDONLY)
  try {
    const st = fs.fstatSync(fd)
    const size = st.size
    // fresh and zero: a page is touched only when something is read into it
    const bytes = new Uint8Array(size)
    let front = 0
    const load = (hi: number) => {
      if (hi <= front) return
      const to = Math.min(size, Math.max(hi, front + READ_AHEAD))
      readFully(fd, bytes, front, to - front, front)
      front = to
    }
    const leave = (_from: number, to: number) => void (front = Math.max(front, to))
    let unread = unreadRawData(bytes, size, load, leave, minBytes)
    if (unread === undefined) {
      readFully(fd, bytes, 0, size, 0)
      unread = new Map()
    }
    const readAt = (position: number, out: Uint8Array): void => {
      const again = fs.openSync(file, fs.constants.O_RDONLY)
      try {
        const now = fs.fstatSync(again)
        if (now.size !== st.size || now.mtimeMs !== st.mtimeMs || now.ino !== st.ino || now.dev !== st.dev)
          throw Object.assign(new Error("the file changed after the model was decoded"), { code: "" })
        readFully(again, out, 0, out.length, position)
      } finally {
        fs.closeSync(again)
      }
    }
    return { bytes, unread, readAt }
  } finally {
    fs.closeSync(fd)
  }
}
