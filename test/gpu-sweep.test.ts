// The measured GPU sweep's choice (src/search/gpu-sweep.ts, what scripts/gpu-tune-apply.ts runs):
// per task the fastest correct variant's config, a task's time the sum of its kernels' launches;
// wrong and failed variants never chosen; the tuning log it writes parses back and its fastest
// record per workload is the choice, so `compile --tuned` applies it. And AutoTVM's template at its
// defaults (the sweep's v0) is a config of every ResNet-18 conv group's `cuda` space that verifies.
import { describe, expect, it } from "vitest"
import { cudaAttrs, keyOf, type Target } from "../src/ast/target.js"
import { lowerSync } from "../src/lowering/lower.js"
import { gpuLimits, verifyGpuFunc } from "../src/lowering/templates/gpu/index.js"
import { chooseConfigs, recordsAgree, sweepRecords, taskTimes, type SweepFile, type VariantsFile } from "../src/search/gpu-sweep.js"
import { bestRecords, parseLog, serializeRecord } from "../src/search/records.js"
import { indexOfConfig, workloadOf } from "../src/search/task.js"
import { resnet18ConvSpaces } from "./support/cuda-conv-spaces.js"

// task ids are their workloads' fnv1a hashes, as a log reader checks
const tasks = {
  b06d5f43: { workload: "cuda|cuda:sm_90|conv", label: "Conv+Add+Relu 1x64x56x56", flops: 2e8, groups: [0, 2] },
  "835c918f": { workload: "cuda|cuda:sm_90|pool", label: "GlobalAveragePool 1x512x1x1", flops: 1e5, groups: [1] },
}
const kernels = { k0: { group: 0, task: "b06d5f43" }, k1: { group: 1, task: "835c918f" }, k2: { group: 2, task: "b06d5f43" } }
const cfg = (n: number) => ({ cuda_sketch: n === 1 ? "autotvm" : "generated", mt_s1: `${n}.1.1` })
const vf: VariantsFile = {
  model: "net",
  target: "cuda",
  seed: 0,
  tasks,
  variants: [
    { name: "default", dir: "net", kind: "default", configs: { b06d5f43: cfg(0), "835c918f": { ab0_threads: 32 } }, kernels },
    { name: "autotvm", dir: "net-v0", kind: "autotvm", configs: { b06d5f43: cfg(1), "835c918f": { ab0_threads: 32 } }, kernels },
    { name: "r1", dir: "net-v1", kind: "random", configs: { b06d5f43: cfg(2), "835c918f": { ab0_threads: 128 } }, kernels },
    { name: "r2", dir: "net-v2", kind: "random", configs: { b06d5f43: cfg(3), "835c918f": { ab0_threads: 64 } }, kernels },
    { name: "r3", dir: "net-v3", kind: "random", configs: { b06d5f43: cfg(4), "835c918f": { ab0_threads: 256 } }, kernels },
  ],
}
const launches = (conv0: number, pool: number, conv2: number) => [
  { name: "k0 tessera_k0 Conv+Add+Relu grid 1x2x3 block 32x1x1", median_ms: conv0 },
  { name: "k1 tessera_k1 GlobalAveragePool grid 4 block 128", median_ms: pool },
  { name: "k2 tessera_k2 Conv+Add+Relu grid 1x2x3 block 32x1x1", median_ms: conv2 },
]
const sweep: SweepFile = {
  models: {
    net: {
      variants: {
        default: { close: true, max_abs: 1e-6, median_ms: 1, launches: launches(0.3, 0.05, 0.3) },
        autotvm: { close: true, max_abs: 1e-6, median_ms: 1, launches: launches(0.25, 0.05, 0.3) },
        // the fastest conv, but its outputs are wrong: never chosen
        r1: { close: false, max_abs: 3, median_ms: 0.5, launches: launches(0.01, 0.01, 0.01) },
        // the fastest conv of the correct ones (0.2 + 0.2 < 0.25 + 0.3), a slower pool
        r2: { close: true, max_abs: 1e-6, median_ms: 0.9, launches: launches(0.2, 0.07, 0.2) },
        r3: { close: false, error: "build exit 2: ptxas error" },
      },
    },
  },
}

describe("gpu-tune-apply's choice", () => {
  it("a task's time is the sum of its kernels' launches", () => {
    const t = taskTimes(vf.variants[0], sweep.models.net.variants.default)
    expect(t.get("b06d5f43")).toBeCloseTo(0.6, 12)
    expect(t.get("835c918f")).toBeCloseTo(0.05, 12)
  })

  it("per task the fastest correct variant's config; the default's and AutoTVM's times beside it", () => {
    const choices = chooseConfigs([vf], sweep)
    const conv = choices.find((c) => c.task === "b06d5f43")!
    expect(conv.bestVariant).toBe("r2")
    expect(conv.config).toEqual(cfg(3))
    expect(conv.bestMs).toBeCloseTo(0.4, 12)
    expect(conv.defaultMs).toBeCloseTo(0.6, 12)
    expect(conv.autotvmMs).toBeCloseTo(0.55, 12)
    expect(conv.measured).toBe(3)
    // the baseline comparison: the fastest correct config of each sketch (r2 is a generated draw; r1's faster one is wrong)
    expect(conv.bestBySketch?.generated).toBeCloseTo(0.4, 12)
    expect(conv.bestBySketch?.autotvm).toBeCloseTo(0.55, 12)
    // a task with no AutoTVM sketch has no comparison
    expect(choices.find((c) => c.task === "835c918f")!.bestBySketch).toBeUndefined()
    // a tie (default and autotvm both 0.05): the earlier variant
    const pool = choices.find((c) => c.task === "835c918f")!
    expect(pool.bestVariant).toBe("default")
    expect(pool.config).toEqual({ ab0_threads: 32 })
  })

  it("the log: every correct measurement a record, in seconds, that parses back; its fastest per workload is the choice", () => {
    const records = sweepRecords([vf], sweep, "2026-11-26T00:00:00.000Z")
    // 3 correct variants × 2 tasks, less the pool's config measured twice (default and autotvm): one record, its faster time
    expect(records).toHaveLength(5)
    expect(records.every((r) => r.target === "cuda" && r.v === 1 && r.costs.length === 1)).toBe(true)
    const text = records.map((r) => `${serializeRecord(r)}\n`).join("")
    const parsed = parseLog(text)
    expect(parsed.warnings).toEqual([])
    const best = bestRecords(parsed.records, "cuda")
    expect(best.get(tasks.b06d5f43.workload)?.config).toEqual(cfg(3))
    expect(best.get(tasks.b06d5f43.workload)?.costs[0]).toBeCloseTo(0.0004, 12)
    expect(best.get(tasks.b06d5f43.workload)?.gflops).toBeCloseTo(2e8 / 0.0004 / 1e9, 6)
    expect(best.get(tasks["835c918f"].workload)?.config).toEqual({ ab0_threads: 32 })
    expect(recordsAgree(parsed.records, chooseConfigs([vf], sweep), "cuda")).toBe(true)
    // a log whose fastest record is another config disagrees
    const swapped = parsed.records.map((r) => (JSON.stringify(r.config) === JSON.stringify(cfg(3)) ? { ...r, costs: [1] } : r))
    expect(recordsAgree(swapped, chooseConfigs([vf], sweep), "cuda")).toBe(false)
  })

  it("a model the sweep did not measure, or whose variants all failed, gives no choice", () => {
    expect(chooseConfigs([vf], { models: {} })).toEqual([])
    expect(chooseConfigs([vf], { models: { net: { variants: { r3: { close: false, error: "x" } } } } })).toEqual([])
  })
})

describe("AutoTVM's template at its defaults (the sweep's v0)", () => {
  it("is a config of every ResNet-18 conv group's cuda space, and it lowers and verifies", () => {
    const attrs = cudaAttrs("9.0", 132)
    const target: Target = { kind: "cuda", attrs }
    const l = gpuLimits(attrs)
    const spaces = resnet18ConvSpaces(attrs)
    for (const { group, outputs, base, template: t, knobs, autotvm: c } of spaces) {
      expect(indexOfConfig(knobs, c), `group ${group.id} ${workloadOf(outputs, t, keyOf(target)).slice(0, 40)}`).toBeDefined()
      expect(verifyGpuFunc(lowerSync(t.apply(outputs, base, c)), l).problems).toEqual([])
    }
    expect(spaces.length).toBeGreaterThanOrEqual(11)
  })
})
