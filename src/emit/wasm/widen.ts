// An 8- or 16-bit integer read widened to int32 in a vectorized loop (`int32(x[i])`, x int16 /
// uint16 / int8 / uint8, unit-stride in the loop variable): its 4 lanes read by one widening load,
// each lane the scalar load's value — sign-extended from a signed dtype, zero-extended from an
// unsigned one, as the scalar i32.load16_s / load16_u / load8_s / load8_u the cast compiles to:
// - 16-bit: v128.load16x4_s / _u (4 × 2 bytes, each extended to an i32 lane);
// - 8-bit: v128.load32_splat (the 4 bytes, nothing read past them), then i16x8.extend_low_i8x16 and
//   i32x4.extend_low_i16x8 (lanes 0–3 the 4 bytes extended), both _s or both _u.
// The quantized depthwise conv's product (int16 input times int16 weight, summed in int32) reads so.
import type { DType } from "../../ast/graph/dtype.js"
import type { Expr } from "../../ast/te/expr.js"
import { STORAGE, type FnBuilder } from "./builder.js"
import type { Op } from "./encoder.js"
import { emitAddress, type Scope } from "./expr.js"
import { coef } from "../../ast/te/linear-index.js"

/** The load, then the extensions that make its low 4 lanes int32 lanes. */
const WIDEN: Partial<Record<DType, { readonly load: Op; readonly extend: readonly Op[] }>> = {
  int16: { load: "v128.load16x4_s", extend: [] },
  uint16: { load: "v128.load16x4_u", extend: [] },
  int8: { load: "v128.load32_splat", extend: ["i16x8.extend_low_i8x16_s", "i32x4.extend_low_i16x8_s"] },
  uint8: { load: "v128.load32_splat", extend: ["i16x8.extend_low_i8x16_u", "i32x4.extend_low_i16x8_u"] },
}

export type WidenedRead = Expr & { readonly kind: "read" }

/** The read `e` widens when `e` is `int32(read)` of an 8- or 16-bit integer buffer, one index, unit-stride in `loopVar`; else undefined. */
export const widenedRead = (e: Expr, loopVar: string): WidenedRead | undefined => {
  if (e.kind !== "cast" || e.dtype !== "int32") return undefined
  const r = e.value
  if (r.kind !== "read" || WIDEN[r.dtype] === undefined || r.indices.length !== 1 || coef(r.indices[0], loopVar) !== 1) return undefined
  return r
}

/** Pushes the i32x4 of `r`'s 4 elements from flat index `idx` (the loop variable already substituted, or bound). */
export const emitWidenedLoad = (fb: FnBuilder, sc: Scope, r: WidenedRead, idx: Expr): void => {
  const w = WIDEN[r.dtype]
  if (!w) return fb.fail(`a widened vector read of ${r.dtype}`)
  const { offset, info } = emitAddress(fb, sc, r.source, idx, 4)
  if (info.dtype !== r.dtype) return fb.fail(`a widened read of '${r.source}' as ${r.dtype} from a ${info.dtype} buffer`)
  fb.op(w.load, STORAGE[r.dtype].align, offset)
  for (const op of w.extend) fb.op(op)
}
