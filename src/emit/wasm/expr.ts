// Scalar expressions of the `wasm` target: TIR Expr → instructions leaving one value of the
// dtype's value class (i32 for ints up to 32 bits and bool, f32 for float32/float16/bfloat16 —
// stored as f32 like the JS storage —, f64 for float64 and int64/uint64, which our JS memory holds
// as doubles). Semantics follow the evaluator: floordiv/floormod floor, int div truncates, casts
// truncate toward zero, select is lazy (an if/else, since a guarded arm may read out of bounds),
// math without an opcode (exp, log, tanh, erf, pow, sigmoid, sin, cos) calls a JS import in f64.
import type { DType } from "../../ast/graph/dtype.js"
import { exprKey, isIntDtype, type BinOp, type Expr, type Intrinsic } from "../../ast/te/expr.js"
import { intervalOf, simplify, type Interval } from "../../ast/te/simplify.js"
import type { Op } from "./encoder.js"
import { FnBuilder, STORAGE, VCLASS, WasmEmitError, type BufInfo, type MathImport, type VT } from "./builder.js"
import { emitRegRead, type RegBuf } from "./registers.js"
import { affineOf, baseKey, bestBase, termsNonNegative, type Base, type Term } from "./address.js"

/** What an expression sees: its locals by variable name, buffers, loop-variable bounds, options. */
export interface Scope {
  readonly vars: ReadonlyMap<string, { readonly local: number; readonly vt: VT }>
  readonly bufs: ReadonlyMap<string, BufInfo>
  readonly bounds: ReadonlyMap<string, Interval>
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
  /** Buffers promoted to v128 locals (registers.ts), by name. */
  readonly regs?: ReadonlyMap<string, RegBuf>
  /** Partial addresses hoisted out of the enclosing loops (address.ts). */
  readonly bases?: readonly Base[]
}

const LANE_DTYPE = { f32: "float32", i32: "int32" } as const

const constOp = (vt: VT): Op => (vt === "i32" ? "i32.const" : vt === "f32" ? "f32.const" : "f64.const")

export const emitConst = (fb: FnBuilder, value: number, vt: VT): void => fb.op(constOp(vt), vt === "i32" ? value | 0 : vt === "f32" ? Math.fround(value) : value)

/**
 * Pushes the address of `buf[idx]` (the buffer's start + scaled index) and returns the memarg offset.
 * A constant non-negative addend of the index folds into the offset when the rest is provably ≥ 0;
 * with bounds checks the index is compared (unsigned) against the storage length minus `span - 1`.
 */
export const emitAddress = (fb: FnBuilder, sc: Scope, name: string, idx: Expr, span = 1): { offset: number; info: BufInfo } => {
  const info = sc.bufs.get(name)
  if (!info) throw new WasmEmitError(`access to unknown buffer '${name}'`)
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

/** Converts the value on the stack from dtype `from` to dtype `to` (the evaluator's converter). */
export const emitConvert = (fb: FnBuilder, from: DType, to: DType): void => {
  if (from === to) return
  const f = VCLASS[from]
  const t = VCLASS[to]
  const unsignedFrom = from === "uint32"
  if (to === "bool") {
    emitConst(fb, 0, f)
    fb.op(f === "i32" ? "i32.ne" : f === "f32" ? "f32.ne" : "f64.ne")
    return
  }
  if (t === "f32") {
    if (f === "i32") fb.op(unsignedFrom ? "f32.convert_i32_u" : "f32.convert_i32_s")
    else if (f === "f64") fb.op("f32.demote_f64")
    if (to === "float16" || to === "bfloat16") {
      fb.op("f64.promote_f32")
      fb.call(to === "float16" ? "round_f16" : "round_bf16")
      fb.op("f32.demote_f64")
    }
    return
  }
  if (t === "f64") {
    if (f === "i32") fb.op(unsignedFrom ? "f64.convert_i32_u" : "f64.convert_i32_s")
    else if (f === "f32") fb.op("f64.promote_f32")
    if (isIntDtype(to) && !isIntDtype(from)) fb.op("f64.trunc")
    return
  }
  // to an i32-class integer: truncate, then wrap modulo 2^32 (C's and the evaluator's semantics;
  // a saturating i32 truncation would clamp values that exact float64 arithmetic takes past 2^31)
  if (f === "f32" || f === "f64") {
    if (f === "f32") fb.op("f64.promote_f32")
    fb.op("i64.trunc_sat_f64_s")
    fb.op("i32.wrap_i64")
  }
  switch (to) {
    case "int8":
      fb.op("i32.extend8_s")
      break
    case "int16":
      fb.op("i32.extend16_s")
      break
    case "uint8":
      fb.op("i32.const", 255)
      fb.op("i32.and")
      break
    case "uint16":
      fb.op("i32.const", 65535)
      fb.op("i32.and")
      break
    default:
      break
  }
}

/** Emits `e`, then converts it to `dtype`. */
export const emitExprAs = (fb: FnBuilder, sc: Scope, e: Expr, dtype: DType): void => {
  emitExpr(fb, sc, e)
  emitConvert(fb, e.dtype, dtype)
}

const CMP: Partial<Record<BinOp, string>> = { eq: "eq", ne: "ne", lt: "lt", le: "le", gt: "gt", ge: "ge" }
const ARITH: Partial<Record<BinOp, string>> = { add: "add", sub: "sub", mul: "mul" }

const isPow2 = (n: number) => n > 0 && (n & (n - 1)) === 0

/** Stores the value on the stack in a fresh temp and returns it. */
const stash = (fb: FnBuilder, vt: VT): number => {
  const t = fb.temp(vt)
  fb.op("local.set", t)
  return t
}

const emitBin = (fb: FnBuilder, sc: Scope, e: Expr & { kind: "bin" }): void => {
  const dt = e.a.dtype
  const vt = VCLASS[dt]
  const unsigned = dt === "uint32"
  const int = isIntDtype(dt)
  const a = () => emitExpr(fb, sc, e.a)
  const b = () => emitExprAs(fb, sc, e.b, dt)
  const bConst = e.b.kind === "const" && vt === "i32" ? e.b.value : undefined
  if (e.op === "and" || e.op === "or") {
    emitExprAs(fb, sc, e.a, "bool")
    emitExprAs(fb, sc, e.b, "bool")
    fb.op(e.op === "and" ? "i32.and" : "i32.or")
    return
  }
  const cmp = CMP[e.op]
  if (cmp) {
    a()
    b()
    const sfx = vt !== "i32" || cmp === "eq" || cmp === "ne" ? "" : unsigned ? "_u" : "_s"
    fb.op(`${vt}.${cmp}${sfx}` as Op)
    return
  }
  const ar = ARITH[e.op]
  if (ar) {
    a()
    b()
    fb.op(`${vt}.${ar}` as Op)
    return
  }
  switch (e.op) {
    case "div":
      a()
      b()
      if (vt === "i32") fb.op(unsigned ? "i32.div_u" : "i32.div_s")
      else {
        fb.op(`${vt}.div`)
        if (int) fb.op("f64.trunc")
      }
      return
    case "min":
    case "max": {
      if (vt !== "i32") {
        a()
        b()
        fb.op(`${vt}.${e.op}`)
        return
      }
      a()
      const x = stash(fb, "i32")
      b()
      const y = stash(fb, "i32")
      fb.op("local.get", x)
      fb.op("local.get", y)
      fb.op("local.get", x)
      fb.op("local.get", y)
      fb.op(e.op === "min" ? (unsigned ? "i32.lt_u" : "i32.lt_s") : unsigned ? "i32.gt_u" : "i32.gt_s")
      fb.op("select")
      fb.release("i32", x)
      fb.release("i32", y)
      return
    }
    case "floordiv":
    case "floormod": {
      const div = e.op === "floordiv"
      if (vt !== "i32" || unsigned) {
        if (vt === "i32") {
          // unsigned: floor is truncation
          a()
          b()
          fb.op(div ? "i32.div_u" : "i32.rem_u")
          return
        }
        // floats (and int64 held as f64): floor(a / b), a - floor(a / b) * b
        a()
        const x = stash(fb, vt)
        b()
        const y = stash(fb, vt)
        if (!div) fb.op("local.get", x)
        fb.op("local.get", x)
        fb.op("local.get", y)
        fb.op(`${vt}.div`)
        fb.op(`${vt}.floor`)
        if (!div) {
          fb.op("local.get", y)
          fb.op(`${vt}.mul`)
          fb.op(`${vt}.sub`)
        }
        fb.release(vt, x)
        fb.release(vt, y)
        return
      }
      if (bConst !== undefined && isPow2(bConst)) {
        a()
        if (div) {
          fb.op("i32.const", Math.log2(bConst))
          fb.op("i32.shr_s")
        } else {
          fb.op("i32.const", bConst - 1)
          fb.op("i32.and")
        }
        return
      }
      if (bConst !== undefined && bConst > 0) {
        a()
        const x = stash(fb, "i32")
        if (div) {
          // trunc(a / b) - (a rem b < 0)
          fb.op("local.get", x)
          fb.op("i32.const", bConst)
          fb.op("i32.div_s")
          fb.op("local.get", x)
          fb.op("i32.const", bConst)
          fb.op("i32.rem_s")
          fb.op("i32.const", 0)
          fb.op("i32.lt_s")
          fb.op("i32.sub")
        } else {
          // r + (r < 0) * b
          fb.op("local.get", x)
          fb.op("i32.const", bConst)
          fb.op("i32.rem_s")
          fb.op("local.tee", x)
          fb.op("local.get", x)
          fb.op("i32.const", 0)
          fb.op("i32.lt_s")
          fb.op("i32.const", bConst)
          fb.op("i32.mul")
          fb.op("i32.add")
        }
        fb.release("i32", x)
        return
      }
      a()
      b()
      fb.call(div ? "floordiv_i32" : "floormod_i32")
      return
    }
  }
  throw new WasmEmitError(`binary op '${e.op}' has no wasm lowering`)
}

const MATH: Partial<Record<Intrinsic, MathImport>> = { exp: "exp", log: "log", tanh: "tanh", erf: "erf", pow: "pow", sigmoid: "sigmoid", sin: "sin", cos: "cos" }

const emitCall = (fb: FnBuilder, sc: Scope, e: Expr & { kind: "call" }): void => {
  const dt = e.dtype
  const vt = VCLASS[dt]
  const arg0 = e.args[0]
  const imp = MATH[e.fn]
  if (imp) {
    for (const a of e.args) emitExprAs(fb, sc, a, "float64")
    fb.call(imp)
    emitConvert(fb, "float64", dt)
    return
  }
  if (e.fn === "not") {
    emitExprAs(fb, sc, arg0, "bool")
    fb.op("i32.eqz")
    return
  }
  if (vt === "i32") {
    switch (e.fn) {
      case "floor":
      case "ceil":
      case "round":
        emitExprAs(fb, sc, arg0, dt)
        return
      case "neg":
        fb.op("i32.const", 0)
        emitExprAs(fb, sc, arg0, dt)
        fb.op("i32.sub")
        return
      case "fabs": {
        emitExprAs(fb, sc, arg0, dt)
        const x = stash(fb, "i32")
        fb.op("i32.const", 0)
        fb.op("local.get", x)
        fb.op("i32.sub")
        fb.op("local.get", x)
        fb.op("local.get", x)
        fb.op("i32.const", 0)
        fb.op("i32.lt_s")
        fb.op("select")
        fb.release("i32", x)
        return
      }
      default:
        // sqrt / rsqrt of an integer: in f64, truncated back
        emitCall(fb, sc, { ...e, args: e.args.map((a) => ({ kind: "cast", value: a, dtype: "float64" }) as Expr), dtype: "float64" })
        emitConvert(fb, "float64", dt)
        return
    }
  }
  const f = vt
  switch (e.fn) {
    case "rsqrt":
      emitConst(fb, 1, f)
      emitExprAs(fb, sc, arg0, dt)
      fb.op(`${f}.sqrt`)
      fb.op(`${f}.div`)
      return
    case "sqrt":
    case "floor":
    case "ceil":
    case "neg":
      emitExprAs(fb, sc, arg0, dt)
      fb.op(`${f}.${e.fn}`)
      return
    case "fabs":
      emitExprAs(fb, sc, arg0, dt)
      fb.op(`${f}.abs`)
      return
    case "round":
      emitExprAs(fb, sc, arg0, dt)
      fb.op(`${f}.nearest`) // ties to even, as the evaluator's round
      return
  }
  throw new WasmEmitError(`intrinsic '${e.fn}' has no wasm lowering`)
}

/** Pushes the value of `e` in the value class of `e.dtype`. */
export const emitExpr = (fb: FnBuilder, sc: Scope, e: Expr): void => {
  switch (e.kind) {
    case "const":
      emitConst(fb, e.value, VCLASS[e.dtype])
      return
    case "var": {
      const l = sc.vars.get(e.name)
      if (!l) throw new WasmEmitError(`variable '${e.name}' is not bound`)
      fb.op("local.get", l.local)
      if (l.vt !== VCLASS[e.dtype]) throw new WasmEmitError(`variable '${e.name}' is ${l.vt}, used as ${e.dtype}`)
      return
    }
    case "read": {
      if (e.indices.length !== 1) throw new WasmEmitError(`read of '${e.source}' with ${e.indices.length} indices: run lowering.FlattenStorage first`)
      const reg = sc.regs?.get(e.source)
      if (reg) {
        emitRegRead(fb, reg, e.source, simplify(e.indices[0], sc.bounds))
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
      emitBin(fb, sc, e)
      if (CMP[e.op] === undefined && e.op !== "and" && e.op !== "or") emitConvert(fb, e.a.dtype, e.dtype)
      return
    case "call":
      emitCall(fb, sc, e)
      return
    case "reduce":
      throw new WasmEmitError("a reduction reached emission: lower it first")
  }
}
