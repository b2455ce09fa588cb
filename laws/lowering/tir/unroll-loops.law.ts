// lowering.UnrollLoops: same meaning; its output verifies (no unrolled loop beyond the limit) — on
// lowered random schedules, and on them with loops retagged unrolled (any extent, some exactly the
// limit) and bounds made non-constant; and what it does, counted: no unrolled loop is left, one of
// constant bounds within the limit becomes `extent` copies of its body, any other unrolled loop a
// serial loop, and every other loop and store is kept.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { Stmt } from "../../../src/ast/tir/tir.js"
import { unrollLoops } from "../../../src/lowering/tir/unroll-loops.js"
import { lawParams } from "../../support.js"
import { applyPass, arbLoweredCase, arbVariedLoops, loopsOf, passLaws, profileOf, type Profile } from "./support.js"

const LIMIT = 8
const varied = arbVariedLoops({ kinds: ["unrolled", "serial", "parallel"], relax: "plain" })

passLaws(unrollLoops(LIMIT))
passLaws(unrollLoops(LIMIT), { cases: varied, runs: 30, unmet: true, variant: "loops retagged unrolled, some of non-constant bounds" })

/** The profile UnrollLoops(limit) promises: each unrolled loop counted as its copies or as one serial loop. */
const expected = (s: Stmt, limit: number, p: Profile = new Map(), times = 1): Profile => {
  switch (s.kind) {
    case "for": {
      if (s.forKind === "unrolled" && s.min.kind === "const" && s.extent.kind === "const" && s.extent.value <= limit) return expected(s.body, limit, p, times * Math.max(0, s.extent.value))
      const kind = s.forKind === "unrolled" ? "serial" : s.forKind
      p.set(kind, (p.get(kind) ?? 0) + times)
      return expected(s.body, limit, p, times)
    }
    case "seq":
      for (const b of s.body) expected(b, limit, p, times)
      return p
    case "if":
      expected(s.then, limit, p, times)
      return s.else ? expected(s.else, limit, p, times) : p
    case "allocate":
    case "let":
      return expected(s.body, limit, p, times)
    default:
      return profileOf(s, p, times)
  }
}

const sorted = (p: Profile) => Object.fromEntries([...p].filter(([, n]) => n > 0).sort(([a], [b]) => a.localeCompare(b)))

describe("lowering.UnrollLoops", () => {
  it("copies exactly the unrolled loops of constant bounds within the limit, makes the other unrolled loops serial, and keeps every other loop", () => {
    const seen = { copied: 0, serial: 0 }
    fc.assert(
      fc.property(fc.oneof(arbLoweredCase(), varied), fc.nat(), fc.integer({ min: -1, max: 0 }), (c, pick, off) => {
        // the limit at (or one below) the extent of one of its unrolled loops
        const extents = loopsOf(c.func.body).flatMap((l) => (l.forKind === "unrolled" && l.extent.kind === "const" ? [l.extent.value] : []))
        const limit = extents.length ? Math.max(1, extents[pick % extents.length] + off) : LIMIT
        const { input, output } = applyPass(unrollLoops(limit), c)
        expect(sorted(profileOf(output.body))).toEqual(sorted(expected(input.body, limit)))
        const before = profileOf(input.body).get("unrolled") ?? 0
        if (before > 0) {
          const serialBefore = profileOf(input.body).get("serial") ?? 0
          if ((profileOf(output.body).get("serial") ?? 0) > serialBefore) seen.serial++
          else seen.copied++
        }
      }),
      lawParams(60),
    )
    expect(seen.copied).toBeGreaterThan(0)
    expect(seen.serial).toBeGreaterThan(0)
  })
})
