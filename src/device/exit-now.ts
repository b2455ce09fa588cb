// Ending this process at once with an exit code: libc's _exit through koffi — no exit handlers run
// and, unlike process.exit, no worker thread is waited for (process.exit joins every worker, and
// one inside a native call — a driver call, a synchronous child process — cannot be ended until
// that call returns). The supervisor (src/cli/supervise.ts) uses it when a stopped worker does not
// end in time. Where libc cannot be loaded, the process ends by SIGKILL.
import koffi from "koffi"

const LIBC = ["libc.so.6", "libc.dylib", "libSystem.B.dylib"]

let exitFn: ((code: number) => void) | undefined

const libcExit = (): ((code: number) => void) | undefined => {
  if (exitFn) return exitFn
  for (const name of LIBC) {
    try {
      exitFn = koffi.load(name).func("void _exit(int)") as (code: number) => void
      return exitFn
    } catch {
      // not this one
    }
  }
  return undefined
}

/** Ends the process now with `code`; never returns. */
export const exitNow = (code: number): never => {
  const f = libcExit()
  if (f) f(code)
  process.kill(process.pid, "SIGKILL")
  throw new Error("unreachable: the process was ended")
}
