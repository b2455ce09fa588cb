// npm run compile-time — how long Tessera takes to compile the zoo's ResNet-18 and MobileNetV2 for
// the c target (opt level 3, 16 vector lanes, 1 core), the C compiler excluded: medians of a few
// runs per stage (bind, graph passes, fusion, memory plan, lowering split into TE / schedule /
// lower / TIR passes, C emission), the slowest groups' lowering, and a hash of the emitted C (so a
// speed-up can be checked to leave the output byte-identical). Goal (issue 5): ResNet-18 < 2 s.
// Usage: node dist/scripts/compile-time.js [model ...] [--runs N]
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { performance } from "node:perf_hooks"
import { bindSync } from "../src/ast/graph/infer.js"
import { baseSchedule, buildGroupTE, isGroupFallbackError, type GroupTE } from "../src/lowering/lower-group.js"
import { lowerSync } from "../src/lowering/lower.js"
import { defaultSchedule } from "../src/lowering/templates/template-for.js"
import { cpuTirPipeline } from "../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../src/lowering/tir/tir-pass.js"
import type { PassInstrument } from "../src/rewrite/pass.js"
import { emitC } from "../src/emit/c/emit.js"
import { makeTarget } from "../src/ast/target.js"
import { cpuGraphPasses } from "../src/backend/cpu.js"
import { artifactText, kernelsAlias } from "../src/lowering/program.js"
import { compileGraph, emitArtifact } from "../src/pipeline.js"
import { fuseOpsSync, planMemory } from "../src/rewrite/index.js"
import type { PrimFunc } from "../src/ast/tir/tir.js"
import { zooGraph } from "../src/zoo/index.js"

const args = process.argv.slice(2)
const runsAt = args.indexOf("--runs")
const RUNS = runsAt >= 0 ? Number(args[runsAt + 1]) : 5
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

const STAGES = ["bind", "graph passes", "fusion", "memory plan", "lower: TE", "lower: schedule", "lower: lowerSync", "lower: TIR passes", "emit C"] as const
type StageName = (typeof STAGES)[number]

const TIR = cpuTirPipeline()

/** Times each TIR pass that runs (the pipeline itself excluded) into `ms`, summed by name. */
const tirClock = (ms: Map<string, number>): PassInstrument => {
  const started: number[] = []
  return {
    before: () => void started.push(performance.now()),
    after: (pass) => {
      const t = performance.now() - started.pop()!
      if (pass !== TIR.name) ms.set(pass, (ms.get(pass) ?? 0) + t)
    },
  }
}

/** One compile by stages, as compileGraph + the c backend's emitter do it (same options, same order). */
const byStages = (model: string) => {
  const ms = new Map<StageName, number>(STAGES.map((s) => [s, 0]))
  const add = (s: StageName, t: number) => ms.set(s, ms.get(s)! + t)
  const graph = zooGraph(model, 0)
  const [bound, tBind] = time(() => bindSync(graph, new Map(), { requireStatic: true }))
  add("bind", tBind)
  const passes = cpuGraphPasses(C_TARGET)
  const [optimized, tPasses] = time(() => Effect.runSync(passes.run(bound)))
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
      const [func, tTir] = time(() => runTirSync(TIR, raw, { instruments: [tirClock(tirMs)] }))
      add("lower: TIR passes", tTir)
      funcs.push(func)
    } catch (e) {
      if (!isGroupFallbackError(e)) throw e
    }
    const ops = group.nodes.map((n) => fused.graph.nodes.find((m) => m.name === n)?.op ?? "?").join("+")
    perGroup.push({ group: group.id, ops, ms: performance.now() - t0 })
  }
  return { ms, funcs, perGroup, tirMs }
}

for (const model of MODELS) {
  const stageRuns = new Map<StageName, number[]>(STAGES.map((s) => [s, []]))
  const totals: number[] = []
  const groupRuns = new Map<number, { ops: string; ms: number[] }>()
  // a pass that runs twice (Simplify) sums both runs
  const tirRuns = new Map<string, number[]>()
  let hash = ""
  let kernels = 0
  for (let r = 0; r < RUNS; r++) {
    // end to end, exactly the pipeline's entry points
    const graph = zooGraph(model, 0)
    const t0 = performance.now()
    const program = Effect.runSync(compileGraph(graph, C_TARGET, OPTIONS))
    const source = artifactText(Effect.runSync(emitArtifact(program, C_TARGET)), "tessera_kernels.c")!
    totals.push(performance.now() - t0)
    hash = sha(source)
    kernels = program.kernels.filter((k) => k.kind === "compiled").length
    // by stages (the zoo graph is built outside the timed stages)
    const { ms, funcs, perGroup, tirMs } = byStages(model)
    const program2 = Effect.runSync(compileGraph(zooGraph(model, 0), C_TARGET, OPTIONS))
    const [emitted, tEmit] = time(() => emitC(funcs, { restrict: !kernelsAlias(program2) }))
    ms.set("emit C", tEmit)
    if (sha(emitted.source) !== hash) throw new Error(`${model}: the stage-by-stage compile emitted different C than compileGraph + the c emitter`)
    for (const [s, t] of ms) stageRuns.get(s)!.push(t)
    for (const [p, t] of tirMs) tirRuns.set(p, [...(tirRuns.get(p) ?? []), t])
    for (const g of perGroup) {
      const e = groupRuns.get(g.group) ?? { ops: g.ops, ms: [] }
      e.ms.push(g.ms)
      groupRuns.set(g.group, e)
    }
  }
  console.log(`\n## ${model} — c, opt level 3, 16 lanes, 1 core; median of ${RUNS} runs (C compiler excluded)`)
  console.log(`emitted C sha256 ${hash}, ${kernels} compiled kernels`)
  console.log("| stage | ms |")
  console.log("| --- | ---: |")
  for (const s of STAGES) console.log(`| ${s} | ${median(stageRuns.get(s)!).toFixed(1)} |`)
  const sum = STAGES.reduce((acc, s) => acc + median(stageRuns.get(s)!), 0)
  console.log(`| sum of stages | ${sum.toFixed(1)} |`)
  console.log(`| **compileGraph + emit C** | **${median(totals).toFixed(1)}** |`)
  console.log(`| compileGraph + emit C, first run (cold JIT) | ${totals[0].toFixed(1)} |`)
  console.log(`TIR passes: ${[...tirRuns].map(([p, ts]) => `${p} ${median(ts).toFixed(1)}`).join(", ")} ms`)
  const slow = [...groupRuns].map(([group, e]) => ({ group, ops: e.ops, ms: median(e.ms) })).sort((a, b) => b.ms - a.ms).slice(0, 5)
  console.log(`slowest groups to lower: ${slow.map((g) => `k${g.group} ${g.ops} ${g.ms.toFixed(1)} ms`).join("; ")}`)
  if (model === "resnet18") console.log(`goal (ResNet-18 < 2000 ms): ${median(totals) < 2000 ? "met" : "not met"}`)
}
