// rewrite.EliminateCommonSubexpr: nodes with the same op, attributes and inputs compute the same
// values; keep the first and read its outputs. Identical constants are merged first. Tensors
// (initializers, tensor attributes) are compared byte for byte within a bucket of one dtype and
// shape: no hash, so no collision can merge two that differ.
import type { AttrValue } from "../ast/graph/attrs.js"
import { subgraphFreeNames } from "../ast/graph/evaluate.js"
import type { Graph, Node } from "../ast/graph/graph.js"
import type { Tensor } from "../ast/graph/tensor.js"
import { graphPass } from "./pass.js"

const bytesOf = (t: Tensor) => new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)

/** Same dtype, shape and stored bytes (tensors of one dtype and shape: unequal ones differ early, on real weights). */
const sameTensor = (a: Tensor, b: Tensor): boolean => {
  if (a.dtype !== b.dtype || a.shape.join(",") !== b.shape.join(",")) return false
  const x = bytesOf(a)
  const y = bytesOf(b)
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false
  return true
}

/** A tensor's bucket: its dtype and shape (the bytes are compared within a bucket). */
const tensorKey = (t: Tensor): string => `${t.dtype}[${t.shape.join(",")}]`

const attrKey = (a: AttrValue): string | undefined => {
  switch (a.kind) {
    case "graph":
    case "graphs":
      return undefined // nodes with subgraphs are never merged
    case "tensor":
      return `t:${tensorKey(a.value)}`
    case "tensors":
      return `ts:${a.value.map(tensorKey).join(",")}`
    default:
      return `${a.kind}:${JSON.stringify(a.value)}`
  }
}

/** The tensors among a node's attributes, in key order (compared byte for byte between nodes of one key). */
const tensorsOf = (n: Node): Tensor[] =>
  Object.keys(n.attrs)
    .sort()
    .flatMap((k) => {
      const a = n.attrs[k]
      return a.kind === "tensor" ? [a.value] : a.kind === "tensors" ? a.value : []
    })

const nodeKey = (n: Node): string | undefined => {
  const attrs: string[] = []
  for (const k of Object.keys(n.attrs).sort()) {
    const v = attrKey(n.attrs[k])
    if (v === undefined) return undefined
    attrs.push(`${k}=${v}`)
  }
  return `${n.domain}.${n.op}(${n.inputs.join(",")})[${n.outputs.map((o) => (o === "" ? "_" : "o")).join("")}]{${attrs.join(";")}}`
}

export const eliminateCommonSubexprSync = (g: Graph): Graph => {
  const rename = new Map<string, string>()
  // names subgraphs read from this scope keep their identity (a rename would not reach inside)
  const pinned = new Set<string>(g.outputs.map((o) => o.name))
  for (const n of g.nodes) for (const a of Object.values(n.attrs)) if (a.kind === "graph") for (const f of subgraphFreeNames(a.value)) pinned.add(f)
  const outputs = pinned
  // merge identical initializers (a name that is a graph output keeps its own)
  const byKey = new Map<string, [string, Tensor][]>()
  const initializers = new Map<string, Tensor>()
  for (const [name, t] of g.initializers) {
    const bucket = byKey.get(tensorKey(t)) ?? []
    const same = bucket.find(([, u]) => sameTensor(t, u))
    if (same && !outputs.has(name)) rename.set(name, same[0])
    else {
      byKey.set(tensorKey(t), [...bucket, [name, t]])
      initializers.set(name, t)
    }
  }
  const seen = new Map<string, Node[]>()
  const nodes: Node[] = []
  for (const n0 of g.nodes) {
    const n = n0.inputs.some((i) => rename.has(i)) ? { ...n0, inputs: n0.inputs.map((i) => rename.get(i) ?? i) } : n0
    const key = nodeKey(n)
    if (key === undefined) {
      nodes.push(n)
      continue
    }
    const bucket = seen.get(key) ?? []
    const tensors = tensorsOf(n)
    const prev = bucket.find((m) => tensorsOf(m).every((t, i) => sameTensor(t, tensors[i])))
    if (prev && !n.outputs.some((o) => outputs.has(o))) {
      n.outputs.forEach((o, j) => o !== "" && rename.set(o, prev.outputs[j]))
      continue
    }
    if (!prev) seen.set(key, [...bucket, n])
    nodes.push(n)
  }
  if (rename.size === 0) return g
  return { ...g, nodes, initializers }
}

export const eliminateCommonSubexpr = graphPass("rewrite.EliminateCommonSubexpr", 1, eliminateCommonSubexprSync)
