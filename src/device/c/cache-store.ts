// The c build cache's files on disk, made safe against other users and against torn writes:
// - its folders are this user's alone (made mode 0700; one another user owns, or that others can
//   write into, is refused with UnsafeCacheError: a library planted there would be loaded and run);
// - an output (object, library) is written under a temporary name unique to this process, fsynced,
//   its content hash stored beside it (`<file>.sha256`, written the same way), then renamed into
//   place and the folder fsynced: a reader sees a whole file or none;
// - a cached output is used only when its bytes hash to the stored hash: a torn or planted file is
//   removed and built again (never handed to dlopen: a truncated library gives SIGBUS);
// - temporaries of a process that is gone (a killed build) are removed; any others are ignored
//   (their names never match a key).
import { Effect } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { chmodSync, closeSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { UnsafeCacheError } from "../errors.js"

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

/** Whether the cache holds `file` whole; a torn or planted one is removed (to be built again). */
export const cached = (file: string): boolean => {
  if (intact(file)) return true
  discard(file)
  return false
}
