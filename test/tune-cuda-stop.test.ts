// `tessera tune --target cuda` stops within a second of SIGTERM (issue 19; seen on a GPU: it ran on
// past its grace). Without a GPU: the driver is the fake libcuda the driver tests use
// (test/support/fake-libcuda.c, $TESSERA_LIBCUDA) and nvcc a script ($CUDA_HOME/bin/nvcc). Two ways
// the work held the thread: nvcc run by spawnSync (now a child process in its own group, killed
// when the batch is interrupted), and a driver call that does not return (no stop request reaches
// it: the supervisor ends the process by the signal once the worker has not stopped in time).
// Skips, visibly, where gcc is absent (it builds the fake driver).
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { randomTensor } from "../src/cli/inputs.js"
import { compilerAvailable } from "../src/device/c/build.js"
import { CLI, ROOT } from "./support/dist.js"

const HAVE_GCC = compilerAvailable()
let tmp = ""

const graph = makeGraph({
  opset: 13,
  inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 64] } }],
  outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 32] } }],
  initializers: new Map([["w", randomTensor("float32", [64, 32], 1)]]),
  nodes: [node("MatMul", ["x", "w"], ["m"]), node("Relu", ["m"], ["y"])],
})

beforeAll(() => {
  if (!HAVE_GCC) return
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-tune-cuda-stop-"))
  fs.writeFileSync(path.join(tmp, "mm.onnx"), encodeOnnx(graph))
  const cc = spawnSync("gcc", ["-shared", "-fPIC", "-O1", "-o", path.join(tmp, "libcuda.so"), path.join(ROOT, "test", "support", "fake-libcuda.c")], { encoding: "utf8" })
  if (cc.status !== 0) throw new Error(`fake libcuda: ${cc.stderr}`)
}, 120_000)
afterAll(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true })
})

/** A fake nvcc in `<tmp>/<name>/bin`: `--version` answers; a build writes its pid to `<tmp>/<name>/pid`, then `body`. */
const fakeNvcc = (name: string, body: string): { home: string; pidFile: string } => {
  const home = path.join(tmp, name)
  fs.mkdirSync(path.join(home, "bin"), { recursive: true })
  const pidFile = path.join(home, "pid")
  fs.writeFileSync(
    path.join(home, "bin", "nvcc"),
    `#!/bin/sh\nif [ "$1" = "--version" ]; then echo "fake nvcc"; exit 0; fi\nout=""; prev=""; for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done\necho $$ > "${pidFile}"\n${body}\n`,
  )
  fs.chmodSync(path.join(home, "bin", "nvcc"), 0o755)
  return { home, pidFile }
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Starts tune --target cuda, sends SIGTERM once `ready()` holds, and gives how long it took to exit after it, its code and stderr. */
const tuneUntil = async (env: Record<string, string>, ready: () => boolean): Promise<{ ms: number; code: number | null; signal: string | null; stderr: string }> => {
  const child = spawn(process.execPath, [CLI, "tune", "mm.onnx", "--target", "cuda", "--log", `${env.NAME}.jsonl`, "--trials", "4", "--batch", "2", "--repeats", "1", "--min-repeat-ms", "1", "--tuner", "random"], {
    cwd: tmp,
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  })
  let stderr = ""
  child.stderr.on("data", (d) => (stderr += String(d)))
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })))
  const t0 = Date.now()
  while (!ready()) {
    if (Date.now() - t0 > 60_000) throw new Error(`never ready: ${stderr}`)
    if (child.exitCode !== null) throw new Error(`exited before it was ready (${child.exitCode}): ${stderr}`)
    await new Promise((r) => setTimeout(r, 50))
  }
  await new Promise((r) => setTimeout(r, 200))
  const t1 = Date.now()
  child.kill("SIGTERM") // the tuner's process alone, as a job scheduler sends it
  const { code, signal } = await exited
  return { ms: Date.now() - t1, code, signal, stderr }
}

describe.skipIf(!HAVE_GCC)("tune --target cuda and SIGTERM", () => {
  it("while nvcc builds the candidates: stopped within a second (exit 143, one typed line), nvcc killed, no build folder left", async () => {
    const nvcc = fakeNvcc("slow-nvcc", "sleep 30")
    const cache = path.join(tmp, "cache-a")
    const r = await tuneUntil({ NAME: "a", CUDA_HOME: nvcc.home, TESSERA_LIBCUDA: path.join(tmp, "libcuda.so"), TESSERA_CACHE_DIR: cache }, () => fs.existsSync(nvcc.pidFile))
    expect(r.ms, r.stderr).toBeLessThan(1000)
    expect(r.code).toBe(143)
    expect(r.stderr.trim().split("\n").at(-1)).toMatch(/^tessera tune: .*interrupted \(SIGTERM\)/)
    const pid = Number(fs.readFileSync(nvcc.pidFile, "utf8"))
    for (let k = 0; k < 20 && alive(pid); k++) await new Promise((r) => setTimeout(r, 50))
    expect(alive(pid)).toBe(false)
    expect(fs.readdirSync(path.join(cache, "cuda")).filter((n) => n.startsWith("build-"))).toEqual([])
  }, 120_000)

  it("inside a driver call that does not return: the process still ends (exit 143) within the grace and 600 ms", async () => {
    // nvcc writes a module the fake driver takes (its first byte 'T'), whose load then takes 30 s
    const nvcc = fakeNvcc("quick-nvcc", `printf 'T' > "$out"`)
    const r = await tuneUntil(
      { NAME: "b", CUDA_HOME: nvcc.home, TESSERA_LIBCUDA: path.join(tmp, "libcuda.so"), TESSERA_CACHE_DIR: path.join(tmp, "cache-b"), TESSERA_FAKE_CUDA_LOAD_MS: "30000" },
      () => fs.existsSync(nvcc.pidFile),
    )
    // (the grace, 800 ms, then at most 600 ms for the worker to stop before the process ends without it)
    expect(r.ms, r.stderr).toBeLessThan(800 + 600 + 400)
    expect(r.code).toBe(143)
    expect(r.stderr.trim().split("\n").at(-1)).toMatch(/^tessera tune: .*interrupted \(SIGTERM\): the work did not stop at a check within 800 ms and was ended$/)
  }, 120_000)
})
