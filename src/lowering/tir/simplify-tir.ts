// lowering.Simplify: index arithmetic folded under the bounds of the loops around it; guards it
// proves drop (a false one with what it guards), loops of no iteration vanish and a loop of one
// iteration becomes its body at that iteration.
//
// Opt level 1: a cheap clean-up that every emitter accepts the output of with or without it (the
// TIR analogue of FoldConstants, also at 1); below 1 the loop nests reach the emitters as lowered.
import { constValue, substitute, type Expr } from "../../ast/te/expr.js"
import { simplify, type Interval } from "../../ast/te/simplify.js"
import { seq, substituteStmt, type Stmt } from "../../ast/tir/tir.js"
import { tirPass } from "./tir-pass.js"

const isEmpty = (s: Stmt): boolean => s.kind === "seq" && s.body.length === 0

/** The bounds inside a loop over `name` from `lo`, `ext` iterations (unknown unless both are constant). */
const loopBounds = (bounds: ReadonlyMap<string, Interval>, name: string, lo: number | undefined, ext: number | undefined): Map<string, Interval> => {
  const inner = new Map(bounds)
  if (lo !== undefined && ext !== undefined) inner.set(name, { min: lo, max: lo + ext - 1 })
  else inner.delete(name)
  return inner
}

/** Could simplifyStmt empty `s`? Not without a guard, a loop of unknown or non-positive extent, or an empty seq. */
const mayEmpty = (s: Stmt): boolean => {
  switch (s.kind) {
    case "for":
      return s.extent.kind !== "const" || s.extent.value <= 0 || mayEmpty(s.body)
    case "seq":
      return s.body.length === 0 || s.body.every(mayEmpty)
    case "if":
      return true
    default:
      return false
  }
}

/**
 * isEmpty(simplifyStmt(s', bounds)) where s' is `s` with `substs` applied in order (as
 * substituteStmt would), deciding only the loop extents and guards that can empty a statement
 * (stores, allocations and lets never do): neither the body nor its expressions are rebuilt.
 */
const simplifiesToEmpty = (s: Stmt, bounds: Map<string, Interval>, substs: readonly ReadonlyMap<string, Expr>[] = []): boolean => {
  if (!mayEmpty(s)) return false
  const g = (e: Expr) => simplify(substs.reduce((x, env) => substitute(x, env), e), bounds)
  switch (s.kind) {
    case "for": {
      const min = g(s.min)
      const lo = constValue(min)
      const ext = constValue(g(s.extent))
      if (ext !== undefined && ext <= 0) return true
      if (simplifiesToEmpty(s.body, loopBounds(bounds, s.var.name, lo, ext), substs)) return true
      if (ext === 1 && s.forKind !== "thread" && s.forKind !== "vthread") return simplifiesToEmpty(s.body, bounds, [...substs, new Map([[s.var.name, min]])])
      return false
    }
    case "seq":
      return s.body.every((b) => simplifiesToEmpty(b, bounds, substs))
    case "if": {
      const cond = g(s.cond)
      if (cond.kind !== "const") return false
      return cond.value ? simplifiesToEmpty(s.then, bounds, substs) : s.else ? simplifiesToEmpty(s.else, bounds, substs) : true
    }
    default:
      return false
  }
}

/** A statement simplified with the bounds of the loop variables in scope. */
export const simplifyStmt = (s: Stmt, bounds: Map<string, Interval>): Stmt => {
  const g = (e: Expr) => simplify(e, bounds)
  switch (s.kind) {
    case "for": {
      const min = g(s.min)
      const extent = g(s.extent)
      const lo = constValue(min)
      const ext = constValue(extent)
      if (ext !== undefined && ext <= 0) return seq([])
      const inner = loopBounds(bounds, s.var.name, lo, ext)
      if (ext === 1 && s.forKind !== "thread" && s.forKind !== "vthread") {
        // a loop of one iteration becomes its body at that iteration — unless the body is empty
        // with the var bounded to it (decided without rebuilding the body a second time)
        const once = simplifyStmt(substituteStmt(s.body, new Map([[s.var.name, min]])), bounds)
        return isEmpty(once) || simplifiesToEmpty(s.body, inner) ? seq([]) : once
      }
      const body = simplifyStmt(s.body, inner)
      if (isEmpty(body)) return body
      return { ...s, min, extent, body }
    }
    case "seq":
      return seq(s.body.map((b) => simplifyStmt(b, bounds)).filter((b) => !(b.kind === "seq" && b.body.length === 0)))
    case "if": {
      const cond = g(s.cond)
      if (cond.kind === "const") return cond.value ? simplifyStmt(s.then, bounds) : s.else ? simplifyStmt(s.else, bounds) : seq([])
      return { ...s, cond, then: simplifyStmt(s.then, bounds), ...(s.else ? { else: simplifyStmt(s.else, bounds) } : {}) }
    }
    case "store":
      return { ...s, indices: s.indices.map(g), value: g(s.value) }
    case "allocate":
      return { ...s, body: simplifyStmt(s.body, bounds) }
    case "let":
      return { ...s, value: g(s.value), body: simplifyStmt(s.body, bounds) }
    case "evaluate":
      return { ...s, value: g(s.value) }
    case "barrier":
      return s
    case "intrinsic":
      return { ...s, output: { ...s.output, base: s.output.base.map(g) }, inputs: s.inputs.map((r) => ({ ...r, base: r.base.map(g) })) }
  }
}

export const simplifyTir = tirPass("lowering.Simplify", 1, (f) => ({ ...f, body: simplifyStmt(f.body, new Map()) }))
