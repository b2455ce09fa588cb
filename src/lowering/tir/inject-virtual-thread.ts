// lowering.InjectVirtualThread: a vthread loop's iterations are independent by construction, so
// the loop is pushed down to the statements that depend on it (TVM's VTInjector,
// src/tir/transforms/inject_virtual_thread.cc): a buffer allocated inside it and written at a
// vthread-dependent place or value gets one section per vthread (its shape led by the vthread
// count, the vthread its first index — vthreads cost registers); a statement that does not depend
// on the vthread runs once (a cooperative fetch into shared memory whose tile covers every
// vthread, its barriers); loops, conditions and lets that do not depend on it are entered (thread
// loops included: the same threads run every vthread); a statement that depends on it becomes its
// copies in place, interleaved with the neighbours' copies — the latency-hiding order of the TVM
// paper — or, holding loops and 16 or more vthreads, a serial loop.
//
// Running a statement once for every vthread is only the same where that is idempotent and no
// vthread's copy changes what it reads or writes; where a buffer outside the loop is written by a
// vthread-dependent statement at indices that do not depend on the vthread (a shared tile each
// vthread fetches for itself), or a vthread-dependent statement writes what the others touch, the
// copies of the whole body run one after another instead. A vthread loop of unknown bounds becomes
// serial.
//
// Opt level 0: no emitter has virtual threads; this pass is what gives them a meaning.
import { add, c, collect, constValue, mapExpr, substitute, v, type Expr } from "../../ast/te/expr.js"
import { constDifference } from "../../ast/te/simplify.js"
import { mapStmt, seq, substituteStmt, type Region, type Stmt } from "../../ast/tir/tir.js"
import { tirPass } from "./tir-pass.js"

type For = Extract<Stmt, { kind: "for" }>

/** Below this many vthreads a loop-free statement becomes its copies, at or above a serial loop (TVM's bound). */
const MAX_COPIES = 16

export const injectVirtualThread = tirPass("lowering.InjectVirtualThread", 0, (f) => ({
  ...f,
  body: mapStmt(f.body, (x) => (x.kind === "for" && x.forKind === "vthread" ? inject(x) : undefined)),
}))

const inject = (x: For): Stmt => {
  const lo = constValue(x.min)
  const ext = constValue(x.extent)
  if (lo === undefined || ext === undefined) return { ...x, forKind: "serial", thread: undefined }
  const name = x.var.name
  const copyAt = (s: Stmt, i: number) => substituteStmt(s, new Map([[name, c(lo + i)]]))
  const perVthread = perVthreadBuffers(x.body, name)
  const body = expand(x.body, perVthread, lo === 0 ? v(name) : add(v(name), c(-lo)), ext)
  if (!interleavable(body, name, new Set([...perVthread].map(renamed)), lo, ext)) return seq(Array.from({ length: ext }, (_, i) => copyAt(x.body, i)))
  const copies = (s: Stmt): Stmt =>
    ext < MAX_COPIES || !hasLoop(s) ? seq(Array.from({ length: ext }, (_, i) => copyAt(s, i))) : { kind: "for", var: x.var, min: x.min, extent: x.extent, forKind: "serial", body: s }
  const down = (s: Stmt): Stmt => {
    if (!mentions(s, name)) return s
    switch (s.kind) {
      case "seq":
        return seq(s.body.map(down))
      case "allocate":
        return { ...s, body: down(s.body) }
      case "for":
        return s.forKind === "vectorized" || exprMentions([s.min, s.extent], name) ? copies(s) : { ...s, body: down(s.body) }
      case "if":
        return exprMentions([s.cond], name) ? copies(s) : { ...s, then: down(s.then), ...(s.else ? { else: down(s.else) } : {}) }
      case "let":
        return exprMentions([s.value], name) ? copies(s) : { ...s, body: down(s.body) }
      default:
        return copies(s)
    }
  }
  return down(body)
}

/** Every expression a statement holds, its children's included. */
const exprsOf = (s: Stmt): Expr[] => {
  const out: Expr[] = []
  mapStmt(s, () => undefined, (e) => (out.push(e), e))
  return out
}

const exprMentions = (es: readonly Expr[], name: string): boolean => es.some((e) => collect(e, (x) => x.kind === "var" && x.name === name).length > 0)
const mentions = (s: Stmt, name: string): boolean => exprMentions(exprsOf(s), name)

const readsOf = (es: readonly Expr[]): Set<string> => new Set(es.flatMap((e) => collect(e, (x) => x.kind === "read").map((r) => (r as Extract<Expr, { kind: "read" }>).source)))

const hasLoop = (s: Stmt): boolean =>
  s.kind === "for" || (s.kind === "seq" && s.body.some(hasLoop)) || ((s.kind === "allocate" || s.kind === "let") && hasLoop(s.body)) || (s.kind === "if" && (hasLoop(s.then) || (!!s.else && hasLoop(s.else))))

/** A statement that writes a buffer, with the expressions it depends on (its own and its enclosing loops', conditions' and lets'). */
interface Write {
  readonly buffer: string
  readonly indices: readonly Expr[] | undefined
  readonly deps: readonly Expr[]
}

/** The writes of a statement, each with what decides where and whether it happens. */
const writesOf = (s: Stmt, ctx: readonly Expr[] = []): Write[] => {
  switch (s.kind) {
    case "store":
    case "shuffle":
      return [{ buffer: s.buffer, indices: s.indices, deps: [...ctx, ...s.indices, s.value] }]
    case "intrinsic":
      return [{ buffer: s.output.buffer, indices: undefined, deps: [...ctx, ...s.output.base, ...s.inputs.flatMap((r) => r.base), ...s.inputs.map((r) => readAll(r))] }]
    case "for":
      return writesOf(s.body, [...ctx, s.min, s.extent])
    case "if":
      return [...writesOf(s.then, [...ctx, s.cond]), ...(s.else ? writesOf(s.else, [...ctx, s.cond]) : [])]
    case "let":
      return writesOf(s.body, [...ctx, s.value])
    case "allocate":
      return writesOf(s.body, ctx)
    case "seq":
      return s.body.flatMap((b) => writesOf(b, ctx))
    default:
      return []
  }
}

/** An intrinsic's input region as a read (for what it depends on). */
const readAll = (r: Region): Expr => ({ kind: "read", source: r.buffer, indices: r.base, dtype: "float32" })

/**
 * The buffers allocated inside the loop whose contents depend on the vthread: written by a store
 * whose place, value or enclosing loops and conditions mention it or read such a buffer.
 */
const perVthreadBuffers = (body: Stmt, name: string): Set<string> => {
  const allocated = new Set<string>()
  const walk = (s: Stmt): void => {
    if (s.kind === "allocate") allocated.add(s.buffer.name)
    if (s.kind === "allocate" || s.kind === "for" || s.kind === "let") walk(s.body)
    else if (s.kind === "seq") s.body.forEach(walk)
    else if (s.kind === "if") {
      walk(s.then)
      if (s.else) walk(s.else)
    }
  }
  walk(body)
  const writes = writesOf(body)
  const out = new Set<string>()
  for (let grew = true; grew; ) {
    grew = false
    for (const w of writes) {
      if (!allocated.has(w.buffer) || out.has(w.buffer)) continue
      if (exprMentions(w.deps, name) || [...readsOf(w.deps)].some((b) => out.has(b))) {
        out.add(w.buffer)
        grew = true
      }
    }
  }
  return out
}

/**
 * Each per-vthread buffer given a leading dim of `ext`, every access to it indexed by the vthread
 * first, and renamed `<name>.vt` (storage is flattened by name: a copy of the same allocation
 * elsewhere, loopPartition's peeled one, may keep its shape).
 */
const expand = (body: Stmt, per: ReadonlySet<string>, index: Expr, ext: number): Stmt => {
  if (per.size === 0) return body
  const onExpr = (e: Expr): Expr => mapReads(e, per, index)
  const region = (r: Region): Region => (per.has(r.buffer) ? { ...r, buffer: renamed(r.buffer), base: [index, ...r.base] } : r)
  return mapStmt(
    body,
    (s) => {
      if (s.kind === "allocate" && per.has(s.buffer.name)) {
        const b = s.buffer
        const strides = b.strides ? [b.strides[0] * b.shape[0], ...b.strides] : undefined
        return { ...s, buffer: { ...b, name: renamed(b.name), shape: [ext, ...b.shape], ...(strides ? { strides } : {}) } }
      }
      if ((s.kind === "store" || s.kind === "shuffle") && per.has(s.buffer)) return { ...s, buffer: renamed(s.buffer), indices: [index, ...s.indices] }
      if (s.kind === "intrinsic") return { ...s, output: region(s.output), inputs: s.inputs.map(region) }
      return undefined
    },
    onExpr,
  )
}

const renamed = (name: string): string => `${name}.vt`

const mapReads = (e: Expr, per: ReadonlySet<string>, index: Expr): Expr =>
  mapExpr(e, (x) => (x.kind === "read" && per.has(x.source) ? { ...x, source: renamed(x.source), indices: [index, ...x.indices.map((i) => mapReads(i, per, index))] } : undefined))

/**
 * Whether the vthread's statements may run interleaved and the others once: no statement that
 * depends on the vthread writes a buffer a statement that does not depends on or writes; a
 * statement that does not depend on it reads none of the buffers those statements write (its
 * repeats would then differ); a buffer outside the loop written by a statement that depends on
 * it is written at places that differ from vthread to vthread by constants (each vthread its own
 * elements: not a double buffer's `vthread mod 2`).
 */
const interleavable = (body: Stmt, name: string, per: ReadonlySet<string>, lo: number, ext: number): boolean => {
  const writes = writesOf(body)
  const dependent = writes.filter((w) => exprMentions(w.deps, name))
  const independent = writes.filter((w) => !exprMentions(w.deps, name))
  const independentTouches = new Set([...independent.map((w) => w.buffer), ...independent.flatMap((w) => [...readsOf(w.deps)])])
  const independentWrites = new Set(independent.map((w) => w.buffer))
  if (dependent.some((w) => independentTouches.has(w.buffer))) return false
  if (independent.some((w) => [...readsOf(w.deps)].some((b) => independentWrites.has(b)))) return false
  return dependent.every((w) => per.has(w.buffer) || (w.indices !== undefined && apart(w.indices, name, lo, ext)))
}

/** Most vthreads whose places apart() compares (more: the copies run one after another). */
const MAX_APART = 64

/** Whether indices at each vthread differ from those at the first by constants, distinct from vthread to vthread. */
const apart = (indices: readonly Expr[], name: string, lo: number, ext: number): boolean => {
  if (ext > MAX_APART) return false
  const at = (i: number) => indices.map((e) => substitute(e, new Map([[name, c(lo + i)]])))
  const first = at(0)
  const seen = new Set<string>()
  for (let i = 0; i < ext; i++) {
    const d = at(i).map((e, k) => constDifference(e, first[k]))
    if (d.some((x) => x === undefined)) return false
    const key = d.join(",")
    if (seen.has(key)) return false
    seen.add(key)
  }
  return true
}
