// A compiler (gcc for the c target, nvcc for cuda) run as a child process in a process group of
// its own, asynchronously (the thread stays free to answer a stop request), and killed whole — the
// driver alone would leave cc1 or ptxas running — when it runs past its time limit, when the effect
// running it is interrupted, when this process exits, or (under the CLI's supervisor) when the
// supervisor ends a worker that did not stop in time.
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { publish, stopRequested, unpublish } from "./shared-groups.js"

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
/** Kills the groups still running when this process exits (installed once). */
const hookExit = (): void => {
  if (exitHook) return
  exitHook = true
  process.once("exit", () => {
    for (const pid of running) killGroup(pid, { kill: () => false })
  })
}

export const runInGroup = (cmd: string, args: readonly string[], timeoutMs?: number): Effect.Effect<RunResult> =>
  Effect.callback<RunResult>((resume) => {
    hookExit()
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


export type ProbeResult = { code: number | null; stdout: string; stopped?: true; timedOut?: true }

/** Between two looks at a probe's status file. */
const PROBE_POLL_MS = 5

/**
 * A probe of the host (gcc compiling a measurement and the program it built: ./fma.ts, ./peak.ts;
 * `cc --version`: c/build.ts compilerIdentity) for a caller that answers synchronously. Like
 * runInGroup, the child runs in a process group of its own, listed for the supervisor and killed
 * whole at this process's exit; the thread waits by polling (sleeping PROBE_POLL_MS between looks)
 * for the status file a shell beside the command writes when it ends, instead of blocking in
 * spawnSync's native wait, so it sees the supervisor's stop flag: on a stop (or past `timeoutMs`)
 * the group is killed and the result says so (`stopped`, `timedOut`; code null). Its stdout is
 * returned; its stderr is dropped. A command that cannot be started: code 127 (the shell's).
 */
export const runProbeSync = (cmd: string, args: readonly string[], timeoutMs?: number): ProbeResult => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-probe-"))
  const status = path.join(dir, "status")
  const out = path.join(dir, "out")
  try {
    hookExit()
    const fd = fs.openSync(out, "w", 0o600)
    let pid: number | undefined
    try {
      // (the status written to a temporary name, then renamed: never read half-written)
      const script = 'st=$1; shift; "$@"; echo $? > "$st.tmp" && mv "$st.tmp" "$st"'
      const child = spawn("/bin/sh", ["-c", script, "sh", status, cmd, ...args], { stdio: ["ignore", fd, "ignore"], detached: true })
      child.on("error", () => {}) // (no shell: seen below as a probe that never ends — pid undefined)
      pid = child.pid
    } finally {
      fs.closeSync(fd)
    }
    if (pid === undefined) return { code: null, stdout: "" }
    running.add(pid)
    publish(pid)
    const sleeper = new Int32Array(new SharedArrayBuffer(4))
    const t0 = Date.now()
    let result: ProbeResult | undefined
    try {
      while (result === undefined) {
        if (fs.existsSync(status)) result = { code: Number(fs.readFileSync(status, "utf8").trim()), stdout: "" }
        else if (stopRequested()) result = { code: null, stdout: "", stopped: true }
        else if (timeoutMs !== undefined && Date.now() - t0 > timeoutMs) result = { code: null, stdout: "", timedOut: true }
        else Atomics.wait(sleeper, 0, 0, PROBE_POLL_MS)
      }
    } finally {
      // (after its status is written the shell only exits; the group is killed either way: nothing of it is left behind)
      killGroup(pid, { kill: () => false })
      running.delete(pid)
      unpublish(pid)
    }
    return result.code === null ? result : { ...result, stdout: fs.readFileSync(out, "utf8") }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
