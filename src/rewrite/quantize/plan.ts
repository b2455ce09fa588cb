// What the quantization pass quantizes, decided from the graph alone (before any calibration):
// each float node's role, the activations that get a QuantizeLinear → DequantizeLinear pair, the
// outputs that share their input's parameters, the ReLU / ReLU6 folded into the range of the node
// before them, and the nodes of the quantized region that have no quantized meaning.
import type { Graph, Node } from "../../ast/graph/graph.js"
import type { UnquantizableNode } from "./errors.js"

/**
 * How a quantized node is treated, as onnxruntime's QDQ quantizer does:
 * - weighted: activation input 0, int8 weight (input 1), int32 bias (input 2), own output range;
 * - elementwise: every float input quantized (constants too), own output range (Add, Mul, Concat);
 * - own: input 0 and the output quantized, each with its own range (pools that average, Sigmoid…);
 * - direct: input 0 quantized, the output shares its parameters (MaxPool and the reshapes: exact);
 * - removable: ReLU / ReLU6 after a quantized node: dropped, the node's output takes its range,
 *   so that quantizing saturates where the activation would clip (else treated as `own`).
 */
export type Role = "weighted" | "elementwise" | "own" | "direct" | "removable"

export const ROLES: Readonly<Record<string, Role>> = {
  Conv: "weighted",
  Gemm: "weighted",
  MatMul: "weighted",
  Add: "elementwise",
  Mul: "elementwise",
  Concat: "elementwise",
  AveragePool: "own",
  GlobalAveragePool: "own",
  Sigmoid: "own",
  LeakyRelu: "own",
  MaxPool: "direct",
  Reshape: "direct",
  Flatten: "direct",
  Transpose: "direct",
  Squeeze: "direct",
  Unsqueeze: "direct",
  Identity: "direct",
  Relu: "removable",
  Clip: "removable",
}

export interface QuantizedNode {
  readonly node: Node
  /** The role it is quantized in (`own` for a ReLU that could not be folded). */
  readonly role: Exclude<Role, "removable">
  /** Float activation inputs (value names, not constants) that get a Q/DQ pair. */
  readonly activations: readonly string[]
  /** Float constant inputs quantized with the activation scheme (elementwise ops). */
  readonly constants: readonly string[]
  /** weighted: the constant weight, and the bias when there is one. */
  readonly weight?: string
  readonly bias?: string
  /** weighted: the axis of the weight's output channels (per-channel scales). */
  readonly weightAxis?: number
}

export interface QuantizationPlan {
  readonly nodes: readonly QuantizedNode[]
  /** Every activation with a Q/DQ pair, in the order its pair is placed (inputs, then node order). */
  readonly tensors: readonly string[]
  /** direct ops: output → input whose parameters it shares. */
  readonly shares: ReadonlyMap<string, string>
  /** A folded ReLU's output → the tensor that stands for it (the node before it). */
  readonly aliases: ReadonlyMap<string, string>
  /** A tensor whose range is calibrated on another value (the folded ReLU's output). */
  readonly rangeOf: ReadonlyMap<string, string>
  /** Folded activation nodes, with the node they were folded into. */
  readonly folded: readonly { readonly node: string; readonly into: string }[]
  /** Nodes left float on purpose (--skip), and float nodes outside the quantized region. */
  readonly skipped: readonly string[]
  readonly unsupported: readonly UnquantizableNode[]
}

const isF32 = (g: Graph, v: string) => v !== "" && g.valueTypes.get(v)?.dtype === "float32"

/** The constant value of a scalar initializer, if the input is one. */
const constScalar = (g: Graph, v: string | undefined): number | undefined => {
  const t = v ? g.initializers.get(v) : undefined
  return t && t.data.length === 1 ? Number(t.data[0]) : undefined
}

const intAttr = (n: Node, name: string, fallback: number): number => {
  const a = n.attrs[name]
  return a?.kind === "int" ? a.value : fallback
}

/** Why a node of a quantizable op cannot be quantized as it stands (undefined: it can). */
const blocker = (g: Graph, n: Node, role: Role): string | undefined => {
  if (!isF32(g, n.inputs[0] ?? "")) return "its data input is not float32"
  if (role === "weighted") {
    const w = n.inputs[1]
    if (!g.initializers.has(w) && n.op !== "MatMul") return `its weight '${w}' is computed, not a constant`
    const b = n.inputs[2]
    if (b && !g.initializers.has(b)) return `its bias '${b}' is computed, not a constant`
    if (b && g.initializers.get(b)!.shape.length !== 1) return `its bias '${b}' is not 1-D (an int32 bias is one value per output channel)`
    if (n.op === "Gemm" && intAttr(n, "transA", 0) !== 0) return "Gemm with transA (an input transposed) is not quantized"
  }
  if (n.op === "Clip" && n.inputs.slice(1).some((v) => v !== "" && !g.initializers.has(v))) return "its bounds are computed, not constants"
  return undefined
}

/** The weight's output-channel axis: Conv's 0, Gemm's 0 with transB (else 1), MatMul's last (2-D). */
const weightAxis = (g: Graph, n: Node): number | undefined => {
  const rank = g.initializers.get(n.inputs[1])?.shape.length ?? 0
  if (n.op === "Conv") return 0
  if (n.op === "Gemm") return intAttr(n, "transB", 0) ? 0 : 1
  return rank === 2 ? 1 : undefined
}

/**
 * The plan for `g` (bound: every value typed). `skip` names nodes left float on purpose.
 * Unsupported nodes are listed, not thrown: the caller decides.
 */
export const planQuantization = (g: Graph, skip: ReadonlySet<string>): QuantizationPlan => {
  const consumers = new Map<string, Node[]>()
  for (const n of g.nodes) for (const i of n.inputs) if (i !== "") consumers.set(i, [...(consumers.get(i) ?? []), n])
  const producer = new Map<string, Node>()
  for (const n of g.nodes) for (const o of n.outputs) producer.set(o, n)
  const outputs = new Set(g.outputs.map((o) => o.name))

  // 1. roles, before folding
  const role = new Map<Node, Role>()
  const blocked = new Map<Node, string>()
  for (const n of g.nodes) {
    if (skip.has(n.name) || n.domain !== "") continue
    const r = ROLES[n.op]
    if (!r) continue
    const why = blocker(g, n, r)
    if (why) blocked.set(n, why)
    else role.set(n, r)
  }
  // 2. fold ReLU / ReLU6 into the quantized node before them
  const aliases = new Map<string, string>()
  const rangeOf = new Map<string, string>()
  const folded: { node: string; into: string }[] = []
  for (const n of g.nodes) {
    if (role.get(n) !== "removable") continue
    const x = n.inputs[0]
    const p = producer.get(x)
    const pr = p ? role.get(p) : undefined
    const clipsAtZero = n.op === "Relu" || (constScalar(g, n.inputs[1]) === 0 && (n.inputs[2] === undefined || n.inputs[2] === "" || (constScalar(g, n.inputs[2]) ?? -1) >= 0))
    const foldable =
      p && (pr === "weighted" || pr === "elementwise" || pr === "own") && clipsAtZero && (consumers.get(x) ?? []).length === 1 && !outputs.has(x) && !outputs.has(n.outputs[0]) && !rangeOf.has(x)
    if (foldable) {
      aliases.set(n.outputs[0], x)
      rangeOf.set(x, n.outputs[0])
      folded.push({ node: n.name, into: p.name })
      role.delete(n)
    } else role.set(n, "own")
  }
  const resolve = (v: string): string => aliases.get(v) ?? v
  const foldedNodes = new Set(folded.map((f) => f.node))

  // 3. the quantized nodes and their tensors
  const quantized: QuantizedNode[] = []
  const tensors: string[] = []
  const inQ = new Set<string>()
  const addTensor = (v: string) => {
    if (!inQ.has(v)) {
      inQ.add(v)
      tensors.push(v)
    }
  }
  const shares = new Map<string, string>()
  for (const n of g.nodes) {
    const r = role.get(n)
    if (!r || r === "removable") continue
    const activations: string[] = []
    const constants: string[] = []
    const data = r === "elementwise" ? n.inputs.map((v, k) => [v, k] as const) : [[n.inputs[0], 0] as const]
    for (const [v, k] of data) {
      if (!isF32(g, v)) continue
      if (g.initializers.has(v)) {
        if (r === "elementwise") constants.push(v)
      } else activations.push(resolve(v))
      void k
    }
    let weight: string | undefined
    let bias: string | undefined
    let axis: number | undefined
    if (r === "weighted") {
      const w = n.inputs[1]
      if (g.initializers.has(w)) {
        weight = w
        axis = weightAxis(g, n)
        const b = n.inputs[2]
        if (b) bias = b
      } else activations.push(resolve(w))
    }
    for (const a of activations) addTensor(a)
    const out = n.outputs[0]
    if (isF32(g, out)) {
      addTensor(out)
      if (r === "direct") shares.set(out, resolve(n.inputs[0]))
    }
    quantized.push({ node: n, role: r, activations, constants, ...(weight ? { weight } : {}), ...(bias ? { bias } : {}), ...(axis !== undefined ? { weightAxis: axis } : {}) })
  }
  // graph inputs first, then in node order (the order pairs are placed in)
  const inputNames = new Set(g.inputs.map((i) => i.name))
  const ordered = [...tensors.filter((t) => inputNames.has(t)), ...tensors.filter((t) => !inputNames.has(t))]

  // 4. the quantized region's float nodes with no quantized meaning
  const quantizedSet = new Set(quantized.map((q) => q.node))
  const unsupported: UnquantizableNode[] = []
  const skipped: string[] = []
  for (const n of g.nodes) {
    if (quantizedSet.has(n) || foldedNodes.has(n.name)) continue
    if (skip.has(n.name)) {
      skipped.push(n.name)
      continue
    }
    // a node computing float values from a quantized tensor, or into one (Shape and the like compute none)
    if (!n.outputs.some((o) => isF32(g, o))) continue
    const readsQuantized = n.inputs.some((v) => isF32(g, v) && inQ.has(resolve(v)))
    const feedsQuantized = n.outputs.some((o) => inQ.has(o))
    if (!readsQuantized && !feedsQuantized) continue
    const why =
      blocked.get(n) ??
      (n.domain !== "" ? `the ${n.domain} domain's ops have no quantized meaning here` : `${n.op} has no quantized meaning in this pass (quantized ops: ${Object.keys(ROLES).join(", ")})`)
    unsupported.push({ node: n.name, op: n.op, reason: `${why}; leave it float with --skip ${n.name}` })
  }
  return { nodes: quantized, tensors: ordered, shares, aliases, rangeOf, folded, skipped, unsupported }
}
