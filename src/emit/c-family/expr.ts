// Expressions of the C-like targets: the syntax they share — variables by their generated names,
// buffer elements through the dialect's access, `select` as `(c ? t : f)` — rendered here; the
// kinds whose text differs (constants, casts, calls, binary operators) by the dialect's table, with
// its operands already rendered (left to right, so names are generated in order).
import type { Expr } from "../../ast/te/expr.js"
import type { Bounds } from "../../ast/te/simplify.js"

export type ExprOf<K extends Expr["kind"]> = Extract<Expr, { kind: K }>

/** How an expression sees names and buffers: the walker owns the naming. */
export interface ExprScope {
  /** The generated name of a variable. */
  readonly variable: (name: string) => string
  /** The text of an element of buffer `source` at `indices` (the dialect's `access`, with the walker's names). */
  readonly access: (source: string, indices: readonly Expr[]) => string
  /** Known integer ranges of the variables in scope (loops, and the lets a dialect bounds). */
  readonly bounds: Bounds
  /** Throws the EmitError of this target and kernel. */
  readonly fail: (reason: string) => never
}

/** A dialect's text for the expression kinds that differ between targets, given their operands' text. */
export interface ExprRenderer {
  readonly const: (e: ExprOf<"const">) => string
  /** `render` renders any operand of `e` (a rule that reads through its operand: the c target's requantizing clamp). */
  readonly cast: (e: ExprOf<"cast">, value: string, render: (x: Expr) => string) => string
  readonly call: (e: ExprOf<"call">, args: readonly string[], scope: ExprScope) => string
  readonly bin: (e: ExprOf<"bin">, a: string, b: string, scope: ExprScope) => string
}

/** `e` as text under `rules`. Reductions must have been lowered (else the scope's EmitError). */
export const renderExpr = (rules: ExprRenderer, e: Expr, scope: ExprScope): string => {
  const r = (x: Expr) => renderExpr(rules, x, scope)
  switch (e.kind) {
    case "const":
      return rules.const(e)
    case "var":
      return scope.variable(e.name)
    case "read":
      return scope.access(e.source, e.indices)
    case "select":
      return `(${r(e.cond)} ? ${r(e.t)} : ${r(e.f)})`
    case "cast":
      return rules.cast(e, r(e.value), r)
    case "call":
      return rules.call(e, e.args.map(r), scope)
    case "bin": {
      const a = r(e.a)
      return rules.bin(e, a, r(e.b), scope)
    }
    case "reduce":
      return scope.fail("a reduction reached emission: lower it first")
  }
}
