// Generators of random well-typed graphs with matching inputs, for property tests of rewrites
// (part of the public API: a user checks a custom pass the same way). A case is built from a seed
// and a node budget by a seeded PRNG, so fast-check shrinks it by shrinking the budget and seed.
// Types come first (shapes are tracked as values are made), then ops that fit them: elementwise
// chains, broadcasting against constants, Conv/BatchNormalization/pooling, transposes and
// reshapes, PyTorch-style shape subgraphs (Shape → Gather → Concat → Reshape), reductions,
// concatenation, identities (x*1, x+0, Identity, Cast to the same type) and diamonds (values reused).
// With `modelShare`, a share of the cases comes from the model-like generator (arbitrary-models.ts):
// the motifs of real networks on the sizes and parameters where rewrite bugs show.
import * as fc from "fast-check"
import { attr, type Attrs } from "./attrs.js"
import type { Graph, Node, ValueInfo } from "./graph.js"
import { makeGraph } from "./graph.js"
import { sizeOf, tensor, type Tensor } from "./tensor.js"
import { prng, type GraphCase, type Rng } from "./arbitrary-builder.js"
import { arbModelGraphCase, type ModelGenOptions } from "./arbitrary-models.js"

export type { GraphCase } from "./arbitrary-builder.js"
export { prng } from "./arbitrary-builder.js"
export { arbModelGraphCase, buildModelGraph, MOTIF_NAMES, type ModelGenOptions, type MotifName, type Stem } from "./arbitrary-models.js"

interface Val {
  readonly name: string
  readonly shape: readonly number[]
}

const randomTensor = (rng: Rng, shape: readonly number[], lo = -1, hi = 1): Tensor => {
  const n = sizeOf(shape)
  const d = new Float32Array(n)
  for (let i = 0; i < n; i++) d[i] = Math.fround(rng.float(lo, hi))
  return tensor("float32", shape, d)
}
const i64 = (xs: readonly number[]): Tensor => tensor("int64", [xs.length], Float64Array.from(xs))

export interface GraphGenOptions {
  /** Ops the generator may use (default: all it knows). */
  readonly ops?: readonly string[]
  readonly opset?: number
}

export const GENERATED_OPS = [
  "Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Add", "Mul", "Sub", "Div", "Conv", "BatchNormalization", "MaxPool",
  "AveragePool", "GlobalAveragePool", "Transpose", "Reshape", "Flatten", "Shape", "ReduceMean", "ReduceSum", "Concat",
  "Identity", "Cast", "Clip", "Softmax", "MatMul", "Gemm", "Dropout", "Constant", "Sqrt", "Exp",
] as const

/** Builds one random well-typed graph of about `budget` nodes from `seed`. */
export const buildRandomGraph = (seed: number, budget: number, options: GraphGenOptions = {}): GraphCase => {
  const rng = prng(seed)
  const allowed = new Set(options.ops ?? GENERATED_OPS)
  const nodes: Node[] = []
  const consts = new Map<string, Tensor>()
  let counter = 0
  const fresh = (base: string) => `${base}${counter++}`
  const emit = (op: string, inputs: string[], shape: readonly number[], attrs: Attrs = {}, outputs = 1): Val => {
    const outs = Array.from({ length: outputs }, () => fresh("v"))
    nodes.push({ name: fresh(`${op.toLowerCase()}_`), op, domain: "", inputs, outputs: outs, attrs })
    return { name: outs[0], shape }
  }
  const constant = (t: Tensor, base = "c") => {
    const name = fresh(base)
    consts.set(name, t)
    return name
  }

  const n = rng.int(1, 2)
  const c = rng.int(1, 4)
  const h = rng.int(2, 6)
  const w = rng.int(2, 6)
  const x: ValueInfo = { name: "x", type: { dtype: "float32", shape: [n, c, h, w] } }
  const inputs: ValueInfo[] = [x]
  const feeds = new Map<string, Tensor>([["x", randomTensor(rng, [n, c, h, w])]])
  if (rng.next() < 0.4) {
    inputs.push({ name: "y", type: { dtype: "float32", shape: [n, c, h, w] } })
    feeds.set("y", randomTensor(rng, [n, c, h, w]))
  }
  const vals: Val[] = inputs.map((i) => ({ name: i.name, shape: i.type.shape as number[] }))
  const pickVal = (pred: (v: Val) => boolean = () => true) => {
    const cands = vals.filter(pred)
    // prefer recent values (chains), sometimes older ones (diamonds)
    return cands.length ? (rng.next() < 0.6 ? cands[cands.length - 1] : rng.pick(cands)) : undefined
  }

  type Gen = () => Val | undefined
  const gens: Record<string, Gen> = {
    Relu: () => unary("Relu"),
    Sigmoid: () => unary("Sigmoid"),
    Tanh: () => unary("Tanh"),
    Neg: () => unary("Neg"),
    Abs: () => unary("Abs"),
    Identity: () => unary("Identity"),
    Dropout: () => unary("Dropout"),
    Sqrt: () => {
      const v = pickVal()
      if (!v) return undefined
      const a = emit("Abs", [v.name], v.shape)
      return emit("Sqrt", [a.name], v.shape)
    },
    Exp: () => {
      const v = pickVal()
      if (!v) return undefined
      const t = emit("Tanh", [v.name], v.shape)
      return emit("Exp", [t.name], v.shape)
    },
    Cast: () => {
      const v = pickVal()
      return v && emit("Cast", [v.name], v.shape, { to: attr.int(1) })
    },
    Clip: () => {
      const v = pickVal()
      if (!v) return undefined
      const lo = constant(tensor("float32", [], Float32Array.of(0)))
      const hi = constant(tensor("float32", [], Float32Array.of(6)))
      return emit("Clip", [v.name, lo, hi], v.shape)
    },
    Add: () => binary("Add"),
    Mul: () => binary("Mul"),
    Sub: () => binary("Sub"),
    Div: () => {
      const v = pickVal()
      if (!v) return undefined
      const d = randomTensor(rng, bcastShape(v.shape), 0.5, 2)
      return emit("Div", [v.name, constant(d)], v.shape)
    },
    Conv: () => {
      const v = pickVal((u) => u.shape.length === 4)
      if (!v) return undefined
      const [N, C, H, W] = v.shape
      const k = rng.pick([1, 3])
      const group = C % 2 === 0 && rng.next() < 0.3 ? rng.pick([C, 2]) : 1
      const O = group === C ? C : rng.int(1, 4) * (group === 2 ? 2 : 1)
      const pad = k === 3 ? 1 : 0
      const wt = randomTensor(rng, [O, C / group, k, k], -0.5, 0.5)
      const ins = [v.name, constant(wt, "w")]
      if (rng.next() < 0.6) ins.push(constant(randomTensor(rng, [O]), "b"))
      return emit("Conv", ins, [N, O, H, W], { pads: attr.ints([pad, pad, pad, pad]), group: attr.int(group), kernel_shape: attr.ints([k, k]) })
    },
    BatchNormalization: () => {
      const v = pickVal((u) => u.shape.length === 4)
      if (!v) return undefined
      const C = v.shape[1]
      const ins = [v.name, constant(randomTensor(rng, [C], 0.5, 1.5)), constant(randomTensor(rng, [C])), constant(randomTensor(rng, [C])), constant(randomTensor(rng, [C], 0.5, 2))]
      return emit("BatchNormalization", ins, v.shape, { epsilon: attr.float(1e-5) })
    },
    MaxPool: () => pool("MaxPool"),
    AveragePool: () => pool("AveragePool"),
    GlobalAveragePool: () => {
      const v = pickVal((u) => u.shape.length === 4)
      return v && emit("GlobalAveragePool", [v.name], [v.shape[0], v.shape[1], 1, 1])
    },
    Transpose: () => {
      const v = pickVal((u) => u.shape.length >= 2)
      if (!v) return undefined
      const perm = v.shape.map((_, i) => i)
      for (let i = perm.length - 1; i > 0; i--) {
        const j = rng.int(0, i)
        ;[perm[i], perm[j]] = [perm[j], perm[i]]
      }
      return emit("Transpose", [v.name], perm.map((p) => v.shape[p]), { perm: attr.ints(perm) })
    },
    Reshape: () => {
      const v = pickVal((u) => u.shape.length >= 2)
      if (!v) return undefined
      const total = sizeOf(v.shape)
      const shape = [v.shape[0], total / v.shape[0]]
      return emit("Reshape", [v.name, constant(i64([shape[0], -1]))], shape)
    },
    Flatten: () => {
      const v = pickVal((u) => u.shape.length >= 2)
      return v && emit("Flatten", [v.name], [v.shape[0], sizeOf(v.shape) / v.shape[0]], { axis: attr.int(1) })
    },
    Shape: () => {
      // PyTorch's x.view(x.size(0), -1): Shape → Gather(0) → Unsqueeze → Concat(-1) → Reshape
      const v = pickVal((u) => u.shape.length >= 2)
      if (!v) return undefined
      const s = emit("Shape", [v.name], [v.shape.length])
      const g = emit("Gather", [s.name, constant(tensor("int64", [], Float64Array.of(0)))], [], { axis: attr.int(0) })
      const u = emit("Unsqueeze", [g.name, constant(i64([0]))], [1])
      const cat = emit("Concat", [u.name, constant(i64([-1]))], [2], { axis: attr.int(0) })
      return emit("Reshape", [v.name, cat.name], [v.shape[0], sizeOf(v.shape) / v.shape[0]])
    },
    ReduceMean: () => reduce("ReduceMean"),
    ReduceSum: () => reduce("ReduceSum"),
    Concat: () => {
      const v = pickVal()
      if (!v) return undefined
      const others = vals.filter((u) => u.shape.length === v.shape.length && u.shape.every((d, i) => i === 0 || d === v.shape[i]) && u.shape[0] === v.shape[0])
      const u = rng.pick(others)
      const axis = v.shape.length > 1 ? 1 : 0
      return emit("Concat", [v.name, u.name], v.shape.map((d, i) => (i === axis ? d + u.shape[i] : d)), { axis: attr.int(axis) })
    },
    Softmax: () => {
      const v = pickVal()
      return v && emit("Softmax", [v.name], v.shape, { axis: attr.int(-1) })
    },
    MatMul: () => {
      const v = pickVal((u) => u.shape.length >= 2)
      if (!v) return undefined
      const k = v.shape[v.shape.length - 1]
      const m = rng.int(1, 5)
      return emit("MatMul", [v.name, constant(randomTensor(rng, [k, m], -0.5, 0.5), "w")], [...v.shape.slice(0, -1), m])
    },
    Gemm: () => {
      const v = pickVal((u) => u.shape.length === 2)
      if (!v) return undefined
      const k = v.shape[1]
      const m = rng.int(1, 5)
      const transB = rng.int(0, 1)
      const b = randomTensor(rng, transB ? [m, k] : [k, m], -0.5, 0.5)
      return emit("Gemm", [v.name, constant(b, "w"), constant(randomTensor(rng, [m]), "b")], [v.shape[0], m], {
        transB: attr.int(transB),
        alpha: attr.float(rng.pick([1, 0.5])),
        beta: attr.float(rng.pick([1, 2])),
      })
    },
    Constant: () => {
      const v = pickVal()
      if (!v) return undefined
      const cst = randomTensor(rng, bcastShape(v.shape))
      const cv = emit("Constant", [], cst.shape, { value: attr.tensor(cst) })
      return emit(rng.pick(["Add", "Mul"]), [v.name, cv.name], v.shape)
    },
  }
  function bcastShape(shape: readonly number[]): number[] {
    const r = rng.int(0, 3)
    if (r === 0) return []
    if (r === 1) return [1]
    if (r === 2 && shape.length === 4) return [shape[1], 1, 1]
    return [...shape]
  }
  function unary(op: string): Val | undefined {
    const v = pickVal()
    return v && emit(op, [v.name], v.shape)
  }
  function binary(op: string): Val | undefined {
    const v = pickVal()
    if (!v) return undefined
    const same = vals.filter((u) => u !== v && u.shape.length === v.shape.length && u.shape.every((d, i) => d === v.shape[i]))
    const r = rng.next()
    if (same.length && r < 0.4) return emit(op, [v.name, rng.pick(same).name], v.shape)
    if (r < 0.55) {
      // an identity: x*1, x+0, x-0
      const unit = op === "Mul" ? 1 : 0
      return emit(op, [v.name, constant(tensor("float32", [1], Float32Array.of(unit)))], v.shape)
    }
    return emit(op, [v.name, constant(randomTensor(rng, bcastShape(v.shape)))], v.shape)
  }
  function pool(op: string): Val | undefined {
    const v = pickVal((u) => u.shape.length === 4 && u.shape[2] >= 2 && u.shape[3] >= 2)
    if (!v) return undefined
    const [N, C, H, W] = v.shape
    return emit(op, [v.name], [N, C, H - 1, W - 1], { kernel_shape: attr.ints([2, 2]), strides: attr.ints([1, 1]) })
  }
  function reduce(op: string): Val | undefined {
    const v = pickVal((u) => u.shape.length >= 1)
    if (!v) return undefined
    const axis = rng.int(0, v.shape.length - 1)
    return emit(op, [v.name, constant(i64([axis]))], v.shape.map((d, i) => (i === axis ? 1 : d)), { keepdims: attr.int(1) })
  }

  const names = Object.keys(gens).filter((k) => allowed.has(k))
  for (let i = 0; i < budget && names.length; i++) {
    const v = gens[rng.pick(names)]()
    if (v && sizeOf(v.shape) <= 4096) vals.push(v)
  }
  let last = vals[vals.length - 1]
  if (inputs.some((i) => i.name === last.name)) last = emit("Relu", [last.name], last.shape)
  const outs = [last]
  if (vals.length > 3 && rng.next() < 0.3) {
    const other = vals[rng.int(1, vals.length - 2)]
    if (!inputs.some((i) => i.name === other.name) && other !== last) outs.push(other)
  }
  const outputs: ValueInfo[] = outs.map((v) => ({ name: v.name, type: { dtype: "float32", shape: v.shape } }))
  return { graph: makeGraph({ name: `random_${seed}_${budget}`, opset: options.opset ?? 18, inputs, outputs, initializers: consts, nodes }), inputs: feeds }
}

export interface ArbGraphOptions extends GraphGenOptions {
  readonly maxNodes?: number
  /**
   * The share of cases (0 to 1, default 0) drawn from the model-like generator (arbitrary-models.ts):
   * conv-BN blocks with small variances and large epsilons, attention, multi-output ops, siblings,
   * strided and padded windows, several vector blocks of channels.
   */
  readonly modelShare?: number
  /** Options of the model-like cases (`ops` and `opset` above apply to the random cases only). */
  readonly models?: ModelGenOptions & { readonly maxMotifs?: number }
}

/** fast-check arbitrary of random graph cases (a share of them model-like with `modelShare`). */
export const arbGraphCase = (options: ArbGraphOptions = {}): fc.Arbitrary<GraphCase> => {
  const random = fc
    .tuple(fc.integer({ min: 0, max: 0x7fffffff }), fc.integer({ min: 1, max: options.maxNodes ?? 12 }))
    .map(([seed, budget]) => buildRandomGraph(seed, budget, options))
  const share = Math.min(1, Math.max(0, options.modelShare ?? 0))
  if (share === 0) return random
  const models = arbModelGraphCase(options.models)
  if (share === 1) return models
  return fc.oneof({ arbitrary: random, weight: Math.round((1 - share) * 100) }, { arbitrary: models, weight: Math.round(share * 100) })
}
