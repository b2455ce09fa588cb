// The QDQ graph, as onnxruntime's quantize_static writes it (QuantFormat.QDQ): every planned
// activation T gets T → QuantizeLinear → DequantizeLinear right after it is computed, and every
// reader of T reads the dequantized value; constant weights are stored int8 (symmetric, per
// output channel with perChannel) behind a DequantizeLinear; biases int32 with scale
// x_scale · w_scale behind a DequantizeLinear; folded ReLUs are gone (their readers read the
// node before them). A graph output keeps its name: its producer writes T_QuantizeLinear_Input.
import { attr } from "../../ast/graph/attrs.js"
import { makeGraph, type Graph, type Node } from "../../ast/graph/graph.js"
import { tensor, type Tensor } from "../../ast/graph/tensor.js"
import { quantizeBias, quantizeConstantActivation, quantizeWeight, type ActivationParams } from "./params.js"
import type { QuantizationPlan } from "./plan.js"

/** What was stored for one weighted node (for the report). */
export interface WeightInfo {
  readonly node: string
  readonly scales: Float32Array
}

export interface QdqGraph {
  readonly graph: Graph
  /** Per quantized tensor, the value its readers see (the DequantizeLinear's output). */
  readonly dequantized: ReadonlyMap<string, string>
  readonly weights: readonly WeightInfo[]
}

const scalarF32 = (v: number): Tensor => tensor("float32", [], new Float32Array([v]))
const scalarI8 = (v: number): Tensor => tensor("int8", [], new Int8Array([v]))

export const insertQdq = (g: Graph, plan: QuantizationPlan, params: ReadonlyMap<string, ActivationParams>, perChannel: boolean): QdqGraph => {
  const used = new Set<string>([...g.initializers.keys(), ...g.inputs.map((i) => i.name), ...g.outputs.map((o) => o.name)])
  for (const n of g.nodes) {
    used.add(n.name)
    for (const v of [...n.inputs, ...n.outputs]) used.add(v)
  }
  const fresh = (base: string): string => {
    let name = base
    for (let k = 1; used.has(name); k++) name = `${base}_${k}`
    used.add(name)
    return name
  }
  const initializers = new Map<string, Tensor>(g.initializers)
  const outputs = new Set(g.outputs.map((o) => o.name))
  const inQ = new Set(plan.tensors)
  const resolve = (v: string) => plan.aliases.get(v) ?? v

  // the float name each quantized tensor is computed under, and the name its readers read
  const source = new Map<string, string>()
  const dequantized = new Map<string, string>()
  for (const t of plan.tensors) {
    source.set(t, outputs.has(t) ? fresh(`${t}_QuantizeLinear_Input`) : t)
    dequantized.set(t, outputs.has(t) ? t : fresh(`${t}_DequantizeLinear_Output`))
  }
  const paramsOf = (t: string): ActivationParams => {
    const p = params.get(t)
    if (!p) throw new Error(`insertQdq: no parameters for '${t}'`)
    return p
  }

  const nodes: Node[] = []
  const qdqPair = (t: string) => {
    const p = paramsOf(t)
    const scale = fresh(`${t}_scale`)
    const zp = fresh(`${t}_zero_point`)
    initializers.set(scale, scalarF32(p.scale))
    initializers.set(zp, scalarI8(p.zeroPoint))
    const q = fresh(`${t}_QuantizeLinear_Output`)
    nodes.push({ name: fresh(`${t}_QuantizeLinear`), op: "QuantizeLinear", domain: "", inputs: [source.get(t)!, scale, zp], outputs: [q], attrs: {} })
    nodes.push({ name: fresh(`${t}_DequantizeLinear`), op: "DequantizeLinear", domain: "", inputs: [q, scale, zp], outputs: [dequantized.get(t)!], attrs: {} })
  }
  /** A stored constant behind a DequantizeLinear (memoized: a weight read twice is stored once). */
  const constantDq = new Map<string, string>()
  const dqConstant = (key: string, base: string, values: Tensor, scales: Float32Array, zero: Tensor, axis?: number): string => {
    const known = constantDq.get(key)
    if (known) return known
    const qName = fresh(`${base}_quantized`)
    const sName = fresh(`${base}_scale`)
    const zName = fresh(`${base}_zero_point`)
    const perAxis = axis !== undefined
    initializers.set(qName, values)
    initializers.set(sName, perAxis ? tensor("float32", [scales.length], scales) : scalarF32(scales[0]))
    initializers.set(zName, zero)
    const out = fresh(`${base}_DequantizeLinear_Output`)
    nodes.push({ name: fresh(`${base}_DequantizeLinear`), op: "DequantizeLinear", domain: "", inputs: [qName, sName, zName], outputs: [out], attrs: perAxis ? { axis: attr.int(axis) } : {} })
    constantDq.set(key, out)
    return out
  }

  const byNode = new Map(plan.nodes.map((q) => [q.node, q] as const))
  const foldedNodes = new Set(plan.folded.map((f) => f.node))
  const weights: WeightInfo[] = []
  const readName = (v: string): string => {
    if (v === "") return v
    const r = resolve(v)
    return inQ.has(r) ? dequantized.get(r)! : r
  }

  for (const i of g.inputs) if (inQ.has(i.name)) qdqPair(i.name)
  for (const n of g.nodes) {
    if (foldedNodes.has(n.name)) continue
    const q = byNode.get(n)
    let inputs = n.inputs.map(readName)
    if (q) {
      inputs = [...inputs]
      for (const c of q.constants) {
        const { values, params: p } = quantizeConstantActivation(g.initializers.get(c)!)
        const out = dqConstant(`act:${c}`, c, values, new Float32Array([p.scale]), scalarI8(p.zeroPoint))
        n.inputs.forEach((v, k) => {
          if (v === c) inputs[k] = out
        })
      }
      if (q.weight) {
        const w = g.initializers.get(q.weight)!
        const qw = quantizeWeight(w, perChannel ? q.weightAxis : undefined)
        const wZero = qw.axis === undefined ? scalarI8(0) : tensor("int8", [qw.scales.length], new Int8Array(qw.scales.length))
        inputs[1] = dqConstant(`w:${q.weight}:${qw.axis ?? "t"}`, q.weight, qw.values, qw.scales, wZero, qw.axis)
        weights.push({ node: n.name, scales: qw.scales })
        if (q.bias) {
          const xScale = paramsOf(resolve(n.inputs[0])).scale
          const qb = quantizeBias(g.initializers.get(q.bias)!, xScale, qw.scales)
          const bZero = qb.axis === undefined ? tensor("int32", [], new Int32Array(1)) : tensor("int32", [qb.scales.length], new Int32Array(qb.scales.length))
          inputs[2] = dqConstant(`b:${q.bias}:${n.name}`, q.bias, qb.values, qb.scales, bZero, qb.axis)
        }
      }
    }
    const outs = n.outputs.map((o) => (inQ.has(o) ? source.get(o)! : o))
    nodes.push({ ...n, inputs, outputs: outs })
    for (const o of n.outputs) if (inQ.has(o)) qdqPair(o)
  }

  // keep only the initializers something still reads
  const read = new Set<string>(g.outputs.map((o) => o.name))
  for (const n of nodes) for (const v of n.inputs) read.add(v)
  const kept = new Map([...initializers].filter(([k]) => read.has(k)))
  const graph = makeGraph({ name: g.name, opset: g.opset, inputs: g.inputs, outputs: g.outputs, initializers: kept, nodes })
  return { graph, dequantized, weights }
}
