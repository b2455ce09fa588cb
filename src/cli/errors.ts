// The CLI's own error (a command line that does not make sense) and the one-line rendering of
// every typed error a command can meet: what went wrong, where, and what to do about it.
import { Data, Effect } from "effect"
import { printable } from "./printable.js"

export { printable }

/** A flag or argument whose value the command cannot use. */
export class UsageError extends Data.TaggedError("UsageError")<{
  /** The flag or argument: "--shape", "MODEL". */
  readonly flag: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.flag}: ${this.reason}`
  }
}

/** What the user can do about each kind of failure. */
const HINTS: { readonly [tag: string]: (e: { readonly message: string; readonly operation?: string }) => string } = {
  DecodeError: () => "check that the file is a complete ONNX model; export it again if it is damaged",
  UnsupportedModelError: (e) => (/re-export/.test(e.message) ? "" : "Tessera cannot run this model as exported; re-export it without this feature"),
  UnsupportedOpError: () => "this operator or configuration is not implemented in Tessera ('tessera inspect MODEL' lists the model's operators)",
  NodeError: () => "the model is invalid at this node for these inputs; check the input shapes and dtypes ('tessera inspect MODEL')",
  GraphError: () => "the model's graph is malformed; export it again",
  InputError: (e) => (/--input|--shape/.test(e.message) ? "" : "'tessera inspect MODEL' shows the inputs the model expects"),
  NpyError: () => "save the array with numpy.save (a numeric or bool dtype, C order)",
  TargetUnavailableError: () => "",
  ExecutorError: () => "this is a bug in Tessera's executor: please report it with the model",
  EmitError: (e) =>
    /has no GPU kernel|a value from data whose range the host must check/.test(e.message)
      ? "the cuda target runs every group on the GPU and this one has no GPU kernel yet; compile for --target c, or report the op"
      : "this is a bug in Tessera's emitter for this target: please report it with the model",
  GpuLimitError: () => "the schedule asks more of the GPU than the target's limits allow (--cuda-arch names the GPU): please report it with the model",
  CompileError: () => "the generated code did not build: check the compiler, or report it with the model",
  LoadError: (e) =>
    /^cannot load the c /.test(e.message) ? "the built library could not be loaded: check the C compiler and the cache folder" : /^cannot load the cuda /.test(e.message) ? "" : "this is a bug in Tessera's emitter for this target: please report it with the model",
  DeviceRunError: () => "this is a bug in Tessera: please report it with the model",
  NoGpuError: () => "run it where an NVIDIA GPU and its driver are, or compile with `tessera compile --target cuda --out DIR` and run DIR's runner there",
  UnsafeCacheError: () => "use a folder only you own and can write (chmod 700), or set TESSERA_CACHE_DIR to one",
  TargetError: () => "",
  InterruptedError: () => "",
  FileLockedError: () => "another tuner is using this log: wait for it, or give this one another --log (remove the .lock file only if no tuner is running)",
  QuantizationUnsupportedError: () => "",
  QuantizeOptionError: () => "",
  FileAccessError: (e) => (e.operation === "write" ? "check that the folder exists, is writable and has space" : "check the path and its permissions"),
}

/** Errors reported against the model file (their message says where inside it). */
const IN_MODEL = new Set(["QuantizationUnsupportedError", "QuantizeOptionError", "DecodeError", "UnsupportedModelError", "UnsupportedOpError", "NodeError", "GraphError"])

const oneLine = (s: string): string => printable(s.replace(/\s*\n\s*/g, " ").trim())



export const tagOf = (e: unknown): string | undefined =>
  typeof e === "object" && e !== null && "_tag" in e && typeof (e as { _tag: unknown })._tag === "string" ? (e as { _tag: string })._tag : undefined

/**
 * The single stderr line for a failure of `tessera COMMAND`: `tessera COMMAND: [MODEL: ]what.
 * What to do.` Typed errors never show a stack; anything else is reported as an internal error.
 */
export const errorLine = (command: string, e: unknown, context: { readonly model?: string } = {}): string => {
  const tag = tagOf(e)
  const prefix = command ? `tessera ${command}:` : "tessera:"
  if (tag === "UsageError") return oneLine(`${prefix} ${(e as UsageError).message} (see 'tessera${command ? ` ${command}` : ""} --help')`)
  if (tag && e instanceof Error) {
    const where = context.model && IN_MODEL.has(tag) ? `${context.model}: ` : ""
    const hint = (HINTS[tag]?.(e as Error & { operation?: string }) ?? "").replace("MODEL", context.model ?? "MODEL")
    return oneLine(`${prefix} ${where}${e.message}${hint ? `. ${hint[0].toUpperCase()}${hint.slice(1)}` : ""}`)
  }
  const msg = e instanceof Error ? e.message : String(e)
  return oneLine(`${prefix} internal error: ${msg}. This is a bug in Tessera: please report it with the command line and the model`)
}

/** Tags of the typed errors a command reports as one line (anything else is a defect). */
const COMMAND_ERROR_TAGS: ReadonlySet<string> = new Set([
  "DecodeError",
  "UnsupportedModelError",
  "UnsupportedOpError",
  "NodeError",
  "InputError",
  "GraphError",
  "NpyError",
  "FileAccessError",
  "FileLockedError",
  "UsageError",
  "VerifyError",
  "ZooError",
  "DemoError",
  "TargetUnavailableError",
  "TargetError",
  "ExecutorError",
  "EmitError",
  "GpuLimitError",
  "CompileError",
  "LoadError",
  "NoGpuError",
  "DeviceRunError",
  "InterruptedError",
  "UnsafeCacheError",
  "QuantizationUnsupportedError",
  "QuantizeOptionError",
  "VtaPartitionError",
  "VtaScheduleError",
  "VtaConfigError",
  "VtaEncodeError",
  "VtaDeadlockError",
  "VtaRaceError",
  "VtaSramAddressError",
  "VtaDramAddressError",
  "VtaIllegalInsnError",
])

/** A typed failure of a command: an Error with one of the known tags. */
export type CommandError = Error & { readonly _tag: string }

export const isCommandError = (e: unknown): e is CommandError => e instanceof Error && COMMAND_ERROR_TAGS.has(tagOf(e) ?? "")

/** Runs a throwing function: its typed errors become failures, anything else a defect. */
/** `attempt` for a promise: a CommandError it rejects with fails the effect, anything else is a defect. */
export const attemptAsync = <A>(f: () => Promise<A>): Effect.Effect<A, CommandError> =>
  Effect.tryPromise({ try: f, catch: (e) => e }).pipe(Effect.catch((e) => (isCommandError(e) ? Effect.fail(e) : Effect.die(e))))

export const attempt = <A>(f: () => A): Effect.Effect<A, CommandError> =>
  Effect.suspend(() => {
    try {
      return Effect.succeed(f())
    } catch (e) {
      return isCommandError(e) ? Effect.fail(e) : Effect.die(e)
    }
  })
