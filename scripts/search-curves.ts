// Best-so-far curves of the search on the generated spaces (issue 18: "on three conv and three
// matmul tasks, xgb reaches the best random search finds in 1,000 trials within ≤ 200 trials"):
// each chosen zoo task is tuned live on `c` (every trial built by gcc and timed in the isolated
// measuring child, checked against the reference first) by each tuner for up to `--trials`
// trials; the curves are drawn (plot.ts) and the trials each guided tuner needs to reach random's
// final best are printed.
//
//   npm run search-curves -- [--mode list|measure] [--trials 1000] [--tasks a,b,...]
//     [--tuners evo,xgb,random] [--space generated|union|template] [--threads 1] [--seed 1]
//     [--batch 16] [--out-dir .cache/search-curves] [--epsilon E (the guided tuners' random share)]
//
// --mode list: the tasks, their space sizes, and (with --probe N, default 4) the seconds a trial
//   takes, measured on N random configs of each: what `--trials` would cost.
// --mode measure: the curves. The logs (out-dir/search-c-<threads>t-<space>-<tuner>.jsonl, the
//   defaults in search-c-<threads>t-<space>.jsonl) are resumed: a rerun with a larger --trials
//   continues each (task, tuner) curve where it stopped.
// --mode report: the curves and the summary from the logs alone (--trials xgb=250,random=1000: each
//   tuner's first N), with --remeasure K each tuner's K fastest configs and the default timed again
//   side by side (one library, their repeats in turns).
// --mode model: the cost model on the logs' records: distinct feature rows, cross-validated rank.
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
const { cMeasureFlags, defaultCBuildConfig } = await import("../src/device/c/build.js")
const { BACKENDS, C_BUILD_FLAGS } = await import("../src/backend/index.js")
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
type Config = import("../src/lowering/templates/template.js").Config

const MODE = arg("mode", "measure")
const TRIALS = MODE === "report" ? 0 : Number(arg("trials", "1000"))
const SEED = Number(arg("seed", "1"))
const BATCH = Number(arg("batch", "16"))
const PROBE = Number(arg("probe", "4"))
const SPACE = arg("space", "generated")
const OUT = arg("out-dir", ".cache/search-curves")
const TUNER_NAMES = arg("tuners", "evo,xgb,random").split(",") as ("evo" | "xgb" | "random")[]
const C_TARGET = BACKENDS.c.target(hostCpu(), THREADS)
const LANES = Math.max(1, C_TARGET.attrs.vectorLanes)
// the defaults' log, and one log per tuner: a log's reader skips a config measured a second time
// (records.ts, "duplicate": two tuners on one log), and here two tuners measure one config by right
const LOG = path.join(OUT, `search-c-${THREADS}t-${SPACE}.jsonl`)
const logOf = (tuner: string) => path.join(OUT, `search-c-${THREADS}t-${SPACE}-${tuner}.jsonl`)
const readRecords = async (file: string) => (fs.existsSync(file) ? (await run(readLog(file))).records : [])
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
  build: { ...defaultCBuildConfig(cMeasureFlags(C_BUILD_FLAGS)), cacheDir: buildDir },
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

if (MODE === "model") {
  // the cost model on the log's measured configs of each chosen task: are the feature rows of
  // distinct configs distinct, and how well does the model rank configs it was not trained on
  // (5 folds: Spearman's rho, and the best true throughput among its top 5 over the fold's best)
  const logged = (await Promise.all(["evo", "xgb", "random"].map((t) => readRecords(logOf(t))))).flat()
  const ranks = (v: readonly number[]) => {
    const o = v.map((x, k) => [x, k] as const).sort((a, b) => a[0] - b[0])
    const r = new Array<number>(v.length)
    o.forEach(([, k], i) => (r[k] = i))
    return r
  }
  const spearman = (a: readonly number[], b: readonly number[]) => {
    const ra = ranks(a), rb = ranks(b)
    const m = (ra.length - 1) / 2
    let num = 0, da = 0, db = 0
    for (let k = 0; k < ra.length; k++) { num += (ra[k] - m) * (rb[k] - m); da += (ra[k] - m) ** 2; db += (rb[k] - m) ** 2 }
    return num / Math.sqrt(da * db)
  }
  for (const { name, runner } of chosen) {
    const rs = logged.filter((r) => r.workload === runner.task.workload && r.tuner !== "default" && r.confirm === undefined && r.costs.length > 0)
    if (rs.length < 20) { log(`${name}: ${rs.length} records in ${LOG}, too few`); continue }
    const xs = rs.map((r) => featuresOf(runner.lowerConfig(r.config), runner.task.knobs, r.config))
    const ys = rs.map((r) => runner.task.flops / Math.min(...r.costs) / 1e9)
    const groups = new Map<string, number[]>()
    xs.forEach((x, k) => groups.set(x.join(","), [...(groups.get(x.join(",")) ?? []), ys[k]]))
    const spread = Math.max(...[...groups.values()].map((g) => Math.max(...g) / Math.min(...g)))
    if (process.env.SHOW_COLLISIONS) {
      const worst = [...groups.entries()].sort((a, b) => Math.max(...b[1]) / Math.min(...b[1]) - Math.max(...a[1]) / Math.min(...a[1]))[0]
      xs.forEach((x, k) => { if (x.join(",") === worst[0]) log(`  ${ys[k].toFixed(1)} GFLOP/s ${JSON.stringify(Object.fromEntries(Object.entries(rs[k].config).filter(([n]) => n.startsWith("sk_"))))}`) })
    }
    const folds = 5
    const rho: number[] = [], top: number[] = []
    for (let f = 0; f < folds; f++) {
      const train = rs.map((_, k) => k).filter((k) => k % folds !== f), test = rs.map((_, k) => k).filter((k) => k % folds === f)
      const best = Math.max(...train.map((k) => ys[k]))
      const model = await run(makeXGBoostModel())
      await run(model.fit(train.map((k) => xs[k]), train.map((k) => ys[k] / best)))
      const pred = await run(model.predict(test.map((k) => xs[k])))
      rho.push(spearman(pred, test.map((k) => ys[k])))
      const order = test.map((k, i) => [pred[i], ys[k]] as const).sort((a, b) => b[0] - a[0])
      top.push(Math.max(...order.slice(0, 5).map((o) => o[1])) / Math.max(...test.map((k) => ys[k])))
    }
    const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length
    console.log(JSON.stringify({ task: name, records: rs.length, distinctConfigs: new Set(rs.map((r) => JSON.stringify(r.config))).size, distinctRows: groups.size, worstSpreadInARow: Number(spread.toFixed(2)), spearman: Number(mean(rho).toFixed(3)), top5OverBest: Number(mean(top).toFixed(3)) }))
  }
  process.exit(0)
}

if (MODE === "report") {
  // the curves, the summary and the figures from the log alone (no trial measured): each tuner's
  // first --trials records of a task (per tuner: --trials xgb=250,random=1000), then, with
  // --remeasure K, its K fastest configs and the default measured again side by side (one library,
  // their repeats in turns, 5× the trials' repeats): the best of 1,000 noisy timings is partly
  // the luckiest, so the final bests are compared on these timings as well as on the raw ones
  const cap = (t: string) => Number(new Map(arg("trials", "").split(",").map((x) => x.split("=") as [string, string])).get(t) ?? (Number(arg("trials", "")) || Infinity))
  const REMEASURE = Number(arg("remeasure", "0"))
  const logged = [...(await readRecords(LOG)), ...(await Promise.all(TUNER_NAMES.map((t) => readRecords(logOf(t))))).flat()]
  const curves: Curve[] = []
  const summary = []
  const gf = (r: TaskRunner, cost: number | undefined) => (cost === undefined ? 0 : r.task.flops / cost / 1e9)
  for (const { name, kind, runner } of chosen) {
    const full = (await runnersOf(CATALOGUE[name].model)).find((x) => x.task.workload === runner.task.workload)!
    const mine = logged.filter((x) => x.workload === runner.task.workload && x.confirm === undefined)
    const def = mine.find((x) => x.tuner === "default")
    const byTuner: Record<string, { config: Config; g: number; k: number }[]> = {}
    const curveOf: Record<string, number[]> = {}
    for (const t of TUNER_NAMES) {
      const rs = mine.filter((x) => x.tuner === t).slice(0, cap(t))
      byTuner[t] = rs.map((x, k) => ({ config: x.config, g: gf(runner, x.costs.length ? Math.min(...x.costs) : undefined), k }))
      let best = 0
      curveOf[t] = byTuner[t].map((x) => (best = Math.max(best, x.g)))
      curves.push({ task: runner.task.id, label: `${name}: ${runner.task.label}`, tuner: t, best: curveOf[t] })
    }
    const randomBest = curveOf.random?.at(-1)
    const row: Record<string, unknown> = {
      task: name,
      kind,
      label: runner.task.label,
      mflop: Number((runner.task.flops / 1e6).toFixed(1)),
      defaultGflops: def?.gflops,
      trials: Object.fromEntries(Object.entries(curveOf).map(([t, c]) => [t, c.length])),
      best: Object.fromEntries(Object.entries(curveOf).map(([t, c]) => [t, Number((c.at(-1) ?? 0).toFixed(2))])),
      bestAt200: Object.fromEntries(Object.entries(curveOf).map(([t, c]) => [t, Number((c.slice(0, 200).at(-1) ?? 0).toFixed(2))])),
      trialsToRandomBest: randomBest === undefined ? {} : Object.fromEntries(Object.entries(curveOf).filter(([t]) => t !== "random").map(([t, c]) => [t, trialsToReach(c, randomBest) ?? null])),
    }
    if (REMEASURE > 0 && def) {
      // each tuner's K fastest (xgb's among its first 200 trials: the claim is about them) and the default
      const tops = Object.entries(byTuner).flatMap(([t, xs]) =>
        [...(t === "random" ? xs : xs.slice(0, 200))].filter((x) => x.g > 0).sort((a, b) => b.g - a.g).slice(0, REMEASURE).map((x) => ({ ...x, t })),
      )
      const picks = [{ t: "default", config: def.config, g: def.gflops ?? 0, k: -1 }, ...tops]
      const opts = { ...measureOptions, measure: { ...measureOptions.measure, repeats: 15, interleave: true }, chunk: picks.length, buildJobs: 1, overlap: false }
      const measured = await run(measurerFor(C_TARGET, full, opts)!(picks.map((x) => ({ config: x.config, func: full.lowerConfig(x.config) }))))
      const again = picks.map((x, i) => ({ ...x, again: gf(runner, measured[i].cost) }))
      const bestAgain = (t: string) => again.filter((x) => x.t === t).reduce<(typeof again)[number] | undefined>((b, x) => (!b || x.again > b.again ? x : b), undefined)
      const rnd = bestAgain("random")
      row.remeasured = {
        default: Number(again[0].again.toFixed(2)),
        ...Object.fromEntries(TUNER_NAMES.map((t) => [t, bestAgain(t) ? { gflops: Number(bestAgain(t)!.again.toFixed(2)), raw: Number(bestAgain(t)!.g.toFixed(2)), trial: bestAgain(t)!.k + 1 } : null])),
        // the first trial of a guided tuner whose config, timed again, is at least random's best timed again
        trialsToRandomBest: Object.fromEntries(TUNER_NAMES.filter((t) => t !== "random").map((t) => {
          const hits = again.filter((x) => x.t === t && rnd !== undefined && x.again >= rnd.again).map((x) => x.k + 1)
          return [t, hits.length ? Math.min(...hits) : null]
        })),
        all: again.map((x) => ({ tuner: x.t, trial: x.k + 1, raw: Number(x.g.toFixed(2)), again: Number(x.again.toFixed(2)) })),
      }
    }
    summary.push(row)
    log(JSON.stringify(row))
  }
  fs.writeFileSync(path.join(OUT, `search-curves-c-${THREADS}t-${SPACE}.svg`), await renderCurvesSvg(curves, `Best-so-far GFLOP/s vs trials, ${SPACE} space (c, ${THREADS} thread${THREADS > 1 ? "s" : ""}, ${os.cpus()[0]?.model ?? "CPU"})`))
  fs.rmSync(buildDir, { recursive: true, force: true })
  const result = { cpu: os.cpus()[0]?.model, threads: THREADS, lanes: LANES, space: SPACE, seed: SEED, summary }
  fs.writeFileSync(path.join(OUT, `search-curves-c-${THREADS}t-${SPACE}-report.json`), JSON.stringify(result, null, 1))
  console.log(JSON.stringify(result, null, 1))
  process.exit(0)
}

const existing = [...(await readRecords(LOG)), ...(await Promise.all(TUNER_NAMES.map((t) => readRecords(logOf(t))))).flat()]
const makeTuner = async (name: (typeof TUNER_NAMES)[number], r: TaskRunner): Promise<Tuner> => {
  if (name === "random") return randomTuner(r.task, SEED)
  const model = await run(makeXGBoostModel())
  const features = (c: import("../src/lowering/templates/template.js").Config) => featuresOf(r.lowerConfig(c), r.task.knobs, c)
  const epsilon = arg("epsilon", "") === "" ? {} : { epsilon: Number(arg("epsilon", "")) }
  return name === "xgb" ? xgbTuner(r.task, { seed: SEED, model, features, ...epsilon }) : evoTuner(r.task, { seed: SEED, model, features, ...epsilon })
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
        onRecords: (rs) => Effect.orDie(appendRecords(logOf(tname), rs)),
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
