// A stop request inside the tuner's synchronous work (issue: `tune` stopped 1.6–2.0 s after SIGINT
// on CI). A config takes up to seconds of CPU to lower and a batch lowers several, with no check
// between them, so a SIGINT landing in a batch's lowering waited out the supervisor's grace period
// and was ended from outside. Now each lowering checks the stop flag before it starts and between
// its TIR passes, and a stop there ends the run: it is never recorded as a failed trial.
import { Effect, Exit, Cause } from "effect"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { InterruptedError, type Interrupt } from "../src/ast/graph/errors.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { tensor } from "../src/ast/graph/tensor.js"
import { makeTarget } from "../src/ast/target.js"
import { printPrimFunc, type PrimFunc } from "../src/ast/tir/tir.js"
import type { Config } from "../src/lowering/templates/template.js"
import { compileGraph } from "../src/pipeline.js"
import { tasksOfProgram } from "../src/search/extract.js"
import type { TuningRecord } from "../src/search/records.js"
import { randomTuner } from "../src/search/tuners.js"
import { tuneTask, type Measured } from "../src/search/tune.js"

const target = makeTarget("js", { vectorLanes: 4 })
const conv = makeGraph({
  opset: 13,
  inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 8, 10, 10] } }],
  outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 8, 10, 10] } }],
  initializers: new Map([["w", tensor("float32", [8, 8, 3, 3], Float32Array.from({ length: 576 }, (_, k) => Math.sin(k)))]]),
  nodes: [node("Conv", ["x", "w"], ["c"], { pads: attr.ints([1, 1, 1, 1]) }), node("Relu", ["c"], ["y"])],
})
const program = Effect.runSync(compileGraph(conv, target))
const stopFlag = (): Interrupt => ({ flag: new Int32Array(new SharedArrayBuffer(4)), reasons: { 1: "SIGINT" } })

describe("a stop request while the tuner lowers configs", () => {
  it("a runner's lowering checks the flag: unset, the same function as without one; set, InterruptedError naming the task", () => {
    const stop = stopFlag()
    const [plain] = tasksOfProgram(program, target)
    const [watched] = tasksOfProgram(program, target, stop)
    const config = plain.task.template.defaults(plain.task.knobs, plain.target)
    expect(printPrimFunc(watched.lowerConfig(config))).toBe(printPrimFunc(plain.lowerConfig(config)))
    Atomics.store(stop.flag, 0, 1)
    let thrown: unknown
    try {
      watched.lowerConfig(config)
    } catch (e) {
      thrown = e
    }
    expect(thrown).toBeInstanceOf(InterruptedError)
    expect((thrown as InterruptedError).message).toBe(`interrupted (SIGINT): stopped at lowering a config of task ${watched.task.id}`)
    // the runner without a flag is not stopped by it
    expect(() => plain.lowerConfig(config)).not.toThrow()
  })

  it("a stop inside a batch's lowering ends the run: the earlier batches' records stand, the stopped batch records nothing", async () => {
    const stop = stopFlag()
    const [runner] = tasksOfProgram(program, target, stop)
    let lowered = 0
    // the flag is set as the 6th config starts lowering (the second batch of 4: after the default's batch of 1)
    const lowerConfig = (config: Config): PrimFunc => {
      if (++lowered === 6) Atomics.store(stop.flag, 0, 1)
      return runner.lowerConfig(config)
    }
    const measured: Config[][] = []
    const measure = (cands: readonly { config: Config; func: PrimFunc }[]) =>
      Effect.sync((): Measured[] => {
        measured.push(cands.map((c) => c.config))
        return cands.map((c) => ({ config: c.config, cost: 1e-3 }))
      })
    const records: TuningRecord[] = []
    const exit = await Effect.runPromiseExit(
      tuneTask(runner.task, randomTuner(runner.task, 1), lowerConfig, measure, {
        trials: 40,
        batch: 4,
        target: "js",
        now: () => "2026-11-28T00:00:00Z",
        first: [runner.task.template.defaults(runner.task.knobs, runner.target)],
        onRecords: (rs) => Effect.sync(() => void records.push(...rs)),
      }),
    )
    expect(Exit.isFailure(exit)).toBe(true)
    const squashed = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
    expect(squashed).toBeInstanceOf(InterruptedError)
    // the default's batch and the first tuner batch were measured and recorded; the stopped one was not
    expect(measured.map((b) => b.length)).toEqual([1, 4])
    expect(records).toHaveLength(5)
    expect(records.filter((r) => r.error !== undefined)).toEqual([])
  })
})
