// Tuning records: one JSON object per line, versioned and decoded with io-ts. Parsing is pure (a
// corrupt line becomes a warning, never a crash); appending with fsync lives in src/device.
import * as t from "io-ts"
import { isLeft } from "fp-ts/lib/Either.js"
import type { Config } from "../lowering/templates/template.js"
import { configHash, configKey, fnv1a } from "./task.js"

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

/** Why a line of a log was not taken as a record. */
export type SkipReason =
  | "not-json" // cut off mid-write, or not a log at all
  | "not-a-record" // JSON, but not the record schema
  | "version" // a record of another format version
  | "cost" // a cost that is not a finite positive number of seconds
  | "field" // a field no tuner writes: out of range, too large, contradictory
  | "task-key" // the task id is not the hash of the workload
  | "duplicate" // the same config, target and round recorded before (two tuners on one log)
  | "outside-space" // the config is not a point of its task's current knob space

/** A line of a log that was skipped (typed, counted and summarized by `skipSummary`). */
export interface SkippedRecord {
  readonly _tag: "SkippedRecord"
  /** 1-based line of the log. */
  readonly line: number
  readonly reason: SkipReason
  readonly detail: string
}

export interface ParsedLog {
  readonly records: readonly TuningRecord[]
  /** The log line of each record (same order). */
  readonly lines: readonly number[]
  readonly skipped: readonly SkippedRecord[]
  /** "line N: why, skipped" for each skipped line. */
  readonly warnings: readonly string[]
}

/** Bounds of what a tuner writes; a record past them is damaged or planted, never trusted. */
export const RECORD_LIMITS = {
  /** Costs per record (a tuner writes one; a confirmation one). */
  costs: 64,
  /** Seconds a run may take: a day. */
  maxCost: 86_400,
  /** Confirmation rounds of one workload. */
  confirm: 1_000_000,
  workloadChars: 1 << 20,
  configKeys: 256,
  configKeyChars: 64,
  configStringChars: 256,
  shortChars: 64,
  errorChars: 1 << 16,
} as const

/** Why a schema-valid record cannot be one a tuner wrote, or undefined when it can. */
const implausible = (r: TuningRecord): { reason: SkipReason; detail: string } | undefined => {
  const L = RECORD_LIMITS
  if (r.costs.length > L.costs) return { reason: "field", detail: `${r.costs.length} costs (a tuner writes at most ${L.costs})` }
  const bad = r.costs.find((c) => !(Number.isFinite(c) && c > 0 && c <= L.maxCost))
  if (bad !== undefined) return { reason: "cost", detail: `cost ${bad} is not a positive number of seconds up to ${L.maxCost}` }
  if (r.costs.length > 0 && r.error !== undefined) return { reason: "field", detail: "a failed candidate (error set) with a cost" }
  if (r.gflops !== undefined && !(Number.isFinite(r.gflops) && r.gflops >= 0)) return { reason: "field", detail: `gflops ${r.gflops} is not a finite rate` }
  if (r.confirm !== undefined && !(Number.isInteger(r.confirm) && r.confirm >= 1 && r.confirm <= L.confirm)) return { reason: "field", detail: `confirmation round ${r.confirm} is not a whole number from 1 to ${L.confirm}` }
  if (r.workload.length > L.workloadChars) return { reason: "field", detail: `a workload of ${r.workload.length} characters` }
  if (r.workload.split("|").length < 3) return { reason: "field", detail: "the workload is not TEMPLATE|TARGET|PROGRAM" }
  if (!/^[a-z][a-z0-9_-]{0,31}$/.test(r.target)) return { reason: "field", detail: "the target is not a target name" }
  if (r.timestamp.length > L.shortChars || Number.isNaN(Date.parse(r.timestamp))) return { reason: "field", detail: "the timestamp is not a date" }
  if (r.tuner !== undefined && !/^[a-z][a-z0-9_-]{0,31}$/.test(r.tuner)) return { reason: "field", detail: "the tuner is not a tuner name" }
  if (r.error !== undefined && r.error.length > L.errorChars) return { reason: "field", detail: `an error of ${r.error.length} characters` }
  const keys = Object.keys(r.config)
  if (keys.length > L.configKeys) return { reason: "field", detail: `a config of ${keys.length} knobs` }
  for (const k of keys) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) || k.length > L.configKeyChars) return { reason: "field", detail: "a config key that is not a knob name" }
    const v = r.config[k]
    if (typeof v === "number" && !Number.isFinite(v)) return { reason: "field", detail: `knob ${k} is ${v}` }
    if (typeof v === "string" && v.length > L.configStringChars) return { reason: "field", detail: `knob ${k}'s value has ${v.length} characters` }
  }
  if (r.task !== fnv1a(r.workload)) return { reason: "task-key", detail: `task '${r.task.slice(0, 16)}' is not its workload's id (${fnv1a(r.workload)})` }
  return undefined
}

/** What makes two records the same measurement: target, workload, config (keys sorted) and round. */
const identity = (r: TuningRecord): string => JSON.stringify([r.target, r.workload, configKey(r.config), r.confirm ?? 0])

const skip = (line: number, reason: SkipReason, detail: string): SkippedRecord => ({ _tag: "SkippedRecord", line, reason, detail })

export const skipWarning = (s: SkippedRecord): string => `line ${s.line}: ${s.detail}, skipped`

/**
 * A log's records: lines that are not JSON, not a record of this version, or not a record a tuner
 * could have written (costs that are not finite positive seconds, fields out of range, a task id
 * that is not its workload's, the same measurement twice) are skipped, each with a typed reason.
 * Pure: the same text gives the same records and the same warnings.
 */
export const parseLog = (text: string): ParsedLog => {
  const records: TuningRecord[] = []
  const lines: number[] = []
  const skipped: SkippedRecord[] = []
  const seen = new Map<string, number>()
  text.split("\n").forEach((line, k) => {
    if (line.trim() === "") return
    const n = k + 1
    let json: unknown
    try {
      json = JSON.parse(line)
    } catch {
      skipped.push(skip(n, "not-json", "not JSON (a record cut off mid-write?)"))
      return
    }
    const r = TuningRecordCodec.decode(json)
    if (isLeft(r)) {
      const v = typeof json === "object" && json !== null && "v" in json ? (json as { v: unknown }).v : undefined
      skipped.push(v !== undefined && v !== RECORD_VERSION ? skip(n, "version", `record version ${String(v).slice(0, 16)} is not ${RECORD_VERSION}`) : skip(n, "not-a-record", "not a tuning record"))
      return
    }
    const why = implausible(r.right)
    if (why) {
      skipped.push(skip(n, why.reason, why.detail))
      return
    }
    const id = identity(r.right)
    const first = seen.get(id)
    if (first !== undefined) {
      skipped.push(skip(n, "duplicate", `the same measurement as line ${first} (two tuners on one log?)`))
      return
    }
    seen.set(id, n)
    records.push(r.right)
    lines.push(n)
  })
  return { records, lines, skipped, warnings: skipped.map(skipWarning) }
}

/** An empty log. */
export const emptyLog: ParsedLog = { records: [], lines: [], skipped: [], warnings: [] }

/**
 * The log without the records of these workloads (on this target) whose config `fits` rejects:
 * a record outside its task's current knob space (a template changed since, or a planted line) is
 * skipped before a tuner resumes from it or compile applies it.
 */
export const withoutRecordsOutside = (log: ParsedLog, target: string, fits: (workload: string, config: Config) => boolean | undefined): ParsedLog => {
  const records: TuningRecord[] = []
  const lines: number[] = []
  const skipped: SkippedRecord[] = [...log.skipped]
  log.records.forEach((r, k) => {
    if (r.target === target && fits(r.workload, r.config) === false) skipped.push(skip(log.lines[k], "outside-space", `config ${configHash(r.config)} of task ${r.task} is outside its knob space`))
    else {
      records.push(r)
      lines.push(log.lines[k])
    }
  })
  skipped.sort((a, b) => a.line - b.line)
  return { records, lines, skipped, warnings: skipped.map(skipWarning) }
}

/** One line for a log's skipped records: how many, of how many lines, and why ("" when none). */
export const skipSummary = (log: ParsedLog): string => {
  if (log.skipped.length === 0) return ""
  const by = new Map<SkipReason, number>()
  for (const s of log.skipped) by.set(s.reason, (by.get(s.reason) ?? 0) + 1)
  const parts = [...by].sort((a, b) => b[1] - a[1]).map(([reason, n]) => `${n} ${reason}`)
  return `skipped ${log.skipped.length} of ${log.skipped.length + log.records.length} records (${parts.join(", ")}); the rest are used`
}

/**
 * The record to apply per workload (on this target): the fastest of its last confirmation round
 * when it has one, else its fastest successful record. A trial's time is one candidate measured
 * once among many, so the fastest of hundreds is partly the luckiest (at 2 threads on this machine
 * a record 2.4x slower than the default in the network won that way); a confirmation measured the
 * leaders and the default side by side.
 */
export const bestRecords = (records: readonly TuningRecord[], target: string): Map<string, TuningRecord> =>
  new Map([...rankedRecords(records, target)].map(([w, rs]) => [w, rs[0]] as const))

/**
 * Per workload (on this target), its successful records in the order they should be applied: the
 * last confirmation round's by time, then the trials' by time. The first is `bestRecords`';
 * compile ranks only the records that fit the template's knobs (pipeline.ts).
 */
export const rankedRecords = (records: readonly TuningRecord[], target: string): Map<string, TuningRecord[]> => {
  const round = new Map<string, number>()
  const cost = (r: TuningRecord) => Math.min(...r.costs)
  const ok = (r: TuningRecord) => r.target === target && !r.error && r.costs.length > 0
  for (const r of records) if (ok(r) && r.confirm !== undefined) round.set(r.workload, Math.max(r.confirm, round.get(r.workload) ?? 0))
  const confirmed = new Map<string, TuningRecord[]>()
  const trials = new Map<string, TuningRecord[]>()
  for (const r of records) {
    if (!ok(r)) continue
    const into = r.confirm === undefined ? trials : r.confirm === round.get(r.workload) ? confirmed : undefined
    if (!into) continue
    const list = into.get(r.workload)
    if (list) list.push(r)
    else into.set(r.workload, [r])
  }
  // (sort is stable: of equal times, the earlier record first)
  const byCost = (rs: readonly TuningRecord[] | undefined) => [...(rs ?? [])].sort((a, b) => cost(a) - cost(b))
  const out = new Map<string, TuningRecord[]>()
  for (const w of new Set([...confirmed.keys(), ...trials.keys()])) out.set(w, [...byCost(confirmed.get(w)), ...byCost(trials.get(w))])
  return out
}

/** This target's records grouped by workload (compile picks, per workload, the best that fits). */
export const recordsByWorkload = (records: readonly TuningRecord[], target: string): Map<string, TuningRecord[]> => {
  const out = new Map<string, TuningRecord[]>()
  for (const r of records) {
    if (r.target !== target) continue
    const list = out.get(r.workload)
    if (list) list.push(r)
    else out.set(r.workload, [r])
  }
  return out
}

/** Whether a record is a tuner's trial (not a confirmation's re-measurement). */
export const isTrial = (r: TuningRecord): boolean => r.confirm === undefined

export const recordConfig = (r: TuningRecord): Config => r.config
