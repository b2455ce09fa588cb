// npm run nvcc-round -- [--model resnet18] [--match "Conv 3x3"] [--rounds 3] [--batch 8] [--seed 1] [--out .cache/nvcc-round]
// nvcc's share of a cuda tuning round, without a GPU: the candidates `tune --target cuda` would
// build for a model's tasks (the random tuner's draws, seeded, `--batch` a round), rendered by the
// cuda backend as the measurer renders them (one translation unit per candidate), written to
// OUT/<task>/r<round>c<k>.cu with their config, for timing nvcc on them (docs/cuda.md); a config
// the template refuses (Template.refuse: tune records it, never builds it) as r<round>c<k>.refused,
// one the emitter refuses (GpuLimitError) as .rejected. `--all` writes the refused ones' sources too.
// OUT/summary.jsonl: a line per candidate — task, stem, virtual threads, refused / rejected, source
// bytes, and block 0's shared-memory stores per reduction step against its shared tiles' elements
// (src/lowering/templates/gpu/fetch-count.ts, by the TIR evaluator; `--no-fetches` skips it).
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"

const arg = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : d
}
const { BACKENDS } = await import("../src/backend/index.js")
const { compileGraph } = await import("../src/pipeline.js")
const { tasksOfProgram } = await import("../src/search/extract.js")
const { randomTuner } = await import("../src/search/tuners.js")
const { zooGraph } = await import("../src/zoo/index.js")
const { vthreadsOf } = await import("../src/lowering/templates/gpu/index.js")
const { sharedFetchesPerStep } = await import("../src/lowering/templates/gpu/fetch-count.js")
const { lowerSync } = await import("../src/lowering/lower.js")

const model = arg("model", "resnet18")
const match = arg("match", "Conv 3x3")
const rounds = Number(arg("rounds", "3"))
const batch = Number(arg("batch", "8"))
const seed = Number(arg("seed", "1"))
const out = arg("out", ".cache/nvcc-round")
const tasks = arg("tasks", "")
const all = process.argv.includes("--all")
const fetches = !process.argv.includes("--no-fetches")

const target = BACKENDS.cuda.target(undefined as never, 1, {})
const program = await Effect.runPromise(compileGraph(zooGraph(model), target))
const runners = tasksOfProgram(program, target).filter((r) => r.task.label.includes(match) && (tasks === "" || tasks.split(",").includes(r.task.id)))
const render = BACKENDS.cuda.codegen!.renderCandidates!
fs.mkdirSync(out, { recursive: true })
const summary: string[] = []
for (const r of runners) {
  const dir = path.join(out, r.task.id)
  fs.mkdirSync(dir, { recursive: true })
  const tuner = randomTuner(r.task, seed)
  for (let k = 0; k < rounds; k++) {
    const configs = await Effect.runPromise(tuner.next(batch))
    configs.forEach((config, j) => {
      const stem = path.join(dir, `r${k}c${j}`)
      fs.writeFileSync(`${stem}.json`, JSON.stringify(config) + "\n")
      const refused = r.task.template.refuse?.(r.task.outputs, r.task.base, config)
      const line = { task: r.task.id, stem: `r${k}c${j}`, vthreads: vthreadsOf(r.task.template.apply(r.task.outputs, r.task.base, config)), refused: refused !== undefined, rejected: false, bytes: 0, perStep: 0, sharedElements: 0 }
      summary.push("")
      const at = summary.length - 1
      const note = () => (summary[at] = JSON.stringify(line))
      note()
      if (refused !== undefined) fs.writeFileSync(`${stem}.refused`, refused + "\n")
      if (refused !== undefined && !all) return
      try {
        const func = r.lowerConfig(config)
        const src = render([{ name: `t${j}`, func }], target as never)
        fs.writeFileSync(`${stem}.cu`, src)
        line.bytes = Buffer.byteLength(src)
        if (fetches) {
          const n = sharedFetchesPerStep(lowerSync(r.task.template.apply(r.task.outputs, r.task.base, config)), func)
          Object.assign(line, { perStep: n.perStep, sharedElements: n.sharedElements })
        }
      } catch (e) {
        line.rejected = true
        fs.writeFileSync(`${stem}.rejected`, (e instanceof Error ? e.message : String(e)) + "\n")
      }
      note()
    })
  }
  console.log(`${r.task.id} ${r.task.label}: ${rounds} rounds of ${batch} in ${dir}`)
}
fs.writeFileSync(path.join(out, "summary.jsonl"), summary.join("\n") + "\n")
