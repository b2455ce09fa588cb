// Tuning VTA's conv2d (src/lowering/vta/conv2d.ts): its schedule's knobs as a search space, the
// simulator's cycle count as the measure — deterministic, so a trial is measured once and never
// timed — and the static features of a candidate's instruction stream for the cost model. The
// tuners are src/search's own (random, xgb, evo): they see only the knobs.
//
// The roofline of a layer lives here too (vta-roofline.ts draws it): the configuration's GEMM roof
// (BATCH·BLOCK_IN·BLOCK_OUT multiply-adds, 2 ops each, per gemmII cycles), the bus's bytes per
// cycle, the layer's arithmetic intensity (GEMM ops per byte it must move at the least: the input
// pixels its windows touch, its weights, its output, its bias), and the ceiling its own epilogue puts on the
// compute module, which runs the GEMM, the accumulator reset and the ALU passes one after the
// other: per output vector ci·kh·kw GEMM iterations, one reset iteration and epilogueAluPasses
// (3, 4 with a bias) ALU iterations at aluII — a ceiling no latency hiding lifts.
import { Effect } from "effect"
import type { VtaDerived } from "../ast/vta/config.js"
import type { VtaInsn } from "../ast/vta/isa.js"
import { dmaCycles, VTA_CYCLE_MODEL, type VtaCycleModel } from "../device/vta/cycle-model.js"
import { moduleOf, runVtaSync } from "../device/vta/simulator.js"
import type { Config, Knob } from "../lowering/templates/template.js"
import { defaultConv2dSchedule, epilogueAluPasses, lowerConv2d, outSize, VtaScheduleError, type VtaConv2d, type VtaConv2dSchedule, type VtaLoopOrder } from "../lowering/vta/conv2d.js"
import { configHash, fnv1a } from "./task.js"
import type { MeasureResult, Tuner } from "./tuners.js"

export interface VtaConv2dTask {
  /** fnv1a of `workload` (a tuning record's `task`). */
  readonly id: string
  /**
   * The tuning records' key: `vta-conv2d|vta:CONFIG:CYCLE-MODEL|SHAPE` — the configuration and
   * cycle model the cycles were counted under, and what of the layer shapes its program's timing
   * (channel blocks, image, kernel, stride, pad, a bias); the shift and the clip's bound do not
   * (the same three ALU passes whatever their immediates), so layers that differ only there share
   * a task and its records.
   */
  readonly workload: string
  readonly label: string
  readonly layer: VtaConv2d
  readonly knobs: readonly Knob[]
  /** GEMM multiply-adds of the layer (each BATCH·BLOCK_IN·BLOCK_OUT of a GEMM iteration). */
  readonly macs: number
}

const divisors = (n: number): number[] => Array.from({ length: n }, (_, k) => k + 1).filter((m) => n % m === 0)

/**
 * The space: output rows a tile (the distinct ⌈OH / n⌉, so no two candidates make the same number
 * of row tiles), output and input channel blocks (divisors), the loop order, 1–4 virtual threads.
 * Candidates that do not fit the buffers stay in: the tuner learns they fail.
 */
export const vtaConv2dKnobs = (x: VtaConv2d, extraRows: readonly number[] = []): Knob[] => {
  const { oh } = outSize(x)
  const rows = [...new Set([...Array.from({ length: oh }, (_, k) => Math.ceil(oh / (k + 1))), ...extraRows.filter((r) => Number.isInteger(r) && r >= 1 && r <= oh)])].sort((a, b) => a - b)
  return [
    { kind: "choice", name: "vta_tile_oh", candidates: rows },
    { kind: "choice", name: "vta_tile_co", candidates: divisors(x.co) },
    { kind: "choice", name: "vta_tile_ci", candidates: divisors(x.ci) },
    { kind: "choice", name: "vta_order", candidates: ["co-oh", "oh-co"] },
    { kind: "choice", name: "vta_vthreads", candidates: [1, 2, 3, 4] },
  ]
}

/** The workload key of a layer under a configuration and cycle model (see `VtaConv2dTask.workload`). */
export const vtaConv2dWorkload = (d: VtaDerived, model: VtaCycleModel, x: VtaConv2d): string => {
  const shape = { ci: x.ci, co: x.co, h: x.h, w: x.w, kh: x.kh, kw: x.kw, stride: x.stride, pad: x.pad, bias: x.bias === true }
  return `vta-conv2d|vta:${JSON.stringify(d.config)}:${JSON.stringify(model)}|${JSON.stringify(shape)}`
}

/**
 * A layer's task. With `withDefaults` its space also holds the default schedules' row tiles
 * (`defaultConv2dSchedule` with 1–4 virtual threads may pick rows that are no ⌈OH / n⌉): the
 * command-line tuner measures the defaults first, so its best is never slower than what runs
 * without a log.
 */
export const vtaConv2dTask = (d: VtaDerived, label: string, x: VtaConv2d, model: VtaCycleModel = VTA_CYCLE_MODEL, options: { readonly withDefaults?: boolean } = {}): VtaConv2dTask => {
  const { oh, ow } = outSize(x)
  const workload = vtaConv2dWorkload(d, model, x)
  return { id: fnv1a(workload), workload, label, layer: x, knobs: options.withDefaults ? vtaLayerKnobs(d, x) : vtaConv2dKnobs(x), macs: oh * ow * x.co * x.ci * x.kh * x.kw * d.batch * d.blockIn * d.blockOut }
}

/** The space of a layer's task as the command line tunes it (and as `--tuned` checks a record against): with the default schedules' rows. */
export const vtaLayerKnobs = (d: VtaDerived, x: VtaConv2d): Knob[] => vtaConv2dKnobs(x, vtaDefaultConfigs(d, x).map((c) => Number(c.vta_tile_oh)))

/** The default schedules with 1 to 4 virtual threads as configs (those that fit the buffers): what a layer runs without a tuning log picks among them. */
export const vtaDefaultConfigs = (d: VtaDerived, x: VtaConv2d): Config[] =>
  [1, 2, 3, 4].flatMap((v) => {
    const s = defaultConv2dSchedule(d, x, v)
    return "reason" in lowerOrReason(d, x, configOfSchedule(s, x)) ? [] : [configOfSchedule(s, x)]
  })

export const scheduleOfConfig = (c: Config): VtaConv2dSchedule => ({
  tileOh: Number(c.vta_tile_oh),
  tileCo: Number(c.vta_tile_co),
  tileCi: Number(c.vta_tile_ci),
  order: c.vta_order as VtaLoopOrder,
  vthreads: Number(c.vta_vthreads),
})

export const configOfSchedule = (s: VtaConv2dSchedule, x: VtaConv2d): Config => ({
  vta_tile_oh: s.tileOh, vta_tile_co: s.tileCo, vta_tile_ci: s.tileCi ?? x.ci, vta_order: s.order ?? "co-oh", vta_vthreads: s.vthreads,
})

/** The lowered program, or the reason the schedule does not fit. */
const lowerOrReason = (d: VtaDerived, x: VtaConv2d, c: Config): { insns: VtaInsn[]; dram: Uint8Array } | { reason: string } => {
  try {
    return lowerConv2d(d, x, scheduleOfConfig(c))
  } catch (e) {
    if (e instanceof VtaScheduleError) return { reason: e.reason }
    throw e
  }
}

/** A candidate's simulated cycles (timing only), or why it cannot run. */
export const measureVtaConv2d = (d: VtaDerived, model: VtaCycleModel, x: VtaConv2d, c: Config): { readonly cycles?: number; readonly error?: string } => {
  const p = lowerOrReason(d, x, c)
  if ("reason" in p) return { error: p.reason }
  return { cycles: runVtaSync(d, p.insns, p.dram, model, { functional: false }).stats.totalCycles }
}

/** Busy cycles per module and DRAM bytes, summed from the stream under the cycle model (no simulation: no overlap, no tokens). */
export const staticModuleCycles = (d: VtaDerived, model: VtaCycleModel, insns: readonly VtaInsn[]) => {
  const busy = { load: 0, compute: 0, store: 0 }
  let bytes = 0
  let firstLoad = 0
  let sawGemm = false
  // the work after the last GEMM (the last tile's epilogue and stores): what no overlap hides
  let drain = 0
  for (const i of insns) {
    let cycles = 0
    if (i.op === "LOAD" || i.op === "STORE") {
      const elem = i.memType === "inp" ? d.inpElemBytes : i.memType === "wgt" ? d.wgtElemBytes : i.memType === "acc" ? d.accElemBytes : i.memType === "uop" ? d.uopElemBytes : d.outElemBytes
      const b = i.ySize * i.xSize * elem
      const pads = (i.yPad0 + i.ySize + i.yPad1) * (i.xPad0 + i.xSize + i.xPad1) - i.ySize * i.xSize
      cycles = dmaCycles(model, d.busBytes, b, pads)
      bytes += b
    } else if (i.op === "GEMM" || i.op === "ALU") {
      cycles = i.iterOut * i.iterIn * (i.uopEnd - i.uopBgn) * (i.op === "GEMM" ? model.gemmII : model.aluII)
      if (i.op === "GEMM" && !i.reset) sawGemm = true
    } else cycles = model.finishCycles
    const m = moduleOf(i)
    busy[m] += cycles
    if (m === "load" && !sawGemm) firstLoad += cycles
    if (i.op === "GEMM" && !i.reset) drain = 0
    else if (m !== "load") drain += cycles
  }
  return { ...busy, bytes, firstLoad, drain }
}

const lg = (v: number) => Math.log2(Math.max(v, 0) + 1)

/**
 * A candidate's features for the cost model: its knobs, and what its lowered stream says statically
 * — instructions, busy cycles of each module under the cycle model, their maximum and sum, the
 * loads before the first GEMM, the work after the last one, the longest module plus those two (a
 * pipeline's time, if every overlap were perfect), DRAM bytes. A schedule that does not fit is a
 * row of −1.
 */
export const vtaConv2dFeatures = (d: VtaDerived, model: VtaCycleModel, x: VtaConv2d) => (c: Config): number[] => {
  const s = scheduleOfConfig(c)
  const knobs = [lg(s.tileOh), lg(s.tileCo), lg(s.tileCi ?? x.ci), s.order === "oh-co" ? 1 : 0, s.vthreads]
  const p = lowerOrReason(d, x, c)
  if ("reason" in p) return [...knobs, ...Array.from({ length: 11 }, () => -1)]
  const m = staticModuleCycles(d, model, p.insns)
  const longest = Math.max(m.load, m.compute, m.store)
  return [...knobs, 1, lg(p.insns.length), lg(m.load), lg(m.compute), lg(m.store), lg(longest), lg(m.load + m.compute + m.store), lg(m.firstLoad), lg(m.drain), lg(longest + m.firstLoad + m.drain), lg(m.bytes)]
}

export interface VtaTuneResult {
  /** Best GEMM ops per cycle after each trial (0 until a candidate runs), resumed trials first. */
  readonly curve: readonly number[]
  readonly best?: { readonly config: Config; readonly cycles: number }
  /** Trials, resumed ones included. */
  readonly trials: number
  readonly errors: number
}

/** A measured candidate: its cycles, or why it cannot run. */
export interface VtaMeasured {
  readonly config: Config
  readonly cycles?: number
  readonly error?: string
}

export interface VtaTuneOptions<E> {
  readonly trials: number
  readonly batch: number
  /** Trials measured before (a resumed log): they count, the tuner learns them, and they are not proposed again. */
  readonly done?: readonly VtaMeasured[]
  /** Configs measured first, before the tuner proposes any (the default schedules; those already done are skipped). */
  readonly first?: readonly Config[]
  /** Stop after this many trials without a better one. */
  readonly earlyStopping?: number
  /** Each batch once measured (the CLI appends its records; a failure ends the session). */
  readonly onBatch?: (measured: readonly VtaMeasured[], result: VtaTuneResult) => Effect.Effect<void, E>
  /** Called before each candidate is measured (the CLI's stop flag: it throws to stop). */
  readonly check?: () => void
}

/**
 * Tunes a task: the tuner proposes batches, each candidate is measured (by `measure`, memoized by
 * config — the simulator is deterministic), the tuner learns. Stops at `trials`, after
 * `earlyStopping` trials without improvement, or when the space is exhausted.
 */
export const tuneVtaConv2d = <E = never>(
  task: VtaConv2dTask,
  tuner: Tuner,
  measure: (c: Config) => { readonly cycles?: number; readonly error?: string },
  options: VtaTuneOptions<E>,
) =>
  Effect.gen(function* () {
    const curve: number[] = []
    let best: { config: Config; cycles: number } | undefined
    let errors = 0
    let sinceBest = 0
    const seen = new Set<string>()
    const note = (m: VtaMeasured) => {
      seen.add(configHash(m.config))
      if (m.cycles === undefined) errors++
      if (m.cycles !== undefined && (best === undefined || m.cycles < best.cycles)) {
        best = { config: m.config, cycles: m.cycles }
        sinceBest = 0
      } else sinceBest++
      curve.push(best === undefined ? 0 : (2 * task.macs) / best.cycles)
    }
    const result = (): VtaTuneResult => ({ curve: [...curve], ...(best ? { best } : {}), trials: curve.length, errors })
    const done = options.done ?? []
    for (const m of done) note(m)
    sinceBest = 0
    if (done.length) yield* tuner.update(done.map((m) => ({ config: m.config, cost: m.cycles })))
    let first = (options.first ?? []).filter((c, k, all) => !seen.has(configHash(c)) && all.findIndex((o) => configHash(o) === configHash(c)) === k)
    const stopEarly = () => options.earlyStopping !== undefined && sinceBest >= options.earlyStopping
    while (first.length > 0 || (curve.length < options.trials && tuner.hasNext() && !stopEarly())) {
      const configs = first.length > 0 ? first : (yield* tuner.next(Math.min(options.batch, options.trials - curve.length))).filter((c) => !seen.has(configHash(c)))
      const proposed = first.length > 0
      first = []
      if (configs.length === 0) {
        if (proposed || tuner.hasNext()) continue
        break
      }
      const measured: VtaMeasured[] = configs.map((config) => {
        options.check?.()
        const m = measure(config)
        const r = { config, ...(m.cycles !== undefined ? { cycles: m.cycles } : { error: m.error ?? "failed" }) }
        note(r)
        return r
      })
      yield* tuner.update(measured.map((m): MeasureResult => ({ config: m.config, cost: m.cycles })))
      if (options.onBatch) yield* options.onBatch(measured, result())
    }
    return result()
  })

/** `measure` memoized by config (one simulation per distinct candidate, shared by the tuners of a task). */
export const memoMeasure = (measure: (c: Config) => { readonly cycles?: number; readonly error?: string }) => {
  const seen = new Map<string, { readonly cycles?: number; readonly error?: string }>()
  return (c: Config) => {
    const k = configHash(c)
    let m = seen.get(k)
    if (m === undefined) {
      m = measure(c)
      seen.set(k, m)
    }
    return m
  }
}

export interface VtaRoof {
  /** GEMM ops (2 per multiply-add) per cycle at one GEMM iteration per gemmII. */
  readonly opsPerCycle: number
  /** DRAM bytes per cycle (the bus). */
  readonly bytesPerCycle: number
}

export const vtaRoof = (d: VtaDerived, model: VtaCycleModel): VtaRoof => ({
  opsPerCycle: (2 * d.batch * d.blockIn * d.blockOut) / model.gemmII,
  bytesPerCycle: d.busBytes,
})

/** Input rows (or columns) a convolution's windows touch: the distinct i·stride + k − pad inside [0, n). */
const touched = (n: number, out: number, k: number, stride: number, pad: number): number => {
  const rows = new Set<number>()
  for (let o = 0; o < out; o++) for (let j = 0; j < k; j++) {
    const r = o * stride + j - pad
    if (r >= 0 && r < n) rows.add(r)
  }
  return rows.size
}

export interface VtaLayerBound {
  readonly ops: number
  /** The least DRAM traffic: touched input, weights, output. */
  readonly bytes: number
  /** ops / bytes. */
  readonly intensity: number
  /** Whether the intensity is past the roofline's ridge (roof / bandwidth). */
  readonly bound: "compute" | "memory"
  /** The roofline's attainable ops per cycle at this intensity. */
  readonly attainable: number
  /** GEMM-busy share of the compute module's own work (GEMM + reset + epilogue): the utilization no schedule passes. */
  readonly epilogueCeiling: number
}

export const conv2dBound = (d: VtaDerived, model: VtaCycleModel, x: VtaConv2d): VtaLayerBound => {
  const { oh, ow } = outSize(x)
  const roof = vtaRoof(d, model)
  const ops = 2 * oh * ow * x.co * x.ci * x.kh * x.kw * d.batch * d.blockIn * d.blockOut
  const input = x.ci * touched(x.h, oh, x.kh, x.stride, x.pad) * touched(x.w, ow, x.kw, x.stride, x.pad) * d.inpElemBytes
  const bytes = input + x.co * x.ci * x.kh * x.kw * d.wgtElemBytes + x.co * oh * ow * d.outElemBytes + (x.bias ? x.co * d.accElemBytes : 0)
  const intensity = ops / bytes
  const gemm = x.ci * x.kh * x.kw * model.gemmII
  return {
    ops,
    bytes,
    intensity,
    bound: intensity * roof.bytesPerCycle >= roof.opsPerCycle ? "compute" : "memory",
    attainable: Math.min(roof.opsPerCycle, intensity * roof.bytesPerCycle),
    epilogueCeiling: gemm / (gemm + model.gemmII + epilogueAluPasses(x) * model.aluII),
  }
}
