// The tuning log on disk: appends are written and fsynced line by line, so a killed tuner loses
// at most the record in flight and never corrupts earlier ones; reading skips corrupt lines with
// warnings (parseLog).
import { Effect } from "effect"
import * as fs from "node:fs"
import { parseLog, serializeRecord, type ParsedLog, type TuningRecord } from "../search/records.js"
import { FileAccessError } from "./files.js"

export const appendRecords = (file: string, records: readonly TuningRecord[]): Effect.Effect<void, FileAccessError> =>
  Effect.try({
    try: () => {
      if (records.length === 0) return
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
        for (const r of records) {
          fs.writeSync(fd, `${prefix}${serializeRecord(r)}\n`)
          prefix = ""
          fs.fsyncSync(fd)
        }
      } finally {
        fs.closeSync(fd)
      }
    },
    catch: (e) => new FileAccessError({ path: file, operation: "write", reason: e instanceof Error ? e.message : String(e) }),
  })

export const readLog = (file: string): Effect.Effect<ParsedLog, FileAccessError> =>
  Effect.try({
    try: () => (fs.existsSync(file) ? parseLog(fs.readFileSync(file, "utf8")) : { records: [], warnings: [] }),
    catch: (e) => new FileAccessError({ path: file, operation: "read", reason: e instanceof Error ? e.message : String(e) }),
  })
