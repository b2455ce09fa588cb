// node dist/scripts/cores-ab.js [--model resnet50] [--threads 2] [--a-cores 1] [--b-cores N] [--rounds 300] [--runs 1] [--cpu]:
// what the schedules a record of more cores gives (the rules that read the record's cores: the
// band rule, the small-kernel serial rule, rfactor) are worth, A/B in one process — the zoo network
// compiled for `--a-cores` cores (A) and for `--threads` (B), both loaded and run on `--threads`
// threads, their outputs compared, then `rounds` × `runs` end-to-end runs each, the sides
// alternating every `runs` runs (1: run by run, so both meet the same quiet spells of a shared
// machine). Prints each kernel's minimum, 10th percentile and median in the sequence (wall),
// A then B then B / A, and the sums. On a loaded machine the minima are the figures to compare:
// a kernel's best run is one where both threads held a core. `--b-cores` compiles B for other cores
// than it runs on (`--threads 1 --b-cores 2`: what the 2-core schedules cost a core), `--cpu` times
// by the process's CPU time (at one thread, the kernel's own time on a shared core). Speed is
// reported, never asserted.
import { Effect } from "effect"
import { BACKENDS } from "../src/backend/index.js"
import { hostCpu } from "../src/device/host.js"
import { median } from "../src/device/onnxruntime.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { isZooName, zooGraph } from "../src/zoo/index.js"
import { seededFirstInput } from "./seeded-inputs.js"

const args = process.argv.slice(2)
const opt = (k: string, d: string) => (args.includes(k) ? args[args.indexOf(k) + 1] : d)
const name = opt("--model", "resnet50")
const threads = Number(opt("--threads", "2"))
const aCores = Number(opt("--a-cores", "1"))
const rounds = Number(opt("--rounds", "300"))
const runs = Number(opt("--runs", "1"))
const bCores = Number(opt("--b-cores", String(threads)))
const now = args.includes("--cpu")
  ? () => {
      const u = process.cpuUsage()
      return (u.user + u.system) / 1000
    }
  : () => performance.now()
if (!isZooName(name)) throw new Error(`unknown zoo model '${name}'`)
process.env.OMP_NUM_THREADS = String(threads)

const graph = zooGraph(name, 0)
const feeds = seededFirstInput(graph)
const runTarget = BACKENDS.c.target(hostCpu(), threads)

const sides = await Promise.all(
  [aCores, bCores].map(async (cores, i) => {
    const program = await Effect.runPromise(compileGraph(graph, BACKENDS.c.target(hostCpu(), cores), { optLevel: 3 }))
    const exec = await Effect.runPromise(loadProgram(program, runTarget, { threads }))
    // each kernel timed inside the sequence (the executor's own calls, wrapped)
    const seq = new Map<string, number[]>()
    const inner = exec.module.run
    ;(exec.module as { run: typeof inner }).run = (k, a) => {
      const t0 = now()
      inner(k, a)
      seq.set(k, [...(seq.get(k) ?? []), now() - t0])
    }
    return { side: i === 0 ? "A" : "B", exec, seq, e2e: [] as number[] }
  }),
)
const outs = sides.map((s) => s.exec.run(feeds))
let diff = 0
for (const [k, t] of outs[0]) {
  const u = outs[1].get(k)!
  for (let i = 0; i < t.data.length; i++) diff = Math.max(diff, Math.abs(Number(t.data[i]) - Number(u.data[i])))
}
for (const s of sides) s.seq.clear()
for (let round = 0; round < rounds; round++)
  for (const s of round % 2 ? [...sides].reverse() : sides)
    for (let i = 0; i < runs; i++) {
      const t0 = now()
      s.exec.run(feeds)
      s.e2e.push(now() - t0)
    }
const q = (xs: readonly number[], f: number) => [...xs].sort((a, b) => a - b)[Math.floor(f * (xs.length - 1))]
const [A, B] = sides
const sum = { minA: 0, minB: 0, medA: 0, medB: 0 }
const cell = (a: number, b: number) => `${a.toFixed(3)} ${b.toFixed(3)} ${(b / a).toFixed(2)}`
for (const [k, ta] of A.seq) {
  const tb = B.seq.get(k)!
  sum.minA += Math.min(...ta)
  sum.minB += Math.min(...tb)
  sum.medA += median(ta)
  sum.medB += median(tb)
  console.log(`${k}\tmin ${cell(Math.min(...ta), Math.min(...tb))}\tp10 ${cell(q(ta, 0.1), q(tb, 0.1))}\tmed ${cell(median(ta), median(tb))}`)
}
console.log(
  `${name}, A compiled for ${aCores} core(s), B for ${bCores}, both run on ${threads} thread(s), max |A - B| ${diff.toExponential(1)}: ` +
    `end-to-end min ${cell(Math.min(...A.e2e), Math.min(...B.e2e))}, p10 ${cell(q(A.e2e, 0.1), q(B.e2e, 0.1))}, median ${cell(median(A.e2e), median(B.e2e))} ms; ` +
    `kernels' minima summed ${cell(sum.minA, sum.minB)}, medians summed ${cell(sum.medA, sum.medB)} ms`,
)
for (const s of sides) s.exec.module.close()
