// Typed errors of the graph IR's stages: each says what, where and what to do.
import { Data } from "effect"

/** An op, domain or op configuration that Tessera does not implement. */
export class UnsupportedOpError extends Data.TaggedError("UnsupportedOpError")<{
  readonly node: string
  readonly op: string
  readonly domain: string
  readonly reason: string
}> {
  override get message(): string {
    const d = this.domain && this.domain !== "ai.onnx" ? `${this.domain}.` : ""
    return `node '${this.node}' (${d}${this.op}): unsupported: ${this.reason}`
  }
}

/** A node whose inputs or attributes are invalid for its op. */
export class NodeError extends Data.TaggedError("NodeError")<{
  readonly node: string
  readonly op: string
  readonly reason: string
}> {
  override get message(): string {
    return `node '${this.node}' (${this.op}): ${this.reason}`
  }
}

/** A model input given with the wrong dtype or shape, missing, or unknown. */
export class InputError extends Data.TaggedError("InputError")<{
  readonly input: string
  readonly reason: string
}> {
  override get message(): string {
    return `input '${this.input}': ${this.reason}`
  }
}

/** A graph that is not well formed (undefined values, cycles, duplicate definitions). */
export class GraphError extends Data.TaggedError("GraphError")<{
  readonly where: string
  readonly reason: string
}> {
  override get message(): string {
    return `graph ${this.where}: ${this.reason}`
  }
}

/**
 * Long work stopped on request: the caller (the CLI, on SIGINT / SIGTERM or at its --deadline) set
 * the interrupt flag it handed in, and the work saw it at the next pass or node boundary.
 */
export class InterruptedError extends Data.TaggedError("InterruptedError")<{
  /** Why: "SIGINT", "SIGTERM", or "the deadline of 2 s". */
  readonly reason: string
  /** Where the work stopped: "pass rewrite.FuseOps", "node 'loop1' (Loop)", "kernel k3". */
  readonly where: string
}> {
  override get message(): string {
    return `interrupted (${this.reason}): stopped at ${this.where}`
  }
}

/**
 * The interrupt flag, as data: an Int32Array over (usually shared) memory that the caller sets to
 * non-zero to ask the work to stop. Pure stages only read it, at pass and node boundaries; the
 * caller owns the signals and the clock that set it.
 */
export interface Interrupt {
  readonly flag: Int32Array
  /** Why, by the flag's value (1: "SIGINT"...). */
  readonly reasons: Readonly<Record<number, string>>
}

/** Throws InterruptedError when the flag is set. */
export const checkInterrupt = (interrupt: Interrupt | undefined, where: () => string): void => {
  if (!interrupt) return
  const v = Atomics.load(interrupt.flag, 0)
  if (v !== 0) throw new InterruptedError({ reason: interrupt.reasons[v] ?? `stop request ${v}`, where: where() })
}

export type EvalError = UnsupportedOpError | NodeError | InputError | GraphError | InterruptedError

/** Whether `e` is one of the evaluator's typed errors. */
export const isEvalError = (e: unknown): e is EvalError =>
  e instanceof UnsupportedOpError || e instanceof NodeError || e instanceof InputError || e instanceof GraphError || e instanceof InterruptedError
