// SIMD128 for a vectorized copy of narrow or wide elements: a loop whose body is one store of a
// read of another buffer of the store's dtype, both unit-stride in the loop variable — an int8
// conv's int16 padded-input copies — moves 16 bytes a step (v128.load, v128.store: 8 int16, 16
// int8 / bool, 2 float64 elements), the same bytes the scalar loads and stores move. (int32 and
// float32 copies are vector.ts's, 4 lanes a step.) The loop's min is a constant: the steps are
// unrolled; the remainder of the extent runs as scalar code (stmt.ts).
import { c, substitute } from "../../ast/te/expr.js"
import { simplify } from "../../ast/te/simplify.js"
import type { Stmt } from "../../ast/tir/tir.js"
import { STORAGE, type FnBuilder } from "./builder.js"
import { emitAddress, invalidate, type Scope } from "./expr.js"
import { coef } from "../../ast/te/linear-index.js"

type VStore = Stmt & { kind: "store" }

export interface CopyPlan {
  readonly store: VStore
  /** Elements a v128 holds. */
  readonly lanes: number
}

/** The plan for a vectorized loop over `loopVar` whose body is `body`, when it is such a copy; else undefined (the caller checks both buffers hold the read's dtype). */
export const copyPlan = (body: Stmt, loopVar: string): CopyPlan | undefined => {
  if (body.kind !== "store" || body.indices.length !== 1 || coef(body.indices[0], loopVar) !== 1) return undefined
  const v = body.value
  if (v.kind !== "read" || v.source === body.buffer || v.indices.length !== 1 || coef(v.indices[0], loopVar) !== 1) return undefined
  const bytes = STORAGE[v.dtype].bytes
  return 16 % bytes === 0 ? { store: body, lanes: 16 / bytes } : undefined
}

/** Emits the 16-byte steps of a planned copy from the constant `min`, `count` elements (a multiple of the plan's lanes). */
export const emitCopyLoop = (fb: FnBuilder, sc: Scope, plan: CopyPlan, loopVar: string, min: number, count: number): void => {
  const st = plan.store
  const src = st.value as VStore["value"] & { kind: "read" }
  for (const name of [st.buffer, src.source]) {
    const info = sc.bufs.get(name)
    if (!info || info.dtype !== src.dtype) return fb.fail(`a vectorized copy of ${src.dtype} through '${name}' of ${info?.dtype ?? "an unknown buffer"}`)
  }
  const block: Scope = sc.addrCache ? sc : { ...sc, addrCache: new Map() }
  const align = Math.min(4, STORAGE[src.dtype].align)
  for (let k = 0; k < count; k += plan.lanes) {
    const env = new Map([[loopVar, c(min + k)]])
    const at = (x: (typeof st.indices)[number]) => simplify(substitute(x, env), sc.bounds, sc.simplified)
    const to = emitAddress(fb, block, st.buffer, at(st.indices[0]), plan.lanes)
    const from = emitAddress(fb, block, src.source, at(src.indices[0]), plan.lanes)
    fb.op("v128.load", align, from.offset)
    fb.op("v128.store", align, to.offset)
    invalidate(block, [st.buffer])
  }
}
