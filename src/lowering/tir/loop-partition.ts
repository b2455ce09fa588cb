// lowering.LoopPartition: a constant loop whose body is guarded by `e < n` (the tail of a split
// that does not divide) is cut where the guards start to fail — outermost loop first — so the
// main part runs without them and only the peeled tail keeps (or, simplified, drops) them.
//
// Opt level 3: it copies loop bodies (code grows with every cut) for branch-free main loops; TVM
// leaves it off by default (tir.LoopPartition's partition_const_loop) for the same reason.
//
// A loop a schedule marks with the pragma `loop_partition_hint` (TVM's name) is also cut on the
// conditions of its body's selects and guards (a padded copy's `0 <= iw && iw < W`), at every point
// where a comparison of a linear function of its variable with a constant starts or stops holding,
// so each part's conditions on it are proven or refuted and the interior is a plain copy.
import { add, c, collect, constValue, exprKey, mul, substitute, v, type Expr } from "../../ast/te/expr.js"
import { intervalOf, simplify, type Bounds, type Interval } from "../../ast/te/simplify.js"
import { LOOP_PARTITION_HINT, mapStmt, seq, type Stmt } from "../../ast/tir/tir.js"
import { simplifyStmt } from "./simplify-tir.js"
import { tirPass } from "./tir-pass.js"

const guardsIn = (s: Stmt, out: Expr[] = []): Expr[] => {
  mapStmt(s, (x) => {
    if (x.kind === "if") out.push(x.cond)
    return undefined
  })
  return out
}

/** Bounds of every loop variable declared inside `s` (constant loops only). */
const innerBounds = (s: Stmt): Map<string, Interval> => {
  const b = new Map<string, Interval>()
  mapStmt(s, (x) => {
    if (x.kind === "for") {
      const lo = constValue(x.min)
      const ext = constValue(x.extent)
      if (lo !== undefined && ext !== undefined) b.set(x.var.name, { min: lo, max: lo + ext - 1 })
    }
    return undefined
  })
  return b
}

/** The largest k such that the guard `e < n` holds for every inner iteration when the loop var is below k. */
const safePrefix = (cond: Expr, loopVar: string, inner: Bounds, outer: Bounds): number | undefined => {
  if (cond.kind !== "bin") return undefined
  if (cond.op === "and") {
    const a = safePrefix(cond.a, loopVar, inner, outer)
    const b = safePrefix(cond.b, loopVar, inner, outer)
    return a === undefined ? b : b === undefined ? a : Math.min(a, b)
  }
  if (cond.op !== "lt" || cond.b.kind !== "const") return undefined
  // e = a·v + rest, with a > 0: holds for v < (n - max(rest)) / a
  const lin = increasing(cond.a, loopVar, inner, outer)
  if (lin === undefined || !Number.isFinite(lin.rest.max)) return undefined
  return Math.ceil((cond.b.value - lin.rest.max) / lin.coef)
}

/** e as a·v + rest with a > 0 a constant (e(v) − e(0) is a·v) and rest's bounds; undefined where it is not. */
const increasing = (e: Expr, loopVar: string, inner: Bounds, outer: Bounds): { coef: number; rest: Interval } | undefined => {
  const at0 = simplify(substitute(e, new Map([[loopVar, c(0)]])))
  const at1 = simplify(substitute(e, new Map([[loopVar, c(1)]])))
  const coef = simplify(add(at1, mul(at0, c(-1))))
  if (coef.kind !== "const" || coef.value <= 0) return undefined
  const diff = simplify(add(e, mul(at0, c(-1))))
  if (exprKey(diff) !== exprKey(simplify(mul(v(loopVar), coef)))) return undefined
  return { coef: coef.value, rest: intervalOf(at0, new Map([...outer, ...inner])) }
}

const hinted = (s: Stmt & { kind: "for" }): boolean => (s.pragmas ?? []).some(([k]) => k === LOOP_PARTITION_HINT)

/** Every condition in `s`: its guards' and its selects' (in any expression of a statement). */
const conditionsIn = (s: Stmt): Expr[] => {
  const out: Expr[] = guardsIn(s)
  mapStmt(
    s,
    () => undefined,
    (e) => {
      for (const x of collect(e, (y) => y.kind === "select")) if (x.kind === "select") out.push(x.cond)
      return e
    },
  )
  return out
}

/**
 * The points inside (lo, hi) where a comparison in `cond` of e = a·v + rest with a constant (a > 0,
 * linear in the loop var) changes from unknown to known: below the first it is decided one way for
 * every inner iteration, from the second the other — both are cuts.
 */
const changePoints = (cond: Expr, loopVar: string, inner: Bounds, outer: Bounds, out: Set<number>): void => {
  if (cond.kind !== "bin") return
  if (cond.op === "and" || cond.op === "or") {
    changePoints(cond.a, loopVar, inner, outer, out)
    changePoints(cond.b, loopVar, inner, outer, out)
    return
  }
  if (cond.op !== "lt" && cond.op !== "le" && cond.op !== "ge" && cond.op !== "gt") return
  // n op e as e op' n
  const flip = { lt: "gt", le: "ge", ge: "le", gt: "lt" } as const
  const [op, e, n] = cond.b.kind === "const" ? [cond.op, cond.a, cond.b.value] : cond.a.kind === "const" ? [flip[cond.op], cond.b, cond.a.value] : []
  if (op === undefined || e === undefined || n === undefined) return
  // each comparison as the boundary b where e >= b starts to hold: e < n and e >= n at n, e <= n and e > n at n + 1
  const b = op === "lt" || op === "ge" ? n : n + 1
  const lin = increasing(e, loopVar, inner, outer)
  if (lin === undefined || !Number.isFinite(lin.rest.max) || !Number.isFinite(lin.rest.min)) return
  // e >= b for every rest from v >= (b - rest.min) / a; for none below (b - rest.max) / a
  out.add(Math.ceil((b - lin.rest.max) / lin.coef))
  out.add(Math.ceil((b - lin.rest.min) / lin.coef))
}

const partitionStmt = (s: Stmt, outer: Map<string, Interval>): Stmt => {
  if (s.kind === "for") {
    const lo = constValue(s.min)
    const ext = constValue(s.extent)
    const recurse = (loop: Stmt & { kind: "for" }, bounds: Map<string, Interval>): Stmt => {
      const l = constValue(loop.min)
      const e = constValue(loop.extent)
      const inner = new Map(bounds)
      if (l !== undefined && e !== undefined) inner.set(loop.var.name, { min: l, max: l + e - 1 })
      return { ...loop, body: partitionStmt(loop.body, inner) }
    }
    if (lo === undefined || ext === undefined || s.forKind === "thread" || s.forKind === "vthread") return recurse(s, outer)
    const inner = innerBounds(s.body)
    if (hinted(s)) {
      // every point where a condition on the loop var changes, at once; each part simplified under its own bounds
      const points = new Set<number>()
      for (const g of conditionsIn(s.body)) changePoints(g, s.var.name, inner, outer, points)
      const cuts = [...points].filter((p) => p > lo && p < lo + ext).sort((a, b) => a - b)
      const ends = [lo, ...cuts, lo + ext]
      const { pragmas: hints, ...bare } = s
      const pragmas = (hints ?? []).filter(([k]) => k !== LOOP_PARTITION_HINT)
      const loop: Stmt & { kind: "for" } = pragmas.length ? { ...bare, pragmas } : bare
      const parts = ends.slice(1).map((hi, i) => simplifyStmt({ ...loop, min: c(ends[i]), extent: c(hi - ends[i]) }, outer))
      return seq(parts.map((p) => partitionStmt(p, outer)))
    }
    // outermost first: cut this loop where its guards start to fail, then look inside each part
    let k: number | undefined
    for (const g of guardsIn(s.body)) {
      const p = safePrefix(g, s.var.name, inner, outer)
      if (p !== undefined) k = k === undefined ? p : Math.min(k, p)
    }
    const cut = k === undefined ? undefined : Math.max(lo, Math.min(lo + ext, k))
    if (cut === undefined || cut <= lo || cut >= lo + ext) return recurse(s, outer)
    const parts = [simplifyStmt({ ...s, extent: c(cut - lo) }, outer), simplifyStmt({ ...s, min: c(cut), extent: c(lo + ext - cut) }, outer)]
    return seq(parts.map((p) => partitionStmt(p, outer)))
  }
  if (s.kind === "seq") return seq(s.body.map((b) => partitionStmt(b, outer)))
  if (s.kind === "allocate" || s.kind === "let") return { ...s, body: partitionStmt(s.body, outer) }
  if (s.kind === "if") return { ...s, then: partitionStmt(s.then, outer), ...(s.else ? { else: partitionStmt(s.else, outer) } : {}) }
  return s
}

export const loopPartition = tirPass("lowering.LoopPartition", 3, (f) => ({ ...f, body: partitionStmt(f.body, new Map()) }))
