// evalTIR(lower(schedule)) == evalTE(compute) for the compute family under random legal
// schedules, and one law per schedule primitive (its name in the test name).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { prng } from "../../src/ast/graph/arbitrary.js"
import { fromArray } from "../../src/ast/graph/tensor.js"
import { arbComputeCase, arbScheduledCase, buildCompute, COMPUTE_FAMILIES, randomSchedule, type ComputeCase } from "../../src/ast/te/arbitrary.js"
import { mul } from "../../src/ast/te/expr.js"
import { at, compute, placeholder, reduceAxis, sum } from "../../src/ast/te/tensor.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import * as S from "../../src/ast/schedule/schedule.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { printPrimFunc } from "../../src/ast/tir/tir.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { cpuTirPipeline } from "../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync, tirSequential } from "../../src/lowering/tir/tir-pass.js"
import { flattenStorage } from "../../src/lowering/tir/flatten-storage.js"
import { lowerIntrinsics } from "../../src/lowering/tir/lower-intrinsics.js"
import { assertAllClose, lawParams } from "../support.js"
import { arbTensorizedCase } from "./tir/support.js"
import { sharedTiledMatmul } from "../../src/ast/te/arbitrary-schedule.js"

const check = (cc: ComputeCase, s: S.Schedule) => {
  const want = evaluateTE(cc.outputs, cc.inputs)
  const f = lowerSync(s)
  const outs = evaluatePrimFunc(f, cc.inputs)
  const got = cc.outputs.map((o) => outs.get(o.name)!)
  const exact = cc.outputs.every((o) => o.dtype.startsWith("int"))
  assertAllClose(got, want, exact ? 0 : 1e-4, exact ? 0 : 1e-5)
}

const withSteps = (prim: string, apply: (cc: ComputeCase, rng: fc.Random | undefined, s: S.Schedule) => S.Schedule) =>
  it(`${prim} preserves meaning`, () => {
    fc.assert(
      fc.property(arbComputeCase(), fc.integer({ min: 0, max: 1000 }), (cc, seed) => {
        let s = S.createSchedule(cc.outputs)
        try {
          s = apply(cc, undefined, s)
        } catch (e) {
          if (e instanceof S.ScheduleError) return // not applicable to this compute
          throw e
        }
        void seed
        check(cc, s)
      }),
      lawParams(40),
    )
  })

const lastStage = (cc: ComputeCase) => cc.outputs[0].name

/** Every primitive but tensorize (its own laws): a new primitive fails to compile here until the generator is asked to use it. */
const RANDOM_PRIMITIVES: { readonly [P in Exclude<S.Step["prim"], "tensorize">]: P } = {
  split: "split", fuse: "fuse", reorder: "reorder", tile: "tile", parallel: "parallel", vectorize: "vectorize", unroll: "unroll", bind: "bind", pragma: "pragma",
  computeInline: "computeInline", computeRoot: "computeRoot", computeAt: "computeAt", storageAlign: "storageAlign", doubleBuffer: "doubleBuffer", setScope: "setScope",
  cacheRead: "cacheRead", cacheWrite: "cacheWrite", rfactor: "rfactor",
}

/** What a schedule does that the laws need to see: its primitives, and the shapes the bugs hid in. */
const features = (s: S.Schedule): Set<string> => {
  const out = new Set<string>(s.steps.map((x) => x.prim))
  for (const x of s.steps) if (x.prim === "split" && x.nparts !== undefined) out.add("split by nparts")
  for (const st of s.stages.values()) {
    for (const r of st.relations) if (r.kind === "split" && st.axes.get(r.parent)!.extent % r.factor !== 0) out.add("a split that does not divide")
    if (st.attach.kind !== "at") continue
    if (S.effectiveConsumers(s, st.name).length > 1) out.add("a stage computed at a loop of several consumers")
    const target = s.stages.get(st.attach.stage)!
    const vt = target.leaf.findIndex((a) => target.annotations.get(a)?.kind === "vthread")
    if (vt >= 0 && target.leaf.indexOf(st.attach.axis) === vt) out.add("a stage attached at a vthread axis")
    if (vt >= 0 && target.leaf.indexOf(st.attach.axis) > vt) out.add("a stage attached inside a vthread loop")
    if (st.scope === "shared" && vt >= 0 && target.leaf.indexOf(st.attach.axis) >= vt) out.add("a shared stage attached in a vthread loop")
    if (st.relations.some((r) => r.kind === "split" && st.axes.get(r.parent)!.extent % r.factor !== 0)) out.add("an attached stage split by a factor that does not divide")
  }
  return out
}

describe("lower: random legal schedules", () => {
  for (const family of COMPUTE_FAMILIES)
    it(`evalTIR(lower(schedule)) == evalTE(compute) for ${family}`, () => {
      fc.assert(fc.property(arbScheduledCase([family]), (sc) => check(sc, sc.schedule)), lawParams(30))
    })

  it("the random schedules use every primitive but tensorize, attach stages at and inside vthreads, and split by factors that do not divide", () => {
    const seen = new Set<string>()
    for (const sc of fc.sample(arbScheduledCase(), lawParams(150))) for (const f of features(sc.schedule)) seen.add(f)
    const wanted = [
      ...Object.values(RANDOM_PRIMITIVES),
      "split by nparts",
      "a split that does not divide",
      "a stage attached at a vthread axis",
      "a stage attached inside a vthread loop",
      "a shared stage attached in a vthread loop",
      "an attached stage split by a factor that does not divide",
      "a stage computed at a loop of several consumers",
    ]
    expect(wanted.filter((w) => !seen.has(w))).toEqual([])
  })
})

/** A reduction over shifted domains: C[i, j] = Σ_{k ∈ [k0, k0 + K), l ∈ [l0, l0 + L)} A[i, k] · B[l, j], with seeded inputs. */
const shiftedReduceCase = (seed: number): ComputeCase => {
  const rng = prng(seed)
  const [M, N, K, L, k0, l0] = [rng.int(1, 4), rng.int(1, 4), rng.int(1, 5), rng.int(1, 3), rng.int(0, 3), rng.int(0, 2)]
  const A = placeholder("A", [M, k0 + K])
  const B = placeholder("B", [l0 + L, N])
  const k = reduceAxis(K, "k", k0)
  const l = reduceAxis(L, "l", l0)
  const C = compute("C", [M, N], (i, j) => sum(mul(at(A, i, k.var), at(B, l.var, j)), [k, l]))
  const values = (shape: readonly number[]) => fromArray("float32", shape, Array.from({ length: shape[0] * shape[1] }, () => rng.float(-1, 1)))
  return { family: "shifted_reduce", outputs: [C], inputs: new Map([["A", values(A.shape)], ["B", values(B.shape)]]) }
}

describe("lower: reduce axes that do not start at 0", () => {
  it("evalTIR(lower(schedule)) == evalTE(compute) under random schedules (rfactor of either axis, of a half of its split)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0x7fffffff }), fc.integer({ min: 0, max: 0x7fffffff }), fc.constantFrom("k", "l"), fc.constantFrom("whole", "outer", "inner"), (seed, sseed, axis, half) => {
        const cc = shiftedReduceCase(seed)
        check(cc, randomSchedule(cc.outputs, sseed))
        let s = S.createSchedule(cc.outputs)
        let a: string = axis
        if (half !== "whole") {
          const sp = S.split(s, "C", axis, { factor: 2 })
          s = sp.schedule
          a = half === "outer" ? sp.outer : sp.inner
        }
        check(cc, S.rfactor(s, "C", a).schedule)
      }),
      lawParams(40),
    )
  })
})

describe("computeAt with several consumers", () => {
  it("a softmax's exps computed once at the output's row or column tile (read by the row's sum, computed there too, and by the division) == TE: the region is the union of the consumers'", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0x7fffffff }), fc.integer({ min: 1, max: 4 }), fc.boolean(), fc.boolean(), (seed, factor, splitRow, atTile) => {
        const cc = buildCompute("softmax", seed)
        let s = S.createSchedule(cc.outputs)
        // the output's columns split (the division reads its tile of the row, the sum the whole row)
        const sp = S.split(s, "softmax", "softmax.j", { factor })
        s = sp.schedule
        let row = "softmax.i"
        if (splitRow) {
          const r = S.split(s, "softmax", row, { factor: 2 })
          s = r.schedule
          row = r.inner
        }
        // at the column tile: the division reads `factor` exps, the sum (computed again each tile) the row
        if (atTile) row = sp.outer
        s = S.computeAt(s, "rowsum", "softmax", row)
        s = S.computeAt(s, "exp", "softmax", row)
        s = S.computeAt(s, "rowmax", "exp", "exp.i")
        check(cc, s)
        // the several consumers are each computed at that loop: the sum at the root is refused
        expect(() => S.computeAt(S.computeAt(S.createSchedule(cc.outputs), "exp", "softmax", "softmax.i"), "rowsum", "softmax", "softmax.i")).toThrow(S.ScheduleError)
      }),
      lawParams(40),
    )
  })
})

describe("schedule primitives", () => {
  withSteps("split", (cc, _r, s) => {
    const st = s.stages.get(lastStage(cc))!
    return S.split(s, st.name, st.leaf[0], { factor: 3 }).schedule
  })
  withSteps("split (nparts)", (cc, _r, s) => {
    const st = s.stages.get(lastStage(cc))!
    return S.split(s, st.name, st.leaf[st.leaf.length - 1], { nparts: 2 }).schedule
  })
  withSteps("tile", (cc, _r, s) => {
    const st = s.stages.get(lastStage(cc))!
    if (st.leaf.length < 2) return s
    return S.tile(s, st.name, st.leaf[0], st.leaf[1], 2, 3).schedule
  })
  withSteps("fuse", (cc, _r, s) => {
    const st = s.stages.get(lastStage(cc))!
    return st.leaf.length >= 2 ? S.fuse(s, st.name, st.leaf[0], st.leaf[1]).schedule : s
  })
  withSteps("reorder", (cc, _r, s) => {
    const st = s.stages.get(lastStage(cc))!
    return S.reorder(s, st.name, [...st.leaf].reverse())
  })
  withSteps("computeInline", (cc, _r, s) => {
    for (const n of s.order) if (s.stages.get(n)!.op.body.kind !== "reduce" && !cc.outputs.some((o) => o.name === n)) s = S.computeInline(s, n)
    return s
  })
  withSteps("computeAt", (cc, _r, s) => {
    for (const n of [...s.order].reverse()) {
      if (cc.outputs.some((o) => o.name === n)) continue
      const cons = S.consumersOf(s, n)
      if (cons.length !== 1 || s.stages.get(cons[0])!.attach.kind !== "root") continue
      const tgt = s.stages.get(cons[0])!
      s = S.computeAt(s, n, cons[0], tgt.leaf[0])
    }
    return s
  })
  withSteps("computeRoot", (cc, _r, s) => {
    const n = s.order[0]
    if (cc.outputs.some((o) => o.name === n) || s.stages.get(n)!.op.body.kind === "reduce") return s
    return S.computeRoot(S.computeInline(s, n), n)
  })
  withSteps("cacheRead", (cc, _r, s) => {
    const st = s.stages.get(lastStage(cc))!
    const input = st.op.inputs[0]
    return S.cacheRead(s, input.name, "shared", [st.name]).schedule
  })
  withSteps("cacheRead + computeAt (a fetch per outer iteration)", (cc, _r, s) => {
    const st = s.stages.get(lastStage(cc))!
    const input = st.op.inputs[0]
    const r = S.cacheRead(s, input.name, "local", [st.name])
    return S.computeAt(r.schedule, r.stage, st.name, st.leaf[0])
  })
  withSteps("cacheWrite", (cc, _r, s) => {
    const w = S.cacheWrite(s, lastStage(cc), "local")
    const st = w.schedule.stages.get(lastStage(cc))!
    return S.computeAt(w.schedule, w.stage, st.name, st.leaf[st.leaf.length - 1])
  })
  withSteps("rfactor", (cc, _r, s) => {
    const st = [...s.stages.values()].find((x) => x.op.body.kind === "reduce")
    if (!st) return s
    const red = st.leaf.find((a) => st.axes.get(a)!.type === "reduce")!
    const sp = S.split(s, st.name, red, { factor: 2 })
    return S.rfactor(sp.schedule, st.name, sp.inner).schedule
  })
  withSteps("rfactor (outer half)", (cc, _r, s) => {
    const st = [...s.stages.values()].find((x) => x.op.body.kind === "reduce")
    if (!st) return s
    const red = st.leaf.find((a) => st.axes.get(a)!.type === "reduce")!
    const sp = S.split(s, st.name, red, { factor: 3 })
    const rf = S.rfactor(sp.schedule, st.name, sp.outer)
    return S.parallel(rf.schedule, rf.stage, rf.schedule.stages.get(rf.stage)!.leaf[0])
  })
  withSteps("storageAlign", (cc, _r, s) => {
    const inter = s.order.find((n) => !cc.outputs.some((o) => o.name === n) && s.stages.get(n)!.op.shape.length >= 2)
    return inter ? S.storageAlign(s, inter, 0, 4, 1) : s
  })
  withSteps("doubleBuffer", (cc, _r, s) => {
    for (const n of [...s.order].reverse()) {
      if (cc.outputs.some((o) => o.name === n)) continue
      const cons = S.consumersOf(s, n)
      if (cons.length !== 1 || s.stages.get(cons[0])!.attach.kind !== "root") continue
      const tgt = s.stages.get(cons[0])!
      s = S.doubleBuffer(S.computeAt(s, n, cons[0], tgt.leaf[tgt.leaf.length - 1]), n)
    }
    return s
  })
  withSteps("parallel", (cc, _r, s) => S.parallel(s, lastStage(cc), s.stages.get(lastStage(cc))!.leaf[0]))
  withSteps("vectorize", (cc, _r, s) => {
    const st = s.stages.get(lastStage(cc))!
    const data = st.leaf.filter((a) => st.axes.get(a)!.type === "data")
    return S.vectorize(s, st.name, data[data.length - 1])
  })
  withSteps("unroll", (cc, _r, s) => {
    const st = s.stages.get(lastStage(cc))!
    return S.unroll(s, st.name, st.leaf[st.leaf.length - 1])
  })
  withSteps("pragma", (cc, _r, s) => S.pragma(s, lastStage(cc), s.stages.get(lastStage(cc))!.leaf[0], "auto_unroll_max_step", "8"))
})

describe("schedule algebra", () => {
  it("split then fuse keeps the iteration order", () => {
    fc.assert(
      fc.property(arbComputeCase(), fc.integer({ min: 1, max: 6 }), (cc, factor) => {
        const name = lastStage(cc)
        const s0 = S.createSchedule(cc.outputs)
        const st = s0.stages.get(name)!
        const extent = st.axes.get(st.leaf[0])!.extent
        if (extent % factor !== 0) return
        const sp = S.split(s0, name, st.leaf[0], { factor })
        const fu = S.fuse(sp.schedule, name, sp.outer, sp.inner)
        check(cc, fu.schedule)
        expect(fu.schedule.stages.get(name)!.axes.get(fu.fused)!.extent).toBe(extent)
      }),
      lawParams(30),
    )
  })

  it("reorder then its inverse is the identity", () => {
    fc.assert(
      fc.property(arbComputeCase(), (cc) => {
        const name = lastStage(cc)
        const s0 = S.createSchedule(cc.outputs)
        const leaf = s0.stages.get(name)!.leaf
        const rev = [...leaf].reverse()
        const back = S.reorder(S.reorder(s0, name, rev), name, leaf)
        expect(back.stages.get(name)!.leaf).toEqual(leaf)
        expect(printPrimFunc(lowerSync(back))).toBe(printPrimFunc(lowerSync(s0)))
      }),
      lawParams(30),
    )
  })

  it("schedules round-trip through serialization and the same steps lower to equal TIR", () => {
    fc.assert(
      fc.property(arbScheduledCase(), (sc) => {
        const steps = S.parseSteps(S.serializeSteps(sc.schedule.steps))
        const again = S.replaySync(sc.outputs, steps)
        expect(S.printSchedule(again)).toBe(S.printSchedule(sc.schedule))
        expect(printPrimFunc(lowerSync(again))).toBe(printPrimFunc(lowerSync(sc.schedule)))
      }),
      lawParams(40),
    )
  })

  it("illegal requests are ScheduleErrors naming the stage and the axis", () => {
    const cc = buildCompute("matmul", 1)
    const s = S.createSchedule(cc.outputs)
    const err = (f: () => unknown) => {
      try {
        f()
      } catch (e) {
        return e as S.ScheduleError
      }
      throw new Error("expected a ScheduleError")
    }
    expect(err(() => S.vectorize(s, "C", "k"))._tag).toBe("ScheduleError")
    expect(err(() => S.vectorize(s, "C", "k")).axis).toBe("k")
    expect(err(() => S.split(s, "C", "nope", { factor: 2 })).stage).toBe("C")
    expect(err(() => S.computeInline(s, "C")).reason).toMatch(/output/)
    expect(err(() => S.parallel(s, "C", "k")).reason).toMatch(/reduce/)
    // computeAt into a stage that does not read it
    const sm = buildCompute("softmax", 2)
    const ss = S.createSchedule(sm.outputs)
    expect(err(() => S.computeAt(ss, "rowmax", "rowsum", "rowsum.i")).reason).toMatch(/does not read/)
    // reordering an axis of another stage
    expect(err(() => S.reorder(ss, "exp", ["rowmax.i"])).axis).toBe("rowmax.i")
  })
})

describe("GPU-style schedules (verified without a GPU)", () => {
  it("bind blockIdx/threadIdx with shared-memory cacheRead, cooperative fetching and barriers == TE", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1 << 30 }), fc.constantFrom(2, 4), fc.constantFrom(2, 4), (seed, tile, kt) => {
        const cc = buildCompute("matmul", seed)
        const [m, n] = cc.outputs[0].shape
        const s = sharedTiledMatmul(cc.outputs, tile, kt)
        void m
        void n
        check(cc, s)
      }),
      lawParams(30),
    )
  })

  it("vthread: a virtually threaded loop evaluates equal to the TE", () => {
    fc.assert(
      fc.property(arbComputeCase(["matmul", "elementwise", "conv2d"]), (cc) => {
        const st = S.createSchedule(cc.outputs).stages.get(lastStage(cc))!
        const sp = S.split(S.createSchedule(cc.outputs), st.name, st.leaf[0], { nparts: 2 })
        check(cc, S.bind(sp.schedule, st.name, sp.outer, "vthread"))
      }),
      lawParams(30),
    )
  })
})

describe("tensorize", () => {
  it("tensorize and lower tensor intrinsics: a matmul tiled to the gemm micro-kernel's shape evaluates equal to the TE (the intrinsic runs by its declaration)", () => {
    fc.assert(
      fc.property(arbTensorizedCase(), (tc) => {
        const f = tc.func
        expect(printPrimFunc(f)).toContain(tc.intrinsic)
        check({ family: "matmul", outputs: tc.outputs, inputs: tc.inputs }, tc.schedule)
        // lower tensor intrinsics: the call becomes its declared loop nest, before or after flattening
        const want = evaluateTE(tc.outputs, tc.inputs)
        for (const passes of [lowerIntrinsics, tirSequential("lowering.FlattenThenLower", [flattenStorage(), lowerIntrinsics]), cpuTirPipeline()]) {
          const g = runTirSync(passes, f)
          expect(printPrimFunc(g)).not.toContain("gemm_")
          assertAllClose([evaluatePrimFunc(g, tc.inputs).get("C")!], want, 1e-4, 1e-5)
        }
      }),
      lawParams(30),
    )
  })

  it("tensorize with the VNNI int8 dot product (u8 × s8 → s32) evaluates equal to the TE", async () => {
    const { vnniDot16x4 } = await import("../../src/ast/te/intrinsic.js")
    const { placeholder, compute, at, reduceAxis, sum } = await import("../../src/ast/te/tensor.js")
    const { mul, cast } = await import("../../src/ast/te/expr.js")
    const { fromArray } = await import("../../src/ast/graph/tensor.js")
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 3 }), fc.integer(), (M, NB, KB, seed) => {
        const [N, K] = [16 * NB, 4 * KB]
        const A = placeholder("A", [M, K], "uint8")
        const B = placeholder("B", [N, K], "int8")
        const k = reduceAxis(K, "k")
        const C = compute("C", [M, N], (i, j) => sum(mul(cast("int32", at(A, i, k.var)), cast("int32", at(B, j, k.var))), [k]), "int32")
        const inputs = new Map([
          ["A", fromArray("uint8", [M, K], Array.from({ length: M * K }, (_, q) => (q * 37 + seed) & 255))],
          ["B", fromArray("int8", [N, K], Array.from({ length: N * K }, (_, q) => ((q * 11 + seed) % 256) - 128))],
        ])
        let s = S.createSchedule([C])
        const j = S.split(s, "C", "C.j", { factor: 16 })
        const ks = S.split(j.schedule, "C", "k", { factor: 4 })
        s = S.reorder(ks.schedule, "C", ["C.i", j.outer, ks.outer, j.inner, ks.inner])
        s = S.tensorize(s, "C", j.inner, vnniDot16x4)
        expect(printPrimFunc(lowerSync(s))).toContain("vnni_dot_16x4")
        check({ family: "vnni", outputs: [C], inputs }, s)
      }),
      lawParams(20),
    )
  })

  it("tensorize with a pattern that does not match is a ScheduleError naming the stage and axis", async () => {
    const { gemmMicroKernel } = await import("../../src/ast/te/intrinsic.js")
    const cc = buildCompute("elementwise", 3)
    const s = S.createSchedule(cc.outputs)
    const st = s.stages.get(lastStage(cc))!
    try {
      S.tensorize(s, st.name, st.leaf[0], gemmMicroKernel(4, 4, 4))
      throw new Error("expected a ScheduleError")
    } catch (e) {
      expect((e as S.ScheduleError)._tag).toBe("ScheduleError")
      expect((e as S.ScheduleError).stage).toBe(st.name)
      expect((e as S.ScheduleError).reason).toMatch(/does not match/)
    }
  })
})
