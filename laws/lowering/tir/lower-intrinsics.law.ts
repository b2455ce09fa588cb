// lowering.LowerIntrinsics: same meaning — on tensorized matmuls (the intrinsic runs by its
// declaration before, as a loop nest after), batched matmuls (operands of lower rank than their
// buffers) and elementwise stages tensorized to a stored (not updated) vector intrinsic — before or
// after FlattenStorage; its output verifies with no intrinsic left; each intrinsic statement
// becomes one store under serial loops, one per axis of its declaration; and a reduction declared
// stored fails as the typed IntrinsicModeError, saying which intrinsic and why.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { fromArray } from "../../../src/ast/graph/tensor.js"
import * as S from "../../../src/ast/schedule/schedule.js"
import { add, mul } from "../../../src/ast/te/expr.js"
import { gemmMicroKernel } from "../../../src/ast/te/intrinsic.js"
import { at, compute, placeholder, reduceAxis, sum } from "../../../src/ast/te/tensor.js"
import { mapStmt, type PrimFunc } from "../../../src/ast/tir/tir.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { flattenStorage } from "../../../src/lowering/tir/flatten-storage.js"
import { lowerIntrinsics } from "../../../src/lowering/tir/lower-intrinsics.js"
import { lawParams } from "../../support.js"
import { applyPass, arbLoweredCase, arbTensorizedCase, passLaws, profileOf, vectorAdd, type LoweredCase } from "./support.js"

const vals = (n: number, seed: number) => Array.from({ length: n }, (_, q) => ((q * 7 + seed) % 11) - 5)

/** C = A + B (M × N), its columns split by the vector width and tensorized. */
const arbVectorAddCase = (): fc.Arbitrary<LoweredCase> =>
  fc.tuple(fc.integer({ min: 1, max: 3 }), fc.constantFrom(2, 4), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 0, max: 1000 })).map(([m, n, reps, seed]) => {
    const N = n * reps
    const A = placeholder("A", [m, N])
    const B = placeholder("B", [m, N])
    const C = compute("C", [m, N], (i, j) => add(at(A, i, j), at(B, i, j)))
    const sp = S.split(S.createSchedule([C]), "C", "C.j", { factor: n })
    return {
      func: lowerSync(S.tensorize(sp.schedule, "C", sp.inner, vectorAdd(n))),
      outputs: [C],
      inputs: new Map([
        ["A", fromArray("float32", [m, N], vals(m * N, seed))],
        ["B", fromArray("float32", [m, N], vals(m * N, seed + 3))],
      ]),
    }
  })

/** C[b] = A[b] · B[b], each batch's matmul tiled to the gemm micro-kernel and tensorized (rank-2 operands of rank-3 buffers). */
const arbBatchedGemmCase = (): fc.Arbitrary<LoweredCase> =>
  fc.tuple(fc.integer({ min: 1, max: 2 }), fc.constantFrom(1, 2), fc.constantFrom(2, 4), fc.constantFrom(1, 3), fc.integer({ min: 0, max: 1000 })).map(([batch, mt, nt, kt, seed]) => {
    const [M, N, K] = [mt * 2, nt, kt * 2]
    const A = placeholder("A", [batch, M, K])
    const B = placeholder("B", [batch, K, N])
    const k = reduceAxis(K, "k")
    const C = compute("C", [batch, M, N], (b, i, j) => sum(mul(at(A, b, i, k.var), at(B, b, k.var, j)), [k]))
    // (the axes of a rank-3 compute are C.i, C.j, C.k: batch, rows, columns)
    const t = S.tile(S.createSchedule([C]), "C", "C.j", "C.k", mt, nt)
    const ks = S.split(t.schedule, "C", "k", { factor: kt })
    const s = S.reorder(ks.schedule, "C", ["C.i", t.xo, t.yo, ks.outer, t.xi, t.yi, ks.inner])
    return {
      func: lowerSync(S.tensorize(s, "C", t.xi, gemmMicroKernel(mt, nt, kt))),
      outputs: [C],
      inputs: new Map([
        ["A", fromArray("float32", [batch, M, K], vals(batch * M * K, seed))],
        ["B", fromArray("float32", [batch, K, N], vals(batch * K * N, seed + 5))],
      ]),
    }
  })

const cases = fc.oneof(arbTensorizedCase(), arbBatchedGemmCase(), arbVectorAddCase(), arbLoweredCase(["matmul", "conv2d_nchwc"]))
passLaws(lowerIntrinsics, { cases, runs: 30, unmet: true })
passLaws(lowerIntrinsics, { cases, runs: 30, after: [flattenStorage()], variant: "after FlattenStorage" })

/** Loops of each kind, and how many loops the intrinsic statements declare (data and reduce axes). */
const declaredAxes = (f: PrimFunc): number => {
  let n = 0
  mapStmt(f.body, (x) => {
    if (x.kind === "intrinsic") n += x.intrin.compute.axes.length + (x.intrin.compute.body.kind === "reduce" ? x.intrin.compute.body.axes.length : 0)
    return undefined
  })
  return n
}

describe("lowering.LowerIntrinsics", () => {
  it("turns each intrinsic statement into one store under serial loops, one per axis of its declaration; adds nothing else", () => {
    let lowered = 0
    fc.assert(
      fc.property(cases, fc.boolean(), (c, flat) => {
        const { input, output } = applyPass(lowerIntrinsics, c, flat ? [flattenStorage()] : [])
        const before = profileOf(input.body)
        const after = profileOf(output.body)
        const axes = declaredAxes(input)
        const calls = before.get("intrinsic") ?? 0
        const added = (kind: string) => (kind === "serial" ? axes : kind === "store" ? calls : kind === "intrinsic" ? -calls : 0)
        for (const kind of new Set([...before.keys(), ...after.keys()])) expect([kind, after.get(kind) ?? 0]).toEqual([kind, (before.get(kind) ?? 0) + added(kind)])
        if (axes > 0) lowered++
      }),
      lawParams(30),
    )
    expect(lowered).toBeGreaterThan(0)
  })

  it("fails with the typed IntrinsicModeError, naming the intrinsic, where a reduction is declared stored", () => {
    fc.assert(
      fc.property(arbTensorizedCase(), (c) => {
        const stored: PrimFunc = { ...c.func, body: mapStmt(c.func.body, (x) => (x.kind === "intrinsic" ? { ...x, intrin: { ...x.intrin, mode: "store" } } : undefined)) }
        // caught by its tag: a failure, not a defect (which catchTag would let through)
        const e = Effect.runSync(lowerIntrinsics.run(stored).pipe(Effect.catchTag("IntrinsicModeError", (err) => Effect.succeed(err))))
        expect(e).toMatchObject({ _tag: "IntrinsicModeError", intrinsic: c.intrinsic, reason: "a reduction must be an update" })
        expect((e as Error).message).toBe(`intrinsic ${c.intrinsic}: a reduction must be an update`)
      }),
      lawParams(5),
    )
  })
})
