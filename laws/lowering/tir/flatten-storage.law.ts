// lowering.FlattenStorage: same meaning (storageAlign'd stages among the cases); its output
// verifies with flat storage; and what it promises beyond meaning: it is idempotent (flat storage,
// params' views and intrinsic regions' strides are kept as they are on a second run), a param of
// rank 1 is returned as it is, and an access of one index (rank 1) keeps its index.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { showExpr } from "../../../src/ast/te/expr.js"
import { mapStmt, printPrimFunc, type PrimFunc } from "../../../src/ast/tir/tir.js"
import { flattenStorage } from "../../../src/lowering/tir/flatten-storage.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"
import { arbLoweredCase, arbTensorizedCase, passLaws } from "./support.js"

passLaws(flattenStorage(), { unmet: true })

const cases = fc.oneof({ arbitrary: arbLoweredCase(), weight: 3 }, { arbitrary: arbTensorizedCase(), weight: 1 })

/** The function as text, params (views, strides) included. */
const shown = (f: PrimFunc) => `${JSON.stringify(f.params)}\n${printPrimFunc(f)}`

/** Every access of one index, as text: `B[i]`. */
const singleIndexAccesses = (f: PrimFunc): Set<string> => {
  const out = new Set<string>()
  mapStmt(
    f.body,
    (x) => {
      if (x.kind === "store" && x.indices.length === 1) out.add(`${x.buffer}[${showExpr(x.indices[0])}]`)
      return undefined
    },
    (e) => {
      if (e.kind === "read" && e.indices.length === 1) out.add(`${e.source}[${showExpr(e.indices[0])}]`)
      return e
    },
  )
  return out
}

describe("lowering.FlattenStorage", () => {
  it("is idempotent, keeps params of rank 1 as they are, and leaves accesses of one index alone", () => {
    fc.assert(
      fc.property(cases, (c) => {
        const once = runTirSync(flattenStorage(), c.func, { verify: false })
        expect(shown(runTirSync(flattenStorage(), once, { verify: false }))).toBe(shown(once))
        c.func.params.forEach((p, k) => {
          if (p.shape.length === 1) expect(once.params[k]).toBe(p)
        })
        const after = singleIndexAccesses(once)
        for (const a of singleIndexAccesses(c.func)) expect(after).toContain(a)
      }),
      lawParams(40),
    )
  })
})
