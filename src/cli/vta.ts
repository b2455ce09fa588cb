// `--target vta`: a quantized model offloaded to the VTA accelerator (simulated) with the CPU (the
// c target) running the rest. The composition, in one place:
//   decode → rewrite.QdqToInteger (a QDQ model's integer graph) → rewrite.VtaRequantize (TVM's
//   global-scale, shift-requantized int8 graph) → bind → rewrite.VtaPartition (vta / c segments)
//   → each VTA layer's program (two virtual threads where a schedule fits, else one), each c
//   segment compiled for c → one executor (src/device/vta/executor.ts).
// `compile` writes the instruction streams, micro-ops, packed weights, each c segment's artifact
// and a manifest, byte-for-byte deterministic; `run` runs a model end to end; `inspect` prints per
// layer instructions, cycles, bytes and utilization with and without virtual threads, the CPU/VTA
// copies, and the whole network's time at the configuration's clock plus the CPU's.
import { Effect } from "effect"
import * as path from "node:path"
import type { Graph } from "../ast/graph/graph.js"
import { bindSync } from "../ast/graph/infer.js"
import type { Tensor } from "../ast/graph/tensor.js"
import { defaultVtaConfig, deriveVta, type VtaDerived } from "../ast/vta/config.js"
import { disassemble } from "../ast/vta/disasm.js"
import { encodeProgram } from "../ast/vta/isa.js"
import { BACKENDS } from "../backend/index.js"
import { ensureFolderSync, readModel, readNpy, writeFilesAtomicSync, writeOutputs } from "../device/files.js"
import { hostCpu } from "../device/host.js"
import { runPartitioned, type VtaExecution } from "../device/vta/executor.js"
import { runVtaSync, type VtaStats } from "../device/vta/simulator.js"
import { compileVtaLayer, compileVtaLayerBest, vtaFits, type VtaLayerProgram } from "../lowering/vta/layers.js"
import type { Program } from "../lowering/program.js"
import { compileGraph, emitArtifact, loadProgram } from "../pipeline.js"
import { qdqToIntegerSync } from "../rewrite/qdq-to-integer.js"
import { partitionForVta, type VtaLayer, type VtaPartition } from "../rewrite/vta-partition.js"
import { vtaRequantizeWithReport, type VtaRequantizeReport } from "../rewrite/vta-requantize.js"
import { artifactFiles } from "./compile.js"
import { attempt, UsageError } from "./errors.js"
import { parseDims, planInputs, randomTensor, splitAssignment } from "./inputs.js"
import { targetSettings } from "./targets.js"

export interface VtaPlan {
  readonly d: VtaDerived
  /** The shift-requantized integer graph, bound: what both targets run. */
  readonly graph: Graph
  readonly requantize: VtaRequantizeReport
  readonly partition: VtaPartition
  /** Each offloaded layer's program as run (1 to 4 virtual threads, the fewest cycles). */
  readonly programs: ReadonlyMap<string, VtaLayerProgram>
  /** Each layer's programs with 1 to 4 virtual threads (those that fit) and their simulated statistics. */
  readonly candidates: ReadonlyMap<string, readonly { readonly program: VtaLayerProgram; readonly stats: VtaStats }[]>
}

/** The graph side (pure): integer graph, requantized, bound, partitioned, VTA layers lowered. */
export const planVta = (graph: Graph, shapes: ReadonlyMap<string, readonly number[]>, options: { readonly force?: ReadonlySet<string>; readonly d?: VtaDerived } = {}): VtaPlan => {
  const d = options.d ?? deriveVta(defaultVtaConfig)
  const { graph: requantized, report } = vtaRequantizeWithReport(qdqToIntegerSync(graph))
  const bound = bindSync(requantized, shapes, { requireStatic: true })
  const partition = partitionForVta(bound, { fits: vtaFits(d), ...(options.force ? { force: options.force } : {}) })
  const candidates = new Map<string, { program: VtaLayerProgram; stats: VtaStats }[]>()
  const programs = new Map(
    partition.offloaded.map((l) => {
      const seen: { program: VtaLayerProgram; stats: VtaStats }[] = []
      candidates.set(l.name, seen)
      const cycles = (p: VtaLayerProgram) => {
        const stats = simulateLayer(d, p)
        seen.push({ program: p, stats })
        return stats.totalCycles
      }
      const best = compileVtaLayerBest(d, l, cycles)
      if (seen.length === 0) seen.push({ program: best, stats: simulateLayer(d, best) })
      return [l.name, best] as const
    }),
  )
  return { d, graph: bound, requantize: report, partition, programs, candidates }
}

/** The c segments compiled (segment index → program). */
export const compileCpuSegments = Effect.fn("cli.vta.compileCpu")(function* (plan: VtaPlan) {
  const target = targetSettings("c").target
  const out = new Map<number, Program>()
  for (const [k, s] of plan.partition.segments.entries()) if (s.device === "c") out.set(k, yield* compileGraph(s.graph, target, {}))
  return out
})

/** A runnable model: the plan, its c programs loaded, and the executor. */
export const loadVta = Effect.fn("cli.vta.load")(function* (plan: VtaPlan) {
  const target = targetSettings("c").target
  const programs = yield* compileCpuSegments(plan)
  const execs = new Map<number, { run: (f: ReadonlyMap<string, Tensor>) => Map<string, Tensor> }>()
  for (const [k, p] of programs) execs.set(k, yield* loadProgram(p, target))
  const outputs = plan.graph.outputs.map((o) => o.name)
  return {
    cpuPrograms: programs,
    run: (feeds: ReadonlyMap<string, Tensor>): VtaExecution =>
      runPartitioned(plan.d, plan.partition.segments, outputs, plan.programs, (k, _g, f) => execs.get(k)!.run(f), feeds),
  }
})

const readPlan = Effect.fn("cli.vta.plan")(function* (model: string, shapeSpecs: ReadonlyMap<string, readonly number[]>) {
  const graph = yield* readModel(model)
  const plan = yield* attempt(() => planVta(graph, shapeSpecs))
  return { graph, plan }
})

const bytesOfInt32 = (a: Int32Array): Uint8Array => new Uint8Array(a.buffer, a.byteOffset, a.byteLength)
const layerFile = (k: number, l: VtaLayer) => `vta/${String(k).padStart(2, "0")}-${l.name.replace(/[^A-Za-z0-9_.-]/g, "_")}`

/** The artifact's files: per VTA layer its stream, disassembly, micro-ops and DRAM image (packed weights, biases); per c segment its c artifact; the manifest. */
export const vtaArtifactFiles = Effect.fn("cli.vta.artifact")(function* (model: string, plan: VtaPlan) {
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
  const cpu = yield* compileCpuSegments(plan)
  const segments: object[] = []
  for (const [k, s] of plan.partition.segments.entries()) {
    if (s.device === "vta") {
      segments.push({ device: "vta", layers: s.layers.map((l) => l.name) })
      continue
    }
    const program = cpu.get(k)!
    const art = yield* emitArtifact(program, settings.target)
    const dir = `c/segment-${String(k).padStart(2, "0")}`
    for (const [name, bytes] of artifactFiles(`${path.basename(model)}#${k}`, settings, 3, program, art)) files.set(`${dir}/${name}`, bytes)
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

export const compileVtaCommand = Effect.fn("cli.vta.compile")(function* (o: { readonly model: string; readonly out: string; readonly shapes: ReadonlyMap<string, readonly number[]> }) {
  const { plan } = yield* readPlan(o.model, o.shapes)
  const files = yield* vtaArtifactFiles(o.model, plan)
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

export const runVtaCommand = Effect.fn("cli.vta.run")(function* (o: { readonly model: string; readonly given: ReadonlyMap<string, Tensor>; readonly shapes: ReadonlyMap<string, readonly number[]>; readonly seed: number; readonly out?: string }) {
  const graph = yield* readModel(o.model)
  const inputsPlan = yield* attempt(() => planInputs(graph, o.given, o.shapes))
  const feeds = new Map<string, Tensor>(inputsPlan.map((p, k) => [p.name, p.given ?? randomTensor(p.dtype, p.shape, o.seed, k)]))
  const plan = yield* attempt(() => planVta(graph, new Map(inputsPlan.map((p) => [p.name, p.shape] as const))))
  const model = yield* loadVta(plan)
  const e = yield* attempt(() => model.run(feeds))
  const named = plan.graph.outputs.map((out) => ({ name: out.name, tensor: e.outputs.get(out.name)! }))
  const written = o.out !== undefined ? yield* writeOutputs(o.out, named) : undefined
  const a = amdahl(plan.d, e)
  return {
    model: o.model,
    target: "vta",
    outputs: named.map((n, k) => ({ name: n.name, dtype: n.tensor.dtype, shape: n.tensor.shape, ...(written ? { file: written[k] } : {}) })),
    offloaded: e.layers.map((l) => ({ name: l.name, kind: l.kind, cycles: l.stats.totalCycles, utilization: round(l.stats.utilization, 4) })),
    copies: e.copies,
    vta: { cycles: a.vtaCycles, clockMhz: a.clockMhz, ms: round(a.vtaMs, 3), share: round(a.vtaShare, 4) },
    cpu: { segments: e.cpuMs.length, ms: round(a.cpuMs, 3), share: round(a.cpuShare, 4) },
  }
})

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits

/** A program's cycles and statistics: the simulator's timing-only run (its timing does not depend on the data; a law checks it equals the full run's). */
export const simulateLayer = (d: VtaDerived, p: VtaLayerProgram): VtaStats => runVtaSync(d, p.insns, p.dram.slice(), undefined, { functional: false }).stats

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
    const statsOf = (p: VtaLayerProgram) => seen.find((c) => c.program === p)?.stats ?? simulateLayer(plan.d, p)
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
export const inspectVta = Effect.fn("cli.vta.inspect")(function* (o: { readonly model: string; readonly shapes: ReadonlyMap<string, readonly number[]>; readonly seed: number }) {
  const graph = yield* readModel(o.model)
  const inputsPlan = yield* attempt(() => planInputs(graph, new Map(), o.shapes))
  const plan = yield* attempt(() => planVta(graph, new Map(inputsPlan.map((p) => [p.name, p.shape] as const))))
  const reports = yield* attempt(() => layerReports(plan))
  const model = yield* loadVta(plan)
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
    "",
    "copies between the CPU and VTA:",
    ...e.copies.map((c) => `  ${c.direction}  ${c.value}  ${c.bytes} bytes`),
    "",
    `whole network: VTA ${a.vtaCycles} cycles = ${a.vtaMs.toFixed(2)} ms at ${a.clockMhz} MHz (${pct(a.vtaShare)}), CPU (c, this machine) ${a.cpuMs.toFixed(2)} ms in ${e.cpuMs.length} segments (${pct(a.cpuShare)})`,
  ]
  return lines.join("\n")
})

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
