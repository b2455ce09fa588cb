// File I/O for models, tensors and outputs: the only place the CLI and the library touch the
// file system. Reads map the system's errors to a typed FileAccessError; writes are atomic (a
// temporary file in the same folder, then a rename), so a failed run never leaves a partial file.
import { Data, Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Graph } from "../ast/graph/graph.js"
import type { Tensor } from "../ast/graph/tensor.js"
import { decodeModelSync, type OnnxDecodeError } from "../ast/onnx/decode.js"
import { DecodeError } from "../ast/onnx/errors.js"
import { checkExternalLocation, type ByteMove } from "../ast/onnx/tensor-proto.js"
import type { ByteSource } from "../ast/graph/deferred.js"
import { readModelBytes, UNREAD_BYTES, type ModelBytes } from "./model-bytes.js"
import { NpyError, parseNpy, serializeNpy } from "./npy.js"

/** A file that cannot be read or written (missing, a folder, no permission, disk full...). */
export class FileAccessError extends Data.TaggedError("FileAccessError")<{
  readonly path: string
  readonly operation: "read" | "write"
  readonly reason: string
}> {
  override get message(): string {
    return `cannot ${this.operation} '${this.path}': ${this.reason}`
  }
}

const REASONS: { readonly [code: string]: string } = {
  ENOENT: "no such file or folder",
  EISDIR: "it is a folder, not a file",
  ENOTDIR: "a part of the path is not a folder",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  ENOSPC: "no space left on the device",
  EROFS: "the file system is read-only",
  EEXIST: "a file with that name already exists",
  ENAMETOOLONG: "the name is too long",
  EMFILE: "too many open files",
}

const accessError = (file: string, operation: "read" | "write", e: unknown): FileAccessError => {
  const code = typeof e === "object" && e !== null && "code" in e ? String((e as { code: unknown }).code) : ""
  const reason = REASONS[code] ?? (e instanceof Error ? e.message : String(e))
  return new FileAccessError({ path: file, operation, reason })
}

/** The whole file's bytes; FileAccessError when it cannot be read. */
export const readBytesSync = (file: string): Uint8Array => {
  try {
    if (fs.statSync(file).isDirectory()) throw Object.assign(new Error("is a folder"), { code: "EISDIR" })
    return fs.readFileSync(file)
  } catch (e) {
    throw accessError(file, "read", e)
  }
}

/**
 * A model's bytes (readBytesSync's checks and errors), its large initializers' raw data left in the
 * file where it is a regular one (readModelBytes); `regular` false for a pipe or a device (`tessera run
 * <(cat m.onnx)`), read once and whole: it can be neither reopened nor read at an offset.
 */
const modelBytesSync = (file: string, unreadBytes: number): ModelBytes & { readonly regular: boolean } => {
  try {
    const st = fs.statSync(file)
    if (st.isDirectory()) throw Object.assign(new Error("is a folder"), { code: "EISDIR" })
    if (st.isFile()) return { ...readModelBytes(path.resolve(file), unreadBytes), regular: true }
  } catch (e) {
    throw accessError(file, "read", e)
  }
  return { bytes: readBytesSync(file), unread: new Map(), readAt: () => {}, regular: false }
}

/** What a non-regular file is, in words. */
const kindOf = (st: fs.Stats): string =>
  st.isFIFO() ? "a FIFO (named pipe)" : st.isDirectory() ? "a folder" : st.isCharacterDevice() ? "a character device" : st.isBlockDevice() ? "a block device" : st.isSocket() ? "a socket" : "not a regular file"

/**
 * Reads external tensor data for a model in `folder`. The location has already been checked to
 * stay inside the folder (checkExternalLocation); symbolic links that lead out are refused too.
 */
export const externalReader = (folder: string) => (location: string, offset: number, length: number | undefined): Uint8Array => {
  checkExternalLocation(location, `external data '${location}'`)
  const file = path.join(folder, location)
  let fd: number | undefined
  try {
    const realFolder = fs.realpathSync(folder)
    const real = fs.realpathSync(file)
    if (real !== realFolder && !real.startsWith(realFolder + path.sep))
      throw new DecodeError({ where: `external data '${location}'`, reason: "the file links outside the model's folder; only files inside it are allowed" })
    // never follow a link swapped in after the check, and never block: a FIFO (a tar archive can
    // carry one) would hang open() until a writer came; then regular files only
    fd = fs.openSync(real, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
    const stat = fs.fstatSync(fd)
    if (!stat.isFile())
      throw new DecodeError({ where: `external data '${location}'`, reason: `is ${kindOf(stat)}, not a regular file; external data must be a regular file inside the model's folder` })
    const size = stat.size
    if (offset > size) throw new DecodeError({ where: `external data '${location}'`, reason: `offset ${offset} is past the end of the file (${size} bytes)` })
    const n = length ?? size - offset
    if (offset + n > size)
      throw new DecodeError({ where: `external data '${location}'`, reason: `needs ${n} bytes at offset ${offset}, the file has ${size} bytes` })
    const out = new Uint8Array(n)
    let got = 0
    while (got < n) {
      const r = fs.readSync(fd, out, got, n - got, offset + got)
      if (r === 0) break
      got += r
    }
    return out
  } catch (e) {
    if (e instanceof DecodeError) throw e
    throw accessError(file, "read", e)
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}

/**
 * Decodes the ONNX model at `file`, reading external data relative to its folder. The bytes read
 * are the decode's alone, so the tensors are views onto them (DecodeOptions.adoptBytes), not copies;
 * a tensor moved to its alignment is read from the file again into its new place (a kernel copy:
 * ~20 ms for ResNet-50's 100 MB, where moving them in memory cost ~200 ms on this VM, whose first
 * write from user space to a page is dear even after read() filled it). A read that comes back short
 * (the file changed meanwhile) is a FileAccessError. The raw data of initializers of `unreadBytes`
 * or more is left in the file (model-bytes.ts) and read when asked, a range at a time (stored
 * tensors): a FileAccessError then if the file changed since.
 */
export const readModelSync = (file: string, unreadBytes: number = UNREAD_BYTES): Graph => {
  const { bytes, unread: left, readAt, regular } = modelBytesSync(file, unreadBytes)
  // raw data left in the file (model-bytes.ts): a stored tensor reads it when asked, a FileAccessError if it cannot
  const unread = (raw: Uint8Array): ByteSource | undefined =>
    raw.buffer === bytes.buffer && left.get(raw.byteOffset) === raw.length
      ? (at, out) => {
          try {
            readAt(raw.byteOffset + at, out)
          } catch (e) {
            throw accessError(file, "read", e)
          }
        }
      : undefined
  let fd: number | undefined
  const moveBytes: ByteMove = (buffer, to, from, length) => {
    try {
      fd ??= fs.openSync(file, fs.constants.O_RDONLY)
      if (fs.readSync(fd, buffer, to, length, from - bytes.byteOffset) !== length) throw Object.assign(new Error("the file changed while it was read"), { code: "" })
    } catch (e) {
      throw accessError(file, "read", e)
    }
  }
  try {
    // (a pipe's bytes are all in memory and it cannot be read again: its tensors move there, the decoder's own copyWithin)
    return decodeModelSync(bytes, { readExternal: externalReader(path.dirname(path.resolve(file))), adoptBytes: true, ...(regular ? { moveBytes } : {}), unread })
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}

/** Reads a .npy file as a Tensor (NpyError names the file). */
export const readNpySync = (file: string): Tensor => parseNpy(readBytesSync(file), `'${file}'`)

let tmpCounter = 0
const tempNameFor = (file: string): string =>
  path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${Date.now().toString(36)}${(tmpCounter++).toString(36)}.tmp`)

/**
 * A file's bytes made piece by piece, in order, each piece handed to `sink` and read before the next
 * is made (a view of a buffer reused), so they never sit whole in memory: the artifact's
 * constants.bin (src/cli/constants-bin.ts).
 */
export interface StreamedBytes {
  readonly byteLength: number
  readonly write: (sink: (piece: Uint8Array) => void) => void
}

/** A file's bytes: whole, or made piece by piece. */
export type FileBytes = Uint8Array | StreamedBytes

/** A file's bytes whole (streamed ones gathered into one array). */
export const wholeBytes = (bytes: FileBytes): Uint8Array => {
  if (bytes instanceof Uint8Array) return bytes
  const out = new Uint8Array(bytes.byteLength)
  let at = 0
  bytes.write((piece) => {
    out.set(piece, at)
    at += piece.length
  })
  return out
}

/** Writes all of `bytes` to an open file. */
const writeAllSync = (fd: number, bytes: Uint8Array): void => {
  for (let off = 0; off < bytes.length; ) off += fs.writeSync(fd, bytes, off, bytes.length - off)
}

/**
 * Writes several files all-or-nothing as far as the file system allows: every file goes to a
 * temporary name next to its target first; only when all are written are they renamed into
 * place. On failure the temporary files are removed and nothing appears under a target name.
 */
export const writeFilesAtomicSync = (files: readonly { readonly path: string; readonly bytes: FileBytes }[]): void => {
  const temps: { tmp: string; path: string }[] = []
  try {
    for (const f of files) {
      const tmp = tempNameFor(f.path)
      temps.push({ tmp, path: f.path })
      const fd = fs.openSync(tmp, "wx")
      try {
        const bytes = f.bytes
        if (bytes instanceof Uint8Array) writeAllSync(fd, bytes)
        else bytes.write((piece) => writeAllSync(fd, piece))
        fs.fsyncSync(fd)
      } finally {
        fs.closeSync(fd)
      }
    }
  } catch (e) {
    for (const t of temps) fs.rmSync(t.tmp, { force: true })
    throw accessError(temps[temps.length - 1]?.path ?? "", "write", e)
  }
  for (const t of temps) {
    try {
      fs.renameSync(t.tmp, t.path)
    } catch (e) {
      for (const u of temps) fs.rmSync(u.tmp, { force: true })
      throw accessError(t.path, "write", e)
    }
  }
}

/** Writes one file atomically (temporary file, then rename). */
export const writeFileAtomicSync = (file: string, bytes: Uint8Array): void => writeFilesAtomicSync([{ path: file, bytes }])

/** Creates a folder (and its parents) for outputs. */
export const ensureFolderSync = (folder: string): void => {
  try {
    fs.mkdirSync(folder, { recursive: true })
    if (!fs.statSync(folder).isDirectory()) throw Object.assign(new Error("not a folder"), { code: "ENOTDIR" })
  } catch (e) {
    throw accessError(folder, "write", e)
  }
}

/** A file name for a graph value: every character outside [A-Za-z0-9_.-] becomes '_'. */
export const safeFileName = (name: string): string => name.replace(/[^A-Za-z0-9_.-]/g, "_")

/**
 * The .npy file names for the given output names in `folder`, unique: when two names map to the
 * same safe name, the later ones get `_2`, `_3`... before the extension.
 */
export const outputFileNames = (folder: string, names: readonly string[]): string[] => {
  const used = new Set<string>()
  return names.map((name) => {
    const base = safeFileName(name) || "_"
    let file = `${base}.npy`
    for (let k = 2; used.has(file); k++) file = `${base}_${k}.npy`
    used.add(file)
    return path.join(folder, file)
  })
}

/** Writes tensors as DIR/NAME.npy (all or nothing); returns the paths written. */
export const writeOutputsSync = (folder: string, outputs: readonly { readonly name: string; readonly tensor: Tensor }[]): string[] => {
  ensureFolderSync(folder)
  const paths = outputFileNames(folder, outputs.map((o) => o.name))
  writeFilesAtomicSync(outputs.map((o, k) => ({ path: paths[k], bytes: serializeNpy(o.tensor) })))
  return paths
}

// ---------------------------------------------------------------------------------------------
// Effect forms, for the stages that compose with Effect.

/** Runs a throwing function: its typed errors become failures, anything else a defect. */
const tryTyped = <A, E>(f: () => A, isE: (e: unknown) => e is E): Effect.Effect<A, E> =>
  Effect.suspend(() => {
    try {
      return Effect.succeed(f())
    } catch (e) {
      return isE(e) ? Effect.fail(e) : Effect.die(e)
    }
  })

const isTagged = (e: unknown): boolean => typeof e === "object" && e !== null && "_tag" in e

export type ReadModelError = OnnxDecodeError | FileAccessError

export const readModel = (file: string): Effect.Effect<Graph, ReadModelError> =>
  tryTyped(() => readModelSync(file), (e): e is ReadModelError => isTagged(e))

export const readNpy = (file: string): Effect.Effect<Tensor, NpyError | FileAccessError> =>
  tryTyped(() => readNpySync(file), (e): e is NpyError | FileAccessError => e instanceof NpyError || e instanceof FileAccessError)

export const writeOutputs = (
  folder: string,
  outputs: readonly { readonly name: string; readonly tensor: Tensor }[],
): Effect.Effect<string[], FileAccessError> =>
  tryTyped(() => writeOutputsSync(folder, outputs), (e): e is FileAccessError => e instanceof FileAccessError)

export const writeFileAtomic = (file: string, bytes: Uint8Array): Effect.Effect<void, FileAccessError> =>
  tryTyped(() => writeFileAtomicSync(file, bytes), (e): e is FileAccessError => e instanceof FileAccessError)
