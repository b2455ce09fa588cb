// The arithmetic simplifier for index expressions: canonical linear forms (Σ coef·atom + const,
// atoms ordered by name), constant folding, floor div/mod of linear forms by constants under
// known bounds, min/max and comparisons decided by interval analysis.
import { add, bin, c, isIntDtype, mapExpr, mul, rebin, sameItems, showExpr, type Expr } from "./expr.js"

export interface Interval {
  readonly min: number
  readonly max: number
}

/** Known integer ranges of variables (inclusive). */
export type Bounds = ReadonlyMap<string, Interval>

export interface Linear {
  readonly terms: Map<string, { atom: Expr; coef: number }>
  k: number
}

/**
 * Σ coef·atom + k: sums, differences and products by a constant taken apart, every other
 * expression an atom, atoms merged under `keyOf` (also used by the wasm emitter's addresses).
 */
export const linearTerms = (e: Expr, keyOf: (atom: Expr) => string = showExpr): Linear => {
  const out: Linear = { terms: new Map(), k: 0 }
  const addTerm = (atom: Expr, coef: number) => {
    const key = keyOf(atom)
    const t = out.terms.get(key)
    if (t) t.coef += coef
    else out.terms.set(key, { atom, coef })
  }
  const rec = (x: Expr, s: number): void => {
    if (x.kind === "const") out.k += s * x.value
    else if (x.kind === "bin" && x.op === "add") {
      rec(x.a, s)
      rec(x.b, s)
    } else if (x.kind === "bin" && x.op === "sub") {
      rec(x.a, s)
      rec(x.b, -s)
    } else if (x.kind === "bin" && x.op === "mul" && x.b.kind === "const") rec(x.a, s * x.b.value)
    else if (x.kind === "bin" && x.op === "mul" && x.a.kind === "const") rec(x.b, s * x.a.value)
    else addTerm(x, s)
  }
  rec(e, 1)
  return out
}

/**
 * (a // d)·k·d + (a % d)·k = a·k (floor division, d > 0: the identity that undoes a fused loop's
 * split into its original indices), folded in a linear form until no such pair is left: a fused
 * loop's index read back as one affine expression (a store along it contiguous), not a div / mod pair.
 */
const foldDivMod = (l: Linear): Linear => {
  for (;;) {
    let hit: [string, string, Expr, number] | undefined
    for (const [key, t] of l.terms) {
      const q = t.atom
      if (t.coef === 0 || q.kind !== "bin" || q.op !== "floordiv" || q.b.kind !== "const" || q.b.value <= 0) continue
      const modKey = showExpr(bin("floormod", q.a, q.b))
      const m = l.terms.get(modKey)
      if (m && m.coef !== 0 && m.coef * q.b.value === t.coef) {
        hit = [key, modKey, q.a, m.coef]
        break
      }
    }
    if (!hit) return l
    const [qk, mk, a, k] = hit
    l.terms.delete(qk)
    l.terms.delete(mk)
    const inner = linearTerms(a)
    l.k += k * inner.k
    for (const [key, t] of inner.terms) {
      const cur = l.terms.get(key)
      if (cur) cur.coef += k * t.coef
      else l.terms.set(key, { atom: t.atom, coef: k * t.coef })
    }
  }
}

const linearOf = (e: Expr): Linear | undefined => (isIntDtype(e.dtype) ? foldDivMod(linearTerms(e)) : undefined)

const fromLinear = (l: Linear, dtype: Expr["dtype"]): Expr => {
  const terms = [...l.terms.entries()].filter(([, t]) => t.coef !== 0).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  let e: Expr | undefined
  for (const [, t] of terms) {
    const term = t.coef === 1 ? t.atom : mul(t.atom, c(t.coef, dtype))
    e = e ? add(e, term) : term
  }
  if (!e) return c(l.k, dtype)
  return l.k !== 0 ? add(e, c(l.k, dtype)) : e
}

/** An interval containing every value of `e` under `bounds` (±Infinity when unknown). */
export const intervalOf = (e: Expr, bounds: Bounds): Interval => {
  const r = intervalOfRaw(e, bounds)
  // (an integer bound is never −0, as applyBin's integer results are not)
  return isIntDtype(e.dtype) && (Object.is(r.min, -0) || Object.is(r.max, -0)) ? { min: r.min === 0 ? 0 : r.min, max: r.max === 0 ? 0 : r.max } : r
}

const intervalOfRaw = (e: Expr, bounds: Bounds): Interval => {
  const U = { min: -Infinity, max: Infinity }
  switch (e.kind) {
    case "const":
      return { min: e.value, max: e.value }
    case "var":
      return bounds.get(e.name) ?? U
    case "cast":
      return intervalOf(e.value, bounds)
    case "select": {
      const a = intervalOf(e.t, bounds)
      const b = intervalOf(e.f, bounds)
      return { min: Math.min(a.min, b.min), max: Math.max(a.max, b.max) }
    }
    case "bin": {
      const a = intervalOf(e.a, bounds)
      const b = intervalOf(e.b, bounds)
      switch (e.op) {
        case "add":
          return { min: a.min + b.min, max: a.max + b.max }
        case "sub":
          return { min: a.min - b.max, max: a.max - b.min }
        case "mul": {
          // 0 · ±Infinity counts as 0
          const p = (x: number, y: number) => {
            const r = x * y
            return Number.isNaN(r) ? 0 : r
          }
          const p1 = p(a.min, b.min)
          const p2 = p(a.min, b.max)
          const p3 = p(a.max, b.min)
          const p4 = p(a.max, b.max)
          return { min: Math.min(p1, p2, p3, p4), max: Math.max(p1, p2, p3, p4) }
        }
        case "floordiv":
          if (b.min === b.max && b.min > 0) return { min: Math.floor(a.min / b.min), max: Math.floor(a.max / b.min) }
          return U
        case "floormod":
          if (b.min === b.max && b.min > 0) {
            if (a.min >= 0 && a.max < b.min) return a
            return { min: 0, max: b.min - 1 }
          }
          return U
        case "div": {
          // truncating integer division: monotone in the numerator for a constant divisor; else
          // |a / b| ≤ |a| (|b| ≥ 1 wherever it is defined)
          if (!isIntDtype(e.dtype)) return U
          if (b.min === b.max && b.min !== 0) {
            const lo = Math.trunc(a.min / b.min)
            const hi = Math.trunc(a.max / b.min)
            return b.min > 0 ? { min: lo, max: hi } : { min: hi, max: lo }
          }
          const m = Math.max(Math.abs(a.min), Math.abs(a.max))
          return { min: -m, max: m }
        }
        case "min":
          return { min: Math.min(a.min, b.min), max: Math.min(a.max, b.max) }
        case "max":
          return { min: Math.max(a.min, b.min), max: Math.max(a.max, b.max) }
        default:
          return isIntDtype(e.dtype) || e.dtype === "bool" ? { min: 0, max: 1 } : U
      }
    }
    default:
      return U
  }
}

/**
 * Whether `e` can never be NaN: integers and bools, a constant that is not NaN, a cast of one,
 * a select of two, a min or max of two (NaN in, NaN out), and +, -, · of two whose intervals are
 * finite (inf - inf and 0 · inf are the other ways in). A float variable or tensor read may hold
 * NaN, so is not. Interval folds of float min / max / comparisons need both sides NaN-free: with
 * x NaN, max(x, +inf) is NaN (not +inf), min(max(x, 0), 0) is NaN (not 0), x >= -inf is false.
 */
const nanFree = (e: Expr, bounds: Bounds): boolean => {
  if (isIntDtype(e.dtype) || e.dtype === "bool") return true
  switch (e.kind) {
    case "const":
      return !Number.isNaN(e.value)
    case "cast":
      return nanFree(e.value, bounds)
    case "select":
      return nanFree(e.t, bounds) && nanFree(e.f, bounds)
    case "bin": {
      if (!nanFree(e.a, bounds) || !nanFree(e.b, bounds)) return false
      if (e.op === "min" || e.op === "max") return true
      if (e.op !== "add" && e.op !== "sub" && e.op !== "mul") return false
      const [ia, ib] = [intervalOf(e.a, bounds), intervalOf(e.b, bounds)]
      return [ia.min, ia.max, ib.min, ib.max].every(Number.isFinite)
    }
    default:
      return false
  }
}

/** A condition as a bool: x itself, or x != 0 (simplified in turn, so that simplify stays idempotent). */
const truth = (x: Expr, bounds: Bounds): Expr => (x.dtype === "bool" ? x : simplifyNode(bin("ne", x, c(0, x.dtype)), bounds))

/** Simplifies one node whose children are already simple. */
const simplifyNode = (e: Expr, bounds: Bounds): Expr => {
  if (e.kind !== "bin") return e
  const { op, a, b } = e
  if (isIntDtype(a.dtype) && (op === "add" || op === "sub" || op === "mul")) {
    const l = linearOf(e)
    if (l) return fromLinear(l, e.dtype)
  }
  if ((op === "floordiv" || op === "floormod") && b.kind === "const" && b.value > 0 && isIntDtype(a.dtype)) {
    const ia = intervalOf(a, bounds)
    if (ia.min >= 0 && ia.max < b.value) return op === "floordiv" ? c(0, a.dtype) : a
    // (x·k·d + y) // d = x·k + y // d when 0 ≤ y < d ... split the linear form by divisibility
    const l = linearOf(a)
    if (l) {
      const d = b.value
      const divisible: Linear = { terms: new Map(), k: 0 }
      const rest: Linear = { terms: new Map(), k: 0 }
      for (const [key, t] of l.terms) (t.coef % d === 0 ? divisible : rest).terms.set(key, { ...t })
      const kq = Math.floor(l.k / d) * d
      divisible.k = kq
      rest.k = l.k - kq
      const restE = fromLinear(rest, a.dtype)
      const ir = intervalOf(restE, bounds)
      if (ir.min >= 0 && ir.max < d) {
        if (op === "floormod") return restE
        const q: Linear = { terms: new Map([...divisible.terms].map(([k2, t]) => [k2, { atom: t.atom, coef: t.coef / d }])), k: divisible.k / d }
        return fromLinear(q, a.dtype)
      }
    }
  }
  if ((op === "min" || op === "max" || op === "lt" || op === "le" || op === "gt" || op === "ge" || op === "eq" || op === "ne") && nanFree(a, bounds) && nanFree(b, bounds)) {
    const ia = intervalOf(a, bounds)
    const ib = intervalOf(b, bounds)
    switch (op) {
      case "min":
        if (ia.max <= ib.min) return a
        if (ib.max <= ia.min) return b
        break
      case "max":
        if (ia.min >= ib.max) return a
        if (ib.min >= ia.max) return b
        break
      case "lt":
        if (ia.max < ib.min) return c(1, "bool")
        if (ia.min >= ib.max) return c(0, "bool")
        break
      case "le":
        if (ia.max <= ib.min) return c(1, "bool")
        if (ia.min > ib.max) return c(0, "bool")
        break
      case "gt":
        if (ia.min > ib.max) return c(1, "bool")
        if (ia.max <= ib.min) return c(0, "bool")
        break
      case "ge":
        if (ia.min >= ib.max) return c(1, "bool")
        if (ia.max < ib.min) return c(0, "bool")
        break
      case "eq":
        if (ia.min === ia.max && ib.min === ib.max && ia.min === ib.min) return c(1, "bool")
        if (ia.max < ib.min || ib.max < ia.min) return c(0, "bool")
        break
      case "ne":
        if (ia.max < ib.min || ib.max < ia.min) return c(1, "bool")
        break
    }
  }
  if (op === "and") {
    if (a.kind === "const") return a.value ? truth(b, bounds) : c(0, "bool")
    if (b.kind === "const") return b.value ? truth(a, bounds) : c(0, "bool")
  }
  if (op === "or") {
    if (a.kind === "const") return a.value ? c(1, "bool") : truth(b, bounds)
    if (b.kind === "const") return b.value ? c(1, "bool") : truth(a, bounds)
  }
  return e
}

/**
 * simplify(e): equal in value to `e` wherever `bounds` hold. `memo`: the results of a lowering's
 * earlier calls (simplifyMemo), which one pass over a function, one group's lowering or one
 * kernel's emission makes and passes to each of its calls; without it, a memo of this call alone
 * (the indices of a large body's reads repeat within it).
 */
export const simplify = (e: Expr, bounds: Bounds = new Map(), memo: SimplifyMemo = simplifyMemo()): Expr => {
  if (e.kind === "const" || e.kind === "var") return e
  const key = memoKey(e, bounds, memo)
  const hit = key === undefined ? undefined : memo.results.get(key)
  if (hit) return hit
  const rec = (x: Expr): Expr => {
    // (a node whose children come back as they were is kept, not copied: a float body of
    // thousands of nodes that nothing simplifies — Winograd's sums of reads — stays one object)
    if (x.kind === "bin") return simplifyNode(rebin(x, rec(x.a), rec(x.b)), bounds)
    // a read's indices through the memo: a large body reads one tensor at many points whose
    // indices repeat (a Winograd transform's sums of reads), each simplified once
    if (x.kind === "read") {
      const indices = x.indices.map((i) => simplify(i, bounds, memo))
      return sameItems(indices, x.indices) ? x : { ...x, indices }
    }
    return mapExpr(x, (y) => (y === x ? undefined : rec(y)))
  }
  const out = rec(e)
  if (key === undefined) return out
  if (memo.results.size >= MEMO_CAP) memo.results.clear()
  memo.results.set(key, out)
  return out
}

/**
 * simplify's memo for one lowering (a lowering simplifies the same index expressions under the
 * same bounds again and again: ResNet-18's cold compile, 30,304 calls of 6,356 distinct pairs),
 * made by the stage that lowers and dropped with it: no result outlives the compile it was
 * computed in. Keyed by content, so a result never depends on what was simplified before: the
 * expression's whole structure, the identity of every object simplify carries into its result
 * without looking at (a TE read's `tensor`, a reduction's combiner and axes), and the bounds of
 * exactly the variables it holds — the only bounds simplify reads (a caller may pass one memo with
 * bounds that change between calls). Cleared when full, so it stays bounded. Large expressions are
 * left out: their keys cost as much as simplifying them and they hardly recur (ResNet-18: of 726
 * calls with keys over 500 characters, 34 repeats, against 14,545 repeats in all).
 */
export interface SimplifyMemo {
  readonly results: Map<string, Expr>
  /** A number per object, for keys that need an object's identity (only equality matters; kept for the memo's life, as the lowering's objects are). */
  readonly ids: Map<object, number>
  /**
   * The part of each expression object's key that its bounds do not change (null: too large to
   * keep), written once per object: a pass simplifies the same index object again and again
   * (ResNet-50: half of ~52k calls a compile are an object seen before), and an expression is
   * never changed in place, so its text stays its text. The key is the same string either way.
   */
  readonly shapes: WeakMap<Expr, MemoShape | null>
}

interface MemoShape {
  readonly text: string
  /** Its variables, in the order the key writes their bounds. */
  readonly vars: readonly string[]
}

/** An empty memo, for one lowering's calls of simplify. */
export const simplifyMemo = (): SimplifyMemo => ({ results: new Map(), ids: new Map(), shapes: new WeakMap() })

const MEMO_CAP = 1 << 13
/** The most nodes an expression the memo keeps may have. */
const MEMO_NODES = 24

const idOf = (memo: SimplifyMemo, o: object): number => {
  let id = memo.ids.get(o)
  if (id === undefined) memo.ids.set(o, (id = memo.ids.size))
  return id
}

/** A number's text, -0 apart from 0 (String(-0) is "0"); NaN and ±Infinity have their own. */
const num = (x: number): string => (Object.is(x, -0) ? "-0" : String(x))

/**
 * The memo's key: `e` written out unambiguously (names length-prefixed, arities counted), then the
 * bounds of its variables; undefined past MEMO_NODES nodes. The first part is the object's own
 * (`memo.shapes`), written the first time the memo sees the object.
 */
const memoKey = (e: Expr, bounds: Bounds, memo: SimplifyMemo): string | undefined => {
  let shape = memo.shapes.get(e)
  if (shape === undefined) memo.shapes.set(e, (shape = memoShape(e, memo)))
  if (shape === null) return undefined
  let key = shape.text
  for (const n of shape.vars) {
    const b = bounds.get(n)
    key += b ? `|${num(b.min)},${num(b.max)}` : "|?"
  }
  return key
}

/** `e` written out for memoKey, with the variables it holds; null past MEMO_NODES nodes. */
const memoShape = (e: Expr, memo: SimplifyMemo): MemoShape | null => {
  const vars = new Set<string>()
  let nodes = 0
  const rec = (x: Expr): string => {
    if (++nodes > MEMO_NODES) return ""
    switch (x.kind) {
      case "const":
        return `c${x.dtype} ${num(x.value)};`
      case "var":
        vars.add(x.name)
        return `v${x.dtype} ${x.name.length}:${x.name}`
      case "bin":
        return `b${x.op} ${x.dtype}(${rec(x.a)}${rec(x.b)}`
      case "select":
        return `s${x.dtype}(${rec(x.cond)}${rec(x.t)}${rec(x.f)}`
      case "cast":
        return `t${x.dtype}(${rec(x.value)}`
      case "call":
        return `f${x.fn} ${x.dtype} ${x.args.length}(${x.args.map(rec).join("")}`
      case "read":
        return `r${x.dtype} ${x.source.length}:${x.source}@${x.tensor ? idOf(memo, x.tensor) : "-"} ${x.indices.length}(${x.indices.map(rec).join("")}`
      case "reduce":
        return `R${x.dtype} ${idOf(memo, x.combiner)} ${idOf(memo, x.axes)}(${rec(x.source)}${x.where ? `w${rec(x.where)}` : "-"}`
    }
  }
  const text = rec(e)
  return nodes > MEMO_NODES ? null : { text, vars: [...vars] }
}

/** The difference a - b as a constant, when the linear forms say it is one. */
export const constDifference = (a: Expr, b: Expr): number | undefined => {
  const d = simplify(bin("sub", a, b))
  return d.kind === "const" ? d.value : undefined
}
