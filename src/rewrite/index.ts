// The graph-level pipeline: the default pass list, fusion and memory planning, composed.
import { Effect } from "effect"
import type { Graph } from "../ast/graph/graph.js"
import { eliminateCommonSubexpr } from "./eliminate-common-subexpr.js"
import { eliminateDeadCode } from "./eliminate-dead-code.js"
import { foldConstants } from "./fold-constants.js"
import { fuseOps } from "./fuse-ops.js"
import { chain, sequential, type GraphPass, type Pass, type RewriteError, type VerifyError } from "./pass.js"
import { planMemoryPass, type PlannedGraph } from "./plan-memory.js"
import { qdqToInteger } from "./qdq-to-integer.js"
import { simplifyInference } from "./simplify-inference.js"

export * from "./pass.js"
export * from "./rules.js"
export { foldConstants, foldConstantsSync } from "./fold-constants.js"
export { eliminateDeadCode, eliminateDeadCodeSync } from "./eliminate-dead-code.js"
export { eliminateCommonSubexpr, eliminateCommonSubexprSync } from "./eliminate-common-subexpr.js"
export { simplifyInference, simplifyInferenceSync, simplifyInferenceRules } from "./simplify-inference.js"
export { fuseOps, fuseOpsSync, singletonGroups, type FusedGraph, type FusedGroup } from "./fuse-ops.js"
export { planMemory, planMemoryPass, type MemoryPlan, type PlannedGraph } from "./plan-memory.js"
export { alterLayout, alterLayoutSync, chooseBlock, type LayoutTarget } from "./alter-layout.js"
export { qdqToInteger, qdqToIntegerSync, qdqToIntegerWithReport, qdqReportText, type QdqDecision } from "./qdq-to-integer.js"

/**
 * The default graph passes, in order (each skipped above the configured opt level). QdqToInteger
 * comes first: FoldConstants would dequantize the 8-bit weights into float constants.
 */
export const defaultPasses: GraphPass = sequential("rewrite.Default", [
  qdqToInteger,
  foldConstants,
  eliminateDeadCode,
  simplifyInference,
  foldConstants,
  eliminateCommonSubexpr,
  eliminateDeadCode,
])

/** Runs graph passes (the default pipeline unless given). */
export const optimize = (graph: Graph, passes: GraphPass = defaultPasses): Effect.Effect<Graph, RewriteError> => passes.run(graph)

/** Graph passes, then fusion (skipped at opt level 0: one group per node), then memory planning. */
export const graphPipeline = (passes: GraphPass = defaultPasses): Pass<Graph, PlannedGraph, RewriteError | VerifyError> =>
  chain("rewrite.Plan", chain("rewrite.Fuse", passes, fuseOps), planMemoryPass)

/** Runs graphPipeline on a graph: its fused groups and memory plan. */
export const optimizeAndPlan = (graph: Graph, passes: GraphPass = defaultPasses): Effect.Effect<PlannedGraph, RewriteError> => graphPipeline(passes).run(graph)
export { fusionReport, fusionText, fusionDot, nodeFlops, type FusionReport } from "./report.js"
