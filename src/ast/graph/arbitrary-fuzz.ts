// The fuzzer's cases (`npm run fuzz`, issue 19): graphs that look valid, made to break what comes
// after the decoder. A case starts from a well-typed random graph (arbitrary.ts) or a model-like
// one (arbitrary-models.ts) and takes up to four structure-aware mutations, each drawn from the
// seed: attributes set to edge values (negative, zero, huge, out-of-range axes, ragged lists),
// initializers with NaN, infinities, denormals and huge values (int64 ones with indices out of
// range), unary and binary ops swapped for others of the same arity, a data-indexed op (Gather,
// GatherElements, Slice, Pad, Tile, CumSum, Trilu, OneHot) added with random indices in and out of
// range, an input's dims changed (its feed too), and hostile names (terminal escapes, paths,
// keywords of C and JS, very long, non-ASCII). Pure and seeded: the same seed gives the same case.
import type { AttrValue, Graph, Node, ValueInfo } from "./graph.js"
import { makeGraph } from "./graph.js"
import { buildModelGraph, buildRandomGraph } from "./arbitrary.js"
import { prng, type GraphCase, type Rng } from "./arbitrary-builder.js"
import { fromArray, sizeOf, tensor, type Tensor } from "./tensor.js"

export interface FuzzCase extends GraphCase {
  readonly seed: number
  /** The mutations applied, in order (for the report). */
  readonly mutations: readonly string[]
}

/** Names that break naive emitters, printers and file writers. */
export const HOSTILE_NAMES: readonly string[] = [
  "x y",
  "a\u001b[31mred\u001b[0m",
  "../../etc/passwd",
  "int",
  "main",
  "float",
  "return",
  "restrict",
  "constructor",
  "__proto__",
  "toString",
  "0",
  "1e3",
  "a-b",
  "é中\u{1F600}",
  "a".repeat(300),
  "$$",
  "`${x}`",
  '"quote',
  "back\\slash",
  "new\nline",
  "NaN",
  "memory",
  "self",
  "/*c*/",
  "%s%n",
]

const UNARY = ["Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Sqrt", "Exp", "Log", "Reciprocal", "Floor", "Ceil", "Round", "Erf", "Softplus", "Softsign", "Sin", "Cos", "Atan", "Sign", "HardSigmoid", "LeakyRelu", "Elu", "Selu", "Celu", "Mish", "HardSwish", "ThresholdedRelu", "Shrink", "Identity"]
const BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"]

const EDGE_INTS = [-(2 ** 31), -1_000_000, -3, -2, -1, 0, 1, 2, 3, 5, 7, 64, 1 << 20, 2 ** 31 - 1]
const EDGE_FLOATS = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 0, -0, 1e38, -1e38, 1e-40, 65504, 1e-7]
const EDGE_INDICES = (dim: number) => [-dim - 1, -dim, -1, 0, dim - 1, dim, dim + 1, 2 ** 31, -(2 ** 31), 2 ** 32 + 1, 1e9]

type Mutable = { graph: Graph; inputs: Map<string, Tensor>; extra: { info: ValueInfo; node: Node; inits: [string, Tensor][] }[] }
type Mutation = (rng: Rng, c: Mutable) => string | undefined

const rebuild = (g: Graph, patch: Partial<{ nodes: readonly Node[]; initializers: ReadonlyMap<string, Tensor>; inputs: readonly ValueInfo[]; outputs: readonly ValueInfo[] }>): Graph =>
  makeGraph({ name: g.name, opset: g.opset, inputs: [...(patch.inputs ?? g.inputs)], outputs: [...(patch.outputs ?? g.outputs)], initializers: new Map(patch.initializers ?? g.initializers), nodes: [...(patch.nodes ?? g.nodes)] })

/** A static float value of the graph (an input or a node output whose type the inputs tell), for new nodes. */
const floatValues = (c: Mutable): { name: string; shape: number[] }[] => {
  const out: { name: string; shape: number[] }[] = []
  for (const i of c.graph.inputs) if (i.type.dtype === "float32" && i.type.shape.every((d) => typeof d === "number")) out.push({ name: i.name, shape: i.type.shape as number[] })
  for (const o of c.graph.outputs) if (o.type.dtype === "float32" && o.type.shape.every((d) => typeof d === "number")) out.push({ name: o.name, shape: o.type.shape as number[] })
  for (const [name, t] of c.graph.initializers) if (t.dtype === "float32") out.push({ name, shape: [...t.shape] })
  return out
}

const mutateAttr: Mutation = (rng, c) => {
  const nodes = c.graph.nodes.filter((n) => Object.values(n.attrs).some((a) => a.kind === "int" || a.kind === "ints" || a.kind === "float"))
  if (nodes.length === 0) return undefined
  const n = rng.pick(nodes)
  const keys = Object.keys(n.attrs).filter((k) => ["int", "ints", "float"].includes(n.attrs[k].kind))
  const key = rng.pick(keys)
  const a = n.attrs[key]
  let v: AttrValue
  if (a.kind === "int") v = { kind: "int", value: rng.pick(EDGE_INTS) }
  else if (a.kind === "float") v = { kind: "float", value: rng.pick(EDGE_FLOATS) }
  else {
    const xs = [...(a as { value: readonly number[] }).value]
    const how = rng.int(0, 2)
    if (how === 0 && xs.length) xs[rng.int(0, xs.length - 1)] = rng.pick(EDGE_INTS)
    else if (how === 1) xs.pop()
    else xs.push(rng.pick(EDGE_INTS))
    v = { kind: "ints", value: xs }
  }
  const nodesOut = c.graph.nodes.map((m) => (m === n ? { ...m, attrs: { ...m.attrs, [key]: v } } : m))
  c.graph = rebuild(c.graph, { nodes: nodesOut })
  return `attr ${n.op}.${key}${a.kind === "float" ? " (float)" : ""}`
}

const mutateInitializer: Mutation = (rng, c) => {
  const names = [...c.graph.initializers.keys()]
  if (names.length === 0) return undefined
  const name = rng.pick(names)
  const t = c.graph.initializers.get(name)!
  const n = sizeOf(t.shape)
  if (n === 0) return undefined
  const data = Array.from(t.data as ArrayLike<number>)
  const hits = rng.int(1, Math.min(n, 4))
  const float = t.dtype === "float32" || t.dtype === "float64" || t.dtype === "float16"
  for (let k = 0; k < hits; k++) data[rng.int(0, n - 1)] = float ? rng.pick(EDGE_FLOATS) : rng.pick(EDGE_INDICES(Math.max(1, Math.abs(data[0] ?? 1))))
  const inits = new Map(c.graph.initializers)
  inits.set(name, fromArray(t.dtype, t.shape, data))
  c.graph = rebuild(c.graph, { initializers: inits })
  return `initializer ${t.dtype}`
}

const swapOp: Mutation = (rng, c) => {
  const candidates = c.graph.nodes.filter((n) => UNARY.includes(n.op) || (BINARY.includes(n.op) && n.inputs.length === 2))
  if (candidates.length === 0) return undefined
  const n = rng.pick(candidates)
  const op = UNARY.includes(n.op) ? rng.pick(UNARY) : rng.pick(BINARY)
  c.graph = rebuild(c.graph, { nodes: c.graph.nodes.map((m) => (m === n ? { ...m, op, attrs: {} } : m)) })
  return `swap ${n.op}->${op}`
}

/** A data-indexed op on a float value, its indices drawn in and out of range; its output a new graph output. */
const addIndexed: Mutation = (rng, c) => {
  const vals = floatValues(c).filter((v) => v.shape.length > 0 && sizeOf(v.shape) > 0 && sizeOf(v.shape) < 1 << 16)
  if (vals.length === 0) return undefined
  const v = rng.pick(vals)
  const rank = v.shape.length
  const k = c.extra.length
  const out = `fz_out${k}`
  const i64 = (shape: number[], xs: number[]) => tensor("int64", shape, Float64Array.from(xs))
  const inRange = rng.next() < 0.5
  const axis = rng.next() < 0.9 ? rng.int(-rank, rank - 1) : rng.pick([rank, -rank - 1, 1 << 20])
  const ax = axis < 0 ? axis + rank : axis
  const dim = v.shape[ax] ?? 1
  const index = () => (inRange ? rng.int(-dim, dim - 1) : rng.pick(EDGE_INDICES(dim)))
  const op = rng.pick(["Gather", "GatherElements", "Slice", "Pad", "Tile", "CumSum", "Trilu", "OneHot"] as const)
  const name = (s: string) => `fz_${s}${k}`
  let node: Node
  let shape: number[] = [1]
  const inits: [string, Tensor][] = []
  switch (op) {
    case "Gather": {
      const ishape = rng.pick([[], [1], [3], [2, 2]])
      inits.push([name("idx"), i64(ishape, Array.from({ length: sizeOf(ishape) }, index))])
      node = { name: name("gather"), op, domain: "", inputs: [v.name, name("idx")], outputs: [out], attrs: { axis: { kind: "int", value: axis } } }
      if (ax >= 0 && ax < rank) shape = [...v.shape.slice(0, ax), ...ishape, ...v.shape.slice(ax + 1)]
      break
    }
    case "GatherElements": {
      const ishape = v.shape.map((d, j) => (j === ax ? rng.int(1, 3) : d))
      inits.push([name("idx"), i64(ishape, Array.from({ length: sizeOf(ishape) }, index))])
      node = { name: name("ge"), op, domain: "", inputs: [v.name, name("idx")], outputs: [out], attrs: { axis: { kind: "int", value: axis } } }
      shape = ishape
      break
    }
    case "Slice": {
      const s = index()
      const e = index()
      const step = rng.pick([1, 1, 2, -1, -2, 0])
      inits.push([name("st"), i64([1], [s])], [name("en"), i64([1], [e])], [name("ax"), i64([1], [axis])], [name("sp"), i64([1], [step])])
      node = { name: name("slice"), op, domain: "", inputs: [v.name, name("st"), name("en"), name("ax"), name("sp")], outputs: [out], attrs: {} }
      if (ax >= 0 && ax < rank && step !== 0) {
        const clamp = (x: number, lo: number, hi: number) => Math.min(Math.max(x, lo), hi)
        const norm = (x: number) => (x < 0 ? x + dim : x)
        const [lo, hi] = step > 0 ? [clamp(norm(s), 0, dim), clamp(norm(e), 0, dim)] : [clamp(norm(s), -1, dim - 1), clamp(norm(e), -1, dim - 1)]
        const len = step > 0 ? Math.max(0, Math.ceil((hi - lo) / step)) : Math.max(0, Math.ceil((lo - hi) / -step))
        shape = v.shape.map((d, j) => (j === ax ? len : d))
      }
      break
    }
    case "Pad": {
      const pads = Array.from({ length: 2 * rank }, () => (inRange ? rng.int(0, 2) : rng.pick([-1, -dim, 0, 3, 1 << 20])))
      const mode = rng.pick(["constant", "reflect", "edge", "wrap"])
      inits.push([name("pads"), i64([2 * rank], pads)])
      node = { name: name("pad"), op, domain: "", inputs: [v.name, name("pads")], outputs: [out], attrs: { mode: { kind: "string", value: mode } } }
      shape = v.shape.map((d, j) => d + pads[j] + pads[j + rank])
      break
    }
    case "Tile": {
      const reps = v.shape.map(() => (inRange ? rng.int(1, 2) : rng.pick([0, -1, 2, 1 << 20])))
      inits.push([name("reps"), i64([rank], reps)])
      node = { name: name("tile"), op, domain: "", inputs: [v.name, name("reps")], outputs: [out], attrs: {} }
      shape = v.shape.map((d, j) => d * reps[j])
      break
    }
    case "CumSum": {
      inits.push([name("axis"), i64([], [axis])])
      node = { name: name("cumsum"), op, domain: "", inputs: [v.name, name("axis")], outputs: [out], attrs: { exclusive: { kind: "int", value: rng.int(0, 1) }, reverse: { kind: "int", value: rng.int(0, 1) } } }
      shape = [...v.shape]
      break
    }
    case "Trilu": {
      inits.push([name("k"), i64([], [index()])])
      node = { name: name("trilu"), op, domain: "", inputs: [v.name, name("k")], outputs: [out], attrs: { upper: { kind: "int", value: rng.int(0, 1) } } }
      shape = [...v.shape]
      break
    }
    case "OneHot": {
      const depth = inRange ? rng.int(1, 5) : rng.pick([0, -1, 1 << 20])
      const ishape = rng.pick([[2], [2, 2]])
      inits.push([name("ind"), i64(ishape, Array.from({ length: sizeOf(ishape) }, () => rng.int(-depth - 1, depth + 1)))], [name("depth"), i64([], [depth])], [name("vals"), fromArray("float32", [2], [0, 1])])
      const oa = rng.int(-ishape.length - 1, ishape.length)
      node = { name: name("onehot"), op, domain: "", inputs: [name("ind"), name("depth"), name("vals")], outputs: [out], attrs: { axis: { kind: "int", value: oa } } }
      const a = oa < 0 ? oa + ishape.length + 1 : oa
      shape = [...ishape.slice(0, a), Math.max(depth, 0), ...ishape.slice(a)]
      break
    }
  }
  // (an output past 2^24 elements is not drawn: the fuzzer runs beside other work, and the size
  // limits are checked by tests of their own; an empty one with a huge axis is)
  if (shape.every((d) => Number.isFinite(d) && d >= 0) && sizeOf(shape) > 1 << 24) return undefined
  c.extra.push({ info: { name: out, type: { dtype: "float32", shape: shape.map((d) => (Number.isFinite(d) && d >= 0 ? d : 1)) } }, node: node!, inits })
  return `${op} ${inRange ? "in range" : "edge indices"}`
}

const changeInputDims: Mutation = (rng, c) => {
  const ins = c.graph.inputs.filter((i) => i.type.shape.length > 0 && c.inputs.has(i.name))
  if (ins.length === 0) return undefined
  const inp = rng.pick(ins)
  const shape = (inp.type.shape as number[]).map((d) => d)
  const j = rng.int(0, shape.length - 1)
  shape[j] = rng.pick([0, 1, shape[j] + 1, shape[j] * 2, Math.max(1, shape[j] - 1)])
  const feed = c.inputs.get(inp.name)!
  if (sizeOf(shape) > 1 << 20) return undefined
  c.inputs.set(inp.name, fromArray(feed.dtype, shape, Array.from({ length: sizeOf(shape) }, (_, k) => (feed.dtype === "float32" ? Math.sin(k) : k % 3))))
  c.graph = rebuild(c.graph, { inputs: c.graph.inputs.map((i) => (i === inp ? { name: i.name, type: { dtype: i.type.dtype, shape } } : i)) })
  return `input dims ${inp.type.shape.join("x")}->${shape.join("x")}`
}

/** Every value and node renamed to a hostile name (distinct: a suffix where the pool repeats). */
const hostileNames = (rng: Rng, c: Mutable): string => {
  const renames = new Map<string, string>()
  let k = rng.int(0, HOSTILE_NAMES.length - 1)
  const rename = (n: string) => {
    if (n === "") return n
    const got = renames.get(n)
    if (got !== undefined) return got
    const base = HOSTILE_NAMES[k++ % HOSTILE_NAMES.length]
    const fresh = k <= HOSTILE_NAMES.length ? base : `${base}${k}`
    renames.set(n, fresh)
    return fresh
  }
  const g = c.graph
  const nodes = g.nodes.map((n) => ({ ...n, name: rename(`node:${n.name}`), inputs: n.inputs.map(rename), outputs: n.outputs.map(rename) }))
  const inits = new Map([...g.initializers].map(([n, t]) => [rename(n), t] as const))
  const info = (v: ValueInfo) => ({ ...v, name: rename(v.name) })
  c.graph = makeGraph({ name: rename("graph"), opset: g.opset, inputs: g.inputs.map(info), outputs: g.outputs.map(info), initializers: inits, nodes })
  c.inputs = new Map([...c.inputs].map(([n, t]) => [rename(n), t] as const))
  return "hostile names"
}

const MUTATIONS: readonly Mutation[] = [mutateAttr, mutateAttr, mutateInitializer, mutateInitializer, swapOp, swapOp, addIndexed, addIndexed, addIndexed, changeInputDims]

/** The case of `seed`: a base graph and up to four mutations (names last, so new nodes get them too). */
export const buildFuzzCase = (seed: number): FuzzCase => {
  const rng = prng((seed * 2654435761) ^ 0x5bd1e995)
  const base = rng.next() < 0.5 ? buildRandomGraph(seed, rng.int(1, 10)) : buildModelGraph(seed, rng.int(1, 4))
  const c: Mutable = { graph: base.graph, inputs: new Map(base.inputs), extra: [] }
  const mutations: string[] = []
  const count = rng.int(0, 4)
  for (let k = 0; k < count; k++) {
    const m = rng.pick(MUTATIONS)(rng, c)
    if (m) mutations.push(m)
  }
  if (c.extra.length) {
    const inits = new Map(c.graph.initializers)
    for (const e of c.extra) for (const [n, t] of e.inits) inits.set(n, t)
    c.graph = rebuild(c.graph, { nodes: [...c.graph.nodes, ...c.extra.map((e) => e.node)], outputs: [...c.graph.outputs, ...c.extra.map((e) => e.info)], initializers: inits })
  }
  if (rng.next() < 0.25) mutations.push(hostileNames(rng, c))
  return { graph: c.graph, inputs: c.inputs, seed, mutations }
}
