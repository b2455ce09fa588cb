// A small builder for zoo networks: named values, seeded parameters and the layers the standard
// networks share (conv + batch norm, pools, dense layers). Each parameter draws from its own
// stream, seeded by the model seed and the parameter's name, so weights do not depend on the
// order layers are built in.
import { attr, type Attrs } from "../ast/graph/attrs.js"
import { makeGraph, node, type Graph, type Node, type ValueInfo } from "../ast/graph/graph.js"
import type { ValueType } from "../ast/graph/op.js"
import { fromArray, tensor, type Tensor } from "../ast/graph/tensor.js"
import { fillNormal, fillUniform, mixSeed } from "./random.js"

/** Attribute floats are float32 in ONNX: round them here so a decoded model equals the built one. */
export const f32 = Math.fround

export class NetBuilder {
  private readonly nodes: Node[] = []
  private readonly inits = new Map<string, Tensor>()
  private readonly inputs: ValueInfo[] = []
  private readonly names = new Set<string>()
  private readonly memo = new Map<string, string>()

  constructor(
    readonly seed: number,
    readonly opset: number,
  ) {}

  /** A fresh value name: `base`, or `base_1`, `base_2`… when taken. */
  fresh(base: string): string {
    let name = base
    for (let k = 1; this.names.has(name); k++) name = `${base}_${k}`
    this.names.add(name)
    return name
  }

  input(name: string, type: ValueType): string {
    this.inputs.push({ name: this.fresh(name), type })
    return name
  }

  /** A float32 parameter filled by `fill` from the parameter's own random stream (its seed). */
  param(name: string, shape: readonly number[], fill: (seed: number, out: Float32Array) => void): string {
    let n = 1
    for (const d of shape) n *= d
    const data = new Float32Array(n)
    fill(mixSeed(this.seed, name), data)
    return this.constant(name, tensor("float32", shape, data))
  }

  normal(name: string, shape: readonly number[], std: number, mean = 0): string {
    return this.param(name, shape, (seed, out) => fillNormal(seed, out, mean, std))
  }

  uniform(name: string, shape: readonly number[], lo: number, hi: number): string {
    return this.param(name, shape, (seed, out) => fillUniform(seed, out, lo, hi))
  }

  constant(name: string, t: Tensor): string {
    const n = this.fresh(name)
    this.inits.set(n, t)
    return n
  }

  int64s(name: string, values: readonly number[]): string {
    return this.constant(name, fromArray("int64", [values.length], values))
  }

  scalarF32(name: string, value: number): string {
    return this.constant(name, fromArray("float32", [], [value]))
  }

  /** One node with one output named `name` (made unique). */
  op(op: string, inputs: readonly string[], name: string, attrs: Attrs = {}): string {
    const out = this.fresh(name)
    this.nodes.push(node(op, inputs, [out], attrs, out))
    return out
  }

  /** One node with several outputs (Split), named `name`, `name_1`, … ; the node takes the first's name. */
  ops(op: string, inputs: readonly string[], name: string, count: number, attrs: Attrs = {}): string[] {
    const outs = Array.from({ length: count }, () => this.fresh(name))
    this.nodes.push(node(op, inputs, outs, attrs, outs[0]))
    return outs
  }

  /** A constant made once per builder (shared scalars and shapes): the first call names and stores it. */
  shared(name: string, make: () => Tensor): string {
    let v = this.memo.get(name)
    if (v === undefined) {
      v = this.constant(name, make())
      this.memo.set(name, v)
    }
    return v
  }

  build(graphName: string, outputs: readonly ValueInfo[]): Graph {
    return makeGraph({
      name: graphName,
      opset: this.opset,
      inputs: this.inputs,
      outputs,
      initializers: this.inits,
      nodes: this.nodes,
    })
  }
}

// ---------------------------------------------------------------------------------------------
// Layers

export interface ConvSpec {
  readonly cin: number
  readonly cout: number
  readonly k: number
  readonly stride?: number
  readonly pad?: number
  readonly group?: number
  readonly bias?: boolean
  /** Multiplies the He standard deviation sqrt(2 / fan_in). */
  readonly gain?: number
}

export const conv = (b: NetBuilder, x: string, name: string, s: ConvSpec): string => {
  const group = s.group ?? 1
  const fanIn = (s.cin / group) * s.k * s.k
  const w = b.normal(`${name}.weight`, [s.cout, s.cin / group, s.k, s.k], (s.gain ?? 1) * Math.sqrt(2 / fanIn))
  const inputs = [x, w]
  if (s.bias) inputs.push(b.uniform(`${name}.bias`, [s.cout], -0.1, 0.1))
  const pad = s.pad ?? 0
  const stride = s.stride ?? 1
  return b.op("Conv", inputs, name, {
    kernel_shape: attr.ints([s.k, s.k]),
    strides: attr.ints([stride, stride]),
    pads: attr.ints([pad, pad, pad, pad]),
    dilations: attr.ints([1, 1]),
    group: attr.int(group),
  })
}

/**
 * Inference-mode BatchNormalization with random but sane statistics: mean ~ N(0, 0.1²),
 * var ~ U(0.5, 1.5), scale ~ gain·U(0.5, 1.0), bias ~ N(0, 0.1²).
 */
export const batchNorm = (b: NetBuilder, x: string, name: string, c: number, gain = 1, eps = 1e-5): string => {
  const scale = b.uniform(`${name}.weight`, [c], 0.5 * gain, 1.0 * gain)
  const bias = b.normal(`${name}.bias`, [c], 0.1)
  const mean = b.normal(`${name}.running_mean`, [c], 0.1)
  const variance = b.uniform(`${name}.running_var`, [c], 0.5, 1.5)
  return b.op("BatchNormalization", [x, scale, bias, mean, variance], name, { epsilon: attr.float(f32(eps)), momentum: attr.float(f32(0.9)) })
}

export const relu = (b: NetBuilder, x: string, name: string): string => b.op("Relu", [x], name)

export const add = (b: NetBuilder, x: string, y: string, name: string): string => b.op("Add", [x, y], name)

export const maxPool = (b: NetBuilder, x: string, name: string, k: number, stride: number, pad: number, ceil = false): string =>
  b.op("MaxPool", [x], name, {
    kernel_shape: attr.ints([k, k]),
    strides: attr.ints([stride, stride]),
    pads: attr.ints([pad, pad, pad, pad]),
    ...(ceil ? { ceil_mode: attr.int(1) } : {}),
  })

/** GlobalAveragePool + Flatten: [N, C, H, W] → [N, C]. */
export const poolFlatten = (b: NetBuilder, x: string, name: string, out = `${name}.flatten`): string =>
  b.op("Flatten", [b.op("GlobalAveragePool", [x], `${name}.pool`)], out, { axis: attr.int(1) })

/** A dense layer as Gemm with a [out, in] weight (transB = 1), like PyTorch's Linear exports. */
export const linear = (
  b: NetBuilder,
  x: string,
  name: string,
  fin: number,
  fout: number,
  opts: { readonly gain?: number; readonly out?: string } = {},
): string => {
  const w = b.normal(`${name}.weight`, [fout, fin], (opts.gain ?? Math.SQRT2) / Math.sqrt(fin))
  const bias = b.uniform(`${name}.bias`, [fout], -0.1, 0.1)
  return b.op("Gemm", [x, w, bias], opts.out ?? name, { alpha: attr.float(1), beta: attr.float(1), transB: attr.int(1) })
}

export const imageInput = (b: NetBuilder): string => b.input("input", { dtype: "float32", shape: [1, 3, 224, 224] })

export const logits = (name: string, n = 1000): ValueInfo => ({ name, type: { dtype: "float32", shape: [1, n] } })
