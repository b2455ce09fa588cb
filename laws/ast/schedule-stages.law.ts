// The schedule's stages where schedule.law.ts's random requests rarely reach, each checked against
// the primitives' documented rules and against what the TE computes:
// - The default schedule: every stage at root in global memory, its loops its root axes as
//   declared (data, then reduce), nothing split, annotated, aligned or double-buffered; and the
//   stages cacheRead, cacheWrite and rfactor add start the same way (in their own scope).
// - A program of several outputs: every output refuses inlining and a scope other than global,
//   and the lowered function computes each output.
// - A stage cached three times into one scope: three new stages of distinct names (base, base1,
//   base2), the meaning kept.
// - computeAt through an inlined consumer: a producer is attached at its consumer's consumer when
//   the stage between is inlined (and refused while it is not).
// - cacheRead: a reader that does not read the tensor, or no stage, is refused naming it, and so is
//   a tensor that does not exist (with readers or none); the copy of a tensor read by several
//   stages is computed before the first of them.
// - rfactor: a fused reduce axis, a half of a split half, and an axis of a stage with other splits
//   or fuses are refused with a ScheduleError; a reduction with a condition, its axis split with a
//   remainder, keeps its meaning under rfactor of either half (the condition and the split's guard
//   both hold in the partials).
// - Attachments hold after every step: a step that would break one is refused naming the step's
//   primitive, stage and axis; inlining the stage a producer is attached at is refused as leaving it
//   no loops; a cacheRead that would give an attached stage a second consumer is refused.
// - New axes never take a name the stage has (a reduce axis named like a split half or a fused axis).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as S from "../../src/ast/schedule/schedule.js"
import { arbComputeCase } from "../../src/ast/te/arbitrary.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { add, c, eq, floormod, mul } from "../../src/ast/te/expr.js"
import { at, compute, placeholder, reduceAxis, sum } from "../../src/ast/te/tensor.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { assertAllClose, assertLowersToTE, lawParams, smallIntInputs } from "../support.js"

/** `f` throws a ScheduleError of this primitive and stage whose reason matches. */
const expectRefused = (f: () => unknown, primitive: string, stage: string, reason: RegExp = /./) => {
  try {
    f()
  } catch (e) {
    if (!(e instanceof S.ScheduleError)) throw e
    expect([e.primitive, e.stage]).toEqual([primitive, stage])
    expect(e.reason).toMatch(reason)
    return
  }
  throw new Error(`${primitive} on ${stage} was applied`)
}

/** A stage as the default schedule makes it; `scope` where a primitive gave it one. */
const assertFresh = (st: S.Stage, scope: S.MemoryScope = "global") => {
  const op = st.op
  const red = op.body.kind === "reduce" ? op.body.axes : []
  expect(st.root).toEqual([...op.axes.map((a) => ({ name: a.var.name, extent: a.dom.extent, type: "data" })), ...red.map((a) => ({ name: a.var.name, extent: a.dom.extent, type: "reduce" }))])
  expect(st.leaf).toEqual(st.root.map((a) => a.name))
  expect(st.axes).toEqual(new Map(st.root.map((a) => [a.name, a])))
  expect([st.relations, st.align, [...st.annotations], [...st.pragmas], st.attach, st.scope, st.doubleBuffer, st.tensorize]).toEqual([[], [], [], [], { kind: "root" }, scope, false, undefined])
}

describe("fresh stages", () => {
  it("the default schedule: every stage at root, in global memory, its root axes as its loops, nothing else; the stages cacheRead, cacheWrite and rfactor add start the same way", () => {
    fc.assert(
      fc.property(arbComputeCase(), fc.constantFrom<S.MemoryScope>("shared", "local"), (cc, scope) => {
        const s = S.createSchedule(cc.outputs)
        for (const st of s.stages.values()) assertFresh(st)
        const first = s.stages.get(s.order[0])!
        const w = S.cacheWrite(s, first.name, scope)
        assertFresh(w.schedule.stages.get(w.stage)!, scope)
        const read = first.op.inputs[0]
        if (read) {
          const r = S.cacheRead(s, read.name, scope, [first.name])
          assertFresh(r.schedule.stages.get(r.stage)!, scope)
        }
        const red = s.order.map((n) => s.stages.get(n)!).find((x) => x.op.body.kind === "reduce")
        if (red) {
          const f = S.rfactor(s, red.name, red.root.find((a) => a.type === "reduce")!.name)
          assertFresh(f.schedule.stages.get(f.stage)!)
        }
      }),
      lawParams(40),
    )
  })
})

describe("several outputs", () => {
  it("each output refuses inlining and a scope other than global; the lowered function computes every output", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 5 }), fc.nat(), (n, m, seed) => {
        // P = A + 1 and Q = P · 2 both outputs (Q reads P), R = Q + A the third
        const A = placeholder("A", [n, m])
        const P = compute("P", [n, m], (i, j) => add(at(A, i, j), c(1, "float32")))
        const Q = compute("Q", [n, m], (i, j) => mul(at(P, i, j), c(2, "float32")))
        const R = compute("R", [n, m], (i, j) => add(at(Q, i, j), at(A, i, j)))
        const s = S.createSchedule([P, Q, R])
        for (const name of ["P", "Q", "R"]) {
          expectRefused(() => S.computeInline(s, name), "computeInline", name, /output/)
          expectRefused(() => S.setScope(s, name, "shared"), "setScope", name, /global/)
          expect(S.setScope(s, name, "global").stages.get(name)!.scope).toBe("global")
        }
        assertLowersToTE(s, smallIntInputs(seed, [A]))
      }),
      lawParams(10),
    )
  })
})

describe("a stage cached three times into one scope", () => {
  it("three new stages of distinct names, the first of base, base1, base2, … not taken; the meaning kept", () => {
    fc.assert(
      fc.property(arbComputeCase(), fc.constantFrom<S.MemoryScope>("shared", "local"), (cc, scope) => {
        let s = S.createSchedule(cc.outputs)
        const stage = s.order[s.order.length - 1]
        const names: string[] = []
        for (let k = 0; k < 3; k++) {
          const w = S.cacheWrite(s, stage, scope)
          s = w.schedule
          names.push(w.stage)
        }
        expect(names).toEqual([`${stage}.${scope}`, `${stage}.${scope}1`, `${stage}.${scope}2`])
        expect(s.order.filter((n) => names.includes(n))).toEqual(names)
        const exact = cc.outputs.every((o) => o.dtype.startsWith("int"))
        const want = evaluateTE(cc.outputs, cc.inputs)
        const got = evaluatePrimFunc(lowerSync(s), cc.inputs)
        assertAllClose(cc.outputs.map((o) => got.get(o.name)!), want, exact ? 0 : 1e-4, exact ? 0 : 1e-5)
      }),
      lawParams(20),
    )
  })
})

describe("computeAt through an inlined consumer", () => {
  it("P read by Q, inlined into R: P is attached at R (at any leaf axis of R, split or not); with Q not inlined it is refused", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 4 }), fc.nat(), fc.nat(), (n, m, factor, pick, seed) => {
        const A = placeholder("A", [n, m])
        const P = compute("P", [n, m], (i, j) => mul(at(A, i, j), c(3, "float32")))
        const Q = compute("Q", [n, m], (i, j) => add(at(P, i, j), c(1, "float32")))
        const R = compute("R", [n, m], (i, j) => add(at(Q, i, j), at(Q, i, j)))
        const sp = S.split(S.createSchedule([R]), "R", "R.j", { factor })
        const leaf = sp.schedule.stages.get("R")!.leaf
        const axis = leaf[pick % leaf.length]
        expectRefused(() => S.computeAt(sp.schedule, "P", "R", axis), "computeAt", "P")
        const s = S.computeAt(S.computeInline(sp.schedule, "Q"), "P", "R", axis)
        expect(s.stages.get("P")!.attach).toEqual({ kind: "at", stage: "R", axis })
        assertLowersToTE(s, smallIntInputs(seed, [A]))
      }),
      lawParams(30),
    )
  })
})

describe("cacheRead", () => {
  it("a reader that does not read the tensor, or no stage, and a tensor that does not exist are refused naming them; the copy of a tensor read by several stages comes before the first of them", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 5 }), fc.constantFrom<S.MemoryScope>("shared", "local"), fc.boolean(), fc.nat(), (n, m, scope, both, seed) => {
        // A read by P and by R (P first); Q reads only P
        const A = placeholder("A", [n, m])
        const P = compute("P", [n, m], (i, j) => add(at(A, i, j), c(1, "float32")))
        const Q = compute("Q", [n, m], (i, j) => mul(at(P, i, j), c(2, "float32")))
        const R = compute("R", [n, m], (i, j) => add(at(Q, i, j), at(A, i, j)))
        const s = S.createSchedule([R])
        expectRefused(() => S.cacheRead(s, "A", scope, ["P", "Q"]), "cacheRead", "Q", /does not read 'A'/)
        expectRefused(() => S.cacheRead(s, "A", scope, ["R", "nope"]), "cacheRead", "nope")
        for (const readers of [["R"], []]) expectRefused(() => S.cacheRead(s, "nope", scope, readers), "cacheRead", "nope", /no such tensor/)
        const readers = both ? ["R", "P"] : ["R"]
        const r = S.cacheRead(s, "A", scope, readers)
        const first = both ? "P" : "R"
        expect(r.schedule.order).toEqual(s.order.flatMap((x) => (x === first ? [r.stage, x] : [x])))
        for (const x of ["P", "R"]) expect(r.schedule.stages.get(x)!.op.inputs.map((t) => t.name).includes(r.stage)).toBe(readers.includes(x))
        assertLowersToTE(r.schedule, smallIntInputs(seed, [A]))
      }),
      lawParams(30),
    )
  })
})

describe("rfactor", () => {
  it("a fused reduce axis, a half of a split half, or an axis of a stage with other splits or fuses is refused (a ScheduleError)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 2, max: 6 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 3 }), (n, k1, k2, factor) => {
        // R[i] = Σ_{r, q} A[i, r, q]
        const A = placeholder("A", [n, k1, k2])
        const r = reduceAxis(k1, "r")
        const q = reduceAxis(k2, "q")
        const R = compute("R", [n], (i) => sum(at(A, i, r.var, q.var), [r, q]))
        const s = S.createSchedule([R])
        const fused = S.fuse(s, "R", "r", "q")
        expectRefused(() => S.rfactor(fused.schedule, "R", fused.fused), "rfactor", "R", /root reduce axis/)
        const half = S.split(s, "R", "r", { factor })
        const quarter = S.split(half.schedule, "R", half.inner, { factor: 1 })
        for (const a of [quarter.outer, quarter.inner]) expectRefused(() => S.rfactor(quarter.schedule, "R", a), "rfactor", "R", /root reduce axis/)
        // other relations: a split data axis (rfactor of a root reduce axis), or the other reduce axis split too (rfactor of a half)
        const data = S.split(s, "R", "R.i", { factor })
        expectRefused(() => S.rfactor(data.schedule, "R", "r"), "rfactor", "R", /before other splits/)
        const other = S.split(half.schedule, "R", "q", { factor })
        for (const a of [half.outer, half.inner, other.outer, other.inner]) expectRefused(() => S.rfactor(other.schedule, "R", a), "rfactor", "R")
        // (and without them it is applied)
        expect(S.rfactor(half.schedule, "R", half.outer).schedule.stages.has("R.rf")).toBe(true)
      }),
      lawParams(20),
    )
  })
})

describe("rfactor of a reduction with a condition", () => {
  it("Σ over even k < K of A[i, k], k split with a remainder: rfactor of either half computes what the TE says", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 2, max: 9 }), fc.integer({ min: 2, max: 4 }), fc.boolean(), fc.nat(), (n, K, factor, outer, seed) => {
        const A = placeholder("A", [n, K])
        const k = reduceAxis(K, "k")
        const R = compute("R", [n], (i) => sum(at(A, i, k.var), [k], eq(floormod(k.var, c(2)), c(0))))
        const sp = S.split(S.createSchedule([R]), "R", "k", { factor })
        const r = S.rfactor(sp.schedule, "R", outer ? sp.outer : sp.inner)
        assertLowersToTE(r.schedule, smallIntInputs(seed, [A]))
      }),
      lawParams(30),
    )
  })
})

describe("attachments hold after every step", () => {
  it("a step that would break one is refused naming its primitive, stage and axis; inlining the stage a producer is attached at leaves it no loops; a copy nobody reads would be a second consumer; attaching the stage a producer is attached at nests them", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 3 }), fc.boolean(), (n, m, factor, atRow) => {
        // P read by Q read by R; P attached at one of Q's axes
        const A = placeholder("A", [n, m])
        const P = compute("P", [n, m], (i, j) => add(at(A, i, j), c(1, "float32")))
        const Q = compute("Q", [n, m], (i, j) => mul(at(P, i, j), c(2, "float32")))
        const R = compute("R", [n, m], (i, j) => add(at(Q, i, j), c(3, "float32")))
        const axis = atRow ? "Q.i" : "Q.j"
        const s = S.computeAt(S.createSchedule([R]), "P", "Q", axis)
        for (const step of [
          { prim: "split", stage: "Q", axis, factor },
          { prim: "fuse", stage: "Q", outer: "Q.i", inner: "Q.j" },
        ] as S.Step[]) {
          try {
            S.applyStep(s, step)
            throw new Error(`${step.prim} was applied`)
          } catch (e) {
            if (!(e instanceof S.ScheduleError)) throw e
            expect([e.primitive, e.stage, e.axis]).toEqual([step.prim, "Q", step.prim === "split" ? axis : "Q.i, Q.j"])
            expect(e.reason).toMatch(/compute it at root first/)
          }
        }
        expectRefused(() => S.computeInline(s, "Q"), "computeInline", "Q", /no loops of its own/)
        // attachments nest: Q (with P inside its loop) computed at R's loop keeps the meaning
        assertLowersToTE(S.computeAt(s, "Q", "R", atRow ? "R.j" : "R.i"), smallIntInputs(n * 7 + m, [A]))
        expectRefused(() => S.cacheRead(s, "P", "shared", []), "cacheRead", "P", /would not hold its other consumers/)
      }),
      lawParams(10),
    )
  })
})

describe("new axes never take a name the stage has", () => {
  it("reduce axes named like the halves of a split or a fused axis: the new axes get the next free names, the meaning kept", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 }), fc.nat(), (n, factor, taken, seed) => {
        // R[i] = Σ over reduce axes named R.i.o, R.i.o1, … (taken of them), R.i.i and the name fusing the halves would take, of A[i, …]
        const names = ["R.i.o", "R.i.o1", "R.i.o2"].slice(0, taken)
        const fusedBase = `R.i.o${taken}.R.i.i1.f`
        const rs = [...names, "R.i.i", fusedBase].map((x) => reduceAxis(2, x))
        const A = placeholder("A", [n, ...rs.map(() => 2)])
        const R = compute("R", [n], (i) => sum(at(A, i, ...rs.map((x) => x.var)), rs))
        const sp = S.split(S.createSchedule([R]), "R", "R.i", { factor })
        expect([sp.outer, sp.inner]).toEqual([`R.i.o${taken}`, "R.i.i1"])
        const fu = S.fuse(sp.schedule, "R", sp.outer, sp.inner)
        expect(fu.fused).toBe(`${fusedBase}1`)
        const st = fu.schedule.stages.get("R")!
        expect(st.axes.size).toBe(1 + rs.length + 3)
        expect(st.axes.get(fu.fused)!.type).toBe("data")
        for (const x of rs) expect(st.axes.get(x.var.name)!.type).toBe("reduce")
        assertLowersToTE(fu.schedule, smallIntInputs(seed, [A]))
      }),
      lawParams(20),
    )
  })
})
