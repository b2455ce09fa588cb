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

export type EvalError = UnsupportedOpError | NodeError | InputError | GraphError
