// Layers of the newer networks, spelled as PyTorch's ONNX exporter writes them (opset 13–17):
// SiLU as Sigmoid·Mul, squeeze-excite as GlobalAveragePool → 1×1 convs → gate · input, LayerNorm
// as LayerNormalization (opset 17), the exact GELU in its Erf form, Linear on 3-D or 4-D input as
// MatMul + Add.
import { attr } from "../ast/graph/attrs.js"
import { fromArray } from "../ast/graph/tensor.js"
import { batchNorm, conv, f32, type ConvSpec, type NetBuilder } from "./builder.js"

/** An activation as a layer: input value and node name in, output value out. */
export type Act = (b: NetBuilder, x: string, name: string) => string

/** SiLU(x) = x · σ(x), as the exporter writes it (no Swish op in ONNX before opset 22). */
export const silu: Act = (b, x, name) => b.op("Mul", [x, b.op("Sigmoid", [x], `${name}.sigmoid`)], name)

export const reluAct: Act = (b, x, name) => b.op("Relu", [x], name)

/** HardSwish (opset 14's op): x · relu6(x + 3) / 6. */
export const hardSwish: Act = (b, x, name) => b.op("HardSwish", [x], name)

/** PyTorch's Hardsigmoid, relu6(x + 3) / 6, is ONNX's HardSigmoid with α = 1/6, β = ½. */
export const hardSigmoid: Act = (b, x, name) => b.op("HardSigmoid", [x], name, { alpha: attr.float(f32(1 / 6)), beta: attr.float(f32(0.5)) })

export const sigmoid: Act = (b, x, name) => b.op("Sigmoid", [x], name)

/** A scalar float32 constant made once per model and shared by every layer that uses it. */
export const scalar = (b: NetBuilder, name: string, value: number): string => b.shared(name, () => fromArray("float32", [], [value]))

/** An int64 shape constant made once per model. */
export const shape = (b: NetBuilder, name: string, dims: readonly number[]): string => b.shared(name, () => fromArray("int64", [dims.length], dims))

/**
 * torchvision's Conv2dNormActivation at `p`: conv `p.0`, batch norm `p.1` (scaled by `gain`),
 * then the activation, if any.
 */
export const convBnAct = (b: NetBuilder, x: string, p: string, s: ConvSpec, act?: Act, opts: { gain?: number; eps?: number } = {}): string => {
  const y = batchNorm(b, conv(b, x, `${p}.0`, { pad: (s.k - 1) >> 1, ...s }), `${p}.1`, s.cout, opts.gain ?? 1, opts.eps ?? 1e-5)
  return act ? act(b, y, `${p}.act`) : y
}

/**
 * torchvision's SqueezeExcitation at `p`: GlobalAveragePool, fc1 (1×1 conv with bias), the
 * activation, fc2, the gate, then gate · input.
 */
export const squeezeExcite = (b: NetBuilder, x: string, p: string, c: number, squeeze: number, act: Act, gate: Act): string => {
  let s = b.op("GlobalAveragePool", [x], `${p}.avgpool`)
  s = act(b, conv(b, s, `${p}.fc1`, { cin: c, cout: squeeze, k: 1, bias: true }), `${p}.act`)
  s = gate(b, conv(b, s, `${p}.fc2`, { cin: squeeze, cout: c, k: 1, bias: true }), `${p}.gate`)
  return b.op("Mul", [s, x], `${p}.mul`)
}

/** LayerNormalization over the last axis (opset 17), scale ~ U(0.8, 1.2), bias ~ N(0, 0.05²); parameters `name.*`, output `out`. */
export const layerNorm = (b: NetBuilder, x: string, name: string, c: number, eps: number, out = name): string => {
  const scale = b.uniform(`${name}.weight`, [c], 0.8, 1.2)
  const bias = b.normal(`${name}.bias`, [c], 0.05)
  return b.op("LayerNormalization", [x, scale, bias], out, { axis: attr.int(-1), epsilon: attr.float(f32(eps)) })
}

/** x @ W + bias with W [fin, fout]: how PyTorch exports Linear on input of rank 3 or more. */
export const dense = (b: NetBuilder, x: string, name: string, fin: number, fout: number, gain = 1): string => {
  const w = b.normal(`${name}.weight`, [fin, fout], gain / Math.sqrt(fin))
  const bias = b.uniform(`${name}.bias`, [fout], -0.1, 0.1)
  return b.op("Add", [b.op("MatMul", [x, w], `${name}.matmul`), bias], name)
}

/** The exact GELU as the exporter writes it below opset 20: u · (1 + erf(u / √2)) · ½. */
export const gelu: Act = (b, u, name) => {
  const erf = b.op("Erf", [b.op("Div", [u, scalar(b, "gelu.sqrt2", Math.SQRT2)], `${name}.div`)], `${name}.erf`)
  const onePlus = b.op("Add", [erf, scalar(b, "gelu.one", 1)], `${name}.add`)
  return b.op("Mul", [b.op("Mul", [u, onePlus], `${name}.mul`), scalar(b, "gelu.half", 0.5)], name)
}

/** Transpose with a permutation. */
export const transpose = (b: NetBuilder, x: string, name: string, perm: readonly number[]): string => b.op("Transpose", [x], name, { perm: attr.ints(perm) })
