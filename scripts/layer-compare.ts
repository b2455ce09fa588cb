// Where a network's time goes, beside onnxruntime-node's, layer by layer, in one process on the
// `c` target: our compiled kernels each timed inside the executor's runs, onnxruntime's nodes from
// its own profiler; the two networks' runs alternate (this machine's slow spells fall on both).
// Our kernels and onnxruntime's nodes are paired in execution order, the layout conversions left
// out of both (each side fuses Conv with its BatchNorm, activation and residual Add alike).
//
//   npm run layer-compare -- [--model mobilenetv2] [--threads 1] [--rounds 21] [--tuned LOG]
//
// Prints one line per kernel (ours ms, our CPU ms, onnxruntime ms, ratio, each side's GFLOP/s, the
// node it was paired with), then the sums, the end-to-end medians and the roof: the direct (not depthwise, not
// Winograd) convolutions' FLOPs at this CPU's measured FMA peak, with every other kernel and the
// time outside the kernels as measured — how fast the network could run with those convolutions
// perfect. The thread count is fixed for the run (OpenMP reads it once).
//
// Ours are wall medians (as onnxruntime's profiler gives its nodes'), with each kernel's CPU-time
// median beside them (the process's: at 1 thread the kernel's own). On a machine shared with other
// jobs the scheduler's time slice can expire at about the same point of every run, so one kernel's
// wall median carries the other jobs' milliseconds: ResNet-50 at load ~11 read k27 5.16 ms wall
// (1.33 CPU) in one run and k14 5.91 (1.66 CPU) in the next. A kernel whose wall median exceeds its
// CPU median by a quarter is marked `*`: read its CPU time.
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const arg = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : d
}
const THREADS = Number(arg("threads", "1"))
process.env.OMP_NUM_THREADS = String(THREADS)
const MODEL = arg("model", "mobilenetv2")
const ROUNDS = Number(arg("rounds", "21"))
const TUNED = arg("tuned", "")

const { createExecutor } = await import("../src/device/executor.js")
const { hostCpu } = await import("../src/device/host.js")
const { BACKENDS } = await import("../src/backend/index.js")
const { loadOrt, median, settle } = await import("../src/device/onnxruntime.js")
const { readLog } = await import("../src/cli/tuning-log.js")
const { randomTensor } = await import("../src/cli/inputs.js")
const { compileGraph, loadProgram } = await import("../src/pipeline.js")
const { bestRecords } = await import("../src/search/records.js")
const { peakGflops } = await import("../src/device/peak.js")
const { nodeFlops } = await import("../src/rewrite/report.js")
const { isZooName, zooGraph, zooModel } = await import("../src/zoo/index.js")

if (!isZooName(MODEL)) throw new Error(`--model: ${MODEL} is not a zoo network`)
const run = <A, E>(eff: Effect.Effect<A, E>) => Effect.runPromise(eff as Effect.Effect<A, never>)

const graph = zooGraph(MODEL, 0)
const tuned = TUNED ? bestRecords((await run(readLog(TUNED))).records, "c") : undefined
const target = BACKENDS.c.target(hostCpu(), THREADS)
const program = await run(compileGraph(graph, target, { optLevel: 3, ...(tuned ? { tuned } : {}) }))
const loaded = await run(loadProgram(program, target, { threads: THREADS }))
// each kernel call timed where the executor makes it (per kernel: the plan would run them in one call)
const times = new Map<string, number[]>()
const cpuTimes = new Map<string, number[]>()
const exec = createExecutor(program, {
  ...loaded.module,
  run: (name, args) => {
    const t0 = performance.now()
    const c0 = process.cpuUsage()
    loaded.module.run(name, args)
    const wall = performance.now() - t0
    const cpu = process.cpuUsage(c0)
    times.set(name, [...(times.get(name) ?? []), wall])
    cpuTimes.set(name, [...(cpuTimes.get(name) ?? []), (cpu.user + cpu.system) / 1000])
  },
}, { plan: false })
const input = graph.inputs[0]
const x = randomTensor(input.type.dtype, input.type.shape as number[], 0, 0)
const feeds = new Map([[input.name, x]])

const ort = await run(loadOrt())
if (typeof ort === "string") throw new Error(`onnxruntime-node: ${ort}`)
const profDir = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-layer-compare-"))
const session = await ort.InferenceSession.create(zooModel(MODEL, 0), {
  graphOptimizationLevel: "all",
  intraOpNumThreads: THREADS,
  interOpNumThreads: 1,
  enableProfiling: true,
  profileFilePrefix: path.join(profDir, "ort"),
})
const ortFeeds = { [session.inputNames[0]]: new ort.Tensor("float32", x.data as Float32Array, x.shape as number[]) }
const WARMUP = 3
for (let i = 0; i < WARMUP; i++) {
  exec.run(feeds)
  await session.run(ortFeeds)
}
times.clear()
cpuTimes.clear()
const ours: number[] = []
const theirs: number[] = []
// each side's run after a pause and an untimed run (settle: the other side's threads stop spinning)
for (let i = 0; i < ROUNDS; i++) {
  await settle()
  exec.run(feeds)
  let t0 = performance.now()
  exec.run(feeds)
  ours.push(performance.now() - t0)
  await settle()
  await session.run(ortFeeds)
  t0 = performance.now()
  await session.run(ortFeeds)
  theirs.push(performance.now() - t0)
}
session.endProfiling()
await session.release()
const profile = fs.readdirSync(profDir).find((f) => f.endsWith(".json"))
const events = JSON.parse(fs.readFileSync(path.join(profDir, profile!), "utf8")) as { cat?: string; name: string; dur: number; args?: { op_name?: string } }[]
fs.rmSync(profDir, { recursive: true, force: true })

// onnxruntime's nodes in execution order (first appearance), their kernel times past the warm-up
const LAYOUT = /^(ReorderInput|ReorderOutput|Flatten|Reshape)$/
const ortNodes = new Map<string, { op: string; ms: number[] }>()
for (const e of events) {
  if (e.cat !== "Node" || !e.name.endsWith("_kernel_time")) continue
  const name = e.name.replace(/_kernel_time$/, "")
  const node = ortNodes.get(name) ?? { op: e.args?.op_name ?? "?", ms: [] }
  node.ms.push(e.dur / 1000)
  ortNodes.set(name, node)
}
const theirLayers = [...ortNodes].filter(([, n]) => !LAYOUT.test(n.op)).map(([name, n]) => ({ name, op: n.op, ms: median(n.ms.slice(WARMUP)) }))
const nodeByName = new Map(program.graph.nodes.map((nd) => [nd.name, nd]))
/** A group's FLOPs (direct-convolution counts, as `tessera inspect` gives). */
const groupFlops = (g: (typeof program.fused.groups)[number]) => g.nodes.reduce((s, name) => s + nodeFlops(program.graph, nodeByName.get(name)!), 0)
/** A blocked convolution that is neither depthwise nor Winograd: its FLOPs are all FMAs. */
const directConv = (g: (typeof program.fused.groups)[number]) => {
  const anchor = nodeByName.get(g.anchor)
  if (anchor?.op !== "ConvNCHWc") return false
  const w = program.graph.valueTypes.get(anchor.inputs[1])?.shape as number[] | undefined
  return !!w && w[1] * w[4] > 1
}
const ourLayers = program.kernels
  .filter((k) => k.kind === "compiled" && !program.fused.groups[k.group].ops.every((op) => op === "LayoutTransform" || op === "Flatten"))
  .map((k) => {
    const g = program.fused.groups[k.group]
    return { name: k.name, ops: g.ops.join("+"), ms: median(times.get(k.name) ?? [0]), cpu: median(cpuTimes.get(k.name) ?? [0]), flops: groupFlops(g), direct: directConv(g) }
  })

console.log(`${MODEL}, ${THREADS} thread(s), ${ROUNDS} alternating rounds${TUNED ? `, tuned by ${TUNED}` : ""}`)
console.log("| kernel | ops | ours ms | ours CPU ms | onnxruntime ms | ours / ort | ours GFLOP/s | ort GFLOP/s | onnxruntime node |")
console.log("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
const n = Math.max(ourLayers.length, theirLayers.length)
for (let i = 0; i < n; i++) {
  const a = ourLayers[i]
  const b = theirLayers[i]
  const gf = (ms: number | undefined) => (a && ms ? (a.flops / ms / 1e6).toFixed(1) : "-")
  const descheduled = a && a.ms > 1.25 * a.cpu ? "*" : ""
  console.log(`| ${a?.name ?? "-"} | ${a?.ops ?? "-"} | ${a ? `${a.ms.toFixed(3)}${descheduled}` : "-"} | ${a ? a.cpu.toFixed(3) : "-"} | ${b ? b.ms.toFixed(3) : "-"} | ${a && b ? (a.ms / b.ms).toFixed(2) : "-"} | ${gf(a?.ms)} | ${gf(b?.ms)} | ${b ? `${b.name} (${b.op})` : "-"} |`)
}
const marked = ourLayers.filter((l) => l.ms > 1.25 * l.cpu)
if (marked.length) console.log(`* wall median over 1.25× the CPU-time median (the machine's other jobs ran in it in most rounds): ${marked.map((l) => l.name).join(", ")}; ${THREADS > 1 ? "CPU time is every thread's" : "read their CPU time"}`)
if (ourLayers.length !== theirLayers.length) console.log(`(the pairing is by position: ${ourLayers.length} kernels against ${theirLayers.length} nodes, so the rows past the first difference do not match)`)
const sum = (xs: readonly { ms: number }[]) => xs.reduce((s, l) => s + l.ms, 0)
console.log(`sum of kernels: ours ${sum(ourLayers).toFixed(2)} ms (CPU ${ourLayers.reduce((t, l) => t + l.cpu, 0).toFixed(2)}), onnxruntime ${sum(theirLayers).toFixed(2)} ms`)
console.log(`end to end (medians): ours ${median(ours).toFixed(2)} ms, onnxruntime ${median(theirs).toFixed(2)} ms (profiling on), ratio ${(median(ours) / median(theirs)).toFixed(3)}`)
const peak = peakGflops(Math.max(1, target.attrs.vectorLanes))
if (peak) {
  const direct = ourLayers.filter((l) => l.direct)
  const directFlops = direct.reduce((s, l) => s + l.flops, 0)
  const atPeak = directFlops / (peak * THREADS) / 1e6
  const others = sum(ourLayers.filter((l) => !l.direct))
  const outside = median(ours) - sum(ourLayers)
  const best = atPeak + others + Math.max(0, outside)
  const pct = (ms: number) => `${((100 * directFlops) / (ms * 1e6) / (peak * THREADS)).toFixed(0)}%`
  // onnxruntime's nodes paired with them (when the pairing holds)
  const paired = ourLayers.length === theirLayers.length ? ourLayers.reduce((s, l, i) => s + (l.direct ? theirLayers[i].ms : 0), 0) : undefined
  console.log(`roof: peak ${peak.toFixed(0)} GFLOP/s a core (measured); the ${direct.length} direct convolutions' ${(directFlops / 1e6).toFixed(1)} MFLOP took ours ${sum(direct).toFixed(2)} ms (${pct(sum(direct))} of ${THREADS} core(s)' peak)${paired ? `, onnxruntime ${paired.toFixed(2)} ms (${pct(paired)})` : ""}; at the peak ${atPeak.toFixed(2)} ms`)
  console.log(`roof: with them at the peak and the other kernels (${others.toFixed(2)} ms) and the time outside kernels (${outside.toFixed(2)} ms) as measured: ${best.toFixed(2)} ms end to end, ${(best / median(theirs)).toFixed(3)} of onnxruntime's`)
}
