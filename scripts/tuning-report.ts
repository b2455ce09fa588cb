// The auto-tuner's measurements (docs/tuning.md): on ResNet-18 conv tasks and MobileNetV2
// depthwise tasks (zoo models compiled for js with vectorLanes 4), best-so-far curves of xgb, ga and
// random at equal trials over several seeds, the trials each needs to reach random's best; then
// end to end, ResNet-18 through the js target untuned vs tuned (the log's best records) beside
// onnxruntime-node at 1 and 2 threads, all in one run. Each task's space is measured once (in
// interleaved rounds) and the tuners search against that table, so they see the same costs. Medians and ratios (a noisy shared machine).
//
//   npx esbuild scripts/tuning-report.ts --bundle --platform=node --format=esm --packages=external \
//     --outfile=.cache/tuning-report/tuning-report.mjs && node .cache/tuning-report/tuning-report.mjs
//   flags: --max-trials N (the space)  --seeds N (10)  --rounds N (3)  --e2e-trials N (8)  --runs N (3)  --with-3x3 (adds the 3x3/2 conv of the last stage: 115 MFLOP)  --out-dir DIR (.cache/tuning-report)  --skip-e2e  --e2e-from LOG
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { createExecutor } from "../src/device/executor.js"
import { loadJsModule } from "../src/device/js.js"
import { measureJs, type MeasureOptions } from "../src/device/measure.js"
import { appendRecords, readLog } from "../src/device/records-file.js"
import type { Graph } from "../src/ast/graph/graph.js"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { randomTensor } from "../src/cli/inputs.js"
import { compileGraph, emitJs } from "../src/pipeline.js"
import { makeXGBoostModel } from "../src/search/cost-model.js"
import { tasksOfProgram, type TaskRunner } from "../src/search/extract.js"
import { featuresOf } from "../src/search/features.js"
import { renderCurvesSvg, trialsToReach, type Curve } from "../src/search/plot.js"
import { bestRecords, RECORD_VERSION } from "../src/search/records.js"
import { configAt, configKey, fnv1a, spaceSize } from "../src/search/task.js"
import type { Config } from "../src/lowering/templates.js"
import { gaTuner, randomTuner, xgbTuner, type Tuner } from "../src/search/tuners.js"
import { tuneTask } from "../src/search/tune.js"
import { zooGraph } from "../src/zoo/index.js"

const arg = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : d
}
const SEEDS = Number(arg("seeds", "10"))
const E2E_TRIALS = Number(arg("e2e-trials", "8"))
const RUNS = Number(arg("runs", "3"))
const OUT = arg("out-dir", ".cache/tuning-report")
const SKIP_E2E = process.argv.includes("--skip-e2e  --e2e-from LOG")
/** Caps the trials per tuner below the space (a quick check of the script). */
const MAX_TRIALS = Number(arg("max-trials", "1000000"))
/** End to end only, from an earlier run's log (more timed runs without tuning again). */
const E2E_FROM = arg("e2e-from", "")
const LANES = 4
const TARGET = { kind: "js", vectorLanes: LANES, cores: 1 } as const
const LOG = path.join(OUT, "tuning.jsonl")
const MEASURE: MeasureOptions = { repeats: 1, minRepeatMs: 5, timeoutMs: 300_000, rtol: 1e-3, atol: 1e-4 }
const TUNERS = ["xgb", "ga", "random"] as const

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const log = (s: string) => process.stderr.write(`${s}\n`)
const run = <A, E>(eff: Effect.Effect<A, E>) => Effect.runPromise(eff as Effect.Effect<A, never>)

const makeTuner = async (name: (typeof TUNERS)[number], r: TaskRunner, seed: number): Promise<Tuner> => {
  if (name === "random") return randomTuner(r.task, seed)
  if (name === "ga") return gaTuner(r.task, seed)
  const model = await run(makeXGBoostModel())
  return xgbTuner(r.task, { seed, model, features: (c) => featuresOf(r.lowerConfig(c), r.task.knobs, c) })
}

const tune = async (r: TaskRunner, tuner: Tuner, trials: number, batch: number, measure: MeasureOptions) =>
  run(
    tuneTask(r.task, tuner, r.lowerConfig, (cands) => measureJs(cands, r.outputs, r.reference, measure), {
      trials,
      batch,
      target: TARGET.kind,
      now: () => new Date().toISOString(),
      onRecords: (rs) => Effect.orDie(appendRecords(LOG, rs)),
    }),
  )

const compile = (graph: Graph, tuned?: Parameters<typeof compileGraph>[1]["tuned"]) =>
  run(compileGraph(graph, { target: "js", vectorLanes: LANES, cores: 1, ...(tuned ? { tuned } : {}) }))

fs.mkdirSync(OUT, { recursive: true })
fs.rmSync(LOG, { force: true })
if (E2E_FROM) fs.copyFileSync(E2E_FROM, LOG)
const started = Date.now()
const machine = { cpus: (await import("node:os")).cpus().length, node: process.version, load: (await import("node:os")).loadavg()[0] }
log(`tuning report: ${SEEDS} seeds, ${machine.cpus} cpus, load ${machine.load.toFixed(2)}`)

// ---- tasks
const resnet = zooGraph("resnet18", 0)
const mobilenet = zooGraph("mobilenetv2", 0)
const resnetProgram = await compile(resnet)
const mobilenetProgram = await compile(mobilenet)
const resnetTasks = tasksOfProgram(resnetProgram, TARGET)
const mobilenetTasks = tasksOfProgram(mobilenetProgram, TARGET)
const dw = mobilenetTasks.filter((r) => /depthwise/.test(r.task.label))
const chosen: { model: string; runner: TaskRunner }[] = [
  // the three 1x1 downsample convs (12.8 MFLOP each) and the 3x3 stride-2 conv of the last stage
  ...resnetTasks.filter((r) => /^Conv 1x1\/2/.test(r.task.label)).map((runner) => ({ model: "resnet18", runner })),
  ...(process.argv.includes("--with-3x3") ? resnetTasks.filter((r) => /^Conv 3x3\/2 → 1x128x7x7/.test(r.task.label)).map((runner) => ({ model: "resnet18", runner })) : []),
  // the first depthwise conv of stride 1 and the first of stride 2
  ...[dw.find((r) => !/\/2/.test(r.task.label))!, dw.find((r) => /\/2/.test(r.task.label))!].map((runner) => ({ model: "mobilenetv2", runner })),
]

// ---- tuner comparison. On a shared, loaded machine a candidate's time depends on when it ran, so
// tuners run one after another would be compared through the load as much as through their search.
// Instead each task's whole space (it is small: the template's knobs) is measured first — in
// ROUNDS rounds, each over the space in a fresh random order, a config's cost the median of its
// rounds — and written to the log; then every tuner and seed searches against that one table, so
// all tuners see the same costs and equal trials mean equal measurements.
const ROUNDS = Number(arg("rounds", "3"))
interface Row {
  model: string
  task: string
  label: string
  mflop: number
  space: number
  /** tuner → per seed: best-so-far GFLOP/s after each trial */
  curves: Record<string, number[][]>
  /** the default config's GFLOP/s and the space's best */
  defaultGflops: number
  bestGflops: number
}
const rows: Row[] = []
for (const { model, runner } of E2E_FROM ? [] : chosen) {
  const { task } = runner
  const space = spaceSize(task.knobs)
  const configs = Array.from({ length: space }, (_, k) => configAt(task.knobs, k))
  const costs = new Map<string, number[]>()
  const errors = new Map<string, string>()
  const t0 = Date.now()
  for (let round = 0; round < ROUNDS; round++) {
    const order = [...configs].sort((a, b) => Number(BigInt("0x" + fnv1a(`${round}:${configKey(a)}`)) - BigInt("0x" + fnv1a(`${round}:${configKey(b)}`))))
    for (let i = 0; i < order.length; i += 8) {
      const batch = order.slice(i, i + 8).map((config) => ({ config, func: runner.lowerConfig(config) }))
      for (const m of await run(measureJs(batch, runner.outputs, runner.reference, MEASURE))) {
        if (m.cost === undefined) errors.set(configKey(m.config), m.error ?? "failed")
        else costs.set(configKey(m.config), [...(costs.get(configKey(m.config)) ?? []), m.cost])
      }
    }
  }
  const table = new Map<string, number | undefined>(configs.map((c) => [configKey(c), errors.has(configKey(c)) ? undefined : median(costs.get(configKey(c)) ?? [])]))
  await run(
    appendRecords(
      LOG,
      configs.map((config) => {
        const cost = table.get(configKey(config))
        return { v: RECORD_VERSION, task: task.id, workload: task.workload, target: TARGET.kind, config, costs: costs.get(configKey(config)) ?? [], timestamp: new Date().toISOString(), tuner: "exhaustive", ...(cost ? { gflops: task.flops / cost / 1e9 } : { error: errors.get(configKey(config)) ?? "not measured" }) }
      }),
    ),
  )
  const gflops = (c: number | undefined) => (c ? task.flops / c / 1e9 : 0)
  const defaults = task.template.defaults(task.knobs, TARGET)
  const row: Row = {
    model,
    task: task.id,
    label: task.label,
    mflop: task.flops / 1e6,
    space,
    curves: {},
    defaultGflops: gflops(table.get(configKey(defaults))),
    bestGflops: Math.max(...[...table.values()].map(gflops)),
  }
  log(`${model} ${task.label}: ${space} configs x ${ROUNDS} rounds measured in ${((Date.now() - t0) / 1000).toFixed(1)} s; default ${row.defaultGflops.toFixed(3)}, best ${row.bestGflops.toFixed(3)} GFLOP/s, ${errors.size} errors`)
  const lookup = (cands: readonly { config: Config }[]) => Effect.succeed(cands.map((c) => ({ config: c.config, cost: table.get(configKey(c.config)) })))
  for (let seed = 1; seed <= SEEDS; seed++)
    for (const name of TUNERS) {
      const t1 = Date.now()
      const result = await run(
        tuneTask(task, await makeTuner(name, runner, seed), runner.lowerConfig, lookup, { trials: Math.min(space, MAX_TRIALS), batch: 8, target: TARGET.kind, now: () => new Date().toISOString() }),
      )
      ;(row.curves[name] ??= []).push([...result.curve])
      log(`  ${name} seed ${seed}: ${result.trials} trials, reaches ${((result.curve.at(-1) ?? 0) / row.bestGflops * 100).toFixed(0)}% of the best (${((Date.now() - t1) / 1000).toFixed(1)} s)`)
    }
  rows.push(row)
}

/** Per trial, the median over seeds of the best-so-far curve (curves padded with their last value). */
const medianCurve = (curves: readonly number[][]) => {
  const n = Math.max(...curves.map((c) => c.length))
  return Array.from({ length: n }, (_, k) => median(curves.map((c) => c[Math.min(k, c.length - 1)] ?? 0)))
}

const summary = rows.map((r) => {
  // the best any tuner saw on this task (the space's optimum, up to timing noise)
  const best = Math.max(...Object.values(r.curves).flat().map((c) => c.at(-1) ?? 0))
  const budget = Math.max(8, Math.ceil(r.space / 4))
  const perTuner = Object.fromEntries(
    TUNERS.map((t) => {
      const cs = r.curves[t]
      return [
        t,
        {
          final: median(cs.map((c) => c.at(-1) ?? 0)),
          atBudget: median(cs.map((c) => c[Math.min(budget, c.length) - 1] ?? 0)),
          to95: median(cs.map((c) => trialsToReach(c, 0.95 * best) ?? Infinity)),
        },
      ]
    }),
  )
  // random's best at the budget (per seed), and the trials xgb (same seed) needs to reach it
  const xgbToRandom = median(
    r.curves.random.map((rc, s) => trialsToReach(r.curves.xgb[s], rc[Math.min(budget, rc.length) - 1] ?? 0) ?? Infinity),
  )
  const gaToRandom = median(r.curves.random.map((rc, s) => trialsToReach(r.curves.ga[s], rc[Math.min(budget, rc.length) - 1] ?? 0) ?? Infinity))
  return { model: r.model, task: r.task, label: r.label, mflop: r.mflop, space: r.space, best, defaultGflops: r.defaultGflops, budget, perTuner, xgbToRandom, gaToRandom }
})

const curves: Curve[] = rows.flatMap((r) => TUNERS.map((t) => ({ task: r.task, label: `${r.model}: ${r.label}`, tuner: t, best: medianCurve(r.curves[t]) })))
if (rows.length) fs.writeFileSync(path.join(OUT, "tuning-curves.svg"), await renderCurvesSvg(curves, `Best-so-far GFLOP/s vs trials (median of ${SEEDS} seeds; js target)`))

// ---- end to end: ResNet-18 on js, untuned vs tuned, beside onnxruntime-node
let e2e: Record<string, unknown> | undefined
if (!SKIP_E2E) {
  // the other tasks get a short xgb run so that every conv of the network has a tuned record
  const tunedIds = new Set(chosen.map((c) => c.runner.task.id))
  for (const r of resnetTasks) {
    if (tunedIds.has(r.task.id) || E2E_FROM) continue
    const t0 = Date.now()
    // the default schedule measured too, so the best record is never slower than it by measurement
    const defaults = r.task.template.defaults(r.task.knobs, TARGET)
    const [m] = await run(measureJs([{ config: defaults, func: r.lowerConfig(defaults) }], r.outputs, r.reference, { ...MEASURE, repeats: 1, minRepeatMs: 1 }))
    await run(appendRecords(LOG, [{ v: RECORD_VERSION, task: r.task.id, workload: r.task.workload, target: TARGET.kind, config: defaults, costs: m.cost === undefined ? [] : [m.cost], timestamp: new Date().toISOString(), tuner: "default", ...(m.cost ? { gflops: r.task.flops / m.cost / 1e9 } : {}), ...(m.error ? { error: m.error } : {}) }]))
    const res = await tune(r, await makeTuner("xgb", r, 1), Math.min(E2E_TRIALS, spaceSize(r.task.knobs)), 4, { ...MEASURE, repeats: 1, minRepeatMs: 1 })
    log(`resnet18 ${r.task.label} xgb ${res.trials} trials: best ${res.curve.at(-1)?.toFixed(3)} GFLOP/s (${((Date.now() - t0) / 1000).toFixed(1)} s)`)
  }
  const records = (await run(readLog(LOG))).records
  const tuned = bestRecords(records, TARGET.kind)
  const untunedProgram = resnetProgram
  const tunedProgram = await compile(resnet, tuned)
  log(`tuned program: ${tunedProgram.tuning.applied.length} groups tuned, ${tunedProgram.tuning.untuned.length} untuned, ${tunedProgram.tuning.skipped.length} skipped`)
  const feeds = new Map<string, Tensor>(resnet.inputs.map((i, k) => [i.name, randomTensor(i.type.dtype, i.type.shape as number[], 0, k)] as const))
  const exec = async (p: typeof untunedProgram) => createExecutor(p, await run(loadJsModule(emitJs(p))))
  const untunedExec = await exec(untunedProgram)
  const tunedExec = await exec(tunedProgram)
  const ort = await import("onnxruntime-node")
  const bytes = encodeOnnx(resnet)
  const sessions = await Promise.all(
    [1, 2].map((threads) => ort.InferenceSession.create(bytes, { graphOptimizationLevel: "all", intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: "sequential" })),
  )
  const ortFeeds = Object.fromEntries([...feeds].map(([n, t]) => [n, new ort.Tensor("float32", Float32Array.from(t.data as ArrayLike<number>), t.shape)]))
  const out = resnet.outputs[0].name
  const time = async (f: () => unknown) => {
    const t0 = performance.now()
    await f()
    return performance.now() - t0
  }
  // warm-up, and the answers compared
  const a = untunedExec.run(feeds).get(out)!.data
  const b = tunedExec.run(feeds).get(out)!.data
  const c = (await sessions[0].run(ortFeeds))[out].data as Float32Array
  await sessions[1].run(ortFeeds)
  const diff = (x: ArrayLike<number>, y: ArrayLike<number>) => Array.from(x).reduce((m, v, i) => Math.max(m, Math.abs(v - y[i])), 0)
  const times: Record<string, number[]> = { untuned: [], tuned: [], ort1: [], ort2: [] }
  // interleaved, so that the machine's load falls on every side alike
  for (let i = 0; i < RUNS; i++) {
    times.untuned.push(await time(() => untunedExec.run(feeds)))
    times.tuned.push(await time(() => tunedExec.run(feeds)))
    for (let k = 0; k < 4; k++) times.ort1.push(await time(() => sessions[0].run(ortFeeds)))
    for (let k = 0; k < 4; k++) times.ort2.push(await time(() => sessions[1].run(ortFeeds)))
    log(`e2e run ${i + 1}/${RUNS}: untuned ${times.untuned.at(-1)!.toFixed(0)} ms, tuned ${times.tuned.at(-1)!.toFixed(0)} ms, ort1 ${times.ort1.at(-1)!.toFixed(1)} ms, ort2 ${times.ort2.at(-1)!.toFixed(1)} ms`)
  }
  const med = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)]))
  e2e = {
    runs: RUNS,
    records: records.length,
    tunedGroups: tunedProgram.tuning.applied.length,
    untunedGroups: tunedProgram.tuning.untuned.length,
    medianMs: med,
    ratios: {
      tunedOverUntuned: med.tuned / med.untuned,
      tunedOverOrt1: med.tuned / med.ort1,
      tunedOverOrt2: med.tuned / med.ort2,
      untunedOverOrt1: med.untuned / med.ort1,
      ort2OverOrt1: med.ort2 / med.ort1,
    },
    maxAbsDiff: { tunedVsUntuned: diff(b, a), tunedVsOrt: diff(b, c) },
  }
}

const result = { machine, seeds: SEEDS, measure: MEASURE, summary, e2e, seconds: (Date.now() - started) / 1000 }
fs.writeFileSync(path.join(OUT, "results.json"), JSON.stringify({ ...result, rows }, null, 1))
console.log(JSON.stringify(result, null, 1))
