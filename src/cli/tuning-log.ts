// The tuning log: records appended as JSON lines through the device's fsynced line log (a killed
// tuner loses at most the record in flight), read back with corrupt lines skipped and warned about.
import { Effect } from "effect"
import type { FileAccessError } from "../device/files.js"
import { appendLines, readLines } from "../device/line-log.js"
import { parseLog, serializeRecord, type ParsedLog, type TuningRecord } from "../search/records.js"

export const appendRecords = (file: string, records: readonly TuningRecord[]): Effect.Effect<void, FileAccessError> => appendLines(file, records.map(serializeRecord))

export const readLog = (file: string): Effect.Effect<ParsedLog, FileAccessError> => Effect.map(readLines(file), (text) => (text ? parseLog(text) : { records: [], warnings: [] }))
