// lowering.Simplify: index arithmetic folded under the bounds of the loops around it; guards it
// proves drop (a false one with what it guards), loops of no iteration vanish and a loop of one
// iteration becomes its body at that iteration.
//
// Opt level 1: a cheap clean-up that every emitter accepts the output of with or without it (the
// TIR analogue of FoldConstants, also at 1); below 1 the loop nests reach the emitters as lowered.
import { constValue, type Expr } from "../../ast/te/expr.js"
import { simplify, simplifyMemo, type Interval, type SimplifyMemo } from "../../ast/te/simplify.js"
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

/** A statement simplified with the bounds of the loop variables in scope (`memo`: the pass's, over one function). */
export const simplifyStmt = (s: Stmt, bounds: Map<string, Interval>, memo: SimplifyMemo = simplifyMemo()): Stmt => {
  const g = (e: Expr) => simplify(e, bounds, memo)
  switch (s.kind) {
    case "for": {
      const min = g(s.min)
      const extent = g(s.extent)
      const lo = constValue(min)
      const ext = constValue(extent)
      if (ext !== undefined && ext <= 0) return seq([])
      // a loop of one iteration becomes its body at that iteration, simplified once (the var a
      // constant there decides every guard its bounds would)
      if (ext === 1 && s.forKind !== "thread" && s.forKind !== "vthread") return simplifyStmt(substituteStmt(s.body, new Map([[s.var.name, min]])), bounds, memo)
      const inner = loopBounds(bounds, s.var.name, lo, ext)
      const body = simplifyStmt(s.body, inner, memo)
      if (isEmpty(body)) return body
      return { ...s, min, extent, body }
    }
    case "seq":
      // (seq flattens the parts: one emptied leaves nothing behind)
      return seq(s.body.map((b) => simplifyStmt(b, bounds, memo)))
    case "if": {
      const cond = g(s.cond)
      if (cond.kind === "const") return cond.value ? simplifyStmt(s.then, bounds, memo) : s.else ? simplifyStmt(s.else, bounds, memo) : seq([])
      return { ...s, cond, then: simplifyStmt(s.then, bounds, memo), ...(s.else ? { else: simplifyStmt(s.else, bounds, memo) } : {}) }
    }
    case "store":
      return { ...s, indices: s.indices.map(g), value: g(s.value) }
    case "allocate":
      return { ...s, body: simplifyStmt(s.body, bounds, memo) }
    case "let":
      return { ...s, value: g(s.value), body: simplifyStmt(s.body, bounds, memo) }
    case "evaluate":
      return { ...s, value: g(s.value) }
    case "barrier":
      return s
    case "shuffle":
      return { ...s, indices: s.indices.map(g), value: g(s.value) }
    case "intrinsic":
      return { ...s, output: { ...s.output, base: s.output.base.map(g) }, inputs: s.inputs.map((r) => ({ ...r, base: r.base.map(g) })) }
  }
}

export const simplifyTir = tirPass("lowering.Simplify", 1, (f) => ({ ...f, body: simplifyStmt(f.body, new Map(), simplifyMemo()) }))
