// `tessera compile MODEL.onnx --target T --out DIR [--tuned LOG]` (T: a kind with a code generator):
// writes the artifact — the emitted code (the target's emitter's files), the constants (one
// little-endian binary, 64-byte aligned) and manifest.json (inputs, outputs, kernels in run order,
// fallback groups with their reasons, the memory plan).
// Same model and flags → the same bytes: nothing depends on the clock, the folder or the run.
import type { Interrupt } from "../ast/graph/errors.js"
import { Effect } from "effect"
import * as path from "node:path"
import type { Graph } from "../ast/graph/graph.js"
import { CUDA_ARCHS, CUDA_PRECISIONS, isCudaArch, isCudaPrecision, lanesAndCores, type TargetKind } from "../ast/target.js"
import { BACKENDS, type BuildReport } from "../backend/index.js"
import type { CompileError } from "../device/errors.js"
import type { GpuLimitError } from "../emit/cuda/verify.js"
import { ensureFolderSync, readModel, wholeBytes, writeFilesAtomicSync, type FileBytes } from "../device/files.js"
import { ALIGN, constantsBin } from "./constants-bin.js"
import type { Artifact, Program } from "../lowering/program.js"
import { emitArtifact, type TuningReport } from "../pipeline.js"
import { attempt, UsageError } from "./errors.js"
import { parseDims, planInputs, splitAssignment } from "./inputs.js"
import { compileFor, parseOptLevel, parseTarget, readTuned, targetSettings, tuningLines, type TargetSettings } from "./targets.js"

/** The kinds that compile to an artifact (every kind with a code generator). */
export const COMPILE_TARGETS: readonly TargetKind[] = (Object.keys(BACKENDS) as TargetKind[]).filter((k) => BACKENDS[k].codegen !== undefined)

export interface CompileOptions {
  readonly model: string
  readonly target: string
  readonly out: string
  readonly tuned?: string
  readonly optLevel: number
  readonly threads: number
  /** The GPU architecture of the cuda target (`sm_90`, `sm_80`); absent: its default. */
  readonly cudaArch?: string
  /** The cuda target's storage precision (`fp32`, `fp16`); absent: fp32. */
  readonly precision?: string
  readonly shapes: readonly string[]
  /** Where the tuning report and the log's warnings go (stderr). */
  readonly log: (line: string) => Effect.Effect<void>
  /** The supervisor's stop flag (SIGINT, SIGTERM, --deadline). */
  readonly interrupt?: Interrupt
}

/** The constants as one binary and their index (name, dtype, storage, shape, offset, bytes); `tessera compile` writes the binary piece by piece (constantsBin). */
export const packConstants = (graph: Graph): { bin: Uint8Array; index: object[] } => {
  const { bytes, index } = constantsBin(graph)
  return { bin: wholeBytes(bytes), index }
}

const typeOf = (g: Graph, v: string) => {
  const t = g.valueTypes.get(v)
  return t ? { dtype: t.dtype, shape: t.shape } : {}
}

/** manifest.json: everything a loader needs besides the code and the constants. */
export const manifest = (model: string, settings: TargetSettings, optLevel: number, program: Program, files: object, constants: readonly object[], tuning?: TuningReport): object => {
  const g = program.graph
  const inputs = new Set(g.inputs.map((i) => i.name))
  const outputs = new Set(g.outputs.map((o) => o.name))
  const storage = new Map(program.memory.values.map((v) => [v.value, v.storage] as const))
  const where = (v: string) =>
    inputs.has(v) ? "input" : outputs.has(v) ? "output" : g.initializers.has(v) ? "constant" : storage.has(v) ? `block ${storage.get(v)}` : "temporary"
  const groups = program.fused.groups
  return {
    format: "tessera-artifact/1",
    model: path.basename(model),
    target: { kind: settings.target.kind, ...lanesAndCores(settings.target) },
    optLevel,
    files,
    inputs: g.inputs.map((i) => ({ name: i.name, ...typeOf(g, i.name) })),
    outputs: g.outputs.map((o) => ({ name: o.name, ...typeOf(g, o.name) })),
    kernels: program.kernels.map((k) =>
      k.kind === "compiled"
        ? { name: k.name, group: k.group, kind: "compiled", ops: groups[k.group]?.ops ?? [], args: k.args.map((a) => ({ value: a, ...typeOf(g, a), storage: where(a) })), outputs: k.outputs }
        : { name: k.name, group: k.group, kind: "fallback", ops: k.nodes.map((n) => n.op), nodes: k.nodes.map((n) => n.name), reason: k.reason },
    ),
    fallback: program.kernels.flatMap((k) => (k.kind === "fallback" ? [{ group: k.group, ops: k.nodes.map((n) => n.op), reason: k.reason }] : [])),
    memory: {
      plannedBytes: program.memory.plannedBytes,
      naiveBytes: program.memory.naiveBytes,
      storages: program.memory.storages,
      values: program.memory.values,
    },
    constants: { file: "constants.bin", byteOrder: "little-endian", alignment: ALIGN, tensors: constants },
    ...(tuning ? { tuning } : {}),
  }
}

/** The artifact's files (name → bytes), in a fixed order: the emitted code, the constants (made piece by piece as they are written, unless the emitter packed its own), the manifest. */
export const artifactParts = (model: string, settings: TargetSettings, optLevel: number, program: Program, artifact: Artifact, tuning?: TuningReport): Map<string, FileBytes> => {
  const { bytes, index } = artifact.constants ? { bytes: artifact.constants.bin, index: artifact.constants.index } : constantsBin(program.graph)
  const out = new Map<string, FileBytes>(artifact.files)
  out.set("constants.bin", bytes)
  out.set("manifest.json", new TextEncoder().encode(`${JSON.stringify(manifest(model, settings, optLevel, program, artifact.manifest, index, tuning), null, 2)}\n`))
  return out
}

/** The artifact's files (name → bytes), each whole. */
export const artifactFiles = (model: string, settings: TargetSettings, optLevel: number, program: Program, artifact: Artifact, tuning?: TuningReport): Map<string, Uint8Array> =>
  new Map([...artifactParts(model, settings, optLevel, program, artifact, tuning)].map(([name, bytes]) => [name, wholeBytes(bytes)] as const))

/** `--shape NAME=DIMS` flags as a map; the model's inputs bound from them (static shapes). */
export const boundShapes = (graph: Graph, specs: readonly string[]) =>
  attempt(() => {
    const shapes = new Map<string, number[]>()
    for (const spec of specs) {
      const { name, value } = splitAssignment(spec, "--shape")
      shapes.set(name, parseDims(value, "--shape"))
    }
    return new Map(planInputs(graph, new Map(), shapes).map((p) => [p.name, p.shape] as const))
  })

export const compileCommand = Effect.fn("cli.compile")(function* (o: CompileOptions) {
  const kind = yield* parseTarget(o.target, COMPILE_TARGETS)
  const optLevel = yield* parseOptLevel(o.optLevel)
  if (o.threads < 1) return yield* new UsageError({ flag: "--threads", reason: `${o.threads} is not a thread count (1 or more)` })
  if (o.cudaArch !== undefined && kind !== "cuda") return yield* new UsageError({ flag: "--cuda-arch", reason: `is for --target cuda, not ${kind}` })
  if (o.cudaArch !== undefined && !isCudaArch(o.cudaArch)) return yield* new UsageError({ flag: "--cuda-arch", reason: `'${o.cudaArch}' is not one Tessera knows (${CUDA_ARCHS.join(", ")})` })
  if (o.precision !== undefined && kind !== "cuda") return yield* new UsageError({ flag: "--precision", reason: `is for --target cuda, not ${kind}` })
  if (o.precision !== undefined && !isCudaPrecision(o.precision)) return yield* new UsageError({ flag: "--precision", reason: `'${o.precision}' is not one Tessera knows (${CUDA_PRECISIONS.join(", ")})` })
  const settings = targetSettings(kind, o.threads, { ...(o.cudaArch !== undefined ? { cudaArch: o.cudaArch } : {}), ...(o.precision !== undefined && isCudaPrecision(o.precision) ? { precision: o.precision } : {}) })
  const graph = yield* readModel(o.model)
  const shapes = yield* boundShapes(graph, o.shapes)
  const tuned = o.tuned !== undefined ? yield* readTuned(o.tuned, settings) : undefined
  if (tuned) for (const w of tuned.warnings) yield* o.log(`tessera compile: ${o.tuned}: ${w}`)
  const compiled = yield* compileFor(graph, { settings, optLevel, shapes, trace: false, ...(tuned ? { tuned: tuned.best } : {}), ...(o.interrupt ? { interrupt: o.interrupt } : {}) })
  const program = compiled.program!
  if (tuned && o.tuned !== undefined) for (const line of tuningLines(o.tuned, tuned, program.tuning)) yield* o.log(line)
  const artifact = yield* emitArtifact(program, settings.target)
  // what a toolchain here says of it (nvcc's registers and spills), in the manifest
  const report = BACKENDS[kind].codegen?.buildReport
  const built = report ? yield* (report as (a: Artifact, t: typeof settings.target) => Effect.Effect<BuildReport, CompileError | GpuLimitError>)(artifact, settings.target) : undefined
  for (const line of built?.notes ?? []) yield* o.log(`tessera compile: ${line}`)
  const withBuild: Artifact = built ? { ...artifact, manifest: { ...artifact.manifest, build: built.manifest } } : artifact
  const files = artifactParts(o.model, settings, optLevel, program, withBuild, tuned ? program.tuning : undefined)
  yield* attempt(() => {
    ensureFolderSync(o.out)
    writeFilesAtomicSync([...files].map(([name, bytes]) => ({ path: path.join(o.out, name), bytes })))
  })
  const compiledKernels = program.kernels.filter((k) => k.kind === "compiled").length
  return {
    model: o.model,
    target: kind,
    out: o.out,
    files: [...files.keys()],
    bytes: [...files.values()].reduce((s, b) => s + b.byteLength, 0),
    kernels: { compiled: compiledKernels, fallback: program.kernels.length - compiledKernels },
    ...(tuned ? { tuning: program.tuning } : {}),
  }
})
