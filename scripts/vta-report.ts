// ResNet-18's convolution layers C2–C12 (batch 1, the paper's shapes) on the VTA simulator with the
// default configuration and cycle model: per layer its roofline class (arithmetic intensity vs the
// ridge) and the ceiling its epilogue puts on the compute module, then cycles, GEMM utilization
// and DRAM bytes of the default schedule (src/lowering/vta/conv2d.ts, derived from the buffer
// depths) serial (one virtual thread) and with two virtual threads, the same tiles; the roofline
// picture (docs/vta-roofline.svg). With --tune N: each layer tuned by random, xgb and evo for N
// trials (the simulator's cycles as the measure), the trials xgb and evo need to reach random's
// best, the tuned schedules serial and hidden, and the curves (docs/vta-search-curves.svg). Then the
// whole network on vta + c (scripts/vta-network.ts; --model FILE).
// Deterministic: the simulator's cycle model, not this machine's clock.
//
//   npm run vta-report -- [--tune 1000] [--batch 16] [--seed 1] [--svg-dir docs]
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { defaultVtaConfig, deriveVta } from "../src/ast/vta/config.js"
import { VTA_CYCLE_MODEL } from "../src/device/vta/cycle-model.js"
import { runVtaSync } from "../src/device/vta/simulator.js"
import { defaultConv2dSchedule, lowerConv2d, readOut, withTensors, type VtaConv2d, type VtaConv2dSchedule } from "../src/lowering/vta/conv2d.js"
import { makeXGBoostModel } from "../src/search/cost-model.js"
import { evoTuner } from "../src/search/evolutionary.js"
import { renderCurvesSvg, trialsToReach, type Curve } from "../src/search/plot.js"
import { randomTuner, xgbTuner } from "../src/search/tuners.js"
import { conv2dBound, measureVtaConv2d, memoMeasure, scheduleOfConfig, tuneVtaConv2d, vtaConv2dFeatures, vtaConv2dTask, vtaRoof } from "../src/search/vta-conv2d.js"
import { renderRooflineSvg, type RooflinePoint } from "../src/search/vta-roofline.js"
import { networkReport } from "./vta-network.js"

const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : dflt
}
const TUNE = Number(arg("tune", "0"))
const BATCH = Number(arg("batch", "16"))
const SEED = Number(arg("seed", "1"))
const SVG_DIR = arg("svg-dir", "docs")

const d = deriveVta(defaultVtaConfig)
const model = VTA_CYCLE_MODEL
const roof = vtaRoof(d, model)
const conv = (h: number, cin: number, cout: number, k: number, stride: number): VtaConv2d => ({ ci: cin / 16, co: cout / 16, h, w: h, kh: k, kw: k, stride, pad: k === 3 ? 1 : 0, shift: 8 })
const layers: [string, VtaConv2d][] = [
  ["C2", conv(56, 64, 64, 3, 1)],
  ["C3", conv(56, 64, 64, 1, 1)],
  ["C4", conv(56, 64, 128, 3, 2)],
  ["C5", conv(56, 64, 128, 1, 2)],
  ["C6", conv(28, 128, 128, 3, 1)],
  ["C7", conv(28, 128, 256, 3, 2)],
  ["C8", conv(28, 128, 256, 1, 2)],
  ["C9", conv(14, 256, 256, 3, 1)],
  ["C10", conv(14, 256, 512, 3, 2)],
  ["C11", conv(14, 256, 512, 1, 2)],
  ["C12", conv(7, 512, 512, 3, 1)],
]

const seeded = (n: number, seed: number): Int8Array => {
  let x = seed
  return Int8Array.from({ length: n }, () => {
    x = (x * 1103515245 + 12345) >>> 0
    return ((x >>> 16) % 17) - 8
  })
}

const pct = (u: number) => `${(100 * u).toFixed(1)}%`
const kib = (n: number) => (n / 1024).toFixed(0)
const tiles = (s: VtaConv2dSchedule) => `${s.tileOh} × ${s.tileCo} × ${s.tileCi}${s.order === "oh-co" ? " oh-co" : ""}`
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length

/** The schedule serial and with its own virtual threads (2 where it has 1), run on data; both must store the same bytes. */
const serialVsHidden = (x: VtaConv2d, s: VtaConv2dSchedule, functional: boolean) => {
  const data = seeded(x.ci * x.h * x.w * 16, 1)
  const kernel = seeded(x.co * x.ci * x.kh * x.kw * 256, 2)
  const runs = [1, s.vthreads === 1 ? 2 : s.vthreads].map((vthreads) => {
    const p = lowerConv2d(d, x, { ...s, vthreads })
    const r = runVtaSync(d, p.insns, functional ? withTensors(p, data, kernel) : p.dram, model, { functional })
    return { stats: r.stats, out: functional ? readOut(d, x, p, r.dram) : undefined }
  })
  if (functional && runs[0].out!.some((v, k) => v !== runs[1].out![k])) throw new Error("serial and hidden outputs differ")
  return runs.map((r) => r.stats)
}

const header = "| layer | bound (ops/B) | epilogue ceiling | tiles (oh × co × ci) | cycles 1 vthread | util 1 | cycles 2 vthreads | util 2 | speedup | inp / wgt / out KiB (2 vt) |"
const rule = "|---|---|---|---|---|---|---|---|---|---|"
const rows: string[] = [header, rule]
const utils: [number, number][] = []
const points: RooflinePoint[] = []
for (const [name, x] of layers) {
  const b = conv2dBound(d, model, x)
  const sched = defaultConv2dSchedule(d, x, 2)
  const [a, h] = serialVsHidden(x, sched, true)
  utils.push([a.utilization, h.utilization])
  points.push({ label: name, intensity: b.intensity, without: b.ops / a.totalCycles, with: b.ops / h.totalCycles, ceiling: b.epilogueCeiling * roof.opsPerCycle })
  rows.push(`| ${name} | ${b.bound} (${b.intensity.toFixed(0)}) | ${pct(b.epilogueCeiling)} | ${tiles(sched)} | ${a.totalCycles} | ${pct(a.utilization)} | ${h.totalCycles} | ${pct(h.utilization)} | ${(a.totalCycles / h.totalCycles).toFixed(2)} | ${kib(h.bytes.inp)} / ${kib(h.bytes.wgt)} / ${kib(h.bytes.out)} |`)
}
const m1 = mean(utils.map((u) => u[0]))
const m2 = mean(utils.map((u) => u[1]))
rows.push(`| mean | | | | | ${pct(m1)} | | ${pct(m2)} | | +${(100 * (m2 - m1)).toFixed(1)} points |`)
console.log(`VTA ${d.blockIn}×${d.blockOut} GEMM core, bus ${d.busBytes} B/cycle: roof ${roof.opsPerCycle} ops/cycle, ridge ${roof.opsPerCycle / roof.bytesPerCycle} ops/B\n`)
console.log("Default schedules (derived from the buffer depths):\n")
console.log(rows.join("\n"))
fs.mkdirSync(SVG_DIR, { recursive: true })
fs.writeFileSync(path.join(SVG_DIR, "vta-roofline.svg"), renderRooflineSvg(roof, points, "ResNet-18 C2–C12 on VTA (default schedules; simulator cycles)"))
console.log(`\nwrote ${path.join(SVG_DIR, "vta-roofline.svg")}`)

if (TUNE > 0) {
  const curves: Curve[] = []
  const out: string[] = [
    `| layer | space | random best of ${TUNE} (util) | xgb trials to reach it | evo trials to reach it | tuned tiles (oh × co × ci, vthreads) | util 1 | util tuned | default util 2 |`,
    "|---|---|---|---|---|---|---|---|---|",
  ]
  const tuned: [number, number][] = []
  const xgbTrials: number[] = []
  for (const [k, [name, x]] of layers.entries()) {
    const task = vtaConv2dTask(d, name, x)
    const measure = memoMeasure((c) => measureVtaConv2d(d, model, x, c))
    const features = vtaConv2dFeatures(d, model, x)
    const byTuner: Record<string, number[]> = {}
    let best: { config: Record<string, string | number | boolean>; cycles: number } | undefined
    for (const tname of ["random", "xgb", "evo"] as const) {
      const tuner = tname === "random" ? randomTuner(task, SEED) : tname === "xgb" ? xgbTuner(task, { seed: SEED, model: await Effect.runPromise(makeXGBoostModel()), features, target: "rank" }) : evoTuner(task, { seed: SEED, model: await Effect.runPromise(makeXGBoostModel()), features })
      const r = await Effect.runPromise(tuneVtaConv2d(task, tuner, measure, { trials: TUNE, batch: BATCH }))
      byTuner[tname] = [...r.curve]
      curves.push({ task: task.id, label: name, tuner: tname, best: r.curve.map((v) => v / roof.opsPerCycle) })
      if (r.best && (!best || r.best.cycles < best.cycles)) best = r.best
      process.stderr.write(`${name} ${tname}: ${r.trials} trials, ${r.errors} do not fit, best ${r.best?.cycles ?? "-"} cycles\n`)
    }
    const target = byTuner.random.at(-1) ?? 0
    const reach = (t: string) => trialsToReach(byTuner[t], target)
    xgbTrials.push(reach("xgb") ?? Infinity)
    const s = scheduleOfConfig(best!.config)
    const [a, h] = serialVsHidden(x, s, false)
    const hidden = s.vthreads === 1 ? a : h
    tuned.push([a.utilization, hidden.utilization])
    const size = task.knobs.reduce((n, kk) => n * kk.candidates.length, 1)
    out.push(`| ${name} | ${size} | ${pct(target / roof.opsPerCycle)} | ${reach("xgb") ?? "not reached"} | ${reach("evo") ?? "not reached"} | ${tiles(s)}, ${s.vthreads} | ${pct(a.utilization)} | ${pct(hidden.utilization)} | ${pct(utils[k][1])} |`)
  }
  out.push(`| mean | | | | | | ${pct(mean(tuned.map((u) => u[0])))} | ${pct(mean(tuned.map((u) => u[1])))} | ${pct(m2)} |`)
  console.log(`\nTuned (${TUNE} trials a tuner, batch ${BATCH}, seed ${SEED}; "util 1": the tuned tiles with one virtual thread):\n`)
  console.log(out.join("\n"))
  console.log(`\nxgb reaches random's best of ${TUNE} within 150 trials on ${xgbTrials.filter((t) => t <= 150).length} of ${xgbTrials.length} layers`)
  const svg = await renderCurvesSvg(curves, `VTA conv2d tuning: best-so-far GEMM utilization vs trials (simulator cycles)`, { yTitle: "best utilization", logTrials: true, inOrder: true })
  fs.writeFileSync(path.join(SVG_DIR, "vta-search-curves.svg"), svg)
  console.log(`wrote ${path.join(SVG_DIR, "vta-search-curves.svg")}`)
}

// The whole network on vta + c, the Amdahl picture (scripts/vta-network.ts)
console.log((await networkReport()).join("\n"))
