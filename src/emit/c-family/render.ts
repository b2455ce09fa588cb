// The statement walker of every C-like target: a PrimFunc → the lines of one function, its
// dialect (dialect.ts) rendering what differs. Pure and deterministic: names are generated in
// order of first appearance (params first, in order), so the same function gives the same text.
import { intervalOf, type Interval } from "../../ast/te/simplify.js"
import type { Buffer, PrimFunc, Stmt } from "../../ast/tir/tir.js"
import { storedBuffers } from "../../ast/tir/analysis.js"
import { EmitError } from "../emit-error.js"
import { collect, exprKey, freeVars, read, type Var } from "../../ast/te/expr.js"
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
  /** The functions its parallel loops were outlined into (the dialect's `outline`), in order. */
  readonly outlined: string[][]
  /** While an outlined body renders: the program names of the variables and buffers it uses, in order of first use. */
  readonly used?: { readonly vars: Set<string>; readonly bufs: Set<string> }
}

/** What changes from scope to scope. */
interface Scope {
  readonly buffers: ReadonlyMap<string, Buffer>
  readonly bounds: ReadonlyMap<string, Interval>
  readonly loops: readonly ForStmt[]
  /** The variables in scope (loops' and lets'), by name. */
  readonly vars: ReadonlyMap<string, Var>
}

const walkAt = (k: Kernel, sc: Scope): Walk => {
  const walk: Walk = {
    variable: (name) => {
      k.used?.vars.add(name)
      return k.vars.get(name)
    },
    buf: (name) => {
      k.used?.bufs.add(name)
      return k.bufs.get(name)
    },
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
      const inner: Scope = { ...bounded(sc, s.var.name, loopRange(s, sc)), loops: [...sc.loops, s], vars: new Map(sc.vars).set(s.var.name, s.var) }
      if (s.forKind === "parallel" && k.dialect.outline && !sc.loops.some((l) => l.forKind === "parallel" || l.forKind === "vectorized")) return outline(k, s, ind, sc, inner)
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
      return block(k, b, ind, s.body, { ...bounded(sc, s.var.name, b.bound), vars: new Map(sc.vars).set(s.var.name, s.var) })
    }
    default:
      for (const line of renderLeaf(k.dialect, s.kind, s, walk)) k.out.push(`${ind}${line}`)
  }
}

/**
 * A parallel loop outlined (the dialect's `outline`): its variable named, its min and extent and its
 * body rendered as they would be in place (the same generated names), recording what of the
 * enclosing scopes they use, which the function captures; its function kept for the kernel's text.
 */
const outline = (k: Kernel, s: ForStmt, ind: string, sc: Scope, inner: Scope): void => {
  const used = { vars: new Set<string>(), bufs: new Set<string>() }
  const body: Kernel = { ...k, out: [], used }
  const inside = walkAt(body, inner)
  const variable = inside.variable(s.var.name)
  const min = inside.expr(s.min)
  const extent = inside.expr(s.extent)
  renderStmt(body, s.body, "    ", inner)
  const stored = storedBuffers(s.body)
  const { definition, call } = k.dialect.outline!(
    {
      loop: s,
      kernel: k.name,
      index: k.outlined.length,
      buffers: [...used.bufs].flatMap((n) => {
        const b = sc.buffers.get(n)
        return b ? [{ buffer: b, stored: stored.has(n) }] : []
      }),
      vars: [...used.vars].flatMap((n) => {
        const x = sc.vars.get(n)
        return x ? [x] : []
      }),
      variable,
      min,
      extent,
      body: body.out,
    },
    walkAt(k, sc),
  )
  k.outlined.push([...definition])
  for (const line of call) k.out.push(`${ind}${line}`)
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

/** What renderFunction writes after a function's signature, and what the signature is made of. */
interface RenderedBody {
  readonly dialect: CDialect
  readonly params: PrimFunc["params"]
  readonly paramNames: readonly string[]
  readonly stored: ReturnType<typeof storedBuffers>
  /** The body's lines and the closing brace. */
  readonly text: string
  /** The definitions the body asked for, in order of asking (each key's first text). */
  readonly definitions: ReadonlyMap<string, string>
  /** The functions its parallel loops were outlined into (the dialect's `outline`), each one text. */
  readonly outlined: readonly string[]
}

/**
 * Bodies rendered in one emission, by body: kernels that share a lowered function (lowering gives
 * groups of the same TE program and schedule one body under their own names — ResNet-50's 58
 * kernels are 29 bodies) render it once. Made by the emitter for one call and dropped with it.
 */
export type RenderMemo = Map<PrimFunc["body"], RenderedBody[]>

/**
 * One function of `dialect` exported as `name`: the functions its parallel loops were outlined into
 * (where the dialect outlines them), then its signature, its body indented by two spaces, its
 * closing brace. Definitions its statements ask for are added to `definitions` (the module's).
 * Throws EmitError (target: the dialect's, kernel: `name`) for what the dialect cannot render.
 * With a memo, a body already rendered in the same dialect with the same params is not walked
 * again: the text is the same, since nothing of the body's rendering reads the name but an error.
 */
export const renderFunction = (dialect: CDialect, f: PrimFunc, name: string, definitions: Map<string, string> = new Map(), memo?: RenderMemo): string => {
  const known = memo?.get(f.body)?.find((r) => r.dialect === dialect && r.params === f.params)
  const body = known ?? renderBody(dialect, f, name)
  // (a body with outlined parallel loops names its functions after the kernel: its text is this name's only)
  if (memo && !known && body.outlined.length === 0) memo.set(f.body, [...(memo.get(f.body) ?? []), body])
  for (const [key, text] of body.definitions) if (!definitions.has(key)) definitions.set(key, text)
  return [...body.outlined.map((d) => `${d}\n`), [...dialect.signature(f, name, body.paramNames, body.stored), body.text].join("\n")].join("\n")
}

const renderBody = (dialect: CDialect, f: PrimFunc, name: string): RenderedBody => {
  const definitions = new Map<string, string>()
  const k: Kernel = { dialect, name, vars: new Names("v"), bufs: new Names("b"), definitions, out: [], outlined: [] }
  const paramNames = f.params.map((p) => k.bufs.get(p.name))
  renderStmt(k, f.body, "  ", { buffers: new Map(f.params.map((p) => [p.name, p] as const)), bounds: new Map(), loops: [], vars: new Map() })
  k.out.push("}")
  return { dialect, params: f.params, paramNames, stored: storedBuffers(f.body), text: k.out.join("\n"), definitions, outlined: k.outlined.map((d) => d.join("\n")) }
}
