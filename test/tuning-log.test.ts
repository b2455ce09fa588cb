// A tuning log is not trusted on resume (issue 19): a record a tuner could not have written is
// skipped with a typed, counted reason (costs that are not finite positive seconds, fields out of
// range, a task id that is not its workload's, the same measurement twice, a config outside its
// task's knob space); compile applies the best record that fits, passing over those that do not;
// and the log's advisory lock lets one tuner at a time append to it.
import { Effect, Exit } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { FileLockedError, lockFile } from "../src/device/file-lock.js"
import type { Knob } from "../src/lowering/templates/template.js"
import { logWarnings } from "../src/cli/tuning-log.js"
import { bestRecords, parseLog, rankedRecords, serializeRecord, skipSummary, withoutRecordsOutside, type TuningRecord } from "../src/search/records.js"
import { fitsKnobs, fnv1a } from "../src/search/task.js"

const W = "conv2d|js:lanes=4:cores=1|program"
const W2 = "dense|js:lanes=4:cores=1|program 2"
const rec = (over: Partial<TuningRecord> = {}, workload = W): TuningRecord => ({
  v: 1,
  task: fnv1a(workload),
  workload,
  target: "js",
  config: { tile: 2, order: "a" },
  costs: [1e-3],
  timestamp: "2026-11-25T12:00:00.000Z",
  tuner: "random",
  ...over,
})
const text = (...lines: (TuningRecord | string)[]) => lines.map((l) => (typeof l === "string" ? l : serializeRecord(l))).join("\n") + "\n"

describe("parseLog: records a tuner could not have written are skipped, each with its reason", () => {
  it.each([
    ["a negative cost", rec({ costs: [-1e-3] }), "cost"],
    ["a zero cost", rec({ costs: [0] }), "cost"],
    ["an infinite cost (1e999 in JSON)", serializeRecord(rec()).replace('"costs":[0.001]', '"costs":[1e999]'), "cost"],
    ["a cost of more than a day", rec({ costs: [1e6] }), "cost"],
    ["a thousand costs", rec({ costs: Array.from({ length: 1000 }, () => 1e-3) }), "field"],
    ["a failed record with a cost", rec({ error: "build failed" }), "field"],
    ["a NaN-like gflops (negative)", rec({ gflops: -3 }), "field"],
    ["a confirmation round of 1e12", rec({ confirm: 1e12 }), "field"],
    ["a fractional confirmation round", rec({ confirm: 1.5 }), "field"],
    ["a workload that is not TEMPLATE|TARGET|PROGRAM", rec({ task: fnv1a("x"), workload: "x" }), "field"],
    ["a target that is not a name", rec({ target: "js\u001b[2J" }), "field"],
    ["a timestamp that is not a date", rec({ timestamp: "yesterday" }), "field"],
    ["a config knob that is Infinity", serializeRecord(rec()).replace('"tile":2', '"tile":1e999'), "field"],
    ["a config of 10,000 keys", rec({ config: Object.fromEntries(Array.from({ length: 10_000 }, (_, k) => [`k${k}`, 1])) }), "field"],
    ["a config key that is not a name", rec({ config: { "__proto__ x": 1 } }), "field"],
    ["a huge config string", rec({ config: { order: "a".repeat(10_000) } }), "field"],
    ["a wrong task key", rec({ task: "deadbeef" }), "task-key"],
    ["another version", '{"v":2,"task":"x"}', "version"],
    ["not a record", '{"v":1,"costs":"fast"}', "not-a-record"],
    ["not JSON", '{"v":1,"task":"cut', "not-json"],
  ])("%s", (_, bad, reason) => {
    const log = parseLog(text(rec(), bad, rec({ config: { tile: 4, order: "a" } })))
    expect(log.records.map((r) => r.config.tile)).toEqual([2, 4])
    expect(log.lines).toEqual([1, 3])
    expect(log.skipped).toEqual([expect.objectContaining({ _tag: "SkippedRecord", line: 2, reason })])
    expect(log.warnings).toEqual([expect.stringMatching(/^line 2: .*, skipped$/)])
  })

  it("the same measurement twice (two tuners on one log): the first kept, the rest skipped; a confirmation of the same config is another measurement", () => {
    const log = parseLog(text(rec(), rec({ costs: [5e-4] }), rec({ confirm: 1 }), rec({ confirm: 1, costs: [2e-3] }), rec({ config: { order: "a", tile: 2 } })))
    expect(log.records.map((r) => [r.costs[0], r.confirm])).toEqual([
      [1e-3, undefined],
      [1e-3, 1],
    ])
    expect(log.skipped.map((s) => [s.line, s.reason])).toEqual([
      [2, "duplicate"],
      [4, "duplicate"],
      [5, "duplicate"], // (the same config, keys in another order)
    ])
  })

  it("a record as tuners write it passes: failed candidates (no cost, an error) included", () => {
    const log = parseLog(text(rec(), rec({ config: { tile: 8, order: "b" }, costs: [], error: "timed out" }), rec({ confirm: 3, gflops: 12.5 })))
    expect(log.skipped).toEqual([])
    expect(log.records).toHaveLength(3)
  })

  it("the summary counts the skipped lines by reason; a million planted lines print a dozen warnings", () => {
    const lines = [rec(), ...Array.from({ length: 30 }, (_, k) => rec({ costs: [-k - 1] })), rec({ task: "0" }), rec()]
    const log = parseLog(text(...lines))
    expect(skipSummary(log)).toBe("skipped 32 of 33 records (30 cost, 1 task-key, 1 duplicate); the rest are used")
    const shown = logWarnings(log)
    expect(shown).toHaveLength(12)
    expect(shown[10]).toBe("(22 more skipped lines not shown)")
    expect(shown[11]).toBe(skipSummary(log))
    expect(logWarnings(parseLog(text(rec())))).toEqual([])
  })
})

describe("records outside the knob space", () => {
  const knobs: Knob[] = [
    { kind: "split", name: "tile", extent: 8, candidates: [1, 2, 4] },
    { kind: "choice", name: "order", candidates: ["a", "b"] },
  ]
  it("fitsKnobs: every knob's value a candidate, and no key that is not a knob", () => {
    expect(fitsKnobs(knobs, { tile: 2, order: "a" })).toBe(true)
    expect(fitsKnobs(knobs, { tile: -4, order: "a" })).toBe(false)
    expect(fitsKnobs(knobs, { tile: 2, order: "z" })).toBe(false)
    expect(fitsKnobs(knobs, { tile: "2", order: "a" })).toBe(false)
    expect(fitsKnobs(knobs, { tile: 2, order: "a", extra: 1 })).toBe(false)
    expect(fitsKnobs(knobs, { tile: 2 })).toBe(false) // (order has no absent value)
  })

  it("withoutRecordsOutside skips this target's records of known workloads that do not fit, and keeps the rest", () => {
    const log = parseLog(
      text(
        rec(),
        rec({ config: { tile: -4, order: "a" } }),
        rec({ config: { tile: 99, order: "a" }, target: "c" }), // another target's: not ours to judge
        rec({ config: { weird: 1 } }, W2), // a workload this model has no task for: left alone
        rec({ costs: [-1] }),
      ),
    )
    const out = withoutRecordsOutside(log, "js", (w, c) => (w === W ? fitsKnobs(knobs, c) : undefined))
    expect(out.records.map((r) => r.config)).toEqual([{ tile: 2, order: "a" }, { tile: 99, order: "a" }, { weird: 1 }])
    expect(out.lines).toEqual([1, 3, 4])
    expect(out.skipped.map((s) => [s.line, s.reason])).toEqual([
      [2, "outside-space"],
      [5, "cost"],
    ])
    expect(out.warnings[0]).toMatch(/^line 2: config [0-9a-f]{8} of task [0-9a-f]{8} is outside its knob space, skipped$/)
  })

  it("rankedRecords: the last confirmation round by time, then the trials by time; bestRecords takes the first", () => {
    const log = parseLog(
      text(
        rec({ config: { tile: 1, order: "a" }, costs: [3e-3] }),
        rec({ config: { tile: 2, order: "a" }, costs: [1e-3] }),
        rec({ config: { tile: 4, order: "a" }, costs: [2e-3] }),
        rec({ config: { tile: 2, order: "a" }, costs: [1.5e-3], confirm: 1 }),
        rec({ config: { tile: 4, order: "a" }, costs: [1.2e-3], confirm: 1 }),
        rec({ config: { tile: 4, order: "b" }, costs: [], error: "x" }),
      ),
    )
    const ranked = rankedRecords(log.records, "js").get(W)!
    expect(ranked.map((r) => [r.config.tile, r.confirm ?? 0])).toEqual([
      [4, 1],
      [2, 1],
      [2, 0],
      [4, 0],
      [1, 0],
    ])
    expect(bestRecords(log.records, "js").get(W)).toBe(ranked[0])
  })
})

describe("the log's advisory lock", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-lock-"))
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))
  const file = (name: string) => path.join(dir, name)

  it("one holder at a time: a second lock refuses naming the holder; after release it is free", async () => {
    const a = await Effect.runPromise(lockFile(file("a.jsonl")))
    expect(fs.existsSync(file("a.jsonl.lock"))).toBe(true)
    const b = await Effect.runPromiseExit(lockFile(file("a.jsonl")))
    expect(Exit.isFailure(b)).toBe(true)
    const err = Exit.isFailure(b) ? (b.cause.reasons[0] as { error?: unknown }).error : undefined
    expect(err).toBeInstanceOf(FileLockedError)
    expect((err as FileLockedError).message).toMatch(new RegExp(`held by pid ${process.pid} on host `))
    a.release()
    a.release() // (idempotent)
    expect(fs.existsSync(file("a.jsonl.lock"))).toBe(false)
    const c = await Effect.runPromise(lockFile(file("a.jsonl")))
    c.release()
    // no temporary files left beside the log
    expect(fs.readdirSync(dir).filter((n) => n.startsWith("a.jsonl"))).toEqual([])
  })

  it("a lock whose holder is gone (a killed tuner) is broken and taken, saying whose it was", async () => {
    const child = spawn(process.execPath, ["-e", ""])
    const pid = child.pid!
    await new Promise((resolve) => child.on("exit", resolve))
    fs.writeFileSync(file("b.jsonl.lock"), JSON.stringify({ pid, host: os.hostname(), since: "2026-11-25T00:00:00Z" }))
    const l = await Effect.runPromise(lockFile(file("b.jsonl")))
    expect(l.broke).toBe(`pid ${pid} on host ${os.hostname()} since 2026-11-25T00:00:00Z (no longer running)`)
    expect(JSON.parse(fs.readFileSync(file("b.jsonl.lock"), "utf8")).pid).toBe(process.pid)
    l.release()
  })

  it("a reused pid (running, but started at another time) is a gone holder too", async () => {
    fs.writeFileSync(file("r.jsonl.lock"), JSON.stringify({ pid: process.pid, host: os.hostname(), start: 1, since: "x" }))
    const exit = await Effect.runPromiseExit(lockFile(file("r.jsonl")))
    if (fs.existsSync(`/proc/${process.pid}/stat`)) {
      expect(Exit.isSuccess(exit)).toBe(true)
      if (Exit.isSuccess(exit)) exit.value.release()
    } else expect(Exit.isFailure(exit)).toBe(true) // (no /proc: a running pid is taken to be the holder)
  })

  it("a live holder, another host's lock and a lock file we did not write all refuse; release never removes a lock that is not ours", async () => {
    for (const [name, content, holder] of [
      ["c", JSON.stringify({ pid: process.pid, host: os.hostname(), since: "t" }), `pid ${process.pid}`],
      ["d", JSON.stringify({ pid: 1, host: "elsewhere.example", since: "t" }), "host elsewhere.example"],
      ["e", "garbage", "unknown holder"],
    ] as const) {
      fs.writeFileSync(file(`${name}.jsonl.lock`), content)
      const exit = await Effect.runPromiseExit(lockFile(file(`${name}.jsonl`)))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(String(Exit.isFailure(exit) ? (exit.cause.reasons[0] as { error?: Error }).error?.message : "")).toContain(holder)
      expect(fs.readFileSync(file(`${name}.jsonl.lock`), "utf8")).toBe(content)
    }
    const mine = await Effect.runPromise(lockFile(file("f.jsonl")))
    fs.writeFileSync(file("f.jsonl.lock"), "someone else's")
    mine.release()
    expect(fs.readFileSync(file("f.jsonl.lock"), "utf8")).toBe("someone else's")
  })
})
