// tasksOfProgram: a tuning task starts from the config an untuned compile applies — its
// ScheduleTarget is the one compile sized the defaults from (the record's FMA pipes and latency,
// vector registers, L2, FMA and 8-bit dot instructions, not only lanes and cores).
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { makeTarget } from "../src/ast/target.js"
import { printPrimFunc } from "../src/ast/tir/tir.js"
import { scheduleTarget } from "../src/backend/cpu.js"
import { compiledKernels } from "../src/lowering/program.js"
import { compileGraph } from "../src/pipeline.js"
import { scheduleTargetOf, tasksOfProgram } from "../src/search/extract.js"
import { conv, NetBuilder } from "../src/zoo/builder.js"

// a stride-2 3×3 conv (its channel tile capped by the L2) and a 1×1 conv of many input channels
const graph = () => {
  const b = new NetBuilder(0, 5)
  const x = b.input("x", { dtype: "float32", shape: [1, 128, 16, 16] })
  const a = b.op("Relu", [conv(b, x, "c1", { cin: 128, cout: 128, k: 3, stride: 2, pad: 1, bias: true })], "a")
  const y = b.op("Relu", [conv(b, a, "c2", { cin: 128, cout: 64, k: 1, bias: true })], "y")
  return b.build("two-convs", [{ name: y, type: { dtype: "float32", shape: [1, 64, 8, 8] } }])
}

describe("tasksOfProgram", () => {
  // one 512-bit FMA pipe, a 1 MiB L2 (Zen 4's record): not the nominal AVX-512 values
  const target = makeTarget("c", { isa: "avx512", fmaUnits: 1, fmaLatency: 4, l2Bytes: 1 << 20, cores: 1, vnni: true })

  it("each task's defaults on its runner's target lower to the kernel an untuned compile emitted", async () => {
    const program = await Effect.runPromise(compileGraph(graph(), target, { optLevel: 3 }))
    const runners = tasksOfProgram(program, target)
    expect(runners.length).toBeGreaterThanOrEqual(2)
    expect(scheduleTargetOf(target)).toEqual({ ...scheduleTarget(target), kind: "c" })
    let differs = 0
    for (const r of runners) {
      expect(r.target).toEqual(scheduleTargetOf(target))
      const defaults = r.task.template.defaults(r.task.knobs, r.target)
      const kernel = compiledKernels(program).find((k) => k.group === r.task.groups[0])!
      expect(printPrimFunc({ ...r.lowerConfig(defaults), name: kernel.func.name })).toBe(printPrimFunc(kernel.func))
      // (lanes and cores alone, as the tasks had before, give another config on these records)
      if (JSON.stringify(r.task.template.defaults(r.task.knobs, { vectorLanes: 16, cores: 1 })) !== JSON.stringify(defaults)) differs++
    }
    expect(differs).toBeGreaterThan(0)
  }, 30_000)

  it("the js target: its backend's ScheduleTarget, the record's L2 included", () => {
    const js = makeTarget("js", { vectorLanes: 4 })
    expect(scheduleTargetOf(js)).toMatchObject({ kind: "js", vectorLanes: 4, cores: js.attrs.cores, l2Bytes: js.attrs.l2Bytes })
  })
})
