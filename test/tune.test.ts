// The auto-tuner end to end on a small matmul workload (js target, measured in workers): every
// tuner finds a working schedule within its trials; records are complete; a hung or wrong
// candidate is an error, not a crash; a corrupt log line is skipped with a warning.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { buildCompute } from "../src/ast/te/arbitrary.js"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { c, v } from "../src/ast/te/expr.js"
import type { PrimFunc } from "../src/ast/tir/tir.js"
import { baseSchedule } from "../src/lowering/lower-group.js"
import { lowerSync } from "../src/lowering/lower.js"
import { cpuTirPipeline } from "../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../src/lowering/tir/tir-pass.js"
import { measureJs } from "../src/device/js/measure.js"
import { emitJsModule } from "../src/emit/js/emit.js"
import { CostModel, XGBoostCostModel } from "../src/search/cost-model.js"
import { featuresOf } from "../src/search/features.js"
import { bestRecords, parseLog, serializeRecord, type TuningRecord } from "../src/search/records.js"
import { configAt, configHash, fnv1a, indexOfConfig, taskFromTE } from "../src/search/task.js"
import type { Config, Knob } from "../src/lowering/templates/template.js"
import { gaTuner, gridTuner, randomTuner, xgbTuner, type Tuner } from "../src/search/tuners.js"
import { tuneTask } from "../src/search/tune.js"
import { evoTuner, moveFactor, mutate } from "../src/search/evolutionary.js"
import { canonicalConfig } from "../src/lowering/templates/sketch.js"
import { prng } from "../src/ast/graph/arbitrary.js"

const cc = buildCompute("matmul", 4242)
const base = baseSchedule(cc.outputs)
const [M, N] = cc.outputs[0].shape
const K = (cc.inputs.get("A")!.shape as number[])[1]
const task = taskFromTE(cc.outputs, base, { kind: "js", vectorLanes: 4, cores: 1 }, 2 * M * N * K, "matmul")
const lowerConfig = (config: Record<string, string | number | boolean>): PrimFunc =>
  runTirSync(cpuTirPipeline(), lowerSync(task.template.apply(task.outputs, task.base, config)))
const outputs = new Set(cc.outputs.map((o) => o.name))
const reference = (inputs: ReadonlyMap<string, import("../src/ast/graph/tensor.js").Tensor>) => new Map(cc.outputs.map((o, k) => [o.name, evaluateTE(cc.outputs, inputs)[k]] as const))
const measure = (cands: readonly { config: Record<string, string | number | boolean>; func: PrimFunc }[]) =>
  measureJs(cands, outputs, reference, emitJsModule, { repeats: 1, minRepeatMs: 1, timeoutMs: 20_000, rtol: 1e-3, atol: 1e-4 })

const run = (tuner: Tuner, trials = 8) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const records: TuningRecord[] = []
      const result = yield* tuneTask(task, tuner, lowerConfig, measure, {
        trials,
        batch: 4,
        target: "js",
        now: () => "2026-01-01T00:00:00Z",
        onRecords: (rs) => Effect.sync(() => void records.push(...rs)),
      })
      return { result, records }
    }),
  )

describe("auto-tuning (js target)", () => {
  for (const make of [() => randomTuner(task, 3), () => gridTuner(task), () => gaTuner(task, 3)])
    it(`${make().name} tuner: finds working schedules, writes one record per trial`, async () => {
      const { result, records } = await run(make())
      expect(records.length).toBe(result.trials)
      expect(result.errors).toBe(0)
      expect(result.best).toBeDefined()
      // best-so-far never gets worse
      result.curve.forEach((g, k) => k > 0 && expect(g).toBeGreaterThanOrEqual(result.curve[k - 1]))
    }, 120_000)

  it("the default config is measured first, and once more on a log that already holds the trials", async () => {
    const d = task.template.defaults(task.knobs, { vectorLanes: 4, cores: 1 })
    const tuneWith = (done: readonly TuningRecord[], trials: number) =>
      Effect.runPromise(
        Effect.gen(function* () {
          const records: TuningRecord[] = []
          const result = yield* tuneTask(task, randomTuner(task, 5), lowerConfig, measure, {
            trials,
            batch: 2,
            target: "js",
            now: () => "2026-01-01T00:00:00Z",
            done,
            first: [d, d],
            onRecords: (rs) => Effect.sync(() => void records.push(...rs)),
          })
          return { result, records }
        }),
      )
    const fresh = await tuneWith([], 3)
    expect(fresh.records[0].config).toEqual(d)
    expect(fresh.records.filter((r) => JSON.stringify(r.config) === JSON.stringify(d))).toHaveLength(1)
    // a log with the trials already, none of them the default: the default alone is measured
    const others = fresh.records.slice(1)
    const resumed = await tuneWith(others, 2)
    expect(resumed.records.map((r) => r.config)).toEqual([d])
    // measured already: nothing more
    expect((await tuneWith(fresh.records, 3)).records).toEqual([])
  }, 120_000)

  it("confirmation: the leaders and the default measured again side by side; the log applies its winner, not the luckiest trial", async () => {
    const d = task.template.defaults(task.knobs, { vectorLanes: 4, cores: 1 })
    const key = (cfg: Config) => configHash(cfg)
    // a config's true time (deterministic, from its hash), and the luck of its one trial: every
    // config but the default whose hash starts with 0-7 measured at a third of its time
    const truth = (cfg: Config) => (key(cfg) === key(d) ? 1.2 : 1 + parseInt(key(cfg).slice(0, 4), 16) / 0x10000)
    const lucky = (cfg: Config) => key(cfg) !== key(d) && parseInt(key(cfg)[0], 16) < 8
    const fake = (luck: boolean) => (cands: readonly { config: Config; func: PrimFunc }[]) =>
      Effect.succeed(cands.map((x) => ({ config: x.config, cost: truth(x.config) * (luck && lucky(x.config) ? 0.3 : 1) })))
    const confirmed: Config[][] = []
    const confirmMeasure = (cands: readonly { config: Config; func: PrimFunc }[]) => {
      confirmed.push(cands.map((x) => x.config))
      return fake(false)(cands)
    }
    const tuneWith = (done: readonly TuningRecord[], trials: number) =>
      Effect.runPromise(
        Effect.gen(function* () {
          const records: TuningRecord[] = []
          const result = yield* tuneTask(task, randomTuner(task, 11), lowerConfig, fake(true), {
            trials,
            batch: 4,
            target: "js",
            now: () => "t",
            done,
            first: [d],
            confirm: { top: 3, measure: confirmMeasure },
            onRecords: (rs) => Effect.sync(() => void records.push(...rs)),
          })
          return { result, records }
        }),
      )
    const one = await tuneWith([], 12)
    const trials = one.records.filter((r) => r.confirm === undefined)
    expect(trials).toHaveLength(12)
    // the default and the three fastest trials (by their lucky times), each once
    const byTrial = [...trials].filter((r) => key(r.config) !== key(d)).sort((a, b) => a.costs[0] - b.costs[0])
    expect(confirmed).toHaveLength(1)
    expect(confirmed[0].map(key)).toEqual([d, ...byTrial.slice(0, 3).map((r) => r.config)].map(key))
    const round = one.records.filter((r) => r.confirm !== undefined)
    expect(round.map((r) => r.confirm)).toEqual([1, 1, 1, 1])
    const winner = confirmed[0].reduce((a, b) => (truth(b) < truth(a) ? b : a))
    expect(one.result.confirmed).toEqual({ config: winner, cost: truth(winner), defaultCost: 1.2 })
    // the curve and the trial count are the trials' alone
    expect(one.result.trials).toBe(12)
    // the log applies the round's winner, though a lucky trial measured faster than it
    const best = bestRecords(one.records, "js").get(task.workload)!
    expect(best.config).toEqual(winner)
    expect(Math.min(...trials.map((r) => r.costs[0]))).toBeLessThan(best.costs[0])
    // resumed with nothing to measure: the round stands, nothing is written
    expect((await tuneWith(one.records, 12)).records).toEqual([])
    expect(confirmed).toHaveLength(1)
    // more trials: a second round, which the log then applies
    const two = await tuneWith(one.records, 16)
    expect(two.records.filter((r) => r.confirm === undefined)).toHaveLength(4)
    expect(two.records.filter((r) => r.confirm !== undefined).map((r) => r.confirm)).toEqual([2, 2, 2, 2])
    const all = [...one.records, ...two.records]
    expect(bestRecords(all, "js").get(task.workload)).toEqual(two.records.filter((r) => r.confirm === 2).reduce((a, b) => (b.costs[0] < a.costs[0] ? b : a)))
  }, 60_000)

  it("a knob added later: the log's configs without it count as its absent value, never measured again", async () => {
    const grid = async (t: typeof task, done: readonly TuningRecord[], trials: number) =>
      Effect.runPromise(
        Effect.gen(function* () {
          const records: TuningRecord[] = []
          yield* tuneTask(t, gridTuner(t), lowerConfig, measure, { trials, batch: 4, target: "js", now: () => "t", done, onRecords: (rs) => Effect.sync(() => void records.push(...rs)) })
          return records
        }),
      )
    const old = await grid(task, [], 4)
    // the same task with a knob in front whose absent value is "a" (the grid tries a, then b, per config)
    const later = { ...task, knobs: [{ kind: "choice", name: "extra", candidates: ["a", "b"], absent: "a" } as const, ...task.knobs] }
    const more = await grid(later, old, 8)
    expect(more).toHaveLength(4)
    expect(more.map((r) => r.config.extra)).toEqual(["b", "b", "b", "b"])
    const olds = new Set(old.map((r) => configHash({ ...r.config, extra: "b" })))
    expect(more.every((r) => olds.has(configHash(r.config)))).toBe(true)
  }, 60_000)

  it("xgb tuner: the cost model learns from measured features", async () => {
    const out = await Effect.runPromise(
      Effect.gen(function* () {
        const model = yield* CostModel
        const tuner = xgbTuner(task, { seed: 5, model, features: (cfg) => featuresOf(lowerConfig(cfg), task.knobs, cfg) })
        const records: TuningRecord[] = []
        const result = yield* tuneTask(task, tuner, lowerConfig, measure, {
          trials: 12,
          batch: 4,
          target: "js",
          now: () => "t",
          onRecords: (rs) => Effect.sync(() => void records.push(...rs)),
        })
        return { result, trained: model.trained(), records }
      }).pipe(Effect.provide(XGBoostCostModel)),
    )
    expect(out.trained).toBe(true)
    expect(out.result.best).toBeDefined()
    expect(out.records.length).toBe(out.result.trials)
  }, 120_000)

  it("evo tuner: the default first, then generated-space candidates that all compute right; the model retrains on them", async () => {
    const d = task.template.defaults(task.knobs, { vectorLanes: 4, cores: 1 })
    const out = await Effect.runPromise(
      Effect.gen(function* () {
        const model = yield* CostModel
        const tuner = evoTuner(task, { seed: 7, model, seeds: [d], population: 16, generations: 2, features: (cfg) => featuresOf(lowerConfig(cfg), task.knobs, cfg) })
        const records: TuningRecord[] = []
        const result = yield* tuneTask(task, tuner, lowerConfig, measure, {
          trials: 16,
          batch: 4,
          target: "js",
          now: () => "t",
          onRecords: (rs) => Effect.sync(() => void records.push(...rs)),
        })
        return { result, trained: model.trained(), records }
      }).pipe(Effect.provide(XGBoostCostModel)),
    )
    expect(out.trained).toBe(true)
    expect(out.result.errors).toBe(0)
    expect(out.records.length).toBe(16)
    expect(configHash(out.records[0].config)).toBe(configHash(d))
    // the union space: both sketches proposed
    expect(out.records.some((r) => r.config.sketch === "generated")).toBe(true)
    expect(new Set(out.records.map((r) => configHash(r.config))).size).toBe(16)
  }, 120_000)

  it("features: one row of FEATURE_COUNT per config, the same bytes twice; the per-store block sees vectorized and unrolled extents", async () => {
    const { FEATURE_COUNT } = await import("../src/search/features.js")
    const d = task.template.defaults(task.knobs, { vectorLanes: 4, cores: 1 })
    const gen = canonicalConfig(task.knobs, { ...d, sketch: "generated", sk_vectorize: true, sk_unroll: 64, sk_s1: task.knobs.find((k) => k.name === "sk_s1")!.candidates.at(-1)! })
    const a = featuresOf(lowerConfig(gen), task.knobs, gen)
    expect(a.length).toBe(FEATURE_COUNT)
    expect(featuresOf(lowerConfig(gen), task.knobs, gen)).toEqual(a)
    const plain = canonicalConfig(task.knobs, { ...gen, sk_vectorize: false, sk_unroll: 0 })
    const b = featuresOf(lowerConfig(plain), task.knobs, plain)
    expect(b.length).toBe(FEATURE_COUNT)
    expect(b).not.toEqual(a)
    expect(a.every(Number.isFinite)).toBe(true)
  })

  it("evo mutation moves a prime factor between tile levels and keeps the config canonical", () => {
    const knob = task.knobs.find((k) => k.kind === "choice" && k.levels === 2)!
    const rng = prng(3)
    const start = { ...task.template.defaults(task.knobs, { vectorLanes: 4, cores: 1 }), sketch: "generated" }
    for (let i = 0; i < 30; i++) {
      const v = moveFactor(knob as Extract<typeof knob, { kind: "choice" }>, "1.1", rng)
      if (v !== undefined) expect(knob.candidates).toContain(v)
      const m = mutate(task.knobs, start, rng)
      expect(configHash(canonicalConfig(task.knobs, m))).toBe(configHash(m))
    }
  })

  it("a candidate that hangs times out as an error; one that computes wrongly is an error", async () => {
    const good = lowerConfig(task.template.defaults(task.knobs, { vectorLanes: 4, cores: 1 }))
    const hang: PrimFunc = { ...good, body: { kind: "for", var: v("spin"), min: c(0), extent: c(1e15), forKind: "serial", body: { kind: "seq", body: [] } } }
    const wrong: PrimFunc = { ...good, body: { kind: "seq", body: [] } }
    const [w] = await Effect.runPromise(measureJs([{ config: { which: "wrong" }, func: wrong }], outputs, reference, emitJsModule, { repeats: 1, minRepeatMs: 1, timeoutMs: 10_000, rtol: 1e-3, atol: 1e-4 }))
    expect(w.cost).toBeUndefined()
    expect(w.error).toMatch(/wrong answer/)
    const [h] = await Effect.runPromise(measureJs([{ config: { which: "hang" }, func: hang }], outputs, reference, emitJsModule, { repeats: 1, minRepeatMs: 1, timeoutMs: 1_500, rtol: 1e-3, atol: 1e-4 }))
    expect(h.error).toMatch(/timed out/)
  }, 60_000)

  it("logs: corrupt lines are skipped with a warning; the best record per workload is found", () => {
    // (a record as a tuner writes it: its task id is its workload's hash, its timestamp a date)
    const W = "tpl|js|w"
    const r = (cost: number): TuningRecord => ({ v: 1, task: fnv1a(W), workload: W, target: "js", config: { a: cost }, costs: [cost], timestamp: "2026-01-01T00:00:00Z" })
    const text = [serializeRecord(r(3)), '{"v":1,"task":"t", "cut off', serializeRecord(r(1)), '{"v":9}', ""].join("\n")
    const log = parseLog(text)
    expect(log.records.length).toBe(2)
    expect(log.warnings.length).toBe(2)
    expect(bestRecords(log.records, "js").get(W)!.costs[0]).toBe(1)
  })
})

describe("records and changed templates", () => {
  const knobs: Knob[] = [
    { kind: "split", name: "tile", extent: 8, candidates: [1, 2, 4] },
    { kind: "choice", name: "oc_order", candidates: ["outer", "inner"], absent: "outer" },
    { kind: "choice", name: "order", candidates: ["a", "b"] },
  ]
  it("a record written before a knob was added fits as that knob's absent value; a knob without one does not", () => {
    const old = indexOfConfig(knobs, { tile: 2, order: "b" })
    expect(old).toBe(indexOfConfig(knobs, { tile: 2, oc_order: "outer", order: "b" }))
    expect(configAt(knobs, old!)).toEqual({ tile: 2, oc_order: "outer", order: "b" })
    expect(indexOfConfig(knobs, { tile: 2, oc_order: "inner" })).toBeUndefined()
    expect(indexOfConfig(knobs, { tile: 3, order: "b" })).toBeUndefined()
  })
})

describe("transfer learning", () => {
  it("rows come from the other tasks' records, their throughput normalized by each task's best, in the feature layout", async () => {
    const { transferRows } = await import("../src/search/transfer.js")
    const { FEATURE_COUNT } = await import("../src/search/features.js")
    const other = buildCompute("matmul", 99)
    const otherBase = baseSchedule(other.outputs)
    const otherTask = taskFromTE(other.outputs, otherBase, { kind: "js", vectorLanes: 4, cores: 1 }, 1, "other")
    const runner = (t: typeof task) => ({
      task: t,
      lowerConfig: (config: Record<string, string | number | boolean>) => runTirSync(cpuTirPipeline(), lowerSync(t.template.apply(t.outputs, t.base, config))),
      outputs: new Set<string>(),
      reference: () => new Map(),
      target: { vectorLanes: 4, cores: 1 },
    })
    const [a, b] = [runner(task), runner(otherTask)]
    const rec = (t: typeof task, config: Record<string, string | number | boolean>, cost?: number): TuningRecord => ({
      v: 1, task: t.id, workload: t.workload, target: "js", config, costs: cost === undefined ? [] : [cost], timestamp: "2026-01-01T00:00:00Z", tuner: "random", ...(cost === undefined ? { error: "failed" } : {}),
    })
    const d = otherTask.template.defaults(otherTask.knobs, { vectorLanes: 4, cores: 1 })
    const d2 = { ...d, unroll_tile: !d.unroll_tile }
    const records = [rec(task, task.template.defaults(task.knobs, { vectorLanes: 4, cores: 1 }), 1), rec(otherTask, d, 2), rec(otherTask, d2, 4)]
    if (task.workload === otherTask.workload) throw new Error("the two matmuls must be different workloads")
    const rows = transferRows(a, [a, b], records, "js", new Map())
    // only the other task's two records, the faster one first, as best/cost
    expect(rows.ys).toEqual([1, 0.5])
    expect(rows.xs.every((x) => x.length === FEATURE_COUNT)).toBe(true)
    // an xgb tuner given them has a trained model before its first measurement
    const { makeXGBoostModel } = await import("../src/search/cost-model.js")
    const model = await Effect.runPromise(makeXGBoostModel())
    const tuner = xgbTuner(task, { seed: 1, model, features: (c) => featuresOf(lowerConfig(c), task.knobs, c), transfer: rows })
    await Effect.runPromise(tuner.next(2))
    expect(model.trained()).toBe(true)
  }, 60_000)
})
