// Address hoisting of the `wasm` target's loops: before a loop, the partial addresses invariant in
// it (address.ts finds them) are computed once into locals, each extending the best enclosing base;
// accesses inside then add only the terms their base lacks.
import { collect, type Expr } from "../../ast/te/expr.js"
import type { Stmt } from "../../ast/tir/tir.js"
import { STORAGE, type FnBuilder } from "./builder.js"
import { baseKey, bestBase, boundInside, invariantParts, type Base } from "./address.js"
import { emitScaledTerms, type Scope } from "./expr.js"
import { FRAME } from "./layout.js"

/** The (start, index, element size) of every access to a memory buffer inside `s` (not promoted ones). */
const memoryAccesses = (sc: Scope, s: Stmt): { start: number; index: Expr; size: number }[] => {
  const out: { start: number; index: Expr; size: number }[] = []
  const sizes = new Map([...sc.bufs].map(([n, b]) => [n, { start: b.base, size: STORAGE[b.dtype].bytes }] as const))
  const ofExpr = (e: Expr) =>
    collect(e, (x) => x.kind === "read").forEach((x) => {
      const sz = x.kind === "read" && x.indices.length === 1 ? sizes.get(x.source) : undefined
      if (sz !== undefined && x.kind === "read") out.push({ ...sz, index: x.indices[0] })
    })
  const rec = (x: Stmt): void => {
    switch (x.kind) {
      case "store": {
        const sz = sizes.get(x.buffer)
        if (sz !== undefined && x.indices.length === 1) out.push({ ...sz, index: x.indices[0] })
        ofExpr(x.value)
        return
      }
      case "for":
        return rec(x.body)
      case "seq":
        return x.body.forEach(rec)
      case "if":
        ofExpr(x.cond)
        rec(x.then)
        if (x.else) rec(x.else)
        return
      case "allocate":
        if (x.buffer.scope !== "local") sizes.set(x.buffer.name, { start: FRAME, size: STORAGE[x.buffer.dtype].bytes })
        return rec(x.body)
      case "let":
        ofExpr(x.value)
        return rec(x.body)
      case "evaluate":
        return ofExpr(x.value)
      default:
        return
    }
  }
  rec(s)
  return out
}

const MAX_BASES_PER_LOOP = 6

/** Before a loop: the partial addresses invariant in it, each in a local extending the best enclosing base (address.ts). */
export const hoistBases = <S extends Scope>(fb: FnBuilder, sc: S, loop: Stmt & { kind: "for" }): S => {
  if (sc.boundsCheck) return sc
  const inside = boundInside(loop)
  const bounds = new Map([...sc.bounds, ...inside.bounds])
  const have = new Set((sc.bases ?? []).map((b) => baseKey(b.start, b.size, b.terms)))
  const added: Base[] = []
  for (const part of invariantParts(memoryAccesses(sc, loop), inside.vars, bounds)) {
    if (added.length >= MAX_BASES_PER_LOOP) break
    const key = baseKey(part.start, part.size, part.terms)
    if (have.has(key)) continue
    have.add(key)
    const parent = bestBase([...(sc.bases ?? []), ...added], { terms: part.terms, k: 0 }, part.size, part.start)
    const rest = [...part.terms].filter(([k]) => !parent?.terms.has(k)).map(([, t]) => t)
    fb.op("local.get", parent?.local ?? part.start)
    emitScaledTerms(fb, sc, rest, part.size)
    fb.op("i32.add")
    const local = fb.local("i32")
    fb.op("local.set", local)
    added.push({ local, start: part.start, size: part.size, terms: part.terms })
  }
  return added.length ? { ...sc, bases: [...(sc.bases ?? []), ...added] } : sc
}

