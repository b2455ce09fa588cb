// npm run compile-time — how long Tessera takes to compile the zoo's ResNet-18 and MobileNetV2 (or
// other zoo names, or .onnx files) for the c target (opt level 3, 16 vector lanes, 1 core): medians
// of a few runs per stage (decode for a file or a zoo network's build, bind, graph passes, fusion, memory plan, lowering split
// into TE / schedule / lower / TIR passes, C emission), the slowest groups' lowering, and hashes of
// the emitted C — the artifact's files, and the single unit the tuner builds — so a speed-up can be
// checked to leave the output byte-identical. Goals: ResNet-18 < 2 s (issue 5); ResNet-50 ≤ 2 s.
// Then constants.bin as `tessera compile` makes it (piece by piece, written to nothing), timed on its own: the weights still deferred
// (src/ast/graph/deferred.ts: a BatchNorm fold, a pack, a Winograd transform) are computed there,
// straight into it, so decode → emitted source no longer holds their cost.
// With --gcc, the artifact's units are then built as the c device builds them, into a fresh cache
// (cold: every object compiled, in parallel; small units in batches), then again after one
// kernel's unit changed (one object compiled, one link): wall seconds, and the compilers' CPU
// seconds (user + sys).
// Usage: node dist/scripts/compile-time.js [model | file.onnx ...] [--runs N] [--gcc]
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import type { Graph } from "../src/ast/graph/graph.js"
import { buildCUnits, C_BATCH, defaultCBuildConfig, type CUnits } from "../src/device/c/build.js"
import { readModelSync } from "../src/device/files.js"
import { bindSync } from "../src/ast/graph/infer.js"
import { baseSchedule, buildGroupTE, isGroupFallbackError, type GroupTE } from "../src/lowering/lower-group.js"
import { lowerSync } from "../src/lowering/lower.js"
import { defaultSchedule } from "../src/lowering/templates/template-for.js"
import { runTirSync } from "../src/lowering/tir/tir-pass.js"
import { defaultPassConfig, PassConfig, type PassInstrument } from "../src/rewrite/pass.js"
import { emitC } from "../src/emit/c/emit.js"
import { makeTarget } from "../src/ast/target.js"
import { cpuGraphPasses, cpuTir } from "../src/backend/cpu.js"
import { aliasedKernels, artifactText, type Artifact } from "../src/lowering/program.js"
import { compileGraph, emitArtifact } from "../src/pipeline.js"
import { constantsBin } from "../src/cli/constants-bin.js"
import { fuseOpsSync, planMemory } from "../src/rewrite/index.js"
import type { PrimFunc } from "../src/ast/tir/tir.js"
import { zooGraph } from "../src/zoo/index.js"

const args = process.argv.slice(2)
const runsAt = args.indexOf("--runs")
const RUNS = runsAt >= 0 ? Number(args[runsAt + 1]) : 5
const GCC = args.includes("--gcc")
const named = args.filter((a, k) => !a.startsWith("--") && (runsAt < 0 || k !== runsAt + 1))
const MODELS = named.length ? named : ["resnet18", "mobilenetv2"]
const C_TARGET = makeTarget("c", { vectorLanes: 16, cores: 1 })
const OPTIONS = { optLevel: 3 } as const
const TARGET = { kind: "c", vectorLanes: 16, cores: 1 } as const

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const sha = (s: string) => createHash("sha256").update(s).digest("hex").slice(0, 16)

const time = <A>(f: () => A): [A, number] => {
  const t0 = performance.now()
  const a = f()
  return [a, performance.now() - t0]
}

/** A zoo network by name (built: its seeded weights drawn), or an ONNX file decoded; the time it took (the first stage). */
const load = (model: string): [Graph, number] => time(() => (model.endsWith(".onnx") ? readModelSync(model) : zooGraph(model, 0)))

/** The emitted code's files (every file of the artifact) as one hash. */
const filesHash = (files: ReadonlyMap<string, string | Uint8Array>) => {
  const h = createHash("sha256")
  for (const [name, text] of files) h.update(name).update("\0").update(text).update("\0")
  return h.digest("hex").slice(0, 16)
}

/** The artifact's units as the c device reads them (its manifest's prelude and units). */
const unitsOf = (a: Artifact): CUnits => {
  const m = a.manifest as { prelude: string; units: { file: string }[] }
  return { prelude: { file: m.prelude, source: artifactText(a, m.prelude)! }, units: m.units.map((u) => ({ file: u.file, source: artifactText(a, u.file)! })) }
}

/** CPU seconds (user + sys) of this process's waited-for children so far (Linux: /proc/self/stat's cutime + cstime). */
const childCpuSeconds = (): number => {
  const fields = readFileSync("/proc/self/stat", "utf8").replace(/^.*\) /, "").split(" ")
  // after "pid (comm) ": state is field 3, so cutime (16) and cstime (17) are at 13 and 14 here
  return (Number(fields[13]) + Number(fields[14])) / 100
}

const STAGES = ["decode (file) / build (zoo)", "bind", "graph passes", "fusion", "memory plan", "lower: TE", "lower: schedule", "lower: lowerSync", "lower: TIR passes", "emit C"] as const
type StageName = (typeof STAGES)[number]

// the c backend's own TIR pipeline for this target (its options come from the target record)
const TIR = cpuTir(C_TARGET)

/** Times each pass that runs (those named in `skip`, pipelines, excluded) into `ms`, summed by name. */
const passClock = (ms: Map<string, number>, skip: ReadonlySet<string>): PassInstrument => {
  const started: number[] = []
  return {
    before: () => void started.push(performance.now()),
    after: (pass) => {
      const t = performance.now() - started.pop()!
      if (!skip.has(pass)) ms.set(pass, (ms.get(pass) ?? 0) + t)
    },
  }
}

/** One compile by stages, as compileGraph + the c backend's emitter do it (same options, same order). */
const byStages = (model: string) => {
  const ms = new Map<StageName, number>(STAGES.map((s) => [s, 0]))
  const add = (s: StageName, t: number) => ms.set(s, ms.get(s)! + t)
  const [graph, tDecode] = load(model)
  add("decode (file) / build (zoo)", tDecode)
  const [bound, tBind] = time(() => bindSync(graph, new Map(), { requireStatic: true }))
  add("bind", tBind)
  const passes = cpuGraphPasses(C_TARGET)
  const graphMs = new Map<string, number>()
  const graphClock = passClock(graphMs, new Set(["rewrite.Target", "rewrite.Default"]))
  const [optimized, tPasses] = time(() => Effect.runSync(passes.run(bound).pipe(Effect.provideService(PassConfig, { ...defaultPassConfig, instruments: [graphClock] }))))
  add("graph passes", tPasses)
  const [fused, tFuse] = time(() => fuseOpsSync(optimized))
  add("fusion", tFuse)
  add("memory plan", time(() => planMemory(fused))[1])
  const schedule = defaultSchedule(TARGET)
  const funcs: PrimFunc[] = []
  const perGroup: { group: number; ops: string; ms: number }[] = []
  const tirMs = new Map<string, number>()
  for (const group of fused.groups) {
    const t0 = performance.now()
    try {
      const [te, tTe] = time((): GroupTE => buildGroupTE(fused, group))
      add("lower: TE", tTe)
      const [s, tSched] = time(() => schedule(te.outputs, baseSchedule(te.outputs), group))
      add("lower: schedule", tSched)
      const [raw, tLower] = time(() => lowerSync(s, `k${group.id}`))
      add("lower: lowerSync", tLower)
      // the pipeline as compilation runs it (verification included); each pass timed by an instrument
      const [func, tTir] = time(() => runTirSync(TIR, raw, { instruments: [passClock(tirMs, new Set([TIR.name]))] }))
      add("lower: TIR passes", tTir)
      funcs.push(func)
    } catch (e) {
      if (!isGroupFallbackError(e)) throw e
    }
    const ops = group.nodes.map((n) => fused.graph.nodes.find((m) => m.name === n)?.op ?? "?").join("+")
    perGroup.push({ group: group.id, ops, ms: performance.now() - t0 })
  }
  return { ms, funcs, perGroup, tirMs, graphMs }
}

for (const model of MODELS) {
  const stageRuns = new Map<StageName, number[]>(STAGES.map((s) => [s, []]))
  const totals: number[] = []
  // the same runs' CPU time (this process, user + sys) and first touches of memory (minor page faults)
  const cpuTotals: number[] = []
  const faultTotals: number[] = []
  const constantsMs: number[] = []
  const cpuWithConstants: number[] = []
  const faultsWithConstants: number[] = []
  const groupRuns = new Map<number, { ops: string; ms: number[] }>()
  // a pass that runs twice (Simplify) sums both runs
  const tirRuns = new Map<string, number[]>()
  const graphRuns = new Map<string, number[]>()
  let hash = ""
  let singleHash = ""
  let constantsHash = ""
  let kernels = 0
  let artifact: Artifact | undefined
  for (let r = 0; r < RUNS; r++) {
    // end to end, exactly the pipeline's entry points (a file's decode, a zoo network's build included)
    const t0 = performance.now()
    const cpu0 = process.cpuUsage()
    const faults0 = process.resourceUsage().minorPageFault
    const [graph] = load(model)
    const program = Effect.runSync(compileGraph(graph, C_TARGET, OPTIONS))
    artifact = Effect.runSync(emitArtifact(program, C_TARGET))
    totals.push(performance.now() - t0)
    const cpu = process.cpuUsage(cpu0)
    cpuTotals.push((cpu.user + cpu.system) / 1000)
    faultTotals.push(process.resourceUsage().minorPageFault - faults0)
    // the artifact's constants.bin, as `tessera compile` makes it (piece by piece through one
    // buffer, each piece handed to the file's write: here to nothing): the weights still deferred
    // (deferred.ts) are computed here, straight into it
    const t1 = performance.now()
    constantsBin(program.graph).bytes.write(() => {})
    constantsMs.push(performance.now() - t1)
    const cpuAll = process.cpuUsage(cpu0)
    cpuWithConstants.push((cpuAll.user + cpuAll.system) / 1000)
    faultsWithConstants.push(process.resourceUsage().minorPageFault - faults0)
    hash = filesHash(artifact.files)
    if (r === RUNS - 1) {
      const h = createHash("sha256")
      constantsBin(program.graph).bytes.write((piece) => h.update(piece))
      constantsHash = h.digest("hex").slice(0, 16)
    }
    kernels = program.kernels.filter((k) => k.kind === "compiled").length
    // by stages
    const { ms, funcs, perGroup, tirMs, graphMs } = byStages(model)
    const program2 = Effect.runSync(compileGraph(load(model)[0], C_TARGET, OPTIONS))
    const [emitted, tEmit] = time(() => emitC(funcs, { aliased: aliasedKernels(program2) }))
    ms.set("emit C", tEmit)
    singleHash = sha(emitted.source)
    const staged = new Map<string, string>([["tessera_kernels.h", emitted.header], [emitted.prelude.file, emitted.prelude.source], ...emitted.units.map((u) => [u.file, u.source] as const)])
    const shipped = new Map([...artifact.files].filter(([name]) => staged.has(name)).map(([name, bytes]) => [name, new TextDecoder().decode(bytes)] as const))
    if (filesHash(staged) !== filesHash(shipped)) throw new Error(`${model}: the stage-by-stage compile emitted different C than compileGraph + the c emitter`)
    for (const [s, t] of ms) stageRuns.get(s)!.push(t)
    for (const [p, t] of tirMs) tirRuns.set(p, [...(tirRuns.get(p) ?? []), t])
    for (const [p, t] of graphMs) graphRuns.set(p, [...(graphRuns.get(p) ?? []), t])
    for (const g of perGroup) {
      const e = groupRuns.get(g.group) ?? { ops: g.ops, ms: [] }
      e.ms.push(g.ms)
      groupRuns.set(g.group, e)
    }
  }
  const units = unitsOf(artifact!)
  console.log(`\n## ${model} — c, opt level 3, 16 lanes, 1 core; median of ${RUNS} runs (C compiler excluded)`)
  console.log(`emitted C: artifact files sha256 ${hash}; the single unit sha256 ${singleHash}; constants.bin sha256 ${constantsHash}; ${kernels} compiled kernels in ${units.units.length - 1} kernel units (+ the runtime)`)
  console.log("| stage | ms |")
  console.log("| --- | ---: |")
  for (const s of STAGES) console.log(`| ${s} | ${median(stageRuns.get(s)!).toFixed(1)} |`)
  const sum = STAGES.reduce((acc, s) => acc + median(stageRuns.get(s)!), 0)
  console.log(`| sum of stages | ${sum.toFixed(1)} |`)
  console.log(`| **compileGraph + emit C** | **${median(totals).toFixed(1)}** |`)
  console.log(`| compileGraph + emit C, first run (cold JIT) | ${totals[0].toFixed(1)} |`)
  console.log(`| compileGraph + emit C, CPU ms (user + sys), first run / median | ${cpuTotals[0].toFixed(1)} / ${median(cpuTotals).toFixed(1)} |`)
  console.log(`| minor page faults (memory touched first), first run / median | ${faultTotals[0]} / ${median(faultTotals)} |`)
  console.log(`| constants.bin after it (deferred weights computed into it), ms, first run / median | ${constantsMs[0].toFixed(1)} / ${median(constantsMs).toFixed(1)} |`)
  console.log(`| compileGraph + emit C + constants.bin, CPU ms, first run / median; minor page faults, median | ${cpuWithConstants[0].toFixed(1)} / ${median(cpuWithConstants).toFixed(1)}; ${median(faultsWithConstants)} |`)
  console.log(`graph passes over 10 ms: ${[...graphRuns].filter(([, ts]) => median(ts) > 10).map(([p, ts]) => `${p} ${median(ts).toFixed(1)}`).join(", ")} ms`)
  console.log(`TIR passes: ${[...tirRuns].map(([p, ts]) => `${p} ${median(ts).toFixed(1)}`).join(", ")} ms`)
  const slow = [...groupRuns].map(([group, e]) => ({ group, ops: e.ops, ms: median(e.ms) })).sort((a, b) => b.ms - a.ms).slice(0, 5)
  console.log(`slowest groups to lower: ${slow.map((g) => `k${g.group} ${g.ops} ${g.ms.toFixed(1)} ms`).join("; ")}`)
  if (model === "resnet18") console.log(`goal (ResNet-18 < 2000 ms): ${median(totals) < 2000 ? "met" : "not met"}`)
  if (GCC) await gccTimes(units)
}

/** The device's build of the units: cold (a fresh cache), then after one unit changed (its largest kernel's). */
async function gccTimes(units: CUnits): Promise<void> {
  const cacheDir = mkdtempSync(path.join(os.tmpdir(), "tessera-compile-time-"))
  const config = { ...defaultCBuildConfig(), cacheDir }
  const timed = async (u: CUnits) => {
    const cpu0 = childCpuSeconds()
    const t0 = performance.now()
    const built = await Effect.runPromise(Effect.orDie(buildCUnits(u, config)))
    const compiled = built.objects.filter((o) => o.compiled)
    return { s: (performance.now() - t0) / 1000, cpu: childCpuSeconds() - cpu0, units: compiled.length, objects: new Set(compiled.map((o) => o.object)).size }
  }
  try {
    const cold = await timed(units)
    console.log(`gcc, cold cache (${config.jobs ?? os.availableParallelism()} jobs): ${cold.s.toFixed(2)} s wall, ${cold.cpu.toFixed(2)} CPU s (user + sys), ${cold.objects} objects compiled (${cold.units} units; small units in batches of up to ${(config.batch ?? C_BATCH).size})`)
    // one kernel's unit changed (a comment appended: a new hash, the same code), as after tuning it
    const largest = units.units.reduce((a, u) => (u.source.length > a.source.length ? u : a))
    const touched = { ...units, units: units.units.map((u) => (u === largest ? { ...u, source: `${u.source}/* changed */\n` } : u)) }
    const warm = await timed(touched)
    console.log(`gcc, after ${largest.file} (the largest unit) changed: ${warm.s.toFixed(2)} s wall, ${warm.cpu.toFixed(2)} CPU s, ${warm.objects} object compiled (${warm.units} unit)`)
  } finally {
    rmSync(cacheDir, { recursive: true, force: true })
  }
}
