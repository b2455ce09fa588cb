// lowering.Simplify: same meaning; its output verifies (also with loops of non-constant bounds); and
// what it promises beyond meaning: no loop of a constant extent below 2 is left, but every thread
// and vthread loop is (they keep their launch), no guard of a constant condition, no empty
// statement inside another; and a second run changes nothing.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { c, f32, lt, min, v } from "../../../src/ast/te/expr.js"
import { printPrimFunc, printStmt, seq, type Buffer, type Stmt } from "../../../src/ast/tir/tir.js"
import { simplifyTir } from "../../../src/lowering/tir/simplify-tir.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"
import { arbLoweredCase, arbVariedLoops, passLaws, profileOf } from "./support.js"

passLaws(simplifyTir)
passLaws(simplifyTir, { cases: arbVariedLoops({ relax: "plain", kinds: ["serial", "unrolled"] }), runs: 20, variant: "some loops of non-constant bounds" })

/** What Simplify leaves none of, found in `s` (a description), else undefined. */
const leftover = (s: Stmt, top = true): string | undefined => {
  switch (s.kind) {
    case "for":
      if (s.extent.kind === "const" && s.extent.value < 2 && s.forKind !== "thread" && s.forKind !== "vthread") return `loop ${s.var.name} of extent ${s.extent.value}`
      return leftover(s.body, false)
    case "seq":
      if (s.body.length === 0 && !top) return "an empty statement"
      for (const b of s.body) {
        const bad = leftover(b, false)
        if (bad) return bad
      }
      return undefined
    case "if":
      if (s.cond.kind === "const") return "a guard of a constant condition"
      return leftover(s.then, false) ?? (s.else ? leftover(s.else, false) : undefined)
    case "allocate":
    case "let":
      return leftover(s.body, false)
    default:
      return undefined
  }
}

describe("lowering.Simplify", () => {
  it("leaves no loop of one or no iteration, no constant guard, no empty statement; a second run changes nothing", () => {
    fc.assert(
      fc.property(fc.oneof(arbLoweredCase(), arbVariedLoops({ relax: "plain" })), (c) => {
        const once = runTirSync(simplifyTir, c.func, { verify: false })
        expect(leftover(once.body)).toBeUndefined()
        // a thread or vthread loop keeps its launch even at one iteration (lowering gives none of no iteration)
        for (const kind of ["thread", "vthread"]) expect([kind, profileOf(once.body).get(kind)]).toEqual([kind, profileOf(c.func.body).get(kind)])
        expect(printPrimFunc(runTirSync(simplifyTir, once, { verify: false }))).toBe(printPrimFunc(once))
      }),
      lawParams(40),
    )
  })
})

describe("lowering.Simplify: Before / Expected", () => {
  const A: Buffer = { name: "A", dtype: "float32", shape: [4], scope: "global" }
  const t = v("t")
  const simplified = (body: Stmt) => printStmt(runTirSync(simplifyTir, { name: "f", params: [A], body }, { verify: false }).body)
  const once = (forKind: "serial" | "thread" | "vthread", body: Stmt): Stmt => ({ kind: "for", var: t, min: c(2), extent: c(1), forKind, ...(forKind === "serial" ? {} : { thread: forKind === "thread" ? ("threadIdx.x" as const) : ("vthread" as const) }), body })
  const store: Stmt = { kind: "store", buffer: "A", indices: [t], value: f32(1) }

  it("a loop of one iteration becomes its body at that iteration, but a thread or vthread loop stays", () => {
    expect(simplified(once("serial", store))).toBe("  A[2] = 1.0f")
    expect(simplified(once("thread", store))).toBe("  for[threadIdx.x] t in [2, +1):\n    A[t] = 1.0f")
    expect(simplified(once("vthread", store))).toBe("  for[vthread] t in [2, +1):\n    A[t] = 1.0f")
  })

  const loop = (min: number, extent: number, body: Stmt): Stmt => ({ kind: "for", var: t, min: c(min), extent: c(extent), forKind: "serial", body })
  const at = (i: ReturnType<typeof c>, x: number): Stmt => ({ kind: "store", buffer: "A", indices: [i], value: f32(x) })

  it("a loop of no iteration, or of a negative count, vanishes with its body; a loop of two stays", () => {
    for (const extent of [0, -1]) expect(simplified(seq([loop(1, extent, store), at(c(0), 3)]))).toBe("  A[0] = 3.0f")
    expect(simplified(loop(1, 2, store))).toBe("  for t in [1, +2):\n    A[t] = 1.0f")
  })

  it("a guard it cannot decide stays with both arms simplified under the loop's bounds", () => {
    // t in [0, 4): t < 2 is open, so the guard stays; in each arm min(t, 7) is t
    const arm = (x: number): Stmt => ({ kind: "store", buffer: "A", indices: [min(t, c(7))], value: f32(x) })
    expect(simplified(loop(0, 4, { kind: "if", cond: lt(t, c(2)), then: arm(1), else: arm(2) }))).toBe(
      "  for t in [0, +4):\n    if (t < 2):\n      A[t] = 1.0f\n    else:\n      A[t] = 2.0f",
    )
  })

  it("an evaluated expression is simplified under the loop's bounds", () => {
    expect(simplified(loop(0, 4, { kind: "evaluate", value: min(t, c(7)) }))).toBe("  for t in [0, +4):\n    t")
  })

  it("a loop whose body a guard refutes under its bounds vanishes, of one iteration or of a thread", () => {
    const refuted: Stmt = { kind: "if", cond: lt(t, c(2)), then: store }
    for (const kind of ["serial", "thread", "vthread"] as const) expect(simplified(seq([once(kind, refuted), { kind: "store", buffer: "A", indices: [c(0)], value: f32(3) }]))).toBe("  A[0] = 3.0f")
  })
})
