// rewrite.VtaPartition: which groups of an integer graph VTA runs, and the CPU (c) segments
// around them. A group goes to `vta` when it is one of the two shapes VTA executes exactly
// (rewrite.VtaRequantize writes them):
//   conv: ConvInteger(x int8 [1,C,H,W], w constant int8, no zero points, group 1, dilation 1, one
//         stride, one pad) → [Add(constant int32 bias per channel)] → Cast(double) → Mul(2^−k,
//         0 ≤ k ≤ 31) → Floor → Clip(lo, 127), lo an integer in [−128, 0] → Cast(int8)
//         = GEMM + ALU ADD (bias) + SHR k + MAX lo + MIN 127: ⌊acc · 2^−k⌋ is the arithmetic shift;
//   add:  Cast(int32)(a), Cast(int32)(b) (a, b int8 of one shape [1,C,H,W]) → Add → Clip(lo, 127)
//         → Cast(int8) = the residual add on the ALU.
// Each intermediate must have no other reader and not be a graph output. A group that also passes
// the caller's `fits` check (a schedule that fits the buffers) is offloaded; every other node runs
// on c. Nodes are cut into segments in graph order: maximal runs of c nodes (each a graph of its
// own, its inputs the values it reads from elsewhere, its outputs the values read later) and runs
// of VTA layers. `force` names nodes that must go to VTA: one that cannot is a VtaPartitionError
// naming the node, its op and what is missing. Pure.
import { Data } from "effect"
import type { Graph, Node, ValueInfo } from "../ast/graph/graph.js"
import type { Tensor } from "../ast/graph/tensor.js"

export class VtaPartitionError extends Data.TaggedError("VtaPartitionError")<{ readonly node: string; readonly op: string; readonly reason: string }> {
  override get message(): string {
    return `VTA cannot run node '${this.node}' (${this.op}): ${this.reason}`
  }
}

export interface VtaConvLayer {
  readonly kind: "conv"
  readonly name: string
  readonly nodes: readonly string[]
  readonly input: string
  readonly output: string
  readonly c: number
  readonly h: number
  readonly w: number
  readonly m: number
  readonly kh: number
  readonly kw: number
  readonly stride: number
  readonly pad: number
  readonly oh: number
  readonly ow: number
  readonly shift: number
  readonly clipLo: number
  /** int8 OIHW. */
  readonly weights: Tensor
  /** int32 per output channel, or undefined. */
  readonly bias?: Int32Array
}

export interface VtaAddLayer {
  readonly kind: "add"
  readonly name: string
  readonly nodes: readonly string[]
  readonly inputs: readonly [string, string]
  readonly output: string
  readonly c: number
  readonly h: number
  readonly w: number
  readonly clipLo: number
}

export type VtaLayer = VtaConvLayer | VtaAddLayer

export interface CpuSegment {
  readonly device: "c"
  readonly graph: Graph
}

export interface VtaSegment {
  readonly device: "vta"
  readonly layers: readonly VtaLayer[]
}

export type Segment = CpuSegment | VtaSegment

export interface VtaPartition {
  readonly segments: readonly Segment[]
  readonly offloaded: readonly VtaLayer[]
  /** Heads of conv / add shapes (ConvInteger, Add of two casts) that stay on c, and why. */
  readonly kept: readonly { readonly node: string; readonly op: string; readonly reason: string }[]
  readonly inputs: readonly ValueInfo[]
  readonly outputs: readonly ValueInfo[]
}

export interface VtaPartitionOptions {
  /** Why the accelerator cannot hold a matched layer (no schedule fits), or undefined when it can. */
  readonly fits?: (layer: VtaLayer) => string | undefined
  readonly force?: ReadonlySet<string>
}

type Match = VtaLayer | string

const intAttr = (n: Node, k: string, dflt: number): number => (n.attrs[k]?.kind === "int" ? (n.attrs[k] as { value: number }).value : dflt)
const intsAttr = (n: Node, k: string): readonly number[] | undefined => (n.attrs[k]?.kind === "ints" ? (n.attrs[k] as { value: readonly number[] }).value : undefined)

/** Matches the two shapes at a head node (ConvInteger, or Add of two int8 → int32 casts). */
const matcher = (g: Graph) => {
  const producer = new Map<string, Node>()
  const readers = new Map<string, Node[]>()
  for (const n of g.nodes) {
    for (const o of n.outputs) producer.set(o, n)
    for (const i of n.inputs) if (i !== "") readers.set(i, [...(readers.get(i) ?? []), n])
  }
  const graphOut = new Set(g.outputs.map((o) => o.name))
  const type = (v: string) => g.valueTypes.get(v) ?? g.inputs.find((i) => i.name === v)?.type
  const konst = (v: string | undefined): Tensor | undefined => (v ? g.initializers.get(v) : undefined)
  const scalarConst = (v: string | undefined): number | undefined => {
    const t = konst(v)
    return t && t.data.length === 1 ? Number(t.data[0]) : undefined
  }
  /** The one reader of `v`, when it is of op `op` and `v` is not a graph output. */
  const only = (v: string, op: string): Node | string => {
    const rs = readers.get(v) ?? []
    if (graphOut.has(v)) return `${v} is a graph output`
    if (rs.length !== 1) return `${v} has ${rs.length} readers (one ${op} expected)`
    if (rs[0].op !== op || rs[0].domain !== "") return `${v} is read by ${rs[0].op}, not ${op}`
    return rs[0]
  }
  const castTo = (n: Node): number => intAttr(n, "to", -1)
  const shape4 = (v: string): readonly number[] | string => {
    const t = type(v)
    if (!t) return `no type for ${v}`
    if (t.dtype !== "int8") return `${v} is ${t.dtype}, not int8`
    if (t.shape.length !== 4 || t.shape.some((d) => typeof d !== "number")) return `${v} is not a static 4-D tensor`
    if (t.shape[0] !== 1) return `${v} has batch ${String(t.shape[0])} (VTA's BATCH is 1)`
    return t.shape as number[]
  }
  /** Cast(double) → Mul(2^−k) → Floor → Clip(lo, 127) → Cast(int8), from value `v`. */
  const tail = (v: string, nodes: string[]): { shift: number; clipLo: number; out: string } | string => {
    const wide = only(v, "Cast")
    if (typeof wide === "string") return wide
    if (castTo(wide) !== 11) return "the sum is not widened to double"
    const mul = only(wide.outputs[0], "Mul")
    if (typeof mul === "string") return mul
    const f = scalarConst(mul.inputs[1])
    const k = f === undefined || f <= 0 ? NaN : -Math.log2(f)
    if (!(Number.isInteger(k) && k >= 0 && k <= 31)) return `the requantize multiplier ${f} is not 2^-k with k in [0, 31] (VTA requantizes by a shift)`
    const floor = only(mul.outputs[0], "Floor")
    if (typeof floor === "string") return floor
    const clip = only(floor.outputs[0], "Clip")
    if (typeof clip === "string") return clip
    const clipped = clipTail(clip)
    if (typeof clipped === "string") return clipped
    nodes.push(wide.name, mul.name, floor.name, clip.name, clipped.narrow)
    return { shift: k, clipLo: clipped.lo, out: clipped.out }
  }
  const clipTail = (clip: Node): { lo: number; out: string; narrow: string } | string => {
    const lo = scalarConst(clip.inputs[1])
    const hi = scalarConst(clip.inputs[2])
    if (lo === undefined || !(Number.isInteger(lo) && lo >= -128 && lo <= 0)) return `a clip lower bound of ${lo} (an integer in [-128, 0]: VTA's ALU MAX)`
    if (hi !== 127) return `a clip upper bound of ${hi} (127: VTA's ALU MIN before the int8 store)`
    const narrow = only(clip.outputs[0], "Cast")
    if (typeof narrow === "string") return narrow
    if (castTo(narrow) !== 3) return "the result is not cast to int8"
    return { lo, out: narrow.outputs[0], narrow: narrow.name }
  }
  const conv = (n: Node): Match => {
    const [x, wv, xzp, wzp] = n.inputs
    for (const zp of [xzp, wzp]) if (zp && (konst(zp)?.data ?? [1]).length > 0 && Array.from((konst(zp)?.data ?? [1]) as ArrayLike<number>).some((z) => z !== 0)) return "a zero point that is not a constant 0 (VTA's GEMM has none)"
    const xs = shape4(x)
    if (typeof xs === "string") return xs
    const w = konst(wv)
    if (!w || w.dtype !== "int8" || w.shape.length !== 4) return "weights that are not a constant int8 OIHW tensor"
    if (intAttr(n, "group", 1) !== 1) return `group ${intAttr(n, "group", 1)} (VTA's conv is dense)`
    const ap = n.attrs.auto_pad?.kind === "string" ? (n.attrs.auto_pad as { value: string }).value : "NOTSET"
    if (ap !== "NOTSET") return `auto_pad ${ap}`
    const strides = intsAttr(n, "strides") ?? [1, 1]
    const pads = intsAttr(n, "pads") ?? [0, 0, 0, 0]
    const dil = intsAttr(n, "dilations") ?? [1, 1]
    if (dil.some((d) => d !== 1)) return `dilations [${dil.join(", ")}]`
    if (strides[0] !== strides[1]) return `strides [${strides.join(", ")}] differ (one stride per layer)`
    if (pads.some((p) => p !== pads[0])) return `pads [${pads.join(", ")}] differ (one pad per layer)`
    const [, C, H, W] = xs
    const [M, I, KH, KW] = w.shape
    if (I !== C) return `weights for ${I} input channels, the input has ${C}`
    const nodes = [n.name]
    let sum = n.outputs[0]
    let bias: Int32Array | undefined
    const rs = readers.get(sum) ?? []
    if (rs.length === 1 && rs[0].op === "Add" && !graphOut.has(sum)) {
      const add = rs[0]
      const b = konst(add.inputs[0] === sum ? add.inputs[1] : add.inputs[0])
      if (!b || b.dtype !== "int32" || b.data.length !== M || !(b.shape.length === 4 ? b.shape[1] === M : b.shape.length === 3 ? b.shape[0] === M : false)) return "an Add after the conv that is not a constant int32 bias per output channel"
      bias = Int32Array.from(b.data as ArrayLike<number>)
      nodes.push(add.name)
      sum = add.outputs[0]
    }
    const t = tail(sum, nodes)
    if (typeof t === "string") return t
    const pad = pads[0]
    const stride = strides[0]
    return {
      kind: "conv", name: n.name, nodes, input: x, output: t.out, c: C, h: H, w: W, m: M, kh: KH, kw: KW, stride, pad,
      oh: Math.floor((H + 2 * pad - KH) / stride) + 1, ow: Math.floor((W + 2 * pad - KW) / stride) + 1, shift: t.shift, clipLo: t.clipLo, weights: w, ...(bias ? { bias } : {}),
    }
  }
  const add = (n: Node): Match => {
    const casts = n.inputs.map((v) => producer.get(v))
    if (casts.length !== 2 || casts.some((c) => !c || c.op !== "Cast" || castTo(c) !== 6)) return "its operands are not int8 values cast to int32"
    const [ca, cb] = casts as [Node, Node]
    for (const c of [ca, cb]) if ((readers.get(c.outputs[0]) ?? []).length !== 1 || graphOut.has(c.outputs[0])) return `${c.outputs[0]} has other readers`
    const a = ca.inputs[0]
    const b = cb.inputs[0]
    const sa = shape4(a)
    if (typeof sa === "string") return sa
    const sb = shape4(b)
    if (typeof sb === "string") return sb
    if (sa.join() !== sb.join()) return `operands of shapes [${sa.join(", ")}] and [${sb.join(", ")}] (VTA adds equal shapes)`
    const clip = only(n.outputs[0], "Clip")
    if (typeof clip === "string") return clip
    const t = clipTail(clip)
    if (typeof t === "string") return t
    return { kind: "add", name: n.name, nodes: [ca.name, cb.name, n.name, clip.name, t.narrow], inputs: [a, b], output: t.out, c: sa[1], h: sa[2], w: sa[3], clipLo: t.lo }
  }
  return { conv, add, type }
}

/** The partition of a bound integer graph (every value typed: run `bind` first). */
export const partitionForVta = (g: Graph, options: VtaPartitionOptions = {}): VtaPartition => {
  const m = matcher(g)
  const kept: { node: string; op: string; reason: string }[] = []
  const layerOf = new Map<string, VtaLayer>()
  const offloaded: VtaLayer[] = []
  const claimed = new Set<string>()
  for (const n of g.nodes) {
    if (claimed.has(n.name)) continue
    const head = n.op === "ConvInteger" && n.domain === "" ? m.conv(n) : n.op === "Add" && n.domain === "" && n.inputs.length === 2 ? m.add(n) : undefined
    if (head === undefined) {
      if (options.force?.has(n.name)) throw new VtaPartitionError({ node: n.name, op: n.op, reason: "it heads neither a VTA conv (ConvInteger …) nor a residual add (Add of two int8 → int32 casts)" })
      continue
    }
    const fit = typeof head === "string" ? head : options.fits?.(head)
    if (fit !== undefined) {
      if (options.force?.has(n.name)) throw new VtaPartitionError({ node: n.name, op: n.op, reason: fit })
      // an Add that is not a residual add's shape is ordinary arithmetic: not worth listing
      if (!(n.op === "Add" && typeof head === "string" && head.startsWith("its operands"))) kept.push({ node: n.name, op: n.op, reason: fit })
      continue
    }
    const layer = head as VtaLayer
    if (layer.kind === "add") {
      // the casts come before the Add: they must not have been claimed by another layer
      if (layer.nodes.some((k) => claimed.has(k))) continue
    }
    offloaded.push(layer)
    for (const k of layer.nodes) {
      claimed.add(k)
      layerOf.set(k, layer)
    }
  }
  // segments in graph order; a layer is placed at its last node
  const lastOf = new Map(offloaded.map((l) => [l.nodes[l.nodes.length - 1], l] as const))
  type Run = { device: "c"; nodes: Node[] } | { device: "vta"; layers: VtaLayer[] }
  const runs: Run[] = []
  for (const n of g.nodes) {
    if (layerOf.has(n.name)) {
      const l = lastOf.get(n.name)
      if (!l) continue
      const top = runs[runs.length - 1]
      if (top?.device === "vta") top.layers.push(l)
      else runs.push({ device: "vta", layers: [l] })
      continue
    }
    const top = runs[runs.length - 1]
    if (top?.device === "c") top.nodes.push(n)
    else runs.push({ device: "c", nodes: [n] })
  }
  // what each run reads, to find what a c segment must hand on
  const readsOf = (r: Run): string[] => (r.device === "c" ? r.nodes.flatMap((n) => n.inputs) : r.layers.flatMap((l) => (l.kind === "conv" ? [l.input] : [...l.inputs])))
  const graphOut = new Set(g.outputs.map((o) => o.name))
  const typeOf = (v: string): ValueInfo => {
    const t = m.type(v)
    if (!t) throw new VtaPartitionError({ node: v, op: "value", reason: "it has no type (bind the graph first)" })
    return { name: v, type: t }
  }
  const segments: Segment[] = runs.map((r, k) => {
    if (r.device === "vta") return { device: "vta", layers: r.layers }
    const produced = new Set(r.nodes.flatMap((n) => n.outputs))
    const later = new Set([...runs.slice(k + 1).flatMap(readsOf), ...graphOut])
    const inputs = [...new Set(r.nodes.flatMap((n) => n.inputs))].filter((v) => v !== "" && !produced.has(v) && !g.initializers.has(v))
    const outputs = [...produced].filter((v) => later.has(v))
    const reads = new Set(r.nodes.flatMap((n) => n.inputs))
    const graph: Graph = {
      name: `${g.name}.c${k}`,
      opset: g.opset,
      inputs: inputs.map(typeOf),
      outputs: outputs.map(typeOf),
      initializers: new Map([...g.initializers].filter(([name]) => reads.has(name))),
      nodes: r.nodes,
      valueTypes: new Map([...g.valueTypes].filter(([v]) => produced.has(v) || reads.has(v))),
    }
    return { device: "c", graph }
  })
  return { segments, offloaded, kept, inputs: g.inputs, outputs: g.outputs }
}
