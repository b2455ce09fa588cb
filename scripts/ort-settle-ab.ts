// node dist/scripts/ort-settle-ab.js [--model squeezenet1.1] [--threads 2] [--rounds 15]: does
// onnxruntime's spinning pool slow the c target's next runs in one process, as the bench runs them?
// `npm run bench` alternates blocks of 5 runs a side, each after a 50 ms settle (src/device/onnxruntime.ts
// SETTLE_MS); the seventh session saw onnxruntime's workers spin 70–100 ms of wall after a run
// (docs/backends.md), and a 5-run block of a small network takes ~12 ms. Here Tessera's 5-run blocks
// (after one untimed run), each after 500 ms of nothing, then after a block of onnxruntime's runs and
// a settle of 0, 50 (the bench's) or 500 ms, the orders rotating round by round; wall medians per
// condition. Speed is reported, never asserted.
import { Effect } from "effect"
import { BACKENDS, hostRecord } from "../src/backend/index.js"
import { loadOrt, median, openOrtSession } from "../src/device/onnxruntime.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { isZooName, zooGraph, zooModel } from "../src/zoo/index.js"
import { seededFirstInput } from "./seeded-inputs.js"
import { helpRequested } from "./usage.js"

const args = process.argv.slice(2)
helpRequested(args, `node dist/scripts/ort-settle-ab.js [--model NAME] [--threads N] [--rounds R]
  Tessera's c runs alone and right after onnxruntime's (settled 0, 50 or 500 ms), alternated, wall medians`)
const opt = (k: string, d: string) => (args.includes(k) ? args[args.indexOf(k) + 1] : d)
const name = opt("--model", "squeezenet1.1")
const threads = Number(opt("--threads", "2"))
const rounds = Number(opt("--rounds", "15"))
if (!isZooName(name)) throw new Error(`unknown zoo model '${name}'`)
process.env.OMP_NUM_THREADS = String(threads)

const graph = zooGraph(name, 0)
const feeds = seededFirstInput(graph)
const target = BACKENDS.c.target(hostRecord(), threads)
const program = await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 }))
const exec = await Effect.runPromise(loadProgram(program, target, { threads }))
const ort = await Effect.runPromise(loadOrt())
if (typeof ort === "string") throw new Error(`onnxruntime-node: ${ort}`)
const session = await Effect.runPromise(openOrtSession(ort, zooModel(name, 0), feeds, threads))
if (typeof session === "string") throw new Error(`onnxruntime-node: ${session}`)

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms))
const ours = (): number[] => {
  exec.run(feeds)
  const t: number[] = []
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now()
    exec.run(feeds)
    t.push(performance.now() - t0)
  }
  return t
}
const theirs = async () => {
  for (let i = 0; i < 6; i++) await session.time()
}
const conditions: Record<string, () => Promise<number[]>> = {
  alone: async () => (await pause(500), ours()),
  "after onnxruntime, 0 ms": async () => (await pause(500), await theirs(), ours()),
  "after onnxruntime, 50 ms (the bench)": async () => (await pause(500), await theirs(), await pause(50), ours()),
  "after onnxruntime, 500 ms": async () => (await pause(500), await theirs(), await pause(500), ours()),
}
const keys = Object.keys(conditions)
const times: Record<string, number[]> = Object.fromEntries(keys.map((k) => [k, []]))
for (let r = 0; r < rounds; r++) for (const k of r % 2 ? [...keys].reverse() : keys) times[k].push(...(await conditions[k]()))
console.log(`${name}, ${threads} thread(s), ${rounds} rounds of 5 runs a condition, wall`)
for (const k of keys) console.log(`${k}: median ${median(times[k]).toFixed(3)} ms, min ${Math.min(...times[k]).toFixed(3)} ms`)
await session.release()
exec.module.close()
