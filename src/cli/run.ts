// `tessera run MODEL.onnx`: decode, bind the inputs (files, shapes, seeded random), run on the
// target, write each output as DIR/NAME.npy, and summarise the run as one JSON line.
import { Effect } from "effect"
import { runGraph } from "../ast/graph/evaluate.js"
import type { Tensor } from "../ast/graph/tensor.js"
import { readModel, readNpy, writeOutputs } from "../device/files.js"
import { attempt, UsageError, type CommandError } from "./errors.js"
import { parseDims, planInputs, randomTensor, splitAssignment } from "./inputs.js"

/** Targets `run` can execute today. */
export const RUN_TARGETS = ["interp"] as const

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
  readonly ms: number
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
  if (!(RUN_TARGETS as readonly string[]).includes(o.target))
    return yield* new UsageError({ flag: "--target", reason: `target '${o.target}' cannot run models yet (available: ${RUN_TARGETS.join(", ")})` })
  const graph = yield* readModel(o.model)
  const files = yield* assignments(o.inputs, "--input", (file) => Effect.map(readNpy(file), (tensor) => ({ file, tensor })))
  const given = new Map([...files].map(([name, f]) => [name, f.tensor] as const))
  const shapes = yield* assignments(o.shapes, "--shape", (dims) => attempt(() => parseDims(dims, "--shape")))
  const plan = yield* attempt(() => planInputs(graph, given, shapes))
  const feeds = new Map<string, Tensor>(plan.map((p, k) => [p.name, p.given ?? randomTensor(p.dtype, p.shape, o.seed, k)]))
  const t0 = performance.now()
  const outs = yield* attempt(() => runGraph(graph, feeds))
  const ms = performance.now() - t0
  const named = graph.outputs.map((out, k) => ({ name: out.name, tensor: outs[k] }))
  const written = o.out !== undefined ? yield* writeOutputs(o.out, named) : undefined
  const summary: RunSummary = {
    model: o.model,
    target: o.target,
    inputs: plan.map((p) => ({
      name: p.name,
      dtype: p.dtype,
      shape: p.shape,
      source: files.get(p.name)?.file ?? `random(seed ${o.seed})`,
    })),
    outputs: named.map((n, k) => ({ name: n.name, dtype: n.tensor.dtype, shape: n.tensor.shape, ...(written ? { file: written[k] } : {}) })),
    ms: Math.round(ms * 1000) / 1000,
  }
  return summary
})
