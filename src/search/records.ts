// Tuning records: one JSON object per line, versioned and decoded with io-ts. Parsing is pure (a
// corrupt line becomes a warning, never a crash); appending with fsync lives in src/device.
import * as t from "io-ts"
import { isLeft } from "fp-ts/lib/Either.js"
import type { Config } from "../lowering/templates.js"

export const RECORD_VERSION = 1

const ConfigValue = t.union([t.string, t.number, t.boolean])

export const TuningRecordCodec = t.intersection([
  t.type({
    v: t.literal(RECORD_VERSION),
    task: t.string,
    workload: t.string,
    target: t.string,
    config: t.record(t.string, ConfigValue),
    /** Seconds per run (median of repeats); empty when the candidate failed. */
    costs: t.array(t.number),
    timestamp: t.string,
  }),
  t.partial({
    error: t.string,
    tuner: t.string,
    /** GFLOP/s of this candidate. */
    gflops: t.number,
  }),
])

export type TuningRecord = t.TypeOf<typeof TuningRecordCodec>

export const serializeRecord = (r: TuningRecord): string => JSON.stringify(r)

export interface ParsedLog {
  readonly records: readonly TuningRecord[]
  /** "line N: why" for each skipped line. */
  readonly warnings: readonly string[]
}

export const parseLog = (text: string): ParsedLog => {
  const records: TuningRecord[] = []
  const warnings: string[] = []
  text.split("\n").forEach((line, k) => {
    if (line.trim() === "") return
    let json: unknown
    try {
      json = JSON.parse(line)
    } catch {
      warnings.push(`line ${k + 1}: not JSON (a record cut off mid-write?), skipped`)
      return
    }
    const r = TuningRecordCodec.decode(json)
    if (isLeft(r)) {
      const v = typeof json === "object" && json !== null && "v" in json ? (json as { v: unknown }).v : undefined
      warnings.push(v !== undefined && v !== RECORD_VERSION ? `line ${k + 1}: record version ${String(v)} is not ${RECORD_VERSION}, skipped` : `line ${k + 1}: not a tuning record, skipped`)
      return
    }
    records.push(r.right)
  })
  return { records, warnings }
}

/** The fastest successful record per workload (on this target). */
export const bestRecords = (records: readonly TuningRecord[], target: string): Map<string, TuningRecord> => {
  const best = new Map<string, TuningRecord>()
  const cost = (r: TuningRecord) => (r.costs.length ? Math.min(...r.costs) : Infinity)
  for (const r of records) {
    if (r.target !== target || r.error || r.costs.length === 0) continue
    const prev = best.get(r.workload)
    if (!prev || cost(r) < cost(prev)) best.set(r.workload, r)
  }
  return best
}

export const recordConfig = (r: TuningRecord): Config => r.config
