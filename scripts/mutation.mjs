// npm run mutation -- <source files…> [stryker options…]
//
// Mutation testing of the given source files alone (Stryker's --mutate; stryker.config.mjs has the
// rest), then one summary row per file: mutants, killed, survived, timed out, no coverage, errors,
// and the score killed / (killed + survived), a mutant no test runs counted as survived; the run's
// wall time; then every survivor and every mutant no test ran, with its place and replacement, to
// be judged (equivalent, or a gap in the laws: docs/laws.md). The full report is
// reports/mutation/<name>.json and .html.
//
//   npm run mutation -- src/rewrite/eliminate-dead-code.ts
//   npm run mutation -- src/lowering/tir/unroll-loops.ts src/lowering/tir/vectorize-loops.ts --concurrency 1
//   npm run mutation -- --all-tests src/rewrite/eliminate-dead-code.ts   against every in-process test, not
//                                    only the laws and the transforms' own tests (vitest.mutation.config.ts)
//   npm run mutation -- --tests laws/lowering/tir/*.law.ts,test/tir-pipeline.test.ts src/lowering/tir/unroll-loops.ts
//                                    against these test files only: faster, and a lower bound of the score
//   npm run mutation -- --skip-tests 'compiled|gcc' …   leave out the tests whose names match (a lower bound too)
//   npm run mutation -- --all        every module of stryker.config.mjs's `mutate` (hours)
//   npm run mutation -- --summary reports/mutation/<name>.json   the summary of an earlier run
//
// A tool run by hand: `npm test` (and so CI) never runs it.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

const args = process.argv.slice(2)
const usage = () => {
  console.error("usage: npm run mutation -- <source file>… [--tests GLOB,GLOB] [--skip-tests REGEXP] [stryker options…] | --all | --summary REPORT.json")
  process.exit(2)
}
if (args.length === 0) usage()

/** One row per file and the survivors of a mutation-testing-report-schema JSON report. */
const summarize = (reportFile, wallSeconds) => {
  const report = JSON.parse(fs.readFileSync(reportFile, "utf8"))
  const rows = []
  const open = []
  for (const [file, { source, mutants }] of Object.entries(report.files).sort(([a], [b]) => a.localeCompare(b))) {
    const lines = source.split("\n")
    // the code a mutant replaced (its first line, when it spans several)
    const original = ({ start, end }) => (start.line === end.line ? lines[start.line - 1].slice(start.column - 1, end.column - 1) : `${lines[start.line - 1].slice(start.column - 1)} …`)
    const n = (s) => mutants.filter((m) => m.status === s).length
    const killed = n("Killed")
    const survived = n("Survived")
    const row = {
      file,
      mutants: mutants.length,
      killed,
      survived,
      timeout: n("Timeout"),
      noCoverage: n("NoCoverage"),
      errors: n("RuntimeError") + n("CompileError"),
      ignored: n("Ignored"),
      // a mutant no test runs survives every test: it counts as survived
      score: killed + survived + n("NoCoverage") === 0 ? "—" : `${((100 * killed) / (killed + survived + n("NoCoverage"))).toFixed(1)}%`,
    }
    rows.push(row)
    const byPlace = (a, b) => a.location.start.line - b.location.start.line || a.location.start.column - b.location.start.column
    for (const m of [...mutants].sort(byPlace)) {
      if (m.status !== "Survived" && m.status !== "NoCoverage") continue
      const { line, column } = m.location.start
      const short = (t) => (t.length > 100 ? `${t.slice(0, 97)}...` : t)
      open.push(`${m.status === "Survived" ? "survived" : "no coverage"}  ${file}:${line}:${column}  ${m.mutatorName}  ${short(original(m.location))}  →  ${short(m.replacement ?? "(removed)")}`.replace(/\s+/g, " "))
    }
  }
  const cols = ["file", "mutants", "killed", "survived", "timeout", "noCoverage", "errors", "ignored", "score"]
  const width = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c]).length)))
  const line = (cells) => cells.map((c, i) => (i === 0 ? String(c).padEnd(width[i]) : String(c).padStart(width[i]))).join("  ")
  console.log("")
  console.log(line(cols))
  for (const r of rows) console.log(line(cols.map((c) => r[c])))
  if (wallSeconds !== undefined) {
    const git = (...a) => spawnSync("git", a, { encoding: "utf8" }).stdout?.trim() ?? "?"
    const dirty = git("status", "--porcelain", "--", "src", "laws", "test") ? " (src, laws or test modified)" : ""
    console.log(`wall time ${Math.floor(wallSeconds / 60)} min ${Math.round(wallSeconds % 60)} s; commit ${git("rev-parse", "--short", "HEAD")}${dirty}; ${new Date().toISOString().slice(0, 10)}`)
  }
  console.log(`report ${reportFile}`)
  if (open.length) {
    console.log(`\n${open.length} mutants not killed (judge each: equivalent, or a gap in the laws):`)
    for (const o of open) console.log(`  ${o}`)
  }
}

if (args[0] === "--summary") {
  if (!args[1]) usage()
  summarize(args[1])
  process.exit(0)
}

// source files (a Stryker mutation range `file.ts:12-30` too); every other argument goes to Stryker
const isSource = (a) => /^[^-].*\.[cm]?[jt]s(:[\d:-]+)?$/.test(a)
const allTests = args.includes("--all-tests")
/** The value of option `name` and the indices it takes up. */
const valueOf = (name) => {
  const at = args.indexOf(name)
  if (at >= 0 && !args[at + 1]) usage()
  return at >= 0 ? { value: args[at + 1], taken: [at, at + 1] } : { value: undefined, taken: [] }
}
const tests = valueOf("--tests")
const skipTests = valueOf("--skip-tests")
const taken = new Set([...tests.taken, ...skipTests.taken])
const options = args.filter((a, i) => !isSource(a) && a !== "--all" && a !== "--all-tests" && !taken.has(i))
const files = args.filter((a, i) => isSource(a) && !taken.has(i))
if (!args.includes("--all")) {
  if (files.length === 0) usage()
  for (const f of files) if (!fs.existsSync(f.replace(/:[\d:-]+$/, ""))) throw new Error(`${f}: no such file`)
}

// reports/mutation/<name>.json: the file's path (or "all"), so that runs of different modules keep their reports
const name = (allTests ? "all-tests_" : tests.value || skipTests.value ? "some-tests_" : "") + (args.includes("--all") ? "all" : files.length === 1 ? files[0].replace(/\.ts(:.*)?$/, "").replace(/^src\//, "").replace(/[/:]/g, "_") : `${files.length}-files`)
const outDir = "reports/mutation"
fs.mkdirSync(outDir, { recursive: true })

const started = Date.now()
const r = spawnSync(
  process.execPath,
  ["node_modules/@stryker-mutator/core/bin/stryker.js", "run", "stryker.config.mjs", ...(files.length && !args.includes("--all") ? ["--mutate", files.join(",")] : []), ...options],
  {
    stdio: "inherit",
    env: {
      ...process.env,
      // the sandbox (.stryker-tmp/sandbox-*) is one folder deeper: point the conformance cases at ../shared from here
      TESSERA_ONNX_TESTS: process.env.TESSERA_ONNX_TESTS ?? path.resolve("../shared/onnx-tests"),
      // which tests the mutants face (vitest.mutation.config.ts)
      TESSERA_MUTATION_TESTS: allTests ? "all" : "transforms",
      ...(tests.value ? { TESSERA_MUTATION_INCLUDE: tests.value } : {}),
      ...(skipTests.value ? { TESSERA_MUTATION_SKIP: skipTests.value } : {}),
    },
  },
)
const wall = (Date.now() - started) / 1000
const report = path.join(outDir, "mutation.json")
if (r.status !== 0 || !fs.existsSync(report)) {
  console.error(`stryker exited with ${r.status ?? r.signal}; no summary`)
  process.exit(r.status ?? 1)
}
for (const ext of ["json", "html"]) {
  const from = path.join(outDir, `mutation.${ext}`)
  if (fs.existsSync(from)) fs.renameSync(from, path.join(outDir, `${name}.${ext}`))
}
summarize(path.join(outDir, `${name}.json`), wall)
