// Graph → ONNX ModelProto bytes: the inverse of decode.ts, with @bufbuild/protobuf and onnx-buf's
// schema. Deterministic: the same graph gives the same bytes (attributes are written sorted by
// name; initializers, nodes and value_info in the graph's own order).
import { create, toBinary } from "@bufbuild/protobuf"
import {
  AttributeProto_AttributeType as AT,
  AttributeProtoSchema,
  GraphProtoSchema,
  ModelProtoSchema,
  NodeProtoSchema,
  OperatorSetIdProtoSchema,
  TensorShapeProto_DimensionSchema,
  TensorShapeProtoSchema,
  TypeProto_TensorSchema,
  TypeProtoSchema,
  ValueInfoProtoSchema,
  type AttributeProto,
  type GraphProto,
  type NodeProto,
  type TypeProto,
  type ValueInfoProto,
} from "onnx-buf"
import type { AttrValue } from "../graph/attrs.js"
import { DTYPE_ONNX } from "../graph/dtype.js"
import type { Graph, Node, ValueInfo } from "../graph/graph.js"
import type { ValueType } from "../graph/op.js"
import { encodeTensor } from "./tensor-proto.js"

/** The IR version written (ONNX 1.13+: opsets up to 18 in the default domain). */
export const IR_VERSION = 8
export const PRODUCER = "tessera"

export interface EncodeOptions {
  readonly producerVersion?: string
  readonly docString?: string
}

const utf8 = new TextEncoder()

/** decode.ts marks an unknown rank as a single string dim `NAME?rank`: written as "no shape". */
const unknownRank = (t: ValueType): boolean => t.shape.length === 1 && typeof t.shape[0] === "string" && t.shape[0].endsWith("?rank")

const encodeType = (t: ValueType): TypeProto =>
  create(TypeProtoSchema, {
    value: {
      case: "tensorType",
      value: create(TypeProto_TensorSchema, {
        elemType: DTYPE_ONNX[t.dtype],
        shape: unknownRank(t)
          ? undefined
          : create(TensorShapeProtoSchema, {
              dim: t.shape.map((d) =>
                create(TensorShapeProto_DimensionSchema, {
                  value: typeof d === "number" ? { case: "dimValue", value: BigInt(d) } : { case: "dimParam", value: d },
                }),
              ),
            }),
      }),
    },
  })

const encodeValueInfo = (v: ValueInfo): ValueInfoProto => create(ValueInfoProtoSchema, { name: v.name, type: encodeType(v.type) })

const encodeAttr = (name: string, a: AttrValue): AttributeProto => {
  switch (a.kind) {
    case "float":
      return create(AttributeProtoSchema, { name, type: AT.FLOAT, f: a.value })
    case "int":
      return create(AttributeProtoSchema, { name, type: AT.INT, i: BigInt(a.value) })
    case "string":
      return create(AttributeProtoSchema, { name, type: AT.STRING, s: utf8.encode(a.value) })
    case "tensor":
      return create(AttributeProtoSchema, { name, type: AT.TENSOR, t: encodeTensor(a.value, "") })
    case "graph":
      return create(AttributeProtoSchema, { name, type: AT.GRAPH, g: encodeGraph(a.value) })
    case "floats":
      return create(AttributeProtoSchema, { name, type: AT.FLOATS, floats: [...a.value] })
    case "ints":
      return create(AttributeProtoSchema, { name, type: AT.INTS, ints: a.value.map((x) => BigInt(x)) })
    case "strings":
      return create(AttributeProtoSchema, { name, type: AT.STRINGS, strings: a.value.map((s) => utf8.encode(s)) })
    case "tensors":
      return create(AttributeProtoSchema, { name, type: AT.TENSORS, tensors: a.value.map((t) => encodeTensor(t, "")) })
    case "graphs":
      return create(AttributeProtoSchema, { name, type: AT.GRAPHS, graphs: a.value.map(encodeGraph) })
  }
}

const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

const encodeNode = (n: Node): NodeProto =>
  create(NodeProtoSchema, {
    name: n.name,
    opType: n.op,
    domain: n.domain,
    input: [...n.inputs],
    output: [...n.outputs],
    attribute: Object.keys(n.attrs)
      .sort(byName)
      .map((k) => encodeAttr(k, n.attrs[k])),
  })

/** One GraphProto (subgraphs recursively). Initializers are not repeated among the inputs. */
export const encodeGraph = (g: Graph): GraphProto => {
  const declared = new Set<string>([...g.inputs.map((i) => i.name), ...g.outputs.map((o) => o.name), ...g.initializers.keys()])
  return create(GraphProtoSchema, {
    name: g.name,
    node: g.nodes.map(encodeNode),
    initializer: [...g.initializers].map(([name, t]) => encodeTensor(t, name)),
    input: g.inputs.map(encodeValueInfo),
    output: g.outputs.map(encodeValueInfo),
    valueInfo: [...g.valueTypes].filter(([name]) => !declared.has(name)).map(([name, type]) => encodeValueInfo({ name, type })),
  })
}

/** Non-default domains the graph's nodes use (subgraphs included), sorted. */
const domainsOf = (g: Graph, acc = new Set<string>()): Set<string> => {
  for (const n of g.nodes) {
    if (n.domain !== "" && n.domain !== "ai.onnx") acc.add(n.domain)
    for (const a of Object.values(n.attrs)) {
      if (a.kind === "graph") domainsOf(a.value, acc)
      else if (a.kind === "graphs") for (const s of a.value) domainsOf(s, acc)
    }
  }
  return acc
}

/**
 * The ModelProto bytes of `graph`: ir_version 8, the default domain at `graph.opset` (other
 * domains its nodes use at version 1), producer "tessera".
 */
export const encodeOnnx = (graph: Graph, options: EncodeOptions = {}): Uint8Array => {
  const others = [...domainsOf(graph)].sort(byName)
  const model = create(ModelProtoSchema, {
    irVersion: BigInt(IR_VERSION),
    producerName: PRODUCER,
    producerVersion: options.producerVersion ?? "",
    docString: options.docString ?? "",
    opsetImport: [
      create(OperatorSetIdProtoSchema, { domain: "", version: BigInt(graph.opset) }),
      ...others.map((domain) => create(OperatorSetIdProtoSchema, { domain, version: 1n })),
    ],
    graph: encodeGraph(graph),
  })
  return toBinary(ModelProtoSchema, model)
}
