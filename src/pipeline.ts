// The one place that knows every stage: decode → bind → graph passes → fusion → memory plan →
// lowering of each group → emission; and, through src/device, loading and running.
import { Effect } from "effect"
import type { Graph } from "./ast/graph/graph.js"
import { bind } from "./ast/graph/infer.js"
import { lowerGroups } from "./lowering/lower-group.js"
import { defaultSchedule } from "./lowering/templates.js"
import { alterLayout, defaultPasses, fuseOps, planMemory, sequential, singletonGroups, withPassConfig } from "./rewrite/index.js"
import type { Program } from "./device/executor.js"
import { emitJsModule } from "./emit/js.js"

export type TargetKind = "interp" | "js" | "c" | "wasm"

export interface CompileOptions {
  readonly target: TargetKind
  readonly optLevel?: number
  /** fp32 vector lanes of the CPU (alterLayout's block); 0 keeps NCHW. */
  readonly vectorLanes?: number
  /** Cores the parallel loops may use. */
  readonly cores?: number
  /** Shapes binding symbolic input dims. */
  readonly shapes?: ReadonlyMap<string, readonly number[]>
}

/** Graph-level and operator-level compilation: a Program of kernels for the target. */
export const compileGraph = Effect.fn("tessera.compile")(function* (graph: Graph, options: CompileOptions) {
  const optLevel = options.optLevel ?? 3
  const bound = yield* bind(graph, options.shapes ?? new Map(), { requireStatic: true })
  const lanes = options.vectorLanes ?? 0
  const passes = lanes > 1 && options.target !== "interp" ? sequential("rewrite.Target", [defaultPasses, alterLayout({ vectorLanes: lanes })]) : defaultPasses
  const optimized = yield* passes.run(bound).pipe(withPassConfig({ optLevel }))
  const fused = optLevel >= fuseOps.optLevel ? yield* fuseOps.run(optimized) : singletonGroups(optimized)
  const memory = planMemory(fused)
  const kernels = lowerGroups(fused, defaultSchedule({ vectorLanes: Math.max(lanes, 1), cores: options.cores ?? 1 }))
  return { graph: fused.graph, fused, memory, kernels } satisfies Program
})

/** The js target's artifact: one ES module with a function per compiled kernel. */
export const emitJs = (program: Program): string =>
  emitJsModule(program.kernels.flatMap((k) => (k.kind === "compiled" ? [{ name: k.name, func: k.func }] : [])))
