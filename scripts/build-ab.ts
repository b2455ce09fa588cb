// node dist/scripts/build-ab.js --base DIR [--model resnet50 | --file MODEL.onnx] [--threads 1] [--rounds 15] [--runs 5] [--wall] [--fifo] [--all]:
// this build's schedules against another build's (DIR: a worktree with its own `npm run build`,
// whose dist/index.js compiles the same zoo network — or the ONNX file, decoded here — through its own pipeline), A/B in one
// process: both programs loaded, their outputs compared, then `rounds` blocks of `runs` end-to-end
// runs each, the sides alternating block by block (this shared machine's slow spells fall on
// both). Each kernel timed inside the sequence by the process's CPU time (1 thread: the kernel's
// own time; on a machine shared with other jobs wall time counts theirs too). Prints the kernels
// whose medians move more than 4% (`--all`: every kernel), each side's medians and the ratio, then the kernels'
// sums and the end-to-end medians. Speed is reported, never asserted.
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { BACKENDS } from "../src/backend/index.js"
import { hostCpu } from "../src/device/host.js"
import { median } from "../src/device/onnxruntime.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { isZooName, zooGraph } from "../src/zoo/index.js"
import { seededFirstInput } from "./seeded-inputs.js"

const args = process.argv.slice(2)
const opt = (k: string, d: string) => (args.includes(k) ? args[args.indexOf(k) + 1] : d)
const base = opt("--base", "")
if (!base) throw new Error("--base DIR: a worktree whose dist/index.js is the build to compare with")
const name = opt("--model", "resnet50")
const threads = Number(opt("--threads", "1"))
const rounds = Number(opt("--rounds", "15"))
const runs = Number(opt("--runs", "5"))
const file = args.includes("--file") ? opt("--file", "") : undefined
if (!file && !isZooName(name)) throw new Error(`unknown zoo model '${name}'`)
process.env.OMP_NUM_THREADS = String(threads)

type Lib = { compileGraph: typeof compileGraph; loadProgram: typeof loadProgram; BACKENDS: typeof BACKENDS }
const other = (await import(pathToFileURL(path.resolve(base, "dist/index.js")).href)) as Lib
const graph = file ? decodeModelSync(new Uint8Array(fs.readFileSync(file))) : zooGraph(name, 0)
const feeds = seededFirstInput(graph)
// (`--wall`: wall time, for more than one thread, whose CPU time counts the pool's spinning too)
const wall = args.includes("--wall")
const cpuMs = () => {
  if (wall) return performance.now()
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

const side = async (lib: Lib) => {
  const target = lib.BACKENDS.c.target(hostCpu(), threads)
  const program = await Effect.runPromise(lib.compileGraph(graph, target, { optLevel: 3 }))
  const exec = await Effect.runPromise(lib.loadProgram(program, target, { threads }))
  const inner = exec.module.run
  const times = new Map<string, number[]>()
  ;(exec.module as { run: typeof inner }).run = (k, a) => {
    const t0 = cpuMs()
    inner(k, a)
    const list = times.get(k) ?? []
    list.push(cpuMs() - t0)
    times.set(k, list)
  }
  return { exec, times, e2e: [] as number[] }
}
const A = await side(other)
const B = await side({ compileGraph, loadProgram, BACKENDS })
const outA = A.exec.run(feeds)
const outB = B.exec.run(feeds)
let maxDiff = 0
for (const [k, t] of outA) {
  const u = outB.get(k)!
  for (let i = 0; i < t.data.length; i++) maxDiff = Math.max(maxDiff, Math.abs(Number(t.data[i]) - Number(u.data[i])))
}
A.times.clear()
B.times.clear()
// (`--fifo`: the timed rounds at SCHED_FIFO, every thread of the process, as threads-ab --fifo: on a shared machine the
// other jobs then do not take a core from a 2-thread run; back to SCHED_OTHER after)
const fifo = args.includes("--fifo")
const chrt = (policy: string[]) => spawnSync("chrt", ["-a", ...policy, "-p", ...(policy[0] === "-f" ? ["10"] : ["0"]), String(process.pid)], { encoding: "utf8" })
if (fifo && chrt(["-f"]).status !== 0) throw new Error("--fifo: chrt could not raise this process to SCHED_FIFO (it needs the privilege)")
try {
  for (let r = 0; r < rounds; r++)
    for (const s of r % 2 === 0 ? [A, B] : [B, A])
      for (let i = 0; i < runs; i++) {
        const t0 = cpuMs()
        s.exec.run(feeds)
        s.e2e.push(cpuMs() - t0)
      }
} finally {
  if (fifo) chrt(["-o"])
}
console.log(`${file ?? name}, ${threads} thread(s), ${rounds} rounds of ${runs} runs a side, ${wall ? "wall" : "CPU"} time; outputs differ by at most ${maxDiff.toExponential(2)}`)
console.log("| kernel | base ms | this ms | this / base |")
console.log("| --- | ---: | ---: | ---: |")
let [sa, sb] = [0, 0]
for (const [k, ta] of A.times) {
  const tb = B.times.get(k) ?? [0]
  const [ma, mb] = [median(ta), median(tb)]
  sa += ma
  sb += mb
  if (Math.abs(mb / ma - 1) > 0.04 || args.includes("--all")) console.log(`| ${k} | ${ma.toFixed(3)} | ${mb.toFixed(3)} | ${(mb / ma).toFixed(3)} |`)
}
console.log(`kernels' medians summed: base ${sa.toFixed(2)} ms, this ${sb.toFixed(2)} ms (${(sb / sa).toFixed(3)})`)
console.log(`end to end medians: base ${median(A.e2e).toFixed(2)} ms, this ${median(B.e2e).toFixed(2)} ms (${(median(B.e2e) / median(A.e2e)).toFixed(3)})`)
