// The graph builder under the model-like generators (arbitrary-models.ts): a seeded PRNG, values
// that carry their dtype and shape, and nodes whose output types come from the op registry's own
// type relations as each node is added — so a motif states only the ops and attributes it wants,
// and a case that the registry would reject is a bug of the generator, reported where it is made.
import { resolveNode } from "./evaluate.js"
import type { AttrValue, Graph, Node, ValueInfo } from "./graph.js"
import { makeGraph } from "./graph.js"
import type { DType } from "./dtype.js"
import type { ValueType } from "./op.js"
import { fromArray, sizeOf, type Tensor } from "./tensor.js"

/** mulberry32: a small seeded PRNG. */
export const prng = (seed: number) => {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return {
    next,
    int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)],
    float: (lo = -1, hi = 1) => lo + (hi - lo) * next(),
  }
}
export type Rng = ReturnType<typeof prng>

/** A graph and the inputs to run it on. */
export interface GraphCase {
  readonly graph: Graph
  readonly inputs: ReadonlyMap<string, Tensor>
}

/** A value of the graph being built: its name and static type. */
export interface Val {
  readonly name: string
  readonly dtype: DType
  readonly shape: readonly number[]
}

/** A tensor of `shape` with values drawn uniformly from [lo, hi), converted to `dtype` as Cast would. */
export const randomTensor = (rng: Rng, shape: readonly number[], lo = -1, hi = 1, dtype: DType = "float32"): Tensor =>
  fromArray(dtype, shape, Array.from({ length: sizeOf(shape) }, () => rng.float(lo, hi)))

/** A graph input with its feed. */
interface Input {
  readonly info: ValueInfo
  readonly feed: Tensor
}

export interface GraphBuilder {
  readonly rng: Rng
  /** The channel counts the motifs draw from. */
  readonly channels: readonly number[]
  /** A graph input fed with `feed`. */
  readonly input: (name: string, feed: Tensor) => Val
  /** An initializer. */
  readonly constant: (t: Tensor, base?: string) => Val
  /** A node of `op` with `outputs` outputs; their types by the registry's type relation. Absent inputs as undefined. */
  readonly op: (op: string, inputs: readonly (Val | undefined)[], attrs?: Readonly<Record<string, AttrValue>>, outputs?: number) => Val[]
  /** A one-output node. */
  readonly op1: (op: string, inputs: readonly (Val | undefined)[], attrs?: Readonly<Record<string, AttrValue>>) => Val
  /** The graph with `outputs` as its outputs (and the inputs' feeds). */
  readonly finish: (name: string, outputs: readonly Val[], opset: number) => { readonly graph: Graph; readonly inputs: ReadonlyMap<string, Tensor> }
}

export const graphBuilder = (rng: Rng, opset: number, channels: readonly number[] = [8, 16]): GraphBuilder => {
  const nodes: Node[] = []
  const consts = new Map<string, Tensor>()
  const inputs: Input[] = []
  const types = new Map<string, ValueType>()
  let counter = 0
  const fresh = (base: string) => `${base}${counter++}`
  const input = (name: string, feed: Tensor): Val => {
    inputs.push({ info: { name, type: { dtype: feed.dtype, shape: feed.shape } }, feed })
    types.set(name, { dtype: feed.dtype, shape: feed.shape })
    return { name, dtype: feed.dtype, shape: feed.shape }
  }
  const constant = (t: Tensor, base = "c"): Val => {
    const name = fresh(base)
    consts.set(name, t)
    types.set(name, { dtype: t.dtype, shape: t.shape })
    return { name, dtype: t.dtype, shape: t.shape }
  }
  const op = (opName: string, ins: readonly (Val | undefined)[], attrs: Readonly<Record<string, AttrValue>> = {}, outputs = 1): Val[] => {
    const outs = Array.from({ length: outputs }, () => fresh("v"))
    const n: Node = { name: fresh(`${opName.toLowerCase()}_`), op: opName, domain: "", inputs: ins.map((v) => v?.name ?? ""), outputs: outs, attrs }
    const { def, attrs: decoded } = resolveNode(n)
    const outTypes = def.infer({
      node: n.name,
      attrs: decoded,
      opset,
      inputs: ins.map((v) => v && types.get(v.name)),
      values: ins.map((v) => v && consts.get(v.name)),
      outputs,
      inferSubgraph: () => [],
    })
    nodes.push(n)
    return outs.map((name, j) => {
      const t = outTypes[j]
      if (!t || !t.shape.every((d): d is number => typeof d === "number")) throw new Error(`generator: ${opName} output ${j} has no static type`)
      types.set(name, t)
      return { name, dtype: t.dtype, shape: t.shape }
    })
  }
  const finish = (name: string, outputs: readonly Val[], graphOpset: number) => ({
    graph: makeGraph({
      name,
      opset: graphOpset,
      inputs: inputs.map((i) => i.info),
      outputs: outputs.map((v) => ({ name: v.name, type: { dtype: v.dtype, shape: v.shape } })),
      initializers: consts,
      nodes,
    }),
    inputs: new Map(inputs.map((i) => [i.info.name, i.feed])),
  })
  return { rng, channels, input, constant, op, op1: (o, ins, attrs) => op(o, ins, attrs, 1)[0], finish }
}
