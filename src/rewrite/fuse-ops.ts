// rewrite.FuseOps: TVM's operator fusion. Nodes get their pattern kind from the registry; a
// post-dominator tree over the dataflow graph says where each node's values all end up; a node is
// fused into its immediate post-dominator when every path between them passes only ops the pattern
// rules allow:
//   phase 0 — an out-elementwise-fusable op (Conv, MatMul, pooling) takes the elementwise/broadcast
//             chain after it (bias, BN, residual Add, Relu/Clip);
//             elementwise/broadcast ops fuse forward into injective/reduction/fusable sinks;
//   phase 1 — injective ops fuse with each other (deferred so convolutions finish first).
// A reduction absorbs its injective/elementwise producers (they fuse into it as their sink); opaque
// ops stand alone. Groups are convex by construction (a node only joins its post-dominator, through
// paths that all join too), and a group never exceeds `maxGroupSize` nodes.
import { resolveNode, subgraphFreeNames } from "../ast/graph/evaluate.js"
import type { Graph, Node } from "../ast/graph/graph.js"
import { bindSync } from "../ast/graph/infer.js"
import type { PatternKind } from "../ast/graph/op.js"
import { isRewriteError, tryTyped, VerifyError, type Pass, type RewriteError } from "./pass.js"

/** TVM's order of pattern kinds (combine = max). */
export const KIND_RANK: { readonly [K in PatternKind]: number } = {
  elementwise: 0,
  broadcast: 1,
  injective: 2,
  reduction: 3,
  "out-elementwise-fusable": 4,
  opaque: 8,
}
const KINDS = Object.keys(KIND_RANK) as PatternKind[]
// (a group's rank is one of its nodes' ranks: one of the table's)
const kindOf = (rank: number): PatternKind => KINDS.find((k) => KIND_RANK[k] === rank)!
const combine = (a: number, b: number) => Math.max(a, b)

export interface FusedGroup {
  readonly id: number
  /** Names of the group's nodes, in graph order. */
  readonly nodes: readonly string[]
  /** Ops of those nodes, in the same order. */
  readonly ops: readonly string[]
  /** The group's pattern kind (the combination of its nodes'). */
  readonly kind: PatternKind
  /** The node the group is built around: one of the group's kind (its out-elementwise-fusable or reduction op, where it has one). */
  readonly anchor: string
  /** Values the group reads from outside (graph inputs, constants, other groups). */
  readonly inputs: readonly string[]
  /** Values the group produces that are read outside it or are graph outputs. */
  readonly outputs: readonly string[]
}

/** A graph partitioned into fused groups, in an order the executor can run. */
export interface FusedGraph {
  readonly graph: Graph
  readonly groups: readonly FusedGroup[]
}

export interface FuseOptions {
  readonly maxGroupSize: number
}
export const defaultFuseOptions: FuseOptions = { maxGroupSize: 256 }

interface Edge {
  readonly to: number
  readonly rank: number
}

/** Does every node output have a known type? */
export const isBound = (g: Graph): boolean => g.nodes.every((n) => n.outputs.every((o) => o === "" || g.valueTypes.has(o)))

/** Pattern kind of each node, from the registry. */
export const nodeKind = (n: Node): PatternKind => resolveNode(n).def.kind

/** Outer values a node's subgraphs read (If / Loop / Scan bodies): reads of the node, as the evaluator counts them. */
const capturesOf = (n: Node): string[] => Object.values(n.attrs).flatMap((a) => (a.kind === "graph" ? subgraphFreeNames(a.value) : []))

/** Every value a node reads: its inputs, then what its subgraphs capture (no "" and no repeats). */
const readsOf = (n: Node): string[] => [...new Set([...n.inputs, ...capturesOf(n)])].filter((v) => v !== "")

export const fuseOpsSync = (graph0: Graph, options: FuseOptions = defaultFuseOptions): FusedGraph => {
  const graph = isBound(graph0) ? graph0 : bindSync(graph0)
  const nodes = graph.nodes
  const N = nodes.length
  const rank = nodes.map((n) => KIND_RANK[nodeKind(n)])
  const producer = new Map<string, number>()
  nodes.forEach((n, k) => n.outputs.forEach((o) => o !== "" && producer.set(o, k)))
  const graphOutputs = new Set(graph.outputs.map((o) => o.name))

  // forward edges with their pattern: the consumer's kind, elementwise when a broadcast op
  // reads an input of its output's shape
  const outEdges: Edge[][] = nodes.map(() => [])
  const externRef: boolean[] = nodes.map((n) => n.outputs.some((o) => graphOutputs.has(o)))
  nodes.forEach((n, k) => {
    const seen = new Set<number>()
    for (const i of n.inputs) {
      const p = producer.get(i) // (never "": no output is named so)
      if (p === undefined || seen.has(p)) continue
      seen.add(p)
      let r = rank[k]
      if (r === KIND_RANK.broadcast) {
        const ti = graph.valueTypes.get(i)
        const to = graph.valueTypes.get(n.outputs[0])
        if (ti && to && ti.shape.length === to.shape.length && ti.shape.every((d, j) => d === to.shape[j])) r = KIND_RANK.elementwise
      }
      outEdges[p].push({ to: k, rank: r })
    }
    // values read inside subgraphs count as references from this node
    for (const v of capturesOf(n)) {
      const p = producer.get(v)
      if (p !== undefined && !seen.has(p)) {
        seen.add(p)
        outEdges[p].push({ to: k, rank: KIND_RANK.opaque })
      }
    }
  })

  // post-dominator tree (reverse topological order); parent -1 is the root
  const parent = new Array<number>(N).fill(-1)
  const depth = new Array<number>(N).fill(1)
  const domPattern = new Array<number>(N).fill(KIND_RANK.opaque)
  const lca = (a0: number, b0: number, pat: { r: number }): number => {
    let a = a0
    let b = b0
    while (a !== b) {
      if (a < 0 || b < 0) return -1
      if (depth[a] < depth[b]) {
        pat.r = combine(pat.r, domPattern[b])
        b = parent[b]
      } else if (depth[b] < depth[a]) {
        pat.r = combine(pat.r, domPattern[a])
        a = parent[a]
      } else {
        pat.r = combine(pat.r, combine(domPattern[a], domPattern[b]))
        a = parent[a]
        b = parent[b]
      }
    }
    return a
  }
  for (let k = N - 1; k >= 0; k--) {
    if (externRef[k] || outEdges[k].length === 0) continue
    const pat = { r: KIND_RANK.elementwise }
    let p = outEdges[k][0].to
    pat.r = combine(pat.r, outEdges[k][0].rank)
    for (const e of outEdges[k].slice(1)) {
      p = lca(p, e.to, pat)
      pat.r = combine(pat.r, e.rank)
    }
    parent[k] = p
    depth[k] = p >= 0 ? depth[p] + 1 : 1
    domPattern[k] = pat.r
  }

  // union-find groups carrying their combined pattern, size and anchor
  const uf = nodes.map((_, k) => k)
  const gRank = [...rank]
  const gSize = new Array<number>(N).fill(1)
  const gAnchor = nodes.map((_, k) => k)
  const find = (x: number): number => {
    while (uf[x] !== x) {
      uf[x] = uf[uf[x]]
      x = uf[x]
    }
    return x
  }
  const merge = (from: number, to: number) => {
    const a = find(from)
    const b = find(to)
    if (a === b) return
    uf[a] = b
    gSize[b] += gSize[a]
    // the anchor is the heaviest op: out-elementwise-fusable or reduction wins (an opaque op never
    // merges: no rule below lets a path or sink group be opaque)
    if (rank[gAnchor[a]] > rank[gAnchor[b]]) gAnchor[b] = gAnchor[a]
    gRank[b] = combine(gRank[a], gRank[b])
  }

  // every node strictly between src and sink (sink included), following forward edges. The sink
  // is src's post-dominator, so no path from src ends, writes a graph output (a root of the tree)
  // or passes the sink before it meets the sink: following the edges up to it stays on the way.
  // (an explicit stack: a chain of thousands of nodes must not overflow the call stack)
  const pathNodes = (src: number, sink: number): number[] => {
    const out = new Set<number>()
    const stack = outEdges[src].map((e) => e.to).reverse()
    while (stack.length) {
      const k = stack.pop()!
      if (out.has(k)) continue
      out.add(k)
      if (k !== sink) for (let j = outEdges[k].length - 1; j >= 0; j--) stack.push(outEdges[k][j].to)
    }
    return [...out]
  }
  const checkPath = (src: number, sink: number, cond: (r: number, isSink: boolean) => boolean): number[] | undefined => {
    const path = pathNodes(src, sink)
    for (const k of path) if (!cond(gRank[find(k)], k === sink)) return undefined
    const groups = new Set([find(src), ...path.map(find)])
    let size = 0
    for (const g of groups) size += gSize[g]
    if (size > options.maxGroupSize) return undefined
    return path
  }
  const commit = (src: number, sink: number, path: readonly number[]) => {
    const target = find(sink)
    merge(src, target)
    for (const k of path) merge(k, find(target))
  }

  const EW = KIND_RANK.elementwise
  const BC = KIND_RANK.broadcast
  const INJ = KIND_RANK.injective
  const RED = KIND_RANK.reduction
  const OUT = KIND_RANK["out-elementwise-fusable"]
  for (let phase = 0; phase < 2; phase++) {
    for (let k = 0; k < N; k++) {
      const g = find(k)
      const gr = gRank[g]
      const p = parent[k]
      if (p < 0) continue
      if (find(p) === g) continue
      if (gr === OUT) {
        if (phase !== 0) continue
        if (domPattern[k] === EW) {
          const path = checkPath(k, p, (r) => r <= BC)
          if (path) commit(k, p, path)
        }
      } else if (gr <= BC) {
        if (domPattern[k] <= INJ || domPattern[k] === RED) {
          const path = checkPath(k, p, (r, isSink) => (isSink ? r <= BC || r === RED || r === INJ || r === OUT : r <= INJ))
          if (path) commit(k, p, path)
        }
      } else if (gr === INJ) {
        if (phase !== 1) continue
        const path = checkPath(k, p, (r) => r <= INJ)
        if (path) commit(k, p, path)
      }
    }
  }

  // materialize groups, ordered topologically over the group DAG (ties by first node)
  const members = new Map<number, number[]>()
  for (let k = 0; k < N; k++) {
    const g = find(k)
    const ms = members.get(g)
    if (ms) ms.push(k)
    else members.set(g, [k])
  }
  const roots = [...members.keys()]
  const position = new Map(roots.map((r, i) => [r, i]))
  const groupOf = new Map<number, number>()
  for (const [g, ms] of members) for (const m of ms) groupOf.set(m, g)
  const deps = new Map<number, Set<number>>(roots.map((r) => [r, new Set()]))
  const dependents = new Map<number, number[]>(roots.map((r) => [r, []]))
  for (let k = 0; k < N; k++)
    for (const e of outEdges[k]) {
      const from = groupOf.get(k)!
      const to = groupOf.get(e.to)!
      if (from === to || deps.get(to)!.has(from)) continue
      deps.get(to)!.add(from)
      dependents.get(from)!.push(to)
    }
  // Kahn's order, always taking the ready group whose first node comes first (a binary heap on
  // the position): the order of "the first pending group whose dependencies are done", in linear time
  const waiting = new Map(roots.map((r) => [r, deps.get(r)!.size]))
  const heap: number[] = []
  const less = (a: number, b: number) => position.get(a)! < position.get(b)!
  const pushHeap = (r: number) => {
    heap.push(r)
    for (let i = heap.length - 1; i > 0; ) {
      const up = (i - 1) >> 1
      if (!less(heap[i], heap[up])) break
      ;[heap[i], heap[up]] = [heap[up], heap[i]]
      i = up
    }
  }
  const popHeap = (): number => {
    const top = heap[0]
    const last = heap.pop()!
    if (heap.length) {
      heap[0] = last
      for (let i = 0; ; ) {
        const l = 2 * i + 1
        const m = l + 1 < heap.length && less(heap[l + 1], heap[l]) ? l + 1 : l
        if (l >= heap.length || !less(heap[m], heap[i])) break
        ;[heap[i], heap[m]] = [heap[m], heap[i]]
        i = m
      }
    }
    return top
  }
  for (const r of roots) if (waiting.get(r) === 0) pushHeap(r)
  const order: number[] = []
  while (heap.length) {
    const r = popHeap()
    order.push(r)
    for (const d of dependents.get(r)!) {
      const left = waiting.get(d)! - 1
      waiting.set(d, left)
      if (left === 0) pushHeap(d)
    }
  }
  if (order.length !== roots.length) throw new VerifyError({ pass: "rewrite.FuseOps", where: "groups", reason: "fused groups form a cycle (non-convex group)" })

  const reads = nodes.map(readsOf)
  const readSets = reads.map((r) => new Set(r))
  const groups: FusedGroup[] = order.map((r, id) => {
    const ms = members.get(r)!
    const inside = new Set(ms.flatMap((m) => nodes[m].outputs))
    const inputs = new Set<string>()
    for (const m of ms) for (const i of reads[m]) if (!inside.has(i)) inputs.add(i)
    const outputs: string[] = []
    for (const m of ms)
      for (const o of nodes[m].outputs) {
        // ("" is neither a graph output nor anyone's read)
        const usedOutside = graphOutputs.has(o) || outEdges[m].some((e) => groupOf.get(e.to) !== r && readSets[e.to].has(o))
        if (usedOutside) outputs.push(o)
      }
    return {
      id,
      nodes: ms.map((m) => nodes[m].name),
      ops: ms.map((m) => nodes[m].op),
      kind: kindOf(gRank[r]),
      anchor: nodes[gAnchor[r]].name,
      inputs: [...inputs],
      outputs,
    }
  })
  return { graph, groups }
}

/** Fusion as a pass; skipped (opt level 0, or disabled), every node is a group of its own. */
export const fuseOps: Pass<Graph, FusedGraph, RewriteError> = {
  name: "rewrite.FuseOps",
  optLevel: 1,
  run: (g) => tryTyped(() => fuseOpsSync(g), isRewriteError),
  skip: (g) => singletonGroups(g),
}

/** Every node alone in its own group (opt level 0). */
export const singletonGroups = (graph0: Graph): FusedGraph => {
  const graph = isBound(graph0) ? graph0 : bindSync(graph0)
  return {
  graph,
  groups: graph.nodes.map((n, id) => ({
    id,
    nodes: [n.name],
    ops: [n.op],
    kind: nodeKind(n),
    anchor: n.name,
    inputs: readsOf(n),
    outputs: n.outputs.filter((o) => o !== ""),
  })),
  }
}
