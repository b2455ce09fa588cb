// `tessera inspect MODEL.onnx`: inputs, outputs, op counts, parameters, FLOPs and the node list;
// with --fused, the fused groups and the memory plan after the default graph passes.
import { Effect, Result } from "effect"
import type { Graph } from "../ast/graph/graph.js"
import { printGraph, showType } from "../ast/graph/graph.js"
import { bindSync } from "../ast/graph/infer.js"
import type { Tensor } from "../ast/graph/tensor.js"
import { readBytesSync, readModel, type ReadModelError } from "../device/files.js"
import { fusionDot, fusionReport, fusionText, nodeFlops, optimizeAndPlan, singletonGroups, withPassConfig, type FusionReport } from "../rewrite/index.js"
import type { Interrupt } from "../ast/graph/errors.js"
import { attempt, printable, tagOf, UsageError } from "./errors.js"
import { parseDims, splitAssignment } from "./inputs.js"
import { inspectRaw, rawText } from "./inspect-raw.js"
import { fusionSvg } from "../rewrite/fusion-svg.js"

export const INSPECT_FORMATS = ["text", "json", "dot", "svg"] as const
export type InspectFormat = (typeof INSPECT_FORMATS)[number]

export interface InspectOptions {
  readonly model: string
  readonly format: InspectFormat
  /** `NAME=1x3x224x224` specs binding symbolic dims (for shapes and FLOPs). */
  readonly shapes: readonly string[]
  readonly fused: boolean
  /** The supervisor's stop flag (SIGINT, SIGTERM, --deadline): checked at every pass of --fused. */
  readonly interrupt?: Interrupt
}

export interface InspectSummary {
  readonly model: string
  readonly graph: string
  readonly opset: number
  readonly inputs: readonly { readonly name: string; readonly type: string }[]
  readonly outputs: readonly { readonly name: string; readonly type: string }[]
  /** Operator counts, subgraphs (If/Loop/Scan bodies) included, most frequent first. */
  readonly ops: Readonly<Record<string, number>>
  readonly nodes: number
  /** Elements of the initializers and Constant tensors. */
  readonly parameters: number
  readonly parameterBytes: number
  /** Total FLOPs (multiply-add = 2) where every shape is known; null otherwise. */
  readonly flops: number | null
  /** Why shapes could not be inferred (then types are as declared). */
  readonly shapeError?: string
  readonly nodeList: readonly { readonly name: string; readonly op: string; readonly inputs: readonly string[]; readonly outputs: readonly string[] }[]
  readonly groups?: FusionReport["groups"]
  readonly memory?: FusionReport["memory"]
}

const opName = (domain: string, op: string) => (domain ? `${domain}.${op}` : op)

const countOps = (g: Graph, acc: Map<string, number>): void => {
  for (const n of g.nodes) {
    acc.set(opName(n.domain, n.op), (acc.get(opName(n.domain, n.op)) ?? 0) + 1)
    for (const a of Object.values(n.attrs)) {
      if (a.kind === "graph") countOps(a.value, acc)
      if (a.kind === "graphs") for (const s of a.value) countOps(s, acc)
    }
  }
}

const bytesOf = (t: Tensor): number => t.data.length * (t.dtype === "float16" || t.dtype === "bfloat16" ? 2 : t.data.BYTES_PER_ELEMENT)

const parameters = (g: Graph): { count: number; bytes: number } => {
  let count = 0
  let bytes = 0
  const add = (t: Tensor) => {
    count += t.data.length
    bytes += bytesOf(t)
  }
  for (const t of g.initializers.values()) add(t)
  for (const n of g.nodes) if (n.op === "Constant" && n.attrs.value?.kind === "tensor") add(n.attrs.value.value)
  return { count, bytes }
}

const fmtCount = (n: number) => n.toLocaleString("en-US")
const fmtBytes = (b: number) => (b >= 1 << 20 ? `${(b / (1 << 20)).toFixed(1)} MiB` : b >= 1024 ? `${(b / 1024).toFixed(1)} KiB` : `${b} B`)
const fmtFlops = (f: number) => (f >= 1e9 ? `${(f / 1e9).toFixed(2)} GFLOP` : f >= 1e6 ? `${(f / 1e6).toFixed(2)} MFLOP` : `${f} FLOP`)

/** Shapes inferred where possible; a model whose type relations fail is still shown as declared. */
const tryBind = (graph: Graph, shapes: ReadonlyMap<string, readonly number[]>): { bound: Graph; shapeError?: string } => {
  try {
    return { bound: bindSync(graph, shapes) }
  } catch (e) {
    if (!tagOf(e)) throw e
    return { bound: graph, shapeError: (e as Error).message }
  }
}

/**
 * A model Tessera cannot decode for lack of an operator, domain or opset is still described, from
 * its protobuf; other failures stay failures.
 */
const describeUnsupported = (o: InspectOptions, e: ReadModelError) =>
  Effect.gen(function* () {
    if (e._tag !== "UnsupportedOpError" && e._tag !== "UnsupportedModelError") return yield* Effect.fail(e)
    const raw = inspectRaw(o.model, yield* attempt(() => readBytesSync(o.model)), e.message)
    if (!raw) return yield* Effect.fail(e)
    return o.format === "json" ? JSON.stringify(raw) : o.format === "text" ? printable(rawText(raw)) : yield* Effect.fail(e)
  })

export const inspectModel = Effect.fn("cli.inspect")(function* (o: InspectOptions) {
  const decoded = yield* Effect.result(readModel(o.model))
  if (Result.isFailure(decoded)) return yield* describeUnsupported(o, decoded.failure)
  const graph = decoded.success
  const shapes = new Map<string, number[]>()
  for (const spec of o.shapes) {
    const { name, value } = yield* attempt(() => splitAssignment(spec, "--shape"))
    shapes.set(name, yield* attempt(() => parseDims(value, "--shape")))
  }
  const { bound, shapeError } = tryBind(graph, shapes)
  if (o.fused && shapeError) return yield* new UsageError({ flag: "--fused", reason: `fusion needs the model's shapes, and they cannot be inferred: ${shapeError}` })
  const ops = new Map<string, number>()
  countOps(graph, ops)
  const params = parameters(graph)
  const allStatic = [...bound.valueTypes.values()].every((t) => t.shape.every((d) => typeof d === "number"))
  const flops = shapeError === undefined && allStatic ? bound.nodes.reduce((s, n) => s + nodeFlops(bound, n), 0) : null
  const optimized = o.fused ? yield* optimizeAndPlan(bound).pipe(withPassConfig(o.interrupt ? { interrupt: o.interrupt } : {})) : undefined
  const report = optimized ? fusionReport(optimized, optimized.memory) : undefined
  const summary: InspectSummary = {
    model: o.model,
    graph: graph.name,
    opset: graph.opset,
    inputs: bound.inputs.map((i) => ({ name: i.name, type: showType(i.type) })),
    outputs: bound.outputs.map((i) => ({ name: i.name, type: showType(i.type) })),
    ops: Object.fromEntries([...ops].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))),
    nodes: graph.nodes.length,
    parameters: params.count,
    parameterBytes: params.bytes,
    flops,
    ...(shapeError ? { shapeError } : {}),
    nodeList: graph.nodes.map((n) => ({ name: n.name, op: opName(n.domain, n.op), inputs: n.inputs, outputs: n.outputs })),
    ...(report ? { groups: report.groups, memory: report.memory } : {}),
  }
  switch (o.format) {
    case "json":
      return JSON.stringify(summary)
    case "dot":
      return fusionDot(optimized ?? singletonGroups(bound))
    case "svg":
      return yield* fusionSvg(optimized ?? singletonGroups(bound))
    case "text": {
      const lines = [
        `model ${o.model}: graph '${graph.name}', opset ${graph.opset}`,
        `inputs:  ${summary.inputs.map((i) => `${i.name}: ${i.type}`).join(", ") || "none"}`,
        `outputs: ${summary.outputs.map((i) => `${i.name}: ${i.type}`).join(", ")}`,
        `nodes: ${summary.nodes}, parameters: ${fmtCount(params.count)} (${fmtBytes(params.bytes)})${flops !== null ? `, ${fmtFlops(flops)}` : ""}`,
        `ops: ${[...Object.entries(summary.ops)].map(([k, v]) => `${k}×${v}`).join(" ")}`,
      ]
      if (shapeError) lines.push(`shapes: not inferred (${shapeError})`)
      if (report) lines.push("", fusionText(report))
      lines.push("", printGraph(bound))
      // names come from the model: their control bytes are shown, never sent to the terminal
      return printable(lines.join("\n"))
    }
  }
})
