// A compiler's process group listed in shared memory for the supervisor's main thread
// (src/device/process-group.ts): a worker's exit hooks do not run when the supervisor ends it, and
// an nvcc of a tune --target cuda batch (1.3 MB of CUDA, minutes of cicc) compiled on long after
// the command had ended. The group is listed while it runs, unlisted when it ends, and
// killSharedGroups kills it whole (the driver and its children) from another thread's view.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Fiber } from "effect"
import { describe, expect, it } from "vitest"
import { killSharedGroups, runInGroup, shareRunningGroups } from "../src/device/process-group.js"

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const until = async (ok: () => boolean, ms: number): Promise<boolean> => {
  const t0 = Date.now()
  while (!ok()) {
    if (Date.now() - t0 > ms) return false
    await new Promise((r) => setTimeout(r, 20))
  }
  return true
}

describe.skipIf(spawnSync("sh", ["-c", "true"]).status !== 0)("compiler process groups shared with the supervisor", () => {
  it("a running group is listed, killSharedGroups ends it and its child, and a finished one is unlisted", async () => {
    const slots = new Int32Array(new SharedArrayBuffer(4 * 8))
    shareRunningGroups(slots)
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-groups-"))
    const childPid = path.join(dir, "child.pid")
    // a driver that starts a child of its own (as nvcc starts cicc), both sleeping
    const fiber = Effect.runFork(runInGroup("sh", ["-c", `sleep 30 & echo $! > ${childPid}; wait`]))
    expect(await until(() => slots.some((p) => p > 0) && fs.existsSync(childPid) && fs.readFileSync(childPid, "utf8").trim() !== "", 5000)).toBe(true)
    const group = slots.find((p) => p > 0)!
    const child = Number(fs.readFileSync(childPid, "utf8"))
    expect(alive(group)).toBe(true)
    expect(alive(child)).toBe(true)
    killSharedGroups(slots)
    expect([...slots]).toEqual(new Array(8).fill(0))
    const r = await Effect.runPromise(Fiber.join(fiber))
    expect(r.code).toBeNull()
    expect(await until(() => !alive(child), 2000)).toBe(true)
    // a run that ends by itself leaves its slot free
    const quick = await Effect.runPromise(runInGroup("sh", ["-c", "exit 3"]))
    expect(quick.code).toBe(3)
    expect([...slots]).toEqual(new Array(8).fill(0))
    fs.rmSync(dir, { recursive: true, force: true })
  }, 20_000)
})
