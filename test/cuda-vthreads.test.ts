// Virtual threads on the cuda target: a config whose kernel thread runs more than a quarter warp of
// them (Ansor's max_vthread_extent, MetaSchedule's VerifyGPUCode bound: GpuLimits.maxVthreads) is
// refused from its schedule alone, and the tuner records it as a trial with that error without
// lowering or building it — each virtual thread is a copy of the kernel's body in the source nvcc
// compiles (a ResNet-18 3x3 conv config of 1,792 was 8.6 MB of CUDA: docs/cuda.md). The count is
// the copies lowering.InjectVirtualThread makes.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { randomTensor } from "../src/cli/inputs.js"
import type { Stmt } from "../src/ast/tir/tir.js"
import { BACKENDS } from "../src/backend/index.js"
import { compileGraph } from "../src/pipeline.js"
import { tasksOfProgram } from "../src/search/extract.js"
import { gpuLimits, vthreadsOf } from "../src/lowering/templates/gpu/index.js"
import type { Config } from "../src/lowering/templates/template.js"
import { tuneTask } from "../src/search/tune.js"
import { randomTuner } from "../src/search/tuners.js"
import type { Measured } from "../src/device/measure.js"

const graph = makeGraph({
  opset: 13,
  inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 16, 8, 8] } }],
  outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 16, 8, 8] } }],
  initializers: new Map([["w", randomTensor("float32", [16, 16, 3, 3], 1)]]),
  nodes: [node("Conv", ["x", "w"], ["y"], { pads: attr.ints([1, 1, 1, 1]), kernel_shape: attr.ints([3, 3]) })],
})
const target = BACKENDS.cuda.target(undefined as never, 1, {})
const runner = tasksOfProgram(Effect.runSync(compileGraph(graph, target)), target).find((r) => r.task.label.startsWith("Conv 3x3"))!
const { task } = runner
const autotvm = (tile_f: string, tile_y: string, tile_x: string): Config => ({
  ...task.template.defaults(task.knobs, runner.target),
  cuda_sketch: "autotvm",
  tile_f,
  tile_y,
  tile_x,
  tile_rc: 4,
  tile_ry: 3,
  tile_rx: 1,
  auto_unroll_max_step: 0,
  unroll_explicit: 0,
})
const schedule = (c: Config) => task.template.apply(task.outputs, task.base, c)

/** The register tiles a lowered function allocates: one per copy of the kernel thread's body. */
const localAllocations = (s: Stmt): number => {
  switch (s.kind) {
    case "allocate":
      return (s.buffer.scope === "local" ? 1 : 0) + localAllocations(s.body)
    case "for":
    case "let":
      return localAllocations(s.body)
    case "seq":
      return s.body.reduce((n, b) => n + localAllocations(b), 0)
    case "if":
      return localAllocations(s.then) + (s.else ? localAllocations(s.else) : 0)
    default:
      return 0
  }
}

describe("cuda virtual threads", () => {
  it("the bound is a quarter warp of the record (8 on every capability Tessera knows)", () => {
    expect(gpuLimits(target.attrs).maxVthreads).toBe(8)
  })

  it("vthreadsOf counts the copies InjectVirtualThread makes of the kernel thread's body (AutoTVM's template: one vthread loop an axis)", () => {
    for (const [f, y, x] of [["1.4.4", "1.8.1", "1.8.1"], ["2.4.2", "1.8.1", "1.8.1"], ["2.2.4", "2.4.1", "1.8.1"], ["2.2.4", "2.4.1", "2.4.1"], ["4.2.2", "4.2.1", "2.4.1"]]) {
      const c = autotvm(f, y, x)
      const want = [f, y, x].reduce((p, t) => p * Number(t.split(".")[0]), 1)
      expect(vthreadsOf(schedule(c)), `${f} ${y} ${x}`).toBe(want)
      expect(localAllocations(runner.lowerConfig(c).body), `${f} ${y} ${x}`).toBe(want)
    }
    // the generated sketch's defaults run one
    expect(vthreadsOf(schedule(task.template.defaults(task.knobs, runner.target)))).toBe(1)
  })

  it("a config past the bound is refused; one at it is not", () => {
    expect(task.template.refuse?.(task.outputs, task.base, autotvm("2.2.4", "2.4.1", "2.4.1"))).toBeUndefined()
    expect(task.template.refuse?.(task.outputs, task.base, autotvm("4.2.2", "4.2.1", "2.4.1"))).toMatch(/^maxVthreads: 32 virtual threads a thread, over the 8/)
  })

  it("tune records a refused config as a trial with its error and never lowers or measures it", async () => {
    const refused = autotvm("4.2.2", "4.2.1", "2.4.1")
    const ok = autotvm("2.2.4", "2.4.1", "2.4.1")
    const lowered: Config[] = []
    const measured: Config[] = []
    const measure = (cands: readonly { config: Config }[]) =>
      Effect.sync((): Measured[] => cands.map((c) => (measured.push(c.config), { config: c.config, cost: 1e-3 })))
    const lowerConfig = (c: Config) => (lowered.push(c), runner.lowerConfig(c))
    const records: { config: Config; error?: string }[] = []
    await Effect.runPromise(
      tuneTask(task, randomTuner(task, 1), lowerConfig, measure, {
        trials: 2,
        batch: 2,
        target: "cuda",
        now: () => "t",
        first: [refused, ok],
        onRecords: (rs) => Effect.sync(() => void records.push(...rs)),
      }),
    )
    expect(measured).toEqual([ok])
    expect(lowered).toEqual([ok])
    const rec = records.find((r) => r.config.tile_y === "4.2.1")!
    expect(rec.error).toMatch(/^rejected: maxVthreads: 32 /)
  })
})
