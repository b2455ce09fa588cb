// The graph side of `--target vta`, pure but for the trace's clock: a quantized model's integer
// graph (rewrite.QdqToInteger) re-quantized for VTA (rewrite.VtaRequantize), bound, partitioned
// between vta and c (rewrite.VtaPartition), and each offloaded layer lowered — the default
// schedule with 1–4 virtual threads, the fewest simulated cycles, or with a tuning log the fastest
// recorded schedule of `tessera tune --target vta`. `planVtaTraced` does the same step by step,
// each step timed and printed, for `run --report / --dump-ir` (src/cli/vta.ts).
import type { Graph } from "../ast/graph/graph.js"
import { printGraph } from "../ast/graph/graph.js"
import { checkInterrupt, type Interrupt } from "../ast/graph/errors.js"
import { bindSync } from "../ast/graph/infer.js"
import { defaultVtaConfig, deriveVta, type VtaDerived } from "../ast/vta/config.js"
import { disassemble } from "../ast/vta/disasm.js"
import { VTA_CYCLE_MODEL } from "../device/vta/cycle-model.js"
import { runVtaSync, type VtaStats } from "../device/vta/simulator.js"
import { VtaScheduleError } from "../lowering/vta/conv2d.js"
import { compileVtaConv, compileVtaLayerBest, convLayerOf, vtaFits, type VtaLayerProgram } from "../lowering/vta/layers.js"
import type { Config } from "../lowering/templates/template.js"
import { qdqToIntegerSync } from "../rewrite/qdq-to-integer.js"
import { partitionForVta, type VtaLayer, type VtaPartition } from "../rewrite/vta-partition.js"
import { vtaRequantizeWithReport, type VtaRequantizeOptions, type VtaRequantizeReport } from "../rewrite/vta-requantize.js"
import { fitsKnobs } from "../search/task.js"
import { scheduleOfConfig, vtaConv2dWorkload, vtaLayerKnobs } from "../search/vta-conv2d.js"

export interface VtaPlan {
  readonly d: VtaDerived
  /** The shift-requantized integer graph, bound: what both targets run. */
  readonly graph: Graph
  readonly requantize: VtaRequantizeReport
  readonly partition: VtaPartition
  /** Each offloaded layer's program as run: the tuned schedule where a record applies, else the default's (1 to 4 virtual threads, the fewest cycles). */
  readonly programs: ReadonlyMap<string, VtaLayerProgram>
  /** Each layer's default program (what runs without a tuning log). */
  readonly defaults: ReadonlyMap<string, VtaLayerProgram>
  /** Each layer's programs with 1 to 4 virtual threads (those that fit) and their simulated statistics. */
  readonly candidates: ReadonlyMap<string, readonly { readonly program: VtaLayerProgram; readonly stats: VtaStats }[]>
  /** The conv layers a tuning record applies to: the tuned program and its statistics, beside the default's. */
  readonly tuned: ReadonlyMap<string, { readonly program: VtaLayerProgram; readonly stats: VtaStats; readonly defaultStats: VtaStats; readonly workload: string }>
}

export interface VtaPlanOptions {
  readonly force?: ReadonlySet<string>
  readonly d?: VtaDerived
  /** Tuned schedules by workload key (`vtaConv2dWorkload`), fastest first: the records of `tessera tune --target vta`. */
  readonly tuned?: ReadonlyMap<string, readonly Config[]>
  /** The supervisor's stop flag, checked before each layer is lowered. */
  readonly interrupt?: Interrupt
  /** rewrite.VtaRequantize's options (default: TVM's scheme; what VTA offloads: one activation scale, one shift a conv). */
  readonly requantize?: VtaRequantizeOptions
}

/** The graph side's front, pure: the integer graph (rewrite.QdqToInteger) and its VTA re-quantization (rewrite.VtaRequantize). */
export const vtaFront = (graph: Graph, options: VtaRequantizeOptions = {}) => {
  const integer = qdqToIntegerSync(graph)
  const { graph: requantized, report } = vtaRequantizeWithReport(integer, options)
  return { integer, requantized, report }
}

/** The offloaded layers lowered (pure): each default program (1 to 4 virtual threads, the fewest simulated cycles), and the tuned schedule where `tuned` has the layer's workload. */
export const lowerVtaLayers = (d: VtaDerived, partition: VtaPartition, options: Pick<VtaPlanOptions, "tuned" | "interrupt"> = {}) => {
  const candidates = new Map<string, { program: VtaLayerProgram; stats: VtaStats }[]>()
  const tuned = new Map<string, { program: VtaLayerProgram; stats: VtaStats; defaultStats: VtaStats; workload: string }>()
  const defaults = new Map<string, VtaLayerProgram>()
  const programs = new Map<string, VtaLayerProgram>()
  for (const l of partition.offloaded) {
    checkInterrupt(options.interrupt, () => `lowering VTA layer ${l.name}`)
    const seen: { program: VtaLayerProgram; stats: VtaStats }[] = []
    candidates.set(l.name, seen)
    const cycles = (p: VtaLayerProgram) => {
      const stats = simulateLayer(d, p)
      seen.push({ program: p, stats })
      return stats.totalCycles
    }
    const best = compileVtaLayerBest(d, l, cycles)
    if (seen.length === 0) seen.push({ program: best, stats: simulateLayer(d, best) })
    defaults.set(l.name, best)
    programs.set(l.name, best)
    if (l.kind !== "conv" || !options.tuned) continue
    const workload = vtaConv2dWorkload(d, VTA_CYCLE_MODEL, convLayerOf(d, l))
    const program = tunedProgram(d, l, options.tuned.get(workload) ?? [])
    if (!program) continue
    tuned.set(l.name, { program, stats: simulateLayer(d, program), defaultStats: seen.find((c) => c.program === best)!.stats, workload })
    programs.set(l.name, program)
  }
  return { programs, defaults, candidates, tuned }
}

/** The fastest of a layer's recorded configs that is a point of its space and lowers (a record from another version of the space is passed over), or undefined. */
const tunedProgram = (d: VtaDerived, l: Extract<VtaLayer, { kind: "conv" }>, configs: readonly Config[]): VtaLayerProgram | undefined => {
  // the space `tune --target vta` searched: the default schedules' rows are points of it
  const knobs = vtaLayerKnobs(d, convLayerOf(d, l))
  for (const c of configs) {
    if (!fitsKnobs(knobs, c)) continue
    try {
      return compileVtaConv(d, l, scheduleOfConfig(c))
    } catch (e) {
      if (!(e instanceof VtaScheduleError)) throw e
    }
  }
  return undefined
}

/** The graph side (pure): integer graph, requantized, bound, partitioned, VTA layers lowered. */
export const planVta = (graph: Graph, shapes: ReadonlyMap<string, readonly number[]>, options: VtaPlanOptions = {}): VtaPlan => {
  const d = options.d ?? deriveVta(defaultVtaConfig)
  const { requantized, report } = vtaFront(graph, options.requantize)
  const bound = bindSync(requantized, shapes, { requireStatic: true })
  const partition = partitionForVta(bound, { fits: vtaFits(d), ...(options.force ? { force: options.force } : {}) })
  return { d, graph: bound, requantize: report, partition, ...lowerVtaLayers(d, partition, options) }
}

/** One step of the graph side as --report and --dump-ir show it. */
export interface VtaStep {
  readonly pass: string
  readonly ms: number
  readonly nodesBefore: number
  /** Nodes after (the partition and the lowering: nodes left on c plus the layers offloaded). */
  readonly nodesAfter: number
  readonly text: string
}

/** `planVta` step by step, each step timed (the CLI's clock) and printed, for --report and --dump-ir. */
export const planVtaTraced = (graph: Graph, shapes: ReadonlyMap<string, readonly number[]>, options: VtaPlanOptions = {}): { plan: VtaPlan; steps: VtaStep[] } => {
  const d = options.d ?? deriveVta(defaultVtaConfig)
  const steps: VtaStep[] = []
  const timed = <A>(pass: string, nodesBefore: number, f: () => A, after: (a: A) => { nodes: number; text: string }): A => {
    checkInterrupt(options.interrupt, () => `pass ${pass}`)
    const t0 = performance.now()
    const a = f()
    const ms = performance.now() - t0
    const { nodes, text } = after(a)
    steps.push({ pass, ms, nodesBefore, nodesAfter: nodes, text })
    return a
  }
  const integer = timed("rewrite.QdqToInteger", graph.nodes.length, () => qdqToIntegerSync(graph), (g) => ({ nodes: g.nodes.length, text: printGraph(g) }))
  const rq = timed("rewrite.VtaRequantize", integer.nodes.length, () => vtaRequantizeWithReport(integer, options.requantize), (r) => ({ nodes: r.graph.nodes.length, text: printGraph(r.graph) }))
  const bound = bindSync(rq.graph, shapes, { requireStatic: true })
  const onSides = (p: VtaPartition) => p.segments.reduce((n, s) => n + (s.device === "c" ? s.graph.nodes.length : s.layers.length), 0)
  const partition = timed("rewrite.VtaPartition", bound.nodes.length, () => partitionForVta(bound, { fits: vtaFits(d), ...(options.force ? { force: options.force } : {}) }), (p) => ({ nodes: onSides(p), text: partitionText(p) }))
  const lowered = timed("lowering.VtaLayers", onSides(partition), () => lowerVtaLayers(d, partition, options), (l) => ({
    nodes: onSides(partition),
    text: partition.offloaded.map((x) => `# ${x.name}: ${l.programs.get(x.name)!.schedule}\n${disassemble(l.programs.get(x.name)!.insns)}`).join("\n\n"),
  }))
  return { plan: { d, graph: bound, requantize: rq.report, partition, ...lowered }, steps }
}

/** The partition as text: each segment with its nodes or layers, then what stayed on c and why. */
export const partitionText = (p: VtaPartition): string =>
  [
    ...p.segments.map((s, k) =>
      s.device === "c"
        ? `segment ${k} (c): ${s.graph.nodes.length} nodes\n${s.graph.nodes.map((n) => `  ${n.op} ${n.name}`).join("\n")}`
        : `segment ${k} (vta): ${s.layers.length} layers\n${s.layers.map((l) => `  ${l.kind} ${l.name} (${l.nodes.join(", ")})`).join("\n")}`,
    ),
    ...p.kept.map((k) => `kept on c: ${k.node} (${k.op}): ${k.reason}`),
  ].join("\n")


/** A program's cycles and statistics: the simulator's timing-only run (its timing does not depend on the data; a law checks it equals the full run's). */
export const simulateLayer = (d: VtaDerived, p: VtaLayerProgram): VtaStats => runVtaSync(d, p.insns, p.dram.slice(), undefined, { functional: false }).stats
