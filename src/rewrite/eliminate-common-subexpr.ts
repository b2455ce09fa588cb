// rewrite.EliminateCommonSubexpr: nodes with the same op, attributes and inputs compute the same
// values; keep the first and read its outputs. Identical constants are merged first. Tensors
// (initializers, tensor attributes) are compared byte for byte within a bucket of one dtype and
// shape: no hash, so no collision can merge two that differ.
import { subgraphFreeNames } from "../ast/graph/evaluate.js"
import type { Graph, Node } from "../ast/graph/graph.js"
import { sizeOf, type Tensor } from "../ast/graph/tensor.js"
import { allocate } from "../ast/graph/dtype.js"
import { pendingRecipe, readInto } from "../ast/graph/deferred.js"
import { graphPass } from "./pass.js"

/** The stored bytes: an int64's exact values where it has them (its doubles may round two apart to one). */
const bytesOf = (t: Tensor) => {
  const d = t.exact ?? t.data
  return new Uint8Array(d.buffer, d.byteOffset, d.byteLength)
}

/** Same stored bytes, for tensors of one bucket (one dtype and shape): unequal weights differ early. */
const sameBytes = (a: Tensor, b: Tensor): boolean => {
  if (pendingRecipe(a) || pendingRecipe(b)) return sameChunks(a, b)
  const y = bytesOf(b)
  return bytesOf(a).every((x, i) => x === y[i])
}

/** Elements compared a chunk at a time (their stored bytes), so a deferred weight (a pending BatchNorm fold) is not computed whole to find that it differs. */
const CHUNK = 1024
const sameChunks = (a: Tensor, b: Tensor): boolean => {
  const n = sizeOf(a.shape)
  for (let start = 0; start < n; start += CHUNK) {
    const len = Math.min(CHUNK, n - start)
    const [x, y] = [readInto(a, start, allocate(a.dtype, len)), readInto(b, start, allocate(b.dtype, len))]
    const [bx, by] = [new Uint8Array(x.buffer, x.byteOffset, x.byteLength), new Uint8Array(y.buffer, y.byteOffset, y.byteLength)]
    if (!bx.every((v, i) => v === by[i])) return false
  }
  return true
}

/** A tensor's bucket: its dtype and shape (the bytes are compared within a bucket). */
const tensorKey = (t: Tensor): string => JSON.stringify([t.dtype, t.shape, t.exact !== undefined])

interface Keyed {
  readonly node: Node
  /** The node's tensor attributes, in key order: compared byte for byte between nodes of one key. */
  readonly tensors: readonly Tensor[]
}

/** A node's domain, op, inputs, named outputs and attributes (tensors by their bucket); none for a node with a subgraph. */
const nodeKey = (n: Node): { readonly key: string; readonly tensors: readonly Tensor[] } | undefined => {
  const names = Object.keys(n.attrs).sort()
  const attrs = names.map((k) => n.attrs[k])
  if (attrs.some((a) => a.kind === "graph" || a.kind === "graphs")) return undefined // nodes with subgraphs are never merged
  const tensors = attrs.flatMap((a) => (a.kind === "tensor" ? [a.value] : a.kind === "tensors" ? a.value : []))
  const values = attrs.map((a) => (a.kind === "tensor" ? tensorKey(a.value) : a.kind === "tensors" ? a.value.map(tensorKey) : a.value))
  return { key: JSON.stringify([n.domain, n.op, n.inputs, n.outputs.map((o) => o !== ""), names, values]), tensors }
}

export const eliminateCommonSubexprSync = (g: Graph): Graph => {
  const rename = new Map<string, string>()
  // graph outputs, and names subgraphs read from this scope, keep their identity (a rename would
  // not reach inside a subgraph)
  const pinned = new Set<string>(g.outputs.map((o) => o.name))
  for (const n of g.nodes) for (const a of Object.values(n.attrs)) if (a.kind === "graph") for (const f of subgraphFreeNames(a.value)) pinned.add(f)
  // merge identical initializers
  const byKey = new Map<string, [string, Tensor][]>()
  const initializers = new Map<string, Tensor>()
  for (const [name, t] of g.initializers) {
    const key = tensorKey(t)
    const bucket = byKey.get(key) ?? []
    const same = bucket.find(([, u]) => sameBytes(t, u))
    if (same && !pinned.has(name)) rename.set(name, same[0])
    else {
      byKey.set(key, [...bucket, [name, t]])
      initializers.set(name, t)
    }
  }
  const seen = new Map<string, Keyed[]>()
  const nodes: Node[] = []
  for (const n0 of g.nodes) {
    const n = n0.inputs.some((i) => rename.has(i)) ? { ...n0, inputs: n0.inputs.map((i) => rename.get(i) ?? i) } : n0
    const found = nodeKey(n)
    if (found === undefined) {
      nodes.push(n)
      continue
    }
    const bucket = seen.get(found.key) ?? []
    const prev = bucket.find((m) => m.tensors.every((t, i) => sameBytes(t, found.tensors[i])))
    if (prev && !n.outputs.some((o) => pinned.has(o))) {
      // (an omitted output maps to prev's, omitted too: "" → "")
      n.outputs.forEach((o, j) => rename.set(o, prev.node.outputs[j]))
      continue
    }
    seen.set(found.key, [...bucket, { node: n, tensors: found.tensors }])
    nodes.push(n)
  }
  if (rename.size === 0) return g
  return { ...g, nodes, initializers }
}

export const eliminateCommonSubexpr = graphPass("rewrite.EliminateCommonSubexpr", 1, eliminateCommonSubexprSync)
