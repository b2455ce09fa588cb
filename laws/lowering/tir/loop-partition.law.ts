// lowering.LoopPartition: same meaning; its output verifies; and what it is for — where splits do
// not divide, the cut removes every guard (each part's guards are then proven or refuted), so an
// elementwise stage split any way is left with none; on any schedule, it never makes a function
// evaluate more guards (each part of a cut is simplified under narrower bounds, which only drops
// guards), though nested cuts copy a body once per part of each; and, as Before / Expected, where
// a cut falls (the earliest point a linear guard fails, from the loop's min) and where it cannot
// (thread loops, loops of unknown bounds, guards decreasing, not linear, or never changing).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as S from "../../../src/ast/schedule/schedule.js"
import { buildCompute } from "../../../src/ast/te/arbitrary.js"
import { add, and, c, f32, le, lt, mul, sub, v, type Expr, type Var } from "../../../src/ast/te/expr.js"
import { mapStmt, printStmt, seq, type Buffer, type PrimFunc, type Stmt } from "../../../src/ast/tir/tir.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { loopPartition } from "../../../src/lowering/tir/loop-partition.js"
import { simplifyTir } from "../../../src/lowering/tir/simplify-tir.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"
import { arbLoweredCase, assertMeaning, passLaws } from "./support.js"

passLaws(loopPartition)

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
