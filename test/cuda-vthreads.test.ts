// Virtual threads on the cuda target, TVM's way (InjectVirtualThread, Chen et al. 2018 §4.3): a
// block's shared tiles are fetched once a reduction step for every thread and virtual thread, and
// each virtual thread is a section of the thread's register tile with its copy of the updates,
// interleaved in the innermost loop. A config whose kernel thread runs more than a quarter warp of
// them (Ansor's max_vthread_extent, MetaSchedule's VerifyGPUCode bound: GpuLimits.maxVthreads) is
// refused from its schedule alone, and the tuner records it as a trial with that error without
// lowering or building it (a ResNet-18 3x3 conv config of 1,792 was 8.6 MB of CUDA: docs/cuda.md);
// the knobs bound each axis's vthreads so that no draw of either space runs past it.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { randomTensor } from "../src/cli/inputs.js"
import { seq, type Stmt } from "../src/ast/tir/tir.js"
import { lowerSync } from "../src/lowering/lower.js"
import { sharedFetchesPerStep } from "../src/lowering/templates/gpu/fetch-count.js"
import { vthreadCaps } from "../src/lowering/templates/gpu/limits.js"
import { BACKENDS } from "../src/backend/index.js"
import { compileGraph } from "../src/pipeline.js"
import { tasksOfProgram } from "../src/search/extract.js"
import { gpuLimits, vthreadsOf } from "../src/lowering/templates/gpu/index.js"
import type { Config, Knob } from "../src/lowering/templates/template.js"
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

/** The register tiles a lowered function allocates: their count and elements. */
const localAllocations = (s: Stmt): { count: number; elements: number } => {
  switch (s.kind) {
    case "allocate": {
      const inner = localAllocations(s.body)
      return s.buffer.scope === "local" ? { count: inner.count + 1, elements: inner.elements + s.buffer.shape.reduce((a, b) => a * b, 1) } : inner
    }
    case "for":
    case "let":
      return localAllocations(s.body)
    case "seq":
      return s.body.map(localAllocations).reduce((a, b) => ({ count: a.count + b.count, elements: a.elements + b.elements }), { count: 0, elements: 0 })
    case "if":
      return localAllocations(s.else ? seq([s.then, s.else]) : s.then)
    default:
      return { count: 0, elements: 0 }
  }
}

/** The same block tile with its vthreads folded into the inner factor ("v.t.i" → "1.t.v·i"). */
const folded = (t: string): string => {
  const [v, th, i] = t.split(".").map(Number)
  return `1.${th}.${v * i}`
}

describe("cuda virtual threads", () => {
  it("the bound is a quarter warp of the record (8 on every capability Tessera knows)", () => {
    expect(gpuLimits(target.attrs).maxVthreads).toBe(8)
  })

  it("vthreadsOf counts the sections InjectVirtualThread gives the thread's register tile, one allocation (AutoTVM's template: one vthread loop an axis); the shared tiles are fetched once a step, as many stores as the same block tile without vthreads", () => {
    for (const [f, y, x] of [["1.4.4", "1.8.1", "1.8.1"], ["2.4.2", "1.8.1", "1.8.1"], ["2.2.4", "2.4.1", "1.8.1"], ["2.2.4", "2.4.1", "2.4.1"], ["4.2.2", "4.2.1", "2.4.1"]]) {
      const c = autotvm(f, y, x)
      const want = [f, y, x].reduce((p, t) => p * Number(t.split(".")[0]), 1)
      const tile = [f, y, x].reduce((p, t) => p * Number(t.split(".")[2]), 1)
      expect(vthreadsOf(schedule(c)), `${f} ${y} ${x}`).toBe(want)
      const emitted = runner.lowerConfig(c)
      expect(localAllocations(emitted.body), `${f} ${y} ${x}`).toEqual({ count: 1, elements: want * tile })
    }
    // (the TIR evaluator's count, on one config: 8 vthreads against their fold)
    const c = autotvm("2.2.4", "2.4.1", "2.4.1")
    const flat = autotvm(...(["2.2.4", "2.4.1", "2.4.1"].map(folded) as [string, string, string]))
    const fetches = sharedFetchesPerStep(lowerSync(schedule(c)), runner.lowerConfig(c))
    expect(fetches.perStep).toBe(sharedFetchesPerStep(lowerSync(schedule(flat)), runner.lowerConfig(flat)).perStep)
    expect(fetches.perStep).toBeLessThanOrEqual(fetches.sharedElements)
    // the generated sketch's defaults run one
    expect(vthreadsOf(schedule(task.template.defaults(task.knobs, runner.target)))).toBe(1)
  })

  it("the knobs bound each axis's vthreads so that every draw's product is within the bound (AutoTVM's template and the generated tiling)", () => {
    const l = gpuLimits(target.attrs)
    const vt = (k: Knob) => Math.max(...k.candidates.map((t) => Number(String(t).split(".")[0])))
    const tiles = (names: RegExp) => task.knobs.filter((k) => names.test(k.name))
    for (const ks of [tiles(/^tile_[fyx]$/), tiles(/^mt_s\d+$/)]) {
      expect(ks.length).toBeGreaterThan(0)
      expect(ks.reduce((p, k) => p * vt(k), 1)).toBeLessThanOrEqual(l.maxVthreads)
      expect(ks.some((k) => vt(k) > 1)).toBe(true)
    }
    expect(vthreadCaps([16, 8, 8], 8)).toEqual([2, 2, 2])
    expect(vthreadCaps([1, 16, 8, 1], 8)).toEqual([1, 4, 2, 1])
    expect(vthreadCaps([64], 8)).toEqual([8])
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
