// The tuned records confirmed in the network, after `tessera tune`: a task's trials and its
// confirmation time each candidate alone (its own library, its own buffers, caches swept); the
// network runs the same kernel between its neighbours, on planned storage, after them in the
// caches. The two disagreed: a record MobileNetV3's tuner timed at 0.25 ms ran 4–8 ms in the
// network (a difference in the emitted code, since fixed), and BERT-base's tuned FFN kernels ran
// 1.5× their default's time with code identical to the candidate's. So the end of a tuning run
// compiles the model with its records and without, runs both in turns, times every kernel inside
// the run, and writes one more confirmation round per tuned workload: the applied config and the
// default, each with its time in the network. Compile applies the faster of the last round
// (rankedRecords), so a record that slows the network is not applied, and one that speeds it is.
import { Effect } from "effect"
import { checkInterrupt, type Interrupt } from "../ast/graph/errors.js"
import type { Graph } from "../ast/graph/graph.js"
import type { Tensor } from "../ast/graph/tensor.js"
import type { Target } from "../ast/target.js"
import type { DeviceBuffer } from "../device/device.js"
import { median } from "../device/onnxruntime.js"
import type { Program } from "../lowering/program.js"
import { compileGraph, loadProgram } from "../pipeline.js"
import type { TaskRunner } from "../search/extract.js"
import { RECORD_VERSION, rankedRecords, recordsByWorkload, type TuningRecord } from "../search/records.js"
import { configKey } from "../search/task.js"
import { randomTensor } from "./inputs.js"

/** One tuned workload as the network ran it: its kernels' time per call with the record and with the default. */
export interface NetworkCheckRow {
  readonly task: string
  readonly label: string
  readonly groups: number
  /** Seconds per call of the workload's kernels (the mean over its groups of each one's median). */
  readonly tuned: number
  readonly default: number
}

export interface NetworkCheck {
  readonly rows: readonly NetworkCheckRow[]
  /** The confirmation round to append (two records per row). */
  readonly records: readonly TuningRecord[]
}

/** Targets whose kernels run synchronously on the host, so a kernel's time is the call's. */
export const NETWORK_CHECK_KINDS: ReadonlySet<string> = new Set(["c", "wasm", "js"])

/** Runs of each program, in turns after one warm-up each. */
export const NETWORK_CHECK_RUNS = 7

/** A loaded program as the check drives it: one end-to-end run, and the module whose kernel calls it times. */
interface Timed {
  readonly run: () => void
  readonly module: { run: (kernel: string, args: readonly DeviceBuffer[]) => void }
}

/** Seconds one kernel call takes (`which`: the program with the records, or the default one). */
export type KernelTimer = (which: "tuned" | "default", kernel: string, call: () => void) => number

const wallClock: KernelTimer = (_which, _kernel, call) => {
  const t0 = performance.now()
  call()
  return (performance.now() - t0) / 1000
}

/**
 * Times each program's compiled kernels inside `runs` end-to-end runs, the programs in turns
 * after one warm-up run each: per program, each kernel's time per run (the calls of a kernel in
 * one run added).
 */
const kernelTimesInTurns = (programs: readonly (Timed & { readonly which: "tuned" | "default" })[], runs: number, timer: KernelTimer, interrupt?: Interrupt): Map<string, number[]>[] => {
  const times = programs.map(() => new Map<string, number[]>())
  const current = new Map<string, number>()
  const once = (p: Timed & { readonly which: "tuned" | "default" }, into?: Map<string, number[]>) => {
    // (a stop request is seen before each run: a network's run is a second or more of synchronous work)
    checkInterrupt(interrupt, () => "the network check's runs")
    current.clear()
    const inner = p.module.run
    p.module.run = (k, a) => current.set(k, (current.get(k) ?? 0) + timer(p.which, k, () => inner(k, a)))
    try {
      p.run()
    } finally {
      p.module.run = inner
    }
    if (into) for (const [k, t] of current) into.set(k, [...(into.get(k) ?? []), t])
  }
  for (const p of programs) once(p)
  for (let r = 0; r < runs; r++) programs.forEach((p, i) => once(p, times[i]))
  return times
}

/**
 * The network confirmation of a tuning log's records for `graph` on `target` (`untuned`: the
 * program compiled without records, as tune compiled it). Workloads whose applied record is the
 * default are left out; so is every workload when the model's inputs are not all of static shape.
 */
export const networkCheck = Effect.fn("cli.networkCheck")(function* (
  graph: Graph,
  target: Target,
  untuned: Program,
  runners: readonly TaskRunner[],
  records: readonly TuningRecord[],
  options: { readonly threads: number; readonly seed: number; readonly runs?: number; readonly now: () => string; readonly timer?: KernelTimer; readonly interrupt?: Interrupt },
) {
  const kind = target.kind
  const tuned = recordsByWorkload(records, kind)
  const ranked = rankedRecords(records, kind)
  // the workloads whose applied config is not the default (the default's kernel is the untuned one)
  const checked = runners.flatMap((r) => {
    const best = ranked.get(r.task.workload)?.[0]
    const def = r.task.template.defaults(r.task.knobs, r.target)
    return best && configKey(best.config) !== configKey(def) ? [{ runner: r, best, def }] : []
  })
  if (checked.length === 0 || graph.inputs.some((i) => i.type.shape.some((d) => typeof d !== "number"))) return { rows: [], records: [] } satisfies NetworkCheck
  const program = yield* compileGraph(graph, target, { tuned })
  const feeds = new Map<string, Tensor>(graph.inputs.map((i, k) => [i.name, randomTensor(i.type.dtype, i.type.shape as number[], options.seed, k)] as const))
  const [a, b] = [yield* loadProgram(program, target, { threads: options.threads }), yield* loadProgram(untuned, target, { threads: options.threads })]
  const times = yield* Effect.ensuring(
    Effect.sync(() =>
      kernelTimesInTurns(
        ([[a, "tuned"], [b, "default"]] as const).map(([e, which]) => ({ which, run: () => void e.run(feeds), module: e.module as unknown as Timed["module"] })),
        options.runs ?? NETWORK_CHECK_RUNS,
        options.timer ?? wallClock,
        options.interrupt,
      ),
    ),
    Effect.sync(() => {
      a.module.close()
      b.module.close()
    }),
  )
  const kernelOf = (p: Program, group: number) => p.kernels.find((k) => k.kind === "compiled" && k.group === group)?.name
  const rows: NetworkCheckRow[] = []
  const out: TuningRecord[] = []
  for (const { runner, best, def } of checked) {
    const per = (p: Program, t: Map<string, number[]>) => runner.task.groups.map((g) => t.get(kernelOf(p, g) ?? "")).filter((x): x is number[] => x !== undefined && x.length > 0).map(median)
    const [withRecord, withDefault] = [per(program, times[0]), per(untuned, times[1])]
    if (withRecord.length === 0 || withRecord.length !== withDefault.length) continue
    const mean = (xs: readonly number[]) => xs.reduce((s, x) => s + x, 0) / xs.length
    const row = { task: runner.task.id, label: runner.task.label, groups: withRecord.length, tuned: mean(withRecord), default: mean(withDefault) }
    rows.push(row)
    const round = Math.max(0, ...records.filter((r) => r.workload === runner.task.workload && r.target === kind && r.confirm !== undefined).map((r) => r.confirm!)) + 1
    const record = (config: TuningRecord["config"], cost: number): TuningRecord => ({
      v: RECORD_VERSION,
      task: runner.task.id,
      workload: runner.task.workload,
      target: kind,
      config,
      costs: [cost],
      timestamp: options.now(),
      tuner: "network",
      gflops: runner.task.flops / cost / 1e9,
      confirm: round,
    })
    out.push(record(best.config, row.tuned), record(def, row.default))
  }
  return { rows, records: out } satisfies NetworkCheck
})
