// Stopping long work: `tessera run`, `compile`, `bench`, `tune`, `inspect` and `quantize` do their work on a worker thread while
// the main thread owns the signals and the clock. Synchronous work (a pass, a lowering, a run of
// the interpreter) cannot see a signal handler run on its own thread, so the main thread answers
// SIGINT / SIGTERM / the --deadline by setting a flag in shared memory; the stages read that flag,
// handed to them as data (an Interrupt), at each pass, group, node and kernel boundary, and fail
// with InterruptedError, which the command reports as its one line. Work that does not reach a
// check within a second (a native kernel, a compiler run) is ended by the main thread, which then
// prints the line itself. A second signal ends it at once. Once the work has reported (its line
// printed, its finalizers run: announceFinished), a stop ends the process at once, without waiting
// for the worker thread's teardown. Ending it: the worker is terminated and
// the process exits once it has ended; a worker inside a native call (a driver call, a synchronous
// child process) is not ended until that call returns — and process.exit waits for it — so if it
// has not ended within HARD_EXIT_MS the process ends at once with the same exit code (libc's
// _exit, which waits for no thread).
import * as fs from "node:fs"
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads"
import type { Interrupt } from "../ast/graph/errors.js"
import { exitNow } from "../device/exit-now.js"
import { killSharedGroups, shareRunningGroups, shareStopFlag } from "../device/shared-groups.js"
import { printable } from "./printable.js"

/** Flag values: why the work is asked to stop. */
const SIGINT = 1
const SIGTERM = 2
const DEADLINE = 3

/** Exit codes as a shell reports them: 128 + the signal; 124 for a deadline, as timeout(1). */
const EXIT_CODE: Readonly<Record<number, number>> = { [SIGINT]: 130, [SIGTERM]: 143, [DEADLINE]: 124 }

/** How long the work has to reach a check after a stop request before it is ended. */
const GRACE_MS = 800

/** How long an ended worker may take to stop (its heap torn down, on a loaded machine hundreds of ms) before the process ends without waiting for it. */
const HARD_EXIT_MS = 600

/** Ends this process now with the stop's exit code, without waiting for a worker stuck in a native call (libc's _exit: src/device/exit-now.ts). */
const hardExit = (why: number): void => {
  exitNow(EXIT_CODE[why])
}

/** A duration: `30s`, `500ms`, `2m`, `1.5h`, or a plain number of seconds; undefined if it is not one. */
export const parseDeadline = (text: string): number | undefined => {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(text)
  if (!m) return undefined
  const ms = Number(m[1]) * ({ ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const)[(m[2] ?? "s") as "ms" | "s" | "m" | "h"]
  return Number.isFinite(ms) && ms > 0 && ms <= 2 ** 31 - 1 ? ms : undefined
}

/** The value of `--deadline` on a command line (`--deadline X` or `--deadline=X`). */
const deadlineArg = (argv: readonly string[]): string | undefined => {
  for (let k = 0; k < argv.length; k++) {
    if (argv[k] === "--deadline") return argv[k + 1]
    if (argv[k].startsWith("--deadline=")) return argv[k].slice("--deadline=".length)
  }
  return undefined
}

interface WorkerInput {
  readonly supervised: true
  readonly flag: SharedArrayBuffer
  readonly reasons: Readonly<Record<number, string>>
  /** The compiler process groups the worker runs now (src/device/process-group.ts): killed when the worker is ended. */
  readonly groups: SharedArrayBuffer
}

/** Compilers a worker may run at once and still have listed for the supervisor (a tune's nvcc and gcc runs are a few). */
const GROUP_SLOTS = 64

const input = (): WorkerInput | undefined =>
  !isMainThread && typeof workerData === "object" && workerData !== null && (workerData as { supervised?: unknown }).supervised === true ? (workerData as WorkerInput) : undefined

/** The stop flag this command's work must check: set when it runs under the supervisor. */
export const commandInterrupt = (): Interrupt | undefined => {
  const w = input()
  return w ? { flag: new Int32Array(w.flag), reasons: w.reasons } : undefined
}

/** Is this thread the worker of a supervised command? */
export const isSupervisedWorker = (): boolean => input() !== undefined

/**
 * In the worker: stdout and stderr written straight to the process's descriptors, synchronously,
 * so that nothing is lost or reordered when the thread ends (a worker's streams are otherwise
 * relayed through the main thread). A reader that stops early (`| head`) is not an error.
 */
export const writeStdioDirectly = (): void => {
  for (const [stream, fd] of [
    [process.stdout, 1],
    [process.stderr, 2],
  ] as const) {
    stream.write = ((chunk: string | Uint8Array, encoding?: unknown, cb?: unknown) => {
      try {
        fs.writeSync(fd, typeof chunk === "string" ? Buffer.from(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8") : chunk)
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "EPIPE") process.exit(0)
        throw e
      }
      const done = typeof encoding === "function" ? encoding : cb
      if (typeof done === "function") (done as () => void)()
      return true
    }) as typeof stream.write
  }
}

/**
 * In the worker, once the command has its exit code and has printed what it reports (a stop's
 * InterruptedError line included) and its finalizers have run (the log's lock released, its build
 * folder removed): the work is over, so no grace period may end it and print a second line, and a
 * stop does not wait for the thread's teardown (on a loaded machine 0.4 s, and over a second with
 * a measuring worker of its own still starting). `code`: the command's exit code, when known.
 */
export const announceFinished = (code?: number): void => {
  if (input()) parentPort?.postMessage({ finished: true, code })
}

/** In the worker, once the commands are loaded: from now on the work checks the flag. */
export const announceStarted = (): void => {
  const w = input()
  if (w) {
    shareRunningGroups(new Int32Array(w.groups))
    shareStopFlag(new Int32Array(w.flag))
  }
  parentPort?.postMessage("started")
}

/** Commands whose work runs under the supervisor. */
export const SUPERVISED_COMMANDS: ReadonlySet<string> = new Set(["run", "compile", "bench", "tune", "inspect", "quantize"])

/**
 * The main thread of a supervised command: starts `script` as a worker with the same arguments,
 * relays SIGINT / SIGTERM and the --deadline to it through the flag, and exits with its code (or
 * the signal's, when it was stopped).
 */
export const supervise = (script: URL, argv: readonly string[]): void => {
  const command = argv[0]
  const flag = new Int32Array(new SharedArrayBuffer(4))
  const groups = new Int32Array(new SharedArrayBuffer(4 * GROUP_SLOTS))
  const deadlineText = deadlineArg(argv)
  const deadlineMs = deadlineText !== undefined ? parseDeadline(deadlineText) : undefined
  const reasons = { [SIGINT]: "SIGINT", [SIGTERM]: "SIGTERM", [DEADLINE]: `the --deadline of ${deadlineText ?? ""} passed` }
  const worker = new Worker(script, { argv: [...argv], workerData: { supervised: true, flag: flag.buffer, reasons, groups: groups.buffer } satisfies WorkerInput })
  let stopping = 0
  let grace: NodeJS.Timeout | undefined
  let ending = false
  const end = () => {
    // the worker's compilers first: its own exit hooks do not run when it is ended from here
    killSharedGroups(groups)
    if (ending) return hardExit(stopping) // asked again while ending: now
    ending = true
    // the work did not reach a check in time: say so here, and stop everything
    const model = argv[1] && !argv[1].startsWith("-") ? `${argv[1]}: ` : ""
    const what = started ? `the work did not stop at a check within ${GRACE_MS} ms and was ended` : "before the work started"
    // (a worker that has reported printed its one line: its teardown is ended without a second)
    if (!finished) fs.writeSync(2, printable(`tessera ${command}: ${model}interrupted (${reasons[stopping as 1 | 2 | 3]}): ${what}`) + "\n")
    const code = EXIT_CODE[stopping]
    const why = stopping
    const hard = setTimeout(() => {
      killSharedGroups(groups)
      hardExit(why)
    }, HARD_EXIT_MS)
    void worker.terminate().then(() => {
      clearTimeout(hard)
      killSharedGroups(groups)
      process.exit(code)
    })
  }
  // until the worker has loaded the commands it checks nothing and has nothing to clean up
  let started = false
  // once the work has reported (announceFinished) only the thread's teardown is left: a stop then
  // ends the process at once, without a line of its own (the work printed the one line)
  let finished = false
  // the exit code the worker reported with its announcement (undefined: not said)
  let finishedCode: number | undefined
  // stopping, once the work has reported: its one line is printed and its finalizers have run, so
  // the process ends now — the thread's teardown is not waited for (process.exit would join it)
  const endReported = () => {
    killSharedGroups(groups)
    exitNow(finishedCode === 0 ? 0 : EXIT_CODE[stopping])
  }
  worker.on("message", (m: unknown) => {
    if (typeof m === "object" && m !== null && (m as { finished?: unknown }).finished === true) {
      finished = true
      const code = (m as { code?: unknown }).code
      finishedCode = typeof code === "number" ? code : undefined
      clearTimeout(grace)
      if (stopping) endReported()
      return
    }
    if (m !== "started") return
    started = true
    if (stopping && !finished) grace = setTimeout(end, GRACE_MS)
  })
  const stop = (why: number) => {
    if (stopping) return end() // a second request: now
    stopping = why
    Atomics.store(flag, 0, why)
    // reported already: only the worker's teardown is left
    if (finished) return endReported()
    if (started) grace = setTimeout(end, GRACE_MS)
    else end()
  }
  const onInt = () => stop(SIGINT)
  const onTerm = () => stop(SIGTERM)
  process.on("SIGINT", onInt)
  process.on("SIGTERM", onTerm)
  const timer = deadlineMs !== undefined ? setTimeout(() => stop(DEADLINE), deadlineMs) : undefined
  worker.on("error", (e) => {
    fs.writeSync(2, printable(`tessera ${command}: internal error: ${e instanceof Error ? e.message : String(e)}. This is a bug in Tessera: please report it with the command line and the model`) + "\n")
    process.exitCode = 1
  })
  worker.on("exit", (code) => {
    clearTimeout(timer)
    clearTimeout(grace)
    process.off("SIGINT", onInt)
    process.off("SIGTERM", onTerm)
    // stopped on request, the work reported its InterruptedError line: exit as the signal asks
    process.exitCode = stopping && code !== 0 ? EXIT_CODE[stopping] : (process.exitCode ?? code)
  })
}
