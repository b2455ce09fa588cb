// Tuning VTA's conv2d with src/search's tuners and the simulator's cycles as the measure
// (src/search/vta-conv2d.ts): on a small layer whose whole space is 160 schedules, random search
// and xgb each walk all of it and agree with an exhaustive sweep on the fastest; the curve only
// rises; a schedule that does not fit is a failed trial, not a wrong answer; the winner computes
// the layer's bytes.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { defaultVtaConfig, deriveVta } from "../src/ast/vta/config.js"
import { VTA_CYCLE_MODEL } from "../src/device/vta/cycle-model.js"
import { runVtaSync } from "../src/device/vta/simulator.js"
import { defaultConv2dSchedule, lowerConv2d, readOut, withTensors, type VtaConv2d } from "../src/lowering/vta/conv2d.js"
import { makeXGBoostModel } from "../src/search/cost-model.js"
import { configAt, spaceSize } from "../src/search/task.js"
import { randomTuner, rankTargets, xgbTuner } from "../src/search/tuners.js"
import { configOfSchedule, measureVtaConv2d, memoMeasure, scheduleOfConfig, tuneVtaConv2d, vtaConv2dFeatures, vtaConv2dTask } from "../src/search/vta-conv2d.js"
import { seededInt8 } from "../laws/vta/programs.js"

const d = deriveVta(defaultVtaConfig)
const m = VTA_CYCLE_MODEL
const x: VtaConv2d = { ci: 2, co: 2, h: 8, w: 8, kh: 3, kw: 3, stride: 1, pad: 1, shift: 6 }
const task = vtaConv2dTask(d, "small", x)

describe("tuning VTA conv2d on the simulator's cycles", () => {
  it("xgb's rank targets: the fastest 1, the slowest finite 0.5, ties equal, failures 0 (near-ties spread: 0.15% apart in cycles, a sixth of the range apart here)", () => {
    const ys = rankTargets([496992, Infinity, 496300, 496270, 496300])
    ;[0.5, 0, 5 / 6, 1, 5 / 6].forEach((y, k) => expect(ys[k]).toBeCloseTo(y, 12))
  })

  it("the space: rows (distinct tile counts), channel-block divisors, loop order, 1–4 virtual threads", () => {
    expect(task.knobs.map((k) => [k.name, k.candidates])).toEqual([
      ["vta_tile_oh", [1, 2, 3, 4, 8]],
      ["vta_tile_co", [1, 2]],
      ["vta_tile_ci", [1, 2]],
      ["vta_order", ["co-oh", "oh-co"]],
      ["vta_vthreads", [1, 2, 3, 4]],
    ])
    const s = defaultConv2dSchedule(d, x, 2)
    expect(scheduleOfConfig(configOfSchedule(s, x))).toEqual(s)
  })

  it("random and xgb over the whole space find what an exhaustive sweep finds; the curve only rises", async () => {
    const size = spaceSize(task.knobs)
    expect(size).toBe(160)
    const sweep = Array.from({ length: size }, (_, i) => measureVtaConv2d(d, m, x, configAt(task.knobs, i)))
    const fastest = Math.min(...sweep.flatMap((r) => (r.cycles === undefined ? [] : [r.cycles])))
    let runs = 0
    const measure = memoMeasure((c) => {
      runs++
      return measureVtaConv2d(d, m, x, c)
    })
    const random = await Effect.runPromise(tuneVtaConv2d(task, randomTuner(task, 3), measure, { trials: 1000, batch: 16 }))
    const xgb = await Effect.runPromise(tuneVtaConv2d(task, xgbTuner(task, { seed: 3, model: await Effect.runPromise(makeXGBoostModel()), features: vtaConv2dFeatures(d, m, x), target: "rank" }), measure, { trials: 1000, batch: 16 }))
    for (const r of [random, xgb]) {
      expect(r.trials).toBe(size)
      expect(r.best?.cycles).toBe(fastest)
      expect(r.curve.every((v, k) => k === 0 || v >= r.curve[k - 1])).toBe(true)
      expect(r.curve.at(-1)).toBeCloseTo((2 * task.macs) / fastest, 9)
      expect(r.errors).toBe(sweep.filter((s) => s.cycles === undefined).length)
    }
    expect(runs).toBe(size) // each schedule simulated once, shared by the tuners
    // the winner computes the layer: the same bytes as the default schedule
    const data = seededInt8(5, x.ci * x.h * x.w * 16)
    const kernel = seededInt8(6, x.co * x.ci * 9 * 256)
    const out = (s: ReturnType<typeof scheduleOfConfig>) => {
      const p = lowerConv2d(d, x, s)
      return Array.from(readOut(d, x, p, runVtaSync(d, p.insns, withTensors(p, data, kernel)).dram))
    }
    expect(out(scheduleOfConfig(xgb.best!.config))).toEqual(out(defaultConv2dSchedule(d, x, 2)))
  })

  it("a schedule that does not fit is a failed trial with its reason; its features say so", () => {
    const big = { vta_tile_oh: 56, vta_tile_co: 1, vta_tile_ci: 32, vta_order: "co-oh", vta_vthreads: 4 }
    const wide: VtaConv2d = { ...x, ci: 32, h: 56, w: 56 }
    const r = measureVtaConv2d(d, m, wide, big)
    expect(r.cycles).toBeUndefined()
    expect(r.error).toMatch(/input buffer/)
    expect(vtaConv2dFeatures(d, m, wide)(big).slice(5).every((v) => v === -1)).toBe(true)
  })
})
