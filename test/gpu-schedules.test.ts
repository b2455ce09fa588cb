// The cuda target's schedules on the zoo: every fused group of ResNet-18 and MobileNetV2 gets a GPU
// schedule from cudaSchedules (H100's limits, sm_90) that lowers and verifies — every root nest
// bound to blockIdx / threadIdx, threads per block and shared bytes within the record, no shared
// race between barriers — and the rules fire where they should (the convolutions and the
// classifier tiled or reduced across threads).
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { cudaAttrs, type CudaAttrs } from "../src/ast/target.js"
import type { TunedLookup } from "../src/backend/backend.js"
import type { ScheduleFn } from "../src/lowering/lower-group.js"
import { defaultPasses, fuseOpsSync } from "../src/rewrite/index.js"
import { baseSchedule, buildGroupTE } from "../src/lowering/lower-group.js"
import { lowerSync } from "../src/lowering/lower.js"
import { cudaSchedules, gpuLimits, gpuRules, verifyGpuFunc } from "../src/lowering/templates/gpu/index.js"
import { zooGraph } from "../src/zoo/index.js"
import { longReductionCase, matmulCase, type ComputeCase } from "../src/ast/te/arbitrary.js"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { evaluatePrimFunc } from "../src/ast/tir/evaluate.js"
import { mapStmt, seq, type PrimFunc, type Stmt } from "../src/ast/tir/tir.js"
import { at, compute, placeholder, reduceAxis, sum } from "../src/ast/te/tensor.js"
import { fromArray } from "../src/ast/graph/tensor.js"

const H100 = cudaAttrs("9.0", 132)

// the signature the cuda Backend record's `schedules` calls (lowering may not import src/backend: the lookup's type is restated)
const _signature: (attrs: CudaAttrs, tuned?: TunedLookup) => ScheduleFn = cudaSchedules
void _signature

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

/** The default GPU schedule of a case, lowered. */
const lowered = (cc: ComputeCase, sms: number): PrimFunc => {
  const base = baseSchedule(cc.outputs)
  return lowerSync(cudaSchedules(cudaAttrs("9.0", sms))(cc.outputs, base, { id: 0, nodes: [], inputs: [], outputs: [] } as never))
}
const noBarriers = (f: PrimFunc): PrimFunc => ({ ...f, body: mapStmt(f.body, (x) => (x.kind === "barrier" ? seq([]) : undefined)) })
const noGuards = (f: PrimFunc): PrimFunc => ({ ...f, body: mapStmt(f.body, (x) => (x.kind === "if" && !x.else ? x.then : undefined)) })
const simulates = (f: PrimFunc, cc: ComputeCase): boolean => {
  const got = evaluatePrimFunc(f, cc.inputs)
  const want = evaluateTE(cc.outputs, cc.inputs)
  return cc.outputs.every((o, k) => Array.from(want[k].data).every((x, n) => Math.abs(x - got.get(o.name)!.data[n]) <= 1e-4 * (1 + Math.abs(x))))
}
/** The loop kinds and barriers of a function, outermost first, one line each (its shape, without indices). */
const shape = (s: Stmt, depth = 0): string[] => {
  const pad = "  ".repeat(depth)
  switch (s.kind) {
    case "for":
      return s.thread ? [`${pad}for[${s.thread}] ${s.extent.kind === "const" ? s.extent.value : "?"}`, ...shape(s.body, depth + 1)] : shape(s.body, depth)
    case "seq":
      return s.body.flatMap((b) => shape(b, depth))
    case "allocate":
      return [...(s.buffer.scope !== "global" ? [`${pad}allocate ${s.buffer.scope} [${s.buffer.shape.join(", ")}]`] : []), ...shape(s.body, depth)]
    case "barrier":
      return [`${pad}barrier`]
    case "if":
      return shape(s.then, depth)
    case "let":
      return shape(s.body, depth)
    default:
      return []
  }
}

describe("the GPU rules' TIR forms, and what removing a barrier or a bound does to them", () => {
  const mm = matmulCase(11, { batch: 0, m: 16, n: 24, k: 20, epilogue: true })
  const red = longReductionCase(12, { rows: 2, cols: 3, r: 100, max: false, mean: false })

  it("multi-level tiling: a block's threads, each thread's register tile, the shared tiles fetched between barriers at the outer reduction loop", () => {
    const f = lowered(mm, 1)
    expect(shape(f.body).filter((l) => !/^\s*$/.test(l))).toEqual([
      "allocate shared [10, 24]",
      "allocate shared [16, 10]",
      "for[blockIdx.x] 1",
      "  for[threadIdx.x] 192",
      "    allocate local [2, 1]",
      "    barrier",
      "    for[threadIdx.x] 192",
      "    barrier",
      "    barrier",
      "    for[threadIdx.x] 192",
      "    barrier",
    ])
    expect(simulates(f, mm)).toBe(true)
    expect(verifyGpuFunc(f, gpuLimits(H100)).problems).toEqual([])
  })

  it("cross-thread reduction: the partials of a row in shared memory, one a thread, then the row from its partials, a barrier between", () => {
    const f = lowered(red, 132)
    expect(shape(f.body)).toEqual(["allocate shared [32, 1, 1]", "for[blockIdx.x] 6", "  barrier", "  for[threadIdx.x] 32", "  barrier", "  for[threadIdx.x] 1"])
    expect(simulates(f, red)).toBe(true)
    expect(verifyGpuFunc(f, gpuLimits(H100)).problems).toEqual([])
  })

  it("without its barriers, the tiled matmul reads stale shared tiles in the simulation, and both forms fail the race check", () => {
    expect(simulates(noBarriers(lowered(mm, 1)), mm)).toBe(false)
    expect(verifyGpuFunc(noBarriers(lowered(mm, 1)), gpuLimits(H100)).problems.join("\n")).toMatch(/shared .* between two barriers/)
    // (the simulation runs a kernel's sibling thread loops one after another: only the race check sees this one)
    expect(verifyGpuFunc(noBarriers(lowered(red, 132)), gpuLimits(H100)).problems.join("\n")).toMatch(/shared .* between two barriers/)
  })

  it("a rank-0 result (nothing to bind a thread to) is a one-thread kernel, and verifies as one", () => {
    const X = placeholder("X", [50])
    const k = reduceAxis(50, "k")
    const total = compute("total", [], () => sum(at(X, k.var), [k]))
    const cc: ComputeCase = { family: "reduce", outputs: [total], inputs: new Map([["X", fromArray("float32", [50], Array.from({ length: 50 }, (_, i) => i - 20))]]) }
    const f = lowered(cc, 132)
    const v = verifyGpuFunc(f, gpuLimits(H100))
    expect(v.problems).toEqual([])
    // (its init and its update are two top-level nests: two one-thread launches, in order)
    expect(v.kernels.map((kk) => kk.threads)).toEqual([1, 1])
    expect(simulates(f, cc)).toBe(true)
  })

  it("without its bounds (the guards of splits that do not divide), the simulation reads and writes out of bounds", () => {
    expect(() => evaluatePrimFunc(noGuards(lowered(mm, 1)), mm.inputs)).toThrow(/out-of-bounds/)
    expect(() => evaluatePrimFunc(noGuards(lowered(red, 132)), red.inputs)).toThrow(/out-of-bounds/)
  })
})
