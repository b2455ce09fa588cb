// Shared pieces of the control-flow ops: the types a subgraph declares for its outputs, merging
// the types of values that may come from either of two places, and slicing / stacking tensors
// along an axis (Loop and Scan outputs).
import { allocate } from "../dtype.js"
import type { Graph, ValueInfo } from "../graph.js"
import { check, fail, unsupported, type Dim, type ValueType } from "../op.js"
import { sizeOf, tensor, type Tensor } from "../tensor.js"

/** A subgraph value's declared type, or undefined when its rank is unknown (the decoder marks that dim `?rank`). */
export const declaredType = (v: ValueInfo): ValueType | undefined =>
  v.type.shape.length === 1 && typeof v.type.shape[0] === "string" && v.type.shape[0].endsWith("?rank") ? undefined : v.type

/**
 * A subgraph's output types from its input types, in the node's scope (outer values included).
 * The binder may offer this as `inferSubgraph` on the type relation's context; where it does
 * not, only the types the subgraph declares are known.
 */
export type SubgraphInfer = (graph: Graph, inputs: readonly ValueType[]) => readonly (ValueType | undefined)[]

/** The output types of `g` given its input types: declared ones, the rest inferred when the context can. */
export const subgraphOutputTypes = (ctx: object, g: Graph, inputs: readonly ValueType[]): (ValueType | undefined)[] => {
  const declared = g.outputs.map(declaredType)
  const hook = "inferSubgraph" in ctx ? (ctx as { inferSubgraph?: SubgraphInfer }).inferSubgraph : undefined
  if (!hook || declared.every((t) => t !== undefined)) return declared
  const inferred = hook(g, inputs)
  return declared.map((t, k) => t ?? inferred[k])
}

/** Dims renamed to `${prefix}.d${i}` where symbolic (a subgraph's dim names mean nothing outside it). */
export const ownDims = (shape: readonly Dim[], prefix: string): Dim[] => shape.map((d, i) => (typeof d === "number" ? d : `${prefix}.d${i}`))

/**
 * The type of a value that is one of `a` or `b`: dims that agree stay, others become symbolic.
 * An undefined side (rank unknown) takes the other's rank.
 */
export const mergeTypes = (a: ValueType | undefined, b: ValueType | undefined, prefix: string, what: string): ValueType => {
  if (!a && !b) return unsupported(`${what} has no declared rank, so the output rank is unknown`)
  const x = a ?? b!
  const y = b ?? a!
  check(x.dtype === y.dtype, () => `${what} is ${x.dtype} on one path and ${y.dtype} on the other`)
  if (x.shape.length !== y.shape.length) return unsupported(`${what} has rank ${x.shape.length} on one path and ${y.shape.length} on the other`)
  const shape = x.shape.map((d, i) => (a && b && typeof d === "number" && d === y.shape[i] ? d : `${prefix}.d${i}`))
  return { dtype: x.dtype, shape }
}

/** The slice `t[..., index, ...]` at `axis` (rank drops by one). */
export const sliceAxis = (t: Tensor, axis: number, index: number): Tensor => {
  const shape = t.shape
  const n = shape[axis]
  const outer = sizeOf(shape.slice(0, axis))
  const inner = sizeOf(shape.slice(axis + 1))
  const out = allocate(t.dtype, outer * inner)
  for (let o = 0; o < outer; o++) {
    const src = (o * n + index) * inner
    for (let i = 0; i < inner; i++) out[o * inner + i] = t.data[src + i]
  }
  return tensor(t.dtype, [...shape.slice(0, axis), ...shape.slice(axis + 1)], out)
}

/**
 * Stacks equal-shaped tensors along a new `axis` (0..rank). With no parts, `empty` gives the
 * part type (which must be static) for a zero-length result.
 */
export const stackAxis = (parts: readonly Tensor[], axis: number, what: string, empty?: ValueType): Tensor => {
  if (parts.length === 0) {
    if (!empty) return unsupported(`${what} has no iterations and no declared type`)
    const shape = empty.shape.map((d) => (typeof d === "number" ? d : unsupported(`${what} has no iterations and its declared shape is not static`)))
    const full = [...shape.slice(0, axis), 0, ...shape.slice(axis)]
    return tensor(empty.dtype, full, allocate(empty.dtype, 0))
  }
  const first = parts[0]
  for (const [k, p] of parts.entries())
    check(
      p.dtype === first.dtype && p.shape.length === first.shape.length && p.shape.every((d, i) => d === first.shape[i]),
      () => `${what} is ${p.dtype}[${p.shape.join(", ")}] at iteration ${k} but ${first.dtype}[${first.shape.join(", ")}] at iteration 0`,
    )
  if (axis < 0 || axis > first.shape.length) return fail(`${what}: axis ${axis} out of range for rank ${first.shape.length + 1}`)
  const L = parts.length
  const outer = sizeOf(first.shape.slice(0, axis))
  const inner = sizeOf(first.shape.slice(axis))
  const out = allocate(first.dtype, L * outer * inner)
  parts.forEach((p, t) => {
    for (let o = 0; o < outer; o++) {
      const dst = (o * L + t) * inner
      for (let i = 0; i < inner; i++) out[dst + i] = p.data[o * inner + i]
    }
  })
  return tensor(first.dtype, [...first.shape.slice(0, axis), L, ...first.shape.slice(axis)], out)
}

/** The feeds of a subgraph: its declared inputs, in order, bound to `values`. */
export const feedsOf = (inputs: readonly ValueInfo[], values: readonly Tensor[], what: string): Map<string, Tensor> => {
  check(inputs.length === values.length, () => `${what} declares ${inputs.length} inputs, ${values.length} are given`)
  return new Map(inputs.map((v, k) => [v.name, values[k]] as const))
}
