// How a PrimFunc's work splits over a CPU's threads, counted from its loop nest (no timing): each
// store counts its value's operations (at least one), a loop multiplies its body's count by its
// extent where the body's control flow does not depend on the loop's variable (else it is counted
// iteration by iteration), and a parallel loop outside every other (a parallel region, started and
// joined each time it is entered) has its iterations' work split as the c target's thread pool
// splits it (src/emit/c/pool.ts: min(extent, threads × chunks a thread) chunks of a static size,
// each thread's home chunks a contiguous run; a free thread claims its home's next chunk, then any
// other home's). The figures a schedule's parallel split is judged by, free of the timing noise of
// a shared machine: the busier thread's share of a region's work (imbalance: the region's time on
// `threads` threads over its work ÷ threads), the work left serial, and the regions entered a call.
import { evalExpr } from "../te/eval-expr.js"
import { freeVars, type Expr } from "../te/expr.js"
import type { PrimFunc, Stmt } from "./tir.js"

/** Chunks a thread's home holds in the c target's pool (TESSERA_CHUNKS_PER_THREAD in src/emit/c/pool.ts). */
export const POOL_CHUNKS_PER_THREAD = 4

/** What a call of a function costs, in counted operations, on one thread and on `threads`. */
export interface ParallelBalance {
  /** Work outside every parallel loop. */
  readonly serial: number
  /** Work inside parallel loops. */
  readonly parallel: number
  /** The parallel work's time on `threads` threads (each region's busiest thread, summed). */
  readonly span: number
  /** Parallel regions entered in one call. */
  readonly regions: number
  /** Each distinct region (by its loop variable): extent, work an iteration (mean) and imbalance. */
  readonly loops: readonly RegionSummary[]
}

export interface RegionSummary {
  readonly var: string
  readonly extent: number
  /** Times it was entered in one call. */
  readonly entries: number
  /** Its work over all entries. */
  readonly work: number
  /** Its time on `threads` threads over all entries. */
  readonly span: number
}

/** The time, in work, of a region on `threads` threads: the pool's chunks claimed as threads come free. */
export const poolSpan = (work: readonly number[], threads: number, chunksPerThread = POOL_CHUNKS_PER_THREAD): number => {
  const extent = work.length
  const total = work.reduce((s, x) => s + x, 0)
  if (threads <= 1 || extent <= 1) return total
  const chunks = Math.min(extent, threads * chunksPerThread)
  const chunkWork: number[] = []
  for (let c = 0; c < chunks; c++) {
    let s = 0
    for (let i = Math.floor((c * extent) / chunks); i < Math.floor(((c + 1) * extent) / chunks); i++) s += work[i]
    chunkWork.push(s)
  }
  // home t: chunks [t·chunks/threads, (t+1)·chunks/threads); next[t] its next unclaimed chunk
  const next = Array.from({ length: threads }, (_, t) => Math.floor((t * chunks) / threads))
  const end = Array.from({ length: threads }, (_, t) => Math.floor(((t + 1) * chunks) / threads))
  const free = new Array<number>(threads).fill(0)
  for (;;) {
    // the thread free first claims (ties: the lower thread)
    let t = 0
    for (let u = 1; u < threads; u++) if (free[u] < free[t]) t = u
    let claimed = -1
    for (let k = 0; k < threads && claimed < 0; k++) {
      const h = (t + k) % threads
      if (next[h] < end[h]) claimed = next[h]++
    }
    if (claimed < 0) break
    free[t] += chunkWork[claimed]
  }
  return Math.max(...free)
}

interface Count {
  serial: number
  parallel: number
  span: number
  regions: number
}

const exprOps = (e: Expr): number => {
  switch (e.kind) {
    case "const":
    case "var":
      return 0
    case "read":
      return 1
    case "bin":
      return 1 + exprOps(e.a) + exprOps(e.b)
    case "call":
      return 1 + e.args.reduce((s, x) => s + exprOps(x), 0)
    case "select":
      return 1 + exprOps(e.cond) + exprOps(e.t) + exprOps(e.f)
    case "cast":
      return exprOps(e.value)
    default:
      return 1
  }
}

/** The variables a statement's control flow reads: loop bounds, conditions, lets (a let's var is control too). */
const controlVars = (() => {
  const memo = new WeakMap<Stmt, ReadonlySet<string>>()
  const of = (s: Stmt): ReadonlySet<string> => {
    const hit = memo.get(s)
    if (hit) return hit
    const out = new Set<string>()
    const addAll = (xs: Iterable<string>) => {
      for (const x of xs) out.add(x)
    }
    switch (s.kind) {
      case "for":
        addAll(freeVars(s.min))
        addAll(freeVars(s.extent))
        addAll(of(s.body))
        break
      case "seq":
        for (const b of s.body) addAll(of(b))
        break
      case "if":
        addAll(freeVars(s.cond))
        addAll(of(s.then))
        if (s.else) addAll(of(s.else))
        break
      case "let":
        addAll(freeVars(s.value))
        addAll(of(s.body))
        break
      case "allocate":
        addAll(of(s.body))
        break
      default:
        break
    }
    memo.set(s, out)
    return out
  }
  return of
})()

const storeOps = (() => {
  const memo = new WeakMap<Stmt, number>()
  return (s: Stmt & { kind: "store" }): number => {
    const hit = memo.get(s)
    if (hit !== undefined) return hit
    const n = Math.max(1, exprOps(s.value))
    memo.set(s, n)
    return n
  }
})()

/** The counted work of `f`'s call and its split over `threads` threads of the c target's pool. */
export const parallelBalance = (f: PrimFunc, threads: number): ParallelBalance => {
  const env = new Map<string, number>()
  const ev = (e: Expr): number => evalExpr(e, env, () => 0)
  const loops = new Map<string, { extent: number; entries: number; work: number; span: number }>()
  const zero = (): Count => ({ serial: 0, parallel: 0, span: 0, regions: 0 })
  const addInto = (a: Count, b: Count, k = 1) => {
    a.serial += k * b.serial
    a.parallel += k * b.parallel
    a.span += k * b.span
    a.regions += k * b.regions
  }
  // `inside`: within a parallel region (its work is the region's; nested parallel loops run serially in their thread)
  const count = (s: Stmt, inside: boolean): Count => {
    switch (s.kind) {
      case "for": {
        const min = ev(s.min)
        const extent = Math.max(0, ev(s.extent))
        if (s.forKind === "parallel" && !inside) {
          const work: number[] = []
          const uniform = !controlVars(s.body).has(s.var.name)
          for (let i = 0; i < extent; i++) {
            if (uniform && i > 0) {
              work.push(work[0])
              continue
            }
            env.set(s.var.name, min + i)
            work.push(count(s.body, true).parallel)
          }
          env.delete(s.var.name)
          const total = work.reduce((x, y) => x + y, 0)
          const span = poolSpan(work, threads)
          const l = loops.get(s.var.name) ?? { extent, entries: 0, work: 0, span: 0 }
          loops.set(s.var.name, { extent, entries: l.entries + 1, work: l.work + total, span: l.span + span })
          return { serial: 0, parallel: total, span, regions: 1 }
        }
        const out = zero()
        if (extent === 0) return out
        if (!controlVars(s.body).has(s.var.name)) {
          env.set(s.var.name, min)
          addInto(out, count(s.body, inside), extent)
        } else
          for (let i = 0; i < extent; i++) {
            env.set(s.var.name, min + i)
            addInto(out, count(s.body, inside))
          }
        env.delete(s.var.name)
        return out
      }
      case "seq": {
        const out = zero()
        for (const b of s.body) addInto(out, count(b, inside))
        return out
      }
      case "store": {
        const n = storeOps(s)
        return inside ? { serial: 0, parallel: n, span: 0, regions: 0 } : { serial: n, parallel: 0, span: 0, regions: 0 }
      }
      case "if":
        return ev(s.cond) ? count(s.then, inside) : s.else ? count(s.else, inside) : zero()
      case "let": {
        env.set(s.var.name, ev(s.value))
        const out = count(s.body, inside)
        env.delete(s.var.name)
        return out
      }
      case "allocate":
        return count(s.body, inside)
      case "intrinsic": {
        // the instruction's own compute: its outputs × its reduction's length
        const t = s.intrin.compute
        const n = t.shape.reduce((a, b) => a * b, 1) * (t.body.kind === "reduce" ? t.body.axes.reduce((a, x) => a * x.dom.extent, 1) : 1)
        return inside ? { serial: 0, parallel: n, span: 0, regions: 0 } : { serial: n, parallel: 0, span: 0, regions: 0 }
      }
      default:
        return zero()
    }
  }
  const total = count(f.body, false)
  return {
    ...total,
    loops: [...loops].map(([v, l]) => ({ var: v, ...l })),
  }
}

/** A call's time on `threads` threads over its time on one, in counted work (1 / threads at best). */
export const spanRatio = (b: ParallelBalance): number => {
  const one = b.serial + b.parallel
  return one === 0 ? 1 : (b.serial + b.span) / one
}
