// The statement walker of every C-like target: a PrimFunc → the lines of one function, its
// dialect (dialect.ts) rendering what differs. Pure and deterministic: names are generated in
// order of first appearance (params first, in order), so the same function gives the same text.
import { intervalOf, type Interval } from "../../ast/te/simplify.js"
import type { Buffer, PrimFunc, Stmt } from "../../ast/tir/tir.js"
import { storedBuffers } from "../../ast/tir/analysis.js"
import { EmitError } from "../emit-error.js"
import { collect, exprKey, freeVars, read } from "../../ast/te/expr.js"
import type { Block, CDialect, ForStmt, LeafKind, ReduceLoop, StmtOf, Walk } from "./dialect.js"
import { renderExpr } from "./expr.js"
import { Names } from "./names.js"

/** What one function's rendering shares across its scopes. */
interface Kernel {
  readonly dialect: CDialect
  readonly name: string
  readonly vars: Names
  readonly bufs: Names
  /** The module's definitions, by key, in order of first use (shared by its kernels). */
  readonly definitions: Map<string, string>
  readonly out: string[]
}

/** What changes from scope to scope. */
interface Scope {
  readonly buffers: ReadonlyMap<string, Buffer>
  readonly bounds: ReadonlyMap<string, Interval>
  readonly loops: readonly ForStmt[]
}

const walkAt = (k: Kernel, sc: Scope): Walk => {
  const walk: Walk = {
    variable: (name) => k.vars.get(name),
    buf: (name) => k.bufs.get(name),
    access: (source, indices) => k.dialect.access(source, indices, walk),
    expr: (e) => renderExpr(k.dialect.expr, e, walk),
    bounds: sc.bounds,
    buffer: (name) => sc.buffers.get(name),
    loops: sc.loops,
    define: (key, text) => {
      if (!k.definitions.has(key)) k.definitions.set(key, text)
    },
    fail: (reason) => {
      throw new EmitError({ target: k.dialect.target, kernel: k.name, reason })
    },
  }
  return walk
}

/** `sc` where variable `name` has range `iv` (or none: an inner binding shadows an outer one's). */
const bounded = (sc: Scope, name: string, iv: Interval | undefined): Scope => {
  const bounds = new Map(sc.bounds)
  if (iv) bounds.set(name, iv)
  else bounds.delete(name)
  return { ...sc, bounds }
}

/** The range of a loop's variable: [min, min + extent - 1] over the ranges of its bounds, when finite. */
const loopRange = (s: ForStmt, sc: Scope): Interval | undefined => {
  const lo = intervalOf(s.min, sc.bounds)
  const ext = intervalOf(s.extent, sc.bounds)
  return Number.isFinite(lo.min) && Number.isFinite(lo.max + ext.max) ? { min: lo.min, max: lo.max + ext.max - 1 } : undefined
}

const block = (k: Kernel, b: Block, ind: string, body: Stmt, sc: Scope): void => {
  for (const line of b.open) k.out.push(`${ind}${line}`)
  renderStmt(k, body, ind + "  ", sc)
  for (const line of b.close) k.out.push(`${ind}${line}`)
}

const renderStmt = (k: Kernel, s: Stmt, ind: string, sc: Scope): void => {
  const walk = walkAt(k, sc)
  switch (s.kind) {
    case "seq":
      for (const b of s.body) renderStmt(k, b, ind, sc)
      return
    case "if":
      k.out.push(`${ind}if (${walk.expr(s.cond)}) {`)
      renderStmt(k, s.then, ind + "  ", sc)
      if (s.else) {
        k.out.push(`${ind}} else {`)
        renderStmt(k, s.else, ind + "  ", sc)
      }
      k.out.push(`${ind}}`)
      return
    case "for": {
      const whole = k.dialect.wholeLoop?.(s, walk)
      if (whole) {
        for (const line of whole) k.out.push(`${ind}${line}`)
        return
      }
      const inner: Scope = { ...bounded(sc, s.var.name, loopRange(s, sc)), loops: [...sc.loops, s] }
      const red = k.dialect.reduceLoop ? reduceLoopOf(s) : undefined
      const lines = red && k.dialect.reduceLoop?.(s, red, walkAt(k, inner))
      if (lines) {
        for (const line of lines) k.out.push(`${ind}${line}`)
        return
      }
      return block(k, k.dialect.loop(s, walk), ind, s.body, inner)
    }
    case "allocate": {
      const b = k.dialect.allocate(s, walk)
      return block(k, b, ind, s.body, { ...sc, buffers: new Map(sc.buffers).set(s.buffer.name, s.buffer) })
    }
    case "let": {
      const b = k.dialect.let(s, walk)
      return block(k, b, ind, s.body, bounded(sc, s.var.name, b.bound))
    }
    default:
      for (const line of renderLeaf(k.dialect, s.kind, s, walk)) k.out.push(`${ind}${line}`)
  }
}

/** `s` as a reduction into one element (ReduceLoop), when it is one: a serial loop around one such store. */
export const reduceLoopOf = (s: ForStmt): ReduceLoop | undefined => {
  const st = s.body
  if (s.forKind !== "serial" || st.kind !== "store" || st.value.kind !== "bin") return undefined
  const op = st.value.op
  if (op !== "add" && op !== "max" && op !== "min") return undefined
  if (st.indices.some((x) => freeVars(x).has(s.var.name))) return undefined
  const self = exprKey(read(st.buffer, st.indices, st.value.dtype))
  const { a, b } = st.value
  const term = exprKey(a) === self ? b : exprKey(b) === self ? a : undefined
  if (!term || collect(term, (x) => x.kind === "read" && x.source === st.buffer).length > 0) return undefined
  return { store: st, op, term }
}

const renderLeaf = <K extends LeafKind>(dialect: CDialect, kind: K, s: StmtOf<K>, walk: Walk): readonly string[] => dialect.leaf[kind](s, walk)

/**
 * One function of `dialect` exported as `name`: its signature, its body indented by two spaces,
 * its closing brace. Definitions its statements ask for are added to `definitions` (the module's).
 * Throws EmitError (target: the dialect's, kernel: `name`) for what the dialect cannot render.
 */
export const renderFunction = (dialect: CDialect, f: PrimFunc, name: string, definitions: Map<string, string> = new Map()): string => {
  const k: Kernel = { dialect, name, vars: new Names("v"), bufs: new Names("b"), definitions, out: [] }
  const params = f.params.map((p) => k.bufs.get(p.name))
  k.out.push(...dialect.signature(f, name, params, storedBuffers(f.body)))
  renderStmt(k, f.body, "  ", { buffers: new Map(f.params.map((p) => [p.name, p] as const)), bounds: new Map(), loops: [] })
  k.out.push("}")
  return k.out.join("\n")
}
