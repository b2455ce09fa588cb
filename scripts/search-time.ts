// node dist/scripts/search-time.js MODEL.onnx [--task ID]... [--configs N] [--pick K] [--seed S] [--threads T]
// What the tuner's search spends on one config, per task: the configs a seeded draw gives (as the
// tuners' first round draws them) lowered as `tessera tune` lowers them (schedule, lowerSync, the
// c backend's TIR passes) and featurized as xgb featurizes them. Prints CPU ms per
// config (lowering, features), and a hash of every lowered function's text and feature row, so a
// change meant to speed the search up can be checked to leave what it lowers identical (run it on
// a base build and on the branch: the hashes must match).
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { readModelSync } from "../src/device/files.js"
import { compileGraph } from "../src/pipeline.js"
import { targetSettings } from "../src/cli/targets.js"
import { tasksOfProgram } from "../src/search/extract.js"
import { featuresOf } from "../src/search/features.js"
import { sampleConfig, spaceSize } from "../src/search/task.js"
import { prng } from "../src/ast/graph/arbitrary-builder.js"
import { printPrimFunc } from "../src/ast/tir/tir.js"

const args = process.argv.slice(2)
const opt = (name: string, dflt: number) => {
  const k = args.indexOf(name)
  return k >= 0 ? Number(args[k + 1]) : dflt
}
const tasksWanted = args.flatMap((a, k) => (args[k - 1] === "--task" ? [a] : []))
const model = args.find((a, k) => !a.startsWith("--") && !args[k - 1]?.startsWith("--"))
if (!model) {
  console.error("usage: node dist/scripts/search-time.js MODEL.onnx [--task ID]... [--configs N] [--seed S] [--threads T]")
  process.exit(2)
}
const CONFIGS = opt("--configs", 8)
const SEED = opt("--seed", 1)
const THREADS = opt("--threads", 1)

const cpuMs = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}
const sha = (s: string) => createHash("sha256").update(s).digest("hex").slice(0, 16)

const { target } = targetSettings("c", THREADS)
const program = Effect.runSync(compileGraph(readModelSync(model), target))
const runners = tasksOfProgram(program, target).filter((r) => tasksWanted.length === 0 || tasksWanted.includes(r.task.id))
for (const r of runners) {
  const rng = prng(SEED)
  const size = spaceSize(r.task.knobs)
  const drawn = Array.from({ length: CONFIGS }, () => sampleConfig(r.task.knobs, size, rng))
  // --pick K: only the K-th of them (one config's lowering alone, for a profile)
  const pick = opt("--pick", -1)
  const configs = pick >= 0 ? [drawn[pick]] : drawn
  if (pick >= 0) console.error(JSON.stringify(configs[0]))
  const hash = createHash("sha256")
  let lowerCpu = 0
  let featureCpu = 0
  let failed = 0
  const each: number[] = []
  for (const c of configs) {
    const t0 = cpuMs()
    let text: string
    let feats: readonly number[] = []
    try {
      const f = r.lowerConfig(c)
      const t1 = cpuMs()
      lowerCpu += t1 - t0
      each.push(Math.round(t1 - t0))
      feats = featuresOf(f, r.task.knobs, c)
      featureCpu += cpuMs() - t1
      text = printPrimFunc(f)
    } catch (e) {
      failed++
      text = `error: ${e instanceof Error ? e.message : String(e)}`
    }
    hash.update(text).update(JSON.stringify(feats))
  }
  const per = (x: number) => (x / configs.length).toFixed(1)
  console.log(
    JSON.stringify({
      task: r.task.id,
      label: r.task.label,
      configs: configs.length,
      failed,
      lowerMsPerConfig: Number(per(lowerCpu)),
      featuresMsPerConfig: Number(per(featureCpu)),
      lowerMsEach: each,
      hash: sha(hash.digest("hex")),
    }),
  )
}
