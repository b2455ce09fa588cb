// Passes: named, pure stages with an opt level, composed by `sequential` (passes of one IR) and
// `chain` (a pass that changes the IR, such as FuseOps: Graph → FusedGraph) under a PassConfig (opt
// level, disabled passes, verification between passes, instruments). Graph passes, fusion, memory
// planning and the TIR passes all have this one shape, so `disabled` and the opt levels are
// honoured in one place: `runPass`.
import { Context, Data, Effect } from "effect"
import { InterruptedError, isEvalError, type EvalError, type Interrupt } from "../ast/graph/errors.js"
import type { Graph } from "../ast/graph/graph.js"
import { verifyGraph, type VerifyProblem } from "./verify.js"

export interface Pass<A, B = A, E = never> {
  /** `<stage>.<PascalCase>`, e.g. "rewrite.FoldConstants", "lowering.FlattenStorage". */
  readonly name: string
  /** The lowest opt level at which it runs. */
  readonly optLevel: number
  readonly run: (input: A) => Effect.Effect<B, E>
  /**
   * What the pass gives when it does not run (below its opt level, or disabled). A pass that keeps
   * the IR's type gives its input; one that changes it says what stands in (FuseOps: one group per
   * node).
   */
  readonly skip?: (input: A) => B
}

export type GraphPass = Pass<Graph, Graph, RewriteError>

/**
 * Instruments see each pass that runs, with the IR before and after (a Graph, a FusedGraph, a
 * PrimFunc). The caller (CLI, benchmark) owns any clock or file they use.
 */
export interface PassInstrument {
  readonly before?: (pass: string, ir: unknown) => void
  readonly after?: (pass: string, ir: unknown) => void
}

export interface PassConfigShape {
  readonly optLevel: number
  readonly disabled: ReadonlySet<string>
  readonly verify: boolean
  readonly instruments: readonly PassInstrument[]
  /** The caller's stop request, checked before each pass (and by lowering, before each group). */
  readonly interrupt?: Interrupt
}

export const defaultPassConfig: PassConfigShape = { optLevel: 3, disabled: new Set(), verify: true, instruments: [] }

/** The PassContext: read by `runPass`; override with `withPassConfig`. */
export const PassConfig = Context.Reference<PassConfigShape>("tessera/rewrite/PassConfig", { defaultValue: () => defaultPassConfig })

export const withPassConfig =
  (cfg: Partial<PassConfigShape>) =>
  <A, E, R>(eff: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.provideService(eff, PassConfig, { ...defaultPassConfig, ...cfg })

/** A pass produced an IR that is not well formed (what the next stage assumes does not hold). */
export class VerifyError extends Data.TaggedError("VerifyError")<{
  readonly pass: string
  readonly where: string
  readonly reason: string
}> {
  override get message(): string {
    return `after pass ${this.pass}: ${this.where}: ${this.reason}`
  }
}

/** What a graph pass may fail with: the evaluator's errors (folding, inference) or verification. */
export type RewriteError = EvalError | VerifyError

/** Whether `e` is one of the typed errors a graph pass may fail with (anything else is a bug). */
export const isRewriteError = (e: unknown): e is RewriteError =>
  isEvalError(e) || e instanceof VerifyError

/**
 * An Effect of a plain function that may throw the typed errors `typed` recognises: those fail the
 * effect; anything else it throws is a defect (a bug in the pass, never a user's error).
 */
export const tryTyped = <A, E>(f: () => A, typed: (e: unknown) => e is E): Effect.Effect<A, E> =>
  Effect.suspend(() => {
    try {
      return Effect.succeed(f())
    } catch (e) {
      return typed(e) ? Effect.fail(e) : Effect.die(e)
    }
  })

/** A graph pass from a plain function that may throw the typed errors. */
export const graphPass = (name: string, optLevel: number, f: (g: Graph) => Graph): GraphPass => ({
  name,
  optLevel,
  run: (g) => tryTyped(() => f(g), isRewriteError),
})

/** The InterruptedError for a set interrupt flag, or undefined while the work may go on. */
export const interruptedAt = (interrupt: Interrupt | undefined, where: string): InterruptedError | undefined => {
  const v = interrupt ? Atomics.load(interrupt.flag, 0) : 0
  return v === 0 ? undefined : new InterruptedError({ reason: interrupt!.reasons[v] ?? `stop request ${v}`, where })
}

/** Whether the configuration runs `p`. */
export const runs = (cfg: PassConfigShape, p: { readonly name: string; readonly optLevel: number }): boolean => p.optLevel <= cfg.optLevel && !cfg.disabled.has(p.name)

/**
 * Runs one pass under the PassConfig: skipped (its `skip`, else the input unchanged) below its opt
 * level or when disabled; otherwise run between the instruments and its output verified.
 */
export const runPass = <A, B, E>(p: Pass<A, B, E>, input: A, verify?: (out: B) => VerifyProblem | undefined): Effect.Effect<B, E | VerifyError | InterruptedError> =>
  Effect.gen(function* () {
    const cfg = yield* PassConfig
    if (!runs(cfg, p)) return p.skip ? p.skip(input) : (input as unknown as B)
    const stop = interruptedAt(cfg.interrupt, `pass ${p.name}`)
    if (stop) return yield* stop
    for (const i of cfg.instruments) i.before?.(p.name, input)
    const out = yield* p.run(input)
    for (const i of cfg.instruments) i.after?.(p.name, out)
    const bad = cfg.verify && verify ? verify(out) : undefined
    if (bad) return yield* new VerifyError({ pass: p.name, ...bad })
    return out
  })

/** `sequential` for an IR with this verifier: passes in order, each verified after it runs. */
export const sequentialOf =
  <A>(verify: (a: A) => VerifyProblem | undefined) =>
  <E>(name: string, passes: readonly Pass<A, A, E>[]): Pass<A, A, E | VerifyError | InterruptedError> => ({
    name,
    optLevel: 0,
    run: Effect.fn(name)(function* (input: A) {
      let x = input
      for (const p of passes) x = yield* runPass(p, x, verify)
      return x
    }),
  })

/** Graph passes in order, skipping those above the opt level or disabled; verifies between them. */
export const sequential: (name: string, passes: readonly Pass<Graph, Graph, RewriteError>[]) => GraphPass = sequentialOf(verifyGraph)

/** Two passes one after the other, where the first changes the IR (each run or skipped by the config). */
export const chain = <A, B, C, E1, E2>(name: string, first: Pass<A, B, E1>, second: Pass<B, C, E2>): Pass<A, C, E1 | E2 | VerifyError | InterruptedError> => ({
  name,
  optLevel: 0,
  run: Effect.fn(name)(function* (input: A) {
    const mid = yield* runPass(first, input)
    return yield* runPass(second, mid)
  }),
})
