// rewrite.VtaRequantize: the integer graph re-quantized the way TVM quantizes a network for VTA
// (relay.quantize with a global scale, VTA's ResNet-18 tutorial): VTA's GEMM multiplies int8 by
// int8 with no zero points, and its ALU requantizes with shift / clip / add only. onnxruntime's
// QLinearConv requantize — float32(acc) · (x_scale·w_scale/y_scale), rounded half to even, plus a
// zero point — is not expressible there (an arbitrary float multiplier, per-channel scales, and a
// zero point of −128 that puts post-ReLU values at [0, 255] outside int8). So, in the region TVM's
// graph_pack offloads (after the first pooling node, up to the first pooling node after the last
// convolution), every QLinearConv and com.microsoft QLinearAdd is re-quantized:
//   - activations: symmetric int8, zero point 0, ONE power-of-two scale for all (TVM's
//     global_scale): 2^⌈log2 m⌉ / 128 where m is the largest |real value| the int8 graph's params
//     can represent at those nodes;
//   - weights: per tensor, symmetric int8, a power-of-two scale 2^e (the smallest that holds the
//     largest |weight|); the bias at scale act · 2^e;
//   - so the requantize multiplier is exactly 2^−k, k = −e, and the requantize is a shift, rounding
//     half up as TVM's round_for_shift does: 2^(k−1) is added to the bias (`rounding`).
// Written in standard ONNX ops, so the c target runs the same integer graph VTA runs:
//   conv: ConvInteger → Add(bias) → Cast(double) → Mul(2^−k) → Floor → Clip(lo, 127) → Cast(int8)
//         (⌊acc · 2^−k⌋ is VTA's arithmetic shift right; lo 0 where the int8 graph folded a ReLU
//         into the output's zero point −128, else −128)
//   add:  Cast(int32) ×2 → Add → Clip(lo, 127) → Cast(int8)
// At the region's edges the values are re-quantized between the two schemes on the CPU
// (DequantizeLinear → QuantizeLinear). This changes the network's numbers (a coarser quantization,
// as TVM's is); the exact-equality check of the vta target is against c running THIS graph.
import type { Graph, Node } from "../ast/graph/graph.js"
import { node } from "../ast/graph/graph.js"
import { fromArray, scalar, type Tensor } from "../ast/graph/tensor.js"
import { rint } from "./quantize/params.js"
import { graphPass } from "./pass.js"

export interface VtaRequantizeReport {
  /** The activations' one scale (a power of two over 128), or undefined when nothing was converted. */
  readonly activationScale?: number
  readonly converted: readonly string[]
  readonly kept: readonly { readonly node: string; readonly reason: string }[]
}

const POOLS = new Set(["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "QLinearAveragePool", "QLinearGlobalAveragePool"])
const CONVS = new Set(["Conv", "ConvInteger", "QLinearConv"])
const INT8 = 3
const INT32 = 6
const DOUBLE = 11

/** The indices [start, end) of the nodes TVM's graph_pack would offload: after the first pool, up to the first pool after the last conv. */
export const offloadRegion = (g: Graph): { readonly start: number; readonly end: number } => {
  const first = g.nodes.findIndex((n) => POOLS.has(n.op))
  let last = -1
  g.nodes.forEach((n, k) => {
    if (CONVS.has(n.op)) last = k
  })
  if (first < 0 || last <= first) return { start: 0, end: 0 }
  const stop = g.nodes.findIndex((n, k) => k > last && POOLS.has(n.op))
  return { start: first + 1, end: stop < 0 ? g.nodes.length : stop }
}

const scalarOf = (g: Graph, v: string | undefined): number | undefined => {
  const t = v ? g.initializers.get(v) : undefined
  return t && t.data.length === 1 ? Number(t.data[0]) : undefined
}

interface Q {
  readonly scale: number
  readonly zp: number
}

/** The activation params (scale, zero point) of input slots (scaleAt, zpAt) of a node, when constant scalars of an int8 tensor. */
const actParams = (g: Graph, n: Node, scaleAt: number, zpAt: number): Q | undefined => {
  const scale = scalarOf(g, n.inputs[scaleAt])
  const zp = n.inputs[zpAt] ? scalarOf(g, n.inputs[zpAt]) : 0
  const zpt = n.inputs[zpAt] ? g.initializers.get(n.inputs[zpAt]) : undefined
  if (scale === undefined || zp === undefined || (zpt && zpt.dtype !== "int8")) return undefined
  return { scale, zp }
}

const maxAbsOf = (q: Q): number => Math.max(Math.abs((-128 - q.zp) * q.scale), Math.abs((127 - q.zp) * q.scale))

/** Why a node of the region is not re-quantized (undefined: it is), and its params. */
const convertible = (g: Graph, n: Node): { params: Q[]; out: Q } | string => {
  if (n.op === "QLinearConv" && n.domain === "") {
    const x = actParams(g, n, 1, 2)
    const y = actParams(g, n, 6, 7)
    const w = g.initializers.get(n.inputs[3])
    const ws = g.initializers.get(n.inputs[4])
    const wzp = n.inputs[5] ? g.initializers.get(n.inputs[5]) : undefined
    if (!x || !y) return "x or y params that are not constant int8 scalars"
    if (!w || w.dtype !== "int8" || w.shape.length !== 4) return "weights that are not a constant int8 OIHW tensor"
    if (!ws) return "a w_scale that is not constant"
    if (wzp && Array.from(wzp.data as ArrayLike<number>).some((z) => z !== 0)) return "a nonzero w_zero_point"
    if (n.inputs[8] && !g.initializers.get(n.inputs[8])) return "a bias that is not constant"
    const group = n.attrs.group?.kind === "int" ? n.attrs.group.value : 1
    if (group !== 1) return `group ${group}`
    return { params: [x], out: y }
  }
  if (n.op === "QLinearAdd" && n.domain === "com.microsoft") {
    const a = actParams(g, n, 1, 2)
    const b = actParams(g, n, 4, 5)
    const y = actParams(g, n, 6, 7)
    if (!a || !b || !y) return "params that are not constant int8 scalars"
    return { params: [a, b], out: y }
  }
  return `${n.domain ? `${n.domain}.` : ""}${n.op} is not a conv or residual add`
}

/** Nodes and constants a builder adds. */
export interface Built {
  readonly nodes: readonly Node[]
  readonly constants: ReadonlyMap<string, Tensor>
}

/** A shift-requantized conv in standard ONNX ops (the shape rewrite.VtaPartition offloads), from int8 `x` to int8 `y`. */
export const vtaConvNodes = (p: string, x: string, y: string, o: { readonly weights: Tensor; readonly bias?: Int32Array; readonly shift: number | readonly number[]; readonly lo: number; readonly attrs: Node["attrs"] }): Built => {
  const M = o.weights.shape[0]
  const shift = o.shift
  const constants = new Map<string, Tensor>([
    [`${p}_weight`, o.weights],
    // one shift (a scalar), or one per output channel ([1, M, 1, 1])
    [`${p}_shift`, typeof shift === "number" ? scalar("float64", 2 ** -shift) : fromArray("float64", [1, M, 1, 1], shift.map((k) => 2 ** -k))],
    [`${p}_lo`, scalar("float64", o.lo)],
    [`${p}_hi`, scalar("float64", 127)],
  ])
  const nodes: Node[] = [node("ConvInteger", [x, `${p}_weight`], [`${p}_acc`], o.attrs, `${p}_conv`)]
  let sum = `${p}_acc`
  if (o.bias) {
    constants.set(`${p}_bias`, fromArray("int32", [1, M, 1, 1], o.bias))
    nodes.push(node("Add", [sum, `${p}_bias`], [`${p}_biased`], {}, `${p}_bias_add`))
    sum = `${p}_biased`
  }
  nodes.push(
    node("Cast", [sum], [`${p}_wide`], { to: { kind: "int", value: DOUBLE } }, `${p}_widen`),
    node("Mul", [`${p}_wide`, `${p}_shift`], [`${p}_scaled`], {}, `${p}_scale`),
    node("Floor", [`${p}_scaled`], [`${p}_floor`], {}, `${p}_shift_right`),
    node("Clip", [`${p}_floor`, `${p}_lo`, `${p}_hi`], [`${p}_clip`], {}, `${p}_clip`),
    node("Cast", [`${p}_clip`], [y], { to: { kind: "int", value: INT8 } }, `${p}_narrow`),
  )
  return { nodes, constants }
}

/** A residual add clipped to [lo, 127] in standard ONNX ops, int8 `a` + int8 `b` → int8 `y`. */
export const vtaAddNodes = (p: string, a: string, b: string, y: string, lo: number): Built => ({
  constants: new Map([[`${p}_lo`, scalar("int32", lo)], [`${p}_hi`, scalar("int32", 127)]]),
  nodes: [
    node("Cast", [a], [`${p}_a`], { to: { kind: "int", value: INT32 } }, `${p}_widen_a`),
    node("Cast", [b], [`${p}_b`], { to: { kind: "int", value: INT32 } }, `${p}_widen_b`),
    node("Add", [`${p}_a`, `${p}_b`], [`${p}_sum`], {}, `${p}_add`),
    node("Clip", [`${p}_sum`, `${p}_lo`, `${p}_hi`], [`${p}_clip`], {}, `${p}_clip`),
    node("Cast", [`${p}_clip`], [y], { to: { kind: "int", value: INT8 } }, `${p}_narrow`),
  ],
})

/**
 * How the weights' power-of-two scales are shared: one per tensor (TVM's VTA quantization, what
 * VTA's one-immediate SHR a tile runs), one per block of output channels (`block`, VTA's BLOCK_OUT:
 * an SHR per channel block), or one per output channel (an SHR whose shift amounts are
 * accumulator rows, one lane a channel).
 */
export type VtaWeightScales = "tensor" | "block" | "channel"

export interface VtaRequantizeOptions {
  readonly weightScales?: VtaWeightScales
  /**
   * "global" (the default, TVM's): one power-of-two scale for every activation of the region.
   * "value": each value its own, 2^⌈log2 m⌉ / 128 from its own int8 params — a conv's multiplier
   * is still a power of two; a residual add of operands at different scales aligns them by shifts
   * (a shape the partition does not offload: measured on c only, `npm run vta-accuracy`).
   */
  readonly activationScales?: "global" | "value"
  /**
   * How a conv's requantize shift rounds: "half-up", the default (⌊(acc + 2^(k−1)) / 2^k⌋, TVM's
   * qconfig round_for_shift: the 2^(k−1) folded into the bias, so VTA runs it with the same
   * instructions), or "floor" (VTA's SHR alone, ⌊acc / 2^k⌋: a −½ LSB bias at every conv, which
   * moved ResNet-18's logits by 28% of their norm where half up moves them by 3%: docs/vta.md).
   */
  readonly rounding?: "floor" | "half-up"
  /** Output channels a block for "block" (default 16, VTA's default BLOCK_OUT). */
  readonly block?: number
}

/** The output channels that share a weight scale: [start, end) ranges. */
const scaleGroups = (M: number, o: VtaRequantizeOptions): [number, number][] => {
  const size = o.weightScales === "channel" ? 1 : o.weightScales === "block" ? (o.block ?? 16) : M
  return Array.from({ length: Math.ceil(M / size) }, (_, k) => [k * size, Math.min(M, (k + 1) * size)])
}

/**
 * A residual add of int8 operands at power-of-two scales sa, sb into int8 at sy, exactly as
 * shifts would: both widened to int32 and shifted left onto the finer scale, added, then ⌊· / 2^k⌋
 * onto sy, clipped to [lo, 127].
 */
const alignedAddNodes = (p: string, a: string, b: string, y: string, lo: number, [sa, sb, sy]: readonly [number, number, number]): Built => {
  const fine = Math.min(sa, sb)
  return {
    constants: new Map([
      [`${p}_align_a`, scalar("int32", Math.round(sa / fine))],
      [`${p}_align_b`, scalar("int32", Math.round(sb / fine))],
      [`${p}_shift`, scalar("float64", fine / sy)],
      [`${p}_lo`, scalar("float64", lo)],
      [`${p}_hi`, scalar("float64", 127)],
    ]),
    nodes: [
      node("Cast", [a], [`${p}_a`], { to: { kind: "int", value: INT32 } }, `${p}_widen_a`),
      node("Cast", [b], [`${p}_b`], { to: { kind: "int", value: INT32 } }, `${p}_widen_b`),
      node("Mul", [`${p}_a`, `${p}_align_a`], [`${p}_a_aligned`], {}, `${p}_align_a`),
      node("Mul", [`${p}_b`, `${p}_align_b`], [`${p}_b_aligned`], {}, `${p}_align_b`),
      node("Add", [`${p}_a_aligned`, `${p}_b_aligned`], [`${p}_sum`], {}, `${p}_add`),
      node("Cast", [`${p}_sum`], [`${p}_wide`], { to: { kind: "int", value: DOUBLE } }, `${p}_widen`),
      node("Mul", [`${p}_wide`, `${p}_shift`], [`${p}_scaled`], {}, `${p}_scale`),
      node("Floor", [`${p}_scaled`], [`${p}_floor`], {}, `${p}_shift_right`),
      node("Clip", [`${p}_floor`, `${p}_lo`, `${p}_hi`], [`${p}_clip`], {}, `${p}_clip`),
      node("Cast", [`${p}_clip`], [y], { to: { kind: "int", value: INT8 } }, `${p}_narrow`),
    ],
  }
}

/** The graph re-quantized for VTA, and what was converted. */
export const vtaRequantizeWithReport = (g: Graph, options: VtaRequantizeOptions = {}): { readonly graph: Graph; readonly report: VtaRequantizeReport } => {
  const { start, end } = offloadRegion(g)
  const kept: { node: string; reason: string }[] = []
  const chosen = new Map<string, { params: Q[]; out: Q }>()
  g.nodes.forEach((n, k) => {
    if (k < start || k >= end) return
    const c = convertible(g, n)
    if (typeof c === "string") kept.push({ node: n.name, reason: c })
    else chosen.set(n.name, c)
  })
  if (chosen.size === 0) return { graph: g, report: { converted: [], kept } }
  const maxAbs = Math.max(...[...chosen.values()].flatMap((c) => [...c.params, c.out].map(maxAbsOf)))
  const sa = 2 ** Math.ceil(Math.log2(maxAbs)) / 128
  // the int8 graph's params of each value a converted node reads or writes
  const paramsOf = new Map<string, Q>()
  for (const n of g.nodes) {
    const c = chosen.get(n.name)
    if (!c) continue
    const ins = n.op === "QLinearConv" ? [n.inputs[0]] : [n.inputs[0], n.inputs[3]]
    ins.forEach((v, k) => paramsOf.set(v, c.params[k]))
    paramsOf.set(n.outputs[0], c.out)
  }
  const producedInside = new Set([...g.nodes].filter((n) => chosen.has(n.name)).map((n) => n.outputs[0]))
  const vta = (v: string) => `${v}_vta`
  const inits = new Map(g.initializers)
  const konst = (name: string, t: Tensor): string => {
    inits.set(name, t)
    return name
  }
  const saName0 = konst("vta_act_scale", scalar("float32", sa))
  const zpName = konst("vta_act_zero_point", scalar("int8", 0))
  // each value's scale: the one global scale, or (activationScales "value") its own power of two
  const perValue = options.activationScales === "value"
  const saOf = (v: string): number => (perValue ? 2 ** Math.ceil(Math.log2(maxAbsOf(paramsOf.get(v)!))) / 128 : sa)
  const saNameOf = (v: string): string => (perValue ? konst(`${v}_vta_scale`, scalar("float32", saOf(v))) : saName0)
  const nodes: Node[] = []
  const entered = new Set<string>()
  // a value entering the region: re-quantized from its int8 params to the global scale
  const enter = (v: string): string => {
    if (producedInside.has(v) || entered.has(v)) return vta(v)
    entered.add(v)
    const q = paramsOf.get(v)!
    const s = konst(`${v}_in_scale`, scalar("float32", q.scale))
    const z = konst(`${v}_in_zero_point`, scalar("int8", q.zp))
    nodes.push(node("DequantizeLinear", [v, s, z], [`${v}_vta_real`], {}, `${v}_vta_dequantize`))
    nodes.push(node("QuantizeLinear", [`${v}_vta_real`, saNameOf(v), zpName], [vta(v)], {}, `${v}_vta_quantize`))
    return vta(v)
  }
  const readOutside = new Set<string>([...g.outputs.map((o) => o.name), ...g.nodes.filter((n) => !chosen.has(n.name)).flatMap((n) => n.inputs)])
  for (const n of g.nodes) {
    const c = chosen.get(n.name)
    if (!c) {
      nodes.push(n)
      continue
    }
    const y = n.outputs[0]
    const lo = c.out.zp === -128 ? 0 : -128
    if (n.op === "QLinearConv") {
      const x = enter(n.inputs[0])
      const w = g.initializers.get(n.inputs[3])!
      const ws = g.initializers.get(n.inputs[4])!
      const [M, I, KH, KW] = w.shape
      const per = I * KH * KW
      const wsAt = (o: number) => Number(ws.data.length === 1 ? ws.data[0] : ws.data[o])
      // each group of output channels its power-of-two scale 2^e: the smallest that holds its largest |weight|
      const eOf = new Int32Array(M)
      for (const [from, to] of scaleGroups(M, options)) {
        let wmax = 0
        for (let i = from * per; i < to * per; i++) wmax = Math.max(wmax, Math.abs(Number(w.data[i]) * wsAt(Math.floor(i / per))))
        eOf.fill(wmax === 0 ? 0 : Math.ceil(Math.log2(wmax / 127)), from, to)
      }
      const w2 = new Int8Array(w.data.length)
      for (let i = 0; i < w.data.length; i++) w2[i] = Math.max(-127, Math.min(127, rint((Number(w.data[i]) * wsAt(Math.floor(i / per))) / 2 ** eOf[Math.floor(i / per)])))
      const bq = n.inputs[8] ? g.initializers.get(n.inputs[8]) : undefined
      const b2 = new Int32Array(M)
      const sx = saOf(n.inputs[0])
      for (let o = 0; o < M; o++) b2[o] = bq ? rint((Number(bq.data[o]) * c.params[0].scale * wsAt(o)) / (sx * 2 ** eOf[o])) : 0
      const attrs = Object.fromEntries(["kernel_shape", "pads", "strides", "dilations", "group", "auto_pad"].flatMap((k) => (n.attrs[k] ? [[k, n.attrs[k]!]] : [])))
      // the multiplier sx · 2^e / sy = 2^−k (with one global scale, sx = sy and k = −e)
      const shifts = Array.from(eOf, (e) => Math.round(Math.log2(saOf(y) / sx)) - e)
      if ((options.rounding ?? "half-up") === "half-up") for (let o = 0; o < M; o++) if (shifts[o] >= 1) b2[o] += 2 ** (shifts[o] - 1)
      const shift = shifts.every((k) => k === shifts[0]) ? shifts[0] : shifts
      const built = vtaConvNodes(`${n.name}_vta`, x, vta(y), { weights: fromArray("int8", w.shape, w2), bias: b2, shift, lo, attrs })
      built.constants.forEach((t, k) => konst(k, t))
      nodes.push(...built.nodes)
    } else if (perValue && (saOf(n.inputs[0]) !== saOf(y) || saOf(n.inputs[3]) !== saOf(y))) {
      const built = alignedAddNodes(`${n.name}_vta`, enter(n.inputs[0]), enter(n.inputs[3]), vta(y), lo, [saOf(n.inputs[0]), saOf(n.inputs[3]), saOf(y)])
      built.constants.forEach((t, k) => konst(k, t))
      nodes.push(...built.nodes)
    } else {
      const built = vtaAddNodes(`${n.name}_vta`, enter(n.inputs[0]), enter(n.inputs[3]), vta(y), lo)
      built.constants.forEach((t, k) => konst(k, t))
      nodes.push(...built.nodes)
    }
    // a value leaving the region: back to its int8 params for the CPU's readers
    if (readOutside.has(y)) {
      const q = c.out
      const s = konst(`${y}_out_scale`, scalar("float32", q.scale))
      const z = konst(`${y}_out_zero_point`, scalar("int8", q.zp))
      nodes.push(node("DequantizeLinear", [vta(y), saNameOf(y), zpName], [`${y}_vta_out_real`], {}, `${y}_vta_out_dequantize`))
      nodes.push(node("QuantizeLinear", [`${y}_vta_out_real`, s, z], [y], {}, `${y}_vta_out_quantize`))
    }
  }
  // constants only the replaced nodes read are dropped
  const read = new Set(nodes.flatMap((n) => n.inputs))
  for (const k of [...inits.keys()]) if (!read.has(k)) inits.delete(k)
  const graph: Graph = { ...g, nodes, initializers: inits, valueTypes: new Map() }
  return { graph, report: { activationScale: sa, converted: [...chosen.keys()], kept } }
}

export const vtaRequantizeSync = (g: Graph): Graph => vtaRequantizeWithReport(g).graph

/** Not in any default pipeline: the vta target runs it on the integer graph (it changes the numbers, as TVM's VTA quantization does). */
export const vtaRequantize = graphPass("rewrite.VtaRequantize", 2, vtaRequantizeSync)
