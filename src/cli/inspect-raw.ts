// `tessera inspect` for a model Tessera cannot decode into its graph IR (an operator, domain or
// opset it does not support): the protobuf is read as is, so the user still sees the model's
// inputs, outputs and operators, and which of them stand in the way.
import { fromBinary } from "@bufbuild/protobuf"
import { ModelProtoSchema, type GraphProto, type TypeProto } from "onnx-buf"
import { ONNX_DTYPE, ONNX_DTYPE_NAME } from "../ast/graph/dtype.js"
import { lookupOp, MICROSOFT_DOMAIN } from "../ast/graph/ops/index.js"

export interface RawInspectSummary {
  readonly model: string
  readonly graph: string
  readonly opset: number | null
  readonly inputs: readonly { readonly name: string; readonly type: string }[]
  readonly outputs: readonly { readonly name: string; readonly type: string }[]
  readonly ops: Readonly<Record<string, number>>
  readonly nodes: number
  /** Operators Tessera does not have, with their counts. */
  readonly unsupported: Readonly<Record<string, number>>
  /** Why Tessera cannot run the model. */
  readonly error: string
}

const showRawType = (t: TypeProto | undefined): string => {
  if (t?.value.case !== "tensorType") return t?.value.case ?? "?"
  const tt = t.value.value
  const dtype = ONNX_DTYPE[tt.elemType] ?? ONNX_DTYPE_NAME[tt.elemType] ?? `type${tt.elemType}`
  if (!tt.shape) return `${dtype}[?]`
  return `${dtype}[${tt.shape.dim.map((d) => (d.value.case === "dimValue" ? String(d.value.value) : d.value.case === "dimParam" ? d.value.value : "?")).join(",")}]`
}

const walk = (g: GraphProto, ops: Map<string, number>, unsupported: Map<string, number>): void => {
  for (const n of g.node) {
    const domain = n.domain === "ai.onnx" ? "" : n.domain
    const key = domain ? `${domain}.${n.opType}` : n.opType
    ops.set(key, (ops.get(key) ?? 0) + 1)
    if ((domain !== "" && domain !== MICROSOFT_DOMAIN) || !lookupOp(n.opType, domain)) unsupported.set(key, (unsupported.get(key) ?? 0) + 1)
    for (const a of n.attribute) {
      if (a.g) walk(a.g, ops, unsupported)
      for (const s of a.graphs) walk(s, ops, unsupported)
    }
  }
}

const sortedCounts = (m: Map<string, number>) => Object.fromEntries([...m].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)))

/** The raw summary, or undefined when the bytes are not even a ModelProto. */
export const inspectRaw = (model: string, bytes: Uint8Array, error: string): RawInspectSummary | undefined => {
  let m
  try {
    m = fromBinary(ModelProtoSchema, bytes, { readUnknownFields: false })
  } catch {
    return undefined
  }
  if (!m.graph) return undefined
  const g = m.graph
  const initializers = new Set(g.initializer.map((t) => t.name))
  const ops = new Map<string, number>()
  const unsupported = new Map<string, number>()
  walk(g, ops, unsupported)
  const opset = m.opsetImport.find((o) => o.domain === "" || o.domain === "ai.onnx")
  return {
    model,
    graph: g.name,
    opset: opset ? Number(opset.version) : null,
    inputs: g.input.filter((i) => !initializers.has(i.name)).map((i) => ({ name: i.name, type: showRawType(i.type) })),
    outputs: g.output.map((o) => ({ name: o.name, type: showRawType(o.type) })),
    ops: sortedCounts(ops),
    nodes: g.node.length,
    unsupported: sortedCounts(unsupported),
    error,
  }
}

export const rawText = (r: RawInspectSummary): string =>
  [
    `model ${r.model}: graph '${r.graph}', opset ${r.opset ?? "?"}`,
    `inputs:  ${r.inputs.map((i) => `${i.name}: ${i.type}`).join(", ") || "none"}`,
    `outputs: ${r.outputs.map((i) => `${i.name}: ${i.type}`).join(", ")}`,
    `nodes: ${r.nodes}`,
    `ops: ${Object.entries(r.ops).map(([k, v]) => `${k}×${v}`).join(" ")}`,
    `unsupported ops: ${Object.entries(r.unsupported).map(([k, v]) => `${k}×${v}`).join(" ") || "none"}`,
    `Tessera cannot run this model: ${r.error}`,
  ].join("\n")
