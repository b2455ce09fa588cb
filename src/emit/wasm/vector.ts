// SIMD128 for vectorized loops: a vectorized loop over float32 (f32x4) or int32 (i32x4) stores
// whose every access is unit-stride in the loop variable, or invariant in it, runs 4 lanes at a
// time; any other vectorized loop, and the remainder of an extent not a multiple of 4, runs as
// scalar code. Lanes are independent only when every buffer the body stores is accessed through
// one index expression (the store's), which the plan checks. A select whose condition is invariant
// (a padding guard) is an if with a v128 result, its arms lazy. An 8- or 16-bit integer read
// widened to int32 (a quantized conv's int16 input times its weight, summed in int32) is one
// widening load of its 4 lanes (./widen.ts). No relaxed-SIMD op is ever used.
import { c, collect, exprKey, substitute, type Expr, type Intrinsic } from "../../ast/te/expr.js"
import { simplify } from "../../ast/te/simplify.js"
import type { Stmt } from "../../ast/tir/tir.js"
import type { Op } from "./encoder.js"
import { emitLoopLatch, STORAGE, type FnBuilder } from "./builder.js"
import { emitAddress, emitExpr, emitExprAs, invalidate, type Scope } from "./expr.js"
import { pseudoMinMax, type PseudoMinMax } from "./min-max.js"
import { emitWidenedLoad, widenedRead } from "./widen.js"
import { coef, mentions } from "../../ast/te/linear-index.js"
import { emitRegVecRead, emitRegVecWrite, LANE_DTYPE, type RegLane as Lane } from "./registers.js"

type VStore = Stmt & { kind: "store" }

/** The stores of a vectorizable body, or undefined when it must run as scalar code. */
export const vectorPlan = (body: Stmt, loopVar: string): { lane: Lane; stores: readonly VStore[] } | undefined => {
  const stmts = body.kind === "seq" ? body.body : [body]
  if (!stmts.every((s): s is VStore => s.kind === "store")) return undefined
  const dt = stmts[0]?.kind === "store" ? stmts[0].value.dtype : undefined
  const lane: Lane | undefined = dt === "float32" ? "f32" : dt === "int32" ? "i32" : undefined
  if (!lane) return undefined
  const storeIdx = new Map<string, string>()
  for (const s of stmts) {
    if (s.indices.length !== 1) return undefined
    const key = exprKey(s.indices[0])
    if ((storeIdx.get(s.buffer) ?? key) !== key) return undefined
    storeIdx.set(s.buffer, key)
  }
  // a buffer the body stores is read through the store's index only (keyed only where it is stored)
  const sameIndexAsStore = (buffer: string, index: Expr): boolean => {
    const stored = storeIdx.get(buffer)
    return stored === undefined || stored === exprKey(index)
  }
  const isInvariant = invarianceOf(loopVar, storeIdx)
  const ok = (e: Expr): boolean => {
    if (isInvariant(e)) return e.dtype === LANE_DTYPE[lane]
    if (e.dtype !== LANE_DTYPE[lane]) return false
    switch (e.kind) {
      case "read":
        return e.indices.length === 1 && unitStride(e.indices[0], loopVar) && sameIndexAsStore(e.source, e.indices[0])
      case "bin":
        return VBIN[lane][e.op] !== undefined && ok(e.a) && ok(e.b)
      case "call":
        return VCALL[lane][e.fn] !== undefined && e.args.every(ok)
      case "select":
        // one condition for all lanes: the arms stay lazy (an if with a v128 result)
        return isInvariant(e.cond) && ok(e.t) && ok(e.f)
      case "cast":
        return lane === "i32" && widenedRead(e, loopVar) !== undefined && !storeIdx.has(e.value.kind === "read" ? e.value.source : "")
      default:
        return false
    }
  }
  for (const s of stmts) if (s.value.dtype !== LANE_DTYPE[lane] || !unitStride(s.indices[0], loopVar) || !ok(s.value)) return undefined
  return { lane, stores: stmts }
}

export const readsOf = (e: Expr): Set<string> => new Set(collect(e, (x) => x.kind === "read").map((x) => (x.kind === "read" ? x.source : "")))

/** A select whose value may be reused in its region: no read of a register buffer (its locals change as the tile is written) or of a buffer the loop stores. */
const cacheableSelect = (e: Expr, sc: Scope, stored: ReadonlyMap<string, string>): boolean =>
  collect(e, (x) => x.kind === "read" && (stored.has(x.source) || sc.regs?.has(x.source) === true)).length === 0


/** No loop variable, no read of a buffer the body stores. */
export const invariant = (e: Expr, loopVar: string, stored: ReadonlyMap<string, string>): boolean =>
  !mentions(e, loopVar) && collect(e, (x) => x.kind === "read" && stored.has(x.source)).length === 0

/**
 * `invariant` asked of an expression and then of its subtrees, as the planner and the emitter walk
 * down: each node's answer from its own kind and its children's answers, remembered (a walk of the
 * whole subtree at every level was quadratic in the depth, 4% of a cold ResNet-18 wasm compile).
 */
export const invarianceOf = (loopVar: string, stored: ReadonlyMap<string, string>): ((e: Expr) => boolean) => {
  const known = new Map<Expr, boolean>()
  const rec = (e: Expr): boolean => {
    let k = known.get(e)
    if (k === undefined) {
      k = !(e.kind === "var" && e.name === loopVar) && !(e.kind === "read" && stored.has(e.source)) && childExprs(e).every(rec)
      known.set(e, k)
    }
    return k
  }
  return rec
}

/** An expression's operands, as `collect` walks them. */
const childExprs = (e: Expr): readonly Expr[] => {
  switch (e.kind) {
    case "bin":
      return [e.a, e.b]
    case "select":
      return [e.cond, e.t, e.f]
    case "cast":
      return [e.value]
    case "call":
      return e.args
    case "read":
      return e.indices
    case "reduce":
      return e.where ? [e.source, e.where] : [e.source]
    default:
      return []
  }
}

/** `e(v + 1) - e(v) == 1` for every v: e = v + (terms without v). */
const unitStride = (e: Expr, v: string): boolean => coef(e, v) === 1

const VBIN: { readonly [L in Lane]: Partial<Record<string, Op>> } = {
  f32: { add: "f32x4.add", sub: "f32x4.sub", mul: "f32x4.mul", div: "f32x4.div", min: "f32x4.min", max: "f32x4.max" },
  i32: { add: "i32x4.add", sub: "i32x4.sub", mul: "i32x4.mul", min: "i32x4.min_s", max: "i32x4.max_s" },
}
const VCALL: { readonly [L in Lane]: Partial<Record<Intrinsic, Op>> } = {
  f32: { sqrt: "f32x4.sqrt", fabs: "f32x4.abs", neg: "f32x4.neg", floor: "f32x4.floor", ceil: "f32x4.ceil", round: "f32x4.nearest" },
  i32: { fabs: "i32x4.abs", neg: "i32x4.neg" },
}

/** `op(a, b)` with one operand a constant: the other operand, the constant and how to emit it. */
const againstConstant = (op: "min" | "max", a: Expr, b: Expr): (PseudoMinMax & { x: Expr; c: Expr }) | undefined => {
  const [x, k] = b.kind === "const" ? [a, b] : a.kind === "const" ? [b, a] : [undefined, undefined]
  const p = k?.kind === "const" ? pseudoMinMax(op, k.value) : undefined
  return p && x && k ? { ...p, x, c: k } : undefined
}

/**
 * Emits the 4-lane part of a planned loop: invariant operands are splatted once into v128 locals
 * before it; with a constant min the vector iterations are unrolled (the loop variable becomes a
 * constant, folded into the access offsets), else they run as a loop stepping by 4.
 */
export const emitVectorLoop = (
  fb: FnBuilder,
  sc: Scope,
  plan: { lane: Lane; stores: readonly VStore[] },
  loopVar: string,
  min: Expr,
  count: number,
  bindVar: (local: number) => Scope,
): void => {
  const storeIdx = new Map(plan.stores.map((s) => [s.buffer, exprKey(s.indices[0])] as const))
  const splat: Op = plan.lane === "f32" ? "f32x4.splat" : "i32x4.splat"
  // whether an operand (the plan's own subtrees, asked again at every unrolled step) is invariant, and its key
  const isInvariant = invarianceOf(loopVar, storeIdx)
  const keys = new Map<Expr, string>()
  const keyOf = (e: Expr): string => {
    let key = keys.get(e)
    if (key === undefined) keys.set(e, (key = exprKey(e)))
    return key
  }
  // hoist invariant operands (maximal subtrees) into v128 locals, in order of first appearance
  const hoisted = new Map<string, number>()
  const hoist = (e: Expr): void => {
    if (isInvariant(e)) {
      const key = keyOf(e)
      if (hoisted.has(key)) return
      // the region may have splatted it already (a sibling loop of an unrolled tile)
      const vkey = `splat|${key}`
      const known = sc.vcache?.get(vkey)
      if (known) {
        hoisted.set(key, known.local)
        return
      }
      splatHere(sc, e)
      const l = fb.local("v128")
      fb.op("local.set", l)
      hoisted.set(key, l)
      sc.vcache?.set(vkey, { local: l, reads: readsOf(e) })
      return
    }
    if (e.kind === "bin") {
      hoist(e.a)
      hoist(e.b)
    } else if (e.kind === "call") e.args.forEach(hoist)
    // nothing is hoisted out of a select's arms: they may not run
  }
  const splatHere = (s: Scope, e: Expr): void => {
    if (e.kind === "read" && e.indices.length === 1 && !s.regs?.has(e.source)) {
      const { offset } = emitAddress(fb, s, e.source, e.indices[0])
      fb.op("v128.load32_splat", STORAGE[e.dtype].align, offset)
    } else {
      emitExpr(fb, s, e)
      fb.op(splat)
    }
  }
  plan.stores.forEach((s) => hoist(s.value))

  const value = (s: Scope, e: Expr, at: (e: Expr) => Expr): void => {
    // only an invariant operand can have been hoisted (invariance follows the key: the variables and
    // buffers an expression names), so a varying one is not keyed — its key, the JSON of its whole
    // subtree, taken at every level of every unrolled step, was most of the wasm emitter's time
    if (isInvariant(e)) {
      const h = hoisted.get(keyOf(e))
      if (h !== undefined) fb.op("local.get", h)
      // else inside a select arm: splatted where it runs
      else splatHere(s, e)
      return
    }
    switch (e.kind) {
      case "select": {
        // the same select again in the region (a bounds-guarded input an unrolled tile's taps share:
        // a depthwise conv's column c, tap k and column c + 1, tap k − 1) is the local it was put in,
        // as a load is: it reads no register buffer and nothing the loop stores, so its value stands
        // until a store to what it reads (invalidate)
        const key = s.vcache && s.reuseGuardedReads !== false && cacheableSelect(e, s, storeIdx) ? `select|${exprKey(at(e))}` : undefined
        const known = key === undefined ? undefined : s.vcache!.get(key)
        if (known) {
          fb.op("local.get", known.local)
          return
        }
        emitExprAs(fb, s, e.cond, "bool")
        fb.block("if", "v128")
        // an arm may not run: it reads the region's caches but adds nothing to them
        value({ ...s, addrCache: s.addrCache && new Map(s.addrCache), vcache: s.vcache && new Map(s.vcache) }, e.t, at)
        fb.op("else")
        value({ ...s, addrCache: s.addrCache && new Map(s.addrCache), vcache: s.vcache && new Map(s.vcache) }, e.f, at)
        fb.op("end")
        if (key !== undefined) {
          const l = fb.local("v128")
          fb.op("local.tee", l)
          s.vcache!.set(key, { local: l, reads: readsOf(e) })
        }
        return
      }
      case "read": {
        const reg = s.regs?.get(e.source)
        if (reg) {
          emitRegVecRead(fb, reg, e.source, at(e.indices[0]))
          return
        }
        const idx = at(e.indices[0])
        const vkey = `load|${e.source}|${exprKey(idx)}`
        const known = s.vcache?.get(vkey)
        if (known) {
          fb.op("local.get", known.local)
          return
        }
        const { offset } = emitAddress(fb, s, e.source, idx, 4)
        fb.op("v128.load", STORAGE[e.dtype].align, offset)
        if (s.vcache) {
          const l = fb.local("v128")
          fb.op("local.tee", l)
          s.vcache.set(vkey, { local: l, reads: new Set([e.source]) })
        }
        return
      }
      case "bin": {
        // a float min / max against a constant: the pseudo-op (./min-max.ts), the varying operand first
        const pseudo = plan.lane === "f32" && (e.op === "min" || e.op === "max") ? againstConstant(e.op, e.a, e.b) : undefined
        if (pseudo) {
          value(s, pseudo.x, at)
          value(s, pseudo.c, at)
          fb.op(pseudo.op)
          if (pseudo.addZero) {
            value(s, pseudo.c, at)
            fb.op("f32x4.add")
          }
          return
        }
        value(s, e.a, at)
        value(s, e.b, at)
        fb.op(VBIN[plan.lane][e.op]!)
        return
      }
      case "call":
        e.args.forEach((a) => value(s, a, at))
        fb.op(VCALL[plan.lane][e.fn as Intrinsic]!)
        return
      case "cast": {
        const r = widenedRead(e, loopVar)
        if (!r) throw new Error(`vector cast ${e.value.dtype} → ${e.dtype} (the plan admits only a widened 8- or 16-bit read)`)
        if (s.regs?.has(r.source)) return fb.fail(`a widened read of the register buffer '${r.source}'`)
        emitWidenedLoad(fb, s, r, at(r.indices[0]))
        return
      }
      default:
        throw new Error(`vector value of kind ${e.kind} (the plan admits none)`)
    }
  }
  const step = (s: Scope, at: (e: Expr) => Expr) => {
    for (const st of plan.stores) {
      const reg = s.regs?.get(st.buffer)
      if (reg) {
        value(s, st.value, at)
        emitRegVecWrite(fb, reg, st.buffer, at(st.indices[0]))
        continue
      }
      const { offset } = emitAddress(fb, s, st.buffer, at(st.indices[0]), 4)
      value(s, st.value, at)
      fb.op("v128.store", STORAGE[st.value.dtype].align, offset)
      invalidate(s, [st.buffer])
    }
  }
  if (min.kind === "const") {
    const block: Scope = sc.addrCache ? sc : { ...sc, addrCache: new Map() }
    for (let k = 0; k < count; k += 4) {
      const env = new Map([[loopVar, c(min.value + k)]])
      step(block, (e) => simplify(substitute(e, env), sc.bounds, sc.simplified))
    }
    return
  }
  // a loop stepping by 4 from min over `count` elements
  const v = fb.local("i32")
  const end = fb.local("i32")
  const inner: Scope = { ...bindVar(v), addrCache: new Map(sc.addrCache ?? []), vcache: new Map() }
  emitExpr(fb, sc, min)
  fb.op("local.tee", v)
  fb.op("i32.const", count)
  fb.op("i32.add")
  fb.op("local.set", end)
  fb.block("loop")
  step(inner, (e) => e)
  emitLoopLatch(fb, v, end, 4)
}
