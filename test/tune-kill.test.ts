// A tuner killed with SIGKILL mid-run (the CLI bundled into a folder of this test's own, tuning a
// 1x1-conv model on c, quick to build): every line of its log still decodes, its measuring child
// dies with it, and the same command resumes from the log — it measures no config twice, ends
// with the requested trial count and deletes the killed run's build folder. Skips, visibly, where
// gcc is absent.
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { randomTensor } from "../src/cli/inputs.js"
import { compilerAvailable } from "../src/device/c/build.js"
import { isTrial, parseLog } from "../src/search/records.js"
import { configKey } from "../src/search/task.js"
import { CLI } from "./support/dist.js"

let tmp = ""

const graph = makeGraph({
  opset: 13,
  inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 8, 12, 12] } }],
  outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 8, 12, 12] } }],
  initializers: new Map([
    ["w", randomTensor("float32", [8, 8, 1, 1], 1)],
    ["b", randomTensor("float32", [8], 2)],
  ]),
  nodes: [node("Conv", ["x", "w", "b"], ["c"]), node("Relu", ["c"], ["y"])],
})

const TRIALS = 12
const ARGS = ["tune", "conv.onnx", "--target", "c", "--log", "kill.jsonl", "--trials", String(TRIALS), "--tuner", "random", "--batch", "2", "--repeats", "1", "--min-repeat-ms", "1"]
const LOG = () => path.join(tmp, "kill.jsonl")
const lines = () => (fs.existsSync(LOG()) ? fs.readFileSync(LOG(), "utf8").split("\n").filter((l) => l !== "") : [])

/** Pids of the measuring children of tuner `pid` (they carry its pid in their environment). */
const childrenOf = (pid: number): number[] =>
  fs
    .readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        return fs.readFileSync(`/proc/${d}/environ`, "latin1").split("\0").includes(`TESSERA_MEASURE_PARENT=${pid}`)
      } catch {
        return false // gone, or not ours to read
      }
    })
    .map(Number)

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-tune-kill-"))
  fs.writeFileSync(path.join(tmp, "conv.onnx"), encodeOnnx(graph))
}, 120_000)
afterAll(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true })
})

describe.skipIf(!compilerAvailable() || process.platform !== "linux")("tessera tune killed with SIGKILL", () => {
  it("leaves a log whose every line decodes, and the same command resumes from it", async () => {
    const tuner = spawn(process.execPath, [CLI, ...ARGS], { cwd: tmp, stdio: ["ignore", "ignore", "pipe"] })
    let stderr = ""
    tuner.stderr.on("data", (d: unknown) => (stderr += String(d)))
    const exited = new Promise<NodeJS.Signals | null>((resolve) => tuner.on("exit", (_, signal) => resolve(signal)))
    // kill it once a few records are in and a candidate is being measured
    const t0 = Date.now()
    let measuring: number[] = []
    while (Date.now() - t0 < 30_000 && tuner.exitCode === null) {
      measuring = lines().length >= 3 ? childrenOf(tuner.pid!) : []
      if (measuring.length) break
      await sleep(5)
    }
    expect(measuring.length, `no measuring child seen with 3 records in the log; stderr: ${stderr}`).toBeGreaterThan(0)
    tuner.kill("SIGKILL")
    expect(await exited).toBe("SIGKILL")
    expect(fs.readdirSync(os.tmpdir()).filter((d) => d.startsWith(`tessera-tune-${tuner.pid}-`))).toHaveLength(1)

    const killed = parseLog(fs.readFileSync(LOG(), "utf8"))
    expect(killed.warnings).toEqual([])
    expect(killed.records.length).toBe(lines().length)
    expect(killed.records.length).toBeGreaterThanOrEqual(3)
    expect(killed.records.length).toBeLessThan(TRIALS)
    // the measuring child died with its parent (no orphan left running a kernel)
    for (let k = 0; k < 100 && childrenOf(tuner.pid!).length; k++) await sleep(20)
    expect(childrenOf(tuner.pid!)).toEqual([])

    const before = lines()
    const again = spawnSync(process.execPath, [CLI, ...ARGS], { cwd: tmp, encoding: "utf8", timeout: 60_000 })
    expect(again.status, again.stderr).toBe(0)
    expect(again.stderr).toContain(`(${before.length} records already)`)
    const after = parseLog(fs.readFileSync(LOG(), "utf8"))
    expect(after.warnings).toEqual([])
    const trials = after.records.filter(isTrial)
    expect(trials).toHaveLength(TRIALS)
    expect(lines().slice(0, before.length)).toEqual(before) // the old records are kept as they were
    expect(new Set(trials.map((r) => configKey(r.config))).size).toBe(TRIALS)
    // and the confirmation after the trials
    expect(after.records.filter((r) => !isTrial(r)).length).toBeGreaterThanOrEqual(2)
    for (const r of after.records) {
      expect(r.target).toBe("c")
      expect(r.error).toBeUndefined()
    }
    // the killed run's build folder was deleted by the next run
    expect(fs.readdirSync(os.tmpdir()).filter((d) => d.startsWith(`tessera-tune-${tuner.pid}-`))).toEqual([])
  }, 90_000)
})
