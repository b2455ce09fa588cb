// The test command: vitest over test/ and laws/, then one closing line `N passed, N failed`
// read from vitest's JSON report (vitest's own summary is not a line CI recognises).
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"

fs.mkdirSync(".cache", { recursive: true })
const report = ".cache/vitest-report.json"
fs.rmSync(report, { force: true })
const r = spawnSync(
  process.execPath,
  ["node_modules/vitest/vitest.mjs", "run", "--reporter=default", "--reporter=json", `--outputFile.json=${report}`, ...process.argv.slice(2)],
  { stdio: "inherit" },
)
let passed = 0
let failed = 0
let skipped = 0
if (fs.existsSync(report)) {
  const j = JSON.parse(fs.readFileSync(report, "utf8"))
  passed = j.numPassedTests ?? 0
  // failed tests, plus files that failed without a failing test (a file that does not load)
  const brokenFiles = (j.testResults ?? []).filter((f) => f.status === "failed" && !(f.assertionResults ?? []).some((a) => a.status === "failed")).length
  failed = (j.numFailedTests ?? 0) + brokenFiles
  skipped = (j.numPendingTests ?? 0) + (j.numTodoTests ?? 0)
  if (r.status !== 0 && failed === 0) failed = 1
} else {
  failed = 1
}
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`)
process.exit(failed > 0 || r.status !== 0 ? 1 : 0)
