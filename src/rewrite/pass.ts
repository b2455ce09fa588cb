// Passes: named, pure stages with an opt level, composed by `sequential` under a PassConfig
// (opt level, disabled passes, verification between passes, instruments).
import { Context, Data, Effect } from "effect"
import type { EvalError } from "../ast/graph/errors.js"
import type { Graph } from "../ast/graph/graph.js"
import { verifyGraph } from "./verify.js"

export interface Pass<A, B, E = never> {
  /** `<stage>.<PascalCase>`, e.g. "rewrite.FoldConstants". */
  readonly name: string
  /** The lowest opt level at which `sequential` runs it. */
  readonly optLevel: number
  readonly run: (input: A) => Effect.Effect<B, E>
}

export type GraphPass = Pass<Graph, Graph, RewriteError>

/** Instruments see each pass run; the caller (CLI, benchmark) owns any clock or file they use. */
export interface PassInstrument {
  readonly before?: (pass: string, graph: Graph) => void
  readonly after?: (pass: string, graph: Graph) => void
}

export interface PassConfigShape {
  readonly optLevel: number
  readonly disabled: ReadonlySet<string>
  readonly verify: boolean
  readonly instruments: readonly PassInstrument[]
}

export const defaultPassConfig: PassConfigShape = { optLevel: 3, disabled: new Set(), verify: true, instruments: [] }

/** The PassContext: read by `sequential`; override with `withPassConfig`. */
export const PassConfig = Context.Reference<PassConfigShape>("tessera/rewrite/PassConfig", { defaultValue: () => defaultPassConfig })

export const withPassConfig =
  (cfg: Partial<PassConfigShape>) =>
  <A, E, R>(eff: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.provideService(eff, PassConfig, { ...defaultPassConfig, ...cfg })

/** A pass produced a graph that is not well formed. */
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

/** A pass from a plain function that may throw the typed errors. */
export const graphPass = (name: string, optLevel: number, f: (g: Graph) => Graph): GraphPass => ({
  name,
  optLevel,
  run: (g) =>
    Effect.try({
      try: () => f(g),
      catch: (e) => (typeof e === "object" && e !== null && "_tag" in e ? (e as RewriteError) : new VerifyError({ pass: name, where: "pass", reason: e instanceof Error ? `${e.name}: ${e.message}` : String(e) })),
    }),
})

/** Runs passes in order, skipping those above the opt level or disabled; verifies between them. */
export const sequential = (name: string, passes: readonly GraphPass[]): GraphPass => ({
  name,
  optLevel: 0,
  run: Effect.fn(name)(function* (graph: Graph) {
    const cfg = yield* PassConfig
    let g = graph
    for (const p of passes) {
      if (p.optLevel > cfg.optLevel || cfg.disabled.has(p.name)) continue
      for (const i of cfg.instruments) i.before?.(p.name, g)
      g = yield* p.run(g)
      for (const i of cfg.instruments) i.after?.(p.name, g)
      const bad = cfg.verify ? verifyGraph(g) : undefined
      if (bad) return yield* new VerifyError({ pass: p.name, ...bad })
    }
    return g
  }),
})
