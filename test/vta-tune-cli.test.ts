// `tessera tune --target vta` (src/cli/vta-tune.ts) in process: a small quantized net's offloaded
// convs tuned for a few trials on the simulator's cycles, the log resumed, then applied by the
// plan `compile / run / inspect --target vta --tuned` use: every tuned layer is no slower than its
// default, runs the log's fastest schedule, and the network's output bytes do not change.
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Exit } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { parseLog } from "../src/search/records.js"
import { scheduleOfConfig, vtaConv2dKnobs, vtaConv2dWorkload, vtaDefaultConfigs, vtaLayerKnobs } from "../src/search/vta-conv2d.js"
import { VTA_CYCLE_MODEL } from "../src/device/vta/cycle-model.js"
import { fromArray } from "../src/ast/graph/tensor.js"
import type { VtaConvLayer } from "../src/rewrite/vta-partition.js"
import { fitsKnobs } from "../src/search/task.js"
import { defaultVtaConfig, deriveVta } from "../src/ast/vta/config.js"
import type { VtaConv2d } from "../src/lowering/vta/conv2d.js"
import type { TuneCommandOptions } from "../src/cli/tune.js"
import { tuneVtaCommand, vtaTuneTasks } from "../src/cli/vta-tune.js"
import { loadVta, lowerVtaLayers, planVta, readVtaTuned, tunedTable } from "../src/cli/vta.js"
import { vtaNet, vtaNetInput, type VtaNetSpec } from "../laws/vta/net-cases.js"

const spec: VtaNetSpec = { c: 20, h: 6, w: 6, blocks: 2, out: 24, seed: 7 }
const shapes = new Map([["input", [1, spec.c, spec.h, spec.w]]])
const feeds = new Map([["input", vtaNetInput(spec)]])
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-vta-tune-"))
const model = path.join(tmp, "net.onnx")
fs.writeFileSync(model, encodeOnnx(vtaNet(spec)))
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }))

const options = (log: string, over: Partial<TuneCommandOptions> = {}): TuneCommandOptions => ({
  model, target: "vta", trials: 8, log, tuner: "xgb", batch: 4, threads: 1, seed: 1, tasks: [], progress: false, confirm: 3,
  measure: { repeats: 3, minRepeatMs: 20, timeoutMs: 60_000, rtol: 1e-3, atol: 1e-4, flushBytes: 1 << 20 },
  ...over,
})

describe("tune --target vta", () => {
  it("tunes each distinct conv shape, resumes from its log, and the records applied keep the bytes and never lose cycles", async () => {
    const log = path.join(tmp, "tune.jsonl")
    const plan0 = planVta(vtaNet(spec), shapes)
    const tasks = vtaTuneTasks(plan0.d, plan0.partition.offloaded)
    // five offloaded convs, three shapes (the shift and clip bound do not make a task of their own)
    expect(tasks.map((t) => t.layers.length)).toEqual([3, 1, 1])
    const table = await Effect.runPromise(tuneVtaCommand(options(log)))
    expect(table.split("\n")).toHaveLength(2 + tasks.length)
    const first = parseLog(fs.readFileSync(log, "utf8"))
    expect(first.skipped).toEqual([])
    // per task: its trials (the default schedules first), keyed by workload and target
    for (const t of tasks) {
      const rs = first.records.filter((r) => r.workload === t.task.workload)
      expect(rs.length).toBeGreaterThanOrEqual(Math.min(8, t.defaults.length))
      expect(rs.every((r) => r.target === "vta" && r.task === t.task.id && r.tuner === "xgb")).toBe(true)
      expect(rs.slice(0, t.defaults.length).map((r) => r.config)).toEqual(t.defaults)
    }
    // resumed: only the new trials are appended (to 40: with the TIR passes' defaults, 12 trials
    // of these small layers found nothing faster than the defaults)
    const table2 = await Effect.runPromise(tuneVtaCommand(options(log, { trials: 40 })))
    const second = parseLog(fs.readFileSync(log, "utf8"))
    expect(second.records.slice(0, first.records.length)).toEqual(first.records)
    for (const t of tasks) expect(second.records.filter((r) => r.workload === t.task.workload).length).toBe(40)
    expect(table2).toMatch(/resumed/)

    // applied
    const tuning = await Effect.runPromise(readVtaTuned(log))
    const plan = planVta(vtaNet(spec), shapes, { tuned: tuning.tuned })
    expect([...plan.tuned.keys()]).toEqual(plan.partition.offloaded.filter((l) => l.kind === "conv").map((l) => l.name))
    let gained = false
    for (const [name, t] of plan.tuned) {
      expect(t.stats.totalCycles).toBeLessThanOrEqual(t.defaultStats.totalCycles)
      if (t.stats.totalCycles < t.defaultStats.totalCycles) gained = true
      // the layer runs the log's fastest record for its workload
      const best = second.records
        .filter((r) => r.workload === t.workload && r.costs.length)
        .sort((a, b) => a.costs[0] - b.costs[0])[0]
      expect(Math.round(best.costs[0] * 1e8)).toBe(t.stats.totalCycles)
      expect(plan.programs.get(name)).toBe(t.program)
      expect(t.program.vthreads).toBe(scheduleOfConfig(best.config).vthreads)
    }
    expect(gained).toBe(true)
    const run = async (p: typeof plan) => (await Effect.runPromise(loadVta(p))).run(feeds)
    const tunedRun = await run(plan)
    const defaultRun = await run(plan0)
    expect(Array.from(tunedRun.outputs.get("output")!.data as Float32Array)).toEqual(Array.from(defaultRun.outputs.get("output")!.data as Float32Array))
    const cycles = (e: typeof tunedRun) => e.layers.reduce((s, l) => s + l.stats.totalCycles, 0)
    expect(cycles(tunedRun)).toBeLessThan(cycles(defaultRun))
    const text = tunedTable(plan).join("\n")
    expect(text).toMatch(/5 of 5 conv layers tuned/)
    expect(text).toMatch(/b0\.conv1_conv +\d+ +[\d.]+% +\d+ +[\d.]+% +[\d.]+x/)
  }, 60_000)

  it("a default schedule is a point of the space the records are checked against, where its rows are no ⌈OH / n⌉ (ResNet-18's 128×28×28 3×3: 20 rows)", () => {
    const d = deriveVta(defaultVtaConfig)
    const x: VtaConv2d = { ci: 8, co: 8, h: 28, w: 28, kh: 3, kw: 3, stride: 1, pad: 1, shift: 8, bias: true }
    const defaults = vtaDefaultConfigs(d, x)
    expect(defaults.map((c) => c.vta_tile_oh)).toContain(20)
    expect(defaults.every((c) => fitsKnobs(vtaLayerKnobs(d, x), c))).toBe(true)
    expect(defaults.every((c) => fitsKnobs(vtaConv2dKnobs(x), c))).toBe(false)
    // a record of that default is applied (not passed over as outside the space)
    const layer: VtaConvLayer = {
      kind: "conv", name: "conv", nodes: ["conv"], input: "x", output: "y", c: 128, h: 28, w: 28, m: 128, kh: 3, kw: 3, stride: 1, pad: 1, oh: 28, ow: 28, shift: 8, clipLo: 0,
      weights: fromArray("int8", [128, 128, 3, 3], new Int8Array(128 * 128 * 9)), bias: new Int32Array(128),
    }
    const twenty = defaults.find((c) => c.vta_tile_oh === 20)!
    const lowered = lowerVtaLayers(d, { segments: [], offloaded: [layer], kept: [], inputs: [], outputs: [] }, { tuned: new Map([[vtaConv2dWorkload(d, VTA_CYCLE_MODEL, x), [twenty]]]) })
    expect(lowered.tuned.get("conv")?.program.schedule).toMatch(/^tiles 20 rows/)
  })

  it("refuses the flags that mean nothing for a simulated, deterministic measure", async () => {
    const log = path.join(tmp, "refused.jsonl")
    for (const [over, flag] of [
      [{ threads: 2 }, "--threads"],
      [{ confirm: 0 }, "--confirm"],
      [{ timeBudget: 60 }, "--time-budget"],
      [{ vectorLanes: 8 }, "--vector-lanes"],
    ] as const) {
      const exit = await Effect.runPromiseExit(tuneVtaCommand(options(log, over)))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(JSON.stringify(exit)).toContain(flag)
    }
    expect(fs.existsSync(log)).toBe(false)
  })
})
