// The tuning log: records appended as JSON lines through the device's fsynced line log (a killed
// tuner loses at most the record in flight), read back with corrupt lines skipped and warned about.
import { Effect } from "effect"
import type { FileAccessError } from "../device/files.js"
import { appendLines, readLines } from "../device/line-log.js"
import { emptyLog, parseLog, serializeRecord, skipSummary, type ParsedLog, type TuningRecord } from "../search/records.js"

export const appendRecords = (file: string, records: readonly TuningRecord[]): Effect.Effect<void, FileAccessError> => appendLines(file, records.map(serializeRecord))

export const readLog = (file: string): Effect.Effect<ParsedLog, FileAccessError> => Effect.map(readLines(file), (text) => (text ? parseLog(text) : emptyLog))


/** Skipped lines reported one by one, at most; the rest only counted in the summary. */
const SHOWN_WARNINGS = 10

/**
 * The warning lines for a log's skipped records: the first few with their line and reason, then
 * one summary (how many, of how many, why), so a log of a million planted lines prints a dozen.
 */
export const logWarnings = (log: ParsedLog): string[] => {
  if (log.skipped.length === 0) return []
  const shown = log.warnings.slice(0, SHOWN_WARNINGS)
  const more = log.warnings.length - shown.length
  return [...shown, ...(more > 0 ? [`(${more} more skipped lines not shown)`] : []), skipSummary(log)]
}
