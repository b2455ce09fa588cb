// A Backend record: everything the pipeline, the CLI and the tuner need to know about one target
// kind, as data. The table of them (./index.ts) is typed over the kind union, so a kind without a
// record does not compile; nothing else in Tessera switches on the kind. A record points into a
// folder per stage: its schedule templates (src/lowering), its TIR pipeline, its emitter
// (src/emit/<kind>), its device (src/device/<kind>); docs/architecture.md has the checklist.
import { Data, type Effect, type Layer } from "effect"
import type { CompileError, UnsafeCacheError } from "../device/errors.js"
import type { GpuLimitError } from "../emit/cuda/verify.js"
import type { CpuAttrs, CudaPrecision, Target, TargetKind } from "../ast/target.js"
import type { Device } from "../device/device.js"
import type { PrimFunc } from "../ast/tir/tir.js"
import type { ScheduleFn } from "../lowering/lower-group.js"
import type * as S from "../ast/schedule/schedule.js"
import type { Artifact, Program } from "../lowering/program.js"
import type { TirPass } from "../lowering/tir/tir-pass.js"
import type { Config, Knob, ScheduleTarget, Template } from "../lowering/templates/template.js"
import type { ComputeTensor } from "../ast/te/tensor.js"
import type { FusedGroup } from "../rewrite/fuse-ops.js"
import type { GraphPass } from "../rewrite/pass.js"

/** What the command line may say of a target beyond the host (`--cuda-arch sm_80`). */
export interface TargetOptions {
  readonly cudaArch?: string
  /** The cuda target's storage precision (`--precision fp16`: tensors in the arena as `__half`); absent: fp32. */
  readonly precision?: CudaPrecision
}

/** What a toolchain on this host adds to an artifact's manifest (nvcc's registers and spills per function), and lines for stderr. */
export interface BuildReport {
  readonly manifest: Readonly<Record<string, unknown>>
  readonly notes: readonly string[]
}

/** The tuned config of a group's template, if a tuning log has one that fits (compileGraph's lookup). */
export type TunedLookup = (group: FusedGroup, template: Template, knobs: readonly Knob[], outputs: readonly ComputeTensor[]) => Config | undefined

/** How a target's artifacts are emitted and run here (per run of the CLI or a benchmark, not per target). */
export interface RunOptions {
  /**
   * Threads the device runs kernels on (c: its thread pool's, or OpenMP's; wasm: workers sharing
   * the memory; js: 1). Absent: the device's own default (c: $OMP_NUM_THREADS, else every core
   * this process may run on; wasm: one).
   */
  readonly threads?: number
}

export interface Codegen<K extends TargetKind> {
  /** Each fused group's schedule: its template at the target's defaults, or the tuned config `tuned` finds. */
  readonly schedules: (target: Target<K>, tuned?: TunedLookup) => ScheduleFn
  /**
   * What `schedules` sizes the templates' defaults from (the CPU targets': lanes, cores, FMA pipes
   * × latency, registers, the L2, the FMA and 8-bit dot instructions), so the tuner's tasks start
   * from the config compile applies; absent: lanes and cores only (the GPU's rules read their own attrs).
   */
  readonly scheduleTarget?: (target: Target<K>) => ScheduleTarget
  /** Its TIR pass pipeline: named passes, verified between them and against what its emitter assumes. */
  readonly tir: (target: Target<K>) => TirPass<unknown>
  /** Program → Artifact: pure and deterministic (the same program and options, the same bytes). */
  readonly emit: (program: Program, target: Target<K>, options: RunOptions) => Artifact
  /** The Device layer that builds, loads and runs this target's artifacts. */
  readonly device: (target: Target<K>, options: RunOptions) => Layer.Layer<Device>
  /** Whether its code computes int64 exactly (int64_t on c and cuda, i64 on wasm, BigInt on js) and its artifacts store it so; else int64 arithmetic runs on the reference kernels. */
  readonly exactInt64?: boolean
  /** The same for uint64 (uint64_t on c, i64 on wasm, BigInt on js; not cuda, whose arena holds uint64 as doubles). */
  readonly exactUint64?: boolean
  /**
   * Tuning candidates in the target's language, each under its name, for its device's `measure`
   * (which builds and times them in isolation), for the target being tuned (cuda: its `--cuda-arch`,
   * whose record the static checks read); absent: the target is not tunable yet.
   */
  readonly renderCandidates?: (funcs: readonly { readonly name: string; readonly func: PrimFunc }[], target: Target<K>) => string
  /**
   * The template a group is tuned with, where `schedules` does not use the CPU templates (cuda: its
   * GPU rules), so `tune` searches the space `compile` applies, under the key its lookup uses.
   */
  readonly tuningTemplate?: (target: Target<K>, base: S.Schedule) => Template
  /**
   * What a toolchain here says of the artifact, when one is here (nvcc: each function's registers
   * and spills), for `tessera compile`'s manifest; the edge calls it (it may spawn a compiler).
   */
  readonly buildReport?: (artifact: Artifact, target: Target<K>) => Effect.Effect<BuildReport, CompileError | GpuLimitError | UnsafeCacheError>
}

export interface Backend<K extends TargetKind> {
  readonly kind: K
  /** One line: what the target emits and where it runs. */
  readonly summary: string
  /** The target this kind compiles for on a host with these attributes, running `threads` threads (a GPU kind: the architecture `options` names). */
  readonly target: (host: CpuAttrs, threads: number, options?: TargetOptions) => Target<K>
  /** Why it cannot run here (a missing toolchain), or undefined. Reads the host: call it at the edge. */
  readonly unavailable: () => string | undefined
  /**
   * Why its artifacts compile here but cannot run in this process (cuda: no CUDA driver or no
   * device here; reads the host: call it at the edge), or undefined: they run on its device.
   */
  readonly compileOnly?: () => string | undefined
  /** Whether its kernels can run parallel loops on several threads (js and the interpreter run on one). */
  readonly parallel: boolean
  /** The graph passes after binding (the default ones; a CPU's blocked layout and Winograd). */
  readonly graphPasses: (target: Target<K>) => GraphPass
  /** How fused groups become kernels and kernels an artifact; absent: the target interprets the optimized graph. */
  readonly codegen?: Codegen<K>
}

/** A target this build cannot compile for or run here (a missing toolchain; no code generator). */
export class TargetUnavailableError extends Data.TaggedError("TargetUnavailableError")<{ readonly target: string; readonly reason: string }> {
  override get message(): string {
    return `the ${this.target} target is not available: ${this.reason}`
  }
}

/** The table's type: one record per kind. */
export type Backends = { readonly [K in TargetKind]: Backend<K> }
