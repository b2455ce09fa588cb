// The command line under long work and hostile files (issue 19): --deadline, the first SIGINT /
// SIGTERM stopping the work with one typed line, external data that is a FIFO, and model names
// carrying terminal escape bytes. Models are hand-made with the graph helpers and the ONNX writer.
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { makeGraph, node, type Graph } from "../src/ast/graph/graph.js"
import { tensor } from "../src/ast/graph/tensor.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { readModelSync } from "../src/device/files.js"
import { serializeNpy } from "../src/device/npy.js"
import { modelBytes, rawInitializer, valueInfo } from "./cli-models.js"
import { CLI } from "./support/dist.js"

let tmp = ""

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-cli-bounds-"))
})
afterAll(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true })
})

const f32 = (shape: number[]) => ({ dtype: "float32" as const, shape })
const write = (name: string, g: Graph): string => {
  const f = path.join(tmp, name)
  fs.writeFileSync(f, encodeOnnx(g))
  return f
}

/** A Loop of 100,000 trips over a 256×256 MatMul and Tanh: minutes on the interpreter, with a node boundary every few ms. */
const slowLoop = (): Graph => {
  const n = 256
  const body = makeGraph({
    name: "b",
    opset: 13,
    inputs: [
      { name: "i", type: { dtype: "int64", shape: [] } },
      { name: "c", type: { dtype: "bool", shape: [] } },
      { name: "v", type: f32([n, n]) },
    ],
    outputs: [
      { name: "co", type: { dtype: "bool", shape: [] } },
      { name: "vo", type: f32([n, n]) },
    ],
    nodes: [node("Identity", ["c"], ["co"]), node("MatMul", ["v", "v"], ["m"]), node("Tanh", ["m"], ["vo"])],
  })
  return makeGraph({
    name: "slow",
    opset: 13,
    inputs: [{ name: "x", type: f32([n, n]) }],
    outputs: [{ name: "y", type: f32([n, n]) }],
    initializers: new Map([["M", tensor("int64", [], Float64Array.of(100_000))]]),
    nodes: [node("Loop", ["M", "", "x"], ["y"], { body: attr.graph(body) }, "slow_loop")],
  })
}

/** One 3000×3000 MatMul: tens of seconds inside one reference kernel, with no boundary to check at. */
const oneLongKernel = (): Graph =>
  makeGraph({ name: "mm", opset: 13, inputs: [{ name: "x", type: f32([3000, 3000]) }], outputs: [{ name: "y", type: f32([3000, 3000]) }], nodes: [node("MatMul", ["x", "x"], ["y"])] })

/**
 * A FIFO that stands for an input's .npy file, `bytes` (as `--input x=<(cat x.npy)` hands one over):
 * `fed()` writes them, as much as the pipe takes at each call, once the CLI has opened it to read
 * (before that, opening the other end fails with ENXIO), and says whether all are written — a sign
 * that the command's work is running (it reads its inputs after its model), so its signal handlers,
 * installed before the work starts, are in place.
 */
const inputFifo = (name: string, bytes: Uint8Array): { readonly file: string; readonly fed: () => boolean } => {
  const file = path.join(tmp, name)
  expect(spawnSync("mkfifo", [file]).status, "mkfifo is needed for this test").toBe(0)
  let fd: number | undefined
  let at = 0
  return {
    file,
    fed: () => {
      if (at === bytes.length) return true
      if (fd === undefined) {
        try {
          fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK)
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code === "ENXIO") return false // no reader yet
          throw e
        }
      }
      try {
        while (at < bytes.length) at += fs.writeSync(fd, bytes, at, bytes.length - at)
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EAGAIN") throw e // (the pipe is full: more at the next call)
        return false
      }
      fs.closeSync(fd)
      return true
    },
  }
}

/**
 * Runs the CLI (with `env` over this process's environment); with `signal`, sends it `afterMs` after
 * the start — with `afterRecord`, not before that file (in tmp) holds a whole line: the trials are
 * running; with `afterReady`, not before it returns true (polled every 25 ms). Resolves with its exit
 * and how long it took to stop after the signal.
 */
const cli = (
  args: readonly string[],
  signal?: { readonly name: NodeJS.Signals; readonly afterMs: number; readonly afterRecord?: string; readonly afterReady?: () => boolean },
  env?: NodeJS.ProcessEnv,
) =>
  new Promise<{ code: number | null; stdout: string; stderr: string; stopMs: number }>((resolve) => {
    const p = spawn(process.execPath, [CLI, ...args], { cwd: tmp, ...(env ? { env: { ...process.env, ...env } } : {}) })
    let stdout = ""
    let stderr = ""
    p.stdout.on("data", (d) => (stdout += d))
    p.stderr.on("data", (d) => (stderr += d))
    let sentAt = 0
    const recorded = () => signal?.afterRecord === undefined || (fs.existsSync(path.join(tmp, signal.afterRecord)) && fs.readFileSync(path.join(tmp, signal.afterRecord), "utf8").includes("\n"))
    const send = () => {
      if (p.exitCode !== null) return
      if (!recorded() || (signal?.afterReady !== undefined && !signal.afterReady())) return void setTimeout(send, 25)
      sentAt = performance.now()
      p.kill(signal!.name)
    }
    if (signal) setTimeout(send, signal.afterMs)
    p.on("close", (code) => resolve({ code, stdout, stderr, stopMs: sentAt ? performance.now() - sentAt : 0 }))
  })

const oneLine = (stderr: string): string => {
  const lines = stderr.split("\n").filter((l) => l.trim() !== "")
  expect(lines, stderr).toHaveLength(1)
  return lines[0]
}

describe("--deadline", () => {
  it("stops a run at the next node once it passes: one line, exit 124, no output written", async () => {
    const model = write("slow.onnx", slowLoop())
    const out = path.join(tmp, "deadline-out")
    const r = await cli(["run", model, "--deadline", "300ms", "--out", out])
    // (stopped at a check, or, on a machine slow enough that the commands had not loaded yet, before the work started)
    expect(oneLine(r.stderr)).toMatch(/^tessera run: (.*slow\.onnx: )?interrupted \(the --deadline of 300ms passed\): (stopped at (node|inferring node|pass|lowering group) |before the work started$)/)
    expect(r.code).toBe(124)
    expect(r.stdout).toBe("")
    expect(fs.existsSync(out)).toBe(false)
  }, 15_000)

  it("that is not a duration is a usage error (exit 2)", async () => {
    const r = await cli(["compile", write("slow2.onnx", slowLoop()), "--target", "js", "--out", path.join(tmp, "art"), "--deadline", "soon"])
    expect(oneLine(r.stderr)).toMatch(/^tessera compile: --deadline: 'soon' is not a duration like 30s, 500ms or 2m/)
    expect(r.code).toBe(2)
  }, 15_000)
})

describe("the first SIGINT / SIGTERM stops long work within a second, with one typed line", () => {
  for (const [sig, code] of [
    ["SIGINT", 130],
    ["SIGTERM", 143],
  ] as const)
    it(`${sig} while the interpreter runs a long Loop`, async () => {
      // (not before the CLI has read its input — its handlers are in place by then: signalled before
      // that, as a fixed delay did on a machine slow to start a process, the default action ended it silently)
      const x = inputFifo(`x-${sig}.npy`, serializeNpy(tensor("float32", [256, 256], new Float32Array(256 * 256).fill(0.5))))
      const feeding = setInterval(() => x.fed() && clearInterval(feeding), 10) // (fed as it is read)
      const r = await cli(["run", write(`slow-${sig}.onnx`, slowLoop()), "--input", `x=${x.file}`], { name: sig, afterMs: 1500, afterReady: x.fed })
      clearInterval(feeding)
      expect(oneLine(r.stderr)).toMatch(new RegExp(`^tessera run: .*interrupted \\(${sig}\\): (stopped at |before the work started$)`))
      expect(r.code).toBe(code)
      expect(r.stopMs).toBeLessThan(1000 + 500) // (a second, and a margin for a machine shared with other work)
    }, 15_000)

  it("work inside one kernel, which reaches no check, is ended after the grace period with the same kind of line", async () => {
    // (5 s: the signal must land inside the kernel, and a loaded machine took over 2.5 s to reach it)
    const r = await cli(["run", write("mm.onnx", oneLongKernel())], { name: "SIGINT", afterMs: 5000 })
    expect(oneLine(r.stderr)).toMatch(/^tessera run: .*mm\.onnx: interrupted \(SIGINT\): (the work did not stop at a check within 800 ms and was ended|before the work started)$/)
    expect(r.code).toBe(130)
    expect(r.stopMs).toBeLessThan(1000 + 500)
  }, 15_000)
})

describe("bench, tune and inspect run under the same supervision (worker, --deadline, SIGINT / SIGTERM)", () => {
  const conv = (): Graph =>
    makeGraph({
      opset: 13,
      inputs: [{ name: "x", type: f32([1, 8, 10, 10]) }],
      outputs: [{ name: "y", type: f32([1, 8, 10, 10]) }],
      initializers: new Map([["w", tensor("float32", [8, 8, 3, 3], Float32Array.from({ length: 576 }, (_, k) => Math.sin(k)))]]),
      nodes: [node("Conv", ["x", "w"], ["c"], { pads: attr.ints([1, 1, 1, 1]) }), node("Relu", ["c"], ["y"])],
    })
  const lastLine = (stderr: string) => stderr.trim().split("\n").at(-1) ?? ""

  it("bench: --deadline stops the runs (exit 124, one line); a --deadline that is not a duration is a usage error", async () => {
    const model = write("bench-slow.onnx", slowLoop())
    const r = await cli(["bench", model, "--target", "interp", "--deadline", "2s"])
    expect(oneLine(r.stderr)).toMatch(/^tessera bench: .*interrupted \(the --deadline of 2s passed\): (stopped at |before the work started$)/)
    expect(r.code).toBe(124)
    const bad = await cli(["bench", model, "--deadline", "soon"])
    expect(oneLine(bad.stderr)).toMatch(/^tessera bench: --deadline: 'soon' is not a duration/)
    expect(bad.code).toBe(2)
  }, 30_000)

  it("bench: SIGTERM stops it within a second (exit 143)", async () => {
    const r = await cli(["bench", write("bench-term.onnx", slowLoop()), "--target", "interp"], { name: "SIGTERM", afterMs: 2500 })
    expect(oneLine(r.stderr)).toMatch(/^tessera bench: .*interrupted \(SIGTERM\)/)
    expect(r.code).toBe(143)
    expect(r.stopMs).toBeLessThan(1000 + 500)
  }, 30_000)

  it("tune: SIGINT stops the trials within a second (exit 130) with a typed line; the log stays whole and the next tune resumes from it", async () => {
    const model = write("tune-conv.onnx", conv())
    const args = ["tune", model, "--log", "stop.jsonl", "--repeats", "1", "--min-repeat-ms", "1", "--tuner", "random"]
    // (sent once a trial is logged: under load the model's compile can outlast a fixed 5 s)
    const r = await cli([...args, "--trials", "500"], { name: "SIGINT", afterMs: 5000, afterRecord: "stop.jsonl" })
    expect(lastLine(r.stderr)).toMatch(/^tessera tune: .*interrupted \(SIGINT\)/)
    expect(r.code).toBe(130)
    expect(r.stopMs).toBeLessThan(1000 + 500)
    const lines = fs.existsSync(path.join(tmp, "stop.jsonl")) ? fs.readFileSync(path.join(tmp, "stop.jsonl"), "utf8").trim().split("\n").filter(Boolean) : []
    for (const l of lines) expect(() => JSON.parse(l)).not.toThrow()
    // the lock is released, or (the worker ended by the grace period) stale and broken by the next run
    const next = await cli([...args, "--trials", String(lines.length + 2), "--confirm", "0"])
    expect(next.code, next.stderr).toBe(0)
    expect(fs.existsSync(path.join(tmp, "stop.jsonl.lock"))).toBe(false)
  }, 90_000)

  // (a gcc on PATH that is the real one, except for a library (-shared: a candidate's build), which
  // it "compiles" by starting a child that sleeps and waiting for it, as the driver waits for cc1)
  const realGcc = spawnSync("sh", ["-c", "command -v gcc"], { encoding: "utf8" }).stdout.trim()
  /** Is the process running? (A zombie waiting for its reaper is gone too: PID 1 in these containers does not reap.) */
  const alive = (pid: number): boolean => {
    try {
      process.kill(pid, 0)
    } catch {
      return false
    }
    const stat = fs.existsSync(`/proc/${pid}/stat`) ? fs.readFileSync(`/proc/${pid}/stat`, "utf8") : ""
    return !/^\d+ \(.*\) Z/.test(stat)
  }
  it.skipIf(realGcc === "")("tune --target c: SIGINT during a candidate's gcc run stops within a second (exit 130), the compiler's process group killed", async () => {
    const bin = fs.mkdtempSync(path.join(tmp, "fake-cc-"))
    const pidFile = path.join(bin, "cc1.pid")
    fs.writeFileSync(
      path.join(bin, "gcc"),
      `#!/bin/sh\ncase "$*" in *-shared*) ;; *) exec ${realGcc} "$@";; esac\nsleep 60 &\necho $! > ${pidFile}\nwait\n`,
      { mode: 0o755 },
    )
    const model = write("tune-conv-c.onnx", conv())
    const r = await cli(
      ["tune", model, "--target", "c", "--log", "c-stop.jsonl", "--trials", "50", "--repeats", "1", "--min-repeat-ms", "1", "--tuner", "random"],
      // (sent once the fake compiler's child has written its pid: a build is running)
      { name: "SIGINT", afterMs: 500, afterRecord: path.relative(tmp, pidFile) },
      { PATH: `${bin}${path.delimiter}${process.env.PATH ?? ""}` },
    )
    expect(lastLine(r.stderr)).toMatch(/^tessera tune: .*interrupted \(SIGINT\)/)
    expect(r.code).toBe(130)
    expect(r.stopMs).toBeLessThan(1000 + 500)
    const cc1 = Number(fs.readFileSync(pidFile, "utf8"))
    // (killed with its group; a moment for the kernel to reap it)
    for (let k = 0; k < 20 && alive(cc1); k++) await new Promise((res) => setTimeout(res, 25))
    expect(alive(cc1)).toBe(false)
    // nothing was measured, so nothing was recorded: no trial stands for the stopped build
    const log = path.join(tmp, "c-stop.jsonl")
    expect(fs.existsSync(log) ? fs.readFileSync(log, "utf8") : "").toBe("")
  }, 60_000)

  // (the host's FMA probe, run once per CPU on a fresh cache folder: a gcc on PATH that is the real
  // one, except for the probe's compile (-ffp-contract=fast), which it stalls in a sleeping child)
  it.skipIf(realGcc === "")("run: SIGINT during the host's gcc probe (a fresh cache) stops at a check within a second (exit 130), the probe's process group killed, nothing cached", async () => {
    const bin = fs.mkdtempSync(path.join(tmp, "fake-probe-cc-"))
    const cache = fs.mkdtempSync(path.join(tmp, "fresh-cache-"))
    const pidFile = path.join(bin, "probe.pid")
    fs.writeFileSync(
      path.join(bin, "gcc"),
      `#!/bin/sh\ncase "$*" in *-ffp-contract=fast*) ;; *) exec ${realGcc} "$@";; esac\nsleep 60 &\necho $! > ${pidFile}\nwait\n`,
      { mode: 0o755 },
    )
    const r = await cli(
      ["run", write("probe-conv.onnx", conv()), "--target", "interp"],
      // (sent once the fake compiler's child has written its pid: the probe is running)
      { name: "SIGINT", afterMs: 0, afterRecord: path.relative(tmp, pidFile) },
      { PATH: `${bin}${path.delimiter}${process.env.PATH ?? ""}`, TESSERA_CACHE_DIR: cache },
    )
    // (stopped at the work's next check, not ended after the grace period: the probe saw the flag)
    expect(oneLine(r.stderr)).toMatch(/^tessera run: .*interrupted \(SIGINT\): stopped at /)
    expect(r.code).toBe(130)
    expect(r.stopMs).toBeLessThan(1000 + 500)
    const child = Number(fs.readFileSync(pidFile, "utf8"))
    for (let k = 0; k < 20 && alive(child); k++) await new Promise((res) => setTimeout(res, 25))
    expect(alive(child)).toBe(false)
    // a stopped probe measured nothing: nothing cached for the next run to trust
    const cpu = path.join(cache, "cpu")
    expect(fs.existsSync(cpu) ? fs.readdirSync(cpu) : []).toEqual([])
  }, 60_000)

  it("tune and inspect: --deadline checked (a usage error when not a duration), and honoured", async () => {
    const model = write("tune-conv2.onnx", conv())
    const bad = await cli(["tune", model, "--log", "d.jsonl", "--deadline", "later"])
    expect(oneLine(bad.stderr)).toMatch(/^tessera tune: --deadline: 'later' is not a duration/)
    expect(bad.code).toBe(2)
    const r = await cli(["tune", model, "--log", "d.jsonl", "--trials", "500", "--repeats", "1", "--min-repeat-ms", "1", "--tuner", "random", "--deadline", "6s"])
    expect(lastLine(r.stderr)).toMatch(/^tessera tune: .*interrupted \(the --deadline of 6s passed\)/)
    expect(r.code).toBe(124)
    const badInspect = await cli(["inspect", model, "--deadline", "x"])
    expect(badInspect.code).toBe(2)
    const ok = await cli(["inspect", model, "--fused", "--deadline", "60s"])
    expect(ok.code, ok.stderr).toBe(0)
    expect(ok.stdout).toMatch(/Conv/)
  }, 60_000)
})

describe("external data that is not a regular file", () => {
  it("a FIFO in the model's folder is refused without blocking open()", () => {
    const dir = fs.mkdtempSync(path.join(tmp, "fifo-"))
    const made = spawnSync("mkfifo", [path.join(dir, "weights.bin")])
    expect(made.status, "mkfifo is needed for this test").toBe(0)
    const bytes = modelBytes({
      inputs: [valueInfo("x", "float32", [2])],
      outputs: [valueInfo("y", "float32", [4])],
      initializers: [{ ...rawInitializer("w", [2n]), dataLocation: 1, externalData: [{ $typeName: "onnx.StringStringEntryProto", key: "location", value: "weights.bin" }] }],
      nodes: [{ op: "Concat", inputs: ["x", "w"], outputs: ["y"], attrs: [] }],
    })
    fs.writeFileSync(path.join(dir, "m.onnx"), bytes)
    let err: unknown
    try {
      readModelSync(path.join(dir, "m.onnx"))
    } catch (e) {
      err = e
    }
    expect(err).toMatchObject({ _tag: "DecodeError" })
    expect((err as Error).message).toBe("cannot decode external data 'weights.bin': is a FIFO (named pipe), not a regular file; external data must be a regular file inside the model's folder")
  }, 2000)

  it("a symbolic link that leads out of the model's folder is refused; one to a regular file inside it is read", () => {
    const outside = fs.mkdtempSync(path.join(tmp, "outside-"))
    fs.writeFileSync(path.join(outside, "secret.bin"), Buffer.from(new Float32Array([7, 8]).buffer))
    const dir = fs.mkdtempSync(path.join(tmp, "links-"))
    fs.symlinkSync(path.join(outside, "secret.bin"), path.join(dir, "weights.bin"))
    const model = (location: string) =>
      modelBytes({
        inputs: [valueInfo("x", "float32", [2])],
        outputs: [valueInfo("y", "float32", [4])],
        initializers: [{ ...rawInitializer("w", [2n]), dataLocation: 1, externalData: [{ $typeName: "onnx.StringStringEntryProto", key: "location", value: location }] }],
        nodes: [{ op: "Concat", inputs: ["x", "w"], outputs: ["y"], attrs: [] }],
      })
    fs.writeFileSync(path.join(dir, "m.onnx"), model("weights.bin"))
    expect(() => readModelSync(path.join(dir, "m.onnx"))).toThrow(expect.objectContaining({ _tag: "DecodeError", message: expect.stringMatching(/links outside the model's folder/) }))
    // a link inside the folder to a regular file inside it is followed at the check, and read
    fs.writeFileSync(path.join(dir, "real.bin"), Buffer.from(new Float32Array([3, 4]).buffer))
    fs.symlinkSync("real.bin", path.join(dir, "inside.bin"))
    fs.writeFileSync(path.join(dir, "m2.onnx"), model("inside.bin"))
    expect([...readModelSync(path.join(dir, "m2.onnx")).initializers.get("w")!.data]).toEqual([3, 4])
  }, 2000)
})

describe("inspect's text output", () => {
  it("shows the escape bytes in a model's names instead of sending them to the terminal", () => {
    const evil = "x\u001b[2J\u001b]0;pwned\u0007\u202e"
    const g = makeGraph({ name: `g${evil}`, opset: 13, inputs: [{ name: evil, type: f32([2]) }], outputs: [{ name: "y", type: f32([2]) }], nodes: [node("Relu", [evil], ["y"], {}, `relu${evil}`)] })
    const r = spawnSync(process.execPath, [CLI, "inspect", write("evil.onnx", g)], { cwd: tmp, encoding: "utf8" })
    expect(r.status, r.stderr).toBe(0)
    expect(r.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e]/)
    expect(r.stdout).toContain("x\\x1b[2J\\x1b]0;pwned\\x07\\u{202e}")
    expect(r.stdout).toMatch(/relux\\x1b\[2J/)
  })
})
