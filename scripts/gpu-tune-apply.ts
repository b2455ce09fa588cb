// node dist/scripts/gpu-tune-apply.js DIR/sweep.json [--out DIR/cuda-tuning.jsonl]
//
// The measured sweep of scripts/gpu-check.sh DIR --variants (per model, per variant, each
// launch's median ms) with gpu-prepare's DIR/<model>-variants.json (each variant's kernels → task
// and config) as a Tessera tuning log: per task (workload) the fastest config of the variants
// whose outputs were correct (a task's time: the sum of its launches), every correct measurement
// written as a record, so `tessera compile --target cuda --tuning-log LOG` and
// `gpu-prepare --tuning-log LOG` apply the fastest. Prints per task the generated default, AutoTVM's
// template at its defaults and the best found (ms and GFLOP/s), and the wrong or failed variants.
import * as fs from "node:fs"
import * as path from "node:path"
import { chooseConfigs, recordsAgree, sweepRecords, type SweepFile, type VariantsFile } from "../src/search/gpu-sweep.js"
import { serializeRecord } from "../src/search/records.js"

const args = process.argv.slice(2)
const sweepPath = args.find((a) => !a.startsWith("--"))
if (!sweepPath) {
  console.error("usage: node dist/scripts/gpu-tune-apply.js DIR/sweep.json [--out LOG]")
  process.exit(2)
}
const dir = path.dirname(sweepPath)
const outPath = args.includes("--out") ? args[args.indexOf("--out") + 1] : path.join(dir, "cuda-tuning.jsonl")
const sweep = JSON.parse(fs.readFileSync(sweepPath, "utf8")) as SweepFile & { emulated?: boolean; arch?: string }
const spec = JSON.parse(fs.readFileSync(path.join(dir, "models.json"), "utf8")) as { models: { model: string; variants_file?: string }[] }
const variants: VariantsFile[] = spec.models.flatMap((m) => (m.variants_file && sweep.models[m.model] ? [JSON.parse(fs.readFileSync(path.join(dir, m.variants_file), "utf8")) as VariantsFile] : []))
if (!variants.length) {
  console.error(`gpu-tune-apply: ${sweepPath} measured none of the models with variants in ${path.join(dir, "models.json")}`)
  process.exit(1)
}

console.log(`gpu-tune-apply: ${sweepPath} (${sweep.gpu ?? "?"}${sweep.emulated ? ", emulated on the CPU: times are the CPU's" : ""})`)
for (const vf of variants) {
  const runs = sweep.models[vf.model].variants
  const bad = vf.variants.filter((v) => !runs[v.name]?.close)
  const ok = vf.variants.length - bad.length
  const e2e = (name: string) => runs[name]?.median_ms
  console.log(`\n## ${vf.model}: ${ok} of ${vf.variants.length} variants correct; end to end: ${vf.variants.map((v) => `${v.name} ${e2e(v.name)?.toFixed(3) ?? "-"} ms`).join(", ")}`)
  for (const v of bad) console.log(`  ${v.name} (${v.kind}): ${runs[v.name] ? (runs[v.name].error ?? `outputs differ from the reference (max abs err ${runs[v.name].max_abs})`) : "not measured"}`)
}

const choices = chooseConfigs(variants, sweep)
const gflops = (flops: number, ms: number | undefined) => (ms === undefined || ms <= 0 ? "-" : (flops / (ms / 1000) / 1e9).toFixed(0))
const ms = (x: number | undefined) => (x === undefined ? "-" : x.toFixed(4))
for (const vf of variants) {
  const mine = choices.filter((c) => c.model === vf.model)
  console.log(`\n### ${vf.model}: per task (ms, the sum of its launches' medians; GFLOP/s)\n`)
  console.log("| task | groups | generated default | AutoTVM default | best found | best / default | variant | measured | best generated | best AutoTVM |")
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
  for (const c of [...mine].sort((a, b) => (b.defaultMs ?? 0) - (a.defaultMs ?? 0))) {
    const conv = c.label.startsWith("Conv")
    const at = conv ? `${ms(c.autotvmMs)} (${gflops(c.flops, c.autotvmMs)})` : "-"
    console.log(`| ${c.task} ${c.label} | ${vf.tasks[c.task].groups.length} | ${ms(c.defaultMs)} (${gflops(c.flops, c.defaultMs)}) | ${at} | ${ms(c.bestMs)} (${gflops(c.flops, c.bestMs)}) | ${c.defaultMs ? (c.bestMs / c.defaultMs).toFixed(2) : "-"} | ${c.bestVariant} | ${c.measured} | ${c.bestBySketch ? ms(c.bestBySketch.generated) : "-"} | ${c.bestBySketch ? ms(c.bestBySketch.autotvm) : "-"} |`)
  }
  // the issue's baseline: on the tasks with both sketches, the generated space's best against AutoTVM's template's best
  const both = mine.flatMap((c) => (c.bestBySketch?.generated !== undefined ? [{ c, g: c.bestBySketch.generated, a: c.bestBySketch.autotvm }] : []))
  if (both.length) {
    const wins = both.filter((b) => b.g <= b.a).length
    const tot = (f: (b: (typeof both)[number]) => number) => both.reduce((s, b) => s + f(b), 0)
    console.log(`\n${vf.model}: on ${both.length} tasks with both sketches measured, the generated space's best matches or beats AutoTVM's template's best on ${wins} (their sums ${tot((b) => b.g).toFixed(3)} against ${tot((b) => b.a).toFixed(3)} ms; per task generated / AutoTVM: ${both.map((b) => (b.g / b.a).toFixed(2)).join(" ")})`)
  }
  const sum = (f: (c: (typeof mine)[number]) => number | undefined) => mine.reduce((s, c) => s + (f(c) ?? NaN), 0)
  console.log(`\n${vf.model}: the tasks' launches sum to ${sum((c) => c.defaultMs).toFixed(3)} ms at the defaults, ${sum((c) => c.bestMs).toFixed(3)} ms at the best found (launches timed alone)`)
}

const records = sweepRecords(variants, sweep, new Date().toISOString())
if (!recordsAgree(records, choices, "cuda")) {
  console.error("gpu-tune-apply: the log's fastest records are not the chosen configs (a bug)")
  process.exit(1)
}
fs.writeFileSync(outPath, records.map((r) => `${serializeRecord(r)}\n`).join(""))
console.log(`\n${outPath}: ${records.length} records over ${new Set(records.map((r) => r.workload)).size} workloads; next: node dist/scripts/gpu-prepare.js --tuning-log ${outPath} (into a fresh --out)`)
