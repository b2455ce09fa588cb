// Tensor expressions: placeholders and computes defined by index lambdas, reductions over
// reduce axes with sum/max/min or a custom commutative combiner (with its identity).
import { Data } from "effect"
import type { DType } from "../graph/dtype.js"
import { bin, c, collect, max as emax, min as emin, showExpr, v, type Combiner, type ComputeTag, type ComputeTensor, type Expr, type IterVar, type Placeholder, type Read, type TeTensor, type Var } from "./expr.js"

// The tensor types live with the expressions that read them (a Read holds its TeTensor, a compute
// holds its body), so the two modules import one way; they are exported from here as before.
export { COMPUTE_TAGS } from "./expr.js"
export type { ComputeTag, ComputeTensor, Placeholder, TeTensor } from "./expr.js"

/**
 * A compute built wrong by whoever called the builders (a tensor read with the wrong number of
 * indices, a reduce axis named like a data axis): the op's compute does not fit the shapes it was
 * given. Lowering runs such a group through its reference kernels, with this as the reason.
 */
export class IllFormedComputeError extends Data.TaggedError("IllFormedComputeError")<{
  /** The tensor read, or the compute built. */
  readonly tensor: string
  readonly reason: string
}> {
  override get message(): string {
    return `ill-formed compute: '${this.tensor}' ${this.reason}`
  }
}

export const placeholder = (name: string, shape: readonly number[], dtype: DType = "float32"): Placeholder => ({ kind: "placeholder", name, shape, dtype })

/** `t[i, j, …]` inside a compute body. */
export const at = (t: TeTensor, ...indices: Expr[]): Read => {
  if (indices.length !== t.shape.length) throw new IllFormedComputeError({ tensor: t.name, reason: `has rank ${t.shape.length}, read with ${indices.length} indices` })
  return { kind: "read", source: t.name, indices, dtype: t.dtype, tensor: t }
}

const AXIS_NAMES = ["i", "j", "k", "l", "m", "n", "o", "p"]

/**
 * compute(name, shape, (i, j, …) => expr, dtype?, tag?): a tensor defined elementwise by an index
 * lambda; `tag` says what it is where a schedule cares (see ComputeTag).
 */
export const compute = (name: string, shape: readonly number[], fn: (...idx: Var[]) => Expr, dtype?: DType, tag?: ComputeTag): ComputeTensor => {
  const axes: IterVar[] = shape.map((extent, k) => ({ var: v(`${name}.${AXIS_NAMES[k] ?? `ax${k}`}`), dom: { min: 0, extent }, type: "data" }))
  const body = fn(...axes.map((a) => a.var))
  if (body.kind === "reduce")
    for (const r of body.axes)
      if (axes.some((a) => a.var.name === r.var.name)) throw new IllFormedComputeError({ tensor: name, reason: `has a reduce axis '${r.var.name}' named like one of its data axes` })
  const inputs: TeTensor[] = []
  for (const r of collect(body, (e) => e.kind === "read")) {
    const t = (r as Read).tensor
    if (t && !inputs.includes(t)) inputs.push(t)
  }
  return { kind: "compute", name, shape: [...shape], dtype: dtype ?? body.dtype, axes, body, inputs, ...(tag ? { tag } : {}) }
}

/** A reduction axis over [min, min + extent). */
export const reduceAxis = (extent: number, name: string, min = 0): IterVar => ({ var: v(name), dom: { min, extent }, type: "reduce" })

/** A commutative reducer from a combine function and its identity. */
export const commReducer = (name: string, combine: (a: Expr, b: Expr) => Expr, identity: (dtype: DType) => number): Combiner => {
  const lhs = v(`${name}.lhs`, "float64")
  const rhs = v(`${name}.rhs`, "float64")
  return { name, lhs, rhs, result: combine(lhs, rhs), identity }
}

export const SUM = commReducer("sum", (a, b) => bin("add", a, b), () => 0)
/** The smallest and largest values of a dtype (what max/min reductions start from). */
export const dtypeRange = (d: DType): [number, number] => {
  switch (d) {
    case "int8":
      return [-128, 127]
    case "uint8":
    case "bool":
      return [0, d === "bool" ? 1 : 255]
    case "int16":
      return [-32768, 32767]
    case "uint16":
      return [0, 65535]
    case "int32":
      return [-(2 ** 31), 2 ** 31 - 1]
    case "uint32":
      return [0, 2 ** 32 - 1]
    case "int64":
      return [-(2 ** 63), 2 ** 63]
    case "uint64":
      return [0, 2 ** 64]
    default:
      return [-Infinity, Infinity]
  }
}

export const MAX = commReducer("max", (a, b) => emax(a, b), (d) => dtypeRange(d)[0])
export const MIN = commReducer("min", (a, b) => emin(a, b), (d) => dtypeRange(d)[1])

const reducer =
  (combiner: Combiner) =>
  (source: Expr, axes: readonly IterVar[], where?: Expr): Expr => ({ kind: "reduce", combiner, source, axes, ...(where ? { where } : {}), dtype: source.dtype })

export const sum = reducer(SUM)
export const maxReduce = reducer(MAX)
export const minReduce = reducer(MIN)
export const reduceWith = (combiner: Combiner) => reducer(combiner)

/** Every tensor `t` depends on (itself included), producers before consumers. */
export const postOrder = (roots: readonly TeTensor[]): TeTensor[] => {
  const out: TeTensor[] = []
  const seen = new Set<TeTensor>()
  const visit = (t: TeTensor) => {
    if (seen.has(t)) return
    seen.add(t)
    if (t.kind === "compute") t.inputs.forEach(visit)
    out.push(t)
  }
  roots.forEach(visit)
  return out
}


/** A readable listing of a TE program: placeholders, then each compute with its index lambda. */
export const printTE = (outputs: readonly TeTensor[]): string =>
  postOrder(outputs)
    .map((t) =>
      t.kind === "placeholder"
        ? `placeholder ${t.name}: ${t.dtype}[${t.shape.join(", ")}]`
        : `compute ${t.name}: ${t.dtype}[${t.shape.join(", ")}] = (${t.axes.map((a) => a.var.name).join(", ")}) => ${showExpr(t.body)}`,
    )
    .join("\n")
