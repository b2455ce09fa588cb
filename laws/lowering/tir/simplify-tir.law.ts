// lowering.Simplify: same meaning; its output verifies (also with loops of non-constant bounds); and what it promises beyond meaning: no
// loop of a constant extent below 2 is left (but thread and vthread loops, which keep their
// launch), no guard of a constant condition, no empty statement inside another; and a second run
// changes nothing.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { printPrimFunc, type Stmt } from "../../../src/ast/tir/tir.js"
import { simplifyTir } from "../../../src/lowering/tir/simplify-tir.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"
import { arbLoweredCase, arbVariedLoops, passLaws } from "./support.js"

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
        expect(printPrimFunc(runTirSync(simplifyTir, once, { verify: false }))).toBe(printPrimFunc(once))
      }),
      lawParams(40),
    )
  })
})
