// Index arithmetic the VTA passes read: an expression as Σ coef·var over chosen loop variables plus
// a rest in which none of them occurs (or not affine in them).
import { add, c, constValue, freeVars, mul, substitute, type Expr } from "../../../ast/te/expr.js"
import { constDifference, linearTerms, simplify } from "../../../ast/te/simplify.js"

export interface Affine {
  readonly coef: ReadonlyMap<string, number>
  readonly rest: Expr
}

/** `e` as Σ coef·var over `vars` + rest; undefined when a var occurs other than linearly. */
export const affineIn = (e: Expr, vars: readonly string[]): Affine | undefined => {
  const lin = linearTerms(simplify(e))
  const coef = new Map<string, number>()
  let rest: Expr = c(lin.k)
  for (const { atom, coef: k } of lin.terms.values()) {
    if (atom.kind === "var" && vars.includes(atom.name)) coef.set(atom.name, (coef.get(atom.name) ?? 0) + k)
    else if ([...freeVars(atom)].some((x) => vars.includes(x))) return undefined
    else rest = add(rest, mul(atom, c(k)))
  }
  return { coef, rest: simplify(rest) }
}

/** e with the variables replaced by constants (or expressions). */
export const bindVars = (e: Expr, values: ReadonlyMap<string, Expr | number>): Expr =>
  simplify(substitute(e, new Map([...values].map(([k, x]) => [k, typeof x === "number" ? c(x) : x]))))

/** Whether a and b are the same value whatever the variables (by their linear forms). */
export const sameValue = (a: Expr, b: Expr): boolean => constDifference(a, b) === 0

export const constOf = (e: Expr): number | undefined => constValue(simplify(e))
