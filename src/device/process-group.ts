// A compiler (gcc for the c target, nvcc for cuda) run as a child process in a process group of
// its own, asynchronously (the thread stays free to answer a stop request), and killed whole — the
// driver alone would leave cc1 or ptxas running — when it runs past its time limit, when the effect
// running it is interrupted, when this process exits, or (under the CLI's supervisor) when the
// supervisor ends a worker that did not stop in time.
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { publish, unpublish } from "./shared-groups.js"

export { killSharedGroups, shareRunningGroups } from "./shared-groups.js"

/** The process groups of the compilers running now: killed when this process exits. */
const running = new Set<number>()
let exitHook = false

/** Kills a compiler's process group (the driver, cc1, as, ld), or the driver when the group is gone. */
const killGroup = (pid: number | undefined, child: { kill: (s: NodeJS.Signals) => boolean }): void => {
  try {
    if (pid !== undefined) process.kill(-pid, "SIGKILL")
  } catch {
    child.kill("SIGKILL")
  }
}

export type RunResult = { code: number | null; stderr: string; spawnError?: string; timedOut?: boolean }

/**
 * Runs a compiler in a process group of its own, killed whole (killing the driver alone leaves
 * cc1 compiling on) when it runs past `timeoutMs`, when the effect is interrupted, or when this
 * process exits.
 */
export const runInGroup = (cmd: string, args: readonly string[], timeoutMs?: number): Effect.Effect<RunResult> =>
  Effect.callback<RunResult>((resume) => {
    if (!exitHook) {
      exitHook = true
      process.once("exit", () => {
        for (const pid of running) killGroup(pid, { kill: () => false })
      })
    }
    const child = spawn(cmd, args, { stdio: ["ignore", "ignore", "pipe"], detached: true })
    const pid = child.pid
    if (pid !== undefined) {
      running.add(pid)
      publish(pid)
    }
    let stderr = ""
    let timedOut = false
    let done = false
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => {
      timedOut = true
      killGroup(pid, child)
    }, timeoutMs)
    const finish = (r: RunResult) => {
      if (done) return
      done = true
      clearTimeout(timer)
      if (pid !== undefined) {
        running.delete(pid)
        unpublish(pid)
      }
      resume(Effect.succeed(r))
    }
    child.stderr.on("data", (d: unknown) => (stderr += String(d)))
    child.on("error", (e) => finish({ code: null, stderr, spawnError: e.message }))
    child.on("close", (code) => finish({ code, stderr, ...(timedOut ? { timedOut } : {}) }))
    return Effect.sync(() => {
      if (done) return
      done = true
      clearTimeout(timer)
      killGroup(pid, child)
      if (pid !== undefined) {
        running.delete(pid)
        unpublish(pid)
      }
    })
  })

