// rewrite.EliminateDeadCode against an independent liveness oracle (a fixed point over the node
// list, subgraph captures counted as reads) on cases with dead chains, unused constants, an If
// capturing outer names and omitted ("") inputs and outputs (cases.ts): it keeps exactly the
// live nodes, in order, and exactly the initializers something live reads; it returns its input
// itself when nothing is dead, so a second run is the identity.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { Graph } from "../../src/ast/graph/graph.js"
import { eliminateDeadCodeSync } from "../../src/rewrite/eliminate-dead-code.js"
import { assertAllClose, evalGraph, lawParams } from "../support.js"
import { arbDeadCodeCase, liveness } from "./cases.js"

const cases = arbDeadCodeCase()

describe("rewrite.EliminateDeadCode", () => {
  it("keeps exactly the live nodes (in order) and the initializers they read; evaluates as before", () => {
    let removed = 0
    let capturedOnly = 0
    fc.assert(
      fc.property(cases, ({ graph, inputs }) => {
        const after = eliminateDeadCodeSync(graph)
        const live = liveness(graph)
        expect(after.nodes).toEqual(graph.nodes.filter((n) => live.nodes.has(n)))
        expect([...after.initializers.keys()]).toEqual([...graph.initializers.keys()].filter((k) => live.values.has(k)))
        for (const [k, t] of after.initializers) expect(t).toBe(graph.initializers.get(k))
        expect({ inputs: after.inputs, outputs: after.outputs, opset: after.opset }).toEqual({ inputs: graph.inputs, outputs: graph.outputs, opset: graph.opset })
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs))
        removed += graph.nodes.length - after.nodes.length
        // a live value read only inside a subgraph (no node input names it)
        const inputsRead = new Set(after.nodes.flatMap((n) => n.inputs))
        capturedOnly += [...live.values].filter((v) => !inputsRead.has(v) && !graph.outputs.some((o) => o.name === v)).length
      }),
      lawParams(100),
    )
    // the cases do hold dead nodes, and values live only through a capture
    expect(removed).toBeGreaterThan(100)
    expect(capturedOnly).toBeGreaterThan(30)
  })

  it("gives back its input itself when nothing is dead: a second run is the identity", () => {
    fc.assert(
      fc.property(cases, ({ graph }) => {
        const once = eliminateDeadCodeSync(graph)
        expect(eliminateDeadCodeSync(once)).toBe(once)
      }),
      lawParams(60),
    )
  })

  it("a graph with dead nodes but no unused initializer, or the reverse, still changes", () => {
    fc.assert(
      fc.property(cases, ({ graph }) => {
        const clean = eliminateDeadCodeSync(graph)
        const live = liveness(graph)
        // only dead nodes to drop: every initializer is read by a live node
        const deadNodesOnly: Graph = { ...graph, initializers: clean.initializers }
        if (deadNodesOnly.nodes.some((n) => !live.nodes.has(n))) expect(eliminateDeadCodeSync(deadNodesOnly).nodes).toEqual(clean.nodes)
        // only unused initializers to drop
        const deadConstantsOnly: Graph = { ...graph, nodes: clean.nodes }
        expect([...eliminateDeadCodeSync(deadConstantsOnly).initializers.keys()]).toEqual([...clean.initializers.keys()])
      }),
      lawParams(60),
    )
  })
})
