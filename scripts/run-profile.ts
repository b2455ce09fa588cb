// node dist/scripts/run-profile.js --model resnet50 [--threads 1] [--target c|wasm] [--file MODEL.onnx] [--cpu]:
// where an end-to-end run's time goes on the c (default) or wasm target. Each compiled kernel timed inside the real sequence (the executor's own calls,
// wrapped), then alone on the same buffers (warm: its weights in cache), then alone after a
// cache flush (cold: weights and activations from DRAM); the executor's own time is the end-to-end
// median less the kernels' sum. `--file` profiles an ONNX file instead of the zoo's float network
// (an int8 model of `tessera quantize`: its float input seeded alike). `--cpu` times the end-to-end
// runs and the kernels in sequence (each kernel's median and min) by the process's CPU time (1 thread: the kernel's own time; on a
// machine shared with other jobs, wall time counts theirs too). `--tuned LOG` compiles with a
// tuning log's best records, as `tessera bench --tuned` does. `--configs` adds each kernel's task:
// the anchor and its output shape, the template and the config it compiled with (the template's
// defaults, or the tuned record's). `swept` times each kernel alone in the state the tuner measures
// its candidates in (each call after a write of cacheSweepBytes(), twice the L2: `tessera tune`'s
// flushBytes), and `swept/seq` says how far that state is from the network's: where it is far from 1,
// the tuner ranks that kernel's configs in a state the network never gives it. Page faults are
// counted in a pass of their own (a getrusage beside each call made the next kernel's timed call
// slower: 3-4 µs on MobileNetV2's 7×7 depthwise convs, Zen 5). Speed is reported, never asserted.
import { Effect } from "effect"
import * as fs from "node:fs"
import { spawnSync } from "node:child_process"
import { allocate } from "../src/ast/graph/dtype.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { prng } from "../src/ast/graph/arbitrary.js"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { BACKENDS } from "../src/backend/index.js"
import type { DeviceBuffer } from "../src/device/device.js"
import { cacheSweepBytes, hostCpu } from "../src/device/host.js"
import { median } from "../src/device/onnxruntime.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { nodeFlops } from "../src/rewrite/report.js"
import { isZooName, zooGraph } from "../src/zoo/index.js"
import { readLog } from "../src/cli/tuning-log.js"
import { recordsByWorkload } from "../src/search/records.js"
import { tasksOfProgram } from "../src/search/extract.js"
import { configKey } from "../src/search/task.js"
import { helpRequested } from "./usage.js"

const args = process.argv.slice(2)
helpRequested(
  args,
  `node dist/scripts/run-profile.js [--model NAME | --file MODEL.onnx] [--threads N] [--target c|wasm] [--cpu] [--fifo] [--tuned LOG] [--configs]
  where an end-to-end run's time goes, kernel by kernel (in sequence, alone warm, alone cold, swept),
  and the executor's share; the zoo's resnet50 by default (the header of scripts/run-profile.ts says more)`,
)
const opt = (k: string, d: string) => (args.includes(k) ? args[args.indexOf(k) + 1] : d)
const name = opt("--model", "resnet50")
const threads = Number(opt("--threads", "1"))
const kind = opt("--target", "c")
if (kind !== "c" && kind !== "wasm") throw new Error(`--target ${kind}: the profile runs c or wasm`)
const RUNS = Number(process.env.BENCH_RUNS ?? 10)
const file = args.includes("--file") ? opt("--file", "") : undefined
const cpuClock = args.includes("--cpu")
const now = (): number => {
  if (!cpuClock) return performance.now()
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}
if (!file && !isZooName(name)) throw new Error(`unknown zoo model '${name}'`)
process.env.OMP_NUM_THREADS = String(threads)

const graph = file ? decodeModelSync(new Uint8Array(fs.readFileSync(file))) : zooGraph(name, 0)
const input = graph.inputs[0]
const r = prng(1)
const shape = input.type.shape as number[]
const data = allocate("float32", shape.reduce((a, b) => a * b, 1))
for (let i = 0; i < data.length; i++) data[i] = r.float(-1, 1)
const feeds = new Map<string, Tensor>([[input.name, { dtype: "float32", shape, data }]])
const target = BACKENDS[kind].target(hostCpu(), threads)
const tunedLog = args.includes("--tuned") ? opt("--tuned", "") : undefined
const tuned = tunedLog ? recordsByWorkload((await Effect.runPromise(readLog(tunedLog))).records, target.kind) : undefined
const program = await Effect.runPromise(compileGraph(graph, target, { optLevel: 3, ...(tuned ? { tuned } : {}) }))
if (program.tuning && tunedLog) console.log(`tuned: applied to groups ${program.tuning.applied.map((g) => `#${g}`).join(" ") || "none"}; skipped ${program.tuning.skipped.length}`)
const exec = await Effect.runPromise(loadProgram(program, target, { threads }))
const mod = exec.module
// `--fifo`: the end-to-end runs and the kernels in sequence at SCHED_FIFO (every thread of the process, as threads-ab
// --fifo), so the other jobs of a shared machine do not take a core from a 2-thread run; back to SCHED_OTHER after them
const fifo = args.includes("--fifo")
const chrt = (policy: string[]) => spawnSync("chrt", ["-a", ...policy, "-p", ...(policy[0] === "-f" ? ["10"] : ["0"]), String(process.pid)], { encoding: "utf8" })
if (fifo && chrt(["-f"]).status !== 0) throw new Error("--fifo: chrt could not raise this process to SCHED_FIFO (it needs the privilege)")
const e2e: number[] = []
exec.run(feeds)
for (let i = 0; i < RUNS; i++) {
  const t0 = now()
  exec.run(feeds)
  e2e.push(now() - t0)
}
// each kernel inside the sequence
const inner = mod.run
const seq = new Map<string, number[]>()
const faults = new Map<string, number[]>()
const seen = new Map<string, readonly DeviceBuffer[]>()
const push = (m: Map<string, number[]>, k: string, x: number) => {
  const xs = m.get(k)
  if (xs) xs.push(x)
  else m.set(k, [x])
}
// the timed pass wraps each call in the clock alone; page faults are counted in a pass of their own
;(mod as { run: typeof inner }).run = (k, a) => {
  const t0 = now()
  inner(k, a)
  push(seq, k, now() - t0)
  seen.set(k, a)
}
for (let i = 0; i < RUNS; i++) exec.run(feeds)
if (fifo) chrt(["-o"])
;(mod as { run: typeof inner }).run = (k, a) => {
  const f0 = process.resourceUsage().minorPageFault
  inner(k, a)
  push(faults, k, process.resourceUsage().minorPageFault - f0)
}
for (let i = 0; i < Math.min(RUNS, 3); i++) exec.run(feeds)
;(mod as { run: typeof inner }).run = inner
const flush = new Float32Array(64 << 20 >> 2)
// the tuner's state: each call after every line of twice the L2 was written (tessera tune's flushBytes)
const sweep = new Float32Array(cacheSweepBytes() >> 2)
/** A kernel's median wall time alone over `calls` calls, each after every cache line of `junk` was written. */
const alone = (kernel: string, a: readonly DeviceBuffer[], junk: Float32Array, calls: number): number => {
  const ts: number[] = []
  for (let i = 0; i < calls; i++) {
    for (let j = 0; j < junk.length; j += 16) junk[j] += 1
    const t0 = performance.now()
    inner(kernel, a)
    ts.push(performance.now() - t0)
  }
  return median(ts)
}
const byName = new Map(program.graph.nodes.map((n) => [n.name, n]))
let sumSeq = 0, sumWarm = 0, sumCold = 0, sumSwept = 0, bytesW = 0
const lines: string[] = []
// each kernel's task and config (--configs): the tuned record's where one applied, else the defaults
const configs = new Map<number, string>()
if (args.includes("--configs"))
  for (const r of tasksOfProgram(program, target)) {
    const applied = program.tuning?.applied.some((g) => r.task.groups.includes(g))
    const cfg = applied ? "tuned" : configKey(r.task.template.defaults(r.task.knobs, r.target))
    for (const g of r.task.groups) configs.set(g, `${r.task.label}\t${r.task.template.name}\t${cfg}`)
  }
for (const k of program.kernels) {
  if (k.kind !== "compiled") continue
  const a = seen.get(k.name)!
  const warm = mod.time(k.name, a, { repeats: 5, minMs: 0 }) * 1000
  const cold = alone(k.name, a, flush, 5)
  const swept = alone(k.name, a, sweep, 7)
  const s = median(seq.get(k.name)!)
  const grp = program.fused.groups[k.group]
  const fl = grp.nodes.reduce((x, n) => x + nodeFlops(program.graph, byName.get(n)!), 0)
  const wbytes = k.args.filter((v) => program.graph.initializers.has(v)).reduce((x, v) => x + program.graph.initializers.get(v)!.data.byteLength, 0)
  bytesW += wbytes
  sumSeq += s; sumWarm += warm; sumCold += cold; sumSwept += swept
  lines.push(`${k.name}\t${grp.ops.join("+")}\tseq ${s.toFixed(3)}\tmin ${Math.min(...seq.get(k.name)!).toFixed(3)}\twarm ${warm.toFixed(3)}\tcold ${cold.toFixed(3)}\tswept ${swept.toFixed(3)}\tswept/seq ${(swept / s).toFixed(2)}\t+${(s - warm).toFixed(3)}\t${(fl / s / 1e6).toFixed(1)} GF/s\tw ${(wbytes / 1e6).toFixed(2)} MB\tpage faults ${median(faults.get(k.name)!)}${configs.has(k.group) ? `\t${configs.get(k.group)}` : ""}`)
}
console.log(lines.join("\n"))
console.log(`${file ?? name}, ${kind}, ${threads} thread(s): end-to-end median ${median(e2e).toFixed(2)} ms (the executor as it runs: the plan, one native call a run, where it has one); kernels in sequence (one call each) ${sumSeq.toFixed(2)} ms, alone warm ${sumWarm.toFixed(2)} ms, alone cold ${sumCold.toFixed(2)} ms, alone swept (the tuner's state) ${sumSwept.toFixed(2)} ms; constants ${(bytesW / 1e6).toFixed(1)} MB; executor outside kernels ${(median(e2e) - sumSeq).toFixed(2)} ms; kernels ${program.kernels.length}`)
