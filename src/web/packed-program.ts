// A compiled program as one binary a runtime loads without the compiler: what the executor needs
// (the optimized graph with its constants, the fused groups, the memory plan, the kernels in run
// order — their names, groups, arguments and outputs; a fallback group's nodes and reason), not
// the kernels' TIR or schedules. Layout: "TSRP", version, the JSON's byte length (u32 LE each), the
// JSON, then each tensor's bytes 64-byte aligned where the JSON points. Pure and deterministic:
// the same program, the same bytes.
import { Data } from "effect"
import { allocate, type DType } from "../ast/graph/dtype.js"
import type { AttrValue, Graph, Node } from "../ast/graph/graph.js"
import type { Tensor } from "../ast/graph/tensor.js"
import type { RunnableProgram } from "../lowering/program.js"

/** What the executor runs: a Program less its kernels' TIR and schedules. */
export type PackedProgram = RunnableProgram

const MAGIC = 0x50525354 // "TSRP"
const VERSION = 1
const ALIGN = 64

interface TensorRef {
  readonly dtype: DType
  readonly shape: readonly number[]
  readonly at: number
  readonly bytes: number
  readonly exact?: { readonly signed: boolean; readonly at: number }
}

/** The program's bytes. */
export const packProgram = (program: PackedProgram): Uint8Array => {
  const chunks: Uint8Array[] = []
  let size = 0
  const put = (a: ArrayBufferView): number => {
    size = Math.ceil(size / ALIGN) * ALIGN
    const at = size
    chunks.push(new Uint8Array(a.buffer, a.byteOffset, a.byteLength))
    size += a.byteLength
    return at
  }
  const offsets: number[] = []
  const tensor = (t: Tensor): TensorRef => {
    const at = put(t.data)
    offsets.push(at)
    const exact = t.exact ? { signed: t.exact instanceof BigInt64Array, at: (offsets.push(put(t.exact)), offsets[offsets.length - 1]) } : undefined
    return { dtype: t.dtype, shape: t.shape, at, bytes: t.data.byteLength, ...(exact ? { exact } : {}) }
  }
  const attr = (a: AttrValue): unknown =>
    a.kind === "tensor" ? { kind: a.kind, value: tensor(a.value) }
    : a.kind === "tensors" ? { kind: a.kind, value: a.value.map(tensor) }
    : a.kind === "graph" ? { kind: a.kind, value: graph(a.value) }
    : a.kind === "graphs" ? { kind: a.kind, value: a.value.map(graph) }
    : a
  const node = (n: Node) => ({ ...n, attrs: Object.fromEntries(Object.entries(n.attrs).map(([k, v]) => [k, attr(v)])) })
  const graph = (g: Graph): unknown => ({
    name: g.name,
    opset: g.opset,
    inputs: g.inputs,
    outputs: g.outputs,
    initializers: [...g.initializers].map(([k, t]) => [k, tensor(t)]),
    nodes: g.nodes.map(node),
    valueTypes: [...g.valueTypes],
  })
  const main = graph(program.graph)
  const json = JSON.stringify({
    graph: main,
    // (the fused graph is the program's graph: written once)
    groups: program.fused.groups,
    memory: program.memory,
    kernels: program.kernels.map((k) => (k.kind === "compiled" ? { kind: k.kind, group: k.group, name: k.name, args: k.args, outputs: k.outputs } : { ...k, nodes: k.nodes.map(node) })),
  })
  const text = new TextEncoder().encode(json)
  const head = Math.ceil((12 + text.length) / ALIGN) * ALIGN
  const out = new Uint8Array(head + size)
  const h = new DataView(out.buffer)
  h.setUint32(0, MAGIC, true)
  h.setUint32(4, VERSION, true)
  h.setUint32(8, text.length, true)
  out.set(text, 12)
  chunks.forEach((c, k) => out.set(c, head + offsets[k]))
  return out
}

/** Not a packed program, or a version this runtime does not read. */
export class PackedProgramError extends Data.TaggedError("PackedProgramError")<{ readonly reason: string }> {
  override get message(): string {
    return `${this.reason}: rebuild the model's module with this version of tessera`
  }
}

/** The program from its bytes (tensors are copies: aligned for their typed arrays). */
export const unpackProgram = (bytes: Uint8Array): PackedProgram => {
  if (bytes.length < 12) throw new PackedProgramError({ reason: "the packed program is truncated" })
  const h = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  if (h.getUint32(0, true) !== MAGIC) throw new PackedProgramError({ reason: "not a packed Tessera program" })
  if (h.getUint32(4, true) !== VERSION) throw new PackedProgramError({ reason: `packed program version ${h.getUint32(4, true)}, this runtime reads ${VERSION}` })
  const length = h.getUint32(8, true)
  const head = Math.ceil((12 + length) / ALIGN) * ALIGN
  const j = JSON.parse(new TextDecoder().decode(bytes.subarray(12, 12 + length)))
  const copy = <T extends ArrayBufferView>(make: (n: number) => T, at: number, n: number): T => {
    const a = make(n)
    new Uint8Array(a.buffer).set(bytes.subarray(head + at, head + at + a.byteLength))
    return a
  }
  const tensor = (r: TensorRef): Tensor => {
    const elements = r.bytes / allocate(r.dtype, 0).BYTES_PER_ELEMENT
    const data = copy((n) => allocate(r.dtype, n), r.at, elements)
    const exact = r.exact ? copy((n) => (r.exact!.signed ? new BigInt64Array(n) : new BigUint64Array(n)), r.exact.at, elements) : undefined
    return { dtype: r.dtype, shape: r.shape, data, ...(exact ? { exact } : {}) }
  }
  const attr = (a: { kind: string; value: unknown }): AttrValue =>
    a.kind === "tensor" ? { kind: "tensor", value: tensor(a.value as TensorRef) }
    : a.kind === "tensors" ? { kind: "tensors", value: (a.value as TensorRef[]).map(tensor) }
    : a.kind === "graph" ? { kind: "graph", value: graph(a.value) }
    : a.kind === "graphs" ? { kind: "graphs", value: (a.value as unknown[]).map(graph) }
    : (a as AttrValue)
  const node = (n: Node): Node => ({ ...n, attrs: Object.fromEntries(Object.entries(n.attrs as Record<string, { kind: string; value: unknown }>).map(([k, v]) => [k, attr(v)])) })
  function graph(x: unknown): Graph {
    const g = x as { name: string; opset: number; inputs: Graph["inputs"]; outputs: Graph["outputs"]; initializers: [string, TensorRef][]; nodes: Node[]; valueTypes: [string, never][] }
    return {
      name: g.name,
      opset: g.opset,
      inputs: g.inputs,
      outputs: g.outputs,
      initializers: new Map(g.initializers.map(([k, t]) => [k, tensor(t)] as const)),
      nodes: g.nodes.map(node),
      valueTypes: new Map(g.valueTypes),
    }
  }
  const main = graph(j.graph)
  return {
    graph: main,
    fused: { groups: j.groups },
    memory: j.memory,
    kernels: (j.kernels as PackedProgram["kernels"]).map((k) => (k.kind === "compiled" ? k : { ...k, nodes: k.nodes.map(node) })),
  }
}
