// Small shift-requantized int8 networks (the shape rewrite.VtaRequantize writes and
// rewrite.VtaPartition offloads), seeded: float input → QuantizeLinear (c) → residual blocks of
// conv 3×3 + ReLU, conv 3×3, add + ReLU (vta) → a 1×1 stride-2 conv to `out` channels (vta) →
// DequantizeLinear (c). Channels need not be a multiple of the block (the pack pads them).
import { makeGraph, node, type Graph, type Node } from "../../src/ast/graph/graph.js"
import { fromArray, scalar, type Tensor } from "../../src/ast/graph/tensor.js"
import { vtaAddNodes, vtaConvNodes } from "../../src/rewrite/vta-requantize.js"

export interface VtaNetSpec {
  readonly c: number
  readonly h: number
  readonly w: number
  readonly blocks: number
  readonly out: number
  readonly seed: number
}

const rng = (seed: number) => {
  let s = (seed >>> 0) || 1
  return () => {
    s ^= s << 13
    s ^= s >>> 17
    s ^= s << 5
    return (s >>> 0) / 2 ** 32
  }
}

export const vtaNet = (spec: VtaNetSpec): Graph => {
  const r = rng(spec.seed)
  const int = (lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1))
  const nodes: Node[] = []
  const inits = new Map<string, Tensor>()
  const add = (b: { nodes: readonly Node[]; constants: ReadonlyMap<string, Tensor> }) => {
    nodes.push(...b.nodes)
    b.constants.forEach((t, k) => inits.set(k, t))
  }
  const weights = (m: number, c: number, k: number) => fromArray("int8", [m, c, k, k], Array.from({ length: m * c * k * k }, () => int(-12, 12)))
  const bias = (m: number) => Int32Array.from({ length: m }, () => int(-400, 400))
  const conv = (k: number, stride: number, pad: number) => ({ kernel_shape: { kind: "ints" as const, value: [k, k] }, strides: { kind: "ints" as const, value: [stride, stride] }, pads: { kind: "ints" as const, value: [pad, pad, pad, pad] } })
  // a shift that keeps a 3×3 conv's sums mostly inside int8 after the shift (the clip still bites)
  const shiftFor = (c: number, k: number) => Math.max(0, Math.round(Math.log2(c * k * k * 12 * 40)) - 6)
  inits.set("in_scale", scalar("float32", 1 / 16))
  inits.set("in_zp", scalar("int8", 0))
  nodes.push(node("QuantizeLinear", ["input", "in_scale", "in_zp"], ["x0"], {}, "quantize"))
  let x = "x0"
  for (let b = 0; b < spec.blocks; b++) {
    add(vtaConvNodes(`b${b}.conv1`, x, `b${b}.y1`, { weights: weights(spec.c, spec.c, 3), bias: bias(spec.c), shift: shiftFor(spec.c, 3), lo: 0, attrs: conv(3, 1, 1) }))
    add(vtaConvNodes(`b${b}.conv2`, `b${b}.y1`, `b${b}.y2`, { weights: weights(spec.c, spec.c, 3), ...(b % 2 === 0 ? { bias: bias(spec.c) } : {}), shift: shiftFor(spec.c, 3), lo: -128, attrs: conv(3, 1, 1) }))
    add(vtaAddNodes(`b${b}.add`, `b${b}.y2`, x, `b${b}.out`, 0))
    x = `b${b}.out`
  }
  add(vtaConvNodes("head", x, "y", { weights: weights(spec.out, spec.c, 1), bias: bias(spec.out), shift: shiftFor(spec.c, 1), lo: -128, attrs: conv(1, 2, 0) }))
  inits.set("out_scale", scalar("float32", 1 / 16))
  inits.set("out_zp", scalar("int8", 0))
  nodes.push(node("DequantizeLinear", ["y", "out_scale", "out_zp"], ["output"], {}, "dequantize"))
  const oh = Math.floor((spec.h - 1) / 2) + 1
  const ow = Math.floor((spec.w - 1) / 2) + 1
  return makeGraph({
    name: "vta-net",
    opset: 13,
    inputs: [{ name: "input", type: { dtype: "float32", shape: [1, spec.c, spec.h, spec.w] } }],
    outputs: [{ name: "output", type: { dtype: "float32", shape: [1, spec.out, oh, ow] } }],
    initializers: inits,
    nodes,
  })
}

/** A seeded float input in [-8, 8) (the int8 range at scale 1/16). */
export const vtaNetInput = (spec: VtaNetSpec): Tensor => {
  const r = rng(spec.seed * 7 + 1)
  return fromArray("float32", [1, spec.c, spec.h, spec.w], Array.from({ length: spec.c * spec.h * spec.w }, () => r() * 16 - 8))
}
