// rewrite.EliminateCommonSubexpr: nodes with the same op, attributes and inputs compute the same
// values; keep the first and read its outputs. Identical constants are merged first.
import type { AttrValue } from "../ast/graph/attrs.js"
import { subgraphFreeNames } from "../ast/graph/evaluate.js"
import type { Graph, Node } from "../ast/graph/graph.js"
import type { Tensor } from "../ast/graph/tensor.js"
import { graphPass } from "./pass.js"

/** dtype, shape and a hash of the stored bytes (fast on real weights). */
const tensorKey = (t: Tensor): string => {
  const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)
  let h = 2166136261
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i], 16777619) >>> 0
  return `${t.dtype}[${t.shape.join(",")}]#${h.toString(16)}#${t.data.length}`
}

const bytesOf = (t: Tensor) => new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)

/**
 * dtype, shape and a hash of at most 64 evenly spaced bytes: equal tensors get equal keys, and on
 * real weights unequal ones almost never do — without reading megabytes of weights per pass.
 */
const sampleKey = (t: Tensor): string => {
  const bytes = bytesOf(t)
  const n = bytes.length
  const step = Math.max(1, Math.floor(n / 64))
  let h = 2166136261
  for (let i = 0; i < n; i += step) h = Math.imul(h ^ bytes[i], 16777619) >>> 0
  return `${t.dtype}[${t.shape.join(",")}]#${h.toString(16)}#${t.data.length}`
}

/** Same dtype, shape and stored bytes (dtype and shape are in the key already). */
const sameBytes = (a: Tensor, b: Tensor): boolean => {
  const x = bytesOf(a)
  const y = bytesOf(b)
  if (x.length !== y.length) return false
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false
  return true
}

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
    const key = sampleKey(t)
    const same = (byKey.get(key) ?? []).find(([, u]) => sameBytes(t, u))
    if (same && !outputs.has(name)) rename.set(name, same[0])
    else {
      byKey.set(key, [...(byKey.get(key) ?? []), [name, t]])
      initializers.set(name, t)
    }
  }
  const seen = new Map<string, Node>()
  const nodes: Node[] = []
  for (const n0 of g.nodes) {
    const n = n0.inputs.some((i) => rename.has(i)) ? { ...n0, inputs: n0.inputs.map((i) => rename.get(i) ?? i) } : n0
    const key = nodeKey(n)
    const prev = key === undefined ? undefined : seen.get(key)
    if (prev && !n.outputs.some((o) => outputs.has(o))) {
      n.outputs.forEach((o, j) => o !== "" && rename.set(o, prev.outputs[j]))
      continue
    }
    if (key !== undefined && !prev) seen.set(key, n)
    nodes.push(n)
  }
  if (rename.size === 0) return g
  return { ...g, nodes, initializers }
}

export const eliminateCommonSubexpr = graphPass("rewrite.EliminateCommonSubexpr", 1, eliminateCommonSubexprSync)
