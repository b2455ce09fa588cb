// Random computes under random schedules, lowered, through the CPU TIR pipeline, emitted as C,
// built by gcc and run, equal the TE evaluator: every compute family of the TE generators, and a
// family whose integer arithmetic goes negative on purpose (floordiv / floormod / div of negative
// numerators by constants of either sign and by data, constants `x + (-k)`, shifted, wrapped,
// clamped and padded reads). Many functions share one translation unit, so a gcc run builds a
// batch. Skipped, visibly, where gcc is absent.
import * as fc from "fast-check"
import { describe, it } from "vitest"
import { prng } from "../src/ast/graph/arbitrary.js"
import { fromArray } from "../src/ast/graph/tensor.js"
import { arbScheduledCase, COMPUTE_FAMILIES, randomSchedule, type ComputeCase } from "../src/ast/te/arbitrary.js"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { add, c, cast, div, eq, floordiv, floormod, ge, max, min, mul, select, sub, type Expr } from "../src/ast/te/expr.js"
import { at, compute, placeholder } from "../src/ast/te/tensor.js"
import type { Schedule } from "../src/ast/schedule/schedule-core.js"
import type { PrimFunc } from "../src/ast/tir/tir.js"
import { lowerSync } from "../src/lowering/lower.js"
import { cpuTirPipeline } from "../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../src/lowering/tir/tir-pass.js"
import { assertAllClose, lawParams } from "./support.js"
import { buildFuncs, callKernel, HAVE_GCC, NO_GCC } from "./support-c.js"

type ScheduledCase = ComputeCase & { readonly schedule: Schedule }

/** The coordinates of a row-major flat index. */
const unravel = (flat: number, shape: readonly number[]): string =>
  shape
    .reduceRight<number[]>((acc, d, k) => [Math.floor(flat / shape.slice(k + 1).reduce((a, b) => a * b, 1)) % d, ...acc], [])
    .join(", ")

/** Lowers, runs the CPU TIR pipeline on, emits into one translation unit and builds every case; each function's outputs equal the TE evaluator's (exactly for integers). */
const checkBatch = async (cases: readonly ScheduledCase[]): Promise<void> => {
  const funcs: PrimFunc[] = cases.map((cc, k) => ({ ...runTirSync(cpuTirPipeline(), lowerSync(cc.schedule)), name: `k${k}` }))
  const mod = await buildFuncs(funcs)
  cases.forEach((cc, k) => {
    const outs = callKernel(mod.kernels.get(`k${k}`)!, funcs[k], cc.inputs)
    const want = evaluateTE(cc.outputs, cc.inputs)
    const got = cc.outputs.map((o) => outs.get(o.name)!)
    const where = `case k${k} (${cc.family}, schedule ${JSON.stringify(cc.schedule.steps)})`
    want.forEach((w, j) => {
      if (w.dtype.startsWith("int")) {
        const bad = w.data.findIndex((x, i) => got[j].data[i] !== x)
        if (bad >= 0) throw new Error(`${where}: ${cc.outputs[j].name}[${unravel(bad, w.shape)}] is ${got[j].data[bad]}, expected ${w.data[bad]}`)
      } else
        try {
          assertAllClose([got[j]], [w], 1e-4, 1e-5)
        } catch (e) {
          throw new Error(`${where}: ${cc.outputs[j].name}: ${(e as Error).message}`)
        }
    })
  })
}

/**
 * Integer arithmetic below zero: `shift = A + (-k)`, then terms over it selected by the last axis —
 * floordiv / floormod / div of index and data numerators that go negative, by constants of either
 * sign and by data of either sign, in int32 and int64, and reads at shifted indices that wrap,
 * clamp or fall into padding.
 */
export const negativeArithCase = (seed: number): ComputeCase => {
  const rng = prng(seed)
  const [m, n] = [rng.int(1, 5), rng.int(2, 9)]
  const A = placeholder("A", [m, n], "int32")
  const B = placeholder("B", [n], "int32")
  const inputs = new Map([
    ["A", fromArray("int32", [m, n], Array.from({ length: m * n }, () => rng.int(-9, 9)))],
    ["B", fromArray("int32", [n], Array.from({ length: n }, () => rng.pick([-4, -3, -2, -1, 1, 2, 3, 4])))],
  ])
  const d = () => rng.pick([-5, -4, -3, -2, 2, 3, 4, 5])
  const pos = () => rng.int(2, 5)
  const [k1, k2, k3] = [rng.int(1, 7), rng.int(1, n), rng.int(1, m + 1)]
  const shift = compute("shift", [m, n], (i, j) => add(at(A, i, j), c(-k1)))
  const terms: ((i: Expr, j: Expr) => Expr)[] = [
    (_i, j) => floordiv(sub(j, c(k2)), c(d())),
    (_i, j) => floormod(sub(j, c(k2)), c(d())),
    (i) => div(sub(i, c(k3)), c(d())),
    (i, j) => floordiv(at(shift, i, j), c(pos())),
    (i, j) => floormod(at(shift, i, j), c(pos())),
    (i, j) => div(at(shift, i, j), c(d())),
    (i, j) => floordiv(at(shift, i, j), at(B, j)),
    (i, j) => floormod(at(A, i, j), at(B, j)),
    (i, j) => div(at(shift, i, j), at(B, j)),
    (i, j) => cast("int32", floordiv(cast("int64", at(shift, i, j)), c(pos(), "int64"))),
    (i, j) => cast("int32", floormod(cast("int64", at(shift, i, j)), c(d(), "int64"))),
    (i, j) => at(shift, i, floormod(sub(j, c(k2)), c(n))),
    (i, j) => select(ge(sub(j, c(k2)), c(0)), at(shift, i, sub(j, c(k2))), c(-100)),
    (i, j) => at(shift, min(max(sub(i, c(k3)), c(0)), c(m - 1)), j),
    (i, j) => add(mul(i, c(-3)), add(j, c(-k2))),
  ]
  const out = compute("arith", [m, n, terms.length], (i, j, t) => terms.reduceRight<Expr>((rest, term, k) => (k === terms.length - 1 ? term(i, j) : select(eq(t, c(k)), term(i, j), rest)), c(0)), "int32")
  return { family: "negative_arith", outputs: [out], inputs }
}

const arbNegativeArithCase: fc.Arbitrary<ScheduledCase> = fc
  .tuple(fc.integer({ min: 0, max: 0x7fffffff }), fc.integer({ min: 0, max: 0x7fffffff }))
  .map(([a, b]) => {
    const cc = negativeArithCase(a)
    return { ...cc, schedule: randomSchedule(cc.outputs, b) }
  })

const PER_FAMILY = 5
const PER_BATCH = 24

describe("lower → CPU TIR pipeline → c → run", () => {
  it.skipIf(!HAVE_GCC)(`equals the TE evaluator for every compute family under random schedules, ${PER_FAMILY} a family, in two gcc runs${NO_GCC}`, async () => {
    const cases = COMPUTE_FAMILIES.flatMap((family) => fc.sample(arbScheduledCase([family]), lawParams(PER_FAMILY)))
    const half = Math.ceil(cases.length / 2)
    await checkBatch(cases.slice(0, half))
    await checkBatch(cases.slice(half))
  }, 300_000)

  it.skipIf(!HAVE_GCC)(`equals the TE evaluator where integer arithmetic goes negative: floordiv, floormod and div of negative numerators, x + (-k), shifted reads${NO_GCC}`, async () => {
    await checkBatch(fc.sample(arbNegativeArithCase, lawParams(PER_BATCH)))
  }, 300_000)
})
