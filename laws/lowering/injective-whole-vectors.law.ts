// The injective template's `whole_vectors` rule: a root stage's trailing axes fused until the
// innermost loop is whole vectors, where every read runs along them. Laws: at every width the
// schedule computes what the TE says; and the innermost loop is whole vectors exactly when some
// run of trailing axes the reads allow multiplies to whole vectors (a read across them — a
// transpose, a broadcast — stops the fusion there).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { add, c, mul, type Expr } from "../../src/ast/te/expr.js"
import { at, compute, placeholder, type ComputeTensor, type Placeholder } from "../../src/ast/te/tensor.js"
import { baseSchedule } from "../../src/lowering/lower-group.js"
import { dataLeaves } from "../../src/lowering/templates/common.js"
import { injectiveTemplate } from "../../src/lowering/templates/injective.js"
import { runTirSync } from "../../src/lowering/tir/tir-pass.js"
import { cpuTirPipeline } from "../../src/lowering/tir/cpu-pipeline.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { assertAllClose, lawParams, smallIntInputs } from "../support.js"

/** How the second operand is read: along every axis, broadcast over its first or last `k` axes, or with its last two axes swapped. */
type Second = { kind: "same" } | { kind: "broadcast"; k: number; last: boolean } | { kind: "transposed" }

interface Case {
  readonly shape: readonly number[]
  readonly second: Second
  readonly inputs: readonly Placeholder[]
  readonly out: ComputeTensor
  /** How many trailing axes every read runs along (what the rule may fuse). */
  readonly along: number
}

/** y = (a + 1) · 3 + b, the first term an inlined producer, b read as `second` says. */
const elementwiseCase = (shape: readonly number[], second: Second): Case => {
  const r = shape.length
  const a = placeholder("a", shape, "int32")
  const ones = (k: number): number[] => Array(k).fill(1)
  const bShape =
    second.kind === "broadcast"
      ? second.last ? [...shape.slice(0, r - second.k), ...ones(second.k)] : [...ones(second.k), ...shape.slice(second.k)]
      : second.kind === "transposed" ? [...shape.slice(0, r - 2), shape[r - 1], shape[r - 2]] : shape
  const b = placeholder("b", bShape, "int32")
  const t = compute("t", shape, (...i) => add(at(a, ...i), c(1, "int32")), "int32")
  const out = compute("y", shape, (...i) => {
    const zeros = (k: number): Expr[] => Array.from({ length: k }, () => c(0, "int32"))
    const bi: Expr[] =
      second.kind === "broadcast"
        ? second.last ? [...i.slice(0, r - second.k), ...zeros(second.k)] : [...zeros(second.k), ...i.slice(second.k)]
        : second.kind === "transposed" ? [...i.slice(0, r - 2), i[r - 1], i[r - 2]] : i
    return add(mul(at(t, ...i), c(3, "int32")), at(b, ...bi))
  }, "int32")
  // (the rule asks for the axis's own variable: a broadcast axis, read at 0, stops it there; a
  // transposed read at the last axis already)
  const along = second.kind === "same" ? r : second.kind === "broadcast" ? (second.last ? 0 : r - second.k) : 0
  return { shape, second, inputs: [a, b], out, along }
}

const arbCase = fc
  .record({
    shape: fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 2, maxLength: 4 }),
    second: fc.oneof(fc.constant<Second>({ kind: "same" }), fc.constant<Second>({ kind: "transposed" }), fc.record({ k: fc.integer({ min: 1, max: 2 }), last: fc.boolean() }).map(({ k, last }): Second => ({ kind: "broadcast", k, last }))),
  })
  .filter(({ shape, second }) => second.kind !== "broadcast" || second.k < shape.length)
  .map(({ shape, second }) => elementwiseCase(shape, second))

describe("injective template: trailing axes fused to whole vectors", () => {
  it("at every width, the schedule computes what the TE says", () => {
    fc.assert(
      fc.property(arbCase, fc.constantFrom(1, 2, 4, 8, 16, 32, 64), fc.boolean(), fc.nat(), (cc, width, vectorize, seed) => {
        const base = baseSchedule([cc.out])
        const s = injectiveTemplate.apply([cc.out], base, { vectorize, whole_vectors: width })
        const inputs = smallIntInputs(seed, cc.inputs)
        const got = evaluatePrimFunc(runTirSync(cpuTirPipeline(), lowerSync(s)), inputs)
        assertAllClose([got.get("y")!], evaluateTE([cc.out], inputs), 0, 0)
      }),
      lawParams(80),
    )
  })

  it("an innermost axis of whole vectors longer than one vector loop (64) is split into a vectorized loop of whole vectors that divides it, and computes what the TE says", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 3 }),
        fc.constantFrom(72, 80, 96, 128, 192, 768),
        fc.constantFrom(2, 4, 8, 16),
        fc.constantFrom<Second>({ kind: "same" }, { kind: "broadcast", k: 1, last: false }),
        fc.nat(),
        (rows, last, width, second, seed) => {
          fc.pre(last % width === 0)
          const cc = elementwiseCase([rows, last], second)
          const s = injectiveTemplate.apply([cc.out], baseSchedule([cc.out]), { vectorize: true, whole_vectors: width })
          const st = s.stages.get("y")!
          const inner = st.leaf[st.leaf.length - 1]
          const extent = st.axes.get(inner)!.extent
          expect(st.annotations.get(inner)?.kind).toBe("vectorized")
          expect(extent).toBeLessThanOrEqual(64)
          expect(extent % width).toBe(0)
          expect(last % extent).toBe(0)
          const inputs = smallIntInputs(seed, cc.inputs)
          const got = evaluatePrimFunc(runTirSync(cpuTirPipeline(), lowerSync(s)), inputs)
          assertAllClose([got.get("y")!], evaluateTE([cc.out], inputs), 0, 0)
        },
      ),
      lawParams(40),
    )
  })

  it("the innermost loop is whole vectors exactly where a run of trailing axes the reads allow makes it so", () => {
    fc.assert(
      fc.property(arbCase, fc.constantFrom(2, 4, 8, 16), (cc, width) => {
        const base = baseSchedule([cc.out])
        const s = injectiveTemplate.apply([cc.out], base, { vectorize: true, whole_vectors: width })
        const st = s.stages.get("y")!
        // (a transpose the blocked-transpose rule tiled — it splits the second-last axis, which this
        // rule never does — is that rule's law: injective-block-transpose.law.ts)
        fc.pre(!(cc.second.kind === "transposed" && st.relations.some((r) => r.kind === "split" && r.parent === st.root[st.root.length - 2].name)))
        const leaves = dataLeaves(st)
        const inner = st.axes.get(leaves[leaves.length - 1])!.extent
        const ext = cc.shape
        const r = ext.length
        const reachable = ext[r - 1] % width === 0 || Array.from({ length: Math.max(0, cc.along - 1) }, (_, m) => ext.slice(r - (m + 2)).reduce((p, d) => p * d, 1)).some((p) => p % width === 0)
        expect(inner % width === 0).toBe(reachable)
        // nothing fused where the reads allow no run: the innermost loop is the last axis
        if (cc.along <= 1) expect(inner).toBe(ext[r - 1])
      }),
      lawParams(150),
    )
  })
})
