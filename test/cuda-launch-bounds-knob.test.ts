// The GPU rules' `launch_bounds` knob (src/lowering/templates/gpu/index.ts): a tiled kernel of either
// sketch, at 1, is declared `__launch_bounds__(its block's threads)` whatever the emitter's own rule
// (needsLaunchBounds) says; at 0 it is as that rule decides; a config from before the knob (without
// it) is the config at 0 — one schedule, one hash.
import { describe, expect, it } from "vitest"
import { cudaAttrs } from "../src/ast/target.js"
import { lowerSync } from "../src/lowering/lower.js"
import { cudaTirPipeline } from "../src/lowering/tir/cuda-pipeline.js"
import { runTirSync } from "../src/lowering/tir/tir-pass.js"
import { completeConfig, type Config } from "../src/lowering/templates/template.js"
import { emitCuda } from "../src/emit/cuda/emit.js"
import { askedLaunchBounds, needsLaunchBounds } from "../src/emit/cuda/dialect.js"
import { indexOfConfig } from "../src/search/task.js"
import { resnet18ConvSpaces } from "./support/cuda-conv-spaces.js"

const attrs = cudaAttrs("9.0", 132)

describe("the launch_bounds knob", () => {
  it("at 1 bounds every tiled conv kernel of ResNet-18 at its block, either sketch; at 0 the emitter's rule decides; absent is 0", () => {
    const spaces = resnet18ConvSpaces(attrs)
    for (const { outputs, base, template: t, knobs, defaults, autotvm } of spaces) {
      expect(defaults.launch_bounds).toBe(0)
      for (const c of [defaults, autotvm]) {
        const emitted = (config: Config) => {
          const f = runTirSync(cudaTirPipeline(attrs), lowerSync(t.apply(outputs, base, config)))
          return { f, e: emitCuda([{ ...f, name: "k0" }], attrs) }
        }
        const off = emitted({ ...c, launch_bounds: 0 })
        const on = emitted({ ...c, launch_bounds: 1 })
        expect(askedLaunchBounds(off.f.body)).toBe(false)
        expect(askedLaunchBounds(on.f.body)).toBe(true)
        const launches = on.e.kernels[0].launches
        expect(launches.length).toBeGreaterThan(0)
        for (const l of launches) {
          const threads = l.block[0] * l.block[1] * l.block[2]
          expect(on.e.source).toContain(`__launch_bounds__(${threads}) ${l.symbol}(`)
          expect(off.e.source.includes(`__launch_bounds__(${threads}) ${l.symbol}(`)).toBe(needsLaunchBounds(threads, attrs))
        }
        // the knob's pragma is not printed as a comment (the declaration says it)
        expect(on.e.source).not.toMatch(/pragma launch_bounds/)
        // without the knob, a config is the config at 0
        const { launch_bounds: _, ...before } = c
        expect(completeConfig(knobs, before)).toEqual(completeConfig(knobs, { ...c, launch_bounds: 0 }))
        expect(indexOfConfig(knobs, { ...c, launch_bounds: 1 })).toBeDefined()
      }
    }
    expect(spaces.length).toBeGreaterThanOrEqual(11)
  }, 120_000)
})
