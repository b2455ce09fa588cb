// Register promotion of small "local"-scope buffers (the accumulator tiles of the conv and dense
// schedules): a float32 or int32 buffer of at most MAX_REG_ELEMS elements whose every access has a
// constant index once the loops over its indices are unrolled lives in v128 locals — element e in
// lane e % 4 of local e / 4 — instead of the frame, so the engine keeps it in registers.
//
// The check here and the emitter agree on one rule: inside the allocation, a loop whose variable
// appears in an index of a promoted buffer is unrolled (a vectorized loop that takes the SIMD path
// with a constant min unrolls itself), so every such index is a constant when emitted.
import { freeVars, type Expr } from "../../ast/te/expr.js"
import type { Buffer, Stmt } from "../../ast/tir/tir.js"
import type { FnBuilder } from "./builder.js"
import type { Op } from "./encoder.js"

/** Largest promoted buffer (elements): 16 v128 locals, the vector registers of x86-64. */
export const MAX_REG_ELEMS = 64
/** Largest number of copies the unrolling for one promoted buffer may make of a statement. */
export const MAX_REG_UNROLL = 256

export type RegLane = "f32" | "i32"

/** The dtype of each lane type's elements. */
export const LANE_DTYPE = { f32: "float32", i32: "int32" } as const satisfies { readonly [L in RegLane]: "float32" | "int32" }

/** A promoted buffer: its lane type and its v128 locals, four elements each. */
export interface RegBuf {
  readonly lane: RegLane
  readonly locals: readonly number[]
}

const exprAccesses = (e: Expr, buf: string, out: Expr[]): void => {
  switch (e.kind) {
    case "read":
      if (e.source === buf) out.push(...e.indices)
      e.indices.forEach((i) => exprAccesses(i, buf, out))
      return
    case "bin":
      exprAccesses(e.a, buf, out)
      exprAccesses(e.b, buf, out)
      return
    case "select":
      exprAccesses(e.cond, buf, out)
      exprAccesses(e.t, buf, out)
      exprAccesses(e.f, buf, out)
      return
    case "cast":
      exprAccesses(e.value, buf, out)
      return
    case "call":
      e.args.forEach((a) => exprAccesses(a, buf, out))
      return
    case "reduce":
      return
    default:
      return
  }
}

/** The index expressions of every access to `buf` in `s` (the first of a run an intrinsic covers), or undefined when `buf` is used otherwise (another intrinsic's region). */
const accesses = (s: Stmt, buf: string, out: Expr[] = []): Expr[] | undefined => {
  switch (s.kind) {
    case "store":
      if (s.buffer === buf) out.push(...s.indices)
      s.indices.forEach((i) => exprAccesses(i, buf, out))
      exprAccesses(s.value, buf, out)
      return out
    case "for":
      exprAccesses(s.min, buf, out)
      exprAccesses(s.extent, buf, out)
      return accesses(s.body, buf, out)
    case "seq":
      for (const b of s.body) if (!accesses(b, buf, out)) return undefined
      return out
    case "if":
      exprAccesses(s.cond, buf, out)
      if (!accesses(s.then, buf, out)) return undefined
      return s.else ? accesses(s.else, buf, out) : out
    case "allocate":
      return s.buffer.name === buf ? out : accesses(s.body, buf, out)
    case "let":
      exprAccesses(s.value, buf, out)
      return accesses(s.body, buf, out)
    case "evaluate":
      exprAccesses(s.value, buf, out)
      return out
    case "barrier":
      return out
    case "shuffle":
      return s.buffer === buf ? undefined : (exprAccesses(s.value, buf, out), out)
    case "intrinsic":
      if (s.inputs.some((r) => r.buffer === buf)) return undefined
      if (s.output.buffer !== buf) return out
      // the 8-bit dot's 4 sums (dot.ts): one contiguous run of the buffer, at its flat base
      if (s.intrin.emit.wasm === "dot_u8s8_4x4" && s.output.base.length === 1 && s.output.strides?.[s.output.strides.length - 1] === 1) {
        out.push(s.output.base[0])
        return out
      }
      return undefined
  }
}

/** Does `name` appear in an index of an access to one of `bufs` inside `s`? (The emitter's unroll rule.) */
export const indexesRegs = (s: Stmt, name: string, bufs: Iterable<string>): boolean => {
  for (const b of bufs) if ((accesses(s, b) ?? []).some((i) => freeVars(i).has(name))) return true
  return false
}

const constOf = (e: Expr): number | undefined => (e.kind === "const" ? e.value : undefined)

/** Whether `b`, allocated over `body`, can live in v128 locals under the unroll rule. */
export const promotable = (b: Buffer, body: Stmt): boolean => {
  if (b.scope !== "local" || (b.dtype !== "float32" && b.dtype !== "int32")) return false
  const len = b.shape.reduce((a, d) => a * d, 1)
  if (b.strides || len < 1 || len > MAX_REG_ELEMS) return false
  const all = accesses(body, b.name)
  if (!all) return false
  // every loop to unroll has constant bounds and the copies stay few; indices use only their vars
  const unrolled = new Set<string>()
  const walk = (s: Stmt, copies: number): boolean => {
    switch (s.kind) {
      case "for": {
        if (!indexesRegs(s.body, s.var.name, [b.name])) return walk(s.body, copies)
        const lo = constOf(s.min)
        const ext = constOf(s.extent)
        if (lo === undefined || ext === undefined) return false
        const n = copies * Math.max(1, s.forKind === "vectorized" ? Math.ceil(ext / 4) : ext)
        if (n > MAX_REG_UNROLL) return false
        unrolled.add(s.var.name)
        return walk(s.body, n)
      }
      case "seq":
        return s.body.every((x) => walk(x, copies))
      case "if":
        return walk(s.then, copies) && (!s.else || walk(s.else, copies))
      case "allocate":
      case "let":
        return walk(s.body, copies)
      default:
        return true
    }
  }
  if (!walk(body, 1)) return false
  return all.every((i) => [...freeVars(i)].every((v) => unrolled.has(v)))
}

/** Fresh v128 locals for a promoted buffer of `length` elements. */
export const allocRegs = (fb: FnBuilder, dtype: "float32" | "int32", length: number): RegBuf => ({
  lane: dtype === "float32" ? "f32" : "i32",
  locals: Array.from({ length: Math.ceil(length / 4) }, () => fb.local("v128")),
})

/**
 * The constant element index of an access; undefined (after an `unreachable`) when it is out of
 * range: an unrolled copy under a guard that is false for it (a split that does not divide), which
 * never runs — the trap a memory buffer's constant out-of-range address gets too (expr.ts).
 */
const regIndex = (fb: FnBuilder, r: RegBuf, name: string, idx: Expr, span: number): number | undefined => {
  const k = constOf(idx)
  if (k === undefined) return fb.fail(`register buffer '${name}' indexed by a non-constant index`)
  if (k >= 0 && k + span <= r.locals.length * 4) return k
  fb.op("unreachable")
  return undefined
}

const EXTRACT: { readonly [L in RegLane]: Op } = { f32: "f32x4.extract_lane", i32: "i32x4.extract_lane" }
const REPLACE: { readonly [L in RegLane]: Op } = { f32: "f32x4.replace_lane", i32: "i32x4.replace_lane" }

/** Pushes element `idx` (a constant) of a promoted buffer, as a scalar. */
export const emitRegRead = (fb: FnBuilder, r: RegBuf, name: string, idx: Expr): void => {
  const k = regIndex(fb, r, name, idx, 1)
  if (k === undefined) return
  fb.op("local.get", r.locals[k >> 2])
  fb.op(EXTRACT[r.lane], k & 3)
}

/** Stores the scalar that `value` pushes in element `idx` (a constant) of a promoted buffer. */
export const emitRegWrite = (fb: FnBuilder, r: RegBuf, name: string, idx: Expr, value: () => void): void => {
  const k = regIndex(fb, r, name, idx, 1)
  if (k === undefined) return
  fb.op("local.get", r.locals[k >> 2])
  value()
  fb.op(REPLACE[r.lane], k & 3)
  fb.op("local.set", r.locals[k >> 2])
}

/** Pushes elements idx..idx+3 (idx a constant) as one v128: one local when aligned, else gathered lane by lane. */
export const emitRegVecRead = (fb: FnBuilder, r: RegBuf, name: string, idx: Expr): void => {
  const k = regIndex(fb, r, name, idx, 4)
  if (k === undefined) return
  if (k % 4 === 0) {
    fb.op("local.get", r.locals[k >> 2])
    return
  }
  for (let j = 0; j < 4; j++) {
    fb.op("local.get", r.locals[(k + j) >> 2])
    fb.op(EXTRACT[r.lane], (k + j) & 3)
    if (j === 0) fb.op(r.lane === "f32" ? "f32x4.splat" : "i32x4.splat")
    else fb.op(REPLACE[r.lane], j)
  }
}

/** Stores the v128 on the stack in elements idx..idx+3 (idx a constant). */
export const emitRegVecWrite = (fb: FnBuilder, r: RegBuf, name: string, idx: Expr): void => {
  const k = regIndex(fb, r, name, idx, 4)
  if (k === undefined) return
  if (k % 4 === 0) {
    fb.op("local.set", r.locals[k >> 2])
    return
  }
  const t = fb.temp("v128")
  fb.op("local.set", t)
  for (let j = 0; j < 4; j++) {
    const dst = r.locals[(k + j) >> 2]
    fb.op("local.get", dst)
    fb.op("local.get", t)
    fb.op(EXTRACT[r.lane], j)
    fb.op(REPLACE[r.lane], (k + j) & 3)
    fb.op("local.set", dst)
  }
  fb.release("v128", t)
}
