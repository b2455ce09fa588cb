// Pass 4, virtual-thread expansion (TVM's InjectVirtualThread): a loop bound to `vthread` is
// replaced by its threads' statements interleaved. Every allocation inside it is hoisted out, V
// times as large, thread k using its k-th slot (an access to it offset by k·elems). The threads are
// then pushed inwards as far as they go: through a sequence (each statement's threads in turn —
// thread 0's loads, thread 1's loads, thread 0's GEMM, …), through a loop whose extent does not
// depend on the thread, through a guard (which each thread keeps, with its own index); a statement
// they cannot enter is replicated, one copy a thread with the thread's index substituted. A run of
// consecutive statements that all run on one VTA module (loads, compute, stores — TVM's coproc
// scopes) is replicated as one: thread 0's run, then thread 1's, so that one thread's loads are
// issued together and run under the other thread's compute. A statement that mentions neither the
// thread's index nor its slots stays one.
import { add, and, c, freeVars, mapExpr, read, substitute, type Expr } from "../../../ast/te/expr.js"
import { simplify } from "../../../ast/te/simplify.js"
import { constOf } from "./affine.js"
import { mapChildren, mapDeep, vseq, VtaTirError, type Ref, type VFunc, type VStmt, type VtaScope } from "./ir.js"

interface Slot {
  readonly name: string
  readonly scope: VtaScope
  readonly elems: number
}

/** The scalar expressions and buffer names of a statement and its children. */
const uses = (s: VStmt): { vars: Set<string>; bufs: Set<string> } => {
  const vars = new Set<string>()
  const bufs = new Set<string>()
  mapDeep(s, (e) => {
    freeVars(e).forEach((x) => vars.add(x))
    mapExpr(e, (x) => (x.kind === "read" ? (bufs.add(x.source), undefined) : undefined))
    return e
  }, (r) => (bufs.add(r.buf), r))
  return { vars, bufs }
}

const expand = (vt: string, V: number, body: VStmt): VStmt => {
  const slots: Slot[] = []
  const strip = (s: VStmt): VStmt => {
    switch (s.kind) {
      case "alloc":
        slots.push({ name: s.name, scope: s.scope, elems: s.elems })
        return strip(s.body)
      case "for":
        return { ...s, body: strip(s.body) }
      case "if":
        return { ...s, then: strip(s.then) }
      case "seq":
        return vseq(s.body.map(strip))
      default:
        return s
    }
  }
  const stripped = strip(body)
  const bySlot = new Map(slots.map((x) => [x.name, x]))
  const threadOf = (s: VStmt, k: number): VStmt => {
    const env = new Map<string, Expr>([[vt, c(k)]])
    const offset = (buf: string, idx: Expr): Expr => {
      const slot = bySlot.get(buf)
      return slot ? simplify(add(idx, c(k * slot.elems))) : idx
    }
    const fe = (e: Expr): Expr => simplify(mapExpr(substitute(e, env), (x) => (x.kind === "read" && bySlot.has(x.source) ? read(x.source, [offset(x.source, substitute(x.indices[0], env))], x.dtype) : undefined)))
    const fr = (r: Ref): Ref => ({ buf: r.buf, idx: offset(r.buf, r.idx) })
    return mapDeep(s, fe, fr)
  }
  const dependsOnThread = (s: VStmt): boolean => {
    const u = uses(s)
    return u.vars.has(vt) || [...u.bufs].some((b) => bySlot.has(b))
  }
  /** Each thread's copy of the statements, one thread after another, each under its own guards. */
  const replicate = (ss: readonly VStmt[], guards: readonly Expr[]): VStmt =>
    vseq(Array.from({ length: V }, (_, k) => {
      const one = vseq(ss.map((s) => threadOf(s, k)))
      const conds = guards.map((g) => simplify(substitute(g, new Map([[vt, c(k)]]))))
      const live = conds.filter((g) => constOf(g) !== 1)
      if (live.some((g) => constOf(g) === 0)) return vseq([])
      return live.length ? { kind: "if", cond: live.reduce((a, b) => and(a, b)), then: one } : one
    }))
  /** The VTA module a statement runs on (all of its instructions), if one. */
  const moduleOf = (s: VStmt): string | undefined => {
    switch (s.kind) {
      case "dma":
        return s.op === "STORE" ? "store" : bySlot.get(s.sram.buf)?.scope === "acc" ? "compute" : "load"
      case "gemmKernel":
      case "aluKernel":
        return "compute"
      case "for":
        return s.vthread ? undefined : moduleOf(s.body)
      case "if":
        return moduleOf(s.then)
      case "seq": {
        const ms = new Set(s.body.map(moduleOf))
        return ms.size === 1 ? [...ms][0] : undefined
      }
      default:
        return undefined
    }
  }
  const inject = (s: VStmt, guards: readonly Expr[]): VStmt => {
    if (!dependsOnThread(s) && guards.length === 0) return s
    if (s.kind === "seq") {
      // consecutive statements of one module stay together a thread (TVM's coproc scopes): thread
      // 0's loads, thread 1's loads, thread 0's GEMM, … — so that each thread's loads run under
      // the other's compute
      const out: VStmt[] = []
      for (let i = 0; i < s.body.length; ) {
        const m = moduleOf(s.body[i])
        if (m === undefined) {
          out.push(inject(s.body[i], guards))
          i++
          continue
        }
        let j = i + 1
        while (j < s.body.length && moduleOf(s.body[j]) === m) j++
        out.push(replicate(s.body.slice(i, j), guards))
        i = j
      }
      return vseq(out)
    }
    if (s.kind === "for" && !s.vthread && !freeVars(s.extent).has(vt) && moduleOf(s) === undefined) return { ...s, body: inject(s.body, guards) }
    if (s.kind === "if") return freeVars(s.cond).has(vt) ? inject(s.then, [...guards, s.cond]) : { ...s, then: inject(s.then, guards) }
    return replicate([s], guards)
  }
  const injected = inject(stripped, [])
  return slots.reduceRight<VStmt>((acc, x) => ({ kind: "alloc", name: x.name, scope: x.scope, elems: x.elems * V, body: acc }), injected)
}

export const injectVirtualThreads = (f: VFunc): VFunc => {
  const rec = (s: VStmt): VStmt => {
    switch (s.kind) {
      case "for": {
        if (!s.vthread) return { ...s, body: rec(s.body) }
        const V = constOf(s.extent)
        if (V === undefined || V < 1) throw new VtaTirError({ pass: "inject-vthread", reason: `the vthread loop ${s.var} has no constant extent` })
        return expand(s.var, V, rec(s.body))
      }
      default:
        return mapChildren(s, rec)
    }
  }
  return { ...f, body: rec(f.body) }
}
