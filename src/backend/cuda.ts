// The cuda target's record: the GPU auto-bind rules (src/lowering/templates/gpu), the GPU TIR
// pipeline, the CUDA emitter and its standalone artifact, and nvcc's resource report for the
// manifest. Its target is the GPU `--cuda-arch` names (default sm_90), not the host.
import { Effect } from "effect"
import { cudaArchOf, cudaAttrsForArch, withPrecision, type Target } from "../ast/target.js"
import { cudaDeviceLayer, cudaGpuHere } from "../device/cuda/device.js"
import type { CompileError, UnsafeCacheError } from "../device/errors.js"
import { buildCubin, findNvcc } from "../device/cuda/nvcc.js"
import { CUDA_KERNELS_FILE, emitCudaArtifact } from "../emit/cuda/artifact.js"
import { GpuLimitError } from "../emit/cuda/verify.js"
import { emitCuda } from "../emit/cuda/emit.js"
import { LAUNCHES_PREFIX } from "../device/cuda/measure.js"
import { storageElements } from "../ast/tir/analysis.js"
import { storageBytes } from "../ast/graph/dtype.js"
import { aliasedKernels, type Artifact } from "../lowering/program.js"
import { cudaSchedules, gpuTemplate } from "../lowering/templates/gpu/index.js"
import { cudaTirPipeline } from "../lowering/tir/cuda-pipeline.js"
import { defaultPasses } from "../rewrite/index.js"
import type { Backend, BuildReport } from "./backend.js"

interface LaunchEntry {
  readonly kernel: string
  readonly launches: readonly { readonly function: string; readonly block: readonly number[] }[]
}

/**
 * nvcc's report of the artifact's kernels for the target's architecture: registers, spills, stack
 * and shared bytes per function (in the manifest), each function's registers times its block's
 * threads checked against the registers a block may hold (GpuLimitError); without nvcc, a note
 * that nothing was built.
 */
const cudaBuildReport = (artifact: Artifact, target: Target<"cuda">): Effect.Effect<BuildReport, CompileError | GpuLimitError | UnsafeCacheError> =>
  Effect.gen(function* () {
    const arch = cudaArchOf(target.attrs)
    const nvcc = findNvcc()
    if (!nvcc) return { manifest: { nvcc: null }, notes: ["nvcc was not found ($CUDA_HOME/bin, by default /usr/local/cuda/bin, or PATH): the sources are written, nothing was built; run `make` where the CUDA toolkit is"] }
    const source = new TextDecoder().decode(artifact.files.get(CUDA_KERNELS_FILE))
    const { functions, cached } = yield* buildCubin(nvcc, source, arch)
    const launches = (artifact.manifest.launches ?? []) as readonly LaunchEntry[]
    const threadsOf = new Map<string, number>()
    for (const k of launches) for (const l of k.launches) threadsOf.set(l.function, l.block.reduce((a, b) => a * b, 1))
    for (const [fn, r] of functions) {
      const threads = threadsOf.get(fn) ?? 1
      if (r.registers * threads > target.attrs.registersPerBlock)
        return yield* new GpuLimitError({ kernel: fn, limit: "registersPerBlock", value: r.registers * threads, max: target.attrs.registersPerBlock, reason: `${r.registers} registers per thread × ${threads} threads` })
    }
    const spilling = [...functions].filter(([, r]) => r.spillStores + r.spillLoads > 0)
    return {
      manifest: { nvcc: { arch, functions: Object.fromEntries([...functions].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) } },
      notes: [`nvcc built ${functions.size} kernels for ${arch}${cached ? " (cached)" : ""}${spilling.length ? `; spilling registers: ${spilling.map(([f]) => f).join(", ")}` : ""}`],
    }
  })

export const cuda: Backend<"cuda"> = {
  kind: "cuda",
  summary: "CUDA C kernels and a host launcher, built by nvcc into a standalone runner for an NVIDIA GPU (default sm_90)",
  target: (_host, _threads, options) => ({ kind: "cuda", attrs: withPrecision(cudaAttrsForArch(options?.cudaArch), options?.precision) }),
  // compile writes the sources without nvcc; run, bench and tune drive the GPU through the CUDA
  // driver where there is one (src/device/cuda), and fail with NoGpuError (exit 2) where not
  unavailable: () => undefined,
  compileOnly: () => {
    const here = cudaGpuHere()
    return here.ok ? undefined : here.reason
  },
  parallel: true,
  graphPasses: () => defaultPasses,
  codegen: {
    schedules: (target, tuned) => cudaSchedules(target.attrs, tuned),
    // tune searches the GPU rules' space (the one `schedules` applies), not the CPU templates'
    tuningTemplate: (target, base) => gpuTemplate(target.attrs, base),
    tir: (target) => cudaTirPipeline(target.attrs),
    // its kernels share the c target's int64_t (cStorage), and the runner and constants.bin hold int64 as int64_t
    exactInt64: true,
    emit: (program, target) => emitCudaArtifact(program, target.attrs, { aliased: aliasedKernels(program) }),
    // tuning candidates: their kernels and, per candidate, its launches for the device (src/device/cuda/measure.ts)
    // checked against the record of the GPU being tuned (`--cuda-arch`), not the default's
    renderCandidates: (funcs, target) => {
      const e = emitCuda(funcs.map((f) => ({ ...f.func, name: f.name })), target.attrs)
      const plans = e.kernels.map((k) => `${LAUNCHES_PREFIX}${JSON.stringify({ name: k.name, workspace: k.workspace.map((b) => storageElements(b) * storageBytes(b.dtype)), launches: k.launches.map((l) => ({ function: l.symbol, grid: l.grid, block: l.block })) })}`)
      return [e.source, ...plans, ""].join("\n")
    },
    device: () => cudaDeviceLayer,
    buildReport: cudaBuildReport,
  },
}
