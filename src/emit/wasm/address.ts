// Affine addressing of the `wasm` target: an index is split into linear terms (atom × coefficient)
// and a constant. The constant goes into the load's memarg offset; the terms invariant in a loop are
// summed once, before it, into a "base" local holding start + Σ terms · element size (start: the
// local holding the buffer's address — a param's pointer, or a frame shared by the frame's
// buffers), and inner loops extend their parent's base; an access then adds only the terms its base
// lacks. i32 arithmetic wraps, so regrouping the sum is exact; a base is used only when every term
// is provably non-negative, so its address never wraps below the start (wasm addresses are unsigned).
import { exprKey, freeVars, type Expr } from "../../ast/te/expr.js"
import { linearTerms, type Interval } from "../../ast/te/simplify.js"
import type { Stmt } from "../../ast/tir/tir.js"

export interface Term {
  readonly atom: Expr
  readonly coef: number
}

export interface Affine {
  /** By the atom's key (JSON), coefficient ≠ 0, sorted by key. */
  readonly terms: ReadonlyMap<string, Term>
  readonly k: number
}

/** A hoisted partial address: the local holding start + Σ terms · size (bytes). */
export interface Base {
  readonly local: number
  /** The local holding the start address it extends. */
  readonly start: number
  /** Element size the coefficients were scaled by. */
  readonly size: number
  readonly terms: ReadonlyMap<string, Term>
}

/**
 * The linear forms already taken, by the index expression itself (expressions are immutable): every
 * loop of a nest asks again for the forms of every access inside it (hoistBases, stepBases), and
 * keying each term's atom (its JSON) took a fifth of a ResNet-18 wasm compile.
 */
const affineForms = new WeakMap<Expr, Affine>()

/** The linear form of an int32 index. */
export const affineOf = (e: Expr): Affine => {
  const known = affineForms.get(e)
  if (known) return known
  const { terms, k } = linearTerms(e, exprKey)
  const sorted = [...terms].filter(([, t]) => t.coef !== 0).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  const form: Affine = { terms: new Map(sorted), k }
  affineForms.set(e, form)
  return form
}

/** Provably ≥ 0 under `bounds` (variables, constants, +, ·, min, max, floordiv/floormod by a positive constant). */
export const nonNegative = (e: Expr, bounds: ReadonlyMap<string, Interval>): boolean => {
  switch (e.kind) {
    case "const":
      return e.value >= 0
    case "var":
      return (bounds.get(e.name)?.min ?? -1) >= 0
    case "bin":
      switch (e.op) {
        case "add":
        case "mul":
        case "min":
        case "max":
          return nonNegative(e.a, bounds) && nonNegative(e.b, bounds)
        case "floordiv":
        case "floormod":
          return e.b.kind === "const" && e.b.value > 0 && nonNegative(e.a, bounds)
        default:
          return false
      }
    default:
      return false
  }
}

/** Whether an atom may be evaluated anywhere (no memory read, no division by a non-constant). */
export const pureAtom = (e: Expr): boolean => {
  switch (e.kind) {
    case "const":
    case "var":
      return true
    case "bin":
      if ((e.op === "div" || e.op === "floordiv" || e.op === "floormod") && !(e.b.kind === "const" && e.b.value !== 0)) return false
      return pureAtom(e.a) && pureAtom(e.b)
    case "cast":
      return pureAtom(e.value)
    default:
      return false
  }
}

/** Whether the affine form's terms are all non-negative (so any partial sum is). */
export const termsNonNegative = (a: Affine, bounds: ReadonlyMap<string, Interval>): boolean =>
  [...a.terms.values()].every((t) => t.coef > 0 && nonNegative(t.atom, bounds))

/** The base among `bases` (from `start`, of element size `size`) whose terms are the largest subset of `a`'s with equal coefficients. */
export const bestBase = (bases: readonly Base[], a: Affine, size: number, start: number): Base | undefined => {
  let best: Base | undefined
  for (const b of bases) {
    if (b.size !== size || b.start !== start || (best && b.terms.size <= best.terms.size)) continue
    if ([...b.terms].every(([key, t]) => a.terms.get(key)?.coef === t.coef)) best = b
  }
  return best
}

export const baseKey = (start: number, size: number, terms: ReadonlyMap<string, Term>): string => `${start}|${size}|${[...terms].map(([k, t]) => `${t.coef}*${k}`).join("+")}`

/** Each term's variables where its atom is pure (else undefined), by the form (immutable): asked of every access at every loop level. */
const pureFreeVarsByForm = new WeakMap<Affine, readonly (readonly string[] | undefined)[]>()

const pureFreeVars = (a: Affine): readonly (readonly string[] | undefined)[] => {
  let known = pureFreeVarsByForm.get(a)
  if (!known) pureFreeVarsByForm.set(a, (known = [...a.terms.values()].map((t) => (pureAtom(t.atom) ? [...freeVars(t.atom)] : undefined))))
  return known
}

/**
 * The partial sums worth hoisting before a loop over `body`: for each memory access (start, index,
 * element size) whose terms are all non-negative, its terms free of the loop's variable and of every
 * variable bound inside (`inner`), when there are any and they are pure. Deduplicated, in order.
 */
export const invariantParts = (
  accesses: readonly { readonly start: number; readonly index: Expr; readonly size: number }[],
  bound: ReadonlySet<string>,
  bounds: ReadonlyMap<string, Interval>,
): { readonly start: number; readonly size: number; readonly terms: ReadonlyMap<string, Term> }[] => {
  const out = new Map<string, { start: number; size: number; terms: ReadonlyMap<string, Term> }>()
  for (const { start, index, size } of accesses) {
    const a = affineOf(index)
    if (!termsNonNegative(a, bounds)) continue
    const free = pureFreeVars(a)
    const inv = new Map([...a.terms].filter((_, k) => free[k] !== undefined && free[k].every((v) => !bound.has(v))))
    if (inv.size === 0 || inv.size === a.terms.size) continue
    const key = baseKey(start, size, inv)
    if (!out.has(key)) out.set(key, { start, size, terms: inv })
  }
  return [...out.values()]
}

/** Every variable a loop or let binds inside `s`, with the constant bounds of the loops that have them. */
export const boundInside = (s: Stmt, vars = new Set<string>(), bounds = new Map<string, Interval>()): { vars: Set<string>; bounds: Map<string, Interval> } => {
  switch (s.kind) {
    case "for":
      vars.add(s.var.name)
      if (s.min.kind === "const" && s.extent.kind === "const" && s.extent.value > 0) bounds.set(s.var.name, { min: s.min.value, max: s.min.value + s.extent.value - 1 })
      boundInside(s.body, vars, bounds)
      break
    case "let":
      vars.add(s.var.name)
      boundInside(s.body, vars, bounds)
      break
    case "seq":
      s.body.forEach((b) => boundInside(b, vars, bounds))
      break
    case "if":
      boundInside(s.then, vars, bounds)
      if (s.else) boundInside(s.else, vars, bounds)
      break
    case "allocate":
      boundInside(s.body, vars, bounds)
      break
    default:
      break
  }
  return { vars, bounds }
}
