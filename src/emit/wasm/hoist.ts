// Address hoisting of the `wasm` target's loops: before a loop, the partial addresses invariant in
// it (address.ts finds them) are computed once into locals, each extending the best enclosing base;
// accesses inside then add only the terms their base lacks.
import { collect, freeVars, type Expr } from "../../ast/te/expr.js"
import type { Stmt } from "../../ast/tir/tir.js"
import { STORAGE, type FnBuilder } from "./builder.js"
import { affineOf, baseKey, bestBase, boundInside, invariantParts, pureAtom, termsNonNegative, type Base } from "./address.js"
import { emitScaledTerms, type Scope } from "./expr.js"
import { FRAME } from "./layout.js"

/** What a walk of a statement meets, in order: an access to a buffer (by name, one index), or a frame allocation. */
type Event = { readonly buffer: string; readonly index: Expr } | { readonly alloc: string; readonly size: number }

/**
 * The events of a statement, by the statement (immutable), each statement's from its children's:
 * every loop of a nest asks for the accesses of all it holds (hoistBases, stepBases), and walking
 * every expression again at each level took ~3% of a cold ResNet-18 wasm compile.
 */
const eventsByStmt = new WeakMap<Stmt, readonly Event[]>()

const eventsOf = (s: Stmt): readonly Event[] => {
  const known = eventsByStmt.get(s)
  if (known) return known
  const out: Event[] = []
  const ofExpr = (e: Expr) => {
    for (const x of collect(e, (y) => y.kind === "read")) if (x.kind === "read" && x.indices.length === 1) out.push({ buffer: x.source, index: x.indices[0] })
  }
  const append = (t: Stmt) => {
    for (const ev of eventsOf(t)) out.push(ev)
  }
  switch (s.kind) {
    case "store":
      if (s.indices.length === 1) out.push({ buffer: s.buffer, index: s.indices[0] })
      ofExpr(s.value)
      break
    case "for":
      append(s.body)
      break
    case "seq":
      s.body.forEach(append)
      break
    case "if":
      ofExpr(s.cond)
      append(s.then)
      if (s.else) append(s.else)
      break
    case "allocate":
      if (s.buffer.scope !== "local") out.push({ alloc: s.buffer.name, size: STORAGE[s.buffer.dtype].bytes })
      append(s.body)
      break
    case "let":
      ofExpr(s.value)
      append(s.body)
      break
    case "evaluate":
      ofExpr(s.value)
      break
    default:
      break
  }
  eventsByStmt.set(s, out)
  return out
}

/**
 * The (start, index, element size) of every access to a memory buffer inside `s` (not promoted
 * ones): the scope's buffers, and those allocated in a frame on the way (from their allocation on).
 */
export const memoryAccesses = (sc: Pick<Scope, "bufs">, s: Stmt): { start: number; index: Expr; size: number }[] => {
  const out: { start: number; index: Expr; size: number }[] = []
  const sizes = new Map([...sc.bufs].map(([n, b]) => [n, { start: b.base, size: STORAGE[b.dtype].bytes }] as const))
  for (const ev of eventsOf(s)) {
    if ("alloc" in ev) sizes.set(ev.alloc, { start: FRAME, size: ev.size })
    else {
      const sz = sizes.get(ev.buffer)
      if (sz !== undefined) out.push({ ...sz, index: ev.index })
    }
  }
  return out
}

const MAX_BASES_PER_LOOP = 6

/** Before a loop: the partial addresses invariant in it, each in a local extending the best enclosing base (address.ts). */
export const hoistBases = <S extends Scope>(fb: FnBuilder, sc: S, loop: Stmt & { kind: "for" }): S => {
  if (sc.boundsCheck) return sc
  const inside = boundInside(loop)
  const bounds = new Map([...sc.bounds, ...inside.bounds])
  const have = new Set((sc.bases ?? []).map((b) => baseKey(b.start, b.size, b.terms)))
  const added: Base[] = []
  for (const part of invariantParts(memoryAccesses(sc, loop), inside.vars, bounds)) {
    if (added.length >= MAX_BASES_PER_LOOP) break
    const key = baseKey(part.start, part.size, part.terms)
    if (have.has(key)) continue
    have.add(key)
    const parent = bestBase([...(sc.bases ?? []), ...added], { terms: part.terms, k: 0 }, part.size, part.start)
    const rest = [...part.terms].filter(([k]) => !parent?.terms.has(k)).map(([, t]) => t)
    fb.op("local.get", parent?.local ?? part.start)
    emitScaledTerms(fb, sc, rest, part.size)
    fb.op("i32.add")
    const local = fb.local("i32")
    fb.op("local.set", local)
    added.push({ local, start: part.start, size: part.size, terms: part.terms })
  }
  return added.length ? { ...sc, bases: [...(sc.bases ?? []), ...added] } : sc
}


/** A stepped base: a local advanced by `bytes` at each iteration's end. */
export interface Step {
  readonly local: number
  readonly bytes: number
}

/** Stepped bases an innermost loop may carry (each an address register the engine keeps live across it). */
export const MAX_STEPS_PER_LOOP = 4

/** Whether `s` holds a loop the emitter renders as a loop of its own (vectorized ones are rendered inline). */
const hasLoop = (s: Stmt): boolean => {
  switch (s.kind) {
    case "for":
      return s.forKind !== "vectorized" || hasLoop(s.body)
    case "seq":
      return s.body.some(hasLoop)
    case "if":
      return hasLoop(s.then) || (s.else !== undefined && hasLoop(s.else))
    case "allocate":
    case "let":
      return hasLoop(s.body)
    default:
      return false
  }
}

/**
 * Strength reduction of an innermost loop over `v` from the constant `lo` (after hoistBases): each
 * address whose terms are a loop-invariant part plus v · c (c > 0, every term non-negative) gets a
 * local holding that part's address at v = lo, advanced by c · size at each iteration's end; an
 * access then adds nothing to it (its constant in the memarg offset), where it would shift or
 * multiply v and add. Up to MAX_STEPS_PER_LOOP of them, in order of access.
 */
export const stepBases = <S extends Scope>(fb: FnBuilder, sc: S, loop: Stmt & { kind: "for" }, v: string, lo: number): { scope: S; steps: Step[] } => {
  if (sc.boundsCheck || hasLoop(loop.body)) return { scope: sc, steps: [] }
  const inside = boundInside(loop.body)
  const ext = loop.extent.kind === "const" ? loop.extent.value : undefined
  const bounds = new Map([...sc.bounds, ...inside.bounds, [v, { min: lo, max: ext === undefined ? Infinity : lo + ext - 1 }]])
  const have = new Set((sc.bases ?? []).map((b) => baseKey(b.start, b.size, b.terms)))
  const added: Base[] = []
  const steps: Step[] = []
  for (const { start, index, size } of memoryAccesses(sc, loop.body)) {
    if (added.length >= MAX_STEPS_PER_LOOP) break
    const a = affineOf(index)
    const vKey = [...a.terms].find(([, t]) => t.atom.kind === "var" && t.atom.name === v)?.[0]
    const tv = vKey === undefined ? undefined : a.terms.get(vKey)
    if (!tv || tv.coef <= 0 || !termsNonNegative(a, bounds)) continue
    // v's term and the terms invariant in the loop
    const terms = new Map([...a.terms].filter(([k, t]) => k === vKey || (pureAtom(t.atom) && [...freeVars(t.atom)].every((x) => x !== v && !inside.vars.has(x)))))
    const key = baseKey(start, size, terms)
    if (have.has(key)) continue
    have.add(key)
    const rest = new Map([...terms].filter(([k]) => k !== vKey))
    const parent = bestBase([...(sc.bases ?? []), ...added], { terms: rest, k: 0 }, size, start)
    fb.op("local.get", parent?.local ?? start)
    const missing = [...rest].filter(([k]) => !parent?.terms.has(k)).map(([, t]) => t)
    if (missing.length) {
      emitScaledTerms(fb, sc, missing, size)
      fb.op("i32.add")
    }
    if (lo !== 0) {
      fb.op("i32.const", lo * tv.coef * size)
      fb.op("i32.add")
    }
    const local = fb.local("i32")
    fb.op("local.set", local)
    added.push({ local, start, size, terms })
    steps.push({ local, bytes: tv.coef * size })
  }
  return added.length ? { scope: { ...sc, bases: [...(sc.bases ?? []), ...added] }, steps } : { scope: sc, steps }
}

/** Advances each stepped base by its bytes (before the loop's latch). */
export const emitSteps = (fb: FnBuilder, steps: readonly Step[]): void => {
  for (const s of steps) {
    fb.op("local.get", s.local)
    fb.op("i32.const", s.bytes)
    fb.op("i32.add")
    fb.op("local.set", s.local)
  }
}
