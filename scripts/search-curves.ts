// Best-so-far curves of the search on the generated spaces (issue 18: "on three conv and three
// matmul tasks, xgb reaches the best random search finds in 1,000 trials within ≤ 200 trials"):
// each chosen zoo task is tuned live on `c` (every trial built by gcc and timed in the isolated
// measuring child, checked against the reference first) by each tuner for up to `--trials`
// trials; the curves are drawn (plot.ts) and the trials each guided tuner needs to reach random's
// final best are printed.
//
//   npm run search-curves -- [--mode list|measure] [--trials 1000] [--tasks a,b,...]
//     [--tuners evo,xgb,random] [--space generated|union|template] [--threads 1] [--seed 1]
//     [--batch 16] [--out-dir .cache/search-curves]
//
// --mode list: the tasks, their space sizes, and (with --probe N, default 4) the seconds a trial
//   takes, measured on N random configs of each: what `--trials` would cost.
// --mode measure: the curves. The log (out-dir/search-c-<threads>t.jsonl) is resumed: a rerun
//   with a larger --trials continues each (task, tuner) curve where it stopped.
// --space generated (default) restricts a task to the generated space (sketch.ts); union is what
//   `tessera tune` searches (the template's knobs and the generated ones); template the
//   template's alone. The template's default schedule is measured once as a reference line.
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const arg = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : d
}
const THREADS = Number(arg("threads", "1"))
process.env.OMP_NUM_THREADS = String(THREADS)

const { cacheSweepBytes, hostCpu } = await import("../src/device/host.js")
const { defaultCBuildConfig } = await import("../src/device/c/build.js")
const { BACKENDS } = await import("../src/backend/index.js")
const { appendRecords, readLog } = await import("../src/cli/tuning-log.js")
const { compileGraph } = await import("../src/pipeline.js")
const { makeXGBoostModel } = await import("../src/search/cost-model.js")
const { tasksOfProgram } = await import("../src/search/extract.js")
const { featuresOf } = await import("../src/search/features.js")
const { evoTuner } = await import("../src/search/evolutionary.js")
const { renderCurvesSvg, trialsToReach } = await import("../src/search/plot.js")
const { RECORD_VERSION } = await import("../src/search/records.js")
const { spaceSize, sampleConfig } = await import("../src/search/task.js")
const { randomTuner, xgbTuner } = await import("../src/search/tuners.js")
const { measurerFor, tuneTask } = await import("../src/search/tune.js")
const { prng } = await import("../src/ast/graph/arbitrary.js")
const { zooGraph } = await import("../src/zoo/index.js")
type TaskRunner = import("../src/search/extract.js").TaskRunner
type Tuner = import("../src/search/tuners.js").Tuner
type Curve = import("../src/search/plot.js").Curve
type Knob = import("../src/lowering/templates/template.js").Knob

const MODE = arg("mode", "measure")
const TRIALS = Number(arg("trials", "1000"))
const SEED = Number(arg("seed", "1"))
const BATCH = Number(arg("batch", "16"))
const PROBE = Number(arg("probe", "4"))
const SPACE = arg("space", "generated")
const OUT = arg("out-dir", ".cache/search-curves")
const TUNER_NAMES = arg("tuners", "evo,xgb,random").split(",") as ("evo" | "xgb" | "random")[]
const C_TARGET = BACKENDS.c.target(hostCpu(), THREADS)
const LANES = Math.max(1, C_TARGET.attrs.vectorLanes)
const LOG = path.join(OUT, `search-c-${THREADS}t-${SPACE}.jsonl`)
const log = (s: string) => process.stderr.write(`${s}\n`)
const run = <A, E>(eff: Effect.Effect<A, E>) => Effect.runPromise(eff as Effect.Effect<A, never>)

/** The chosen tasks: a zoo model and the task label's pattern (first match). */
const blocked = (c: number, hw: number) => `1x${c / LANES}x${hw}x${hw}x${LANES}`
const CATALOGUE: Record<string, { model: string; label: RegExp; kind: "conv" | "matmul" }> = {
  // resnet50's stride-2 3x3 conv into stage 2 (128 → 128, 56 → 28; its stride-1 3x3 convs take
  // the Winograd template, whose generated space tiles the batched product alone)
  "resnet50-conv3x3": { model: "resnet50", label: new RegExp(`^Conv 3x3/2 → ${blocked(128, 28)}$`), kind: "conv" },
  // a mobilenetv2 1x1 conv: the 28x28 expansion 32 → 192
  "mobilenetv2-conv1x1": { model: "mobilenetv2", label: new RegExp(`^Conv 1x1 → ${blocked(192, 28)}$`), kind: "conv" },
  // a mobilenetv2 depthwise conv: 3x3 over 144 channels at 56x56
  "mobilenetv2-depthwise": { model: "mobilenetv2", label: new RegExp(`^Conv 3x3 depthwise → ${blocked(144, 56)}$`), kind: "conv" },
  // bert-base: the FFN's first linear layer [128,768] x [768,3072], the attention's QK^T and AV
  "bert-linear": { model: "bert-base", label: /^(MatMul|Gemm|DensePack|MatMulPacked) .*(1x)?128x3072$/, kind: "matmul" },
  "bert-attention-qk": { model: "bert-base", label: /^(MatMul) .*12x128x128$/, kind: "matmul" },
  "bert-attention-av": { model: "bert-base", label: /^(MatMul) .*12x128x64$/, kind: "matmul" },
}
const TASKS = arg("tasks", Object.keys(CATALOGUE).join(",")).split(",")

fs.mkdirSync(OUT, { recursive: true })
const buildDir = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-search-curves-"))
const measureOptions = {
  measure: { repeats: 3, minRepeatMs: 5, timeoutMs: 20_000, rtol: 1e-3, atol: 1e-4, flushBytes: cacheSweepBytes() },
  threads: THREADS,
  chunk: 4,
  buildJobs: Math.max(1, os.availableParallelism() - THREADS),
  build: { ...defaultCBuildConfig(), cacheDir: buildDir },
  overlap: THREADS < os.availableParallelism(),
}

/** The task's space as this run searches it (`--space`). */
const restrict = (r: TaskRunner): TaskRunner => {
  if (SPACE === "union") return r
  const only = SPACE === "generated" ? "generated" : "template"
  const knobs: Knob[] = r.task.knobs.map((k) => (k.name === "sketch" && k.kind === "choice" ? { ...k, candidates: [only] } : k))
  if (!r.task.knobs.some((k) => k.name === "sketch")) throw new Error(`task ${r.task.label} has no generated space`)
  return { ...r, task: { ...r.task, knobs } }
}

const programs = new Map<string, TaskRunner[]>()
const runnersOf = async (model: string) => {
  let rs = programs.get(model)
  if (!rs) {
    const t0 = Date.now()
    const program = await run(compileGraph(zooGraph(model, 0), C_TARGET, { optLevel: 3 }))
    rs = tasksOfProgram(program, C_TARGET)
    log(`${model}: ${rs.length} tasks (${((Date.now() - t0) / 1000).toFixed(1)} s to compile)`)
    programs.set(model, rs)
  }
  return rs
}
const chosen: { name: string; kind: string; runner: TaskRunner }[] = []
for (const name of MODE === "labels" ? [] : TASKS) {
  const c = CATALOGUE[name]
  if (!c) throw new Error(`unknown task '${name}'; known: ${Object.keys(CATALOGUE).join(", ")}`)
  const rs = await runnersOf(c.model)
  const r = rs.find((x) => c.label.test(x.task.label))
  if (!r) throw new Error(`no ${c.model} task matches ${c.label}: ${rs.map((x) => x.task.label).join("; ")}`)
  chosen.push({ name, kind: c.kind, runner: restrict(r) })
}

if (MODE === "labels") {
  for (const name of new Set(TASKS.map((t) => CATALOGUE[t].model))) for (const r of await runnersOf(name)) console.log(`${name}\t${r.task.id}\t${r.task.label}\t${r.task.groups.length}`)
  process.exit(0)
}
if (MODE === "list") {
  const rows = []
  for (const { name, runner } of chosen) {
    const rng = prng(SEED)
    const size = spaceSize(runner.task.knobs)
    const configs = Array.from({ length: PROBE }, () => sampleConfig(runner.task.knobs, size, rng))
    const t0 = Date.now()
    const measured = PROBE > 0 ? await run(measurerFor(C_TARGET, runner, measureOptions)!(configs.map((config) => ({ config, func: runner.lowerConfig(config) })))) : []
    const perTrial = PROBE > 0 ? (Date.now() - t0) / 1000 / PROBE : NaN
    const row = { task: name, label: runner.task.label, mflop: runner.task.flops / 1e6, space: size, secondsPerTrial: perTrial, errors: measured.filter((m) => m.cost === undefined).length }
    rows.push(row)
    for (const m of measured) if (m.error) log(`  error: ${m.error.slice(0, 300)} (config ${JSON.stringify(m.config)})`)
    log(`${name}: ${runner.task.label}, ${(row.mflop).toFixed(1)} MFLOP, space ${size.toExponential(2)}, ${perTrial.toFixed(2)} s a trial (${row.errors} errors of ${PROBE})`)
  }
  const hours = rows.reduce((s, r) => s + r.secondsPerTrial * TRIALS * TUNER_NAMES.length, 0) / 3600
  console.log(JSON.stringify({ threads: THREADS, lanes: LANES, space: SPACE, trials: TRIALS, tuners: TUNER_NAMES, rows, estimatedHours: Number(hours.toFixed(2)) }, null, 1))
  fs.rmSync(buildDir, { recursive: true, force: true })
  process.exit(0)
}

const existing = fs.existsSync(LOG) ? (await run(readLog(LOG))).records : []
const makeTuner = async (name: (typeof TUNER_NAMES)[number], r: TaskRunner): Promise<Tuner> => {
  if (name === "random") return randomTuner(r.task, SEED)
  const model = await run(makeXGBoostModel())
  const features = (c: import("../src/lowering/templates/template.js").Config) => featuresOf(r.lowerConfig(c), r.task.knobs, c)
  return name === "xgb" ? xgbTuner(r.task, { seed: SEED, model, features }) : evoTuner(r.task, { seed: SEED, model, features })
}

/** The template's default, measured once (recorded as tuner "default"): a reference line. */
const measureDefault = async (r: TaskRunner, full: TaskRunner): Promise<number | undefined> => {
  const prior = existing.find((x) => x.workload === r.task.workload && x.tuner === "default")
  if (prior) return prior.gflops
  const config = full.task.template.defaults(full.task.knobs, full.target)
  const [m] = await run(measurerFor(C_TARGET, full, measureOptions)!([{ config, func: full.lowerConfig(config) }]))
  await run(appendRecords(LOG, [{ v: RECORD_VERSION, task: r.task.id, workload: r.task.workload, target: "c", config, costs: m.cost === undefined ? [] : [m.cost], timestamp: new Date().toISOString(), tuner: "default", ...(m.cost ? { gflops: r.task.flops / m.cost / 1e9 } : {}) }]))
  return m.cost ? r.task.flops / m.cost / 1e9 : undefined
}

const started = Date.now()
const summary = []
const curves: Curve[] = []
for (const { name, kind, runner } of chosen) {
  const full = (await runnersOf(CATALOGUE[name].model)).find((x) => x.task.workload === runner.task.workload)!
  const defaultGflops = await measureDefault(runner, full)
  const byTuner: Record<string, number[]> = {}
  const seconds: Record<string, number> = {}
  const errors: Record<string, number> = {}
  for (const tname of TUNER_NAMES) {
    const t0 = Date.now()
    const done = existing.filter((x) => x.workload === runner.task.workload && x.tuner === tname)
    const res = await run(
      tuneTask(runner.task, await makeTuner(tname, runner), runner.lowerConfig, measurerFor(C_TARGET, runner, measureOptions)!, {
        trials: TRIALS,
        batch: BATCH,
        target: "c",
        now: () => new Date().toISOString(),
        done,
        onRecords: (rs) => Effect.orDie(appendRecords(LOG, rs)),
      }),
    )
    byTuner[tname] = [...res.curve]
    seconds[tname] = (Date.now() - t0) / 1000
    errors[tname] = res.errors
    curves.push({ task: runner.task.id, label: `${name}: ${runner.task.label}`, tuner: tname, best: res.curve })
    log(`${name} ${tname}: ${res.trials} trials, best ${(res.curve.at(-1) ?? 0).toFixed(1)} GFLOP/s (default ${defaultGflops?.toFixed(1) ?? "-"}), ${res.errors} errors, ${seconds[tname].toFixed(0)} s`)
  }
  const randomBest = byTuner.random?.at(-1)
  summary.push({
    task: name,
    kind,
    label: runner.task.label,
    mflop: Number((runner.task.flops / 1e6).toFixed(1)),
    space: spaceSize(runner.task.knobs),
    defaultGflops,
    best: Object.fromEntries(Object.entries(byTuner).map(([t, c]) => [t, Number((c.at(-1) ?? 0).toFixed(2))])),
    trials: Object.fromEntries(Object.entries(byTuner).map(([t, c]) => [t, c.length])),
    // the trials each guided tuner needs to reach random's final best (null: not within its trials)
    trialsToRandomBest: randomBest === undefined ? {} : Object.fromEntries(Object.entries(byTuner).filter(([t]) => t !== "random").map(([t, c]) => [t, trialsToReach(c, randomBest) ?? null])),
    errors,
    seconds,
  })
}
fs.writeFileSync(path.join(OUT, `search-curves-c-${THREADS}t-${SPACE}.svg`), await renderCurvesSvg(curves, `Best-so-far GFLOP/s vs trials, ${SPACE} space (c, ${THREADS} thread${THREADS > 1 ? "s" : ""})`))
fs.rmSync(buildDir, { recursive: true, force: true })
const result = { cpu: os.cpus()[0]?.model, threads: THREADS, lanes: LANES, space: SPACE, trialsCap: TRIALS, seed: SEED, summary, seconds: (Date.now() - started) / 1000 }
fs.writeFileSync(path.join(OUT, `search-curves-c-${THREADS}t-${SPACE}.json`), JSON.stringify(result, null, 1))
console.log(JSON.stringify(result, null, 1))
