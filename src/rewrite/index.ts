// The graph-level pipeline: the default pass list, fusion and memory planning, composed.
import { Effect } from "effect"
import type { Graph } from "../ast/graph/graph.js"
import { eliminateCommonSubexpr } from "./eliminate-common-subexpr.js"
import { eliminateDeadCode } from "./eliminate-dead-code.js"
import { foldConstants } from "./fold-constants.js"
import { fuseOps, singletonGroups, type FusedGraph } from "./fuse-ops.js"
import { PassConfig, sequential, type GraphPass, type RewriteError } from "./pass.js"
import { planMemory, type MemoryPlan } from "./plan-memory.js"
import { simplifyInference } from "./simplify-inference.js"

export * from "./pass.js"
export * from "./rules.js"
export { foldConstants, foldConstantsSync } from "./fold-constants.js"
export { eliminateDeadCode, eliminateDeadCodeSync } from "./eliminate-dead-code.js"
export { eliminateCommonSubexpr, eliminateCommonSubexprSync } from "./eliminate-common-subexpr.js"
export { simplifyInference, simplifyInferenceSync, simplifyInferenceRules } from "./simplify-inference.js"
export { fuseOps, fuseOpsSync, singletonGroups, type FusedGraph, type FusedGroup } from "./fuse-ops.js"
export { planMemory, type MemoryPlan } from "./plan-memory.js"
export { alterLayout, alterLayoutSync, chooseBlock, type LayoutTarget } from "./alter-layout.js"

/** The default graph passes, in order (each skipped above the configured opt level). */
export const defaultPasses: GraphPass = sequential("rewrite.Default", [
  foldConstants,
  eliminateDeadCode,
  simplifyInference,
  foldConstants,
  eliminateCommonSubexpr,
  eliminateDeadCode,
])

/** Runs graph passes (the default pipeline unless given). */
export const optimize = (graph: Graph, passes: GraphPass = defaultPasses): Effect.Effect<Graph, RewriteError> => passes.run(graph)

export interface OptimizedModel {
  readonly fused: FusedGraph
  readonly memory: MemoryPlan
}

/** Graph passes, then fusion (skipped at opt level 0: one group per node), then memory planning. */
export const optimizeAndPlan = Effect.fn("rewrite.OptimizeAndPlan")(function* (graph: Graph, passes: GraphPass = defaultPasses) {
  const cfg = yield* PassConfig
  const optimized = yield* passes.run(graph)
  const fused = cfg.optLevel >= fuseOps.optLevel && !cfg.disabled.has(fuseOps.name) ? yield* fuseOps.run(optimized) : singletonGroups(optimized)
  return { fused, memory: planMemory(fused) } satisfies OptimizedModel
})
export { fusionReport, fusionText, fusionDot, nodeFlops, type FusionReport } from "./report.js"
