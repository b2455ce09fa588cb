// A model's bytes to a loadable artifact, stage by stage, with a report of each stage as it starts
// (decode, each graph pass, fusion, lowering of each group, emission): what the playground's
// worker shows and the esbuild plugin runs at build time. Pure: the stages' own functions, the
// caller's callback the only effect (no clock here; a caller times the stages it is told of).
import { Effect } from "effect"
import type { Graph } from "../ast/graph/graph.js"
import { decodeOnnx } from "../ast/onnx/decode.js"
import type { Target } from "../ast/target.js"
import type { RunOptions } from "../backend/backend.js"
import type { Artifact, Program } from "../lowering/program.js"
import type { CompileOptions, pipelineOf, TuningReport } from "../pipeline-core.js"
import type { FusedGraph } from "../rewrite/fuse-ops.js"
import { withPassConfig } from "../rewrite/pass.js"

/** A stage as it starts. */
export type CompileStage =
  | { readonly stage: "decode"; readonly bytes: number }
  | { readonly stage: "pass"; readonly pass: string }
  | { readonly stage: "fusion"; readonly groups: number }
  | { readonly stage: "lowering"; readonly group: number; readonly of: number }
  | { readonly stage: "emission"; readonly kernels: number }
  | { readonly stage: "done" }

export interface CompileModelOptions extends CompileOptions, RunOptions {
  readonly onStage?: (s: CompileStage) => void
}

export interface CompiledModel {
  readonly graph: Graph
  readonly program: Program & { readonly tuning: TuningReport }
  readonly artifact: Artifact
}

/** The graph pipeline's wrappers (src/rewrite/index.ts, src/backend/cpu.ts): their passes are reported, not they. */
const WRAPPERS = new Set(["rewrite.Plan", "rewrite.Fuse", "rewrite.Default", "rewrite.Target"])

/** The TIR pipeline's top pass runs once per group lowered (a kernel seen before is reused, and not reported). */
const isTirPipeline = (pass: string) => /^lowering\.[A-Za-z]*Pipeline$/.test(pass)

/** Decodes, compiles and emits `bytes` for `target` with `pipeline`'s backends. */
export const compileModel = (pipeline: Pick<ReturnType<typeof pipelineOf>, "compileGraph" | "emitArtifact">, bytes: Uint8Array, target: Target, o: CompileModelOptions = {}) =>
  Effect.gen(function* () {
    const report = o.onStage ?? (() => {})
    report({ stage: "decode", bytes: bytes.length })
    const graph = yield* decodeOnnx(bytes)
    let groups = 0
    let lowered = 0
    const instrument = {
      before: (pass: string) => {
        if (isTirPipeline(pass)) report({ stage: "lowering", group: ++lowered, of: groups })
        else if (pass.startsWith("rewrite.") && !WRAPPERS.has(pass)) report({ stage: "pass", pass })
      },
      after: (pass: string, ir: unknown) => {
        if (pass === "rewrite.FuseOps") {
          groups = (ir as FusedGraph).groups.length
          report({ stage: "fusion", groups })
        }
      },
    }
    const { onStage: _, threads, ...compile } = o
    const program = yield* pipeline.compileGraph(graph, target, compile).pipe(withPassConfig({ optLevel: o.optLevel ?? 3, instruments: [instrument] }))
    report({ stage: "emission", kernels: program.kernels.length })
    const artifact = yield* pipeline.emitArtifact(program, target, threads !== undefined ? { threads } : {})
    report({ stage: "done" })
    return { graph, program, artifact } satisfies CompiledModel
  })
