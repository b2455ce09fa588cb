// rewrite.EliminateDeadCode: drops nodes none of whose outputs reach a graph output, and
// initializers nothing reads.
import { subgraphFreeNames } from "../ast/graph/evaluate.js"
import type { Graph } from "../ast/graph/graph.js"
import { graphPass } from "./pass.js"

export const eliminateDeadCodeSync = (g: Graph): Graph => {
  const live = new Set(g.outputs.map((o) => o.name))
  const keep: boolean[] = new Array(g.nodes.length).fill(false)
  for (let k = g.nodes.length - 1; k >= 0; k--) {
    const n = g.nodes[k]
    if (!n.outputs.some((o) => o !== "" && live.has(o))) continue
    keep[k] = true
    for (const i of n.inputs) if (i !== "") live.add(i)
    for (const a of Object.values(n.attrs)) if (a.kind === "graph") for (const f of subgraphFreeNames(a.value)) live.add(f)
  }
  const nodes = g.nodes.filter((_, k) => keep[k])
  const initializers = new Map([...g.initializers].filter(([k]) => live.has(k)))
  if (nodes.length === g.nodes.length && initializers.size === g.initializers.size) return g
  return { ...g, nodes, initializers }
}

export const eliminateDeadCode = graphPass("rewrite.EliminateDeadCode", 0, eliminateDeadCodeSync)
