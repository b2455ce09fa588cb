// The supervisor (src/cli/supervise.ts) against a worker whose teardown is slow: once the worker has
// reported its stop (announceFinished), no grace period may end it and print a second line — the
// race the CI once saw under load with `quantize --deadline` — and the process ends at once, its
// teardown not waited for (a tune's worker took 0.4 s to over a second to tear down on a loaded
// machine, past the 1.5 s its stop is allowed). The worker here is a tiny script bundled from the
// real module: it waits for the stop flag, prints its one line, notes the time, announces that it
// has finished and then spends longer than the supervisor's grace tearing down.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { build } from "esbuild"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const SUPERVISE = path.resolve(__dirname, "../src/cli/supervise.ts")

/** Worker's teardown after it has reported: well past the supervisor's 800 ms grace. */
const TEARDOWN_MS = 6000

// the deadline leaves the worker time to start on a loaded machine (before it starts, a stop has no work to wait for)

const entry = (announce: boolean) => `
import * as fs from "node:fs"
import { pathToFileURL } from "node:url"
import { isMainThread } from "node:worker_threads"
import { announceFinished, announceStarted, commandInterrupt, supervise } from ${JSON.stringify(SUPERVISE)}
if (isMainThread) {
  supervise(pathToFileURL(__filename), ["fake", "--deadline", "3s"])
} else {
  announceStarted()
  const stop = commandInterrupt()
  const wait = () => {
    if (Atomics.load(stop.flag, 0) === 0) return void setTimeout(wait, 5)
    fs.writeSync(2, "tessera fake: interrupted (" + stop.reasons[Atomics.load(stop.flag, 0)] + "): stopped at the next check\\n")
    fs.writeFileSync(process.env.REPORTED_AT, String(Date.now()))
    ${announce ? "announceFinished(1)" : ""}
    const until = Date.now() + ${TEARDOWN_MS}
    while (Date.now() < until) {}
    process.exit(1)
  }
  wait()
}
`

let tmp: string
const bundle = async (name: string, announce: boolean): Promise<string> => {
  const out = path.join(tmp, name)
  await build({
    stdin: { contents: entry(announce), resolveDir: tmp, loader: "ts", sourcefile: `${name}.ts` },
    bundle: true,
    platform: "node",
    format: "cjs",
    outfile: out,
    // the native libc binding: resolved from the project's node_modules through NODE_PATH
    external: ["koffi"],
    logLevel: "silent",
  })
  return out
}

/** Runs the bundled script; with the time its worker reported its stop and the time the process had ended (epoch ms). */
const runIt = (script: string) => {
  const reportedAt = `${script}.reported`
  const r = spawnSync(process.execPath, [script], {
    encoding: "utf8",
    timeout: 20_000,
    env: { ...process.env, NODE_PATH: path.resolve(__dirname, "../node_modules"), REPORTED_AT: reportedAt },
  })
  return { ...r, endedAt: Date.now(), reportedAt: Number(fs.readFileSync(reportedAt, "utf8")) }
}

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-supervise-"))
})
afterAll(() => {
  fs.rmSync(tmp, { recursive: true, force: true })
})

describe("supervise: a worker that has reported its stop", () => {
  it("ends the process as soon as it has reported, quietly: one line on stderr, the deadline's exit code, its slow teardown not waited for", async () => {
    const script = await bundle("announces.cjs", true)
    const t0 = performance.now()
    const r = runIt(script)
    const ms = performance.now() - t0
    const lines = r.stderr.split("\n").filter((l) => l.length > 0)
    expect(lines).toEqual(["tessera fake: interrupted (the --deadline of 3s passed): stopped at the next check"])
    expect(r.status).toBe(124)
    // not left its 6 s of teardown
    expect(ms).toBeLessThan(3000 + TEARDOWN_MS - 2000)
    // nor ended a grace period (800 ms) after the report: ended on the announcement
    expect(r.endedAt - r.reportedAt).toBeLessThan(800)
  }, 30_000)

  it("without the announcement the same slow teardown is ended after the grace, with the supervisor's own line (the case the announcement exists for)", async () => {
    const r = runIt(await bundle("silent.cjs", false))
    const lines = r.stderr.split("\n").filter((l) => l.length > 0)
    expect(lines[0]).toBe("tessera fake: interrupted (the --deadline of 3s passed): stopped at the next check")
    expect(lines[1]).toMatch(/^tessera fake: interrupted \(the --deadline of 3s passed\): the work did not stop at a check within 800 ms and was ended$/)
    expect(r.status).toBe(124)
  }, 30_000)
})
