// Tuning records: one JSON object per line, versioned and decoded with io-ts. Parsing is pure (a
// corrupt line becomes a warning, never a crash); appending with fsync lives in src/device.
import * as t from "io-ts"
import { isLeft } from "fp-ts/lib/Either.js"
import type { Config } from "../lowering/templates/template.js"

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
    /**
     * Set on a confirmation: after a task's trials, its fastest configs and its default measured
     * again together, in turns (the round's number for this workload, from 1). Not a trial.
     */
    confirm: t.number,
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

/**
 * The record to apply per workload (on this target): the fastest of its last confirmation round
 * when it has one, else its fastest successful record. A trial's time is one candidate measured
 * once among many, so the fastest of hundreds is partly the luckiest (at 2 threads on this machine
 * a record 2.4x slower than the default in the network won that way); a confirmation measured the
 * leaders and the default side by side.
 */
export const bestRecords = (records: readonly TuningRecord[], target: string): Map<string, TuningRecord> => {
  const best = new Map<string, TuningRecord>()
  const round = new Map<string, number>()
  const cost = (r: TuningRecord) => (r.costs.length ? Math.min(...r.costs) : Infinity)
  const ok = (r: TuningRecord) => r.target === target && !r.error && r.costs.length > 0
  for (const r of records) if (ok(r) && r.confirm !== undefined) round.set(r.workload, Math.max(r.confirm, round.get(r.workload) ?? 0))
  for (const r of records) {
    if (!ok(r) || r.confirm !== round.get(r.workload)) continue
    const prev = best.get(r.workload)
    if (!prev || cost(r) < cost(prev)) best.set(r.workload, r)
  }
  return best
}

/** Whether a record is a tuner's trial (not a confirmation's re-measurement). */
export const isTrial = (r: TuningRecord): boolean => r.confirm === undefined

export const recordConfig = (r: TuningRecord): Config => r.config
