// Every graph pass, and the default pipeline, preserves meaning on random well-typed graphs, half
// of them model-like (conv-BN blocks, attention, multi-output ops, siblings; arbitrary-models.ts):
// evaluate(pass(g)) ≈ evaluate(g). foldConstants and eliminateDeadCode are idempotent.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, it } from "vitest"
import { arbGraphCase } from "../../src/ast/graph/arbitrary.js"
import { structurallyEqual, type Graph } from "../../src/ast/graph/graph.js"
import {
  alterLayout,
  defaultPasses,
  eliminateCommonSubexpr,
  eliminateDeadCode,
  foldConstants,
  simplifyInference,
  withPassConfig,
  type GraphPass,
} from "../../src/rewrite/index.js"
import { assertAllClose, evalGraph, lawParams } from "../support.js"

const runPass = (p: GraphPass, g: Graph): Graph => Effect.runSync(p.run(g).pipe(withPassConfig({ verify: true })))

const PASSES: readonly GraphPass[] = [
  foldConstants,
  eliminateDeadCode,
  eliminateCommonSubexpr,
  simplifyInference,
  alterLayout({ vectorLanes: 16 }),
  alterLayout({ vectorLanes: 4 }),
  defaultPasses,
]

describe("graph passes preserve semantics", () => {
  for (const pass of PASSES) {
    it(`${pass.name}: evaluate(pass(g)) ≈ evaluate(g)`, () => {
      fc.assert(
        fc.property(arbGraphCase({ maxNodes: 14, modelShare: 0.5 }), ({ graph, inputs }) => {
          const before = evalGraph(graph, inputs)
          const after = evalGraph(runPass(pass, graph), inputs)
          assertAllClose(after, before)
        }),
        lawParams(60),
      )
    })
  }
})

describe("idempotence", () => {
  for (const pass of [foldConstants, eliminateDeadCode]) {
    it(`${pass.name} is idempotent`, () => {
      fc.assert(
        fc.property(arbGraphCase({ maxNodes: 14, modelShare: 0.5 }), ({ graph }) => {
          const once = runPass(pass, graph)
          const twice = runPass(pass, once)
          if (!structurallyEqual(once, twice)) throw new Error("a second run changed the graph")
        }),
        lawParams(60),
      )
    })
  }
})
