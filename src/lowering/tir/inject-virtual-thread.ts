// lowering.InjectVirtualThread: a vthread loop's iterations are independent by construction, so
// its copies are interleaved statement by statement (s1 of every vthread, then s2 of every
// vthread, …) into one instruction stream — the latency-hiding order of the TVM paper — except
// where the copies would then share storage (an allocation or a shared buffer between barriers in
// the body): those copies run one after another. A vthread loop of unknown bounds becomes serial.
//
// Opt level 0: no emitter has virtual threads; this pass is what gives them a meaning.
import { c, constValue } from "../../ast/te/expr.js"
import { mapStmt, seq, substituteStmt, type Stmt } from "../../ast/tir/tir.js"
import { tirPass } from "./tir-pass.js"

export const injectVirtualThread = tirPass("lowering.InjectVirtualThread", 0, (f) => ({
  ...f,
  body: mapStmt(f.body, (x) => {
    if (x.kind !== "for" || x.forKind !== "vthread") return undefined
    const lo = constValue(x.min)
    const ext = constValue(x.extent)
    if (lo === undefined || ext === undefined) return { ...x, forKind: "serial" }
    const parts = x.body.kind === "seq" ? x.body.body : [x.body]
    const copy = (s: Stmt, i: number) => substituteStmt(s, new Map([[x.var.name, c(lo + i)]]))
    // allocations inside are per vthread: keep each copy's allocation around its own part; a
    // barrier inside guards a buffer every copy fills and reads (shared memory, allocated once per
    // block): interleaved, one copy's fill would overwrite another's before it is read
    if (parts.some((p) => p.kind === "allocate" || p.kind === "barrier")) return seq(Array.from({ length: ext }, (_, i) => copy(x.body, i)))
    return seq(parts.flatMap((p) => Array.from({ length: ext }, (_, i) => copy(p, i))))
  }),
}))
