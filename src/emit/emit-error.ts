// The one error of the emit layer: a program a target cannot render (a kernel name that is not a
// safe identifier, a construct the target has no form for, TIR that needs a lowering pass first).
// Emitters stay synchronous and pure and throw it; the stage that calls them lifts it into Effect's
// error channel (e.g. `Effect.try({ try: () => emitC(funcs), catch: (e) => e as EmitError })`).
import { Data } from "effect"
import type { TargetKind } from "../ast/target.js"

/** The target whose emitter throws it. */
export type EmitTarget = TargetKind

export class EmitError extends Data.TaggedError("EmitError")<{
  readonly target: EmitTarget
  /** The kernel being emitted; absent for a problem of the module as a whole (its names, its options). */
  readonly kernel?: string
  /** The graph node the problem is in, where there is one (cuda's `--precision fp16` refusals name it). */
  readonly node?: { readonly name: string; readonly op: string }
  readonly reason: string
}> {
  override get message(): string {
    return `${this.target} emitter${this.kernel === undefined ? "" : `, kernel ${JSON.stringify(this.kernel)}`}${this.node === undefined ? "" : `, node ${this.node.op} ${JSON.stringify(this.node.name)}`}: ${this.reason}`
  }
}
