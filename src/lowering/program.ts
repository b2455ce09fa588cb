// The two contracts between the back half's stages. A Program is what lowering makes of a planned
// graph: one kernel per fused group (a PrimFunc, or the named fallback through reference kernels),
// the memory plan, the optimized graph. An Artifact is what a target's emitter makes of a Program
// (pure, deterministic bytes) and what that target's device builds and loads: its files, what the
// manifest says of them, and each kernel's params — all a device needs, read from data, so a device
// never imports an emitter and an artifact written to disk by `tessera compile` can be loaded back.
import type { DType } from "../ast/graph/dtype.js"
import type { Graph } from "../ast/graph/graph.js"
import type { TargetKind } from "../ast/target.js"
import type { FusedGraph } from "../rewrite/fuse-ops.js"
import type { MemoryPlan } from "../rewrite/plan-memory.js"
import type { CompiledKernel, FallbackKernel, GroupKernel } from "./lower-group.js"

export interface Program {
  /** The optimized, bound graph. */
  readonly graph: Graph
  readonly fused: FusedGraph
  readonly memory: MemoryPlan
  readonly kernels: readonly GroupKernel[]
}

/** What an executor runs: a Program less its kernels' TIR and schedules (a packed program has no more: src/web/packed-program.ts). */
export interface RunnableProgram {
  readonly graph: Graph
  readonly fused: Pick<FusedGraph, "groups">
  readonly memory: MemoryPlan
  readonly kernels: readonly (Pick<CompiledKernel, "kind" | "group" | "name" | "args" | "outputs"> | FallbackKernel)[]
}

/** The compiled kernels of a program, in run order. */
export const compiledKernels = (program: Program) => program.kernels.flatMap((k) => (k.kind === "compiled" ? [k] : []))

/** One param of an emitted kernel, as a device passes it. */
export interface KernelParam {
  readonly dtype: DType
  /** Elements of storage the kernel may touch (≥ the tensor's logical size when strided). */
  readonly elements: number
  /** The tensor it holds. */
  readonly shape: readonly number[]
  /** Whether the kernel stores to it. */
  readonly written: boolean
  /** Whether the kernel may see its value on entry (false: an output written whole, never read). */
  readonly copyIn: boolean
}

/** A kernel's frame (wasm: the call's scratch memory) and phases (the pieces a host may split across threads). */
export interface KernelFrame {
  readonly bytes: number
  readonly phases: readonly { readonly parallel?: number; readonly work: number }[]
}

/** An emitted kernel: its exported name and its params in order. */
export interface KernelEntry {
  readonly name: string
  readonly params: readonly KernelParam[]
  readonly frame?: KernelFrame
}

export interface Artifact {
  readonly kind: TargetKind
  /** The emitted files by name, in a fixed order (the code; constants and the manifest are the compile command's). */
  readonly files: ReadonlyMap<string, Uint8Array>
  /** What manifest.json says of these files (which is the module, the source, the header…). */
  readonly manifest: Readonly<Record<string, unknown>>
  /** Every kernel in the files, in the program's order. */
  readonly kernels: readonly KernelEntry[]
  /**
   * constants.bin and its index where the target packs its constants itself (cuda: float16 as
   * 2-byte halves, and every float32 weight of a `--precision fp16` artifact); absent: the compile
   * command's packing of the graph's initializers.
   */
  readonly constants?: { readonly bin: Uint8Array; readonly index: readonly object[] }
}

/** The text of an artifact's file (code is UTF-8). */
export const artifactText = (a: Artifact, name: string): string | undefined => {
  const bytes = a.files.get(name)
  return bytes ? new TextDecoder().decode(bytes) : undefined
}

/**
 * The compiled kernels two of whose args share storage (an in-place output): their C params may
 * alias, so only they are declared without `restrict`. Every other kernel keeps it: gcc's
 * vectorizer needs it to keep a scalar-written register tile in vectors (a 16→64 1×1 conv in
 * MobileNetV3 ran 15× slower when one in-place kernel elsewhere took `restrict` from all).
 */
export const aliasedKernels = (program: Program): ReadonlySet<string> => {
  const storageOf = new Map(program.memory.values.map((v) => [v.value, v.storage] as const))
  const out = new Set<string>()
  for (const k of program.kernels) {
    if (k.kind !== "compiled") continue
    const ids = k.args.map((a) => storageOf.get(a)).filter((x): x is number => x !== undefined)
    if (new Set(ids).size !== ids.length) out.add(k.func.name)
  }
  return out
}
