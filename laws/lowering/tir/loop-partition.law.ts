// lowering.LoopPartition: same meaning; its output verifies; and what it is for — where splits do
// not divide, the cut removes every guard (each part's guards are then proven or refuted), so an
// elementwise stage split any way is left with none; on any schedule, it never makes a function
// evaluate more guards (each part of a cut is simplified under narrower bounds, which only drops
// guards), though nested cuts copy a body once per part of each; and, as Before / Expected, where
// a cut falls (the earliest point a linear guard fails, from the loop's min) and where it cannot
// (thread loops, loops of unknown bounds, guards decreasing, not linear, or never changing).
// A loop marked `loop_partition_hint` (a padded copy's columns) is also cut on its selects'
// conditions: every law of a pass on random padded copies, and every column condition decided in
// each part where no inner loop varies it (else only in the parts its inner loops leave undecided).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as S from "../../../src/ast/schedule/schedule.js"
import { buildCompute } from "../../../src/ast/te/arbitrary.js"
import { fromArray } from "../../../src/ast/graph/tensor.js"
import { add, and, c, collect, f32, freeVars, ge, le, lt, mul, select, sub, v, type Expr, type Var } from "../../../src/ast/te/expr.js"
import { at, compute, placeholder } from "../../../src/ast/te/tensor.js"
import { LOOP_PARTITION_HINT, mapStmt, printStmt, seq, type Buffer, type PrimFunc, type Stmt } from "../../../src/ast/tir/tir.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { loopPartition } from "../../../src/lowering/tir/loop-partition.js"
import { simplifyTir } from "../../../src/lowering/tir/simplify-tir.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"
import { arbLoweredCase, assertMeaning, passLaws, type LoweredCase } from "./support.js"

passLaws(loopPartition)

/**
 * A padded copy as the int8 grid's activations: out[h, q, r] = x[h − ph, q·sw + r·d − pw] + 1
 * inside the input, −1 in the padding, its columns `q` marked loop_partition_hint; the taps `r`
 * inside the columns (as the templates schedule it) or outside them — either way a column's bounds
 * vary with the tap, unless there is one tap (each condition on q then a constant bound).
 */
const arbPaddedCopy = (oneTap = false) =>
  fc
    .record({
      H: fc.integer({ min: 1, max: 4 }),
      W: fc.integer({ min: 1, max: 9 }),
      ph: fc.integer({ min: 0, max: 2 }),
      pw: fc.integer({ min: 0, max: 3 }),
      sw: fc.integer({ min: 1, max: 2 }),
      R: fc.integer({ min: 1, max: oneTap ? 1 : 4 }),
      d: fc.integer({ min: 1, max: 2 }),
      extra: fc.integer({ min: 0, max: 3 }),
      inside: fc.boolean(),
    })
    .map(({ H, W, ph, pw, sw, R, d, extra, inside }): LoweredCase & { column: string } => {
      const x = placeholder("x", [H, W])
      const Q = Math.max(1, Math.ceil((W + 2 * pw - (R - 1) * d) / sw)) + extra
      const out = compute("pad", [H + 2 * ph, Q, R], (h, q, r) => {
        const ih = sub(h, c(ph))
        const iw = sub(add(mul(q, c(sw)), mul(r, c(d))), c(pw))
        const inBounds = and(and(ge(ih, c(0)), lt(ih, c(H))), and(le(c(0), iw), lt(iw, c(W))))
        return select(inBounds, add(at(x, ih, iw), f32(1)), f32(-1))
      })
      let sch = S.createSchedule([out])
      const [ah, aq, ar] = sch.stages.get("pad")!.leaf
      if (!inside) sch = S.reorder(sch, "pad", [ah, ar, aq])
      sch = S.pragma(sch, "pad", aq, LOOP_PARTITION_HINT, "1")
      const func = lowerSync(sch)
      const data = Array.from({ length: H * W }, (_, k) => (k * 7) % 11)
      return { func, outputs: [out], inputs: new Map([["x", fromArray("float32", [H, W], data)]]), column: aq }
    })

passLaws(loopPartition, { cases: arbPaddedCopy(), variant: LOOP_PARTITION_HINT })

/** The selects whose condition reads the variable `name`, each weighted by the iterations of the loops around it. */
const selectEvaluations = (s: Stmt, name: string): number => {
  let n = 0
  const count = (st: Stmt, weight: number): void => {
    switch (st.kind) {
      case "for":
        return count(st.body, weight * (st.extent.kind === "const" ? st.extent.value : 1))
      case "seq":
        return st.body.forEach((b) => count(b, weight))
      case "allocate":
      case "let":
        return count(st.body, weight)
      case "if":
        count(st.then, weight)
        if (st.else) count(st.else, weight)
        return
      case "store":
        n += weight * collect(st.value, (e) => e.kind === "select" && freeVars(e.cond).has(name)).length
        return
      default:
        return
    }
  }
  count(s, 1)
  return n
}

const pragmasIn = (s: Stmt): string[] => {
  const out: string[] = []
  mapStmt(s, (x) => {
    if (x.kind === "for") for (const [k] of x.pragmas ?? []) out.push(k)
    return undefined
  })
  return out
}

describe("lowering.LoopPartition: loop_partition_hint", () => {
  it("decides every condition on the hinted columns where no other loop varies them (one tap), and drops the hint", () => {
    let padded = 0
    fc.assert(
      fc.property(arbPaddedCopy(true), (pc) => {
        const f = runTirSync(loopPartition, pc.func)
        if (selectEvaluations(pc.func.body, pc.column) > 0) padded++
        expect(selectEvaluations(f.body, pc.column)).toBe(0)
        expect(pragmasIn(f.body)).not.toContain(LOOP_PARTITION_HINT)
        assertMeaning(f, pc)
      }),
      lawParams(40),
    )
    expect(padded).toBeGreaterThan(0)
  })

  it("with taps, never evaluates more column conditions (fewer where a part is inside the padding for every tap)", () => {
    let fewer = 0
    fc.assert(
      fc.property(arbPaddedCopy(), (pc) => {
        const f = runTirSync(loopPartition, pc.func)
        const before = selectEvaluations(pc.func.body, pc.column)
        const after = selectEvaluations(f.body, pc.column)
        expect(after).toBeLessThanOrEqual(before)
        if (after < before) fewer++
        assertMeaning(f, pc)
      }),
      lawParams(40),
    )
    expect(fewer).toBeGreaterThan(0)
  })

  it("leaves an unhinted loop's selects as they are", () => {
    const body = loop(i, { kind: "store", buffer: "A", indices: [i], value: select(and(ge(sub(i, c(1)), c(0)), lt(sub(i, c(1)), c(2))), f32(1), f32(0)) })
    expect(partitioned(body)).toBe(lines("for i in [0, +4):", "  A[i] = select((((i - 1) >= 0) && ((i - 1) < 2)), 1.0f, 0.0f)"))
  })

  it("cuts a hinted loop where its selects' bounds change, each part simplified", () => {
    const hint = (s: Stmt): Stmt => (s.kind === "for" ? { ...s, pragmas: [[LOOP_PARTITION_HINT, "1"]] } : s)
    const copy = (cond: Expr) => hint(loop(i, { kind: "store", buffer: "A", indices: [i], value: select(cond, f32(1), f32(0)) }, c(6)))
    // 1 <= i < 4 (as (i - 1) >= 0 && (i - 1) < 3): three parts, none with a select
    expect(partitioned(copy(and(ge(sub(i, c(1)), c(0)), lt(sub(i, c(1)), c(3)))))).toBe(lines("A[0] = 0.0f", "for i in [1, +3):", "  A[i] = 1.0f", "for i in [4, +2):", "  A[i] = 0.0f"))
    // 2i + j over an inner j in [0, 2) against [3, 8): the parts where j still decides keep the select
    const inner = hint(
      loop(i, loop(j, { kind: "store", buffer: "A", indices: [add(mul(i, c(2)), j)], value: select(and(ge(add(mul(i, c(2)), j), c(3)), lt(add(mul(i, c(2)), j), c(8))), f32(1), f32(0)) }, c(2)), c(6)),
    )
    expect(partitioned(inner)).toBe(
      lines(
        "for j in [0, +2):",
        "  A[j] = 0.0f",
        "for j in [0, +2):",
        "  A[(j + 2)] = select(((j + 2) >= 3), 1.0f, 0.0f)",
        "for i in [2, +2):",
        "  for j in [0, +2):",
        "    A[((i * 2) + j)] = 1.0f",
        "for i in [4, +2):",
        "  for j in [0, +2):",
        "    A[((i * 2) + j)] = 0.0f",
      ),
    )
  })
})

const guards = (f: PrimFunc) => {
  let n = 0
  mapStmt(f.body, (x) => {
    if (x.kind === "if") n++
    return undefined
  })
  return n
}

/** How many guards a run evaluates, at most: each guard weighted by the iterations of the loops around it. */
const guardEvaluations = (s: Stmt, weight = 1): number => {
  switch (s.kind) {
    case "for":
      return guardEvaluations(s.body, weight * (s.extent.kind === "const" ? Math.max(0, s.extent.value) : 1))
    case "seq":
      return s.body.reduce((n, b) => n + guardEvaluations(b, weight), 0)
    case "if":
      return weight + guardEvaluations(s.then, weight) + (s.else ? guardEvaluations(s.else, weight) : 0)
    case "allocate":
    case "let":
      return guardEvaluations(s.body, weight)
    default:
      return 0
  }
}

/** The elementwise family's output stage (its producers inlined), each axis split by a factor that may not divide it. */
const arbSplitElementwise = () =>
  fc.tuple(fc.integer({ min: 0, max: 0x7fffffff }), fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 2, maxLength: 2 })).map(([seed, factors]) => {
    const cc = buildCompute("elementwise", seed)
    let s = S.createSchedule(cc.outputs)
    for (const name of s.order) if (!cc.outputs.some((o) => o.name === name)) s = S.computeInline(s, name)
    const out = cc.outputs[0].name
    for (const [k, axis] of [...s.stages.get(out)!.leaf].entries()) {
      const extent = s.stages.get(out)!.axes.get(axis)!.extent
      s = S.split(s, out, axis, { factor: Math.min(factors[k], extent) }).schedule
    }
    return { ...cc, func: lowerSync(s) }
  })

describe("lowering.LoopPartition", () => {
  it("an elementwise stage split by factors that do not divide is left without a guard", () => {
    fc.assert(
      fc.property(arbSplitElementwise(), (c) => {
        const f = runTirSync(loopPartition, runTirSync(simplifyTir, c.func))
        expect(guards(f)).toBe(0)
        assertMeaning(f, c)
      }),
      lawParams(40),
    )
  })

  it("never makes a function evaluate more guards", () => {
    let fewer = 0
    fc.assert(
      fc.property(arbLoweredCase(["elementwise", "matmul"]), (c) => {
        const f = runTirSync(simplifyTir, c.func)
        const p = runTirSync(loopPartition, f)
        expect(guardEvaluations(p.body)).toBeLessThanOrEqual(guardEvaluations(f.body))
        if (guardEvaluations(p.body) < guardEvaluations(f.body)) fewer++
      }),
      lawParams(20),
    )
    expect(fewer).toBeGreaterThan(0)
  })
})

// Before / Expected: where the cut falls, and where there is none
const A: Buffer = { name: "A", dtype: "float32", shape: [16], scope: "global" }
const [i, j, n] = [v("i"), v("j"), v("n")]
const loop = (x: Var, body: Stmt, extent: Expr = c(4), min: Expr = c(0), forKind: "serial" | "thread" = "serial"): Stmt => ({
  kind: "for",
  var: x,
  min,
  extent,
  forKind,
  ...(forKind === "thread" ? { thread: "threadIdx.x" as const } : {}),
  body,
})
/** for i in [0, 4): for j in [0, 3): if cond: A[3i + j] = 1 */
const nest = (cond: Expr): Stmt => loop(i, loop(j, { kind: "if", cond, then: { kind: "store", buffer: "A", indices: [add(mul(i, c(3)), j)], value: f32(1) } }, c(3)))
const partitioned = (body: Stmt): string => printStmt(runTirSync(loopPartition, { name: "f", params: [A], body }, { verify: false }).body)
const lines = (...ls: string[]) => ls.map((l) => `  ${l}`).join("\n")
const guardedStore = ["for i in [0, +4):", "  for j in [0, +3):", "    if %:", "      A[((i * 3) + j)] = 1.0f"]
const unchanged = (cond: string) => lines(...guardedStore.map((l) => l.replace("%", cond)))

describe("lowering.LoopPartition: where it cuts", () => {
  it("cuts the outer loop where a linear guard starts to fail, then the inner loops of each part", () => {
    expect(partitioned(nest(lt(add(mul(i, c(3)), j), c(10))))).toBe(lines("for i in [0, +3):", "  for j in [0, +3):", "    A[((i * 3) + j)] = 1.0f", "A[9] = 1.0f"))
  })
  it("takes the earliest cut of a conjunction's guards, the inner loop's bound and the outer loop's bounds", () => {
    expect(partitioned(nest(and(lt(i, c(3)), lt(j, c(2)))))).toBe(lines("for i in [0, +3):", "  for j in [0, +2):", "    A[((i * 3) + j)] = 1.0f"))
    expect(partitioned(nest(and(lt(j, c(2)), lt(add(i, j), c(4)))))).toBe(
      lines(
        "for i in [0, +2):",
        "  for j in [0, +2):",
        "    A[((i * 3) + j)] = 1.0f",
        "for i in [2, +2):",
        "  A[(i * 3)] = 1.0f",
        "  for j in [1, +2):",
        "    if ((j < 2) && ((i + j) < 4)):",
        "      A[((i * 3) + j)] = 1.0f",
      ),
    )
  })
  it("cuts from the loop's min", () => {
    const from2 = loop(i, loop(j, { kind: "if", cond: lt(i, c(4)), then: { kind: "store", buffer: "A", indices: [add(mul(i, c(3)), j)], value: f32(1) } }, c(3)), c(4), c(2))
    expect(partitioned(from2)).toBe(lines("for i in [2, +2):", "  for j in [0, +3):", "    A[((i * 3) + j)] = 1.0f"))
  })
  it("never cuts a thread loop (its inner loops, under its bounds, still)", () => {
    const threaded = loop(i, loop(j, { kind: "if", cond: lt(add(mul(i, c(3)), j), c(10)), then: { kind: "store", buffer: "A", indices: [add(mul(i, c(3)), j)], value: f32(1) } }, c(3)), c(4), c(0), "thread")
    expect(partitioned(threaded)).toBe(lines("for[threadIdx.x] i in [0, +4):", "  A[(i * 3)] = 1.0f", "  for j in [1, +2):", "    if (((i * 3) + j) < 10):", "      A[((i * 3) + j)] = 1.0f"))
  })
  it("leaves a guard it cannot place as it is: decreasing, not linear, failing from the start, never failing, against a variable", () => {
    expect(partitioned(nest(lt(sub(c(4), i), c(3))))).toBe(unchanged("((4 - i) < 3)"))
    expect(partitioned(nest(lt(mul(i, i), c(3))))).toBe(unchanged("((i * i) < 3)"))
    expect(partitioned(nest(lt(mul(i, j), c(4))))).toBe(unchanged("((i * j) < 4)"))
    expect(partitioned(nest(le(i, c(2))))).toBe(unchanged("(i <= 2)"))
    expect(partitioned(nest(lt(add(i, c(10)), c(5))))).toBe(unchanged("((i + 10) < 5)"))
    expect(partitioned(nest(lt(i, c(10))))).toBe(unchanged("(i < 10)"))
    expect(partitioned({ kind: "let", var: n, value: c(3), body: nest(lt(i, n)) })).toBe(`  let n = 3\n${unchanged("(i < n)")}`)
  })
  it("cuts at the earliest of several guards", () => {
    const store = (k: number): Stmt => ({ kind: "store", buffer: "A", indices: [add(i, c(k))], value: f32(1) })
    const two = loop(i, seq([{ kind: "if", cond: lt(i, c(2)), then: store(4) }, { kind: "if", cond: lt(i, c(3)), then: store(0) }]))
    expect(partitioned(two)).toBe(lines("for i in [0, +2):", "  A[(i + 4)] = 1.0f", "  A[i] = 1.0f", "A[2] = 1.0f"))
  })
  it("cuts loops inside a let and inside a guard, both arms", () => {
    const inner = nest(lt(add(mul(i, c(3)), j), c(10)))
    const cut = ["for i in [0, +3):", "  for j in [0, +3):", "    A[((i * 3) + j)] = 1.0f", "A[9] = 1.0f"]
    const indent = (ls: string[]) => ls.map((l) => `  ${l}`)
    expect(partitioned({ kind: "let", var: n, value: c(3), body: { kind: "if", cond: lt(n, c(5)), then: inner, else: inner } })).toBe(
      lines("let n = 3", "if (n < 5):", ...indent(cut), "else:", ...indent(cut)),
    )
  })
  it("leaves a loop of non-constant min uncut, and never cuts a vthread loop", () => {
    const guarded = (cond: Expr) => loop(j, { kind: "if", cond, then: { kind: "store", buffer: "A", indices: [j], value: f32(1) } }, c(3))
    expect(partitioned({ kind: "let", var: n, value: c(0), body: loop(i, guarded(lt(i, c(3))), c(4), n) })).toBe(`  let n = 0\n${lines("for i in [n, +4):", "  for j in [0, +3):", "    if (i < 3):", "      A[j] = 1.0f")}`)
    const vthread: Stmt = { kind: "for", var: i, min: c(0), extent: c(4), forKind: "vthread", thread: "vthread", body: guarded(lt(i, c(3))) }
    expect(partitioned(vthread)).toBe(lines("for[vthread] i in [0, +4):", "  for j in [0, +3):", "    if (i < 3):", "      A[j] = 1.0f"))
  })
  it("leaves a loop of non-constant bounds uncut", () => {
    const body = loop(i, loop(j, { kind: "if", cond: lt(i, c(3)), then: { kind: "store", buffer: "A", indices: [add(mul(i, c(3)), j)], value: f32(1) } }, c(3)), n)
    expect(partitioned({ kind: "let", var: n, value: c(4), body })).toBe(`  let n = 4\n${lines("for i in [0, +n):", "  for j in [0, +3):", "    if (i < 3):", "      A[((i * 3) + j)] = 1.0f")}`)
  })
})
