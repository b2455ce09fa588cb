// ONNX ModelProto bytes → Graph. Protobuf parsing is @bufbuild/protobuf with onnx-buf's
// schema; this file maps the messages onto the graph IR and checks what the IR relies on.
import { fromBinary } from "@bufbuild/protobuf"
import { Effect } from "effect"
import {
  ModelProtoSchema,
  type AttributeProto,
  type GraphProto,
  type NodeProto,
  type TypeProto,
  type ValueInfoProto,
} from "onnx-buf"
import type { AttrValue } from "../graph/attrs.js"
import { ONNX_DTYPE, ONNX_DTYPE_NAME } from "../graph/dtype.js"
import { UnsupportedOpError, NodeError } from "../graph/errors.js"
import { DEFAULT_DOMAINS, resolveNode } from "../graph/evaluate.js"
import { MICROSOFT_DOMAIN } from "../graph/ops/index.js"
import type { Graph, Node, ValueInfo } from "../graph/graph.js"
import { LIMITS, showCount } from "../graph/limits.js"
import type { Dim, ValueType } from "../graph/op.js"
import { wideTensor, type Tensor } from "../graph/tensor.js"
import { DecodeError, UnsupportedModelError } from "./errors.js"
import { alignRawData, decodeTensor, type ByteMove, type ExternalReader, type UnreadRaw } from "./tensor-proto.js"

/** Default-domain opsets Tessera decodes. */
export const MIN_OPSET = 1
export const MAX_OPSET = 28

export interface DecodeOptions {
  /** Reads external data files relative to the model's folder (given by the CLI / device layer). */
  readonly readExternal?: ExternalReader
  /**
   * The bytes (and what readExternal returns) belong to the decode: nobody reads or writes them
   * afterwards. Then the tensors' raw data become views onto them, not copies, after each is moved
   * by a few bytes over its own field's header to its element's alignment (alignRawData): the bytes
   * are changed, and the graph's tensors alias them. For a buffer read from a file just for this.
   */
  readonly adoptBytes?: boolean
  /** How adopted bytes are moved to their alignment (by default copyWithin): the file reader reads them from the file again, cheaper where a page's first write is dear (alignRawData). */
  readonly moveBytes?: ByteMove
  /**
   * Raw data the reader left out of `bytes` (zero there; src/device/model-bytes.ts: a large
   * initializer's, kept in the file): how to read it, for a raw_data field's view onto `bytes`,
   * or undefined for one that is there. Such a weight becomes a stored tensor (deferred.ts), read
   * when asked; one of a dtype whose array does not hold raw_data's bytes is read into place.
   */
  readonly unread?: UnreadRaw
}

export type OnnxDecodeError = DecodeError | UnsupportedModelError | UnsupportedOpError | NodeError

const utf8 = new TextDecoder("utf-8", { fatal: false })

interface Ctx {
  readonly opset: number
  readonly readExternal?: ExternalReader
  /** Raw data as views onto the adopted bytes where aligned (DecodeOptions.adoptBytes). */
  readonly views: boolean
  readonly unread?: UnreadRaw
  /** How many graphs enclose the one being decoded (0 for the model's graph). */
  readonly depth: number
  /** Nodes decoded so far, subgraphs included (shared by the whole model). */
  readonly count: { nodes: number }
}

/** The context for a subgraph of a graph decoded in `ctx`. */
const inner = (ctx: Ctx): Ctx => ({ ...ctx, depth: ctx.depth + 1 })

const decodeType = (tp: TypeProto | undefined, where: string, nameForUnknown: string, untypedOk = false): ValueType => {
  // subgraph values may be untyped (bodies expanded from function ops): unknown rank, marked
  if ((!tp || tp.value.case === undefined) && untypedOk) return { dtype: "float32", shape: [`${nameForUnknown}?rank`] }
  if (!tp || tp.value.case === undefined) throw new DecodeError({ where, reason: "has no type" })
  if (tp.value.case !== "tensorType")
    throw new UnsupportedModelError({ where, feature: `${tp.value.case.replace("Type", "")} values (only tensors are supported)` })
  const tt = tp.value.value
  const dtype = ONNX_DTYPE[tt.elemType]
  if (!dtype)
    throw ONNX_DTYPE_NAME[tt.elemType] !== undefined
      ? new UnsupportedModelError({ where, feature: `element type ${ONNX_DTYPE_NAME[tt.elemType]}` })
      : new DecodeError({ where, reason: `unknown element type ${tt.elemType}` })
  if (!tt.shape) return { dtype, shape: [`${nameForUnknown}?rank`] } // unknown rank: marked
  const shape: Dim[] = tt.shape.dim.map((d, k) => {
    if (d.value.case === "dimValue") {
      const v = d.value.value
      if (v < 0n) throw new DecodeError({ where, reason: `dim ${k} is negative (${v})` })
      if (v > 2n ** 31n) throw new DecodeError({ where, reason: `dim ${k} is too large (${v})` })
      return Number(v)
    }
    if (d.value.case === "dimParam" && d.value.value !== "") return d.value.value
    return `${nameForUnknown}.${k}`
  })
  return { dtype, shape }
}

const decodeValueInfo = (v: ValueInfoProto, where: string, untypedOk = false): ValueInfo => ({
  name: v.name,
  type: decodeType(v.type, `${where} '${v.name}'`, v.name, untypedOk),
})

const decodeAttr = (a: AttributeProto, where: string, ctx: Ctx): AttrValue => {
  const w = `${where} attribute '${a.name}'`
  if (a.refAttrName) throw new UnsupportedModelError({ where: w, feature: "attribute references (model-local functions)" })
  switch (a.type) {
    case 1:
      return { kind: "float", value: a.f }
    case 2:
      return { kind: "int", value: Number(a.i) }
    case 3:
      return { kind: "string", value: utf8.decode(a.s) }
    case 4:
      if (!a.t) throw new DecodeError({ where: w, reason: "TENSOR attribute without a tensor" })
      return { kind: "tensor", value: decodeTensor(a.t, w, ctx.readExternal, ctx.views) }
    case 5:
      if (!a.g) throw new DecodeError({ where: w, reason: "GRAPH attribute without a graph" })
      return { kind: "graph", value: decodeGraph(a.g, inner(ctx), w) }
    case 6:
      return { kind: "floats", value: [...a.floats] }
    case 7:
      return { kind: "ints", value: a.ints.map(Number) }
    case 8:
      return { kind: "strings", value: a.strings.map((s) => utf8.decode(s)) }
    case 9:
      return { kind: "tensors", value: a.tensors.map((t, k) => decodeTensor(t, `${w}[${k}]`, ctx.readExternal, ctx.views)) }
    case 10:
      return { kind: "graphs", value: a.graphs.map((g, k) => decodeGraph(g, inner(ctx), `${w}[${k}]`)) }
    case 11:
    case 12:
      throw new UnsupportedModelError({ where: w, feature: "sparse tensor attributes" })
    case 13:
    case 14:
      throw new UnsupportedModelError({ where: w, feature: "type-proto attributes" })
    default:
      // type UNDEFINED: older exporters; infer from the field that is set
      if (a.ints.length) return { kind: "ints", value: a.ints.map(Number) }
      if (a.floats.length) return { kind: "floats", value: [...a.floats] }
      if (a.strings.length) return { kind: "strings", value: a.strings.map((s) => utf8.decode(s)) }
      if (a.t) return { kind: "tensor", value: decodeTensor(a.t, w, ctx.readExternal, ctx.views) }
      if (a.g) return { kind: "graph", value: decodeGraph(a.g, inner(ctx), w) }
      if (a.s.length) return { kind: "string", value: utf8.decode(a.s) }
      if (a.f !== 0) return { kind: "float", value: a.f }
      return { kind: "int", value: Number(a.i) }
  }
}

/**
 * A Constant's value_int / value_ints that a double does not hold (past 2^53): kept exactly, as
 * the int64 tensor they mean — decoded as its `value` attribute, since an int attribute holds a
 * number. Others (every other attribute, and these where each value is a double): undefined.
 */
const constantInts = (op: string, domain: string, a: AttributeProto): AttrValue | undefined => {
  if (op !== "Constant" || (domain !== "" && domain !== "ai.onnx") || (a.name !== "value_int" && a.name !== "value_ints") || a.refAttrName) return undefined
  const vs = a.name === "value_int" ? [a.i] : a.ints
  if (vs.every((v) => BigInt(Number(v)) === v)) return undefined
  return { kind: "tensor", value: wideTensor("int64", a.name === "value_int" ? [] : [vs.length], BigInt64Array.from(vs)) }
}

const decodeNode = (n: NodeProto, index: number, ctx: Ctx, where: string): Node => {
  const name = n.name !== "" ? n.name : `${n.opType}_${index}`
  const w = `${where} node '${name}' (${n.opType})`
  const attrs: Record<string, AttrValue> = {}
  for (const a of n.attribute) {
    if (Object.prototype.hasOwnProperty.call(attrs, a.name)) throw new DecodeError({ where: w, reason: `attribute '${a.name}' given twice` })
    const exact = constantInts(n.opType, n.domain, a)
    if (exact && Object.prototype.hasOwnProperty.call(attrs, "value")) throw new DecodeError({ where: w, reason: `attributes 'value' and '${a.name}' both given` })
    if (exact) attrs.value = exact
    else attrs[a.name] = decodeAttr(a, w, ctx)
  }
  // trailing empty outputs are the same as absent ones
  const outputs = [...n.output]
  while (outputs.length && outputs[outputs.length - 1] === "") outputs.pop()
  const domain = n.domain === "ai.onnx" ? "" : n.domain
  const node: Node = { name, op: n.opType, domain, inputs: [...n.input], outputs, attrs }
  if (!DEFAULT_DOMAINS.has(domain) && domain !== MICROSOFT_DOMAIN)
    throw new UnsupportedOpError({ node: name, op: n.opType, domain, reason: `operator domain '${domain}' is not supported (only the default ONNX domain and ${MICROSOFT_DOMAIN}'s quantized ops are)` })
  resolveNode(node) // known domain and op, valid attributes, arity — or a typed error naming node, op and domain
  return node
}

const decodeGraph = (g: GraphProto, ctx: Ctx, where: string): Graph => {
  if (ctx.depth > LIMITS.subgraphDepth)
    throw new UnsupportedModelError({ where, feature: `subgraphs nested more than ${LIMITS.subgraphDepth} deep (Tessera's limit)` })
  ctx.count.nodes += g.node.length
  if (ctx.count.nodes > LIMITS.nodes)
    throw new UnsupportedModelError({ where, feature: `more than ${showCount(LIMITS.nodes)} nodes, subgraphs included (Tessera's limit)` })
  if (g.sparseInitializer.length) throw new UnsupportedModelError({ where, feature: "sparse initializers" })
  const initializers = new Map<string, Tensor>()
  for (const t of g.initializer) {
    if (t.name === "") throw new DecodeError({ where, reason: "an initializer has no name" })
    initializers.set(t.name, decodeTensor(t, `${where} initializer '${t.name}'`, ctx.readExternal, ctx.views, ctx.unread))
  }
  const sub = where !== "graph"
  const inputs = g.input.filter((i) => !initializers.has(i.name)).map((i) => decodeValueInfo(i, `${where} input`, sub))
  const outputs = g.output.map((o) => decodeValueInfo(o, `${where} output`, sub))
  const used = new Set<string>()
  const nodes = g.node.map((n, k) => {
    const d = decodeNode(n, k, ctx, where)
    // node names are labels: make them unique so passes and reports can key on them
    let name = d.name
    for (let j = 1; used.has(name); j++) name = `${d.name}_${j}`
    used.add(name)
    return name === d.name ? d : { ...d, name }
  })
  const valueTypes = new Map<string, ValueType>()
  for (const v of g.valueInfo) {
    if (v.type?.value.case !== "tensorType") continue
    try {
      valueTypes.set(v.name, decodeValueInfo(v, `${where} value_info`).type)
    } catch {
      // value_info is a hint: an unusable one is ignored, not fatal
    }
  }
  // Constant nodes, inputs and initializers define values once; nodes must be in topological order.
  const defined = new Set<string>([...inputs.map((i) => i.name), ...initializers.keys()])
  for (const n of nodes) {
    for (const o of n.outputs)
      if (o !== "" && defined.has(o) && !initializers.has(o))
        throw new DecodeError({ where: `${where} node '${n.name}'`, reason: `value '${o}' is defined twice` })
    for (const o of n.outputs) defined.add(o)
  }
  return { name: g.name || "main", opset: ctx.opset, inputs, outputs, initializers, nodes, valueTypes }
}

/** Checks that every node input is defined before use (top-level graph; subgraphs may see outer names). */
const checkTopological = (g: Graph): void => {
  const defined = new Set<string>([...g.inputs.map((i) => i.name), ...g.initializers.keys()])
  for (const n of g.nodes) {
    for (const i of n.inputs)
      if (i !== "" && !defined.has(i))
        throw new DecodeError({
          where: `node '${n.name}' (${n.op})`,
          reason: `input '${i}' is not produced by any earlier node, input or initializer (nodes must be in topological order)`,
        })
    for (const o of n.outputs) defined.add(o)
  }
  for (const o of g.outputs)
    if (!defined.has(o.name)) throw new DecodeError({ where: `graph output '${o.name}'`, reason: "is not produced by any node" })
}

/** Every TensorProto of a graph (initializers, attribute tensors, subgraphs' too) moved to its alignment (alignRawData); a subgraph past the depth limit is left to decodeGraph to refuse. */
const alignGraph = (g: GraphProto, depth: number, move?: ByteMove, unread?: UnreadRaw): void => {
  if (depth > LIMITS.subgraphDepth) return
  // raw data left in the file is read into an array of its own, aligned: not moved
  for (const t of g.initializer) if (unread?.(t.rawData) === undefined) alignRawData(t, move)
  for (const n of g.node)
    for (const a of n.attribute) {
      if (a.t) alignRawData(a.t, move)
      for (const t of a.tensors) alignRawData(t, move)
      if (a.g) alignGraph(a.g, depth + 1, move)
      for (const s of a.graphs) alignGraph(s, depth + 1, move)
    }
}

/** Decodes ModelProto bytes into a Graph (plain function; throws the typed errors). */
export const decodeModelSync = (bytes: Uint8Array, options: DecodeOptions = {}): Graph => {
  if (bytes.length === 0) throw new DecodeError({ where: "model", reason: "the file is empty" })
  let model
  try {
    model = fromBinary(ModelProtoSchema, bytes, { readUnknownFields: false })
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e)
    // a well-formed model can nest subgraphs past the protobuf reader's depth (about 30 If / Loop levels)
    if (/maximum recursion depth/.test(why))
      throw new UnsupportedModelError({ where: "model", feature: `messages nested deeper than the protobuf reader allows (${why.replace(/^.*(maximum recursion depth[^)]*)$/, "$1")}): subgraphs nested about 30 deep or more` })
    throw new DecodeError({ where: "model", reason: `not a valid ONNX protobuf (${why})` })
  }
  if (!model.graph) throw new DecodeError({ where: "model", reason: "has no graph (is this an ONNX model file?)" })
  const imports = model.opsetImport.filter((o) => o.domain === "" || o.domain === "ai.onnx")
  const opset = imports.length ? Number(imports[0].version) : model.irVersion > 0n && model.irVersion < 3n ? 1 : NaN
  if (!Number.isFinite(opset)) {
    const others = [...new Set(model.opsetImport.map((o) => o.domain))]
    if (others.length)
      throw new UnsupportedModelError({ where: "model", feature: `it imports only the domain(s) ${others.join(", ")}; Tessera supports the default ONNX domain` })
    throw new DecodeError({ where: "model", reason: "imports no opset at all (opset_import is empty)" })
  }
  if (opset > MAX_OPSET)
    throw new UnsupportedModelError({ where: "model", feature: `opset ${opset} is newer than the newest supported (${MAX_OPSET}); re-export with opset ≤ ${MAX_OPSET}` })
  if (opset < MIN_OPSET) throw new DecodeError({ where: "model", reason: `opset ${opset} is not a valid version` })
  // onnxruntime's contrib domain: its ops are all at version 1 (their nodes are checked one by one)
  for (const o of model.opsetImport)
    if (o.domain === MICROSOFT_DOMAIN && o.version !== 1n)
      throw new UnsupportedModelError({ where: "model", feature: `${MICROSOFT_DOMAIN} opset ${o.version} (Tessera knows version 1, the only one onnxruntime defines)` })
  const views = options.adoptBytes === true
  if (views) alignGraph(model.graph, 0, options.moveBytes, options.unread)
  const g = decodeGraph(model.graph, { opset, readExternal: options.readExternal, views, unread: options.unread, depth: 0, count: { nodes: 0 } }, "graph")
  checkTopological(g)
  return g
}

const isTyped = (e: unknown): e is OnnxDecodeError =>
  e instanceof DecodeError || e instanceof UnsupportedModelError || e instanceof UnsupportedOpError || e instanceof NodeError

/** Decodes ModelProto bytes into a Graph. */
export const decodeOnnx = (bytes: Uint8Array, options: DecodeOptions = {}): Effect.Effect<Graph, OnnxDecodeError> =>
  Effect.try({
    try: () => decodeModelSync(bytes, options),
    catch: (e) => (isTyped(e) ? e : new DecodeError({ where: "model", reason: e instanceof Error ? e.message : String(e) })),
  })
