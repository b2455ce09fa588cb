// node dist/scripts/threads-ab.js [--model resnet50 | --file MODEL.onnx] [--threads 2] [--base DIR] [--rounds 10] [--fifo]:
// whole runs through the plan (one native call a run, as `npm run bench` times them), A/B in one
// process, in the bench's regime: blocks of 5 timed runs, each after a 50 ms pause and one untimed
// run (src/device/onnxruntime.ts, alternateRuns), the sides alternating block by block. A: the
// network compiled for one core and run on one thread (what the bench's 1-thread column runs), or
// with `--base DIR` the network as another worktree's dist/index.js compiles it for `--threads`
// cores; B: this build's, compiled for and run on `--threads`. Outputs compared. Prints each side's
// minimum, 10th percentile, median and 90th percentile (wall, ms) and B / A.
//
// `--fifo`: the timed blocks run at SCHED_FIFO priority (`chrt -a -f -p 10`, every thread of the
// process; back to SCHED_OTHER after), so the other jobs of a shared machine do not take the two
// cores from a 2-thread run — they still share the caches and the memory. On the shared 2-core
// Zen 5 of 2026-11-27 at load 9–17 ResNet-50's 2-thread runs read 20.5–22 ms with it (p10 to p90
// within ~5%; the quiet bench read 21.5), 70–150 ms without. It starves the machine's other
// processes for the run (the kernel's RT throttling leaves them 5%): keep it short, and never
// on a machine whose other jobs time wall clocks. Speed is reported, never asserted.
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { BACKENDS } from "../src/backend/index.js"
import { hostCpu } from "../src/device/host.js"
import { median, settle } from "../src/device/onnxruntime.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { isZooName, zooGraph } from "../src/zoo/index.js"
import { seededFirstInput } from "./seeded-inputs.js"
import { helpRequested } from "./usage.js"

const args = process.argv.slice(2)
helpRequested(
  args,
  `node dist/scripts/threads-ab.js [--model NAME | --file MODEL.onnx] [--threads N] [--base DIR] [--rounds R] [--fifo]
  whole runs through the plan in the bench's regime, A/B in one process: the 1-core program on 1 thread
  (or --base DIR's program on N threads) against this build's on N threads (the header of scripts/threads-ab.ts says more)`,
)
const opt = (k: string, d: string) => (args.includes(k) ? args[args.indexOf(k) + 1] : d)
const name = opt("--model", "resnet50")
const threads = Number(opt("--threads", "2"))
const rounds = Number(opt("--rounds", "10"))
const base = args.includes("--base") ? opt("--base", "") : undefined
const fifo = args.includes("--fifo")
const RUNS = 5
const file = args.includes("--file") ? opt("--file", "") : undefined
if (!file && !isZooName(name)) throw new Error(`unknown zoo model '${name}'`)

type Lib = { compileGraph: typeof compileGraph; loadProgram: typeof loadProgram; BACKENDS: typeof BACKENDS }
const own: Lib = { compileGraph, loadProgram, BACKENDS }
const other = base ? ((await import(pathToFileURL(path.resolve(base, "dist/index.js")).href)) as Lib) : own
const graph = file ? decodeModelSync(new Uint8Array(fs.readFileSync(file))) : zooGraph(name, 0)
const feeds = seededFirstInput(graph)

/** A side: `lib`'s program compiled for `cores` and loaded on `n` threads (each module its own pool). */
const side = async (label: string, lib: Lib, cores: number, n: number) => {
  process.env.OMP_NUM_THREADS = String(n)
  const program = await Effect.runPromise(lib.compileGraph(graph, lib.BACKENDS.c.target(hostCpu(), cores), { optLevel: 3 }))
  const exec = await Effect.runPromise(lib.loadProgram(program as never, lib.BACKENDS.c.target(hostCpu(), n), { threads: n }))
  return { label, exec, times: [] as number[] }
}
const sides = [base ? await side(`${base}, ${threads} threads`, other, threads, threads) : await side("1 core, 1 thread", own, 1, 1), await side(`this build, ${threads} threads`, own, threads, threads)]
const outs = sides.map((s) => s.exec.run(feeds))
let diff = 0
for (const [k, t] of outs[0]) {
  const u = outs[1].get(k)!
  for (let i = 0; i < t.data.length; i++) diff = Math.max(diff, Math.abs(Number(t.data[i]) - Number(u.data[i])))
}
const chrt = (policy: string[]) => spawnSync("chrt", ["-a", ...policy, "-p", ...(policy[0] === "-f" ? ["10"] : ["0"]), String(process.pid)], { encoding: "utf8" })
if (fifo && chrt(["-f"]).status !== 0) throw new Error("--fifo: chrt could not raise this process to SCHED_FIFO (it needs the privilege)")
try {
  for (let r = 0; r < rounds; r++)
    for (const s of r % 2 ? [...sides].reverse() : sides) {
      await settle()
      s.exec.run(feeds)
      for (let i = 0; i < RUNS; i++) {
        const t0 = performance.now()
        s.exec.run(feeds)
        s.times.push(performance.now() - t0)
      }
    }
} finally {
  if (fifo) chrt(["-o"])
}
const q = (xs: readonly number[], f: number) => [...xs].sort((a, b) => a - b)[Math.floor(f * (xs.length - 1))]
const f = (x: number) => x.toFixed(2)
for (const s of sides) console.log(`${s.label}: ${s.times.length} runs, min ${f(Math.min(...s.times))} p10 ${f(q(s.times, 0.1))} median ${f(median(s.times))} p90 ${f(q(s.times, 0.9))} ms`)
const [A, B] = sides.map((s) => s.times)
console.log(
  `${file ?? name}${fifo ? " (SCHED_FIFO)" : ""}: B / A median ${(median(B) / median(A)).toFixed(3)}, p10 ${(q(B, 0.1) / q(A, 0.1)).toFixed(3)}, min ${(Math.min(...B) / Math.min(...A)).toFixed(3)}; max |A - B| ${diff.toExponential(1)}`,
)
for (const s of sides) s.exec.module.close()
