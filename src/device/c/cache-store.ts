// The build caches' files on disk (the c target's libraries and objects, the cuda target's cubins), made safe against other users and against torn writes:
// - its folders are this user's alone (made mode 0700; one another user owns, or that others can
//   write into, is refused with UnsafeCacheError: a library planted there would be loaded and run);
// - an output (object, library) is written under a temporary name unique to this process, fsynced,
//   its content hash stored beside it (`<file>.sha256`, written the same way), then renamed into
//   place and the folder fsynced: a reader sees a whole file or none;
// - a cached output is used only when its bytes hash to the stored hash: a torn or planted file is
//   removed and built again (never handed to dlopen: a truncated library gives SIGBUS);
// - temporaries of a process that is gone (a killed build) are removed; any others are ignored
//   (their names never match a key);
// - the cache is bounded (`evict`): least recently used first, a use being a cache hit (`cached`
//   sets the file's mtime: atime is unreliable under noatime / relatime), down to a size limit
//   ($TESSERA_CACHE_MAX_MB, 2048 by default); an entry used within the grace period (an hour by
//   default) is never removed, since a concurrent build may have just found it and be about to
//   link or load it — so the cache can stay over its limit while every entry is that fresh. One
//   evictor at a time (the advisory lock `.evict.lock`; a second skips its turn). Removing a
//   library another process has loaded is safe on POSIX (its mapping stays); one removed between
//   another process's check and its load fails that load, and a library that will not load is
//   built again (./device.ts).
import { Effect, Result } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { chmodSync, closeSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { UnsafeCacheError } from "../errors.js"
import { lockFile } from "../file-lock.js"

/** Makes `dir` (and its missing parents) mode 0700; fails unless it is a folder this user owns and only they can write. */
export const privateDir = (dir: string): Effect.Effect<void, UnsafeCacheError> =>
  Effect.try({
    try: () => {
      mkdirSync(dir, { recursive: true, mode: 0o700 })
      const st = statSync(dir)
      if (!st.isDirectory()) throw new UnsafeCacheError({ path: dir, reason: "it is not a folder" })
      const uid = process.getuid?.()
      if (uid !== undefined && st.uid !== uid) throw new UnsafeCacheError({ path: dir, reason: `it is owned by user ${st.uid}, not by this user (${uid})` })
      if ((st.mode & 0o022) !== 0)
        throw new UnsafeCacheError({ path: dir, reason: `others can write into it (mode ${(st.mode & 0o777).toString(8).padStart(3, "0")}): a library planted there would be run` })
      // ours and only ours to write: read and search for us alone too
      if ((st.mode & 0o777) !== 0o700) chmodSync(dir, 0o700)
      // nor can another user swap it for theirs: its parent is not writable by others (unless sticky, as /tmp)
      const parent = statSync(path.dirname(dir))
      if ((parent.mode & 0o022) !== 0 && (parent.mode & 0o1000) === 0)
        throw new UnsafeCacheError({ path: dir, reason: `others can write into its parent folder ${path.dirname(dir)} (mode ${(parent.mode & 0o777).toString(8).padStart(3, "0")}, not sticky): they could replace it` })
    },
    catch: (e) => (e instanceof UnsafeCacheError ? e : new UnsafeCacheError({ path: dir, reason: e instanceof Error ? e.message : String(e) })),
  })

/** The marker of this process's temporaries: `.<pid>.<random>.tmp` (unique per process and call). */
export const tempTag = (): string => `.${process.pid}.${randomBytes(4).toString("hex")}.tmp`

/** The prefix of a build folder of this process (`mkdtemp` adds the unique tail). */
export const buildFolderPrefix = (): string => `build-${process.pid}-`

const TEMP = /\.(\d+)\.[0-9a-f]+\.tmp|^build-(\d+)-/

const alive = (pid: number): boolean => {
  if (pid === process.pid) return true
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    // EPERM: a process of another user has the pid; it is not ours to judge
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** Removes the temporaries in `dir` of processes that are gone (killed builds); the rest is left alone. */
export const removeStaleTemps = (dir: string): void => {
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return
  }
  for (const name of names) {
    const m = TEMP.exec(name)
    if (m !== null && !alive(Number(m[1] ?? m[2]))) rmSync(path.join(dir, name), { recursive: true, force: true })
  }
}

const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex")

const fsyncPath = (p: string, flags: "r" | "r+"): void => {
  const fd = openSync(p, flags)
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/** fsyncs a folder (its renames durable); a file system that cannot is let be. */
const fsyncDir = (dir: string): void => {
  try {
    fsyncPath(dir, "r")
  } catch {
    /* not every file system fsyncs folders */
  }
}

/** The stored content hash of a cached file. */
export const hashFile = (file: string): string => `${file}.sha256`

/**
 * Moves the finished output `tmp` (written by this process under a temporary name) to `dest`:
 * fsynced, its hash stored beside it (written and fsynced under a temporary name, renamed), then
 * renamed, the folder fsynced.
 */
export const publish = (tmp: string, dest: string): void => {
  const bytes = readFileSync(tmp)
  fsyncPath(tmp, "r+")
  const hashTmp = `${hashFile(dest)}${tempTag()}`
  writeFileSync(hashTmp, `${sha256(bytes)}\n`, { mode: 0o600 })
  fsyncPath(hashTmp, "r+")
  renameSync(hashTmp, hashFile(dest))
  renameSync(tmp, dest)
  fsyncDir(path.dirname(dest))
}

/** Whether `file` is whole: it exists and its bytes hash to the hash stored beside it. */
export const intact = (file: string): boolean => {
  try {
    const want = readFileSync(hashFile(file), "utf8").trim()
    return /^[0-9a-f]{64}$/.test(want) && sha256(readFileSync(file)) === want
  } catch {
    return false
  }
}

/** Removes a cached file and its hash (a torn or planted one, or one that would not load). */
export const discard = (file: string): void => {
  rmSync(file, { force: true })
  rmSync(hashFile(file), { force: true })
}

/** Marks a cached file used now (its mtime: the eviction's recency); a file gone meanwhile is let be. */
export const touch = (file: string): void => {
  try {
    const now = new Date()
    utimesSync(file, now, now)
  } catch {
    /* removed meanwhile: the next check builds it again */
  }
}

/** Whether the cache holds `file` whole (and marks it used); a torn or planted one is removed (to be built again). */
export const cached = (file: string): boolean => {
  if (intact(file)) {
    touch(file)
    return true
  }
  discard(file)
  return false
}

/** How large the cache may grow, and how long a used entry is safe from eviction. */
export interface CacheBudget {
  readonly maxBytes: number
  readonly graceMs: number
}

/** $TESSERA_CACHE_MAX_MB (a positive number; else 2048 MiB), an hour's grace. */
export const cacheBudget = (): CacheBudget => {
  const mb = Number(process.env.TESSERA_CACHE_MAX_MB)
  return { maxBytes: (Number.isFinite(mb) && mb > 0 ? mb : 2048) * 1024 * 1024, graceMs: 60 * 60 * 1000 }
}

/** A cached output and the files that go with it (companionsOf). */
interface Entry {
  readonly file: string
  readonly companions: readonly string[]
  readonly bytes: number
  readonly usedMs: number
}

/** A cached output's name: a 32-hex key and its extension (temporaries, hashes, locks, sources and reports are not). */
const ENTRY = /^([0-9a-f]{32})\.(so|o|cubin)$/

/** ptxas's report on a cached cubin (the cuda cache, ../cuda/nvcc.ts): published beside it, evicted with it. */
export const cubinReport = (cubin: string): string => cubin.replace(/\.cubin$/, ".ptxas")

/** The files that go with a cached output: its hash; a library's source; a cubin's report and its hash. */
const companionsOf = (dir: string, key: string, ext: string, file: string): string[] => {
  if (ext === "so") return [hashFile(file), path.join(dir, `${key}.c`)]
  if (ext === "cubin") return [hashFile(file), cubinReport(file), hashFile(cubinReport(file))]
  return [hashFile(file)]
}

const sizeOf = (file: string): number => {
  try {
    return statSync(file).size
  } catch {
    return 0
  }
}

const entriesOf = (dir: string): Entry[] => {
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return []
  }
  const out: Entry[] = []
  for (const name of names) {
    const m = ENTRY.exec(name)
    if (m === null) continue
    const file = path.join(dir, name)
    let st
    try {
      st = statSync(file)
    } catch {
      continue
    }
    if (!st.isFile()) continue
    const companions = companionsOf(dir, m[1], m[2], file)
    out.push({ file, companions, bytes: st.size + companions.reduce((a, f) => a + sizeOf(f), 0), usedMs: st.mtimeMs })
  }
  return out
}

/** What an eviction did: the entries removed and the bytes the cache holds after it (or why it did nothing). */
export interface Eviction {
  readonly removed: readonly string[]
  readonly bytesBefore: number
  readonly bytesAfter: number
  /** Another process held the eviction lock: this one skipped its turn. */
  readonly skipped?: string
}

/**
 * Removes cached outputs of `dirs` (the c cache folder and its obj/ and lib/), least recently used
 * first, until they hold at most `budget.maxBytes`; entries used within `budget.graceMs` of `nowMs`
 * stay (see the file header), and so do the files in `keep` (what the caller just built and is about to load). Under the lock `<lockDir>/.evict.lock`.
 */
export const evict = (lockDir: string, dirs: readonly string[], budget: CacheBudget, keep: readonly string[] = [], nowMs: number = Date.now()): Effect.Effect<Eviction> =>
  Effect.gen(function* () {
    const lock = yield* Effect.result(lockFile(path.join(lockDir, ".evict")))
    if (Result.isFailure(lock)) return { removed: [], bytesBefore: 0, bytesAfter: 0, skipped: lock.failure.message }
    try {
      const entries = dirs.flatMap(entriesOf)
      const bytesBefore = entries.reduce((a, e) => a + e.bytes, 0)
      let total = bytesBefore
      const removed: string[] = []
      for (const e of [...entries].sort((a, b) => a.usedMs - b.usedMs || (a.file < b.file ? -1 : 1))) {
        if (total <= budget.maxBytes) break
        // read again: a build may have used it since the listing
        let used: number
        try {
          used = statSync(e.file).mtimeMs
        } catch {
          total -= e.bytes // gone already
          continue
        }
        if (nowMs - used < budget.graceMs || keep.includes(e.file)) continue
        discard(e.file)
        for (const f of e.companions) rmSync(f, { force: true })
        removed.push(e.file)
        total -= e.bytes
      }
      return { removed, bytesBefore, bytesAfter: total }
    } finally {
      lock.success.release()
    }
  })
