// Scalar expressions of the `wasm` target: TIR Expr → instructions leaving one value of the
// dtype's value class (i32 for ints up to 32 bits and bool, i64 for int64 / uint64 — stored as
// their 64 bits, which the wasm device views as BigInt64Arrays / BigUint64Arrays —, f32 for
// float32/float16/bfloat16 — stored as f32 like the JS storage —, f64 for float64), and the
// addresses of buffer elements. Semantics follow the evaluator: conversions
// as convert.ts, operators as binary.ts, math as call.ts; select is lazy (an if/else, since a
// guarded arm may read out of bounds).
import type { DType } from "../../ast/graph/dtype.js"
import { exprKey, type Expr } from "../../ast/te/expr.js"
import { intervalOf, simplify, type Interval, type SimplifyMemo } from "../../ast/te/simplify.js"
import { STORAGE, VCLASS, type BufInfo, type FnBuilder, type VT } from "./builder.js"
import { emitRegRead, LANE_DTYPE, type RegBuf } from "./registers.js"
import { affineOf, baseKey, bestBase, termsNonNegative, type Base, type Term } from "./address.js"
import { emitBin, isPow2, type Push } from "./binary.js"
import { emitCall } from "./call.js"
import { emitConstOf, emitConvert } from "./convert.js"

/** What an expression sees: its locals by variable name, buffers, loop-variable bounds, options. */
export interface Scope {
  readonly vars: ReadonlyMap<string, { readonly local: number; readonly vt: VT }>
  readonly bufs: ReadonlyMap<string, BufInfo>
  readonly bounds: ReadonlyMap<string, Interval>
  /** simplify's memo for this kernel's emission (its index expressions recur across loops and unrolled steps). */
  readonly simplified: SimplifyMemo
  readonly boundsCheck: boolean
  /**
   * Addresses computed in this straight-line region (no select arms, no loop-variable change), by
   * index expression: the first use stores base + index·size in a local, later ones read it.
   */
  readonly addrCache?: Map<string, number>
  /**
   * Vector values loaded or splatted in the same straight-line region (vector.ts), by key, with the
   * buffers they read: a store to one of those buffers drops them.
   */
  readonly vcache?: Map<string, { readonly local: number; readonly reads: ReadonlySet<string> }>
  /** Whether a guarded vector read that recurs in the region reuses its local (vector.ts; absent: true). */
  readonly reuseGuardedReads?: boolean
  /** Whether innermost loops step their addresses (hoist.ts: stepBases; absent: true). */
  readonly stepAddresses?: boolean
  /** Buffers promoted to v128 locals (registers.ts), by name. */
  readonly regs?: ReadonlyMap<string, RegBuf>
  /** Partial addresses hoisted out of the enclosing loops (address.ts). */
  readonly bases?: readonly Base[]
}

/**
 * Pushes the address of `buf[idx]` (the buffer's start + scaled index) and returns the memarg offset.
 * A constant non-negative addend of the index folds into the offset when the rest is provably ≥ 0;
 * with bounds checks the index is compared (unsigned) against the storage length minus `span - 1`.
 */
export const emitAddress = (fb: FnBuilder, sc: Scope, name: string, idx: Expr, span = 1): { offset: number; info: BufInfo } => {
  const info = sc.bufs.get(name)
  if (!info) return fb.fail(`access to unknown buffer '${name}'`)
  const size = STORAGE[info.dtype].bytes
  const shift = Math.log2(size)
  if (!sc.boundsCheck) {
    const a = affineOf(idx)
    if (a.terms.size > 0 && termsNonNegative(a, sc.bounds)) {
      // the largest hoisted base, plus the terms it lacks; the constant in the offset
      const base = bestBase(sc.bases ?? [], a, size, info.base)
      const rest = new Map([...a.terms].filter(([key]) => !base?.terms.has(key)))
      const from = base?.local ?? info.base
      const cacheKey = sc.addrCache && rest.size ? `${from}|${baseKey(info.base, size, rest)}` : undefined
      const cached = cacheKey === undefined ? undefined : sc.addrCache!.get(cacheKey)
      if (cached !== undefined) fb.op("local.get", cached)
      else {
        fb.op("local.get", from)
        if (rest.size) {
          emitScaledTerms(fb, sc, rest.values(), size)
          fb.op("i32.add")
          if (cacheKey !== undefined) {
            const l = fb.local("i32")
            fb.op("local.tee", l)
            sc.addrCache!.set(cacheKey, l)
          }
        }
      }
      let offset = info.offset + a.k * size
      if (offset < 0) {
        // the true index is ≥ 0, so the sum stays ≥ the frame; only the memarg must be unsigned
        fb.op("i32.const", offset)
        fb.op("i32.add")
        offset = 0
      }
      return { offset, info }
    }
  }
  let rest = idx
  let add = 0
  if (!sc.boundsCheck && idx.kind === "bin" && idx.op === "add" && idx.b.kind === "const" && idx.b.value > 0 && intervalOf(idx.a, sc.bounds).min >= 0) {
    rest = idx.a
    add = idx.b.value
  }
  const cacheKey = sc.addrCache && !sc.boundsCheck && rest.kind !== "const" ? `${info.base}|${shift}:${exprKey(rest)}` : undefined
  const cached = cacheKey === undefined ? undefined : sc.addrCache!.get(cacheKey)
  if (cached !== undefined) {
    fb.op("local.get", cached)
    return { offset: info.offset + add * size, info }
  }
  fb.op("local.get", info.base)
  if (rest.kind === "const" && rest.value >= 0) {
    add += rest.value
  } else {
    emitExprAs(fb, sc, rest, "int32")
    if (sc.boundsCheck) {
      const t = fb.temp("i32")
      fb.op("local.tee", t)
      fb.op("i32.const", info.length - span + 1)
      fb.op("i32.ge_u")
      fb.block("if")
      fb.op("unreachable")
      fb.op("end")
      fb.op("local.get", t)
      fb.release("i32", t)
    }
    if (shift) {
      fb.op("i32.const", shift)
      fb.op("i32.shl")
    }
    fb.op("i32.add")
    if (cacheKey !== undefined) {
      const l = fb.local("i32")
      fb.op("local.tee", l)
      sc.addrCache!.set(cacheKey, l)
    }
  }
  if (sc.boundsCheck && rest.kind === "const" && (add < 0 || add + span > info.length)) {
    fb.op("unreachable")
  }
  return { offset: info.offset + Math.max(0, add) * size, info }
}

/** Drops the cached vector values that read any of `buffers` (they were just stored). */
export const invalidate = (sc: Scope, buffers: Iterable<string>): void => {
  if (!sc.vcache) return
  for (const b of buffers) for (const [k, v] of sc.vcache) if (v.reads.has(b)) sc.vcache.delete(k)
}

/** Pushes Σ coef · size · atom over `terms` (i32, at least one term). */
export const emitScaledTerms = (fb: FnBuilder, sc: Scope, terms: Iterable<Term>, size: number): void => {
  let first = true
  for (const t of terms) {
    emitExprAs(fb, sc, t.atom, "int32")
    const m = t.coef * size
    if (m !== 1) {
      if (isPow2(m)) {
        fb.op("i32.const", Math.log2(m))
        fb.op("i32.shl")
      } else {
        fb.op("i32.const", m)
        fb.op("i32.mul")
      }
    }
    if (!first) fb.op("i32.add")
    first = false
  }
}

/** Emits `e`, then converts it to `dtype`. */
export const emitExprAs = (fb: FnBuilder, sc: Scope, e: Expr, dtype: DType): void => {
  emitExpr(fb, sc, e)
  emitConvert(fb, e.dtype, dtype)
}

/** How operators push their operands here. */
const operands =
  (fb: FnBuilder, sc: Scope): Push =>
  (x, as) =>
    as === undefined ? emitExpr(fb, sc, x) : emitExprAs(fb, sc, x, as)

/** Pushes the value of `e` in the value class of `e.dtype`. */
export const emitExpr = (fb: FnBuilder, sc: Scope, e: Expr): void => {
  switch (e.kind) {
    case "const":
      emitConstOf(fb, e.value, e.dtype)
      return
    case "var": {
      const l = sc.vars.get(e.name)
      if (!l) return fb.fail(`variable '${e.name}' is not bound`)
      fb.op("local.get", l.local)
      if (l.vt !== VCLASS[e.dtype]) fb.fail(`variable '${e.name}' is ${l.vt}, used as ${e.dtype}`)
      return
    }
    case "read": {
      if (e.indices.length !== 1) fb.fail(`read of '${e.source}' with ${e.indices.length} indices: run lowering.FlattenStorage first`)
      const reg = sc.regs?.get(e.source)
      if (reg) {
        emitRegRead(fb, reg, e.source, simplify(e.indices[0], sc.bounds, sc.simplified))
        emitConvert(fb, LANE_DTYPE[reg.lane], e.dtype)
        return
      }
      const { offset, info } = emitAddress(fb, sc, e.source, e.indices[0])
      const st = STORAGE[info.dtype]
      fb.op(st.load, st.align, offset)
      emitConvert(fb, info.dtype, e.dtype)
      return
    }
    case "select": {
      emitExprAs(fb, sc, e.cond, "bool")
      fb.block("if", VCLASS[e.dtype])
      // an arm may not run: it reads the region's caches but adds nothing to them
      const arm: Scope = { ...sc, addrCache: sc.addrCache && new Map(sc.addrCache), vcache: undefined }
      emitExprAs(fb, arm, e.t, e.dtype)
      fb.op("else")
      emitExprAs(fb, { ...arm, addrCache: sc.addrCache && new Map(sc.addrCache) }, e.f, e.dtype)
      fb.op("end")
      return
    }
    case "cast":
      emitExpr(fb, sc, e.value)
      emitConvert(fb, e.value.dtype, e.dtype)
      return
    case "bin":
      emitBin(fb, e, operands(fb, sc))
      return
    case "call":
      emitCall(fb, e, operands(fb, sc))
      return
    case "reduce":
      fb.fail("a reduction reached emission: lower it first")
  }
}
