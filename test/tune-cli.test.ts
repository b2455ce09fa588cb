// `tessera tune` as users run it (the CLI bundled into a folder of our own, run with node): a
// one-conv model tuned for a handful of trials writes a parseable log; a second run resumes from
// it (no config measured twice); --report draws the curves as SVG; a corrupt log line is skipped
// with a warning; compileGraph applies the log's best records (and still computes the same); on c
// the records are per thread count.
import { Effect } from "effect"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { randomTensor } from "../src/cli/inputs.js"
import { makeTarget } from "../src/ast/target.js"
import { compilerAvailable } from "../src/device/c/build.js"
import { hostTarget } from "../src/device/host.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { tasksOfProgram } from "../src/search/extract.js"
import { bestRecords, isTrial, parseLog, rankedRecords, type TuningRecord } from "../src/search/records.js"
import { configKey } from "../src/search/task.js"
import { CLI } from "./support/dist.js"

let tmp = ""
/** What compile and tune use for c here. */
const LANES = hostTarget().attrs.vectorLanes

const f32 = (shape: number[], seed: number) => randomTensor("float32", shape, seed)
const graph = makeGraph({
  opset: 13,
  inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 8, 10, 10] } }],
  outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 8, 10, 10] } }],
  initializers: new Map([
    ["w", f32([8, 8, 3, 3], 1)],
    ["b", f32([8], 2)],
  ]),
  nodes: [node("Conv", ["x", "w", "b"], ["c"], { pads: attr.ints([1, 1, 1, 1]) }), node("Relu", ["c"], ["y"])],
})

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-tune-"))
  fs.writeFileSync(path.join(tmp, "conv.onnx"), encodeOnnx(graph))
}, 120_000)
afterAll(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true })
})

const tessera = (...args: string[]) => spawnSync(process.execPath, [CLI, ...args], { cwd: tmp, encoding: "utf8", timeout: 120_000 })
const FAST = ["--repeats", "1", "--min-repeat-ms", "1", "--batch", "3", "--tuner", "random", "--no-network-check"]
const readRecords = () => parseLog(fs.readFileSync(path.join(tmp, "tune.jsonl"), "utf8"))

describe("tessera tune", () => {
  it("tunes for a handful of trials: a parseable log, one record per trial, a final table", () => {
    const r = tessera("tune", "conv.onnx", "--log", "tune.jsonl", "--trials", "4", ...FAST)
    expect(r.stderr).toMatch(/1 tasks from conv\.onnx/)
    expect(r.status).toBe(0)
    expect(r.stdout).toMatch(/best GFLOP\/s/)
    expect(r.stdout).toMatch(/Conv 3x3 → 1x2x10x10x4/)
    expect(r.stdout).toMatch(/vs default/)
    expect(r.stdout).toMatch(/\d\.\d\dx\s*$/m)
    const log = readRecords()
    expect(log.warnings).toEqual([])
    const trials = log.records.filter(isTrial)
    expect(trials.length).toBe(4)
    for (const rec of trials) {
      expect(rec.target).toBe("js")
      expect(rec.tuner).toBe("random")
      expect(rec.error).toBeUndefined()
      expect(rec.costs[0]).toBeGreaterThan(0)
    }
    // then the confirmation: the default (the first trial) and the three others, measured again
    const round = log.records.filter((x) => !isTrial(x))
    expect(round.map((x) => x.confirm)).toEqual([1, 1, 1, 1])
    expect(new Set(round.map((x) => configKey(x.config)))).toEqual(new Set(trials.map((x) => configKey(x.config))))
    expect(bestRecords(log.records, "js").get(trials[0].workload)!.confirm).toBe(1)
  }, 120_000)

  it("a second run resumes from the log: the trials already there count, no config is measured twice", () => {
    const r = tessera("tune", "conv.onnx", "--log", "tune.jsonl", "--trials", "9", ...FAST)
    expect(r.status).toBe(0)
    expect(r.stderr).toMatch(/8 records already/)
    expect(r.stdout).toMatch(/\s9\s+4\s+0\s/) // trials 9, resumed 4, errors 0
    const records = readRecords().records.filter(isTrial)
    expect(records.length).toBe(9)
    expect(new Set(records.map((x) => configKey(x.config))).size).toBe(9)
    // a second confirmation round
    expect(readRecords().records.filter((x) => x.confirm === 2).length).toBe(4)
  }, 120_000)

  it("a corrupt line is skipped with a warning, the records around it still count", () => {
    fs.appendFileSync(path.join(tmp, "tune.jsonl"), '{"v":1,"task":"cut off mid-wri\n')
    const r = tessera("tune", "conv.onnx", "--log", "tune.jsonl", "--trials", "10", ...FAST)
    expect(r.status).toBe(0)
    // (9 trials and two rounds of 4 before it)
    expect(r.stderr).toMatch(/tune\.jsonl: line 18: not JSON .*skipped/)
    const log = readRecords()
    expect(log.records.filter(isTrial).length).toBe(10)
    expect(log.warnings.length).toBe(1)
  }, 120_000)

  it("--report draws the best-so-far curves as SVG", () => {
    const r = tessera("tune", "--report", "tune.jsonl", "--out", "curves.svg")
    expect(r.status).toBe(0)
    const summary = JSON.parse(r.stdout.trim().split("\n").at(-1)!)
    expect(summary.curves).toHaveLength(1)
    expect(summary.curves[0].trials).toBe(10)
    const svg = fs.readFileSync(path.join(tmp, "curves.svg"), "utf8")
    expect(svg.startsWith("<svg")).toBe(true)
    expect(svg).toContain("random")
    expect(svg).toContain("best GFLOP/s")
  }, 120_000)

  it("usage mistakes are one line and exit 2", () => {
    const noLog = tessera("tune", "conv.onnx")
    expect(noLog.status).toBe(2)
    expect(noLog.stderr.trim()).toMatch(/^tessera tune: --log: .*\(see 'tessera tune --help'\)$/)
    const badTarget = tessera("tune", "conv.onnx", "--log", "x.jsonl", "--target", "tpu")
    expect(badTarget.status).toBe(2)
    expect(badTarget.stderr).toMatch(/--target: cannot tune for target 'tpu' yet \(tunable: .*vta\)/)
    // vta tunes a quantized model's offloaded convs: a float model has none
    const floatOnVta = tessera("tune", "conv.onnx", "--log", "x.jsonl", "--target", "vta")
    expect(floatOnVta.status).toBe(2)
    expect(floatOnVta.stderr).toMatch(/MODEL: no convolution of conv\.onnx runs on VTA/)
    const noOut = tessera("tune", "--report", "tune.jsonl")
    expect(noOut.status).toBe(2)
    const jsThreads = tessera("tune", "conv.onnx", "--log", "x.jsonl", "--threads", "2")
    expect(jsThreads.status).toBe(2)
    expect(jsThreads.stderr).toMatch(/--threads: the js target runs on one thread/)
  })

  it.skipIf(!compilerAvailable())("tunes on c with --threads 2: records keyed by that thread count, applied by compile with the same threads only", async () => {
    const r = tessera("tune", "conv.onnx", "--target", "c", "--threads", "2", "--log", "c.jsonl", "--trials", "4", ...FAST)
    expect(r.stderr).toMatch(/1 tasks from conv\.onnx; c, 2 threads/)
    expect(r.status).toBe(0)
    const log = parseLog(fs.readFileSync(path.join(tmp, "c.jsonl"), "utf8"))
    expect(log.warnings).toEqual([])
    expect(log.records.filter(isTrial)).toHaveLength(4)
    for (const rec of log.records) {
      expect(rec.target).toBe("c")
      expect(rec.workload).toContain(`c:lanes=${LANES}:cores=2`)
      expect(rec.error).toBeUndefined()
      expect(rec.costs[0]).toBeGreaterThan(0)
    }
    const tuned = bestRecords(log.records, "c")
    const two = await Effect.runPromise(compileGraph(graph, makeTarget("c", { vectorLanes: LANES, cores: 2 }), { tuned }))
    expect(two.tuning.applied).toHaveLength(1)
    const one = await Effect.runPromise(compileGraph(graph, makeTarget("c", { vectorLanes: LANES, cores: 1 }), { tuned }))
    expect(one.tuning.applied).toEqual([])
  }, 120_000)

  it("compileGraph applies the log's best record, and the tuned program computes the same", async () => {
    const { records } = readRecords()
    const tuned = bestRecords(records, "js")
    expect(tuned.size).toBe(1)
    const program = await Effect.runPromise(compileGraph(graph, makeTarget("js", { vectorLanes: 4 }), { tuned }))
    expect(program.tuning.applied).toHaveLength(1)
    expect(program.tuning.skipped).toEqual([])
    const best = [...tuned.values()][0]
    const kernel = program.kernels.find((k) => k.kind === "compiled" && k.group === program.tuning.applied[0])
    expect(kernel?.kind).toBe("compiled")
    const feeds = new Map([["x", f32([1, 8, 10, 10], 3)]])
    const got = (await Effect.runPromise(loadProgram(program, makeTarget("js")))).run(feeds).get("y")!
    const want = runGraph(graph, feeds)[0]
    for (let i = 0; i < want.data.length; i++) expect(Math.abs(got.data[i] - want.data[i])).toBeLessThanOrEqual(1e-4 + 1e-3 * Math.abs(want.data[i]))
    // the record is a point of the task's space: every knob, nothing else
    const [runner] = tasksOfProgram(program, makeTarget("js", { vectorLanes: 4 }))
    expect(runner.task.workload).toBe(best.workload)
    expect(Object.keys(best.config).sort()).toEqual(runner.task.knobs.map((k) => k.name).sort())
  }, 120_000)

  it("--time-budget: the task scheduler tunes the model's tasks (a workload two groups run weighs 2), evo's generated-space records apply and compute the same", async () => {
    const two = makeGraph({
      opset: 13,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 8, 10, 10] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 8, 10, 10] } }],
      initializers: new Map([
        ["w", f32([8, 8, 3, 3], 1)],
        ["w2", f32([8, 8, 3, 3], 4)],
        ["w3", f32([8, 8, 1, 1], 5)],
      ]),
      nodes: [
        node("Conv", ["x", "w"], ["a"], { pads: attr.ints([1, 1, 1, 1]) }),
        node("Relu", ["a"], ["b"]),
        node("Conv", ["b", "w2"], ["c"], { pads: attr.ints([1, 1, 1, 1]) }),
        node("Relu", ["c"], ["d"]),
        node("Conv", ["d", "w3"], ["y"]),
      ],
    })
    fs.writeFileSync(path.join(tmp, "two.onnx"), encodeOnnx(two))
    const r = tessera("tune", "two.onnx", "--log", "budget.jsonl", "--time-budget", "60s", "--trials", "12", "--tuner", "evo", "--repeats", "1", "--min-repeat-ms", "1", "--batch", "4", "--confirm", "0")
    expect(r.status).toBe(0)
    expect(r.stderr).toMatch(/2 tasks from two\.onnx/)
    expect(r.stderr).toMatch(/\(weight 2\)/)
    expect(r.stderr).toMatch(/\(weight 1\)/)
    const log = parseLog(fs.readFileSync(path.join(tmp, "budget.jsonl"), "utf8"))
    const byTask = new Map<string, number>()
    const trials = log.records.filter((rec) => rec.tuner !== "network")
    for (const rec of trials) {
      expect(rec.error).toBeUndefined()
      expect(rec.tuner).toBe("evo")
      byTask.set(rec.workload, (byTask.get(rec.workload) ?? 0) + 1)
    }
    expect([...byTask.values()]).toEqual([12, 12])
    // the network check (on by default): per workload whose best trial is not the default, a
    // confirmation round of two records, that config and the default, each timed inside the model
    // run; compile applies the faster of the two
    expect(r.stderr).toMatch(/network check \(.* s, 7 runs each in turns\): \d+ tuned workloads timed inside the model/)
    const network = log.records.filter((rec) => rec.tuner === "network")
    const js = makeTarget("js", { vectorLanes: 4 })
    const compiled = await Effect.runPromise(compileGraph(two, js))
    const runners = tasksOfProgram(compiled, js)
    const checked = runners.filter((x) => network.some((rec) => rec.workload === x.task.workload))
    expect(network.length).toBe(2 * checked.length)
    for (const x of checked) {
      const pair = network.filter((rec) => rec.workload === x.task.workload)
      expect(pair.map((rec) => rec.confirm)).toEqual([1, 1])
      expect(pair.every((rec) => rec.costs.length === 1 && rec.costs[0] > 0)).toBe(true)
      const def = x.task.template.defaults(x.task.knobs, x.target)
      expect(pair.filter((rec) => configKey(rec.config) === configKey(def)).length).toBe(1)
      const faster = [...pair].sort((a, b) => a.costs[0] - b.costs[0])[0]
      expect(configKey(rankedRecords(log.records, "js").get(x.task.workload)![0].config)).toBe(configKey(faster.config))
    }
    const generated = trials.filter((x) => x.config.sketch === "generated")
    expect(generated.length).toBeGreaterThan(0)
    // a generated-space record applied where its workload recurs (both 3x3 groups), computing the same
    const tuned = new Map(generated.map((x) => [x.workload, x] as const))
    const target = makeTarget("js", { vectorLanes: 4 })
    const program = await Effect.runPromise(compileGraph(two, target, { tuned }))
    expect(program.tuning.skipped).toEqual([])
    expect(program.tuning.applied.length).toBeGreaterThanOrEqual(1)
    const feeds = new Map([["x", f32([1, 8, 10, 10], 3)]])
    const got = (await Effect.runPromise(loadProgram(program, makeTarget("js")))).run(feeds).get("y")!
    const want = runGraph(two, feeds)[0]
    for (let i = 0; i < want.data.length; i++) expect(Math.abs(got.data[i] - want.data[i])).toBeLessThanOrEqual(1e-4 + 1e-3 * Math.abs(want.data[i]))
  }, 180_000)
})

describe("tessera tune does not trust its log (issue 19)", () => {
  /** The log's lines as JSON, a planted line appended for each of `plant`'s results. */
  const plant = (file: string, make: (good: TuningRecord[]) => (TuningRecord | string)[]) => {
    const good = parseLog(fs.readFileSync(path.join(tmp, file), "utf8")).records as TuningRecord[]
    fs.appendFileSync(path.join(tmp, file), make(good).map((r) => (typeof r === "string" ? r : JSON.stringify(r)) + "\n").join(""))
  }

  it("planted records (outside the knob space, negative and infinite costs, a wrong task key, a duplicate) are skipped, counted and named; evo resumes; compile applies the best record that fits", () => {
    expect(tessera("tune", "conv.onnx", "--log", "planted.jsonl", "--trials", "4", ...FAST).status).toBe(0)
    plant("planted.jsonl", ([t0, t1]) => [
      // before this change: evo lowered it while resuming and aborted ("factor must be a positive integer, got -4")
      { ...t1, config: { ...t1.config, sketch: "generated", sk_r0: -4 }, costs: [1e-9] },
      // the fastest of a new confirmation round, were it trusted: compile must pass over it
      { ...t1, config: { ...t1.config, tile_ow: 999 }, costs: [1e-9], confirm: 7 },
      { ...t1, costs: [-1] },
      JSON.stringify({ ...t1, costs: [1] }).replace('"costs":[1]', '"costs":[1e999]'),
      { ...t1, task: "deadbeef" },
      t0,
    ])
    const r = tessera("tune", "conv.onnx", "--log", "planted.jsonl", "--trials", "8", "--tuner", "evo", "--repeats", "1", "--min-repeat-ms", "1", "--batch", "2", "--no-network-check")
    expect(r.stderr).not.toMatch(/factor must be|internal error/)
    expect(r.status).toBe(0)
    expect(r.stderr).toMatch(/planted\.jsonl: line 9: config [0-9a-f]{8} of task [0-9a-f]{8} is outside its knob space, skipped/)
    expect(r.stderr).toMatch(/planted\.jsonl: line 11: cost -1 is not a positive number of seconds/)
    expect(r.stderr).toMatch(/planted\.jsonl: skipped 6 of 14 records \((?=.*2 cost)(?=.*2 outside-space)(?=.*1 task-key)(?=.*1 duplicate).*\); the rest are used/)
    expect(r.stdout).toMatch(/\s8\s+4\s+0\s/) // trials 8, resumed 4 (the planted ones not counted), errors 0
    // compile reads the same log: the planted round-7 record is outside the knobs, passed over
    const c = tessera("compile", "conv.onnx", "--target", "js", "--tuned", "planted.jsonl", "--out", "planted-out")
    expect(c.status).toBe(0)
    expect(c.stderr).toMatch(/skipped 4 of \d+ records/) // (at parse: the costs, the task key, the duplicate)
    expect(c.stderr).toMatch(/applied: 1 groups/)
    expect(c.stderr).toMatch(/#\d+: 2 records \([0-9a-f]{8}, …\) outside the template's knobs/)
  }, 180_000)

  it("flags that cannot be meant are usage errors (exit 2) naming the flag, never clamped", () => {
    for (const [flag, value] of [
      ["--timeout-ms", "-1"],
      ["--timeout-ms", "0"],
      ["--trials", "0"],
      ["--trials", "-3"],
      ["--trials", "NaN"],
      ["--trials", "2.5"],
      ["--repeats", "0"],
      ["--min-repeat-ms", "-5"],
      ["--threads", "0"],
      ["--batch", "100000"],
      ["--time-budget", "soon"],
      ["--time-budget", "0s"],
      ["--time-budget", "9".repeat(400)],
    ] as const) {
      const r = tessera("tune", "conv.onnx", "--log", "flags.jsonl", flag, value)
      expect(r.status, `${flag} ${value}: ${r.stderr}`).toBe(2)
      expect(r.stderr.trim().split("\n")).toHaveLength(1)
      expect(r.stderr).toContain(flag)
      expect(fs.existsSync(path.join(tmp, "flags.jsonl"))).toBe(false)
    }
  }, 120_000)

  it("two tuners on one log: the second refuses while the first runs (no trial written twice); the first's lock is gone when it ends", async () => {
    const first = spawn(process.execPath, [CLI, "tune", "conv.onnx", "--log", "shared.jsonl", "--trials", "30", ...FAST], { cwd: tmp, stdio: "ignore" })
    const done = new Promise<number | null>((resolve) => first.on("exit", resolve))
    const lock = path.join(tmp, "shared.jsonl.lock")
    for (let k = 0; k < 300 && !fs.existsSync(lock); k++) await new Promise((res) => setTimeout(res, 50))
    expect(fs.existsSync(lock)).toBe(true)
    const second = tessera("tune", "conv.onnx", "--log", "shared.jsonl", "--trials", "30", ...FAST)
    expect(second.status).toBe(1)
    expect(second.stderr.trim()).toMatch(new RegExp(`^tessera tune: 'shared\\.jsonl' is in use: its lock shared\\.jsonl\\.lock is held by pid ${first.pid} on host .*Another tuner is using this log`))
    expect(await done).toBe(0)
    expect(fs.existsSync(lock)).toBe(false)
    const log = parseLog(fs.readFileSync(path.join(tmp, "shared.jsonl"), "utf8"))
    expect(log.skipped).toEqual([])
    expect(log.records.filter(isTrial)).toHaveLength(30)
  }, 180_000)
})
