// node dist/scripts/plan-ab.js [--models mobilenetv2,resnet18,bert-base] [--threads 1] [--rounds 8] [--runs 10]:
// the c executor's two ways of running a compiled network, A/B in one process on one library —
// the plan (every kernel in one native call a run: src/emit/c/emit.ts's plan unit) against one
// FFI call a kernel — two executors over the same loaded module, their outputs compared byte for
// byte, then `rounds` blocks of `runs` end-to-end runs, the sides alternating block by block.
// Prints, per network and side, the median wall and CPU time per run. Speed is reported, never asserted.
import { Effect } from "effect"
import { BACKENDS } from "../src/backend/index.js"
import { createExecutor } from "../src/device/executor.js"
import { hostCpu } from "../src/device/host.js"
import { median } from "../src/device/onnxruntime.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { isZooName, zooGraph } from "../src/zoo/index.js"
import { alternatedRuns } from "./alternated-runs.js"
import { seededFirstInput } from "./seeded-inputs.js"

const args = process.argv.slice(2)
const opt = (k: string, d: string) => (args.includes(k) ? args[args.indexOf(k) + 1] : d)
const models = opt("--models", "mobilenetv2,resnet18,bert-base").split(",")
const threads = Number(opt("--threads", "1"))
const rounds = Number(opt("--rounds", "8"))
const runs = Number(opt("--runs", "10"))
const bytesOf = (d: ArrayLike<unknown> & { buffer: ArrayBufferLike; byteOffset: number; byteLength: number }) => Buffer.from(d.buffer, d.byteOffset, d.byteLength)

for (const name of models) {
  if (!isZooName(name)) throw new Error(`unknown zoo model '${name}'`)
  const graph = zooGraph(name, 0)
  const feeds = seededFirstInput(graph)
  const target = BACKENDS.c.target(hostCpu(), threads)
  const program = await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 }))
  const plan = await Effect.runPromise(loadProgram(program, target, { threads }))
  const perKernel = createExecutor(program, plan.module, { plan: false })
  const sides = [
    ["plan", plan],
    ["per-kernel", perKernel],
  ] as const
  const outs = sides.map(([, e]) => e.run(feeds))
  const same = [...outs[0]].every(([k, t]) => bytesOf(t.data).equals(bytesOf(outs[1].get(k)!.data)))
  const { wall, cpu } = await alternatedRuns(sides.map(([side, e]) => ({ side, run: () => void e.run(feeds) })), rounds, runs)
  const kernels = program.kernels.filter((k) => k.kind === "compiled").length
  const line = (s: string) => `${s} wall ${median(wall[s]).toFixed(3)} ms, cpu ${median(cpu[s]).toFixed(3)} ms`
  console.log(`${name} (${kernels} kernels, ${threads} thread(s), ${rounds}×${runs} runs a side): outputs ${same ? "byte-identical" : "DIFFER"}; ${line("plan")}; ${line("per-kernel")}; plan/per-kernel wall ${(median(wall.plan) / median(wall["per-kernel"])).toFixed(3)}, cpu ${(median(cpu.plan) / median(cpu["per-kernel"])).toFixed(3)}`)
  plan.module.close()
}
