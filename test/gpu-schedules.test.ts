// The cuda target's schedules on the zoo: every fused group of ResNet-18 and MobileNetV2 gets a GPU
// schedule from cudaSchedules (H100's limits, sm_90) that lowers and verifies — every root nest
// bound to blockIdx / threadIdx, threads per block and shared bytes within the record, no shared
// race between barriers — and the rules fire where they should (the convolutions and the
// classifier tiled or reduced across threads).
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { cudaAttrs } from "../src/ast/target.js"
import { defaultPasses, fuseOpsSync } from "../src/rewrite/index.js"
import { baseSchedule, buildGroupTE } from "../src/lowering/lower-group.js"
import { lowerSync } from "../src/lowering/lower.js"
import { cudaSchedules, gpuLimits, gpuRules, verifyGpuFunc } from "../src/lowering/templates/gpu/index.js"
import { zooGraph } from "../src/zoo/index.js"

const H100 = cudaAttrs("9.0", 132)

describe("cuda schedules on the zoo", () => {
  for (const name of ["resnet18", "mobilenetv2"])
    it(`every fused group of ${name} gets a GPU schedule that lowers and verifies`, () => {
      const graph = Effect.runSync(defaultPasses.run(zooGraph(name, 0)))
      const fused = fuseOpsSync(graph)
      const schedule = cudaSchedules(H100)
      const l = gpuLimits(H100)
      const rules = new Map<string, number>()
      for (const group of fused.groups) {
        const te = buildGroupTE(fused, group)
        const base = baseSchedule(te.outputs)
        for (const r of gpuRules(base, l)) rules.set(r.rule, (rules.get(r.rule) ?? 0) + 1)
        const f = lowerSync(schedule(te.outputs, base, group), `k${group.id}`)
        const v = verifyGpuFunc(f, l)
        expect(v.problems, `${name} group ${group.id} (${group.nodes.join(", ")})`).toEqual([])
        for (const k of v.kernels) {
          expect(k.threads).toBeLessThanOrEqual(H100.maxThreadsPerBlock)
          expect(k.sharedBytes).toBeLessThanOrEqual(H100.sharedMemoryPerBlock)
        }
      }
      // the convolutions are tiled, the global pool and classifier reduced across threads
      expect(rules.get("tile") ?? 0).toBeGreaterThan(10)
      expect(rules.get("cross-thread") ?? 0).toBeGreaterThanOrEqual(1)
    }, 120_000)
})
