// The pipeline (./pipeline-core.ts) over every backend Node has (src/backend): what the CLI, the
// tuner and the library's Node entry use.
import type { Target, TargetKind } from "./ast/target.js"
import { BACKENDS, type Backend } from "./backend/index.js"
import { pipelineOf } from "./pipeline-core.js"

export { loadArtifact, type CompileOptions, type TuningReport } from "./pipeline-core.js"

/** A target's backend record, typed by the target's own kind. */
export const backendFor = <K extends TargetKind>(target: Target<K>): Backend<K> => BACKENDS[target.kind as K] as unknown as Backend<K>

export const { codegenFor, compileGraph, emitArtifact, loadProgram } = pipelineOf(BACKENDS)
