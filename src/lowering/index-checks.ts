// Indices that come from data (issue 19). A compiled kernel reads `data[index]` with the index
// taken from a tensor, unchecked; the reference kernel refuses an index out of range. So the
// executor checks every such index before the kernel runs, with the reference kernel's rule and
// message (a NodeError naming the node, the input and the value), and lowering keeps every index
// input a kernel argument (a group that computes one inside itself runs through the reference
// kernels, where it is checked), so no compiled kernel reads outside its buffers for any input.
import type { Graph, Node } from "../ast/graph/graph.js"
import { resolveNode } from "../ast/graph/evaluate.js"

/** One index input of a node: the value, and why an index in it is refused (undefined: fine). */
export interface IndexCheck {
  readonly node: string
  readonly op: string
  readonly input: string
  /** Why `data[i]` (the index at flat position `i`) is refused, as the reference kernel says it; undefined when it is in range. */
  readonly refuse: (v: number, i: number) => string | undefined
}

/** A negative index wraps once (as the reference's wrapIndex), then must lie in [0, bound). */
const wrapped = (what: string, bound: number) => (v: number): string | undefined => {
  const j = v < 0 ? v + bound : v
  return j >= 0 && j < bound ? undefined : `${what} ${v} out of range [-${bound}, ${bound - 1}]`
}

const normAxis = (a: number, rank: number) => (a < 0 ? a + rank : a)

type Shape = readonly number[]

type IndexRule = { readonly input: number; readonly rule: (attrs: Record<string, unknown>, shapes: (Shape | undefined)[]) => ((v: number, i: number) => string | undefined) | undefined }

/** Indices (input 1) along the data's `axis` attribute (Gather, GatherElements: the same rule). */
const alongAxis: IndexRule = {
  input: 1,
  rule: (a, [data]) => {
    if (!data) return undefined
    const axis = normAxis(Number(a.axis ?? 0), data.length)
    const f = wrapped(`index on axis ${axis}:`, data[axis])
    return (v) => f(v)
  },
}

/** For each op that indexes by data: its index input and the rule, from the node's attrs and its inputs' static shapes. */
const RULES: { readonly [op: string]: IndexRule } = {
  Gather: alongAxis,
  GatherElements: alongAxis,
  GatherND: {
    input: 1,
    rule: (a, [data, ind]) => {
      if (!data || !ind) return undefined
      const b = Number(a.batch_dims ?? 0)
      const m = ind[ind.length - 1]
      const fs = Array.from({ length: m }, (_, j) => wrapped(`index on axis ${b + j}:`, data[b + j]))
      return (v, i) => fs[i % m](v)
    },
  },
  NegativeLogLikelihoodLoss: { input: 1, rule: (a, [x]) => classTarget(a, x) },
  SoftmaxCrossEntropyLoss: { input: 1, rule: (a, [x]) => classTarget(a, x) },
  RotaryEmbedding: {
    input: 3,
    rule: (_a, [, cos]) => {
      if (!cos) return undefined
      const max = cos[0]
      return (p) => (p >= 0 && p < max ? undefined : `position id ${p} is outside the cache's ${max} positions`)
    },
  },
}

/** A loss's target: a class in [0, C), or ignore_index. */
const classTarget = (a: Record<string, unknown>, x: Shape | undefined) => {
  if (!x) return undefined
  const C = x[1]
  const ignore = a.ignore_index as number | undefined
  return (k: number) => (k === ignore || (k >= 0 && k < C) ? undefined : `target ${k} is not a class index in [0, ${C})`)
}

/** Ops whose compute reads a tensor at an index taken from data. */
export const DATA_INDEXED_OPS: ReadonlySet<string> = new Set(Object.keys(RULES))

/** The index input of a node that indexes by data ("" when absent), or undefined for any other node. */
export const indexInputOf = (n: Node): string | undefined => {
  const r = RULES[n.op]
  return r === undefined ? undefined : (n.inputs[r.input] ?? "")
}

/** The checks of a node's data-given indices (none for an op that does not index by data, or an absent index input). */
export const indexChecks = (graph: Graph, n: Node): IndexCheck[] => {
  const r = RULES[n.op]
  const input = n.inputs[r?.input ?? -1]
  if (r === undefined || input === undefined || input === "") return []
  const shapeOf = (v: string): Shape | undefined => {
    const t = graph.valueTypes.get(v) ?? graph.inputs.find((i) => i.name === v)?.type ?? graph.initializers.get(v)
    return t && t.shape.every((d) => typeof d === "number") ? (t.shape as number[]) : undefined
  }
  const { attrs } = resolveNode(n)
  const refuse = r.rule(attrs as Record<string, unknown>, n.inputs.map((v) => (v === "" ? undefined : shapeOf(v))))
  if (refuse === undefined) throw new Error(`${n.op} '${n.name}': the shapes its index check needs are not static`)
  // a constant index checked here once: in range, nothing is left to check at run time (ViT's
  // class-token Gather by the constant 0 had kept it off the cuda target, whose runner checks none)
  const constant = graph.initializers.get(input)
  if (constant && Array.from(constant.data, (x, i) => refuse(Number(x), i)).every((why) => why === undefined)) return []
  return [{ node: n.name, op: n.op, input, refuse }]
}
