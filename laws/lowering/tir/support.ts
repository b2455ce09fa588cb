// The TIR pass laws' cases and the two laws every pass has. Cases are lowered random schedules of
// the TE families (arbScheduledCase: vthreads with cache stages attached at them, non-dividing
// splits, storage aligned, every primitive), and tensorized matmuls (gemm micro-kernel) for the
// intrinsic passes. Laws: the pass preserves meaning (the TIR evaluator on its output equals the TE
// evaluator), and its output verifies — well formed, still satisfying what held of its input, plus
// what the pass ensures.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { prng } from "../../../src/ast/graph/arbitrary.js"
import { fromArray, type Tensor } from "../../../src/ast/graph/tensor.js"
import * as S from "../../../src/ast/schedule/schedule.js"
import { arbScheduledCase, type COMPUTE_FAMILIES } from "../../../src/ast/te/arbitrary.js"
import { evaluateTE } from "../../../src/ast/te/evaluate.js"
import { add, c, cast, mul, v, type Expr, type Var } from "../../../src/ast/te/expr.js"
import { gemmMicroKernel, type TensorIntrinsic } from "../../../src/ast/te/intrinsic.js"
import { at, compute, placeholder, reduceAxis, sum, type ComputeTensor } from "../../../src/ast/te/tensor.js"
import { evaluatePrimFunc } from "../../../src/ast/tir/evaluate.js"
import { printPrimFunc, seq, type ForKind, type PrimFunc, type Stmt } from "../../../src/ast/tir/tir.js"
import { bothExpect, verifyPrimFunc, type TirExpect } from "../../../src/ast/tir/verify.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { runTirSync, tirSequential, type TirPass } from "../../../src/lowering/tir/tir-pass.js"
import { assertAllClose, lawParams } from "../../support.js"

/** A lowered function with the TE program it computes and seeded inputs. */
export interface LoweredCase {
  readonly func: PrimFunc
  readonly outputs: readonly ComputeTensor[]
  readonly inputs: ReadonlyMap<string, Tensor>
}

/** What lowering gives every function: thread loops of known bounds. */
export const LOWERED: TirExpect = { threadExtentsKnown: true }

/** Lowered random schedules of the TE families. */
export const arbLoweredCase = (families?: readonly (typeof COMPUTE_FAMILIES)[number][]): fc.Arbitrary<LoweredCase> =>
  arbScheduledCase(families).map((sc) => ({ func: lowerSync(sc.schedule), outputs: sc.outputs, inputs: sc.inputs }))

/** A tensorized case: its schedule and the intrinsic's name too. */
export interface TensorizedCase extends LoweredCase {
  readonly schedule: S.Schedule
  readonly intrinsic: string
}

/** A matmul tiled to the gemm micro-kernel's shape and tensorized (an intrinsic statement in its TIR). */
export const arbTensorizedCase = (): fc.Arbitrary<TensorizedCase> =>
  fc.tuple(fc.constantFrom(1, 2, 4), fc.constantFrom(2, 4), fc.constantFrom(1, 2), fc.constantFrom(1, 2, 3), fc.integer({ min: 0, max: 1000 })).map(([mt, nt, kt, reps, seed]) => {
    const [M, N, K] = [mt * reps, nt * 2, kt * 3]
    const A = placeholder("A", [M, K])
    const B = placeholder("B", [K, N])
    const k = reduceAxis(K, "k")
    const C = compute("C", [M, N], (i, j) => sum(mul(at(A, i, k.var), at(B, k.var, j)), [k]))
    const vals = (n: number) => Array.from({ length: n }, (_, q) => ((q * 7 + seed) % 11) - 5)
    const t = S.tile(S.createSchedule([C]), "C", "C.i", "C.j", mt, nt)
    const ks = S.split(t.schedule, "C", "k", { factor: kt })
    const intrin = gemmMicroKernel(mt, nt, kt)
    const schedule = S.tensorize(S.reorder(ks.schedule, "C", [t.xo, t.yo, ks.outer, t.xi, t.yi, ks.inner]), "C", t.xi, intrin)
    return {
      func: lowerSync(schedule),
      schedule,
      intrinsic: intrin.name,
      outputs: [C],
      inputs: new Map([
        ["A", fromArray("float32", [M, K], vals(M * K))],
        ["B", fromArray("float32", [K, N], vals(K * N))],
      ]),
    }
  })

/** `f` computes what the case's TE program computes. */
export const assertMeaning = (f: PrimFunc, c: LoweredCase): void => {
  const outs = evaluatePrimFunc(f, c.inputs)
  assertAllClose(
    c.outputs.map((o) => outs.get(o.name)!),
    evaluateTE(c.outputs, c.inputs),
    1e-4,
    1e-5,
  )
}

/** `f` verifies against `expect`, else the problem and the function, printed. */
export const assertVerifies = (f: PrimFunc, expect: TirExpect): void => {
  const bad = verifyPrimFunc(f, expect)
  if (bad) throw new Error(`${bad.where}: ${bad.reason}\n${printPrimFunc(f)}`)
}

export interface PassLawOptions {
  /** Passes run first: what the pass assumes of its input (FlattenStorage before RewriteStorage). */
  readonly after?: readonly TirPass<unknown>[]
  /** The cases (lowered random schedules unless given). */
  readonly cases?: fc.Arbitrary<LoweredCase>
  readonly runs?: number
  /** Some case's input does not already satisfy what the pass ensures (checked: the promise is not empty). */
  readonly unmet?: boolean
  /** Says which variant this is, when a pass has its laws more than once (after other passes). */
  readonly variant?: string
}

/** The pass's input and output on a case, with what held of the input; the pass runs unverified. */
export const applyPass = (pass: TirPass<unknown>, c: LoweredCase, after: readonly TirPass<unknown>[] = []) => {
  const input = after.length ? runTirSync(tirSequential("law.Before", after, { assumes: LOWERED }), c.func) : c.func
  const held = after.reduce((h, p) => bothExpect(h, p.ensures ?? {}), LOWERED)
  return { input, held, output: runTirSync(pass, input, { verify: false }) }
}

/** The two laws of a TIR pass: it preserves meaning, and its output verifies. */
export const passLaws = (pass: TirPass<unknown>, options: PassLawOptions = {}): void => {
  const cases = options.cases ?? arbLoweredCase()
  const runs = options.runs ?? 40
  describe(`${pass.name}${options.variant ? ` (${options.variant})` : ""}: the laws of every TIR pass`, () => {
    it("preserves meaning: evalTIR(pass(f)) == evalTE(compute)", () => {
      fc.assert(
        fc.property(cases, (c) => assertMeaning(applyPass(pass, c, options.after).output, c)),
        lawParams(runs),
      )
    })
    it("its output verifies: well formed, what held of its input still holds, and what it ensures", () => {
      fc.assert(
        fc.property(cases, (c) => {
          const { held, output } = applyPass(pass, c, options.after)
          assertVerifies(output, bothExpect(held, pass.ensures ?? {}))
        }),
        lawParams(runs),
      )
    })
    const ensures = pass.ensures
    if (ensures && options.unmet)
      it("what it ensures is a promise: some input does not already satisfy it", () => {
        let unmet = 0
        fc.assert(
          fc.property(cases, (c) => {
            if (verifyPrimFunc(applyPass(pass, c, options.after).input, ensures)) unmet++
          }),
          lawParams(runs),
        )
        expect(unmet).toBeGreaterThan(0)
      })
  })
}

type ForStmt = Extract<Stmt, { kind: "for" }>

/** Every loop of `s`, outermost first (pre-order). */
export const loopsOf = (s: Stmt, out: ForStmt[] = []): ForStmt[] => {
  switch (s.kind) {
    case "for":
      out.push(s)
      loopsOf(s.body, out)
      break
    case "seq":
      for (const b of s.body) loopsOf(b, out)
      break
    case "if":
      loopsOf(s.then, out)
      if (s.else) loopsOf(s.else, out)
      break
    case "allocate":
    case "let":
      loopsOf(s.body, out)
      break
    default:
  }
  return out
}

/** How many loops of each kind, and stores, a run of `s` goes through statically ("store" counts stores). */
export type Profile = Map<string, number>

export const profileOf = (s: Stmt, p: Profile = new Map(), times = 1): Profile => {
  const bump = (k: string) => p.set(k, (p.get(k) ?? 0) + times)
  switch (s.kind) {
    case "for":
      bump(s.forKind)
      profileOf(s.body, p, times)
      break
    case "seq":
      for (const b of s.body) profileOf(b, p, times)
      break
    case "if":
      profileOf(s.then, p, times)
      if (s.else) profileOf(s.else, p, times)
      break
    case "allocate":
    case "let":
      profileOf(s.body, p, times)
      break
    case "store":
    case "barrier":
    case "intrinsic":
    case "evaluate":
      bump(s.kind)
  }
  return p
}

export interface LoopVariation {
  /** Loops (not thread or vthread loops) retagged, about one in two, to one of these kinds. */
  readonly kinds?: readonly ForKind[]
  /** Which loops get a non-constant min, extent or both, about one in three: the same values through a let (sometimes cast). */
  readonly relax?: "none" | "plain" | "vthread"
}

/**
 * A lowered case whose loops differ in ways that keep its meaning: kinds retagged (every kind but
 * thread and vthread runs the same iterations in order) and bounds made non-constant (the same
 * values bound by a let around the loop, read plainly or through a cast from int64).
 */
export const arbVariedLoops = (variation: LoopVariation, cases: fc.Arbitrary<LoweredCase> = arbLoweredCase()): fc.Arbitrary<LoweredCase> =>
  fc.tuple(cases, fc.integer({ min: 0, max: 0x7fffffff })).map(([lc, seed]) => {
    const rng = prng(seed)
    let fresh = 0
    const bound = (e: Expr, lets: [Var, Expr][]): Expr => {
      if (e.kind !== "const") return e
      const wide = rng.next() < 0.5
      const x = v(`bound.${fresh++}`, wide ? "int64" : "int32")
      lets.push([x, c(e.value, x.dtype)])
      return wide ? cast("int32", x) : x
    }
    const rec = (s: Stmt): Stmt => {
      switch (s.kind) {
        case "for": {
          const body = rec(s.body)
          const threaded = s.forKind === "thread" || s.forKind === "vthread"
          const forKind = !threaded && variation.kinds?.length && rng.next() < 0.5 ? rng.pick(variation.kinds) : s.forKind
          const relax = variation.relax === "plain" ? !threaded : variation.relax === "vthread" ? s.forKind === "vthread" : false
          const lets: [Var, Expr][] = []
          // the min, the extent, or both
          const which = relax && rng.next() < 0.3 ? rng.int(1, 3) : 0
          const min = which & 1 ? bound(s.min, lets) : s.min
          const extent = which & 2 ? bound(s.extent, lets) : s.extent
          const loop: Stmt = { ...s, forKind, body, min, extent }
          return lets.reduceRight<Stmt>((inner, [x, value]) => ({ kind: "let", var: x, value, body: inner }), loop)
        }
        case "seq":
          return seq(s.body.map(rec))
        case "if":
          return { ...s, then: rec(s.then), ...(s.else ? { else: rec(s.else) } : {}) }
        case "allocate":
        case "let":
          return { ...s, body: rec(s.body) }
        default:
          return s
      }
    }
    return { ...lc, func: { ...lc.func, body: rec(lc.func.body) } }
  })

/** c[n] = a[n] + b[n], stored (not updated): a vector add, declared here (no emitter has it). */
export const vectorAdd = (n: number): TensorIntrinsic => {
  const a = placeholder("a", [n])
  const b = placeholder("b", [n])
  return { name: `vadd_${n}`, compute: compute("c", [n], (x) => add(at(a, x), at(b, x))), inputs: [a, b], mode: "store", emit: {} }
}
