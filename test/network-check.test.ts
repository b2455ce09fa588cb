// tune's network check (src/cli/network-check.ts): the applied record and the default, each timed
// inside the model's run, written as one more confirmation round, so compile applies the faster.
// The kernel timer is injected here, so which one is faster is the test's choice, not the machine's.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { makeTarget } from "../src/ast/target.js"
import { randomTensor } from "../src/cli/inputs.js"
import { networkCheck, type KernelTimer } from "../src/cli/network-check.js"
import { compileGraph } from "../src/pipeline.js"
import { tasksOfProgram } from "../src/search/extract.js"
import { RECORD_VERSION, rankedRecords, type TuningRecord } from "../src/search/records.js"
import { configKey, sampleConfig, spaceSize } from "../src/search/task.js"
import { prng } from "../src/ast/graph/arbitrary.js"

const graph = makeGraph({
  opset: 13,
  inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 8, 10, 10] } }],
  outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 8, 10, 10] } }],
  initializers: new Map([["w", randomTensor("float32", [8, 8, 3, 3], 1)]]),
  nodes: [node("Conv", ["x", "w"], ["a"], { pads: attr.ints([1, 1, 1, 1]) }), node("Relu", ["a"], ["y"])],
})
const target = makeTarget("js", { vectorLanes: 4 })

const setup = async () => {
  const untuned = await Effect.runPromise(compileGraph(graph, target))
  const runners = tasksOfProgram(untuned, target)
  const runner = runners.find((r) => spaceSize(r.task.knobs) > 1)!
  const def = runner.task.template.defaults(runner.task.knobs, runner.target)
  const rng = prng(3)
  let other = def
  while (configKey(other) === configKey(def)) other = sampleConfig(runner.task.knobs, spaceSize(runner.task.knobs), rng)
  const trial = (config: TuningRecord["config"], cost: number): TuningRecord => ({ v: RECORD_VERSION, task: runner.task.id, workload: runner.task.workload, target: "js", config, costs: [cost], timestamp: "t", tuner: "random" })
  return { untuned, runners, runner, def, other, trial }
}

/** Every kernel call takes `tuned` seconds in the program with the records and `dflt` in the default one. */
const fixed =
  (tuned: number, dflt: number): KernelTimer =>
  (which, _kernel, call) => {
    call()
    return which === "tuned" ? tuned : dflt
  }

describe("tune's network check", () => {
  it("a record slower inside the model than the default: the new round has both, and compile applies the default", async () => {
    const { untuned, runners, runner, def, other, trial } = await setup()
    // the trials said `other` was fastest (a lucky or misleading isolated measure)
    const records = [trial(other, 1e-6), trial(def, 2e-6)]
    expect(configKey(rankedRecords(records, "js").get(runner.task.workload)![0].config)).toBe(configKey(other))
    const check = await Effect.runPromise(networkCheck(graph, target, untuned, runners, records, { threads: 1, seed: 1, runs: 3, now: () => "n", timer: fixed(3e-3, 1e-3) }))
    expect(check.rows.map((r) => [r.task, r.tuned, r.default])).toEqual([[runner.task.id, 3e-3, 1e-3]])
    expect(check.records.map((r) => [configKey(r.config), r.costs, r.confirm, r.tuner])).toEqual([
      [configKey(other), [3e-3], 1, "network"],
      [configKey(def), [1e-3], 1, "network"],
    ])
    const after = [...records, ...check.records]
    expect(configKey(rankedRecords(after, "js").get(runner.task.workload)![0].config)).toBe(configKey(def))
    // and compile, given the log, applies the default's schedule: the untuned program's kernels
    const byWorkload = new Map<string, TuningRecord[]>([[runner.task.workload, after]])
    const program = await Effect.runPromise(compileGraph(graph, target, { tuned: byWorkload }))
    expect(program.kernels.map((k) => (k.kind === "compiled" ? JSON.stringify(k.func.body) : k.kind))).toEqual(untuned.kernels.map((k) => (k.kind === "compiled" ? JSON.stringify(k.func.body) : k.kind)))
  }, 60_000)

  it("a record faster inside the model stays applied; its round follows the log's last confirmation", async () => {
    const { untuned, runners, runner, def, other, trial } = await setup()
    const records = [trial(other, 1e-6), { ...trial(other, 1e-6), confirm: 2, tuner: undefined }, { ...trial(def, 2e-6), confirm: 2, tuner: undefined }].map((r) => JSON.parse(JSON.stringify(r)) as TuningRecord)
    const check = await Effect.runPromise(networkCheck(graph, target, untuned, runners, records, { threads: 1, seed: 1, runs: 3, now: () => "n", timer: fixed(1e-3, 2e-3) }))
    expect(check.records.map((r) => r.confirm)).toEqual([3, 3])
    expect(configKey(rankedRecords([...records, ...check.records], "js").get(runner.task.workload)![0].config)).toBe(configKey(other))
  }, 60_000)

  it("a workload whose best record is its default is not checked; nor is anything with no records", async () => {
    const { untuned, runners, def, trial } = await setup()
    const timer = fixed(1e-3, 1e-3)
    for (const records of [[trial(def, 1e-6)], []]) {
      const check = await Effect.runPromise(networkCheck(graph, target, untuned, runners, records, { threads: 1, seed: 1, runs: 3, now: () => "n", timer }))
      expect(check).toEqual({ rows: [], records: [] })
    }
  }, 60_000)
})
