// A measured sweep of the cuda target's schedules on a GPU machine without Node: gpu-prepare
// writes per model its default artifact and variants (every task at one config of its `cuda`
// space: AutoTVM's template at its defaults, or seeded random valid configs), with a map of each
// variant's kernels to their task and config (<model>-variants.json); scripts/gpu-check.py
// --variants runs them and writes per variant each launch's median ms (sweep.json); here, per
// task, the fastest correct variant's config wins, and the measured configs become tuning records
// (`tessera compile --tuning-log` applies the fastest per workload). Pure: the timestamp is the
// caller's.
import type { Config } from "../lowering/templates/template.js"
import { bestRecords, RECORD_VERSION, type TuningRecord } from "./records.js"
import { AUTOTVM } from "../lowering/templates/gpu/conv2d-direct.js"

/** A task of a model's variants: its workload key (the tuning log's), label, GFLOP count's flops and groups. */
export interface SweepTask {
  readonly workload: string
  readonly label: string
  readonly flops: number
  readonly groups: readonly number[]
}

/** One variant of a model: its artifact folder, how its configs were chosen, each task's config and each kernel's group and task. */
export interface SweepVariant {
  readonly name: string
  readonly dir: string
  /**
   * default: the generated defaults; autotvm: AutoTVM's template at its defaults on conv2d tasks (the rest at default); bounded,
   * autotvm-bounded: the two with every tiled kernel's `launch_bounds` knob at 1; random: seeded; tuned: a tuning log's.
   * The ablations (gpu-prepare --ablation), the defaults emitted another way — not configs, so never a task's best: no-shuffle: the
   * cross-thread reductions' partials summed serially (their `_shuffle` knob 0); no-float4: no vector accesses (a record of 4-byte
   * vectors); previous: both, as the emitter was before warp shuffles and float4.
   */
  readonly kind: "default" | "autotvm" | "bounded" | "autotvm-bounded" | "random" | "tuned" | "no-shuffle" | "no-float4" | "previous"
  readonly configs: Readonly<Record<string, Config>>
  /** Kernel name (the first word of a launch's name in profile.json) → its group and task id. */
  readonly kernels: Readonly<Record<string, { readonly group: number; readonly task: string }>>
}

/** <model>-variants.json. */
export interface VariantsFile {
  readonly model: string
  readonly target: string
  readonly seed: number
  readonly tasks: Readonly<Record<string, SweepTask>>
  readonly variants: readonly SweepVariant[]
}

/** One variant's measurement in sweep.json (gpu-check.py --variants). */
export interface SweepRun {
  /** Its outputs equal the reference (within gpu-check's tolerance). */
  readonly close: boolean
  readonly error?: string
  readonly max_abs?: number
  readonly median_ms?: number
  readonly launches?: readonly { readonly name: string; readonly median_ms: number }[]
}

/** sweep.json: per model, per variant name, its run. */
export interface SweepFile {
  readonly gpu?: string
  readonly models: Readonly<Record<string, { readonly variants: Readonly<Record<string, SweepRun>> }>>
}

/** Per task: the generated default's, AutoTVM's and the fastest correct variant's time (ms, the sum of the task's launches), and the winner. */
export interface TaskChoice {
  readonly model: string
  readonly task: string
  readonly label: string
  readonly workload: string
  readonly flops: number
  readonly defaultMs?: number
  readonly autotvmMs?: number
  readonly bestMs: number
  readonly bestVariant: string
  readonly config: Config
  /** Correct variants measured for this task. */
  readonly measured: number
  /** The fastest measured config of each sketch of a conv task's space (the generated multi-level tiling, AutoTVM's template): the baseline comparison. */
  readonly bestBySketch?: { readonly generated?: number; readonly autotvm: number }
}

/** Which sketch of the cuda space a config is in (a config without the knob: the generated one). */
export const sketchOf = (config: Config | undefined): "generated" | "autotvm" => (config?.[AUTOTVM.knob] === AUTOTVM.value ? "autotvm" : "generated")

/** A variant's time per task: the sum of the medians of the launches of the task's kernels (undefined for a task with no launch measured). */
export const taskTimes = (v: SweepVariant, run: SweepRun): Map<string, number> => {
  const out = new Map<string, number>()
  for (const l of run.launches ?? []) {
    const k = v.kernels[l.name.split(" ")[0]]
    if (k) out.set(k.task, (out.get(k.task) ?? 0) + l.median_ms)
  }
  return out
}

/**
 * Per task of each model, the fastest measured config among the variants whose outputs were
 * correct (ties: the earlier variant; a wrong or failed variant is never chosen).
 */
export const chooseConfigs = (variants: readonly VariantsFile[], sweep: SweepFile): TaskChoice[] => {
  const out: TaskChoice[] = []
  for (const vf of variants) {
    const runs = sweep.models[vf.model]?.variants ?? {}
    const timed = vf.variants.flatMap((v) => {
      const run = runs[v.name]
      const ablation = v.kind === "no-shuffle" || v.kind === "no-float4" || v.kind === "previous"
      return run && run.close && !run.error && !ablation ? [{ v, times: taskTimes(v, run) }] : []
    })
    for (const [id, task] of Object.entries(vf.tasks)) {
      const measured = timed.flatMap(({ v, times }) => (times.has(id) && v.configs[id] ? [{ v, ms: times.get(id)! }] : []))
      if (!measured.length) continue
      const best = measured.reduce((a, b) => (b.ms < a.ms ? b : a))
      const of = (kind: SweepVariant["kind"]) => measured.find((m) => m.v.kind === kind)?.ms
      const defaultMs = of("default")
      const autotvmMs = of("autotvm")
      // (only for tasks whose space has both sketches: a conv task where AutoTVM's template was measured)
      const fastest = (sketch: "generated" | "autotvm") => measured.filter((m) => sketchOf(m.v.configs[id]) === sketch).reduce<number | undefined>((a, m) => (a === undefined || m.ms < a ? m.ms : a), undefined)
      const generated = fastest("generated")
      const autotvm = fastest("autotvm")
      const bySketch = autotvm !== undefined ? { bestBySketch: { autotvm, ...(generated !== undefined ? { generated } : {}) } } : {}
      out.push({ model: vf.model, task: id, label: task.label, workload: task.workload, flops: task.flops, ...(defaultMs !== undefined ? { defaultMs } : {}), ...(autotvmMs !== undefined ? { autotvmMs } : {}), bestMs: best.ms, bestVariant: best.v.name, config: best.v.configs[id], measured: measured.length, ...bySketch })
    }
  }
  return out
}

/**
 * The tuning records of a sweep: per task, every correct variant's measurement (seconds; a task
 * time is its launches' sum), in variant order, so the log's fastest per workload (bestRecords) is
 * the chosen config. A config measured in several variants (a task left at its default) is one
 * record, its fastest measurement: a log reader skips the same measurement twice.
 */
export const sweepRecords = (variants: readonly VariantsFile[], sweep: SweepFile, timestamp: string): TuningRecord[] => {
  const byConfig = new Map<string, TuningRecord>()
  const out = {
    push: (r: TuningRecord) => {
      const key = `${r.task}|${JSON.stringify(r.config)}`
      const seen = byConfig.get(key)
      if (!seen || r.costs[0] < seen.costs[0]) byConfig.set(key, r)
    },
  }
  for (const vf of variants) {
    const runs = sweep.models[vf.model]?.variants ?? {}
    for (const v of vf.variants) {
      const run = runs[v.name]
      if (!run || !run.close || run.error) continue
      const times = taskTimes(v, run)
      for (const [id, task] of Object.entries(vf.tasks)) {
        const ms = times.get(id)
        if (ms === undefined || !v.configs[id]) continue
        out.push({ v: RECORD_VERSION, task: id, workload: task.workload, target: vf.target, config: v.configs[id], costs: [ms / 1000], timestamp, tuner: "gpu-sweep", ...(ms > 0 ? { gflops: task.flops / (ms / 1000) / 1e9 } : {}) })
      }
    }
  }
  return [...byConfig.values()]
}

/** Whether the records' fastest per workload are the chosen configs (a check of the log gpu-tune-apply writes). */
export const recordsAgree = (records: readonly TuningRecord[], choices: readonly TaskChoice[], target: string): boolean => {
  const best = bestRecords(records, target)
  return choices.every((c) => JSON.stringify(best.get(c.workload)?.config) === JSON.stringify(c.config) || best.get(c.workload)!.costs[0] * 1000 <= c.bestMs)
}
