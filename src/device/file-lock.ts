// An advisory lock on a file (the tuning log), so that two tuners never append to one log at once
// (each would resume from a log the other is still writing: doubled trials, and each timing its
// candidates while the other's run on the same cores). The lock is FILE.lock beside the file:
//
// - it is created whole or not at all: its text (pid, host, the process's start) is written to a
//   file of our own first, then link()ed to FILE.lock, which fails with EEXIST when it exists, so
//   no one ever reads a half-written lock;
// - a lock whose holder is gone (same host, that pid not running, or running but started at
//   another time: a reused pid) is stale: it is renamed away (atomic; of two processes breaking
//   it, one wins), checked to be the lock judged stale, and removed; then the lock is taken again;
// - a lock held by a live process, another host's, or one we cannot read refuses with
//   FileLockedError, naming the holder;
// - release removes the lock only while it is still ours (also at process exit, for a command that
//   ends without running its finalizers); a killed holder's lock is broken by the next run.
//
// Why not flock(2): Node has no flock, and holding one through a child process (`flock FILE cat`)
// needs util-linux's binary and a child for the whole run; an O_EXCL-style lock needs neither and
// its one weakness (a SIGKILLed holder leaves the file) is covered by the stale check.
import { Data, Effect } from "effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import { FileAccessError } from "./files.js"

/** FILE.lock is held by a live process (or one we cannot tell is gone). */
export class FileLockedError extends Data.TaggedError("FileLockedError")<{
  readonly path: string
  /** Who holds it, in words: "pid 123 on host h since 2026-…". */
  readonly holder: string
}> {
  override get message(): string {
    return `'${this.path}' is in use: its lock ${this.path}.lock is held by ${this.holder}`
  }
}

export interface FileLock {
  readonly path: string
  /** The holder of a stale lock that was broken to take this one, in words. */
  readonly broke?: string
  /** Removes the lock if it is still ours; idempotent. */
  readonly release: () => void
}

interface Holder {
  readonly pid: number
  readonly host: string
  /** The process's start time in clock ticks since boot (Linux /proc), when known. */
  readonly start?: number
  readonly since: string
}

/** A process's start (field 22 of /proc/PID/stat), or undefined where /proc cannot say. */
const startOf = (pid: number): number | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    // the command name (field 2) is in parentheses and may hold spaces: count after its last ')'
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    const start = Number(fields[19])
    return Number.isFinite(start) ? start : undefined
  } catch {
    return undefined
  }
}

const running = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM" // someone else's process
  }
}

const parseHolder = (text: string): Holder | undefined => {
  try {
    const h = JSON.parse(text) as Partial<Holder>
    if (typeof h.pid !== "number" || !Number.isInteger(h.pid) || h.pid <= 0 || typeof h.host !== "string" || typeof h.since !== "string") return undefined
    return { pid: h.pid, host: h.host, since: h.since, ...(typeof h.start === "number" ? { start: h.start } : {}) }
  } catch {
    return undefined
  }
}

const describe = (h: Holder): string => `pid ${h.pid} on host ${h.host} since ${h.since}`

/** Whether a lock's holder is certainly gone: same host, and its pid not running or another process. */
const gone = (h: Holder): boolean => {
  if (h.host !== os.hostname()) return false
  if (!running(h.pid)) return true
  const start = startOf(h.pid)
  return h.start !== undefined && start !== undefined && start !== h.start
}

const readOrUndefined = (file: string): string | undefined => {
  try {
    return fs.readFileSync(file, "utf8")
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined
    throw e
  }
}

const removeQuietly = (file: string): void => {
  try {
    fs.unlinkSync(file)
  } catch {
    // gone already
  }
}

/** Tries to take FILE.lock: the lock, or who holds it. */
const tryLock = (file: string): FileLock | { readonly holder: string } => {
  const lockPath = `${file}.lock`
  const text = JSON.stringify({ pid: process.pid, host: os.hostname(), ...(startOf(process.pid) !== undefined ? { start: startOf(process.pid) } : {}), since: new Date().toISOString() })
  let broke: string | undefined
  // a few rounds: a lock released or broken between our attempts is retried, not reported
  for (let round = 0; round < 5; round++) {
    const mine = `${lockPath}.${process.pid}.${crypto.randomBytes(6).toString("hex")}`
    fs.writeFileSync(mine, text, { flag: "wx", mode: 0o644 })
    try {
      fs.linkSync(mine, lockPath)
      let released = false
      const release = () => {
        if (released) return
        released = true
        process.removeListener("exit", release)
        if (readOrUndefined(lockPath) === text) removeQuietly(lockPath)
      }
      process.on("exit", release)
      return { path: lockPath, ...(broke ? { broke } : {}), release }
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
    } finally {
      removeQuietly(mine)
    }
    const held = readOrUndefined(lockPath)
    if (held === undefined) continue // released meanwhile
    const holder = parseHolder(held)
    if (!holder) return { holder: "an unknown holder (the lock file is not one Tessera writes; remove it if no tuner is running)" }
    if (!gone(holder)) return { holder: describe(holder) }
    // stale: moved aside (only one process can), and removed if it is still the lock judged stale
    const aside = `${lockPath}.stale.${process.pid}.${crypto.randomBytes(6).toString("hex")}`
    try {
      fs.renameSync(lockPath, aside)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") continue
      throw e
    }
    const moved = readOrUndefined(aside)
    if (moved !== held) {
      // another process broke it and took the lock between our read and our rename: put theirs back
      try {
        fs.linkSync(aside, lockPath)
      } catch {
        // a third took it meanwhile: theirs stands
      }
      removeQuietly(aside)
      const now = moved ? parseHolder(moved) : undefined
      return { holder: now ? describe(now) : "another process" }
    }
    removeQuietly(aside)
    broke = `${describe(holder)} (no longer running)`
  }
  return { holder: "other processes taking and releasing it faster than we could" }
}

/** Takes the advisory lock of `file` (FILE.lock), or fails with who holds it. */
export const lockFile = (file: string): Effect.Effect<FileLock, FileLockedError | FileAccessError> =>
  Effect.suspend((): Effect.Effect<FileLock, FileLockedError | FileAccessError> => {
    let got: FileLock | { readonly holder: string }
    try {
      got = tryLock(file)
    } catch (e) {
      return Effect.fail(new FileAccessError({ path: `${file}.lock`, operation: "write", reason: e instanceof Error ? e.message : String(e) }))
    }
    return "release" in got ? Effect.succeed(got) : Effect.fail(new FileLockedError({ path: file, holder: got.holder }))
  })
