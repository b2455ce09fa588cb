// rewrite.FuseOps keeps the promises of its fusion rules (structure.law.ts checks the partition
// too: every node in one group, convex groups, opaque ops alone, an order that runs):
// - each group's bookkeeping is what its nodes say: nodes in graph order, their ops, the kind of
//   its heaviest node, an anchor of that kind, the values it reads from outside (subgraph captures
//   too) and the values read outside it or that are graph outputs;
// - one anchor per group: at most one out-elementwise-fusable or reduction op; nothing a
//   reduction feeds shares its group; what a convolution-like anchor feeds in its group is
//   elementwise or broadcast (injective ops only before it); every group is connected;
// - fusion is maximal where the rules leave no doubt: a value with one reader, no graph output,
//   joins its reader's group when the rules allow that edge;
// - groups run in the order they promise (topological, ties by first node);
// - no group exceeds maxGroupSize.
import * as fc from "fast-check"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { attr } from "../../src/ast/graph/attrs.js"
import { arbGraphCase, prng } from "../../src/ast/graph/arbitrary.js"
import { resolveNode, subgraphFreeNames } from "../../src/ast/graph/evaluate.js"
import { makeGraph, node, type Attrs, type Graph, type Node } from "../../src/ast/graph/graph.js"
import type { PatternKind } from "../../src/ast/graph/op.js"
import { tensor } from "../../src/ast/graph/tensor.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import { defaultPasses, fuseOps, fuseOpsSync, runPass, singletonGroups, withPassConfig, type FusedGraph } from "../../src/rewrite/index.js"
import { lawParams } from "../support.js"

/** TVM's order of pattern kinds, written out here (not the module's table). */
const ORDER: readonly PatternKind[] = ["elementwise", "broadcast", "injective", "reduction", "out-elementwise-fusable", "opaque"]
const rankOf = (k: PatternKind) => ORDER.indexOf(k)
const EW = rankOf("elementwise")
const BC = rankOf("broadcast")
const INJ = rankOf("injective")
const RED = rankOf("reduction")
const OUT = rankOf("out-elementwise-fusable")
const OPAQUE = rankOf("opaque")
const kindRank = (n: Node) => rankOf(resolveNode(n).def.kind)

/** What a node reads: its inputs, then the names its subgraphs capture (no "" and no repeats). */
const readsOf = (n: Node): string[] => {
  const captured = Object.values(n.attrs).flatMap((a) => (a.kind === "graph" ? subgraphFreeNames(a.value) : []))
  return [...new Set([...n.inputs, ...captured].filter((v) => v !== ""))]
}

interface View {
  readonly at: Map<string, number>
  readonly groupOf: Map<string, number>
  readonly readers: Map<string, Node[]>
  readonly producer: Map<string, Node>
}
const view = (f: FusedGraph): View => {
  const at = new Map(f.graph.nodes.map((n, k) => [n.name, k]))
  const groupOf = new Map<string, number>()
  f.groups.forEach((g, k) => g.nodes.forEach((n) => groupOf.set(n, k)))
  const readers = new Map<string, Node[]>()
  const producer = new Map<string, Node>()
  for (const n of f.graph.nodes) {
    for (const v of readsOf(n)) readers.set(v, [...(readers.get(v) ?? []), n])
    for (const o of n.outputs) if (o !== "") producer.set(o, n)
  }
  return { at, groupOf, readers, producer }
}

/** Throws unless every node is in exactly one group, and no path leaves a group and comes back. */
const checkPartition = (f: FusedGraph): void => {
  const { groupOf, producer } = view(f)
  expect(f.groups.flatMap((g) => g.nodes).sort()).toEqual(f.graph.nodes.map((n) => n.name).sort())
  // the groups a node reaches back to after leaving its own
  const left = new Map<string, Set<number>>()
  for (const n of f.graph.nodes) {
    const g = groupOf.get(n.name)!
    const acc = new Set<number>()
    for (const v of readsOf(n)) {
      const p = producer.get(v)
      if (!p) continue
      for (const x of left.get(p.name)!) acc.add(x)
      if (groupOf.get(p.name) !== g) acc.add(groupOf.get(p.name)!)
    }
    if (acc.has(g)) throw new Error(`group ${g} is not convex: a path leaves it and comes back at ${n.name}`)
    left.set(n.name, acc)
  }
}

/** Throws unless each group's fields are what its nodes say. */
const checkBookkeeping = (f: FusedGraph, singletons = false): void => {
  const { graph, groups } = f
  const { at, groupOf, readers } = view(f)
  const byName = new Map(graph.nodes.map((n) => [n.name, n]))
  const graphOutputs = new Set(graph.outputs.map((o) => o.name))
  groups.forEach((g, k) => {
    const ns = g.nodes.map((m) => byName.get(m)!)
    expect(g.id).toBe(k)
    expect(g.nodes).toEqual([...g.nodes].sort((a, b) => at.get(a)! - at.get(b)!))
    expect(g.ops).toEqual(ns.map((n) => n.op))
    const top = Math.max(...ns.map(kindRank))
    expect(g.kind).toBe(ORDER[top])
    const anchor = byName.get(g.anchor)
    expect(anchor && g.nodes.includes(g.anchor), `anchor ${g.anchor} of group ${k}`).toBe(true)
    expect(kindRank(anchor!)).toBe(top)
    const inside = new Set(ns.flatMap((n) => n.outputs))
    const inputs = [...new Set(ns.flatMap(readsOf).filter((v) => !inside.has(v)))]
    expect(g.inputs).toEqual(inputs)
    const outputs = ns.flatMap((n) => n.outputs.filter((o) => o !== "" && (singletons || graphOutputs.has(o) || (readers.get(o) ?? []).some((r) => groupOf.get(r.name) !== k))))
    expect(g.outputs).toEqual(outputs)
  })
}

/** Throws unless each group has one anchor at most and keeps to what may fuse around it. */
const checkFusionRules = (f: FusedGraph): void => {
  const { graph, groups } = f
  const { groupOf, readers } = view(f)
  const byName = new Map(graph.nodes.map((n) => [n.name, n]))
  groups.forEach((g, k) => {
    const ns = g.nodes.map((m) => byName.get(m)!)
    const heavy = ns.filter((n) => kindRank(n) === RED || kindRank(n) === OUT)
    expect(heavy.length, `group ${k} (${g.ops}) has one anchor at most`).toBeLessThanOrEqual(1)
    // the group's nodes reachable from the anchor inside the group
    const downstream = new Set<string>()
    const visit = (n: Node) => {
      for (const o of n.outputs)
        for (const r of readers.get(o) ?? [])
          if (groupOf.get(r.name) === k && !downstream.has(r.name)) {
            downstream.add(r.name)
            visit(r)
          }
    }
    for (const h of heavy) visit(h)
    // a convolution-like anchor reads nothing its group computes: what it reads is never fused into it (the edge into it is not elementwise)
    for (const h of heavy)
      if (kindRank(h) === OUT)
        for (const i of readsOf(h)) {
          const p = f.graph.nodes.find((m) => m.outputs.includes(i))
          if (p && groupOf.get(p.name) === k) throw new Error(`group ${k} (${g.ops}): the anchor ${h.name} reads ${i}, computed by ${p.name} in its own group`)
        }
    for (const name of downstream) {
      const r = kindRank(byName.get(name)!)
      if (kindRank(heavy[0]) === RED) throw new Error(`group ${k} (${g.ops}): ${name} reads what the reduction ${heavy[0].name} computes`)
      if (r > BC) throw new Error(`group ${k} (${g.ops}): ${name} (${ORDER[r]}) follows the anchor ${heavy[0].name}`)
    }
    // and every edge from the anchor on keeps its shape (an elementwise epilogue: no broadcast of what the anchor computes)
    for (const u of [...heavy.map((h) => h.name), ...downstream])
      for (const o of byName.get(u)!.outputs)
        for (const r of readers.get(o) ?? [])
          if (groupOf.get(r.name) === k && r.inputs.includes(o) && edgeRank(graph, r, o) !== EW) throw new Error(`group ${k} (${g.ops}): ${r.name} broadcasts ${o}, downstream of the anchor ${heavy[0].name}`)
    // a graph output ends its group: nothing in the group reads it
    for (const n of ns)
      for (const o of n.outputs)
        if (graph.outputs.some((x) => x.name === o) && (readers.get(o) ?? []).some((r) => groupOf.get(r.name) === k)) throw new Error(`group ${k} (${g.ops}) reads the graph output ${o} it writes`)
    // connected (edges either way, inside the group)
    const seen = new Set([g.nodes[0]])
    const todo = [g.nodes[0]]
    while (todo.length) {
      const n = byName.get(todo.pop()!)!
      const near = [...n.outputs.flatMap((o) => readers.get(o) ?? []).map((r) => r.name), ...readsOf(n).map((v) => graph.nodes.find((m) => m.outputs.includes(v))?.name)]
      for (const m of near) if (m && groupOf.get(m) === k && !seen.has(m)) seen.add(m) && todo.push(m)
    }
    expect(seen.size, `group ${k} (${g.ops}) is connected`).toBe(g.nodes.length)
  })
}

/** The pattern of the edge into `c` through `v`: c's kind, elementwise where a broadcast op reads a value of its output's shape. */
const edgeRank = (graph: Graph, c: Node, v: string): number => {
  const r = kindRank(c)
  const [ti, to] = [graph.valueTypes.get(v), graph.valueTypes.get(c.outputs[0])]
  return r === BC && ti && to && ti.shape.join() === to.shape.join() && ti.shape.length === to.shape.length ? EW : r
}

/**
 * Throws where a node stays apart from its immediate post-dominator though the rules allow the
 * fusion. Post-dominators by brute force: p post-dominates k when every path from k meets p before
 * it ends (at a node nothing reads, or one whose value is a graph output). The rules: an
 * elementwise / broadcast group joins p when every edge on the way is injective at most (or p a
 * reduction) and the nodes between stand in groups injective at most; an out-elementwise-fusable
 * group when every edge is elementwise and every group on the way broadcast at most; an injective
 * group when every group on the way is injective at most.
 */
const checkMaximal = (f: FusedGraph): void => {
  const { graph, groups } = f
  const { groupOf, readers } = view(f)
  const graphOutputs = new Set(graph.outputs.map((o) => o.name))
  const nodes = graph.nodes
  const index = new Map(nodes.map((n, k) => [n.name, k]))
  // forward edges with their rank: inputs (a broadcast op reading a value of its output's shape is elementwise), captures opaque
  const next = nodes.map((n) => {
    const out = new Map<number, number>()
    for (const o of n.outputs)
      for (const r of o === "" ? [] : (readers.get(o) ?? [])) {
        const j = index.get(r.name)!
        if (out.has(j)) continue
        const v = r.inputs.find((i) => i !== "" && n.outputs.includes(i))
        out.set(j, v === undefined ? OPAQUE : edgeRank(graph, r, v))
      }
    return out
  })
  const exit = nodes.map((n, k) => next[k].size === 0 || n.outputs.some((o) => graphOutputs.has(o)))
  /** Does every path from k meet p before it ends? */
  const dominates = (p: number, k: number): boolean => {
    const seen = new Set<number>()
    const walk = (j: number): boolean => j === p || (!exit[j] && [...next[j].keys()].every((t) => seen.has(t) || (seen.add(t), walk(t))))
    return [...next[k].keys()].every((t) => seen.has(t) || (seen.add(t), walk(t)))
  }
  const rankOfGroup = (k: number) => rankOf(groups[groupOf.get(nodes[k].name)!].kind)
  // a node only ever joins its immediate post-dominator (none for a node nothing reads or that writes a graph output):
  // every node of a group but one has its immediate post-dominator in the group
  const ipdom = nodes.map((_, k) => {
    if (exit[k]) return -1
    for (let j = k + 1; j < nodes.length; j++) if (dominates(j, k)) return j
    return -1
  })
  groups.forEach((g, gi) => {
    const exits = g.nodes.filter((m) => {
      const d = ipdom[index.get(m)!]
      return d < 0 || groupOf.get(nodes[d].name) !== gi
    })
    expect(exits, `group ${gi} (${g.ops}) has one node whose post-dominator lies outside it`).toHaveLength(1)
  })
  nodes.forEach((n, k) => {
    if (exit[k] || kindRank(n) === OPAQUE) return
    const p = ipdom[k]
    if (p < 0 || groupOf.get(n.name) === groupOf.get(nodes[p].name)) return
    // the nodes strictly between k and p, and the edges from k and from them
    const between = new Set<number>()
    const stack = [...next[k].keys()]
    while (stack.length) {
      const j = stack.pop()!
      if (j === p || between.has(j)) continue
      between.add(j)
      stack.push(...next[j].keys())
    }
    const edges = [k, ...between].flatMap((j) => [...next[j].values()])
    const maxEdge = Math.max(...edges)
    const maxBetween = Math.max(-1, ...[...between].map(rankOfGroup))
    const [gk, gp] = [rankOfGroup(k), rankOfGroup(p)]
    const allowed =
      (gk <= BC && (maxEdge <= INJ || maxEdge === RED) && maxBetween <= INJ && gp !== OPAQUE) ||
      (gk === OUT && maxEdge === EW && maxBetween <= BC && gp <= BC) ||
      (gk <= INJ && maxBetween <= INJ && gp <= INJ)
    if (allowed)
      throw new Error(`${n.op} ${n.name} (group ${ORDER[gk]}) and its post-dominator ${nodes[p].op} ${nodes[p].name} (edges ≤ ${ORDER[maxEdge]}, group ${ORDER[gp]}) are left apart`)
  })
}

/** Throws unless groups run in dependency order, and a group runs before one with an earlier first node only when that one waits for it. */
const checkOrder = (f: FusedGraph): void => {
  const { graph, groups } = f
  const { at, groupOf, producer } = view(f)
  const deps = groups.map((g, k) => {
    const ds = new Set<number>()
    for (const m of g.nodes)
      for (const v of readsOf(graph.nodes[at.get(m)!])) {
        const p = producer.get(v)
        if (p && groupOf.get(p.name) !== k) ds.add(groupOf.get(p.name)!)
      }
    return ds
  })
  deps.forEach((ds, k) => ds.forEach((d) => expect(d, `group ${k} reads group ${d}`).toBeLessThan(k)))
  const first = groups.map((g) => at.get(g.nodes[0])!)
  for (let i = 0; i < groups.length; i++)
    for (let j = i + 1; j < groups.length; j++)
      if (first[j] < first[i] && ![...deps[j]].some((d) => d >= i)) throw new Error(`group ${j} (first node ${first[j]}) was ready before group ${i} (first node ${first[i]}) ran`)
}

const optimized = (g: Graph) => Effect.runSync(defaultPasses.run(g))

/**
 * Graphs with an If whose branches read values of the graph (captures) that other nodes read too
 * or not at all: fusion must count a capture as a read.
 */
const arbCaptureCase: fc.Arbitrary<Graph> = fc.integer({ min: 0, max: 0x7fffffff }).map((seed) => {
  const rng = prng(seed)
  const n = rng.int(2, 6)
  const nodes: Node[] = []
  const vals = ["x"]
  for (let k = 0; k < n; k++) {
    const op = rng.pick(["Relu", "Neg", "Sigmoid", "Add", "Mul", "Transpose", "ReduceSum"])
    const a = rng.pick(vals)
    const ins = op === "Add" || op === "Mul" ? [a, rng.pick(vals)] : [a]
    const attrs: Attrs = op === "ReduceSum" ? { keepdims: attr.int(1), axes: attr.ints([0]) } : op === "Transpose" ? { perm: attr.ints([0, 1]) } : {}
    // shapes stay [4, 4]: ReduceSum over axis 0 is followed by an Add that broadcasts it back
    nodes.push(node(op, ins, [`v${k}`], attrs, `n${k}`))
    vals.push(op === "ReduceSum" ? (nodes.push(node("Add", [`v${k}`, "x"], [`w${k}`], {}, `m${k}`)), `w${k}`) : `v${k}`)
  }
  const captured = [rng.pick(vals.slice(1)), rng.pick(vals)]
  const branch = (name: string, op: string) =>
    makeGraph({ name, opset: 13, inputs: [], outputs: [{ name: `${name}_y`, type: { dtype: "float32", shape: [4, 4] } }], nodes: [node(op, captured, [`${name}_y`])] })
  nodes.push(node("If", ["cond"], ["y"], { then_branch: attr.graph(branch("then", "Add")), else_branch: attr.graph(branch("else", "Mul")) }, "if"))
  // a reader after the If too, at times, of a captured value
  if (rng.next() < 0.5) nodes.push(node("Tanh", [captured[0]], ["t"], {}, "tanh_after"))
  const f32 = { dtype: "float32" as const, shape: [4, 4] }
  return makeGraph({
    name: `capture_${seed}`,
    opset: 13,
    inputs: [
      { name: "cond", type: { dtype: "bool", shape: [] } },
      { name: "x", type: f32 },
    ],
    outputs: [{ name: "y", type: f32 }, ...(nodes.some((m) => m.outputs[0] === "t") ? [{ name: "t", type: f32 }] : []), ...(rng.next() < 0.5 ? [{ name: vals[vals.length - 1], type: f32 }] : [])].filter(
      (o, k, all) => all.findIndex((p) => p.name === o.name) === k && o.name !== "x",
    ),
    initializers: new Map([["unused", tensor("float32", [1], Float32Array.of(0))]]),
    nodes,
  })
})

/**
 * Injective fusion waits for the convolution-like anchors (phase 1 after phase 0), and an
 * elementwise op joins the group a convolution-like anchor made: x → one or two Transposes, or an
 * elementwise op (of x or of a Transpose), and x → Conv / MaxPool / MatMul, meet in an Add or Mul
 * (then a Relu at times). The epilogue joins the anchor even when the Transposes come first in
 * graph order (had they taken the Add first, the anchor could no longer have it); the Transposes
 * fuse with each other only; the elementwise op joins the anchor's group, before or after it.
 */
const arbDeferredCase = fc.integer({ min: 0, max: 0x7fffffff }).map((seed) => {
  const rng = prng(seed)
  const [C, H] = [rng.pick([2, 4]), rng.int(3, 6)]
  const f32 = (shape: number[]) => ({ dtype: "float32" as const, shape })
  const rand = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))
  const anchorOp = rng.pick(["Conv", "MaxPool", "MatMul"])
  const anchor =
    anchorOp === "Conv"
      ? node("Conv", ["x", "w"], ["a"], { pads: attr.ints([1, 1, 1, 1]) }, "anchor")
      : anchorOp === "MaxPool"
        ? node("MaxPool", ["x"], ["a"], { kernel_shape: attr.ints([3, 3]), pads: attr.ints([1, 1, 1, 1]) }, "anchor")
        : node("MatMul", ["x", "m"], ["a"], {}, "anchor")
  // the other operand: one or two Transposes of x, or an elementwise op (of x or of a Transpose of x)
  const side = rng.pick(["transpose", "transpose2", "elementwise", "transpose-elementwise"] as const)
  const ew = rng.pick(["Relu", "Neg", "Sigmoid"])
  const injective =
    side === "transpose" || side === "transpose2" || side === "transpose-elementwise" ? [node("Transpose", ["x"], ["t0"], { perm: attr.ints([0, 1, 3, 2]) }, "t0")] : []
  if (side === "transpose2") injective.push(node("Transpose", ["t0"], ["t1"], { perm: attr.ints([0, 1, 3, 2]) }, "t1"))
  const elementwise = side === "elementwise" || side === "transpose-elementwise" ? [node(ew, [side === "elementwise" ? "x" : "t0"], ["e"], {}, "e")] : []
  const t = elementwise.length ? "e" : injective[injective.length - 1].outputs[0]
  const relu = rng.next() < 0.5
  const epilogue = [node(rng.pick(["Add", "Mul"]), rng.next() < 0.5 ? ["a", t] : [t, "a"], [relu ? "s" : "y"], {}, "join"), ...(relu ? [node("Relu", ["s"], ["y"], {}, "relu")] : [])]
  // the Transposes before the anchor mostly; an elementwise op after it mostly (it then joins a group the anchor made convolution-like)
  const first = rng.next() < 0.75
  const ewFirst = rng.next() < 0.25
  const order = first ? [...injective, anchor] : [anchor, ...injective]
  // the elementwise op right after what it reads, or after the anchor and the Transposes
  if (elementwise.length) order.splice(ewFirst ? order.findIndex((n) => n.outputs[0] === elementwise[0].inputs[0]) + 1 : order.length, 0, ...elementwise)
  order.push(...epilogue)
  const graph = makeGraph({
    name: `deferred_${seed}`,
    opset: 13,
    inputs: [{ name: "x", type: f32([1, C, H, H]) }],
    outputs: [{ name: "y", type: f32([1, C, H, H]) }],
    initializers: new Map([
      ["w", rand([C, C, 3, 3])],
      ["m", rand([H, H])],
    ]),
    nodes: order,
  })
  return {
    graph,
    groups: [...(injective.length ? [injective.map((n) => n.name)] : []), ["anchor", ...elementwise.map((n) => n.name), ...epilogue.map((n) => n.name)]],
  }
})

/**
 * Small graphs of the cases the random graphs rarely hold, each part at times: optional inputs and
 * outputs left out ("": Clip without a min, Dropout without its mask); a Split whose one output is
 * a graph output and the other read on; a MatMul [4, 4] added to a [4, 4, 4] value (a broadcast
 * that adds a dim, every dim the same: a shape check by rank and dims alike); an elementwise op
 * read by a 1×1 convolution of its own shape (an edge into a convolution is never elementwise).
 */
const arbEdgeCase = fc.integer({ min: 0, max: 0x7fffffff }).map((seed) => {
  const rng = prng(seed)
  const f32 = (shape: number[]) => ({ dtype: "float32" as const, shape })
  const rand = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))
  const nodes: Node[] = []
  const outputs: string[] = []
  const parts = ["optional", "split", "rank", "conv"].filter(() => rng.next() < 0.5)
  for (const part of parts.length ? parts : ["optional"]) {
    if (part === "optional") {
      // (the Clip after the Dropout, reading neither: no value "" links them)
      nodes.push(node("Dropout", ["x"], ["drop", ""], {}, "drop"), node("Relu", ["drop"], ["opt"], {}, "relu_opt"), node("Clip", ["x", "", "hi"], ["clip"], {}, "clip"))
      if (rng.next() < 0.5) nodes.push(node("Neg", ["clip"], ["clip_neg"], {}, "clip_neg"))
      outputs.push("opt", nodes[nodes.length - 1].outputs[0])
    } else if (part === "split") {
      nodes.push(node("Split", ["x"], ["s0", "s1"], { axis: attr.int(0) }, "split"), node("Neg", ["s1"], ["neg"], {}, "neg"))
      outputs.push("s0", "neg")
    } else if (part === "rank") {
      const mm = rng.next() < 0.5
      nodes.push(mm ? node("MatMul", ["x", "m"], ["mm"], {}, "matmul") : node("Sigmoid", ["x"], ["mm"], {}, "sigmoid"), node("Add", rng.next() < 0.5 ? ["mm", "z"] : ["z", "mm"], ["wide"], {}, "add_wide"))
      outputs.push("wide")
    } else {
      nodes.push(node(rng.pick(["Relu", "Neg", "Abs"]), ["x4"], ["pre"], {}, "pre"), node("Conv", ["pre", "w1"], ["conv"], {}, "conv1x1"))
      if (rng.next() < 0.5) nodes.push(node("Relu", ["conv"], ["post"], {}, "post"))
      outputs.push(nodes[nodes.length - 1].outputs[0])
    }
  }
  return makeGraph({
    name: `edge_${seed}`,
    opset: 13,
    inputs: [
      { name: "x", type: f32([4, 4]) },
      { name: "z", type: f32([4, 4, 4]) },
      { name: "x4", type: f32([1, 4, 4, 4]) },
    ],
    outputs: outputs.map((name) => ({ name, type: f32([]) })),
    initializers: new Map([
      ["hi", rand([])],
      ["m", rand([4, 4])],
      ["w1", rand([4, 4, 1, 1])],
    ]),
    nodes,
  })
})

describe("rewrite.FuseOps: the fusion rules", () => {
  it("optional inputs and outputs left out, a graph output beside a value read on, a broadcast that adds a dim, an op read by a convolution; a graph typed in part is bound", () => {
    fc.assert(
      fc.property(arbEdgeCase, (graph) => {
        // some values typed already (an ONNX model's value_info): the fused graph has every type
        const bound = bindSync(graph)
        const partial = { ...graph, valueTypes: new Map([...bound.valueTypes].filter((_, k) => k % 2 === 0)) }
        for (const g of [fuseOpsSync(partial).graph, singletonGroups(partial).graph])
          for (const n of g.nodes) for (const o of n.outputs) if (o !== "") expect(g.valueTypes.get(o), o).toEqual(bound.valueTypes.get(o))
        const f = fuseOpsSync(graph)
        checkPartition(f)
        checkBookkeeping(f)
        checkFusionRules(f)
        checkMaximal(f)
        checkOrder(f)
        checkBookkeeping(singletonGroups(graph), true)
      }),
      lawParams(40),
    )
  })

  it("the default limit is 256 nodes a group: a chain of 300 Relus makes groups of 256 and 44", () => {
    const nodes = Array.from({ length: 300 }, (_, k) => node("Relu", [k ? `r${k - 1}` : "x"], [`r${k}`], {}, `relu${k}`))
    const graph = makeGraph({ opset: 13, inputs: [{ name: "x", type: { dtype: "float32", shape: [2] } }], outputs: [{ name: "r299", type: { dtype: "float32", shape: [2] } }], nodes })
    expect(fuseOpsSync(graph).groups.map((g) => g.nodes.length).sort((a, b) => b - a)).toEqual([256, 44])
  })

  it("the pass: fusion when it runs, a group per node when disabled by its name", () => {
    fc.assert(
      fc.property(arbGraphCase({ maxNodes: 10 }), ({ graph }) => {
        const bound = bindSync(graph)
        expect(Effect.runSync(runPass(fuseOps, bound)).groups).toEqual(fuseOpsSync(bound).groups)
        expect(Effect.runSync(runPass(fuseOps, bound).pipe(withPassConfig({ disabled: new Set(["rewrite.FuseOps"]) }))).groups).toEqual(singletonGroups(bound).groups)
      }),
      lawParams(20),
    )
  })

  it("injective ops fuse after the convolution-like anchors took their epilogues; an elementwise operand of the epilogue joins the anchor's group", () => {
    fc.assert(
      fc.property(arbDeferredCase, ({ graph, groups }) => {
        const got = fuseOpsSync(graph).groups.map((g) => [...g.nodes].sort())
        expect(got.sort()).toEqual(groups.map((g) => [...g].sort()).sort())
      }),
      lawParams(40),
    )
  })

  it("groups say what their nodes are; one anchor each; injective ops only before a convolution-like anchor, nothing after a reduction; connected; maximal; in order", () => {
    fc.assert(
      fc.property(arbGraphCase({ maxNodes: 16, modelShare: 0.5 }), ({ graph }) => {
        for (const g of [graph, optimized(graph)]) {
          const f = fuseOpsSync(g)
          checkPartition(f)
          checkBookkeeping(f)
          checkFusionRules(f)
          checkMaximal(f)
          checkOrder(f)
        }
      }),
      lawParams(80),
    )
  })

  it("count a subgraph's captures as reads (If branches reading outer values)", () => {
    fc.assert(
      fc.property(arbCaptureCase, (graph) => {
        const fused = fuseOpsSync(graph)
        for (const [f, singletons] of [
          [fused, false],
          [singletonGroups(graph), true],
        ] as const) {
          checkPartition(f)
          checkBookkeeping(f, singletons)
          checkOrder(f)
        }
        checkFusionRules(fused)
        checkMaximal(fused)
      }),
      lawParams(60),
    )
  })

  it("no group exceeds maxGroupSize; the rules hold under the limit too", () => {
    fc.assert(
      fc.property(arbGraphCase({ maxNodes: 12, modelShare: 0.5 }), fc.integer({ min: 1, max: 4 }), ({ graph }, max) => {
        const f = fuseOpsSync(graph, { maxGroupSize: max })
        checkPartition(f)
        checkBookkeeping(f)
        checkOrder(f)
        for (const g of f.groups) expect(g.nodes.length).toBeLessThanOrEqual(max)
        if (max === 1) expect(f.groups.length).toBe(f.graph.nodes.length)
        // a limit the largest group meets exactly changes nothing
        const free = fuseOpsSync(graph)
        const largest = Math.max(...free.groups.map((g) => g.nodes.length))
        expect(fuseOpsSync(graph, { maxGroupSize: largest }).groups.map((g) => g.nodes)).toEqual(free.groups.map((g) => g.nodes))
      }),
      lawParams(60),
    )
  })

  it("a group per node (FuseOps skipped): each node's reads and outputs, its kind", () => {
    fc.assert(
      fc.property(arbGraphCase({ maxNodes: 12, modelShare: 0.5 }), ({ graph }) => {
        const f = singletonGroups(graph)
        expect(f.groups.map((g) => g.nodes)).toEqual(f.graph.nodes.map((n) => [n.name]))
        checkBookkeeping(f, true)
      }),
      lawParams(40),
    )
  })
})
