// The table of backends: one record per target kind, typed over the kind union (a kind without a
// record does not compile). The pipeline, the CLI and the tuner look a target up here; adding a
// target is a folder per stage and one entry below (docs/architecture.md). The portable records
// (interp, js, wasm: ./portable.ts) get Node's devices here, a page's in src/browser.ts.
import type { TargetKind } from "../ast/target.js"
import { cArtifact, C_FLAGS, C_POOL_FLAGS, defaultCBuildConfig } from "../device/c/build.js"
import { cDeviceLayer, cUnavailable } from "../device/c/device.js"
import { jsDeviceLayer } from "../device/js/node.js"
import { wasmDeviceLayer } from "../device/wasm/node.js"
import type { CParallel } from "../emit/c/dialect.js"
import { emitC } from "../emit/c/emit.js"
import { aliasedKernels, compiledKernels, type Artifact } from "../lowering/program.js"
import type { Backend, Backends } from "./backend.js"
import { cpuGraphPasses, cpuSchedules, cpuTir, scheduleTarget } from "./cpu.js"
import { cuda } from "./cuda.js"
import { kernelEntries, portableBackends, utf8 } from "./portable.js"

const { interp, js, wasm } = portableBackends({ js: jsDeviceLayer, wasm: wasmDeviceLayer })

/**
 * The c record whose parallel loops run on `parallel`: Tessera's thread pool (the loop's body
 * outlined, chunks claimed by whichever thread is free, the caller returning when every chunk is
 * done: src/emit/c/pool.ts; built with -fopenmp-simd -pthread) or OpenMP (`#pragma omp parallel
 * for`, built with -fopenmp).
 */
/** The flags a c record's libraries build with: the pool's or OpenMP's (src/device/c/build.ts). */
export const cBuildFlags = (parallel: CParallel): readonly string[] => (parallel === "pool" ? C_POOL_FLAGS : C_FLAGS)

export const cBackend = (parallel: CParallel): Backend<"c"> => {
  const build = () => defaultCBuildConfig(cBuildFlags(parallel))
  return {
    kind: "c",
    summary: `C11 (parallel loops on ${parallel === "pool" ? "Tessera's thread pool" : "OpenMP"}) built by gcc into a shared library, called through an FFI`,
    target: (host, threads) => ({ kind: "c", attrs: { ...host, cores: Math.max(1, threads) } }),
    unavailable: cUnavailable,
    parallel: true,
    graphPasses: cpuGraphPasses,
    codegen: {
      schedules: cpuSchedules,
      scheduleTarget,
      tir: cpuTir,
      emit: (program): Artifact => {
        // restrict, but for the in-place kernels that pass one block as two params; with the plan
        // unit (a run in one native call: the executor's, where every group is compiled)
        const emitted = emitC(compiledKernels(program).map((k) => k.func), { aliased: aliasedKernels(program), parallel, plan: true })
        const files = cArtifact(emitted, "tessera_kernels", build())
        return {
          kind: "c",
          files: new Map([...files].map(([name, text]) => [name, utf8(text)] as const)),
          // the units in build order, each with the kernels it defines (the first's code, the others aliases of it)
          manifest: {
            header: "tessera_kernels.h",
            prelude: emitted.prelude.file,
            units: emitted.units.map((u) => ({ file: u.file, kernels: u.kernels })),
            makefile: "Makefile",
            library: "libtessera_kernels.so",
            constants: "constants.bin",
          },
          kernels: kernelEntries(program),
        }
      },
      device: (_target, o) => cDeviceLayer(build(), o.threads),
      exactInt64: true,
      exactUint64: true,
      renderCandidates: (funcs) => emitC(funcs.map((f) => ({ ...f.func, name: f.name })), { parallel }).source,
    },
  }
}

/**
 * What runs the c target's parallel loops: Tessera's thread pool (src/emit/c/pool.ts). Quiet on an
 * AMD EPYC Zen 5 (2026-11-27, `scripts/parallel-ab.ts`, both in one process, alternated) it was
 * 1.04–1.16× faster than OpenMP at 2 threads on six zoo networks and 1.02–1.05× at 1; on a shared
 * machine 1–50× at 2 threads (docs/backends.md). OpenMP stays a record away: `cBackend("openmp")`.
 */
export const C_PARALLEL: CParallel = "pool"

const c = cBackend(C_PARALLEL)

/** The flags the c record's libraries build with (a tuner's candidates build with them too: cMeasureFlags). */
export const C_BUILD_FLAGS = cBuildFlags(C_PARALLEL)

export const BACKENDS: Backends = { interp, js, wasm, c, cuda }

/** The record of a kind. */
export const backendOf = <K extends TargetKind>(kind: K): Backend<K> => BACKENDS[kind] as Backend<K>

/** The kinds whose candidates the tuner can measure. */
export const TUNABLE_KINDS: readonly TargetKind[] = (Object.keys(BACKENDS) as TargetKind[]).filter((k) => BACKENDS[k].codegen?.renderCandidates !== undefined)

export { TargetUnavailableError, type Backend, type Backends, type BuildReport, type Codegen, type RunOptions, type TargetOptions, type TunedLookup } from "./backend.js"
