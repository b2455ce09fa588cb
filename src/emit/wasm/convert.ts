// Constants and conversions of the `wasm` target: a value of one dtype's value class (i32, i64,
// f32, f64: builder.ts) converted as storing it in another dtype converts it (the evaluator's
// converter, ops/exact-int64.ts for int64 / uint64): integers wrap, floats truncate toward zero
// (to int64 / uint64 wrapping modulo 2^64, NaN and ±∞ giving 0: the helper f2i64), an i64 rounds
// once to a float, float16 / bfloat16 round through a math import, bool is x != 0.
import type { DType } from "../../ast/graph/dtype.js"
import { isIntDtype } from "../../ast/te/expr.js"
import type { Op } from "./encoder.js"
import { VCLASS, type FnBuilder, type VT } from "./builder.js"

const constOp = (vt: VT): Op => (vt === "i32" ? "i32.const" : vt === "i64" ? "i64.const" : vt === "f32" ? "f32.const" : "f64.const")

/** An i64 constant's immediate: truncated, NaN as 0 (the encoder takes ±2^63 and past as the type's bounds). */
const i64Imm = (value: number): number => (Number.isNaN(value) ? 0 : Math.trunc(value))

export const emitConst = (fb: FnBuilder, value: number, vt: VT): void =>
  fb.op(constOp(vt), vt === "i32" ? value | 0 : vt === "i64" ? i64Imm(value) : vt === "f32" ? Math.fround(value) : value)

/** A constant of `dtype` in its value class; a uint64 one past 2^63 as its bits read signed (2^64 and past: all ones, the type's bound; a negative one wrapped: the same bits). */
export const emitConstOf = (fb: FnBuilder, value: number, dtype: DType): void => {
  if (dtype === "uint64") {
    const t = i64Imm(value)
    return emitConst(fb, t >= 2 ** 64 ? -1 : t >= 2 ** 63 ? t - 2 ** 64 : t, "i64")
  }
  emitConst(fb, value, VCLASS[dtype])
}

/** Converts the value on the stack from dtype `from` to dtype `to` (the evaluator's converter). */
export const emitConvert = (fb: FnBuilder, from: DType, to: DType): void => {
  if (from === to) return
  const f = VCLASS[from]
  const t = VCLASS[to]
  const unsignedFrom = from === "uint32"
  if (to === "bool") {
    emitConst(fb, 0, f)
    fb.op(`${f}.ne`)
    return
  }
  if (t === "i64") {
    if (f === "i64") return // int64 ↔ uint64: the same bits
    if (f === "i32") fb.op(unsignedFrom ? "i64.extend_i32_u" : "i64.extend_i32_s")
    else {
      if (f === "f32") fb.op("f64.promote_f32")
      fb.call("f2i64")
    }
    return
  }
  if (t === "f32") {
    if (f === "i32") fb.op(unsignedFrom ? "f32.convert_i32_u" : "f32.convert_i32_s")
    else if (f === "i64") fb.op(from === "uint64" ? "f32.convert_i64_u" : "f32.convert_i64_s")
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
    else if (f === "i64") fb.op(from === "uint64" ? "f64.convert_i64_u" : "f64.convert_i64_s")
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
  if (f === "i64") fb.op("i32.wrap_i64")
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
