// lowering.PromoteAccumulators: where a local buffer is reduced into by a register tile under
// reduce loops that its index does not use (a stage whose reduction is split outside its column
// tiles, so its local buffer spans more than one register tile), the tile's sums stay in a
// tile-sized local array across those loops — loaded from, stored back to, their local buffer
// once — as the accumulators of a tile computed at its own level do. Runs after Simplify: the
// region guards it proves away would break the nest.
//
// Opt level 2: a standard register optimisation of a reduction's inner loops (what lets gcc keep a
// split reduction's sums in registers); nothing downstream needs it.
import { add, c, collect, constValue, exprKey, mapExpr, mul, read, substitute, v, type Expr } from "../../ast/te/expr.js"
import { simplify } from "../../ast/te/simplify.js"
import { mapStmt, seq, type Buffer, type Stmt } from "../../ast/tir/tir.js"
import { tirPass } from "./tir-pass.js"

type ForStmt = Extract<Stmt, { kind: "for" }>
type StoreStmt = Extract<Stmt, { kind: "store" }>

/** Largest register tile promoted (elements). */
const MAX_PROMOTED = 256

/** A perfect nest from `s` down to one store: its loops and the store, else undefined. */
const perfectNest = (s: Stmt): { loops: ForStmt[]; store: StoreStmt } | undefined => {
  const loops: ForStmt[] = []
  let x = s
  while (x.kind === "for") {
    loops.push(x)
    x = x.body
  }
  return x.kind === "store" ? { loops, store: x } : undefined
}

const varsOf = (es: readonly Expr[]): Set<string> => new Set(es.flatMap((e) => collect(e, (x) => x.kind === "var").map((x) => (x as { name: string }).name)))

/** Whether `idx` takes a different value at every point of the tile loops (checked at a few outer points). */
const injective = (idx: readonly Expr[], tile: readonly ForStmt[]): boolean => {
  // every variable of the index at `at`: the tile's own are set over it, point by point, below
  const outer = [...varsOf(idx)]
  const extents = tile.map((l) => constValue(l.extent)!)
  const points = extents.reduce((p, e) => p * e, 1)
  for (const at of [0, 1, 3]) {
    const seen = new Set<string>()
    for (let k = 0; k < points; k++) {
      const env = new Map<string, Expr>(outer.map((n) => [n, c(at)] as const))
      let rest = k
      for (let j = tile.length - 1; j >= 0; j--) {
        env.set(tile[j].var.name, c(constValue(tile[j].min)! + (rest % extents[j])))
        rest = Math.floor(rest / extents[j])
      }
      const key = idx.map((e) => exprKey(simplify(substitute(e, env)))).join("|")
      if (seen.has(key)) return false
      seen.add(key)
    }
  }
  return true
}

/**
 * The promotion of one loop `r`, when it is the outer loop of a reduction into a local buffer
 * whose innermost loops are a register tile: r → reduce loops (none of them in the store's index)
 * → tile loops (constant bounds, each in the index) → `B[idx] = f(B[idx], …)`. The tile's values
 * live in a local array across r's loops: loaded from B before, stored back after.
 */
const promoteLoop = (r: ForStmt, locals: ReadonlyMap<string, Buffer>, fresh: () => number): Stmt | undefined => {
  const nest = perfectNest(r)
  if (!nest) return undefined
  const { loops, store } = nest
  const buf = locals.get(store.buffer)
  if (!buf) return undefined
  const idxVars = varsOf(store.indices)
  const first = loops.findIndex((l) => idxVars.has(l.var.name))
  if (first < 1) return undefined
  const tile = loops.slice(first)
  if (!tile.every((l) => idxVars.has(l.var.name) && constValue(l.min) !== undefined && constValue(l.extent) !== undefined)) return undefined
  const size = tile.reduce((p, l) => p * constValue(l.extent)!, 1)
  // a buffer of one tile is its own accumulator array already
  if (size > MAX_PROMOTED || size >= buf.shape.reduce((p, d) => p * d, 1)) return undefined
  // the value reads B at the store's index only (an update), and the index covers the tile one to one
  const key = store.indices.map(exprKey).join("|")
  const reads = collect(store.value, (x) => x.kind === "read" && x.source === store.buffer) as Extract<Expr, { kind: "read" }>[]
  if (reads.length === 0 || reads.some((x) => x.indices.map(exprKey).join("|") !== key)) return undefined
  if (!injective(store.indices, tile)) return undefined
  const n = fresh()
  const name = `${store.buffer}.tile${n}`
  const acc: Buffer = { name, dtype: buf.dtype, shape: [size], scope: "local" }
  // the tile's linear index, row-major over the tile loops
  const linOf = (vars: readonly Expr[]): Expr =>
    tile.reduce<Expr>((e, l, j) => add(mul(e, c(constValue(l.extent)!)), add(vars[j], c(-constValue(l.min)!))), c(0))
  const copy = (suffix: string, body: (lin: Expr, idx: readonly Expr[]) => Stmt): Stmt => {
    const vars = tile.map((l) => v(`${l.var.name}.${suffix}${n}`))
    const env = new Map(tile.map((l, j) => [l.var.name, vars[j] as Expr] as const))
    const idx = store.indices.map((e) => substitute(e, env))
    // (unrolled loops stay unrolled; the rest plain loops: a simd pragma on the copies kept gcc
    // from keeping the array in registers)
    return tile.reduceRight<Stmt>(
      (inner, l, j) => ({ kind: "for", var: vars[j] as ForStmt["var"], min: l.min, extent: l.extent, forKind: l.forKind === "unrolled" ? "unrolled" : "serial", body: inner }),
      body(simplify(linOf(vars)), idx),
    )
  }
  const lin = simplify(linOf(tile.map((l) => l.var)))
  const value = mapExpr(store.value, (x) => (x.kind === "read" && x.source === store.buffer ? read(name, [lin], x.dtype) : undefined))
  const main = loops.reduceRight<Stmt>((inner, l) => ({ ...l, body: inner }), { kind: "store", buffer: name, indices: [lin], value })
  const load = copy("in", (li, idx) => ({ kind: "store", buffer: name, indices: [li], value: read(store.buffer, idx, buf.dtype) }))
  const save = copy("out", (li, idx) => ({ kind: "store", buffer: store.buffer, indices: idx, value: read(name, [li], buf.dtype) }))
  return { kind: "allocate", buffer: acc, body: seq([load, main, save]) }
}

/** The outermost loop of each such nest is promoted. */
export const promoteAccumulators = tirPass("lowering.PromoteAccumulators", 2, (f) => {
  const locals = new Map<string, Buffer>()
  mapStmt(f.body, (x) => {
    if (x.kind === "allocate" && x.buffer.scope === "local") locals.set(x.buffer.name, x.buffer)
    return undefined
  })
  let count = 0
  const fresh = () => count++
  const rec = (s: Stmt): Stmt => {
    switch (s.kind) {
      case "for": {
        const p = s.forKind === "serial" ? promoteLoop(s, locals, fresh) : undefined
        if (p) return p
        const body = rec(s.body)
        return body === s.body ? s : { ...s, body }
      }
      case "seq": {
        const body = s.body.map(rec)
        return body.every((b, k) => b === s.body[k]) ? s : seq(body)
      }
      case "allocate":
      case "let": {
        const body = rec(s.body)
        return body === s.body ? s : { ...s, body }
      }
      case "if": {
        const then = rec(s.then)
        const otherwise = s.else ? rec(s.else) : undefined
        return then === s.then && otherwise === s.else ? s : { ...s, then, ...(otherwise ? { else: otherwise } : {}) }
      }
      default:
        return s
    }
  }
  const body = rec(f.body)
  return body === f.body ? f : { ...f, body }
})
