// How an index moves with a loop variable: the coefficient of the variable in an expression linear
// in it (the wasm vector plans', the widened reads' and the copies' unit-stride test; the slab a
// parallel iteration reads, lowering.PrefetchNextTile).
import { collect, type Expr } from "./expr.js"

/** Does `e` mention the variable `name`? */
export const mentions = (e: Expr, name: string): boolean => collect(e, (x) => x.kind === "var" && x.name === name).length > 0

/** The coefficient of `v` in `e` when `e` is linear in it, else undefined. */
export const coef = (e: Expr, v: string): number | undefined => {
  if (!mentions(e, v)) return 0
  switch (e.kind) {
    case "var":
      return 1
    case "bin": {
      const a = coef(e.a, v)
      const b = coef(e.b, v)
      if (a === undefined || b === undefined) return undefined
      if (e.op === "add") return a + b
      if (e.op === "sub") return a - b
      if (e.op === "mul") {
        if (e.a.kind === "const") return b * e.a.value
        if (e.b.kind === "const") return a * e.b.value
      }
      return undefined
    }
    default:
      return undefined
  }
}
