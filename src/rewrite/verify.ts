// The graph IR's well-formedness, checked between passes: values defined once and before use,
// outputs produced, every node a known op with valid attributes and arity.
import { resolveNode } from "../ast/graph/evaluate.js"
import type { Graph } from "../ast/graph/graph.js"
import type { VerifyProblem } from "../ast/verify-problem.js"

export type { VerifyProblem }

export const verifyGraph = (g: Graph): VerifyProblem | undefined => {
  const defined = new Set<string>()
  for (const i of g.inputs) {
    if (defined.has(i.name)) return { where: `input '${i.name}'`, reason: "defined twice" }
    defined.add(i.name)
  }
  for (const k of g.initializers.keys()) {
    if (defined.has(k)) return { where: `initializer '${k}'`, reason: "also defined as an input" }
    defined.add(k)
  }
  const names = new Set<string>()
  for (const n of g.nodes) {
    if (names.has(n.name)) return { where: `node '${n.name}'`, reason: "node name used twice" }
    names.add(n.name)
    try {
      resolveNode(n)
    } catch (e) {
      return { where: `node '${n.name}' (${n.op})`, reason: e instanceof Error ? e.message : String(e) }
    }
    for (const i of n.inputs)
      if (i !== "" && !defined.has(i)) return { where: `node '${n.name}' (${n.op})`, reason: `input '${i}' is used before it is defined` }
    for (const o of n.outputs) {
      if (o === "") continue
      if (defined.has(o)) return { where: `node '${n.name}' (${n.op})`, reason: `value '${o}' is defined twice` }
      defined.add(o)
    }
  }
  for (const o of g.outputs) if (!defined.has(o.name)) return { where: `output '${o.name}'`, reason: "is never produced" }
  return undefined
}
