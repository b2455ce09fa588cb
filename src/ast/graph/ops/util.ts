// Shared pieces of op definitions: common type relations and arity shorthands.
import type { DType } from "../dtype.js"
import { check, fail, type Dim, type InferCtx, type ValueType } from "../op.js"
import type { Tensor } from "../tensor.js"

export const arity = {
  one: [1, 1] as const,
  two: [2, 2] as const,
  three: [3, 3] as const,
  variadic: [1, Infinity] as const,
  range: (min: number, max: number) => [min, max] as const,
}

/** The type of input `k` (which must be present). */
export const inputType = <A>(ctx: InferCtx<A>, k: number): ValueType => {
  const t = ctx.inputs[k]
  if (!t) return fail(`input ${k} is required`)
  return t
}

/** Output 0 has the type of input k. */
export const inferSame =
  (k = 0) =>
  <A>(ctx: InferCtx<A>): readonly ValueType[] => [inputType(ctx, k)]

/** Multidirectional (NumPy) broadcasting of dims, symbolic dims included. */
export const broadcastDims = (a: readonly Dim[], b: readonly Dim[]): Dim[] => {
  const n = Math.max(a.length, b.length)
  const out: Dim[] = []
  for (let i = 0; i < n; i++) {
    const da = i < n - a.length ? 1 : a[i - (n - a.length)]
    const db = i < n - b.length ? 1 : b[i - (n - b.length)]
    if (da === db || db === 1) out.push(da)
    else if (da === 1) out.push(db)
    else if (typeof da === "string") out.push(typeof db === "number" ? db : da)
    else if (typeof db === "string") out.push(da)
    else fail(`shapes [${a.join(", ")}] and [${b.join(", ")}] do not broadcast`)
  }
  return out
}

/** Output 0: all present inputs broadcast; dtype from input 0 unless given. */
export const inferBroadcast =
  (dtype?: DType) =>
  <A>(ctx: InferCtx<A>): readonly ValueType[] => {
    const present = ctx.inputs.filter((t): t is ValueType => t !== undefined)
    check(present.length > 0, "needs at least one input")
    const shape = present.map((t) => t.shape).reduce((a, b) => broadcastDims(a, b))
    return [{ dtype: dtype ?? present[0].dtype, shape }]
  }

/** Input k as a tensor (must be present). */
export const req = (inputs: readonly (Tensor | undefined)[], k: number, what = `input ${k}`): Tensor => {
  const t = inputs[k]
  if (!t) return fail(`${what} is required`)
  return t
}
