// The graph IR: immutable nodes in topological order over named values, with the types of those
// values (Dim, ValueType) and the raw attribute values nodes carry (an attribute may be a subgraph).
import type { DType } from "./dtype.js"
import type { Tensor } from "./tensor.js"

/** A static dim is a number; a symbolic or data-dependent dim is a name. */
export type Dim = number | string

export interface ValueType {
  readonly dtype: DType
  readonly shape: readonly Dim[]
}

/** An attribute value as decoded from ONNX (INT and INTS arrive as numbers). */
export type AttrValue =
  | { readonly kind: "int"; readonly value: number }
  | { readonly kind: "float"; readonly value: number }
  | { readonly kind: "string"; readonly value: string }
  | { readonly kind: "ints"; readonly value: readonly number[] }
  | { readonly kind: "floats"; readonly value: readonly number[] }
  | { readonly kind: "strings"; readonly value: readonly string[] }
  | { readonly kind: "tensor"; readonly value: Tensor }
  | { readonly kind: "tensors"; readonly value: readonly Tensor[] }
  | { readonly kind: "graph"; readonly value: Graph }
  | { readonly kind: "graphs"; readonly value: readonly Graph[] }

export type Attrs = Readonly<Record<string, AttrValue>>

export interface ValueInfo {
  readonly name: string
  readonly type: ValueType
}

export interface Node {
  readonly name: string
  readonly op: string
  /** "" for the default ONNX domain. */
  readonly domain: string
  /** Value names; "" marks an omitted optional input. */
  readonly inputs: readonly string[]
  readonly outputs: readonly string[]
  readonly attrs: Attrs
}

export interface Graph {
  readonly name: string
  /** Opset version of the default domain. */
  readonly opset: number
  /** Runtime inputs (initializers excluded). */
  readonly inputs: readonly ValueInfo[]
  readonly outputs: readonly ValueInfo[]
  readonly initializers: ReadonlyMap<string, Tensor>
  readonly nodes: readonly Node[]
  /** Types known for intermediate values (declared value_info, or inferred by `bind`). */
  readonly valueTypes: ReadonlyMap<string, ValueType>
}

export const makeGraph = (g: {
  name?: string
  opset: number
  inputs: readonly ValueInfo[]
  outputs: readonly ValueInfo[]
  initializers?: ReadonlyMap<string, Tensor>
  nodes: readonly Node[]
  valueTypes?: ReadonlyMap<string, ValueType>
}): Graph => ({
  name: g.name ?? "main",
  opset: g.opset,
  inputs: g.inputs,
  outputs: g.outputs,
  initializers: g.initializers ?? new Map(),
  nodes: g.nodes,
  valueTypes: g.valueTypes ?? new Map(),
})

export const node = (
  op: string,
  inputs: readonly string[],
  outputs: readonly string[],
  attrs: Attrs = {},
  name = outputs[0] ?? op,
  domain = "",
): Node => ({ name, op, domain, inputs, outputs, attrs })

// ---------------------------------------------------------------------------------------------
// Printing: a readable, stable text form (used by tests, goldens and --dump-ir).

const showDim = (d: Dim): string => (typeof d === "number" ? String(d) : d)
export const showType = (t: ValueType): string => `${t.dtype}[${t.shape.map(showDim).join(",")}]`

const showNumbers = (xs: ArrayLike<number | bigint>, max = 8): string => {
  const n = xs.length
  const parts: string[] = []
  for (let i = 0; i < Math.min(n, max); i++) parts.push(String(xs[i]))
  return n > max ? `${parts.join(", ")}, … (${n})` : parts.join(", ")
}

export const showTensor = (t: Tensor): string => `${t.dtype}[${t.shape.join(",")}]{${showNumbers(t.exact ?? t.data)}}`

const showAttr = (a: AttrValue): string => {
  switch (a.kind) {
    case "int":
    case "float":
      return String(a.value)
    case "string":
      return JSON.stringify(a.value)
    case "ints":
    case "floats":
      return `[${a.value.join(", ")}]`
    case "strings":
      return `[${a.value.map((s) => JSON.stringify(s)).join(", ")}]`
    case "tensor":
      return showTensor(a.value)
    case "tensors":
      return `[${a.value.map(showTensor).join(", ")}]`
    case "graph":
      return `graph(${a.value.name}, ${a.value.nodes.length} nodes)`
    case "graphs":
      return `[${a.value.map((g) => `graph(${g.name})`).join(", ")}]`
  }
}

export const showNode = (n: Node, types?: ReadonlyMap<string, ValueType>): string => {
  const outs = n.outputs.map((o) => (types?.get(o) ? `%${o}: ${showType(types.get(o)!)}` : `%${o}`)).join(", ")
  const ins = n.inputs.map((i) => (i === "" ? "_" : `%${i}`)).join(", ")
  const keys = Object.keys(n.attrs).sort()
  const attrs = keys.length ? ` {${keys.map((k) => `${k}=${showAttr(n.attrs[k])}`).join(", ")}}` : ""
  const op = n.domain ? `${n.domain}.${n.op}` : n.op
  return `${outs} = ${op}(${ins})${attrs}  # ${n.name}`
}

/** The whole graph as text. */
export const printGraph = (g: Graph): string => {
  const lines: string[] = []
  lines.push(`graph ${g.name} (opset ${g.opset}) {`)
  for (const i of g.inputs) lines.push(`  input %${i.name}: ${showType(i.type)}`)
  for (const [name, t] of [...g.initializers].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    lines.push(`  const %${name}: ${t.dtype}[${t.shape.join(",")}]`)
  for (const n of g.nodes) lines.push(`  ${showNode(n, g.valueTypes)}`)
  for (const o of g.outputs) lines.push(`  output %${o.name}: ${showType(o.type)}`)
  lines.push("}")
  return lines.join("\n")
}

// ---------------------------------------------------------------------------------------------
// Structural hashing and equality: names of intermediate values do not matter, only the
// dataflow, ops, attributes and constants.

const fnv = (h: number, s: string): number => {
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 16777619) >>> 0
  }
  return h
}

/** A hash of dtype, shape and the stored bytes (fast on real weights). */
const hashTensor = (t: Tensor): string => {
  let h = fnv(2166136261, `${t.dtype}[${t.shape.join(",")}]${t.exact ? "exact" : ""}`)
  // (an int64's exact values where it has them: its doubles may round two values to one)
  const d = t.exact ?? t.data
  const bytes = new Uint8Array(d.buffer, d.byteOffset, d.byteLength)
  let h2 = 0x811c9dc5
  for (let i = 0; i < bytes.length; i++) {
    h ^= bytes[i]
    h = Math.imul(h, 16777619) >>> 0
    h2 = (Math.imul(h2 ^ bytes[i], 0x01000193) + i) >>> 0
  }
  return `${h.toString(16)}${h2.toString(16)}`
}

const canonAttr = (a: AttrValue): string => {
  switch (a.kind) {
    case "tensor":
      return `tensor:${hashTensor(a.value)}`
    case "tensors":
      return `tensors:${a.value.map(hashTensor).join(",")}`
    case "graph":
      return `graph:${canonicalForm(a.value)}`
    case "graphs":
      return `graphs:${a.value.map(canonicalForm).join("|")}`
    default:
      return `${a.kind}:${JSON.stringify(a.value)}`
  }
}

/**
 * A canonical text of the graph with intermediate values renamed by position; two graphs are
 * structurally equal when their canonical forms are equal.
 */
export const canonicalForm = (g: Graph): string => {
  const rename = new Map<string, string>()
  g.inputs.forEach((i, k) => rename.set(i.name, `in${k}:${showType(i.type)}`))
  for (const [name, t] of g.initializers) rename.set(name, `const:${hashTensor(t)}`)
  const lines: string[] = []
  let v = 0
  for (const n of g.nodes) {
    const ins = n.inputs.map((i) => (i === "" ? "_" : (rename.get(i) ?? `outer:${i}`)))
    const outs = n.outputs.map((o) => {
      const r = `v${v++}`
      rename.set(o, r)
      return r
    })
    const keys = Object.keys(n.attrs).sort()
    lines.push(`${outs.join(",")}=${n.domain}.${n.op}(${ins.join(",")}){${keys.map((k) => `${k}=${canonAttr(n.attrs[k])}`).join(";")}}`)
  }
  lines.push(`out(${g.outputs.map((o) => rename.get(o.name) ?? o.name).join(",")})`)
  return lines.join("\n")
}

export const structuralHash = (g: Graph): string => fnv(2166136261, canonicalForm(g)).toString(16).padStart(8, "0")

export const structurallyEqual = (a: Graph, b: Graph): boolean => canonicalForm(a) === canonicalForm(b)

/** Every value name a graph's nodes consume, in first-use order. */
export const consumers = (g: Graph): ReadonlyMap<string, readonly Node[]> => {
  const m = new Map<string, Node[]>()
  for (const n of g.nodes)
    for (const i of n.inputs) {
      if (i === "") continue
      const l = m.get(i)
      if (l) l.push(n)
      else m.set(i, [n])
    }
  return m
}
