// SIMD128 for vectorized loops whose body mixes dtypes — a requantization: int32 sums through
// float32 / float64 arithmetic into an 8-bit store, channels apart — which vector.ts's one-lane-type
// plan leaves scalar. One store, 4 lanes a step (the loop's min a constant: the steps unrolled),
// each subexpression in the vector class of its dtype: int32 as i32x4, float32 as f32x4, float64 as
// two f64x2 (lanes 0–1 and 2–3), so every lane computes what the scalar code computes, in the same
// order and precision:
// - reads of int32 / float32 unit-stride in the loop variable (v128.load), and of an 8- or 16-bit
//   integer widened to int32 (one widening load: ./widen.ts), of a buffer promoted to registers
//   at constant indices (its v128 locals: a tile's sums); invariant subtrees splatted once before
//   the steps;
// - + − × ÷ min max and round / floor / ceil / abs / neg / sqrt of the class (f64x2.min / max and
//   nearest are the scalar f64 ops lane by lane);
// - casts int32 → float32 / float64, float32 ↔ float64 (each the scalar conversion, exact or one
//   rounding alike; a float64 rounded to float32 and back stays in its two halves, and int32 →
//   float64 → float32 is one rounding, int32 → float32), and float → integer only where the value is clamped by constants inside int32's
//   range (i32x4.trunc_sat: there it truncates as the scalar i64 truncation and wrap do; NaN → 0 in both);
// - the store: v128.store where it is unit-stride and 4 bytes, else lane by lane (extract, the
//   dtype's scalar store: an 8- or 16-bit store keeps the low bits, as the scalar cast's wrap does).
// Anything else (selects, other reads, other casts) is not planned: the loop stays scalar.
import type { DType } from "../../ast/graph/dtype.js"
import { c, exprKey, substitute, type Expr } from "../../ast/te/expr.js"
import { simplify } from "../../ast/te/simplify.js"
import type { Stmt } from "../../ast/tir/tir.js"
import { STORAGE, type FnBuilder } from "./builder.js"
import type { Op } from "./encoder.js"
import { emitAddress, emitExpr, invalidate, type Scope } from "./expr.js"
import { invariant } from "./vector.js"
import { coef } from "../../ast/te/linear-index.js"
import { emitWidenedLoad, widenedRead } from "./widen.js"
import { emitRegVecRead } from "./registers.js"

type VStore = Stmt & { kind: "store" }
type Cls = "i32" | "f32" | "f64"

const CLASS: Partial<Record<DType, Cls>> = { int32: "i32", float32: "f32", float64: "f64" }
/** Stores lane by lane: the dtypes whose scalar store keeps an i32 lane's low bits. */
const NARROW = new Set<DType>(["int8", "uint8", "int16", "uint16"])

const BIN: { readonly [C in Cls]: Partial<Record<string, Op>> } = {
  i32: { add: "i32x4.add", sub: "i32x4.sub", mul: "i32x4.mul", min: "i32x4.min_s", max: "i32x4.max_s" },
  f32: { add: "f32x4.add", sub: "f32x4.sub", mul: "f32x4.mul", div: "f32x4.div", min: "f32x4.min", max: "f32x4.max" },
  f64: { add: "f64x2.add", sub: "f64x2.sub", mul: "f64x2.mul", div: "f64x2.div", min: "f64x2.min", max: "f64x2.max" },
}
const CALL: { readonly [C in Cls]: Partial<Record<string, Op>> } = {
  i32: { fabs: "i32x4.abs", neg: "i32x4.neg" },
  f32: { round: "f32x4.nearest", floor: "f32x4.floor", ceil: "f32x4.ceil", fabs: "f32x4.abs", neg: "f32x4.neg", sqrt: "f32x4.sqrt" },
  f64: { round: "f64x2.nearest", floor: "f64x2.floor", ceil: "f64x2.ceil", fabs: "f64x2.abs", neg: "f64x2.neg", sqrt: "f64x2.sqrt" },
}
const SPLAT: { readonly [C in Cls]: Op } = { i32: "i32x4.splat", f32: "f32x4.splat", f64: "f64x2.splat" }

/** A range that holds every value of `e` (or NaN), from constants and min / max of them. */
const rangeOf = (e: Expr): [number, number] => {
  if (e.kind === "const") return [e.value, e.value]
  if (e.kind === "bin" && (e.op === "min" || e.op === "max")) {
    const [a, b] = [rangeOf(e.a), rangeOf(e.b)]
    const f = e.op === "min" ? Math.min : Math.max
    return [f(a[0], b[0]), f(a[1], b[1])]
  }
  return [-Infinity, Infinity]
}
const inInt32 = (e: Expr): boolean => {
  const [lo, hi] = rangeOf(e)
  return lo >= -(2 ** 31) && hi <= 2 ** 31 - 1
}

export interface WidePlan {
  readonly store: VStore
}

/** The plan for a vectorized loop over `loopVar` whose body is `body`, or undefined (it stays scalar). */
export const widePlan = (body: Stmt, loopVar: string): WidePlan | undefined => {
  if (body.kind !== "store" || body.indices.length !== 1) return undefined
  const k = coef(body.indices[0], loopVar)
  if (k === undefined || k === 0) return undefined
  const stored = new Map([[body.buffer, exprKey(body.indices[0])]])
  const ok = (e: Expr): boolean => {
    const cls = CLASS[e.dtype]
    if (invariant(e, loopVar, stored)) return cls !== undefined
    if (!cls) return false
    switch (e.kind) {
      case "read":
        return e.source !== body.buffer && e.dtype !== "float64" && e.indices.length === 1 && coef(e.indices[0], loopVar) === 1
      case "bin":
        return BIN[cls][e.op] !== undefined && CLASS[e.a.dtype] === cls && CLASS[e.b.dtype] === cls && ok(e.a) && ok(e.b)
      case "call":
        return CALL[cls][e.fn] !== undefined && e.args.every((a) => CLASS[a.dtype] === cls && ok(a))
      case "cast": {
        const r = widenedRead(e, loopVar)
        if (r) return r.source !== body.buffer
        return castOk(e.value, e.dtype) && ok(e.value)
      }
      default:
        return false
    }
  }
  const castOk = (from: Expr, to: DType): boolean => {
    const f = CLASS[from.dtype]
    if (!f) return false
    if (to === "float32" || to === "float64") return true
    // to an integer: from an integer (int32: itself), or a float clamped inside int32's range
    return to === "int32" && (f === "i32" || inInt32(from))
  }
  const v = body.value
  // an int32 / float32 store, or an 8- or 16-bit store of a cast from int32 or from a float clamped
  // inside int32's range (the emitter checks the stored buffer's dtype is the value's)
  if (v.dtype === "int32" || v.dtype === "float32") return ok(v) ? { store: body } : undefined
  const fromOk = v.kind === "cast" && (CLASS[v.value.dtype] === "i32" || (CLASS[v.value.dtype] !== undefined && inInt32(v.value)))
  return NARROW.has(v.dtype) && fromOk && v.kind === "cast" && ok(v.value) ? { store: body } : undefined
}

/** A value: an i32x4 / f32x4 on the stack, or a float64 one in two f64x2 locals. */
type Val = { readonly cls: "i32" | "f32" } | { readonly cls: "f64"; readonly lo: number; readonly hi: number }

/** Lanes 0–1 and 2–3 of two v128 (each's low half) joined: [a0 a1 b0 b1]. */
const LOW_HALVES = [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] as const
/** A v128's high half moved to its low half. */
const HIGH_HALF = [8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15] as const

/**
 * Emits the 4-lane steps of a planned loop from the constant `min`, `count` lanes (a multiple of 4),
 * the buffers' dtypes from the scope.
 */
export const emitWideLoop = (fb: FnBuilder, sc: Scope, plan: WidePlan, loopVar: string, min: number, count: number): void => {
  const st = plan.store
  const stored = new Map([[st.buffer, exprKey(st.indices[0])]])
  const info = sc.bufs.get(st.buffer)
  if (!info || info.dtype !== st.value.dtype) return fb.fail(`vectorized store to '${st.buffer}' of ${st.value.dtype} into ${info?.dtype ?? "an unknown buffer"}`)
  const block: Scope = sc.addrCache ? sc : { ...sc, addrCache: new Map() }
  // invariant subtrees (maximal), splatted once into a v128 local
  const hoisted = new Map<string, number>()
  const hoist = (e: Expr): void => {
    if (invariant(e, loopVar, stored)) {
      const key = exprKey(e)
      if (hoisted.has(key)) return
      emitExpr(fb, block, e)
      fb.op(SPLAT[CLASS[e.dtype]!])
      const l = fb.local("v128")
      fb.op("local.set", l)
      hoisted.set(key, l)
      return
    }
    if (e.kind === "bin") {
      hoist(e.a)
      hoist(e.b)
    } else if (e.kind === "call") e.args.forEach(hoist)
    else if (e.kind === "cast") hoist(e.value)
  }
  hoist(st.value.kind === "cast" && NARROW.has(st.value.dtype) ? st.value.value : st.value)

  const pair = (lo: () => void, hi: () => void): Val => {
    const l = fb.local("v128")
    const h = fb.local("v128")
    lo()
    fb.op("local.set", l)
    hi()
    fb.op("local.set", h)
    return { cls: "f64", lo: l, hi: h }
  }
  /** The v128 on the stack split into two f64x2 by `widen` (its low half, then its high half moved down). */
  const widenPair = (widen: Op): Val => {
    const t = fb.local("v128")
    fb.op("local.set", t)
    return pair(
      () => {
        fb.op("local.get", t)
        fb.op(widen)
      },
      () => {
        fb.op("local.get", t)
        fb.op("local.get", t)
        fb.shuffle(HIGH_HALF)
        fb.op(widen)
      },
    )
  }
  /** A float64 pair narrowed lane by lane (`narrow` zeroes the high half) and joined into one v128 on the stack. */
  const joinPair = (p: Val & { cls: "f64" }, narrow: Op): void => {
    fb.op("local.get", p.lo)
    fb.op(narrow)
    fb.op("local.get", p.hi)
    fb.op(narrow)
    fb.shuffle(LOW_HALVES)
  }

  const value = (e: Expr, at: (x: Expr) => Expr): Val => {
    const cls = CLASS[e.dtype]!
    const h = hoisted.get(exprKey(e))
    if (h !== undefined) {
      if (cls === "f64") return { cls, lo: h, hi: h }
      fb.op("local.get", h)
      return { cls }
    }
    switch (e.kind) {
      case "read": {
        // a register buffer's 4 elements (stmt.ts admits one read at constant indices): its v128 local
        const reg = block.regs?.get(e.source)
        if (reg) {
          emitRegVecRead(fb, reg, e.source, at(e.indices[0]))
          return { cls: cls as "i32" | "f32" }
        }
        const { offset } = emitAddress(fb, block, e.source, at(e.indices[0]), 4)
        fb.op("v128.load", STORAGE[e.dtype].align, offset)
        return { cls: cls as "i32" | "f32" }
      }
      case "bin": {
        const op = BIN[cls][e.op]!
        if (cls !== "f64") {
          value(e.a, at)
          value(e.b, at)
          fb.op(op)
          return { cls }
        }
        const [a, b] = [value(e.a, at), value(e.b, at)] as (Val & { cls: "f64" })[]
        return pair(
          () => (fb.op("local.get", a.lo), fb.op("local.get", b.lo), fb.op(op)),
          () => (fb.op("local.get", a.hi), fb.op("local.get", b.hi), fb.op(op)),
        )
      }
      case "call": {
        const op = CALL[cls][e.fn]!
        if (cls !== "f64") {
          value(e.args[0], at)
          fb.op(op)
          return { cls }
        }
        const a = value(e.args[0], at) as Val & { cls: "f64" }
        return pair(
          () => (fb.op("local.get", a.lo), fb.op(op)),
          () => (fb.op("local.get", a.hi), fb.op(op)),
        )
      }
      case "cast": {
        const r = widenedRead(e, loopVar)
        if (r) {
          emitWidenedLoad(fb, block, r, at(r.indices[0]))
          return { cls: "i32" }
        }
        const inner = e.value
        // float64 → float32 → float64 (a float32 rounding of a float64 value): each half rounded in place
        if (cls === "f64" && inner.kind === "cast" && inner.dtype === "float32" && inner.value.dtype === "float64" && !hoisted.has(exprKey(inner))) {
          const a = value(inner.value, at) as Val & { cls: "f64" }
          const round = (l: number) => () => (fb.op("local.get", l), fb.op("f32x4.demote_f64x2_zero"), fb.op("f64x2.promote_low_f32x4"))
          return pair(round(a.lo), round(a.hi))
        }
        // int32 → float64 → float32: the float64 is exact, so one rounding, as int32 → float32
        if (cls === "f32" && inner.kind === "cast" && inner.dtype === "float64" && inner.value.dtype === "int32" && !hoisted.has(exprKey(inner))) {
          value(inner.value, at)
          fb.op("f32x4.convert_i32x4_s")
          return { cls }
        }
        return convert(value(inner, at), cls)
      }
      default:
        return fb.fail(`vector value of kind ${e.kind} (the wide plan admits none)`)
    }
  }
  /** `v` in class `to` (a float → int32 conversion only where the plan proved the range). */
  const convert = (v: Val, to: Cls): Val => {
    if (v.cls === to) return v
    if (v.cls === "i32" && to === "f32") {
      fb.op("f32x4.convert_i32x4_s")
      return { cls: to }
    }
    if (v.cls === "f32" && to === "i32") {
      fb.op("i32x4.trunc_sat_f32x4_s")
      return { cls: to }
    }
    if (v.cls === "i32" && to === "f64") return widenPair("f64x2.convert_low_i32x4_s")
    if (v.cls === "f32" && to === "f64") return widenPair("f64x2.promote_low_f32x4")
    if (v.cls !== "f64" || to === "f64") return fb.fail(`a vector conversion ${v.cls} → ${to}`)
    joinPair(v, to === "f32" ? "f32x4.demote_f64x2_zero" : "i32x4.trunc_sat_f64x2_s_zero")
    return { cls: to }
  }

  const narrow = NARROW.has(st.value.dtype)
  const stride = coef(st.indices[0], loopVar)!
  for (let k = 0; k < count; k += 4) {
    const env = new Map([[loopVar, c(min + k)]])
    const at = (x: Expr) => simplify(substitute(x, env), sc.bounds, sc.simplified)
    const idx = at(st.indices[0])
    if (!narrow && stride === 1) {
      const { offset } = emitAddress(fb, block, st.buffer, idx, 4)
      value(st.value, at)
      fb.op("v128.store", STORAGE[st.value.dtype].align, offset)
    } else {
      // lane by lane: the value's lanes as i32 (an integer store) or f32, then each lane's scalar store
      const v = value(narrow && st.value.kind === "cast" ? st.value.value : st.value, at)
      const lanes = convert(v, narrow ? "i32" : (CLASS[st.value.dtype] as Cls))
      if (lanes.cls === "f64") return fb.fail("a float64 store lane by lane")
      const t = fb.local("v128")
      fb.op("local.set", t)
      const s = STORAGE[st.value.dtype]
      for (let j = 0; j < 4; j++) {
        const e = new Map([[loopVar, c(min + k + j)]])
        const { offset } = emitAddress(fb, block, st.buffer, simplify(substitute(st.indices[0], e), sc.bounds, sc.simplified))
        fb.op("local.get", t)
        fb.op(lanes.cls === "f32" ? "f32x4.extract_lane" : "i32x4.extract_lane", j)
        fb.op(s.store, s.align, offset)
      }
    }
    invalidate(block, [st.buffer])
  }
}
