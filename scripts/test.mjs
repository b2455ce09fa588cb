// The test command: vitest over test/ and laws/, then one closing line `N passed, N failed`
// read from vitest's JSON reports (vitest's own summary is not a line CI recognises).
//
// Without arguments it runs in two phases: every file but the few that bound how fast a command
// stops after a signal, with every core busy; then those few alone. Their bounds (a second and a
// margin) are what a user sees on a machine doing one thing; run beside the other files on CI's two
// cores, the stop of `tune` read 1.5–1.6 s on the base and on the change alike (2026-11-27: 0.1–0.25 s
// alone, 0.8–1.6 s beside two busy loops). With arguments: one vitest run of exactly those.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"

/** The files whose tests time a command's stop after SIGINT / SIGTERM / --deadline. */
const STOP_TIMED = ["test/cli-bounds.test.ts", "test/quantize-cli.test.ts", "test/supervise-teardown.test.ts"]

fs.mkdirSync(".cache", { recursive: true })

/** One vitest run; its report's counts (a run with no report: one failure). */
const phase = (name, args) => {
  const report = `.cache/vitest-report${name}.json`
  fs.rmSync(report, { force: true })
  const r = spawnSync(process.execPath, ["node_modules/vitest/vitest.mjs", "run", "--reporter=default", "--reporter=json", `--outputFile.json=${report}`, ...args], { stdio: "inherit" })
  if (!fs.existsSync(report)) return { passed: 0, failed: 1, skipped: 0, ok: false }
  const j = JSON.parse(fs.readFileSync(report, "utf8"))
  // failed tests, plus files that failed without a failing test (a file that does not load)
  const brokenFiles = (j.testResults ?? []).filter((f) => f.status === "failed" && !(f.assertionResults ?? []).some((a) => a.status === "failed")).length
  let failed = (j.numFailedTests ?? 0) + brokenFiles
  if (r.status !== 0 && failed === 0) failed = 1
  return { passed: j.numPassedTests ?? 0, failed, skipped: (j.numPendingTests ?? 0) + (j.numTodoTests ?? 0), ok: r.status === 0 }
}

const given = process.argv.slice(2)
const runs = given.length ? [phase("", given)] : [phase("", STOP_TIMED.map((f) => `--exclude=${f}`)), phase("-stop-timed", STOP_TIMED)]
const sum = (k) => runs.reduce((n, r) => n + r[k], 0)
const failed = sum("failed")
const skipped = sum("skipped")
console.log(`${sum("passed")} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`)
process.exit(failed > 0 || runs.some((r) => !r.ok) ? 1 : 0)
