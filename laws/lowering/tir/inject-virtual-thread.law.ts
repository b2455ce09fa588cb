// lowering.InjectVirtualThread: same meaning (on schedules that bind a data axis to a vthread, among
// others); its output verifies and has no vthread loop left.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { mapStmt, type PrimFunc } from "../../../src/ast/tir/tir.js"
import { injectVirtualThread } from "../../../src/lowering/tir/inject-virtual-thread.js"
import { lawParams } from "../../support.js"
import { applyPass, arbLoweredCase, passLaws } from "./support.js"

passLaws(injectVirtualThread)

const vthreads = (f: PrimFunc): number => {
  let n = 0
  mapStmt(f.body, (x) => {
    if (x.kind === "for" && x.forKind === "vthread") n++
    return undefined
  })
  return n
}

describe("lowering.InjectVirtualThread", () => {
  it("leaves no vthread loop (the cases have some)", () => {
    let seen = 0
    fc.assert(
      fc.property(arbLoweredCase(), (c) => {
        seen += vthreads(c.func)
        expect(vthreads(applyPass(injectVirtualThread, c).output)).toBe(0)
      }),
      lawParams(40),
    )
    expect(seen).toBeGreaterThan(0)
  })
})
