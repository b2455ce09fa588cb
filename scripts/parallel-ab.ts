// node dist/scripts/parallel-ab.js [--models squeezenet1.1,shufflenetv2,resnet18] [--threads 2] [--rounds 8] [--runs 10]:
// the c target's two runners of parallel loops, A/B in one process — Tessera's thread pool
// (src/emit/c/pool.ts) against OpenMP — each network compiled once, both libraries loaded (each
// its own workers), their outputs compared, then `rounds` blocks of `runs` end-to-end runs each,
// the two sides alternating block by block (this shared machine's slow spells last seconds), with
// a pause between blocks (libgomp's workers spin for a while after a region). Prints, per network
// and side, the median wall time and the median CPU time of the process per run (the pool's idle
// workers sleep; OpenMP's spin). Speed is reported, never asserted.
import { Effect } from "effect"
import { BACKENDS, cBackend } from "../src/backend/index.js"
import { hostCpu } from "../src/device/host.js"
import { median } from "../src/device/onnxruntime.js"
import { pipelineOf } from "../src/pipeline-core.js"
import { isZooName, zooGraph } from "../src/zoo/index.js"
import { alternatedRuns } from "./alternated-runs.js"
import { seededFirstInput } from "./seeded-inputs.js"

const args = process.argv.slice(2)
const opt = (k: string, d: string) => (args.includes(k) ? args[args.indexOf(k) + 1] : d)
const models = opt("--models", "squeezenet1.1,shufflenetv2,resnet18").split(",")
const threads = Number(opt("--threads", "2"))
const rounds = Number(opt("--rounds", "8"))
const runs = Number(opt("--runs", "10"))
const sides = { pool: pipelineOf({ ...BACKENDS, c: cBackend("pool") }), openmp: pipelineOf({ ...BACKENDS, c: cBackend("openmp") }) }

for (const name of models) {
  if (!isZooName(name)) throw new Error(`unknown zoo model '${name}'`)
  const graph = zooGraph(name, 0)
  const feeds = seededFirstInput(graph)
  const target = BACKENDS.c.target(hostCpu(), threads)
  const loaded = await Promise.all(
    (["pool", "openmp"] as const).map(async (side) => {
      const p = sides[side]
      const program = await Effect.runPromise(p.compileGraph(graph, target, { optLevel: 3 }))
      return { side, exec: await Effect.runPromise(p.loadProgram(program, target, { threads })) }
    }),
  )
  const outs = loaded.map((l) => l.exec.run(feeds))
  let diff = 0
  for (const [k, t] of outs[0]) {
    const u = outs[1].get(k)!
    for (let i = 0; i < t.data.length; i++) diff = Math.max(diff, Math.abs(Number(t.data[i]) - Number(u.data[i])))
  }
  const { wall, cpu } = await alternatedRuns(loaded.map((l) => ({ side: l.side, run: () => void l.exec.run(feeds) })), rounds, runs, 100)
  const row = (side: string) => `${side} wall ${median(wall[side]).toFixed(2)} ms cpu ${median(cpu[side]).toFixed(2)} ms`
  console.log(`${name} ${threads}T (${rounds} blocks of ${runs}, alternated; max |pool - openmp| ${diff.toExponential(1)}): ${row("pool")}; ${row("openmp")}; openmp/pool wall ${(median(wall.openmp) / median(wall.pool)).toFixed(2)}x`)
  for (const l of loaded) l.exec.module.close()
}
