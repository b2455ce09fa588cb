// rewrite.EliminateDeadCode: drops nodes none of whose outputs reach a graph output, and
// initializers nothing reads.
import { subgraphFreeNames } from "../ast/graph/evaluate.js"
import type { Graph, Node } from "../ast/graph/graph.js"
import { graphPass } from "./pass.js"

export const eliminateDeadCodeSync = (g: Graph): Graph => {
  // "" (an omitted input or output) never becomes live: reads of "" are not added
  const live = new Set(g.outputs.map((o) => o.name))
  const kept: Node[] = [] // in reverse
  for (let k = g.nodes.length - 1; k >= 0; k--) {
    const n = g.nodes[k]
    if (!n.outputs.some((o) => live.has(o))) continue
    kept.push(n)
    for (const i of n.inputs) if (i !== "") live.add(i)
    for (const a of Object.values(n.attrs)) if (a.kind === "graph") for (const f of subgraphFreeNames(a.value)) live.add(f)
  }
  const initializers = new Map([...g.initializers].filter(([k]) => live.has(k)))
  if (kept.length === g.nodes.length && initializers.size === g.initializers.size) return g
  return { ...g, nodes: kept.reverse(), initializers }
}

export const eliminateDeadCode = graphPass("rewrite.EliminateDeadCode", 0, eliminateDeadCodeSync)
