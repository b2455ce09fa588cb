// lowering.HoistLaneGuards (cuda): a vectorized loop whose body is one guarded statement,
// `for[vectorized] e in [0, n): if (c) S`, where c has the same value for every lane (vector-
// access.ts's laneInvariant: the tiling rule's fetch guards test the row a vector lies in, and a
// vector never straddles rows when the row's length is a multiple of n), becomes
// `if (c at e = 0) for[vectorized] e: S` — straight-line again, so lowering.VectorizeLoops keeps it
// vectorized and the emitter can make it one float4 access. Any other loop is left as it is. Pure.
import { c, substitute } from "../../ast/te/expr.js"
import { mapStmt } from "../../ast/tir/tir.js"
import { laneInvariant } from "../../ast/tir/vector-access.js"
import { tirPass } from "./tir-pass.js"

export const hoistLaneGuards = tirPass("lowering.HoistLaneGuards", 1, (f) => ({
  ...f,
  body: mapStmt(f.body, (x) => {
    if (x.kind !== "for" || x.forKind !== "vectorized" || x.extent.kind !== "const" || x.min.kind !== "const" || x.min.value !== 0) return undefined
    const b = x.body
    if (b.kind !== "if" || b.else || !laneInvariant(b.cond, x.var.name, x.extent.value)) return undefined
    return { kind: "if", cond: substitute(b.cond, new Map([[x.var.name, c(0)]])), then: { ...x, body: b.then } }
  }),
}))
