// lowering.SerialSmallKernels (the CPU targets): a kernel too small to pay for its parallel regions
// runs its parallel loops serially.
//
// Why: each parallel loop outside every other is a parallel region, started and joined each time it
// is entered — the caller publishes the loop, a worker that spins between loops claims its chunks,
// and the caller waits for the last one — and a core that reads what the other core wrote pays for
// the lines' trip between the caches. Where the kernel's work split over the cores saves less than
// that, its region costs more than the second thread gives back (EfficientNet-B0's squeeze-excite
// 1×1 convs on one pixel: 3–5 µs on 1 thread, 4–7 on 2; docs/backends.md, seventh session).
//
// The decision, from the target record (two rules; the pipeline's caller picks one):
// - `time` (the c target where its record measured its pool: src/device/region.ts): a kernel's
//   time on one core is estimated from its params' bytes at the core's measured streaming rate plus
//   its counted floating-point operations at the core's measured peak; its loops stay parallel
//   where that time × (1 − 1/cores) — what the split saves — is at least its regions entered a call
//   × the measured cost of one region × the measured margin (the break-even of a streaming loop on
//   the pool, whose input the calling core had just written, over the empty region's cost).
// - `bytes` (where nothing was measured: the js and wasm targets, a record without the pool's
//   measurement, one core): a kernel whose params take fewer bytes than cores × the L1's bytes (each
//   core's share no larger than its L1) runs serially.
//
// Meaning: a parallel loop's iterations are independent (what the parallel primitive requires), so
// running them in order computes the same; only the loop kind changes.
import { mapStmt, type PrimFunc, type Stmt } from "../../ast/tir/tir.js"
import { BYTES } from "../../ast/graph/dtype.js"
import { paramsOf } from "../../ast/tir/analysis.js"
import { evalExpr } from "../../ast/te/eval-expr.js"
import { freeVars, type Expr } from "../../ast/te/expr.js"
import { tirPass, type TirPass } from "./tir-pass.js"

/** Bytes of a function's params: what one call reads and writes of its caller's memory. */
export const paramBytes = (f: PrimFunc): number => paramsOf(f).reduce((s, p) => s + p.elements * BYTES[p.dtype], 0)

/** The smallest kernel (params' bytes) whose loops stay parallel on a CPU target: each core's share at least its L1. */
export const parallelMinBytes = (cores: number, l1Bytes: number): number => Math.max(1, cores) * Math.max(0, l1Bytes)

/** What the time rule reads off the target record: the cores, one region's measured cost and margin, one core's measured speed. */
export interface RegionCost {
  readonly cores: number
  /** Starting and joining an empty parallel region on `cores` threads (ns). */
  readonly regionNs: number
  /** The measured break-even's saving over `regionNs`: what a region costs a kernel, in empty regions. */
  readonly margin: number
  /** One core streaming params' bytes (bytes / ns). */
  readonly streamBytesPerNs: number
  /** One core's peak floating-point operations (FLOP / ns). */
  readonly flopsPerNs: number
}

/** Which rule decides: the time rule over a measured region, or the bytes rule (`minBytes`). */
export type SerialRule = { readonly kind: "time"; readonly cost: RegionCost } | { readonly kind: "bytes"; readonly minBytes: number }

/** What one call of a function does, counted from its loop nest: floating-point operations and parallel regions entered. */
export interface CallWork {
  readonly flops: number
  readonly regions: number
  /** False where the count stopped: at `stopAtFlops`, or at its budget of visits (a loop nest that large is no small kernel). */
  readonly complete: boolean
}

/** Statement visits a count may make (loops counted iteration by iteration where their control moves with them). */
export const COUNT_BUDGET = 1 << 18

/**
 * Arithmetic of a stored value: each binary operation, call and select one; reads, constants,
 * variables and casts none, and a select's condition none (a guard on the indices, which
 * SimplifyTir mostly proves away and a vector loop hoists: counted, a padded 7×7 pool's guards made
 * ten times its arithmetic).
 */
const exprFlops = (e: Expr): number => {
  switch (e.kind) {
    case "bin":
      return 1 + exprFlops(e.a) + exprFlops(e.b)
    case "call":
      return 1 + e.args.reduce((s, x) => s + exprFlops(x), 0)
    case "select":
      return 1 + exprFlops(e.t) + exprFlops(e.f)
    case "cast":
      return exprFlops(e.value)
    default:
      return 0
  }
}

/** The variables a statement's control flow reads: loop bounds, conditions, lets. */
const controlVars = (s: Stmt, memo: WeakMap<Stmt, ReadonlySet<string>>): ReadonlySet<string> => {
  const hit = memo.get(s)
  if (hit) return hit
  const out = new Set<string>()
  const add = (xs: Iterable<string>) => {
    for (const x of xs) out.add(x)
  }
  switch (s.kind) {
    case "for":
      add(freeVars(s.min))
      add(freeVars(s.extent))
      add(controlVars(s.body, memo))
      break
    case "seq":
      for (const b of s.body) add(controlVars(b, memo))
      break
    case "if":
      add(freeVars(s.cond))
      add(controlVars(s.then, memo))
      if (s.else) add(controlVars(s.else, memo))
      break
    case "let":
      add(freeVars(s.value))
      add(controlVars(s.body, memo))
      break
    case "allocate":
      add(controlVars(s.body, memo))
      break
    default:
      break
  }
  memo.set(s, out)
  return out
}

/**
 * A call's floating-point operations and parallel regions (a parallel loop outside every other,
 * counted each time it is entered): a loop's body counted once times its extent where the body's
 * control flow does not read the loop's variable, else iteration by iteration. `regionsOnly`: the
 * regions' bodies are not entered (their operations not counted). The count stops (incomplete) once
 * its operations reach `stopAtFlops`, or past `budget` statement visits.
 */
export const callWork = (f: PrimFunc, options: { readonly stopAtFlops?: number; readonly regionsOnly?: boolean; readonly budget?: number } = {}): CallWork => {
  const stopAt = options.stopAtFlops ?? Infinity
  const budget = options.budget ?? COUNT_BUDGET
  const env = new Map<string, number>()
  const memo = new WeakMap<Stmt, ReadonlySet<string>>()
  const ev = (e: Expr): number => evalExpr(e, env, () => 0)
  let visits = 0
  let flops = 0
  let regions = 0
  const stopped = () => visits > budget || flops >= stopAt
  // `times`: how often this statement runs in one call (the enclosing loops' extents)
  const count = (s: Stmt, times: number, inside: boolean): void => {
    if (++visits > budget || stopped()) return
    switch (s.kind) {
      case "for": {
        const min = ev(s.min)
        const extent = Math.max(0, ev(s.extent))
        const region = s.forKind === "parallel" && !inside
        if (region) regions += times
        if (extent === 0 || (region && options.regionsOnly)) return
        if (!controlVars(s.body, memo).has(s.var.name)) {
          env.set(s.var.name, min)
          count(s.body, times * extent, inside || region)
        } else
          for (let i = 0; i < extent && !stopped(); i++) {
            env.set(s.var.name, min + i)
            count(s.body, times, inside || region)
          }
        env.delete(s.var.name)
        return
      }
      case "seq":
        for (const b of s.body) count(b, times, inside)
        return
      case "store":
        flops += times * exprFlops(s.value)
        return
      case "if":
        if (ev(s.cond)) count(s.then, times, inside)
        else if (s.else) count(s.else, times, inside)
        return
      case "let":
        env.set(s.var.name, ev(s.value))
        count(s.body, times, inside)
        env.delete(s.var.name)
        return
      case "allocate":
        count(s.body, times, inside)
        return
      case "intrinsic": {
        // the instruction's multiply-adds: its outputs × its reduction's length, two operations each
        const t = s.intrin.compute
        flops += times * 2 * t.shape.reduce((a, b) => a * b, 1) * (t.body.kind === "reduce" ? t.body.axes.reduce((a, x) => a * x.dom.extent, 1) : 1)
        return
      }
      default:
        return
    }
  }
  count(f.body, 1, false)
  return { flops, regions, complete: !stopped() }
}

/** A kernel's time on one core as the time rule estimates it (ns): its params streamed plus its operations at peak. */
export const oneCoreNs = (bytes: number, flops: number, cost: RegionCost): number => bytes / cost.streamBytesPerNs + flops / cost.flopsPerNs

/** The time rule's decision on counted figures: serial where the split saves less than the regions cost. */
export const regionsCostMore = (bytes: number, flops: number, regions: number, cost: RegionCost): boolean =>
  cost.cores > 1 && regions > 0 && oneCoreNs(bytes, flops, cost) * (1 - 1 / cost.cores) < regions * cost.regionNs * cost.margin

/** Whether `rule` runs `f`'s parallel loops serially. */
export const runsSerially = (f: PrimFunc, rule: SerialRule): boolean => {
  const bytes = paramBytes(f)
  if (rule.kind === "bytes") return bytes < rule.minBytes
  const cost = rule.cost
  if (cost.cores <= 1) return false
  // the regions first (their bodies not entered), then the operations only up to what would pay for them
  const { regions, complete } = callWork(f, { regionsOnly: true })
  if (!complete || regions === 0) return false
  const paysAt = (regions * cost.regionNs * cost.margin) / (1 - 1 / cost.cores) // one core's time past which the split pays
  const flopsToPay = (paysAt - bytes / cost.streamBytesPerNs) * cost.flopsPerNs
  if (flopsToPay <= 0) return false
  const work = callWork(f, { stopAtFlops: flopsToPay })
  return work.complete && regionsCostMore(bytes, work.flops, regions, cost)
}

/** `f` with every parallel loop serial where `rule` says its regions cost more than they give; else `f` itself. */
export const serialSmallKernel = (f: PrimFunc, rule: SerialRule | number): PrimFunc => {
  const r: SerialRule = typeof rule === "number" ? { kind: "bytes", minBytes: rule } : rule
  if (!runsSerially(f, r)) return f
  const body = mapStmt(f.body, (s) => (s.kind === "for" && s.forKind === "parallel" ? { ...s, forKind: "serial" } : undefined))
  return body === f.body ? f : { ...f, body }
}

export const serialSmallKernels = (rule: SerialRule | number): TirPass => tirPass("lowering.SerialSmallKernels", 1, (f) => serialSmallKernel(f, rule))
