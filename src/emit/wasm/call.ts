// Math intrinsics of the `wasm` target: those with an opcode (sqrt, floor, ceil, nearest, abs,
// neg) inline in the value class; the rest (exp, log, tanh, erf, pow, sigmoid, sin, cos) call a JS
// import in f64; integer arguments go through f64 where the op has no integer form.
import type { Expr, Intrinsic } from "../../ast/te/expr.js"
import { VCLASS, type FnBuilder, type MathImport } from "./builder.js"
import type { Push } from "./binary.js"
import { emitConst, emitConvert } from "./convert.js"

const MATH: Partial<Record<Intrinsic, MathImport>> = { exp: "exp", log: "log", tanh: "tanh", erf: "erf", pow: "pow", sigmoid: "sigmoid", sin: "sin", cos: "cos" }

/** Pushes the value of a math intrinsic call in the value class of `e.dtype`. */
export const emitCall = (fb: FnBuilder, e: Expr & { kind: "call" }, push: Push): void => {
  const dt = e.dtype
  const vt = VCLASS[dt]
  const arg0 = e.args[0]
  const imp = MATH[e.fn]
  if (imp) {
    for (const a of e.args) push(a, "float64")
    fb.call(imp)
    emitConvert(fb, "float64", dt)
    return
  }
  if (e.fn === "fma") {
    // (x·y + z in f64, rounded once to f32: the fused result where the sum is exact in f64, as the intrinsic's uses show)
    for (const [k, a] of e.args.entries()) {
      push(a, "float64")
      if (k === 1) fb.op("f64.mul")
      if (k === 2) fb.op("f64.add")
    }
    emitConvert(fb, "float64", dt)
    return
  }
  if (e.fn === "not") {
    push(arg0, "bool")
    fb.op("i32.eqz")
    return
  }
  if (vt === "i32" || vt === "i64") {
    switch (e.fn) {
      case "floor":
      case "ceil":
      case "round":
        push(arg0, dt)
        return
      case "neg":
        emitConst(fb, 0, vt)
        push(arg0, dt)
        fb.op(`${vt}.sub`)
        return
      case "fabs": {
        push(arg0, dt)
        if (dt === "uint64") return
        const x = fb.stash(vt)
        emitConst(fb, 0, vt)
        fb.op("local.get", x)
        fb.op(`${vt}.sub`)
        fb.op("local.get", x)
        fb.op("local.get", x)
        emitConst(fb, 0, vt)
        fb.op(`${vt}.lt_s`)
        fb.op("select")
        fb.release(vt, x)
        return
      }
      default:
        // sqrt / rsqrt of an integer: in f64, truncated back
        emitCall(fb, { ...e, args: e.args.map((a) => ({ kind: "cast", value: a, dtype: "float64" }) as Expr), dtype: "float64" }, push)
        emitConvert(fb, "float64", dt)
        return
    }
  }
  const f: "f32" | "f64" = vt
  switch (e.fn) {
    case "rsqrt":
      emitConst(fb, 1, f)
      push(arg0, dt)
      fb.op(`${f}.sqrt`)
      fb.op(`${f}.div`)
      return
    case "sqrt":
    case "floor":
    case "ceil":
    case "neg":
      push(arg0, dt)
      fb.op(`${f}.${e.fn}`)
      return
    case "fabs":
      push(arg0, dt)
      fb.op(`${f}.abs`)
      return
    case "round":
      push(arg0, dt)
      fb.op(`${f}.nearest`) // ties to even, as the evaluator's round
      return
  }
  fb.fail(`intrinsic '${e.fn}' has no wasm lowering`)
}
