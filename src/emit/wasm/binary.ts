// Binary operators of the `wasm` target: arithmetic and comparisons in the operands' value class,
// `and` / `or` on bools, integer division that truncates, floordiv / floormod that floor (shifts
// and masks for a power-of-two divisor, a fix-up for another positive constant, a helper function
// otherwise), min / max that propagate NaN for floats and select for integers. int64 / uint64 are
// i64 (wrapping as C's int64_t / uint64_t); their division and remainder go through helpers, since
// wasm traps on a zero divisor and on INT64_MIN / -1 (they give 0, and the wrapped quotient).
import type { DType } from "../../ast/graph/dtype.js"
import { isIntDtype, type BinOp, type Expr } from "../../ast/te/expr.js"
import type { Op } from "./encoder.js"
import { VCLASS, type FnBuilder } from "./builder.js"
import { emitConvert } from "./convert.js"

/** Pushes the value of an operand: in its own value class, or converted to `as`. */
export type Push = (e: Expr, as?: DType) => void

const CMP: Partial<Record<BinOp, string>> = { eq: "eq", ne: "ne", lt: "lt", le: "le", gt: "gt", ge: "ge" }
const ARITH: Partial<Record<BinOp, string>> = { add: "add", sub: "sub", mul: "mul" }

export const isPow2 = (n: number): boolean => n > 0 && (n & (n - 1)) === 0

const emitBinOp = (fb: FnBuilder, e: Expr & { kind: "bin" }, push: Push): void => {
  const dt = e.a.dtype
  const vt = VCLASS[dt]
  const unsigned = dt === "uint32" || dt === "uint64"
  const int = isIntDtype(dt)
  const a = () => push(e.a)
  const b = () => push(e.b, dt)
  const bConst = e.b.kind === "const" && vt === "i32" ? e.b.value : undefined
  if (e.op === "and" || e.op === "or") {
    push(e.a, "bool")
    push(e.b, "bool")
    fb.op(e.op === "and" ? "i32.and" : "i32.or")
    return
  }
  const cmp = CMP[e.op]
  if (cmp) {
    a()
    b()
    const sfx = (vt !== "i32" && vt !== "i64") || cmp === "eq" || cmp === "ne" ? "" : unsigned ? "_u" : "_s"
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
  if (vt === "i64" && (e.op === "div" || e.op === "floordiv" || e.op === "floormod")) {
    a()
    b()
    fb.call(unsigned ? (e.op === "floormod" ? "rem_u64" : "div_u64") : e.op === "div" ? "div_i64" : e.op === "floordiv" ? "floordiv_i64" : "floormod_i64")
    return
  }
  switch (e.op) {
    case "div":
      a()
      b()
      if (vt === "i32") fb.op(unsigned ? "i32.div_u" : "i32.div_s")
      else if (vt !== "i64") {
        fb.op(`${vt}.div`)
        if (int) fb.op("f64.trunc")
      }
      return
    case "min":
    case "max": {
      if (vt === "f32" || vt === "f64") {
        a()
        b()
        fb.op(`${vt}.${e.op}`)
        return
      }
      a()
      const x = fb.stash(vt)
      b()
      const y = fb.stash(vt)
      fb.op("local.get", x)
      fb.op("local.get", y)
      fb.op("local.get", x)
      fb.op("local.get", y)
      fb.op(`${vt}.${e.op === "min" ? "lt" : "gt"}_${unsigned ? "u" : "s"}`)
      fb.op("select")
      fb.release(vt, x)
      fb.release(vt, y)
      return
    }
    case "floordiv":
    case "floormod": {
      const div = e.op === "floordiv"
      if (vt === "f32" || vt === "f64" || unsigned) {
        if (vt === "i32") {
          // unsigned: floor is truncation
          a()
          b()
          fb.op(div ? "i32.div_u" : "i32.rem_u")
          return
        }
        if (vt !== "f32" && vt !== "f64") return fb.fail(`${e.op} of ${dt} has no wasm lowering`)
        // floats: floor(a / b), a - floor(a / b) * b
        a()
        const x = fb.stash(vt)
        b()
        const y = fb.stash(vt)
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
        const x = fb.stash("i32")
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
  fb.fail(`binary op '${e.op}' has no wasm lowering`)
}

/** Pushes the value of `e` in the value class of `e.dtype` (comparisons and logic give an i32 bool). */
export const emitBin = (fb: FnBuilder, e: Expr & { kind: "bin" }, push: Push): void => {
  emitBinOp(fb, e, push)
  if (CMP[e.op] === undefined && e.op !== "and" && e.op !== "or") emitConvert(fb, e.a.dtype, e.dtype)
}
