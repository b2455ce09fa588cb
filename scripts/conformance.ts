// npm run conformance — every case in ../shared/onnx-tests through decode + the reference
// evaluator; writes docs/conformance.md and docs/conformance.json. Options: the usage below
// (`npm run conformance -- --help`).
import * as fs from "node:fs"
import * as path from "node:path"
import { listCases, runCase, runCaseOnTarget, SUITES, type CaseResult } from "../test/support/onnx-cases.js"
import { helpRequested } from "./usage.js"

const args = process.argv.slice(2)
helpRequested(
  args,
  `npm run conformance -- [--suite S] [--filter RE] [--no-write] [--show STATUS] [--targets js,c,wasm,cuda-sim]
  every case in ../shared/onnx-tests through decode + the reference evaluator; writes docs/conformance.md
  and docs/conformance.json (not with --suite, --filter or --no-write)
  --suite S       only suite S (node, pytorch-converted, pytorch-operator, simple, light)
  --filter RE     only cases whose name matches RE
  --no-write      print, do not write docs/
  --show STATUS   list cases with that status (fail, unsupported, pass)
  --targets T,…   also run every case that passes on the evaluator through the compiler for these
                  targets, reported per target (cuda-sim: the cuda target's GPU schedules, run by the
                  TIR evaluator)`,
)
const opt = (k: string) => {
  const i = args.indexOf(k)
  return i >= 0 ? args[i + 1] : undefined
}
const suite = opt("--suite")
const filter = opt("--filter")
const show = opt("--show")
const write = !args.includes("--no-write") && !suite && !filter
const targets = (opt("--targets") ?? "").split(",").filter((t): t is "js" | "c" | "wasm" | "cuda-sim" => t === "js" || t === "c" || t === "wasm" || t === "cuda-sim")

const cases = listCases().filter((c) => (!suite || c.suite === suite) && (!filter || new RegExp(filter).test(c.name)))
const results: CaseResult[] = []
const t0 = performance.now()
for (const c of cases) {
  const r = runCase(c)
  results.push(r)
  if (r.status === "fail" || show === r.status || (show === "all")) console.log(`${r.status.padEnd(11)} ${r.suite}/${r.name} (${r.ms} ms) ${r.reason}`)
}
const count = (rs: readonly CaseResult[], s: string) => rs.filter((r) => r.status === s).length

const lines: string[] = []
lines.push("# ONNX conformance", "")
lines.push("Every case in `../shared/onnx-tests`, decoded and run by the reference evaluator, compared as ONNX's")
lines.push("runner does (rtol 1e-3, atol 1e-7; light_densenet121 rtol 2e-3). Written by `npm run conformance`.", "")
lines.push("| suite | cases | pass | fail | unsupported |", "| --- | ---: | ---: | ---: | ---: |")
for (const s of SUITES) {
  const rs = results.filter((r) => r.suite === s)
  if (rs.length) lines.push(`| ${s} | ${rs.length} | ${count(rs, "pass")} | ${count(rs, "fail")} | ${count(rs, "unsupported")} |`)
}
lines.push(`| all | ${results.length} | ${count(results, "pass")} | ${count(results, "fail")} | ${count(results, "unsupported")} |`, "")

const byOp = new Map<string, CaseResult[]>()
for (const r of results) for (const op of r.ops) byOp.set(op, [...(byOp.get(op) ?? []), r])
lines.push("## Per operator", "", "| op | cases | pass | fail | unsupported |", "| --- | ---: | ---: | ---: | ---: |")
for (const [op, rs] of [...byOp].sort(([a], [b]) => (a < b ? -1 : 1)))
  lines.push(`| ${op} | ${rs.length} | ${count(rs, "pass")} | ${count(rs, "fail")} | ${count(rs, "unsupported")} |`)
lines.push("", "## Cases not passing", "", "| suite | case | status | reason |", "| --- | --- | --- | --- |")
for (const r of results.filter((r) => r.status !== "pass"))
  lines.push(`| ${r.suite} | ${r.name} | ${r.status} | ${r.reason.replace(/\|/g, "\\|").replace(/\n/g, " ").slice(0, 300)} |`)

for (const target of targets) {
  const passing = cases.filter((c) => results.find((r) => r.suite === c.suite && r.name === c.name)?.status === "pass")
  const rs: (CaseResult & { compiled: number; fallback: number })[] = []
  for (const c of passing) {
    const r = await runCaseOnTarget(c, target)
    rs.push(r)
    if (r.status === "fail" || show === r.status) console.log(`${target} ${r.status.padEnd(11)} ${r.suite}/${r.name} ${r.reason}`)
  }
  const compiledAll = rs.filter((r) => r.status === "pass" && r.fallback === 0).length
  console.log(`${target}: ${count(rs, "pass")}/${rs.length} pass (${compiledAll} with every group compiled), ${count(rs, "fail")} fail, ${count(rs, "unsupported")} unsupported`)
  lines.push("", `## Target \`${target}\``, "")
  lines.push(
    target === "cuda-sim"
      ? "Every case that passes on the evaluator, compiled with the cuda target's GPU schedules (H100 limits, default graph passes), every kernel statically verified, and run by the TIR evaluator with its thread teams, barriers and shared memory through the executor. Groups without a compute run through the named fallback (their reference kernels)."
      : `Every case that passes on the evaluator, compiled (opt level 3, blocked NCHW{c}c layouts: 4 lanes for js and wasm, 16 for c) and run by the executor. Groups without a compute run through the named fallback (their reference kernels).`,
    "",
  )
  lines.push("| suite | cases | pass | all groups compiled | fail | unsupported |", "| --- | ---: | ---: | ---: | ---: | ---: |")
  for (const s of SUITES) {
    const sr = rs.filter((r) => r.suite === s)
    if (sr.length) lines.push(`| ${s} | ${sr.length} | ${count(sr, "pass")} | ${sr.filter((r) => r.status === "pass" && r.fallback === 0).length} | ${count(sr, "fail")} | ${count(sr, "unsupported")} |`)
  }
  for (const r of rs.filter((r) => r.status !== "pass")) lines.push(`- ${r.suite}/${r.name}: ${r.status}: ${r.reason.replace(/\n/g, " ").slice(0, 200)}`)
  results.push(...rs.filter((r) => r.status === "fail").map((r) => ({ ...r, name: `${r.name} [${target}]` })))
}

const summary = SUITES.map((s) => {
  const rs = results.filter((r) => r.suite === s)
  return rs.length ? `${s}: ${count(rs, "pass")}/${rs.length} pass, ${count(rs, "fail")} fail, ${count(rs, "unsupported")} unsupported` : ""
}).filter(Boolean)
console.log(summary.join("\n"))
console.log(`total: ${count(results, "pass")} pass, ${count(results, "fail")} fail, ${count(results, "unsupported")} unsupported in ${((performance.now() - t0) / 1000).toFixed(1)} s`)

if (write) {
  const docs = path.resolve("docs")
  fs.mkdirSync(docs, { recursive: true })
  const json = { cases: results.map(({ suite, name, status, reason }) => ({ suite, name, status, reason })) }
  fs.writeFileSync(path.join(docs, "conformance.json.tmp"), JSON.stringify(json, null, 1) + "\n")
  fs.renameSync(path.join(docs, "conformance.json.tmp"), path.join(docs, "conformance.json"))
  fs.writeFileSync(path.join(docs, "conformance.md.tmp"), lines.join("\n") + "\n")
  fs.renameSync(path.join(docs, "conformance.md.tmp"), path.join(docs, "conformance.md"))
  console.log("wrote docs/conformance.md and docs/conformance.json")
}
process.exitCode = count(results, "fail") ? 1 : 0
