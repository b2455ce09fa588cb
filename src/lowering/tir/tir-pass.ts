// TIR passes have the one Pass shape (src/rewrite/pass.ts) over PrimFuncs, plus what each
// establishes (`ensures`: storage flat, no intrinsic left, …). `tirSequential` runs them in order
// under the PassConfig (each run or skipped by `runPass`, the one place that honours opt level,
// disabled passes and instruments) and verifies between them: well-formedness, what the pipeline
// assumes of its input, and what every pass that ran so far has ensured; at its end, what the
// stage after it (the target's emitters) assumes. `runTirSync` runs a pass or a pipeline outside an
// Effect (the tuner's lowerConfig, lowerGroup).
import { Effect } from "effect"
import type { InterruptedError } from "../../ast/graph/errors.js"
import type { PrimFunc } from "../../ast/tir/tir.js"
import { bothExpect, sameExpect, verifyPrimFunc, type TirExpect } from "../../ast/tir/verify.js"
import { defaultPassConfig, PassConfig, runPass, runs, VerifyError, type Pass, type PassConfigShape } from "../../rewrite/pass.js"

export interface TirPass<E = never> extends Pass<PrimFunc, PrimFunc, E> {
  /** What holds after it runs: checked on its output, and on every later pass's in a pipeline. */
  readonly ensures?: TirExpect
}

/** A TIR pass from a plain function; anything it throws is a defect (a bug in the pass). */
export const tirPass = (name: string, optLevel: number, f: (func: PrimFunc) => PrimFunc, ensures?: TirExpect): TirPass => ({
  name,
  optLevel,
  run: (func) => Effect.sync(() => f(func)),
  ...(ensures ? { ensures } : {}),
})

export interface TirPipelineSpec {
  /** What its input satisfies and every pass keeps (checked on the input and after every pass). */
  readonly assumes?: TirExpect
  /** What the stage after it assumes (checked on its output). */
  readonly provides?: TirExpect
}

/**
 * TIR passes in order, as `sequentialOf(verifyPrimFunc)` runs graph passes, except that what the
 * verifier expects grows along the pipeline: after each pass, well-formedness, `assumes`, and what
 * every pass that ran so far ensures (a skipped pass ensures nothing, so a disabled FlattenStorage
 * shows as the pipeline's unflattened output, not as a later pass's fault). Skipped entirely when
 * the config does not verify; after a pass that returns the function unchanged and ensures nothing
 * new, the verdict would be the one just given, so it is not computed again.
 */
export const tirSequential = <E>(name: string, passes: readonly TirPass<E>[], spec: TirPipelineSpec = {}): TirPass<E | VerifyError | InterruptedError> => {
  const assumes = spec.assumes ?? {}
  const provides = spec.provides ?? {}
  return {
    name,
    optLevel: 0,
    ensures: bothExpect(assumes, provides),
    run: Effect.fn(name)(function* (input: PrimFunc) {
      const cfg = yield* PassConfig
      const bad = cfg.verify ? verifyPrimFunc(input, assumes) : undefined
      if (bad) return yield* new VerifyError({ pass: name, where: `its input: ${bad.where}`, reason: bad.reason })
      let holds = assumes
      let f = input
      for (const p of passes) {
        const before = holds
        if (p.ensures && runs(cfg, p)) holds = bothExpect(holds, p.ensures)
        const expect = holds
        const prev = f
        // a pass that changed nothing and ensures nothing new leaves what was just verified
        const again = (out: PrimFunc) => out.body !== prev.body || out.params !== prev.params || !sameExpect(before, expect)
        f = yield* runPass(p, f, (out) => (again(out) ? verifyPrimFunc(out, expect) : undefined))
      }
      // (what held after the last pass already verified may cover it)
      const end = cfg.verify && !sameExpect(bothExpect(holds, provides), holds) ? verifyPrimFunc(f, provides) : undefined
      if (end) return yield* new VerifyError({ pass: name, where: end.where, reason: `${end.reason} (what the stage after ${name} assumes)` })
      return f
    }),
  }
}

/**
 * Runs a TIR pipeline (or one pass) on one function outside an Effect, under `config` over the
 * default PassConfig (opt level 3, verified). A pipeline verifies between its passes and at its
 * end; a pass run alone here is not verified (run it in a tirSequential for that).
 * Throws what the pass fails with (a VerifyError, a typed pass error) and any defect as it is.
 */
export const runTirSync = <E>(pass: TirPass<E>, f: PrimFunc, config: Partial<PassConfigShape> = {}): PrimFunc =>
  Effect.runSync(runPass(pass, f).pipe(Effect.provideService(PassConfig, { ...defaultPassConfig, ...config })))
