// The threads and shared bytes a block of a tiled conv's config asks for, from its knobs alone
// (src/lowering/templates/gpu/footprint.ts, the cuda template's `refuse`), equal what
// verifyGpuFunc counts in the lowered kernel, on random draws of both sketches (AutoTVM's
// template and the generated tiling), strided and not: so a config refused for them would
// have been rejected after lowering, and no config that builds is lost.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { randomTensor } from "../src/cli/inputs.js"
import { BACKENDS } from "../src/backend/index.js"
import { compileGraph } from "../src/pipeline.js"
import { tasksOfProgram } from "../src/search/extract.js"
import { gpuLimits, gpuRules, verifyGpuFunc } from "../src/lowering/templates/gpu/index.js"
import { blockFootprint, footprintRefusal } from "../src/lowering/templates/gpu/footprint.js"
import { tuneTask, type Measured } from "../src/search/tune.js"
import { randomTuner } from "../src/search/tuners.js"

const target = BACKENDS.cuda.target(undefined as never, 1, {})
const l = gpuLimits(target.attrs)
const conv = (c: number, k: number, hw: number, stride: number) =>
  makeGraph({
    opset: 13,
    inputs: [{ name: "x", type: { dtype: "float32", shape: [1, c, hw, hw] } }],
    outputs: [{ name: "y", type: { dtype: "float32", shape: [1, k, hw / stride, hw / stride] } }],
    initializers: new Map([["w", randomTensor("float32", [k, c, 3, 3], 1)]]),
    nodes: [node("Conv", ["x", "w"], ["y"], { pads: attr.ints([1, 1, 1, 1]), kernel_shape: attr.ints([3, 3]), strides: attr.ints([stride, stride]) })],
  })

describe("cuda: a block's footprint from the knobs", () => {
  for (const [c, k, hw, stride] of [
    [64, 64, 14, 1],
    [64, 128, 28, 2],
  ] as const) {
    it(`equals the lowered kernel's threads and shared bytes (conv ${c}→${k}, ${hw}x${hw}, stride ${stride})`, () => {
      const runner = tasksOfProgram(Effect.runSync(compileGraph(conv(c, k, hw, stride), target)), target).find((r) => r.task.label.startsWith("Conv 3x3"))!
      const { task } = runner
      const anchor = gpuRules(task.base, l).find((r) => r.rule === "tile")!.stage
      const configs = Effect.runSync(randomTuner(task, 7).next(48))
      let refused = 0
      const sketches = new Set<unknown>()
      for (const config of configs) {
        sketches.add(config.cuda_sketch)
        const fp = blockFootprint(task.base, anchor, config)
        const kernels = verifyGpuFunc(runner.lowerConfig(config), l).kernels
        const tile = kernels.reduce((a, b) => (b.sharedBytes > a.sharedBytes ? b : a))
        expect({ config, threads: tile.threads, sharedBytes: tile.sharedBytes, n: kernels.length }).toEqual({ config, ...fp, n: kernels.length })
        if (footprintRefusal(fp, l) !== undefined) refused++
        if (footprintRefusal(fp, l) !== undefined) expect(task.template.refuse?.(task.outputs, task.base, config)).toBe(footprintRefusal(fp, l))
      }
      // (the draws hold both sketches and some refused ones: the check is exercised both ways)
      expect(sketches.size).toBe(2)
      expect(refused).toBeGreaterThan(0)
      expect(refused).toBeLessThan(configs.length)
    })
  }
})

describe("cuda: a tuning run spends its trials on configs that can run", () => {
  it("the tuner's draws skip the configs the template refuses: every trial is lowered and measured", async () => {
    const runner = tasksOfProgram(Effect.runSync(compileGraph(conv(64, 128, 28, 2), target)), target).find((r) => r.task.label.startsWith("Conv 3x3"))!
    const { task } = runner
    const refuses = (c: Record<string, unknown>) => task.template.refuse?.(task.outputs, task.base, c as never) !== undefined
    // the same seed's plain draws hold refused configs (so the run below is a check, not a given)
    const plain = Effect.runSync(randomTuner(task, 3).next(24))
    expect(plain.filter(refuses).length).toBeGreaterThan(0)
    const measured: unknown[] = []
    const records: { error?: string }[] = []
    const result = await Effect.runPromise(
      tuneTask(
        task,
        randomTuner(task, 3),
        (c) => runner.lowerConfig(c),
        (cands) => Effect.sync((): Measured[] => cands.map((c) => (measured.push(c.config), { config: c.config, cost: 1e-3 }))),
        { trials: 24, batch: 8, target: "cuda", now: () => "t", onRecords: (rs) => Effect.sync(() => void records.push(...rs)) },
      ),
    )
    expect(result.trials).toBe(24)
    expect(measured.length).toBe(24)
    expect(records.filter((r) => r.error !== undefined)).toEqual([])
    expect(measured.filter((c) => refuses(c as Record<string, unknown>))).toEqual([])
  })
})
