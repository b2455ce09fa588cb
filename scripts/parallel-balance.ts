// node dist/scripts/parallel-balance.js [--models a,b] [--threads 2] [--cpu] [--kernels]:
// how each zoo network's kernels split over the c target's threads, counted, not timed
// (src/ast/tir/parallel-balance.ts): for every kernel of the network compiled for `--threads`
// cores, its parallel regions (entered a call), each region's extent and work an iteration, its
// imbalance (the busiest thread's share of its work × threads: 1 is an even split), and the work
// left serial. `--cpu` weights each kernel by its CPU time on one thread (the same program run at
// one thread, `BENCH_RUNS` runs in sequence, each kernel's median): the network's expected time on
// `--threads` threads over its time on one, and the kernels' share of the loss. The same program
// compiled for one core is timed too (what the bench's 1-thread column runs). Speed is reported,
// never asserted; the counts depend on nothing but the compiled program.
import { Effect } from "effect"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { parallelBalance, spanRatio, type ParallelBalance } from "../src/ast/tir/parallel-balance.js"
import { BACKENDS } from "../src/backend/index.js"
import { hostCpu } from "../src/device/host.js"
import { median } from "../src/device/onnxruntime.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import type { Program } from "../src/lowering/program.js"
import { isZooName, ZOO_NAMES, zooGraph, type ZooName } from "../src/zoo/index.js"
import { seededFirstInput } from "./seeded-inputs.js"

const args = process.argv.slice(2)
const opt = (k: string, d: string) => (args.includes(k) ? args[args.indexOf(k) + 1] : d)
const threads = Number(opt("--threads", "2"))
const cpu = args.includes("--cpu")
const perKernel = args.includes("--kernels")
const RUNS = Number(process.env.BENCH_RUNS ?? 10)
const models = opt("--models", ZOO_NAMES.join(",")).split(",").map((m) => {
  if (!isZooName(m)) throw new Error(`--models: unknown zoo model '${m}'; known: ${ZOO_NAMES.join(", ")}`)
  return m
})

const cpuMs = (): number => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

/** Each compiled kernel's CPU time (ms, median over the runs) in the network's sequence on one thread. */
const kernelTimes = async (program: Program, feeds: ReadonlyMap<string, Tensor>, cores: number): Promise<Map<string, number>> => {
  process.env.OMP_NUM_THREADS = "1"
  const target = BACKENDS.c.target(hostCpu(), cores)
  const exec = await Effect.runPromise(loadProgram(program, target, { threads: 1 }))
  const mod = exec.module
  const inner = mod.run
  const seq = new Map<string, number[]>()
  exec.run(feeds)
  ;(mod as { run: typeof inner }).run = (k, a) => {
    const t0 = cpuMs()
    inner(k, a)
    seq.set(k, [...(seq.get(k) ?? []), cpuMs() - t0])
  }
  for (let i = 0; i < RUNS; i++) exec.run(feeds)
  ;(mod as { run: typeof inner }).run = inner
  mod.close()
  return new Map([...seq].map(([k, xs]) => [k, median(xs)] as const))
}

const compileFor = (name: ZooName, cores: number) => Effect.runPromise(compileGraph(zooGraph(name, 0), BACKENDS.c.target(hostCpu(), cores), { optLevel: 3 }))

const fmt = (x: number, d = 2) => x.toFixed(d)
const summary: string[] = []
for (const name of models) {
  const program = await compileFor(name, threads)
  const feeds = seededFirstInput(program.graph)
  const kernels = program.kernels.flatMap((k) => (k.kind === "compiled" ? [k] : []))
  const balance = new Map<string, ParallelBalance>(kernels.map((k) => [k.name, parallelBalance(k.func, threads)] as const))
  const times = cpu ? await kernelTimes(program, feeds, threads) : undefined
  const times1 = cpu && threads > 1 ? await kernelTimes(await compileFor(name, 1), feeds, 1) : undefined
  // per kernel: its one-thread time (or its counted work), its time on `threads` threads by the count
  let t1 = 0, tn = 0, regions = 0, serialT = 0
  const rows: { name: string; loss: number; line: string }[] = []
  for (const k of kernels) {
    const b = balance.get(k.name)!
    const w = times?.get(k.name) ?? b.serial + b.parallel
    const ratio = spanRatio(b)
    t1 += w
    tn += w * ratio
    regions += b.regions
    serialT += b.serial + b.parallel === 0 ? 0 : (w * b.serial) / (b.serial + b.parallel)
    const ops = program.fused.groups[k.group].ops.join("+")
    const loops = b.loops.map((l) => `${l.extent}×${l.entries > 1 ? `${l.entries}` : ""} ${fmt((l.span * threads) / Math.max(l.work, 1e-9))}`).join(" ")
    const serialShare = b.serial / Math.max(b.serial + b.parallel, 1e-9)
    rows.push({
      name: k.name,
      loss: w * (ratio - 1 / threads),
      line: `${k.name}\t${ops}\t${times ? `${fmt(w, 3)} ms` : `${w.toExponential(2)} ops`}${times1?.has(k.name) ? ` (1 core: ${fmt(times1.get(k.name)!, 3)})` : ""}\tregions ${b.regions}\tserial ${fmt(serialShare * 100, 1)}%\tx${threads} ${fmt(ratio * threads)}\t[${loops}]`,
    })
  }
  if (perKernel) {
    console.log(`\n${name}, compiled for ${threads} cores: kernel, ops, 1-thread ${times ? "CPU time" : "work"}, regions a call, serial work, its time on ${threads} threads × ${threads} over its time on 1 (1 = an even split), [each region's extent×entries and imbalance]`)
    for (const row of rows) console.log(row.line)
    console.log("largest losses (time on threads less the ideal):")
    for (const row of [...rows].sort((a, b) => b.loss - a.loss).slice(0, 8)) console.log(`  ${row.name}\t${times ? `${fmt(row.loss, 3)} ms` : row.loss.toExponential(2)}`)
  }
  const t1c = times1 ? [...times1.values()].reduce((a, b) => a + b, 0) : undefined
  summary.push(
    `${name}\tkernels ${kernels.length}\tregions ${regions}\t1 thread ${times ? `${fmt(t1)} ms` : `${t1.toExponential(2)} ops`}${t1c !== undefined ? ` (compiled for 1 core: ${fmt(t1c)} ms)` : ""}\tserial ${fmt((100 * serialT) / t1, 1)}%\texpected ${threads}-thread time × ${threads} / 1-thread ${fmt((tn * threads) / t1, 3)}\texpected speedup ${fmt(t1 / tn)}${t1c !== undefined ? ` (over the 1-core program ${fmt(t1c / tn)})` : ""}`,
  )
}
console.log(`\nper network, compiled for ${threads} cores (counted split${cpu ? ", weighted by each kernel's 1-thread CPU time" : ", weighted by counted work"}):`)
for (const s of summary) console.log(s)
