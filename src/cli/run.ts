// `tessera run MODEL.onnx`: decode, bind the inputs (files, shapes, seeded random), compile for
// the target at the opt level, run, write each output as DIR/NAME.npy, and summarise the run as
// one JSON line; --dump-ir writes the IR after each pass, --report times the passes.
import { Effect } from "effect"
import type { Interrupt } from "../ast/graph/errors.js"
import type { Tensor } from "../ast/graph/tensor.js"
import { readModel, readNpy, writeOutputs } from "../device/files.js"
import { dumpIr, passReport, reportLines, type PassReportRow } from "./dump-ir.js"
import { attempt, UsageError, type CommandError } from "./errors.js"
import { parseDims, planInputs, randomTensor, splitAssignment } from "./inputs.js"
import { parseOptLevel, parseTarget, prepare, targetSettings } from "./targets.js"

export interface RunOptions {
  readonly model: string
  readonly target: string
  /** `NAME=FILE.npy` specs. */
  readonly inputs: readonly string[]
  /** `NAME=1x3x224x224` specs. */
  readonly shapes: readonly string[]
  /** Folder for the outputs; none: nothing is written. */
  readonly out?: string
  readonly seed: number
  /** 0..3 (default 3). */
  readonly optLevel: number
  /** Folder for the IR after each pass and each kernel's TIR. */
  readonly dumpIr?: string
  /** Print the pass report (stderr) and add it to the summary. */
  readonly report: boolean
  /** Where the report's lines go. */
  readonly log: (line: string) => Effect.Effect<void>
  /** The supervisor's stop flag (SIGINT, SIGTERM, --deadline). */
  readonly interrupt?: Interrupt
}

interface ValueSummary {
  readonly name: string
  readonly dtype: string
  readonly shape: readonly number[]
}

export interface RunSummary {
  readonly model: string
  readonly target: string
  readonly inputs: readonly (ValueSummary & { readonly source: string })[]
  readonly outputs: readonly (ValueSummary & { readonly file?: string })[]
  readonly optLevel: number
  /** Compile (and load) time, ms. */
  readonly compileMs: number
  /** Run time, ms. */
  readonly ms: number
  readonly kernels?: { readonly compiled: number; readonly fallback: number }
  readonly passes?: readonly PassReportRow[]
  readonly irFiles?: number
}

/** Parses repeated `NAME=VALUE` flags into a map, refusing a name given twice. */
const assignments = <A>(specs: readonly string[], flag: string, value: (v: string) => Effect.Effect<A, CommandError>) =>
  Effect.gen(function* () {
    const out = new Map<string, A>()
    for (const spec of specs) {
      const { name, value: v } = yield* attempt(() => splitAssignment(spec, flag))
      if (out.has(name)) return yield* new UsageError({ flag, reason: `input '${name}' is given twice` })
      out.set(name, yield* value(v))
    }
    return out
  })

export const runModel = Effect.fn("cli.run")(function* (o: RunOptions) {
  const kind = yield* parseTarget(o.target)
  const optLevel = yield* parseOptLevel(o.optLevel)
  const graph = yield* readModel(o.model)
  const files = yield* assignments(o.inputs, "--input", (file) => Effect.map(readNpy(file), (tensor) => ({ file, tensor })))
  const given = new Map([...files].map(([name, f]) => [name, f.tensor] as const))
  const shapes = yield* assignments(o.shapes, "--shape", (dims) => attempt(() => parseDims(dims, "--shape")))
  const plan = yield* attempt(() => planInputs(graph, given, shapes))
  const feeds = new Map<string, Tensor>(plan.map((p, k) => [p.name, p.given ?? randomTensor(p.dtype, p.shape, o.seed, k)]))
  const bound = new Map(plan.map((p) => [p.name, p.shape] as const))
  const trace = o.report || o.dumpIr !== undefined
  const model = yield* prepare(graph, { settings: targetSettings(kind), optLevel, shapes: bound, trace, ...(o.interrupt ? { interrupt: o.interrupt } : {}) })
  const t0 = performance.now()
  const outs = yield* attempt(() => model.run(feeds))
  const ms = performance.now() - t0
  const named = graph.outputs.map((out) => ({ name: out.name, tensor: outs.get(out.name)! }))
  const irFiles = o.dumpIr !== undefined ? yield* dumpIr(o.dumpIr, graph, model) : undefined
  const rows = o.report ? passReport(model) : undefined
  if (rows) for (const line of reportLines(rows)) yield* o.log(line)
  const written = o.out !== undefined ? yield* writeOutputs(o.out, named) : undefined
  const compiled = model.program?.kernels.filter((k) => k.kind === "compiled").length
  const summary: RunSummary = {
    model: o.model,
    target: kind,
    optLevel,
    inputs: plan.map((p) => ({
      name: p.name,
      dtype: p.dtype,
      shape: p.shape,
      source: files.get(p.name)?.file ?? `random(seed ${o.seed})`,
    })),
    outputs: named.map((n, k) => ({ name: n.name, dtype: n.tensor.dtype, shape: n.tensor.shape, ...(written ? { file: written[k] } : {}) })),
    compileMs: round3(model.compileMs),
    ms: round3(ms),
    ...(model.program && compiled !== undefined ? { kernels: { compiled, fallback: model.program.kernels.length - compiled } } : {}),
    ...(rows ? { passes: rows } : {}),
    ...(irFiles !== undefined ? { irFiles } : {}),
  }
  return summary
})

const round3 = (x: number) => Math.round(x * 1000) / 1000
