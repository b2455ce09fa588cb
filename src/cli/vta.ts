// `--target vta`: a quantized model offloaded to the VTA accelerator (simulated) with the CPU (the
// c target) running the rest. The composition, in one place:
//   decode → rewrite.QdqToInteger (a QDQ model's integer graph) → rewrite.VtaRequantize (TVM's
//   global-scale, shift-requantized int8 graph) → bind → rewrite.VtaPartition (vta / c segments)
//   → each VTA layer's program (the default schedule with 1–4 virtual threads, the fewest cycles,
//   or with `--tuned LOG` the fastest recorded schedule of `tessera tune --target vta`), each c
//   segment compiled for c at the opt level → one executor (src/device/vta/executor.ts).
// `run` honours --opt-level (the c segments' graph passes), --report (the graph side's steps and
// each c segment's passes), --dump-ir and the supervisor's stop flag (SIGINT, SIGTERM, --deadline:
// checked at each step, layer and segment) as `run --target c` does.
// `compile` writes the instruction streams, micro-ops, packed weights, each c segment's artifact
// and a manifest, byte-for-byte deterministic; `run` runs a model end to end; `inspect` prints per
// layer instructions, cycles, bytes and utilization with and without virtual threads, the CPU/VTA
// copies, and the whole network's time at the configuration's clock plus the CPU's.
import { Effect } from "effect"
import * as path from "node:path"
import type { Interrupt } from "../ast/graph/errors.js"
import type { Graph } from "../ast/graph/graph.js"
import { printGraph } from "../ast/graph/graph.js"
import type { Tensor } from "../ast/graph/tensor.js"
import type { VtaDerived } from "../ast/vta/config.js"
import { disassemble } from "../ast/vta/disasm.js"
import { encodeProgram } from "../ast/vta/isa.js"
import { BACKENDS } from "../backend/index.js"
import { ensureFolderSync, readModel, readNpy, safeFileName, writeFilesAtomicSync, writeOutputs } from "../device/files.js"
import { hostCpu } from "../device/host.js"
import { runPartitioned, type VtaExecution } from "../device/vta/executor.js"
import { VTA_CYCLE_MODEL } from "../device/vta/cycle-model.js"
import type { VtaStats } from "../device/vta/simulator.js"
import { compileVtaLayer, type VtaLayerProgram } from "../lowering/vta/layers.js"
import type { Program } from "../lowering/program.js"
import type { Config } from "../lowering/templates/template.js"
import { compileGraph, emitArtifact, loadProgram } from "../pipeline.js"
import { withPassConfig } from "../rewrite/index.js"
import type { VtaLayer } from "../rewrite/vta-partition.js"
import { isTrial, recordsByWorkload, type TuningRecord } from "../search/records.js"
import { artifactFiles } from "./compile.js"
import { irFiles, passReport, reportLines, type PassReportRow } from "./dump-ir.js"
import { attempt, UsageError } from "./errors.js"
import { parseDims, planInputs, randomTensor, splitAssignment } from "./inputs.js"
import { parseOptLevel, prepare, targetSettings, type Prepared } from "./targets.js"
import { logWarnings, readLog } from "./tuning-log.js"
import { planVta, planVtaTraced, simulateLayer, type VtaPlan, type VtaPlanOptions, type VtaStep } from "./vta-plan.js"
export { lowerVtaLayers, partitionText, planVta, planVtaTraced, simulateLayer, vtaFront, type VtaPlan, type VtaPlanOptions, type VtaStep } from "./vta-plan.js"

export interface VtaCpuOptions {
  /** Graph passes of the c segments (0 to 3, as `run --target c`). */
  readonly optLevel?: number
  /** Record each c segment's passes (--report, --dump-ir). */
  readonly trace?: boolean
  readonly interrupt?: Interrupt
}

const segmentShapes = (g: Graph) => new Map(g.inputs.map((i) => [i.name, i.type.shape as readonly number[]] as const))

/** The c segments compiled (segment index → program). */
export const compileCpuSegments = Effect.fn("cli.vta.compileCpu")(function* (plan: VtaPlan, o: VtaCpuOptions = {}) {
  const target = targetSettings("c").target
  const out = new Map<number, Program>()
  for (const [k, s] of plan.partition.segments.entries())
    if (s.device === "c") out.set(k, yield* compileGraph(s.graph, target, { optLevel: o.optLevel ?? 3, shapes: segmentShapes(s.graph) }).pipe(withPassConfig(o.interrupt ? { interrupt: o.interrupt } : {})))
  return out
})

/** A runnable model: the plan, its c segments compiled and loaded (as `run --target c` prepares a model), and the executor. */
export const loadVta = Effect.fn("cli.vta.load")(function* (plan: VtaPlan, o: VtaCpuOptions = {}) {
  const settings = targetSettings("c")
  const prepared = new Map<number, Prepared>()
  for (const [k, s] of plan.partition.segments.entries())
    if (s.device === "c")
      prepared.set(k, yield* prepare(s.graph, { settings, optLevel: o.optLevel ?? 3, shapes: segmentShapes(s.graph), trace: o.trace ?? false, ...(o.interrupt ? { interrupt: o.interrupt } : {}) }))
  const outputs = plan.graph.outputs.map((o) => o.name)
  return {
    prepared: prepared as ReadonlyMap<number, Prepared>,
    run: (feeds: ReadonlyMap<string, Tensor>): VtaExecution =>
      runPartitioned(plan.d, plan.partition.segments, outputs, plan.programs, (k, _g, f) => prepared.get(k)!.run(f), feeds, VTA_CYCLE_MODEL, o.interrupt),
  }
})

/** The records of a `tessera tune --target vta` log: per workload its trials' configs, fastest first (failed trials and other targets' records left out). */
export const readVtaTuned = Effect.fn("cli.vta.readTuned")(function* (file: string) {
  const log = yield* readLog(file)
  const byWorkload = recordsByWorkload(log.records, "vta")
  const cost = (r: TuningRecord) => (r.error !== undefined || r.costs.length === 0 ? Infinity : Math.min(...r.costs))
  const tuned = new Map<string, Config[]>()
  for (const [w, rs] of byWorkload) {
    const ok = rs.filter((r) => isTrial(r) && cost(r) < Infinity).sort((a, b) => cost(a) - cost(b))
    if (ok.length) tuned.set(w, ok.map((r) => r.config))
  }
  const otherTargets = [...new Set(log.records.filter((r) => r.target !== "vta").map((r) => r.target))]
  return { tuned: tuned as ReadonlyMap<string, readonly Config[]>, records: log.records.length, warnings: logWarnings(log), otherTargets }
})

/** The tuning report for stderr: the log, then which conv layers run a tuned schedule. */
export const vtaTuningLines = (file: string, t: { readonly records: number; readonly otherTargets: readonly string[]; readonly warnings: readonly string[] }, plan: VtaPlan): string[] => {
  const convs = plan.partition.offloaded.filter((l) => l.kind === "conv")
  const untuned = convs.filter((l) => !plan.tuned.has(l.name))
  return [
    ...t.warnings.map((w) => `tuning log ${file}: ${w}`),
    `tuning log ${file}: ${t.records} records; target vta`,
    ...(t.otherTargets.length ? [`  records for other targets are not used: ${t.otherTargets.join(", ")}`] : []),
    `  applied: ${plan.tuned.size} of ${convs.length} conv layers`,
    `  untuned (default schedule, no record): ${untuned.length ? untuned.map((l) => l.name).join(", ") : "none"}`,
  ]
}

export interface VtaCommandOptions {
  readonly model: string
  readonly shapes: ReadonlyMap<string, readonly number[]>
  /** A `tessera tune --target vta` log: its best records applied. */
  readonly tuned?: string
  readonly optLevel?: number
  readonly interrupt?: Interrupt
  /** Where the tuning report's lines go (stderr). */
  readonly log?: (line: string) => Effect.Effect<void>
}

/** The model read and planned, with the tuned records applied when a log is given. */
const readPlan = Effect.fn("cli.vta.plan")(function* (o: VtaCommandOptions, options: { readonly trace?: boolean } = {}) {
  if (o.optLevel !== undefined) yield* parseOptLevel(o.optLevel)
  const graph = yield* readModel(o.model)
  const tuning = o.tuned !== undefined ? yield* readVtaTuned(o.tuned) : undefined
  const planOptions: VtaPlanOptions = { ...(tuning ? { tuned: tuning.tuned } : {}), ...(o.interrupt ? { interrupt: o.interrupt } : {}) }
  const { plan, steps } = options.trace ? yield* attempt(() => planVtaTraced(graph, o.shapes, planOptions)) : { plan: yield* attempt(() => planVta(graph, o.shapes, planOptions)), steps: [] as VtaStep[] }
  if (tuning && o.log) for (const line of vtaTuningLines(o.tuned!, tuning, plan)) yield* o.log(line)
  return { graph, plan, steps }
})

const bytesOfInt32 = (a: Int32Array): Uint8Array => new Uint8Array(a.buffer, a.byteOffset, a.byteLength)
const layerFile = (k: number, l: VtaLayer) => `vta/${String(k).padStart(2, "0")}-${l.name.replace(/[^A-Za-z0-9_.-]/g, "_")}`

/** The artifact's files: per VTA layer its stream, disassembly, micro-ops and DRAM image (packed weights, biases); per c segment its c artifact; the manifest. */
export const vtaArtifactFiles = Effect.fn("cli.vta.artifact")(function* (model: string, plan: VtaPlan, cpuOptions: VtaCpuOptions = {}) {
  const files = new Map<string, Uint8Array>()
  const text = (s: string) => new TextEncoder().encode(s)
  const layers = plan.partition.offloaded.map((l, k) => {
    const p = plan.programs.get(l.name)!
    const base = layerFile(k, l)
    const uop = p.layout.regions.get("uop")!
    files.set(`${base}.insn.bin`, encodeProgram(plan.d, p.insns))
    files.set(`${base}.asm`, text(`${disassemble(p.insns)}\n`))
    files.set(`${base}.uop.bin`, p.dram.slice(uop.byteOffset, uop.byteOffset + uop.elems * plan.d.uopElemBytes))
    if (p.packedWeights) files.set(`${base}.wgt.bin`, new Uint8Array(p.packedWeights.buffer, p.packedWeights.byteOffset, p.packedWeights.byteLength))
    if (l.kind === "conv" && l.bias) files.set(`${base}.bias.bin`, bytesOfInt32(Int32Array.from(l.bias)))
    files.set(`${base}.dram.bin`, p.dram)
    return {
      name: l.name, kind: l.kind, nodes: l.nodes, schedule: p.schedule, vthreads: p.vthreads, insns: p.insns.length,
      inputs: p.inputs, output: p.output,
      regions: [...p.layout.regions.values()].map((r) => ({ name: r.name, kind: r.kind, byteOffset: r.byteOffset, elems: r.elems })),
      files: [`${base}.insn.bin`, `${base}.asm`, `${base}.uop.bin`, ...(p.packedWeights ? [`${base}.wgt.bin`] : []), ...(l.kind === "conv" && l.bias ? [`${base}.bias.bin`] : []), `${base}.dram.bin`],
      ...(l.kind === "conv" ? { conv: { c: l.c, h: l.h, w: l.w, m: l.m, k: [l.kh, l.kw], stride: l.stride, pad: l.pad, shift: l.shift, clipLo: l.clipLo } } : { add: { c: l.c, h: l.h, w: l.w, clipLo: l.clipLo } }),
    }
  })
  const settings = targetSettings("c")
  const cpu = yield* compileCpuSegments(plan, cpuOptions)
  const segments: object[] = []
  for (const [k, s] of plan.partition.segments.entries()) {
    if (s.device === "vta") {
      segments.push({ device: "vta", layers: s.layers.map((l) => l.name) })
      continue
    }
    const program = cpu.get(k)!
    const art = yield* emitArtifact(program, settings.target)
    const dir = `c/segment-${String(k).padStart(2, "0")}`
    for (const [name, bytes] of artifactFiles(`${path.basename(model)}#${k}`, settings, cpuOptions.optLevel ?? 3, program, art)) files.set(`${dir}/${name}`, bytes)
    segments.push({ device: "c", folder: dir, nodes: s.graph.nodes.map((n) => n.name), inputs: s.graph.inputs.map((i) => i.name), outputs: s.graph.outputs.map((o) => o.name) })
  }
  const manifest = {
    format: "tessera-vta-artifact/1",
    model: path.basename(model),
    config: plan.d.config,
    activationScale: plan.requantize.activationScale ?? null,
    requantized: plan.requantize.converted,
    offloaded: layers,
    kept: plan.partition.kept,
    segments,
    inputs: plan.graph.inputs.map((i) => ({ name: i.name, dtype: i.type.dtype, shape: i.type.shape })),
    outputs: plan.graph.outputs.map((o) => ({ name: o.name, dtype: o.type.dtype, shape: o.type.shape })),
  }
  files.set("manifest.json", text(`${JSON.stringify(manifest, null, 2)}\n`))
  return files
})

export const compileVtaCommand = Effect.fn("cli.vta.compile")(function* (o: VtaCommandOptions & { readonly out: string }) {
  const { plan } = yield* readPlan(o)
  const files = yield* vtaArtifactFiles(o.model, plan, { ...(o.optLevel !== undefined ? { optLevel: o.optLevel } : {}), ...(o.interrupt ? { interrupt: o.interrupt } : {}) })
  yield* attempt(() => {
    ensureFolderSync(o.out)
    for (const name of files.keys()) ensureFolderSync(path.dirname(path.join(o.out, name)))
    writeFilesAtomicSync([...files].map(([name, bytes]) => ({ path: path.join(o.out, name), bytes })))
  })
  return {
    model: o.model,
    target: "vta",
    out: o.out,
    files: files.size,
    bytes: [...files.values()].reduce((s, b) => s + b.length, 0),
    offloaded: plan.partition.offloaded.map((l) => l.name),
    ...(o.tuned !== undefined ? { tuned: [...plan.tuned.keys()] } : {}),
    cpuSegments: plan.partition.segments.filter((s) => s.device === "c").length,
  }
})

/** The whole network's time: VTA cycles at the clock plus the CPU's measured milliseconds, and each side's share. */
export const amdahl = (d: VtaDerived, e: Pick<VtaExecution, "layers" | "cpuMs">) => {
  const cycles = e.layers.reduce((s, l) => s + l.stats.totalCycles, 0)
  const vtaMs = (cycles / (d.config.clockMhz * 1e6)) * 1e3
  const cpuMs = e.cpuMs.reduce((s, x) => s + x, 0)
  const total = vtaMs + cpuMs
  return { vtaCycles: cycles, clockMhz: d.config.clockMhz, vtaMs, cpuMs, vtaShare: total === 0 ? 0 : vtaMs / total, cpuShare: total === 0 ? 0 : cpuMs / total }
}

export interface VtaRunOptions extends VtaCommandOptions {
  readonly given: ReadonlyMap<string, Tensor>
  readonly seed: number
  readonly out?: string
  /** Folder for the IR: the graph after each step of the graph side, each VTA layer's stream, each c segment's passes and kernels. */
  readonly dumpIr?: string
  /** Print the passes run (the graph side's and each c segment's), their time and node counts, and add them to the summary. */
  readonly report?: boolean
}

export const runVtaCommand = Effect.fn("cli.vta.run")(function* (o: VtaRunOptions) {
  const optLevel = yield* parseOptLevel(o.optLevel ?? 3)
  const graph = yield* readModel(o.model)
  const inputsPlan = yield* attempt(() => planInputs(graph, o.given, o.shapes))
  const feeds = new Map<string, Tensor>(inputsPlan.map((p, k) => [p.name, p.given ?? randomTensor(p.dtype, p.shape, o.seed, k)]))
  const trace = o.report === true || o.dumpIr !== undefined
  const t0 = performance.now()
  const { plan, steps } = yield* readPlan({ ...o, shapes: new Map(inputsPlan.map((p) => [p.name, p.shape] as const)) }, { trace })
  const model = yield* loadVta(plan, { optLevel, trace, ...(o.interrupt ? { interrupt: o.interrupt } : {}) })
  const compileMs = performance.now() - t0
  const e = yield* attempt(() => model.run(feeds))
  const named = plan.graph.outputs.map((out) => ({ name: out.name, tensor: e.outputs.get(out.name)! }))
  const irFiles = o.dumpIr !== undefined ? yield* dumpVtaIr(o.dumpIr, graph, steps, plan, model.prepared) : undefined
  const rows = o.report ? vtaPassReport(steps, plan, model.prepared) : undefined
  if (rows && o.log) for (const line of reportLines(rows)) yield* o.log(line)
  const written = o.out !== undefined ? yield* writeOutputs(o.out, named) : undefined
  const a = amdahl(plan.d, e)
  return {
    model: o.model,
    target: "vta",
    optLevel,
    outputs: named.map((n, k) => ({ name: n.name, dtype: n.tensor.dtype, shape: n.tensor.shape, ...(written ? { file: written[k] } : {}) })),
    offloaded: e.layers.map((l) => ({ name: l.name, kind: l.kind, cycles: l.stats.totalCycles, utilization: round(l.stats.utilization, 4), ...(plan.tuned.has(l.name) ? { tuned: true } : {}) })),
    copies: e.copies,
    vta: { cycles: a.vtaCycles, clockMhz: a.clockMhz, ms: round(a.vtaMs, 3), share: round(a.vtaShare, 4) },
    cpu: { segments: e.cpuMs.length, ms: round(a.cpuMs, 3), share: round(a.cpuShare, 4) },
    compileMs: round(compileMs, 3),
    ...(rows ? { passes: rows } : {}),
    ...(irFiles !== undefined ? { irFiles } : {}),
  }
})

/** --report's rows: the graph side's steps, then each c segment's passes (nested under it). */
export const vtaPassReport = (steps: readonly VtaStep[], plan: VtaPlan, prepared: ReadonlyMap<number, Prepared>): PassReportRow[] => {
  const rows: PassReportRow[] = steps.map((s) => ({ pass: s.pass, depth: 0, ms: round(s.ms, 3), nodesBefore: s.nodesBefore, nodesAfter: s.nodesAfter }))
  for (const [k, p] of prepared) {
    const seg = plan.partition.segments[k]
    const n = seg.device === "c" ? seg.graph.nodes.length : 0
    const inner = passReport(p)
    rows.push({ pass: `c segment ${k}`, depth: 0, ms: round(inner.filter((r) => r.depth === 0).reduce((t, r) => t + r.ms, 0), 3), nodesBefore: n, nodesAfter: p.program?.graph.nodes.length ?? p.graph.nodes.length })
    rows.push(...inner.map((r) => ({ ...r, depth: r.depth + 1 })))
  }
  return rows
}

/** --dump-ir: `NN-step.txt` for the input and each step of the graph side (the last: every VTA layer's stream), then `c-segment-KK/` with each c segment's dump as `run --target c` writes it. */
export const dumpVtaIr = (dir: string, input: Graph, steps: readonly VtaStep[], plan: VtaPlan, prepared: ReadonlyMap<number, Prepared>) =>
  attempt(() => {
    const top = [{ name: "input", text: printGraph(input) }, ...steps.map((s) => ({ name: s.pass, text: s.text }))]
    const width = Math.max(2, String(top.length - 1).length)
    const files = top.map((f, k) => ({ path: path.join(dir, `${String(k).padStart(width, "0")}-${safeFileName(f.name)}.txt`), text: f.text }))
    for (const [k, p] of prepared) {
      const seg = plan.partition.segments[k]
      if (seg.device !== "c") continue
      const sub = path.join(dir, `c-segment-${String(k).padStart(2, "0")}`)
      for (const f of irFiles(seg.graph, p)) files.push({ path: path.join(sub, f.name), text: f.text })
    }
    for (const f of files) ensureFolderSync(path.dirname(f.path))
    writeFilesAtomicSync(files.map((f) => ({ path: f.path, bytes: new TextEncoder().encode(f.text.endsWith("\n") ? f.text : `${f.text}\n`) })))
    return files.length
  })

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits


export interface VtaLayerReport {
  readonly name: string
  readonly kind: "conv" | "add"
  readonly shape: string
  readonly serial: { readonly insns: number; readonly stats: VtaStats; readonly schedule: string }
  /** Two virtual threads, when a schedule for them fits. */
  readonly latencyHiding?: { readonly insns: number; readonly stats: VtaStats; readonly schedule: string }
  readonly best: { readonly insns: number; readonly stats: VtaStats; readonly schedule: string }
}

/** Per offloaded layer: one virtual thread and the program as run (two where they fit). */
export const layerReports = (plan: VtaPlan): VtaLayerReport[] =>
  plan.partition.offloaded.map((l) => {
    const best = plan.programs.get(l.name)!
    const seen = plan.candidates.get(l.name) ?? []
    const tuned = plan.tuned.get(l.name)
    const statsOf = (p: VtaLayerProgram) => (tuned?.program === p ? tuned.stats : undefined) ?? seen.find((c) => c.program === p)?.stats ?? simulateLayer(plan.d, p)
    const serial = seen.find((c) => c.program.vthreads === 1)?.program ?? compileVtaLayer(plan.d, l, 1)
    const two = seen.find((c) => c.program.vthreads === 2)
    const report = (p: VtaLayerProgram) => ({ insns: p.insns.length, stats: statsOf(p), schedule: p.schedule })
    return {
      name: l.name,
      kind: l.kind,
      shape: l.kind === "conv" ? `${l.c}x${l.h}x${l.w} k${l.kh} s${l.stride} -> ${l.m}x${l.oh}x${l.ow}` : `${l.c}x${l.h}x${l.w}`,
      serial: report(serial),
      ...(two ? { latencyHiding: report(two.program) } : {}),
      best: report(best),
    }
  })

const pct = (x: number) => `${(100 * x).toFixed(1)}%`
const kib = (b: number) => (b / 1024).toFixed(0)

/** `inspect --target vta`: the partition, each layer's instructions, cycles, bytes, utilization (1 and 2 virtual threads), the copies, the Amdahl split. */
export const inspectVta = Effect.fn("cli.vta.inspect")(function* (o: VtaCommandOptions & { readonly seed: number }) {
  const graph = yield* readModel(o.model)
  const inputsPlan = yield* attempt(() => planInputs(graph, new Map(), o.shapes))
  const { plan } = yield* readPlan({ ...o, shapes: new Map(inputsPlan.map((p) => [p.name, p.shape] as const)) })
  const reports = yield* attempt(() => layerReports(plan))
  const model = yield* loadVta(plan, { ...(o.optLevel !== undefined ? { optLevel: o.optLevel } : {}), ...(o.interrupt ? { interrupt: o.interrupt } : {}) })
  const feeds = new Map<string, Tensor>(inputsPlan.map((p, k) => [p.name, randomTensor(p.dtype, p.shape, o.seed, k)]))
  const e = yield* attempt(() => model.run(feeds))
  const a = amdahl(plan.d, e)
  const cfg = plan.d.config
  const lines = [
    `VTA: BLOCK ${plan.d.blockIn}, buffers inp ${kib(plan.d.inpDepth * plan.d.inpElemBytes)} / wgt ${kib(plan.d.wgtDepth * plan.d.wgtElemBytes)} / acc ${kib(plan.d.accDepth * plan.d.accElemBytes)} KiB, ${8 * plan.d.busBytes}-bit bus, ${cfg.clockMhz} MHz`,
    `requantized for VTA: ${plan.requantize.converted.length} nodes, activation scale ${plan.requantize.activationScale ?? "-"}`,
    `segments: ${plan.partition.segments.map((s) => (s.device === "c" ? `c(${s.graph.nodes.length} nodes)` : `vta(${s.layers.length} layers)`)).join(" → ")}`,
    ...plan.partition.kept.map((k) => `kept on c: ${k.node} (${k.op}): ${k.reason}`),
    "",
    `${"#".padStart(3)}  ${"layer".padEnd(44)} ${"kind".padEnd(5)} ${"shape".padEnd(32)} ${"insns 1vt".padStart(9)} ${"cycles 1vt".padStart(11)} ${"util 1vt".padStart(8)} ${"insns 2vt".padStart(9)} ${"cycles 2vt".padStart(11)} ${"util 2vt".padStart(8)} ${"run".padStart(4)}  inp/wgt/out/acc/uop KiB (as run)`,
    ...reports.map((r, k) => {
      const b = r.best.stats.bytes
      const vt = plan.programs.get(r.name)!.vthreads
      const two = r.latencyHiding
      return `${String(k).padStart(3)}  ${r.name.slice(0, 44).padEnd(44)} ${r.kind.padEnd(5)} ${r.shape.padEnd(32)} ${String(r.serial.insns).padStart(9)} ${String(r.serial.stats.totalCycles).padStart(11)} ${pct(r.serial.stats.utilization).padStart(8)} ${String(two?.insns ?? "-").padStart(9)} ${String(two?.stats.totalCycles ?? "-").padStart(11)} ${(two ? pct(two.stats.utilization) : "-").padStart(8)} ${`${vt}vt`.padStart(4)}  ${[b.inp, b.wgt, b.out, b.acc, b.uop].map(kib).join("/")}`
    }),
    ...(o.tuned !== undefined ? ["", ...tunedTable(plan)] : []),
    "",
    "copies between the CPU and VTA:",
    ...e.copies.map((c) => `  ${c.direction}  ${c.value}  ${c.bytes} bytes`),
    "",
    `whole network: VTA ${a.vtaCycles} cycles = ${a.vtaMs.toFixed(2)} ms at ${a.clockMhz} MHz (${pct(a.vtaShare)}), CPU (c, this machine) ${a.cpuMs.toFixed(2)} ms in ${e.cpuMs.length} segments (${pct(a.cpuShare)})`,
  ]
  return lines.join("\n")
})

/** `inspect --tuned`: per conv layer the default program's cycles and utilization beside the tuned one's, its schedule, and the totals. */
export const tunedTable = (plan: VtaPlan): string[] => {
  const convs = plan.partition.offloaded.filter((l) => l.kind === "conv")
  const statsOf = (name: string) => plan.candidates.get(name)!.find((c) => c.program === plan.defaults.get(name))!.stats
  let def = 0
  let tuned = 0
  const rows = convs.map((l) => {
    const d = statsOf(l.name)
    const t = plan.tuned.get(l.name)
    def += d.totalCycles
    tuned += t ? t.stats.totalCycles : d.totalCycles
    return `${l.name.slice(0, 44).padEnd(44)} ${String(d.totalCycles).padStart(14)} ${pct(d.utilization).padStart(12)} ${String(t ? t.stats.totalCycles : "-").padStart(12)} ${(t ? pct(t.stats.utilization) : "-").padStart(10)} ${(t ? `${(d.totalCycles / t.stats.totalCycles).toFixed(2)}x` : "-").padStart(8)}  ${t ? t.program.schedule : "(no record: default)"}`
  })
  return [
    `tuned vs default (${plan.tuned.size} of ${convs.length} conv layers tuned):`,
    `${"layer".padEnd(44)} ${"cycles default".padStart(14)} ${"util default".padStart(12)} ${"cycles tuned".padStart(12)} ${"util tuned".padStart(10)} ${"speedup".padStart(8)}  tuned schedule`,
    ...rows,
    `${"all conv layers".padEnd(44)} ${String(def).padStart(14)} ${"".padStart(12)} ${String(tuned).padStart(12)} ${"".padStart(10)} ${(tuned ? `${(def / tuned).toFixed(2)}x` : "-").padStart(8)}`,
  ]
}

/** The c target's output for the same integer graph (the reference `run --target vta` equals). */
export const runOnC = Effect.fn("cli.vta.runOnC")(function* (plan: VtaPlan, feeds: ReadonlyMap<string, Tensor>) {
  const target = BACKENDS.c.target(hostCpu(), 1)
  const program = yield* compileGraph(plan.graph, target, {})
  const exec = yield* loadProgram(program, target)
  return yield* attempt(() => exec.run(feeds))
})


/** `--input NAME=FILE.npy` and `--shape NAME=DIMS` flags as maps (a name given twice is a UsageError). */
export const parseVtaFlags = Effect.fn("cli.vta.flags")(function* (inputs: readonly string[], shapes: readonly string[]) {
  const given = new Map<string, Tensor>()
  for (const spec of inputs) {
    const { name, value } = yield* attempt(() => splitAssignment(spec, "--input"))
    if (given.has(name)) return yield* new UsageError({ flag: "--input", reason: `input '${name}' is given twice` })
    given.set(name, yield* readNpy(value))
  }
  const dims = new Map<string, number[]>()
  for (const spec of shapes) {
    const { name, value } = yield* attempt(() => splitAssignment(spec, "--shape"))
    if (dims.has(name)) return yield* new UsageError({ flag: "--shape", reason: `input '${name}' is given twice` })
    dims.set(name, yield* attempt(() => parseDims(value, "--shape")))
  }
  return { given, shapes: dims as ReadonlyMap<string, readonly number[]> }
})
