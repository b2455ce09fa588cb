// The rule engine for local rewrites. A rule is a named function from a node (with a read-only
// view of the graph around it) to a replacement, or undefined when it does not apply. Rule sets
// are arrays and compose by concatenation. `rewriteToFixedPoint` sweeps the graph, re-infers types
// after each sweep, and stops when nothing fires (Saturated) or at its limit (IterationLimit).
import type { Graph, Node } from "../ast/graph/graph.js"
import { bindMemo, bindSync, type BindMemo } from "../ast/graph/infer.js"
import { subgraphFreeNames } from "../ast/graph/evaluate.js"
import type { ValueType } from "../ast/graph/op.js"
import type { Tensor } from "../ast/graph/tensor.js"

export interface RuleCtx {
  /** The node that defines a value, if a node does. */
  readonly producer: (value: string) => Node | undefined
  /** The nodes that read a value. */
  readonly consumers: (value: string) => readonly Node[]
  /** The value of an initializer. */
  readonly constant: (value: string) => Tensor | undefined
  /** The inferred type of a value. */
  readonly type: (value: string) => ValueType | undefined
  /** Is the value a graph output (its name must survive)? */
  readonly isOutput: (value: string) => boolean
  /** A fresh value/node name based on `base`. */
  readonly fresh: (base: string) => string
  readonly opset: number
}

export interface Replacement {
  /** Nodes inserted where the matched node was (in order). */
  readonly nodes: readonly Node[]
  /** For each output of the matched node, the value that now holds it. */
  readonly outputs: readonly string[]
  /** New initializers the replacement needs. */
  readonly constants?: ReadonlyMap<string, Tensor>
}

export interface Rule {
  /** kebab-case; shows in traces and tests. */
  readonly name: string
  readonly apply: (node: Node, ctx: RuleCtx) => Replacement | undefined
}

export type RuleSet = readonly Rule[]

export type StopReason = "Saturated" | "IterationLimit"

export interface RewriteReport {
  readonly graph: Graph
  readonly stop: StopReason
  readonly iterations: number
  /** How often each rule fired. */
  readonly fired: ReadonlyMap<string, number>
}

const makeCtx = (g: Graph, fresh: (base: string) => string): RuleCtx => {
  const producers = new Map<string, Node>()
  const cons = new Map<string, Node[]>()
  for (const n of g.nodes) {
    for (const o of n.outputs) if (o !== "") producers.set(o, n)
    for (const i of n.inputs) {
      if (i === "") continue
      // (appended in place: copying the list on every insert is quadratic in a value's readers)
      const l = cons.get(i)
      if (l) l.push(n)
      else cons.set(i, [n])
    }
  }
  // graph outputs and names subgraphs read keep their identity (renames do not reach inside subgraphs)
  const outputs = new Set(g.outputs.map((o) => o.name))
  for (const n of g.nodes) for (const a of Object.values(n.attrs)) if (a.kind === "graph") for (const f of subgraphFreeNames(a.value)) outputs.add(f)
  return {
    producer: (v) => producers.get(v),
    consumers: (v) => cons.get(v) ?? [],
    constant: (v) => g.initializers.get(v),
    type: (v) => g.valueTypes.get(v) ?? g.initializers.get(v),
    isOutput: (v) => outputs.has(v),
    fresh,
    opset: g.opset,
  }
}

/** A name generator that avoids every name in the graph (subgraphs included). */
export const freshNames = (g: Graph): ((base: string) => string) => {
  const used = new Set<string>()
  const visit = (h: Graph) => {
    for (const i of h.inputs) used.add(i.name)
    for (const k of h.initializers.keys()) used.add(k)
    for (const n of h.nodes) {
      used.add(n.name)
      for (const o of n.outputs) used.add(o)
      for (const a of Object.values(n.attrs)) if (a.kind === "graph") visit(a.value)
    }
  }
  visit(g)
  let k = 0
  return (base) => {
    let name = base
    while (used.has(name)) name = `${base}_${++k}`
    used.add(name)
    return name
  }
}

/** One sweep: every node is offered to the rules once, in order; renamings flow downstream. */
const sweep = (g: Graph, rules: RuleSet, fresh: (b: string) => string, fired: Map<string, number>): Graph | undefined => {
  const ctx = makeCtx(g, fresh)
  const rename = new Map<string, string>()
  const sub = (v: string) => rename.get(v) ?? v
  const nodes: Node[] = []
  const constants = new Map(g.initializers)
  let changed = false
  for (const n0 of g.nodes) {
    const n = n0.inputs.some((i) => rename.has(i)) ? { ...n0, inputs: n0.inputs.map(sub) } : n0
    let rep: Replacement | undefined
    let ruleName = ""
    for (const r of rules) {
      rep = r.apply(n, ctx)
      if (rep) {
        ruleName = r.name
        break
      }
    }
    if (!rep) {
      nodes.push(n)
      continue
    }
    changed = true
    fired.set(ruleName, (fired.get(ruleName) ?? 0) + 1)
    for (const [k, t] of rep.constants ?? []) constants.set(k, t)
    // rules read the graph as it was before this sweep: names they return go through this sweep's renames
    nodes.push(...rep.nodes.map((m) => (m.inputs.some((i) => rename.has(i)) ? { ...m, inputs: m.inputs.map(sub) } : m)))
    n.outputs.forEach((o, j) => {
      const to = rep.outputs[j] === undefined ? undefined : sub(rep.outputs[j])
      if (o === "" || to === undefined || to === o) return
      if (ctx.isOutput(o)) nodes.push({ name: fresh(`${o}_keep`), op: "Identity", domain: "", inputs: [to], outputs: [o], attrs: {} })
      else rename.set(o, to)
    })
  }
  if (!changed) return undefined
  return { ...g, nodes, initializers: constants }
}

/**
 * Applies `rules` until nothing fires or `maxIterations` sweeps have run. The graph is bound before
 * the first sweep and after each, through `memo` (a node a sweep kept is not inferred again): the
 * caller's where it binds the same graph before or after (one pass's binds), else this call's.
 */
export const rewriteToFixedPoint = (graph: Graph, rules: RuleSet, maxIterations = 16, memo: BindMemo = bindMemo()): RewriteReport => {
  const fired = new Map<string, number>()
  const fresh = freshNames(graph)
  let g = bindSync(graph, undefined, { memo })
  for (let it = 1; it <= maxIterations; it++) {
    const next = sweep(g, rules, fresh, fired)
    if (!next) return { graph: g, stop: "Saturated", iterations: it, fired }
    g = bindSync(next, undefined, { memo })
  }
  return { graph: g, stop: "IterationLimit", iterations: maxIterations, fired }
}
