// A Program → the cuda target's Artifact: the kernels' translation unit (emit.ts), the host
// launcher and the model's interface (host.ts), the standalone runner and its Makefile (runner.ts);
// the manifest says per kernel its launches (grid, block, shared bytes) and the arena's plan. Pure
// and deterministic. (constants.bin and manifest.json are the compile command's, as for every target.)
import { cudaArchOf, type CudaAttrs } from "../../ast/target.js"
import { paramsOf } from "../../ast/tir/analysis.js"
import { compiledKernels, type Artifact, type Program } from "../../lowering/program.js"
import { emitCuda } from "./emit.js"
import { launcherSource, MODEL_HEADER, planArena } from "./host.js"
import { makefile, RUNNER_SOURCE } from "./runner.js"
import { EMULATE_HEADER } from "./emulate.js"
import { halfKernel, halfValues, packCudaConstants } from "./precision.js"

export const CUDA_KERNELS_FILE = "tessera_kernels.cu"

export interface CudaArtifactOptions {
  /** The in-place kernels (one block passed as two params): their params are not `__restrict__`; every other kernel's are. */
  readonly aliased: ReadonlySet<string>
}

export const emitCudaArtifact = (program: Program, attrs: CudaAttrs, options: CudaArtifactOptions): Artifact => {
  const compiled = compiledKernels(program)
  // --precision fp16: the arena's float32 values as halves, each kernel's params to match (precision.ts)
  const half = attrs.precision === "fp16" ? halfValues(program) : new Set<string>()
  const funcs = compiled.map((k) => (half.size ? halfKernel(program, k, half, attrs) : k.func))
  const emitted = emitCuda(funcs, attrs, { aliased: options.aliased })
  const constants = packCudaConstants(program.graph, half)
  const plan = planArena(program, emitted, half)
  const launcher = launcherSource(program, emitted, plan, CUDA_KERNELS_FILE)
  const utf8 = (s: string) => new TextEncoder().encode(s)
  const arch = cudaArchOf(attrs)
  return {
    kind: "cuda",
    files: new Map([
      [CUDA_KERNELS_FILE, utf8(emitted.source)],
      ["tessera_launcher.cu", utf8(launcher)],
      ["tessera_model.h", utf8(MODEL_HEADER)],
      ["tessera_emulate.h", utf8(EMULATE_HEADER)],
      ["runner.cu", utf8(RUNNER_SOURCE)],
      ["Makefile", utf8(makefile(arch))],
    ]),
    manifest: {
      kernels: CUDA_KERNELS_FILE,
      launcher: "tessera_launcher.cu",
      header: "tessera_model.h",
      runner: "runner.cu",
      makefile: "Makefile",
      program: "model",
      arch,
      precision: attrs.precision ?? "fp32",
      arena: { bytes: plan.bytes, constantsBytes: plan.constantsBytes, workspaceOffset: plan.workspaceOffset, workspaceBytes: plan.workspaceBytes },
      launches: emitted.kernels.map((k) => ({
        kernel: k.name,
        workspace: k.workspace.map((b) => ({ name: b.name, dtype: b.dtype, shape: b.shape })),
        launches: k.launches.map((l) => ({ function: l.symbol, grid: l.grid, block: l.block, sharedBytes: l.sharedBytes })),
      })),
    },
    kernels: compiled.map((k, i) => ({ name: k.name, params: paramsOf(funcs[i]) })),
    constants: { bin: constants.bin, index: constants.index },
  }
}
