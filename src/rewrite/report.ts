// What the optimizer did, for people: FLOPs per node and group, the fused groups with their
// shapes, the memory plan, as JSON-ready data, text and Graphviz DOT.
import type { Graph, Node } from "../ast/graph/graph.js"
import type { ValueType } from "../ast/graph/op.js"
import { showType } from "../ast/graph/graph.js"
import type { FusedGraph } from "./fuse-ops.js"
import type { MemoryPlan } from "./plan-memory.js"

const numel = (t: ValueType | undefined): number =>
  t && t.shape.every((d) => typeof d === "number") ? (t.shape as number[]).reduce((a, b) => a * b, 1) : 0

/** Floating-point operations of one node (multiply-add = 2), from the bound types. */
export const nodeFlops = (g: Graph, n: Node): number => {
  const out = g.valueTypes.get(n.outputs[0])
  const type = (v: string) => g.valueTypes.get(v) ?? (g.initializers.get(v) as ValueType | undefined)
  const outN = numel(out)
  switch (n.op) {
    case "Conv":
    case "ConvInteger": {
      const w = type(n.inputs[1])
      if (!w) return 0
      const perOut = (w.shape.slice(1) as number[]).reduce((a, b) => a * b, 1)
      return 2 * outN * perOut
    }
    case "QLinearConv":
    case "QLinearConvGrouped": {
      const w = type(n.inputs[3])
      if (!w) return 0
      return 2 * outN * (w.shape.slice(1) as number[]).reduce((a, b) => a * b, 1)
    }
    case "QLinearConvPacked": {
      // (the unpacked conv's count: x's channels, not the packed weights' padded blocks)
      const x = type(n.inputs[0])
      const w = type(n.inputs[3])
      if (!x || !w) return 0
      // (and the kernel's width where the packed weights' 4th dim is its groups of 4 taps: dot_kw)
      const kw = n.attrs.dot_kw?.kind === "int" ? Number(n.attrs.dot_kw.value) : 0
      return 2 * outN * (x.shape[1] as number) * (w.shape[2] as number) * (kw > 0 ? kw : (w.shape[3] as number))
    }
    case "ConvWinogradNCHWc": {
      // the direct convolution's count (what the op computes; GFLOP/s stay comparable)
      const u = type(n.inputs[1])
      if (!u) return 0
      return 2 * outN * (u.shape[3] as number) * 9
    }
    case "ConvNCHWc": {
      const w = type(n.inputs[1])
      if (!w) return 0
      const [, IB, KH, KW, ib] = w.shape as number[]
      return 2 * outN * IB * ib * KH * KW
    }
    case "ConvTranspose": {
      const x = type(n.inputs[0])
      const w = type(n.inputs[1])
      if (!x || !w) return 0
      return 2 * numel(x) * (w.shape.slice(1) as number[]).reduce((a, b) => a * b, 1)
    }
    case "MatMul":
    case "MatMulPacked":
    case "MatMulInteger":
    case "MatMulIntegerPacked":
    case "QLinearMatMulPacked": {
      const a = type(n.inputs[0])
      if (!a) return 0
      return 2 * outN * (a.shape[a.shape.length - 1] as number)
    }
    case "Gemm":
    case "DensePack": {
      const a = type(n.inputs[0])
      if (!a || a.shape.length !== 2) return 0
      const transA = n.attrs.transA?.kind === "int" && n.attrs.transA.value === 1
      return 2 * outN * (a.shape[transA ? 0 : 1] as number)
    }
    case "MaxPool":
    case "AveragePool":
    case "LpPool":
    case "PoolNCHWc": {
      const k = n.attrs.kernel_shape
      const size = k && k.kind === "ints" ? k.value.reduce((a, b) => a * b, 1) : 1
      return outN * size
    }
    case "GlobalAveragePool":
    case "GlobalMaxPool":
      return numel(type(n.inputs[0]))
    default:
      return outN
  }
}

export interface GroupReport {
  readonly id: number
  readonly ops: readonly string[]
  readonly nodes: readonly string[]
  readonly kind: string
  readonly anchor: string
  readonly inputs: readonly { name: string; type: string }[]
  readonly outputs: readonly { name: string; type: string }[]
  readonly flops: number
}

export interface FusionReport {
  readonly groups: readonly GroupReport[]
  readonly memory: { readonly plannedBytes: number; readonly naiveBytes: number; readonly storages: number }
  readonly nodes: number
  readonly flops: number
  /** Groups that no TE compute lowers (opaque ops run through the fallback). */
  readonly opaqueGroups: number
}

export const fusionReport = (fused: FusedGraph, memory: MemoryPlan): FusionReport => {
  const { graph } = fused
  const byName = new Map(graph.nodes.map((n) => [n.name, n]))
  const typeStr = (v: string) => {
    const t = graph.valueTypes.get(v) ?? (graph.initializers.get(v) as ValueType | undefined)
    return t ? showType(t) : "?"
  }
  const groups = fused.groups.map((grp) => ({
    id: grp.id,
    ops: grp.ops,
    nodes: grp.nodes,
    kind: grp.kind,
    anchor: grp.anchor,
    inputs: grp.inputs.map((name) => ({ name, type: typeStr(name) })),
    outputs: grp.outputs.map((name) => ({ name, type: typeStr(name) })),
    flops: grp.nodes.reduce((s, n) => s + nodeFlops(graph, byName.get(n)!), 0),
  }))
  return {
    groups,
    memory: { plannedBytes: memory.plannedBytes, naiveBytes: memory.naiveBytes, storages: memory.storages.length },
    nodes: graph.nodes.length,
    flops: groups.reduce((s, g) => s + g.flops, 0),
    opaqueGroups: groups.filter((g) => g.kind === "opaque").length,
  }
}

const fmtFlops = (f: number) => (f >= 1e9 ? `${(f / 1e9).toFixed(2)} GFLOP` : f >= 1e6 ? `${(f / 1e6).toFixed(2)} MFLOP` : `${f} FLOP`)
const fmtBytes = (b: number) => (b >= 1 << 20 ? `${(b / (1 << 20)).toFixed(2)} MiB` : b >= 1024 ? `${(b / 1024).toFixed(1)} KiB` : `${b} B`)

export const fusionText = (r: FusionReport): string => {
  const lines = [`${r.groups.length} fused groups from ${r.nodes} nodes, ${fmtFlops(r.flops)}`]
  for (const g of r.groups)
    lines.push(`  #${g.id} ${g.kind.padEnd(24)} ${g.ops.join("+").padEnd(40)} → ${g.outputs.map((o) => o.type).join(", ")}  ${fmtFlops(g.flops)}`)
  lines.push(`memory: planned ${fmtBytes(r.memory.plannedBytes)} in ${r.memory.storages} blocks vs ${fmtBytes(r.memory.naiveBytes)} with one buffer per tensor`)
  return lines.join("\n")
}

const dotId = (s: string) => JSON.stringify(s)

/** Graphviz DOT: one cluster per fused group, values as edges. */
export const fusionDot = (fused: FusedGraph): string => {
  const { graph } = fused
  const producer = new Map<string, string>()
  for (const n of graph.nodes) for (const o of n.outputs) producer.set(o, n.name)
  const lines = ["digraph tessera {", "  rankdir=TB;", '  node [shape=box, fontname="Helvetica", fontsize=10];']
  for (const i of graph.inputs) lines.push(`  ${dotId(`in:${i.name}`)} [label=${dotId(`${i.name}\n${showType(i.type)}`)}, shape=ellipse];`)
  for (const grp of fused.groups) {
    lines.push(`  subgraph ${dotId(`cluster_${grp.id}`)} {`, `    label=${dotId(`#${grp.id} ${grp.kind}`)}; style=rounded; color=gray;`)
    for (const name of grp.nodes) {
      const n = graph.nodes.find((m) => m.name === name)!
      lines.push(`    ${dotId(name)} [label=${dotId(`${n.op}\n${name}`)}];`)
    }
    lines.push("  }")
  }
  for (const n of graph.nodes)
    for (const i of n.inputs) {
      if (i === "") continue
      const p = producer.get(i) ?? (graph.inputs.some((x) => x.name === i) ? `in:${i}` : undefined)
      if (p) lines.push(`  ${dotId(p)} -> ${dotId(n.name)};`)
    }
  lines.push("}")
  return lines.join("\n")
}
