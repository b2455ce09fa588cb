// The compiler process groups a worker thread runs now, listed in shared memory for the thread
// that ends the process (the CLI's supervisor: src/cli/supervise.ts). A worker's exit hooks do not
// run when its process is ended from the main thread (the supervisor's terminate, or libc's _exit
// for a worker stuck in a native call), so the supervisor kills the groups listed here first — an
// nvcc of a tune --target cuda batch otherwise compiled on for minutes after the command had ended.
// No imports: the supervisor's main thread loads it before it installs its signal handlers.
/** Slots of shared memory, each a running group's pid or 0 (unset: this thread lists nothing). */
let shared: Int32Array | undefined

/** The supervisor's stop flag (nonzero: stop), when this thread runs a supervised command's work. */
let stopFlag: Int32Array | undefined

/** From now on `stopRequested` reads `flag` (the supervisor's, shared with its main thread). */
export const shareStopFlag = (flag: Int32Array): void => {
  stopFlag = flag
}

/** Has the supervisor asked this thread's work to stop? (A synchronous wait on a child polls it: process-group.ts runProbeSync.) */
export const stopRequested = (): boolean => stopFlag !== undefined && Atomics.load(stopFlag, 0) !== 0

/** Lists this thread's compiler groups in `slots` (shared memory the supervisor reads) from now on. */
export const shareRunningGroups = (slots: Int32Array): void => {
  shared = slots
}

/** Lists a group (process-group.ts, when it starts a compiler). */
export const publish = (pid: number): void => {
  if (!shared) return
  for (let i = 0; i < shared.length; i++) if (Atomics.compareExchange(shared, i, 0, pid) === 0) return
}

/** Unlists a group (when its compiler has ended or been killed). */
export const unpublish = (pid: number): void => {
  if (!shared) return
  for (let i = 0; i < shared.length; i++) if (Atomics.compareExchange(shared, i, pid, 0) === pid) return
}

/** Kills every compiler group listed in `slots` (from the thread that ends the process) and clears them. */
export const killSharedGroups = (slots: Int32Array): void => {
  for (let i = 0; i < slots.length; i++) {
    const pid = Atomics.exchange(slots, i, 0)
    if (pid <= 0) continue
    try {
      process.kill(-pid, "SIGKILL")
    } catch {
      // gone already
    }
  }
}

