// The auto-tuner's measurements (docs/tuning.md), in one run on one machine, on the `c` target:
//
// 1. Tuner comparison: on three ResNet-18 conv tasks and two MobileNetV2 depthwise tasks, xgb, ga
//    and random each tune the task live (every trial built with gcc and timed in the isolated
//    measuring child) for the same number of trials; their best-so-far curves, the trials xgb needs
//    to reach random's final best, and the default schedule's speed for reference.
// 2. End to end: every other task of both networks gets a short xgb run, its model started from
//    the records of the network's tasks tuned before it (transfer learning), and the default
//    schedule measured too; then the networks compiled with the log's best records run beside the
//    untuned build and onnxruntime-node (same thread count), interleaved, medians.
//
//   npm run tuning-report -- [--threads 1] [--trials 500] [--e2e-trials 48] [--runs 15]
//     [--skip-compare] [--skip-e2e] [--log LOG (resume: what it holds is not measured again)]
//     [--out-dir .cache/tuning-report]
//
// The thread count is fixed for the whole run (OpenMP reads it once): run it once per count.
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const arg = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : d
}
const THREADS = Number(arg("threads", "1"))
// before any OpenMP library is loaded: libgomp reads it once
process.env.OMP_NUM_THREADS = String(THREADS)

const { cacheSweepBytes, hostCpu } = await import("../src/device/host.js")
const { cMeasureFlags, defaultCBuildConfig } = await import("../src/device/c/build.js")
const { BACKENDS, C_BUILD_FLAGS } = await import("../src/backend/index.js")
const { loadOrt, median, openOrtSession, settle } = await import("../src/device/onnxruntime.js")
const { appendRecords, readLog } = await import("../src/cli/tuning-log.js")
const { encodeOnnx } = await import("../src/ast/onnx/encode.js")
const { randomTensor } = await import("../src/cli/inputs.js")
const { compileGraph, loadProgram } = await import("../src/pipeline.js")
const { makeXGBoostModel } = await import("../src/search/cost-model.js")
const { tasksOfProgram } = await import("../src/search/extract.js")
const { featuresOf } = await import("../src/search/features.js")
const { renderCurvesSvg, trialsToReach } = await import("../src/search/plot.js")
const { bestRecords, RECORD_VERSION } = await import("../src/search/records.js")
const { configKey, spaceSize } = await import("../src/search/task.js")
const { gaTuner, randomTuner, xgbTuner } = await import("../src/search/tuners.js")
const { confirmMeasurerOptions, DEFAULT_CONFIRM, measurerFor, tuneTask } = await import("../src/search/tune.js")
const { transferRows } = await import("../src/search/transfer.js")
type TransferRows = import("../src/search/transfer.js").TransferRows
const { zooGraph } = await import("../src/zoo/index.js")
type TaskRunner = import("../src/search/extract.js").TaskRunner
type Tuner = import("../src/search/tuners.js").Tuner
type Curve = import("../src/search/plot.js").Curve
type Program = import("../src/lowering/program.js").Program
type Tensor = import("../src/ast/graph/tensor.js").Tensor

const TRIALS = Number(arg("trials", "500"))
const E2E_TRIALS = Number(arg("e2e-trials", "48"))
const RUNS = Number(arg("runs", "15"))
const OUT = arg("out-dir", ".cache/tuning-report")
const LOG = arg("log", path.join(OUT, `tuning-c-${THREADS}t.jsonl`))
const SKIP_COMPARE = process.argv.includes("--skip-compare")
const SKIP_E2E = process.argv.includes("--skip-e2e")
// the host's vector width, as `tessera compile` uses (AVX-512 16, AVX2 8)
const C_TARGET = BACKENDS.c.target(hostCpu(), THREADS)
const TARGET = { kind: "c", vectorLanes: Math.max(1, C_TARGET.attrs.vectorLanes), cores: THREADS } as const
const TUNERS = ["xgb", "ga", "random"] as const
const BATCH = 16

const log = (s: string) => process.stderr.write(`${s}\n`)
const run = <A, E>(eff: Effect.Effect<A, E>) => Effect.runPromise(eff as Effect.Effect<A, never>)

fs.mkdirSync(OUT, { recursive: true })
const buildDir = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-tuning-report-"))
const measureOptions = {
  measure: { repeats: 3, minRepeatMs: 5, timeoutMs: 20_000, rtol: 1e-3, atol: 1e-4, flushBytes: cacheSweepBytes() },
  threads: THREADS,
  chunk: 4,
  buildJobs: Math.max(1, os.availableParallelism() - THREADS),
  build: { ...defaultCBuildConfig(cMeasureFlags(C_BUILD_FLAGS)), cacheDir: buildDir },
  // the measuring threads take every core: gcc waits until a batch is measured
  overlap: THREADS < os.availableParallelism(),
}
const started = Date.now()
const machine = { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, node: process.version, load: os.loadavg()[0] }
log(`tuning report (c, ${THREADS} thread${THREADS > 1 ? "s" : ""}): ${TRIALS} trials per tuner, ${machine.cpus} cpus, load ${machine.load.toFixed(2)}`)

const compile = (name: string, tuned?: ReadonlyMap<string, import("../src/search/records.js").TuningRecord>) =>
  run(compileGraph(zooGraph(name, 0), C_TARGET, { optLevel: 3, ...(tuned ? { tuned } : {}) }))

const makeTuner = async (name: (typeof TUNERS)[number], r: TaskRunner, seed: number, transfer?: TransferRows): Promise<Tuner> => {
  if (name === "random") return randomTuner(r.task, seed)
  if (name === "ga") return gaTuner(r.task, seed)
  const model = await run(makeXGBoostModel())
  return xgbTuner(r.task, { seed, model, features: (c) => featuresOf(r.lowerConfig(c), r.task.knobs, c), ...(transfer && transfer.xs.length ? { transfer } : {}) })
}

const existing = fs.existsSync(LOG) ? (await run(readLog(LOG))).records : []
/** One tuner on one task: records appended to the log (a rerun resumes from them). */
const tune = async (r: TaskRunner, tunerName: (typeof TUNERS)[number], trials: number, transfer?: TransferRows, confirm = false) => {
  const done = existing.filter((rec) => rec.workload === r.task.workload && rec.tuner === tunerName)
  // the end-to-end tuning confirms as `tessera tune` does: its fastest configs and the default
  // measured again side by side, in turns
  const confirmation = {
    top: DEFAULT_CONFIRM,
    with: [r.task.template.defaults(r.task.knobs, r.target)],
    measure: measurerFor(C_TARGET, r, confirmMeasurerOptions(measureOptions, DEFAULT_CONFIRM))!,
  }
  return run(
    tuneTask(r.task, await makeTuner(tunerName, r, 1, transfer), r.lowerConfig, measurerFor(C_TARGET, r, measureOptions)!, {
      trials,
      batch: BATCH,
      target: "c",
      now: () => new Date().toISOString(),
      done: confirm ? existing.filter((rec) => rec.workload === r.task.workload && (rec.tuner === tunerName || rec.confirm !== undefined)) : done,
      ...(confirm ? { confirm: confirmation } : {}),
      onRecords: (rs) => Effect.orDie(appendRecords(LOG, rs)),
    }),
  )
}

/** The default schedule, measured once (recorded as tuner "default"). */
const measureDefault = async (r: TaskRunner): Promise<number | undefined> => {
  const config = r.task.template.defaults(r.task.knobs, r.target)
  // (a log from before a change of the defaults holds another config: the current one is measured)
  const prior = existing.find((rec) => rec.workload === r.task.workload && rec.tuner === "default" && configKey(rec.config) === configKey(config))
  if (prior) return prior.costs.length ? r.task.flops / Math.min(...prior.costs) / 1e9 : undefined
  const [m] = await run(measurerFor(C_TARGET, r, measureOptions)!([{ config, func: r.lowerConfig(config) }]))
  await run(
    appendRecords(LOG, [
      { v: RECORD_VERSION, task: r.task.id, workload: r.task.workload, target: "c", config, costs: m.cost === undefined ? [] : [m.cost], timestamp: new Date().toISOString(), tuner: "default", ...(m.cost ? { gflops: r.task.flops / m.cost / 1e9 } : {}), ...(m.error ? { error: m.error } : {}) },
    ]),
  )
  return m.cost ? r.task.flops / m.cost / 1e9 : undefined
}

const programs = { resnet18: await compile("resnet18"), mobilenetv2: await compile("mobilenetv2") }
const runners = { resnet18: tasksOfProgram(programs.resnet18, C_TARGET), mobilenetv2: tasksOfProgram(programs.mobilenetv2, C_TARGET) }
const pick = (model: "resnet18" | "mobilenetv2", re: RegExp) => {
  const r = runners[model].find((x) => re.test(x.task.label))
  if (!r) throw new Error(`no ${model} task matches ${re}: ${runners[model].map((x) => x.task.label).join("; ")}`)
  return { model, runner: r }
}
/** "1x{C/L}x{H}x{W}x{L}": a blocked output's shape at this target's lanes. */
const blocked = (c: number, hw: number) => `1x${c / TARGET.vectorLanes}x${hw}x${hw}x${TARGET.vectorLanes}`
const chosen = [
  // the last stage's 3x3 convs (stride 1 and 2) and a 3x3 conv of the third stage (Winograd)
  pick("resnet18", new RegExp(`^Conv 3x3 (winograd )?→ ${blocked(512, 7)}$`)),
  pick("resnet18", new RegExp(`^Conv 3x3/2 → ${blocked(512, 7)}$`)),
  pick("resnet18", new RegExp(`^Conv 3x3 (winograd )?→ ${blocked(256, 14)}$`)),
  // the first depthwise conv of stride 1 (56x56, 144 channels) and of stride 2 (112 → 56, 96 channels)
  pick("mobilenetv2", new RegExp(`^Conv 3x3 depthwise → ${blocked(144, 56)}$`)),
  pick("mobilenetv2", new RegExp(`^Conv 3x3/2 depthwise → ${blocked(96, 56)}$`)),
]

// ---- 1. tuner comparison
interface Row {
  model: string
  task: string
  label: string
  mflop: number
  space: number
  defaultGflops?: number
  curves: Record<string, number[]>
  errors: Record<string, number>
  seconds: Record<string, number>
}
const rows: Row[] = []
if (!SKIP_COMPARE)
  for (const { model, runner } of chosen) {
    const { task } = runner
    const row: Row = { model, task: task.id, label: task.label, mflop: task.flops / 1e6, space: spaceSize(task.knobs), curves: {}, errors: {}, seconds: {} }
    row.defaultGflops = await measureDefault(runner)
    for (const name of TUNERS) {
      const t0 = Date.now()
      const res = await tune(runner, name, Math.min(TRIALS, row.space))
      row.curves[name] = [...res.curve]
      row.errors[name] = res.errors
      row.seconds[name] = (Date.now() - t0) / 1000
      log(`${model} ${task.label} (${row.space} configs) ${name}: ${res.trials} trials, best ${(res.curve.at(-1) ?? 0).toFixed(1)} GFLOP/s, default ${row.defaultGflops?.toFixed(1)}, ${res.errors} errors, ${row.seconds[name].toFixed(0)} s`)
    }
    rows.push(row)
    fs.writeFileSync(path.join(OUT, `compare-c-${THREADS}t.json`), JSON.stringify(rows, null, 1))
  }

const at = (c: readonly number[], k: number) => c[Math.min(k, c.length) - 1] ?? 0
const summary = rows.map((r) => {
  const randomBest = r.curves.random.at(-1) ?? 0
  const gaBest = r.curves.ga.at(-1) ?? 0
  return {
    model: r.model,
    task: r.task,
    label: r.label,
    mflop: Number(r.mflop.toFixed(1)),
    space: r.space,
    defaultGflops: r.defaultGflops,
    gflops: Object.fromEntries(TUNERS.map((t) => [t, { at50: at(r.curves[t], 50), at100: at(r.curves[t], 100), at200: at(r.curves[t], 200), final: r.curves[t].at(-1) ?? 0, trials: r.curves[t].length }])),
    /** trials xgb needs to reach random's (ga's) best after all its trials */
    xgbTrialsToRandomBest: trialsToReach(r.curves.xgb, randomBest) ?? null,
    xgbTrialsToGaBest: trialsToReach(r.curves.xgb, gaBest) ?? null,
    errors: r.errors,
    seconds: r.seconds,
  }
})
if (rows.length) {
  const curves: Curve[] = rows.flatMap((r) => TUNERS.map((t) => ({ task: r.task, label: `${r.model}: ${r.label}`, tuner: t, best: r.curves[t] })))
  fs.writeFileSync(path.join(OUT, "tuning-curves.svg"), await renderCurvesSvg(curves, `Best-so-far GFLOP/s vs trials (c target, ${THREADS} thread${THREADS > 1 ? "s" : ""})`))
}

// ---- 2. end to end
const e2e: Record<string, unknown> = {}
if (!SKIP_E2E) {
  const chosenIds = new Set(chosen.map((c) => c.runner.task.workload))
  const featureCache = new Map<string, readonly number[]>()
  for (const model of ["resnet18", "mobilenetv2"] as const) {
    for (const r of runners[model]) {
      if (chosenIds.has(r.task.workload) && !SKIP_COMPARE) continue
      const t0 = Date.now()
      const d = await measureDefault(r)
      // xgb's model starts from the records of the network's other tasks (transfer learning)
      const sofar = fs.existsSync(LOG) ? (await run(readLog(LOG))).records : []
      const transfer = transferRows(r, runners[model], sofar, "c", featureCache)
      const res = await tune(r, "xgb", Math.min(E2E_TRIALS, spaceSize(r.task.knobs)), transfer, true)
      log(`${model} ${r.task.label}: default ${d?.toFixed(1)}, xgb ${res.trials} trials best ${(res.curve.at(-1) ?? 0).toFixed(1)} GFLOP/s (${((Date.now() - t0) / 1000).toFixed(0)} s)`)
    }
  }
  const records = (await run(readLog(LOG))).records
  // (records carry the target kind; the workload key holds lanes and cores)
  const tuned = bestRecords(records, "c")
  const ort = await run(loadOrt())
  for (const model of ["resnet18", "mobilenetv2"] as const) {
    const graph = zooGraph(model, 0)
    const tunedProgram = await compile(model, tuned)
    const untunedProgram = programs[model]
    const feeds = new Map<string, Tensor>(graph.inputs.map((i, k) => [i.name, randomTensor(i.type.dtype, i.type.shape as number[], 0, k)] as const))
    const exec = async (p: Program) => run(loadProgram(p, C_TARGET, { threads: THREADS }))
    const [untunedExec, tunedExec] = [await exec(untunedProgram), await exec(tunedProgram)]
    const out = graph.outputs[0].name
    const a = untunedExec.run(feeds).get(out)!.data
    const b = tunedExec.run(feeds).get(out)!.data
    const diff = Array.from(a).reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0)
    const times: Record<string, number[]> = { untuned: [], tuned: [], ort: [] }
    const bytes = encodeOnnx(graph)
    // interleaved rounds, so that the machine's load falls on every side alike: each side runs
    // once untimed, then 3 timed runs whose median is the round's (onnxruntime on one session
    // kept open, as a user keeps it; a fresh session per round, with its arena and prepacking,
    // made the round's other sides look 10-30% slower than in `tessera bench`)
    const round = async (f: () => unknown): Promise<number> => {
      // the side before may leave its worker threads spinning (settle): wait them out first
      await settle()
      await f()
      const ts: number[] = []
      for (let k = 0; k < 3; k++) {
        const t = performance.now()
        await f()
        ts.push(performance.now() - t)
      }
      return median(ts)
    }
    const session = typeof ort === "string" ? ort : await run(openOrtSession(ort, bytes, feeds, THREADS))
    for (let i = 0; i < RUNS; i++) {
      times.untuned.push(await round(() => untunedExec.run(feeds)))
      times.tuned.push(await round(() => tunedExec.run(feeds)))
      if (typeof session !== "string") times.ort.push(await round(() => session.time()))
    }
    if (typeof session !== "string") await session.release()
    const med = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)]))
    e2e[model] = {
      threads: THREADS,
      tunedGroups: tunedProgram.tuning.applied.length,
      untunedGroups: tunedProgram.tuning.untuned.length,
      skipped: tunedProgram.tuning.skipped.length,
      medianMs: med,
      ratios: { tunedOverUntuned: med.tuned / med.untuned, tunedOverOrt: med.tuned / med.ort, untunedOverOrt: med.untuned / med.ort },
      maxAbsDiffTunedVsUntuned: diff,
    }
    log(`${model}: untuned ${med.untuned.toFixed(2)} ms, tuned ${med.tuned.toFixed(2)} ms, onnxruntime ${med.ort.toFixed(2)} ms (${THREADS} thread${THREADS > 1 ? "s" : ""})`)
  }
}

fs.rmSync(buildDir, { recursive: true, force: true })
const result = { machine, threads: THREADS, trials: TRIALS, measure: measureOptions.measure, summary, e2e, seconds: (Date.now() - started) / 1000 }
fs.writeFileSync(path.join(OUT, `results-c-${THREADS}t.json`), JSON.stringify({ ...result, rows }, null, 1))
console.log(JSON.stringify(result, null, 1))
