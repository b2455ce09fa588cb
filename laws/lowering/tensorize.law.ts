// tensorize: a tensor intrinsic replaces a loop nest only where the nest computes exactly what the
// intrinsic declares.
// - Negative: a random intrinsic (a gemm micro-kernel of random shape and dtype, VNNI's dot
//   product or SIMD128's 4-lane one) against random tiles of random computes — matmuls and their near misses (other
//   dtypes, B transposed, operands swapped, a sum of sums, a max-reduction, a batch dim, reads at
//   offsets, widened 8-bit products), and the compute families — is a ScheduleError, or a program
//   that computes what the TE says (run by the intrinsic's declaration, and after LowerIntrinsics)
//   with every intrinsic call on buffers of the intrinsic's dtypes. Most near misses fail to match;
//   about a third of the cases fit exactly and are accepted.
// - Positive: exact tiles whose regions do not start at 0 — behind outer loops and a batch dim, read
//   at constant offsets, computed into a cacheWrite stage attached at an outer loop, reading a
//   cacheRead stage attached there — are accepted and compute what the TE says.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { prng } from "../../src/ast/graph/arbitrary.js"
import type { DType } from "../../src/ast/graph/dtype.js"
import { fromArray, sizeOf, type Tensor } from "../../src/ast/graph/tensor.js"
import * as S from "../../src/ast/schedule/schedule.js"
import { buildCompute, COMPUTE_FAMILIES, type ComputeCase } from "../../src/ast/te/arbitrary.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { add, c, cast, isIntDtype, mul, type Expr } from "../../src/ast/te/expr.js"
import { gemmMicroKernel, simd128Dot4x4, vnniDot16x4, type TensorIntrinsic } from "../../src/ast/te/intrinsic.js"
import { at, compute, maxReduce, placeholder, reduceAxis, sum, type Placeholder } from "../../src/ast/te/tensor.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { mapStmt, type Buffer, type PrimFunc, type Stmt } from "../../src/ast/tir/tir.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { cpuTirPipeline } from "../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../src/lowering/tir/tir-pass.js"
import { assertAllClose, lawParams } from "../support.js"

type Rng = ReturnType<typeof prng>

/** A matmul and its near misses; `widened` is VNNI's form: Σ int32(A[i, k]) · int32(B[j, k]). */
const KINDS = ["matmul", "transposed", "swapped", "added", "maxed", "batched", "offset", "widened"] as const
type Kind = (typeof KINDS)[number]

interface GemmLike {
  readonly kind: Kind
  readonly M: number
  readonly N: number
  readonly K: number
  /** Operand dtypes and the output's. */
  readonly a: DType
  readonly b: DType
  readonly out: DType
  /** Read offsets (kind "offset"): rows of A, the shared k, columns of B. */
  readonly offsets: readonly [number, number, number]
}

const values = (rng: Rng, p: Placeholder): Tensor =>
  fromArray(p.dtype, p.shape, Array.from({ length: sizeOf(p.shape) }, () => (p.dtype.startsWith("uint") ? rng.int(0, 9) : isIntDtype(p.dtype) ? rng.int(-5, 5) : rng.float(-1, 1))))

/** The compute C of a spec, with seeded inputs. */
const gemmLike = (g: GemmLike, rng: Rng): ComputeCase => {
  const [oi, ok, oj] = g.offsets
  const batch = g.kind === "batched" ? [2] : []
  const A = placeholder("A", [...batch, g.M + oi, g.K + ok], g.a)
  const B = placeholder("B", g.kind === "transposed" || g.kind === "widened" ? [g.N, g.K] : [...batch, g.K + ok, g.N + oj], g.b)
  const k = reduceAxis(g.K, "k")
  const body = (idx: readonly Expr[]): Expr => {
    const [i, j] = idx.slice(-2)
    const lead = idx.slice(0, -2)
    const a = at(A, ...lead, add(i, c(oi)), add(k.var, c(ok)))
    const b = g.kind === "transposed" || g.kind === "widened" ? at(B, j, k.var) : at(B, ...lead, add(k.var, c(ok)), add(j, c(oj)))
    switch (g.kind) {
      case "swapped":
        return sum(mul(b, a), [k])
      case "added":
        return sum(add(a, b), [k])
      case "maxed":
        return maxReduce(mul(a, b), [k])
      case "widened":
        return sum(mul(cast(g.out, a), cast(g.out, b)), [k])
      default:
        return sum(mul(a, b), [k])
    }
  }
  const C = compute("C", [...batch, g.M, g.N], (...idx) => body(idx), g.out)
  return { family: g.kind, outputs: [C], inputs: new Map([A, B].map((p) => [p.name, values(rng, p)])) }
}

/** The intrinsic's loop extents: data then reduce. */
const intrinsicExtents = (intrin: TensorIntrinsic): number[] => {
  const ic = intrin.compute
  return [...ic.shape, ...(ic.body.kind === "reduce" ? ic.body.axes.map((a) => a.dom.extent) : [])]
}

/** A random intrinsic, a compute near it (often an exact fit) and a random tile of it, not yet tensorized. */
interface TensorizeAttempt {
  readonly intrin: TensorIntrinsic
  readonly cc: ComputeCase
  readonly schedule: S.Schedule
  readonly stage: string
  readonly axis: string
}

const arbTensorizeAttempt = (): fc.Arbitrary<TensorizeAttempt> =>
  fc.integer({ min: 0, max: 0x7fffffff }).map((seed) => {
    const rng = prng(seed)
    const intrin = rng.next() < 0.7 ? gemmMicroKernel(rng.int(1, 4), rng.int(1, 4), rng.int(1, 4), rng.pick(["float32", "float64"] as const)) : rng.pick([vnniDot16x4, simd128Dot4x4])
    const gemm = intrin !== vnniDot16x4 && intrin !== simd128Dot4x4
    const [m, n, kk] = gemm ? intrinsicExtents(intrin) : [1, intrin.compute.shape[0], 4]
    const aligned = rng.next() < 0.7
    const dim = (d: number) => (aligned ? d * rng.int(1, 2) : rng.int(1, d + 3))
    let cc: ComputeCase
    if (rng.next() < 0.1) cc = buildCompute(rng.pick(COMPUTE_FAMILIES), seed)
    else {
      const kind: Kind = rng.next() < 0.55 ? (gemm ? "matmul" : "widened") : rng.pick(KINDS)
      const exact = rng.next() < 0.7
      const d: DType = gemm && exact ? intrin.compute.dtype : rng.pick(["float32", "float64", "int32"] as const)
      const [a, b]: DType[] = kind === "widened" ? (exact ? ["uint8", "int8"] : [rng.pick(["uint8", "int8"] as const), rng.pick(["uint8", "int8"] as const)]) : [d, d]
      const out: DType = kind === "widened" ? "int32" : d
      const offsets = (kind === "offset" ? [rng.int(0, 2), rng.int(0, 2), rng.int(0, 2)] : [0, 0, 0]) as [number, number, number]
      cc = gemmLike({ kind, M: gemm ? dim(m) : rng.int(1, 2), N: dim(n), K: dim(kk), a, b, out, offsets }, rng)
    }
    // the tile: every root axis split (by the intrinsic's extent where there is one to match, when
    // aligned), the outer halves first, then the inner ones in order (or shuffled)
    const stage = cc.outputs[0].name
    let s = S.createSchedule(cc.outputs)
    for (const name of s.order) if (name !== stage && s.stages.get(name)!.op.body.kind !== "reduce") s = S.computeInline(s, name)
    const root = s.stages.get(stage)!.root
    const want = intrinsicExtents(intrin)
    const nData = intrin.compute.shape.length
    const dataRoot = root.filter((a) => a.type === "data")
    const redRoot = root.filter((a) => a.type === "reduce")
    // which root axis each intrinsic extent goes to: its trailing data axes, then its reduce axes
    const target = new Map<string, number>([
      ...dataRoot.slice(-nData).map((a, k) => [a.name, want[k]] as const),
      ...redRoot.slice(0, want.length - nData).map((a, k) => [a.name, want[nData + k]] as const),
    ])
    const outer: string[] = []
    const inner: string[] = []
    for (const a of root) {
      // near misses: another factor that divides (a tile of the wrong extent), or any factor
      const divisors = Array.from({ length: a.extent }, (_, k) => k + 1).filter((f) => a.extent % f === 0)
      const r = rng.next()
      const factor = aligned && r < 0.8 ? (target.get(a.name) ?? 1) : r < 0.9 ? rng.pick(divisors) : rng.pick([1, 2, 3, 4, 16])
      const sp = S.split(s, stage, a.name, { factor })
      s = sp.schedule
      outer.push(sp.outer)
      inner.push(sp.inner)
    }
    const ordered = rng.next() < 0.75 ? inner : [...inner].sort(() => rng.next() - 0.5)
    s = S.reorder(s, stage, [...outer, ...ordered])
    const leaf = s.stages.get(stage)!.leaf
    const at0 = leaf.length - want.length
    const axis = rng.next() < 0.8 && at0 >= 0 ? leaf[at0] : rng.pick(leaf)
    return { intrin, cc, schedule: s, stage, axis }
  })

/** Where the positive law's tile sits: behind outer loops only, in a cacheWrite stage computed at an outer loop, or reading a cacheRead stage computed at one. */
const PLACES = ["nest", "cacheWrite", "cacheRead"] as const

/**
 * An exact tile of a matmul, batched matmul, matmul read at offsets (gemm) or widened 8-bit product
 * (VNNI), 1–3 tiles along each axis (at least 2 along one, or reads at offsets, so some tile's
 * region starts away from 0), its outer loops in any order, placed as PLACES says; tensorized.
 */
const arbOffsetTile = (): fc.Arbitrary<{ cc: ComputeCase; schedule: S.Schedule; intrin: TensorIntrinsic; place: (typeof PLACES)[number] }> =>
  fc.tuple(fc.integer({ min: 0, max: 0x7fffffff }), fc.constantFrom(...PLACES)).map(([seed, place]) => {
    const rng = prng(seed)
    const intrin = rng.next() < 0.8 ? gemmMicroKernel(rng.int(1, 4), rng.int(1, 4), rng.int(1, 4), rng.pick(["float32", "float64"] as const)) : rng.pick([vnniDot16x4, simd128Dot4x4])
    const gemm = intrin !== vnniDot16x4 && intrin !== simd128Dot4x4
    const [m, n, kk] = gemm ? intrinsicExtents(intrin) : [1, intrin.compute.shape[0], 4]
    const reps = [rng.int(1, 3), rng.int(1, 3), rng.int(1, 3)]
    reps[rng.int(0, 2)] = rng.int(2, 3)
    const kind: Kind = gemm ? rng.pick(["matmul", "batched", "offset"] as const) : "widened"
    const offsets = (kind === "offset" || kind === "widened" ? [rng.int(0, 2), rng.int(0, 2), gemm ? rng.int(0, 2) : 0] : [0, 0, 0]) as [number, number, number]
    const d = intrin.compute.dtype
    const cc = gemmLike({ kind, M: m * reps[0], N: n * reps[1], K: kk * reps[2], a: gemm ? d : "uint8", b: gemm ? d : "int8", out: d, offsets }, rng)
    const [bi, bj] = cc.outputs[0].axes.slice(-2).map((a) => a.var.name)
    let s = S.createSchedule(cc.outputs)
    let stage = "C"
    let attachAt: { stage: string; at: (outer: readonly string[]) => string } | undefined
    if (place === "cacheWrite") {
      // C computes into C.local, attached at C's column tile: the tile's region starts at that tile
      const w = S.cacheWrite(s, "C", "local")
      // (tiles of whole intrinsic tiles that divide C: a region past C's end would need guards)
      const whole = (r: number) => rng.pick([1, r])
      const t = S.tile(w.schedule, "C", bi, bj, m * whole(reps[0]), n * whole(reps[1]))
      const after = rng.pick([t.xo, t.yo])
      s = S.computeAt(S.reorder(t.schedule, "C", [t.xo, t.yo, t.xi, t.yi]), w.stage, "C", after)
      stage = w.stage
    } else if (place === "cacheRead") {
      const r = S.cacheRead(s, rng.pick(["A", "B"]), "local", ["C"])
      s = r.schedule
      attachAt = { stage: r.stage, at: (outer) => rng.pick(outer) }
    }
    const st = s.stages.get(stage)!
    const root = st.root
    const [i, j] = root.filter((a) => a.type === "data").slice(-2).map((a) => a.name)
    const k = root.find((a) => a.type === "reduce")!.name
    const si = S.split(s, stage, i, { factor: m })
    const sj = S.split(si.schedule, stage, j, { factor: n })
    const sk = S.split(sj.schedule, stage, k, { factor: kk })
    const lead = st.leaf.filter((a) => a !== i && a !== j && a !== k)
    const outer = [...lead, si.outer, sj.outer, sk.outer].sort(() => rng.next() - 0.5)
    // (VNNI's nest is [j, r]: the row loop, of one iteration, stays outside it)
    s = S.reorder(sk.schedule, stage, [...outer, si.inner, sj.inner, sk.inner])
    if (attachAt) s = S.computeAt(s, attachAt.stage, stage, attachAt.at(outer))
    s = S.tensorize(s, stage, gemm ? si.inner : sj.inner, intrin)
    return { cc, schedule: s, intrin, place }
  })

/** Every intrinsic statement of `f` with the buffers it names. */
const intrinsicCalls = (f: PrimFunc): { intrin: TensorIntrinsic; output: Buffer; inputs: Buffer[] }[] => {
  const buffers = new Map(f.params.map((b) => [b.name, b]))
  mapStmt(f.body, (x: Stmt) => {
    if (x.kind === "allocate") buffers.set(x.buffer.name, x.buffer)
    return undefined
  })
  const calls: { intrin: TensorIntrinsic; output: Buffer; inputs: Buffer[] }[] = []
  mapStmt(f.body, (x) => {
    if (x.kind === "intrinsic") calls.push({ intrin: x.intrin, output: buffers.get(x.output.buffer)!, inputs: x.inputs.map((r) => buffers.get(r.buffer)!) })
    return undefined
  })
  return calls
}

/** A tensorized schedule computes what the TE says, by the intrinsic's declaration and after LowerIntrinsics, on buffers of its dtypes. */
const assertTensorized = (cc: ComputeCase, s: S.Schedule, intrin: TensorIntrinsic): PrimFunc => {
  const f = lowerSync(s)
  const calls = intrinsicCalls(f)
  expect(calls.length).toBeGreaterThan(0)
  for (const call of calls) {
    expect(call.output.dtype, `${intrin.name} writes ${call.output.name}`).toBe(intrin.compute.dtype)
    call.inputs.forEach((b, k) => expect(b.dtype, `${intrin.name} reads ${b.name} as its ${intrin.inputs[k].name}`).toBe(intrin.inputs[k].dtype))
  }
  const want = evaluateTE(cc.outputs, cc.inputs)
  const exact = cc.outputs.every((o) => isIntDtype(o.dtype))
  for (const g of [f, runTirSync(cpuTirPipeline(), f)]) {
    const outs = evaluatePrimFunc(g, cc.inputs)
    assertAllClose(
      cc.outputs.map((o) => outs.get(o.name)!),
      want,
      exact ? 0 : 1e-4,
      exact ? 0 : 1e-5,
    )
  }
  return f
}

describe("tensorize", () => {
  it("a random intrinsic against a random tile of a random compute: a ScheduleError, or a program that computes what the TE says on the intrinsic's dtypes", () => {
    let accepted = 0
    let refused = 0
    fc.assert(
      fc.property(arbTensorizeAttempt(), ({ intrin, cc, schedule, stage, axis }) => {
        let s: S.Schedule
        try {
          s = S.tensorize(schedule, stage, axis, intrin)
        } catch (e) {
          if (!(e instanceof S.ScheduleError)) throw e
          refused++
          return
        }
        accepted++
        assertTensorized(cc, s, intrin)
      }),
      lawParams(150),
    )
    expect(accepted).toBeGreaterThan(10)
    expect(refused).toBeGreaterThan(10)
  })

  it("an exact tile whose region does not start at 0 (behind outer loops, read at offsets, in or reading an attached cache stage) computes what the TE says", () => {
    const places = new Set<string>()
    fc.assert(
      fc.property(arbOffsetTile(), ({ cc, schedule, intrin, place }) => {
        const f = assertTensorized(cc, schedule, intrin)
        // some call's output or input region starts away from 0 (a base that is not the constant 0)
        const bases: Expr[] = []
        mapStmt(f.body, (x) => {
          if (x.kind === "intrinsic") bases.push(...x.output.base, ...x.inputs.flatMap((r) => r.base))
          return undefined
        })
        expect(bases.some((b) => !(b.kind === "const" && b.value === 0))).toBe(true)
        places.add(place)
      }),
      lawParams(40),
    )
    expect([...places].sort()).toEqual([...PLACES].sort())
  })
})
