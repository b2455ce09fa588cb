// A log of lines on disk (the tuning log's records, one JSON line each): appends are written and
// fsynced line by line, so a killed writer loses at most the line in flight and never corrupts
// earlier ones. What a line means is the caller's (src/search/records.ts parses the tuning log).
import { Effect } from "effect"
import * as fs from "node:fs"
import { FileAccessError } from "./files.js"

/** Appends lines (each without its newline) to `file`, created if missing. */
export const appendLines = (file: string, lines: readonly string[]): Effect.Effect<void, FileAccessError> =>
  Effect.try({
    try: () => {
      if (lines.length === 0) return
      const fd = fs.openSync(file, "a")
      try {
        // a log cut mid-line by a kill gets a newline first, so the next record starts clean
        const size = fs.fstatSync(fd).size
        let prefix = ""
        if (size > 0) {
          const last = Buffer.alloc(1)
          const rfd = fs.openSync(file, "r")
          try {
            fs.readSync(rfd, last, 0, 1, size - 1)
          } finally {
            fs.closeSync(rfd)
          }
          if (last[0] !== 0x0a) prefix = "\n"
        }
        for (const line of lines) {
          fs.writeSync(fd, `${prefix}${line}\n`)
          prefix = ""
          fs.fsyncSync(fd)
        }
      } finally {
        fs.closeSync(fd)
      }
    },
    catch: (e) => new FileAccessError({ path: file, operation: "write", reason: e instanceof Error ? e.message : String(e) }),
  })

/** The log's text; empty when the file does not exist yet. */
export const readLines = (file: string): Effect.Effect<string, FileAccessError> =>
  Effect.try({
    try: () => (fs.existsSync(file) ? fs.readFileSync(file, "utf8") : ""),
    catch: (e) => new FileAccessError({ path: file, operation: "read", reason: e instanceof Error ? e.message : String(e) }),
  })
