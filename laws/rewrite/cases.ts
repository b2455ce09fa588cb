// Graph cases with what dead-code elimination and its neighbours must handle, added to a random or
// model-like case (arbitrary.ts): dead chains interleaved with live nodes, initializers nothing
// reads (and one only a dead node reads), an If whose branches capture an outer value and an
// outer constant that no node input reads (its output live or dead), and omitted inputs and
// outputs ("" names) on live and dead nodes. Plus an independent oracle of liveness.
import * as fc from "fast-check"
import { attr } from "../../src/ast/graph/attrs.js"
import { arbGraphCase, arbModelGraphCase, prng, type GraphCase } from "../../src/ast/graph/arbitrary.js"
import { subgraphFreeNames } from "../../src/ast/graph/evaluate.js"
import { makeGraph, type Graph, type Node, type ValueInfo } from "../../src/ast/graph/graph.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import { fromArray, tensor, type Tensor } from "../../src/ast/graph/tensor.js"

/** Every name a node reads: its inputs and the outer names its subgraphs capture. */
export const readsOf = (n: Node): string[] => [
  ...n.inputs.filter((i) => i !== ""),
  ...Object.values(n.attrs).flatMap((a) => (a.kind === "graph" ? subgraphFreeNames(a.value) : [])),
]

/**
 * Liveness as a fixed point over the whole node list (not one reverse sweep): a node is live when
 * one of its named outputs is a graph output or read by a live node; a value is live when a live
 * node reads it or it is a graph output.
 */
export const liveness = (g: Graph): { readonly nodes: ReadonlySet<Node>; readonly values: ReadonlySet<string> } => {
  const values = new Set(g.outputs.map((o) => o.name))
  const nodes = new Set<Node>()
  for (let grew = true; grew; ) {
    grew = false
    for (const n of g.nodes)
      if (!nodes.has(n) && n.outputs.some((o) => o !== "" && values.has(o))) {
        nodes.add(n)
        for (const r of readsOf(n)) values.add(r)
        grew = true
      }
  }
  return { nodes, values }
}

/** `c` with dead code, unused constants, an If capturing outer names and omitted names added (seeded). */
export const withDeadCode = (c: GraphCase, seed: number): GraphCase => {
  const rng = prng(seed)
  const g = bindSync(c.graph)
  const nodes = [...g.nodes]
  const initializers = new Map(g.initializers)
  const outputs: ValueInfo[] = [...g.outputs]
  const typeOf = (v: string) => g.valueTypes.get(v) ?? g.inputs.find((i) => i.name === v)?.type
  const floats = [...g.inputs.map((i) => i.name), ...g.nodes.flatMap((n) => n.outputs)].filter((v) => {
    const t = v === "" ? undefined : typeOf(v)
    return !!t && t.dtype === "float32" && t.shape.every((d) => typeof d === "number")
  })
  let k = 0
  const fresh = (base: string) => `${base}_dc${k++}`
  const constant = (t: Tensor, base: string) => {
    const name = fresh(base)
    initializers.set(name, t)
    return name
  }
  const scalar = (x: number) => tensor("float32", [], Float32Array.of(x))
  /** Inserts `n` at a random place after the producers of what it reads. */
  const place = (n: Node) => {
    const after = Math.max(-1, ...readsOf(n).map((r) => nodes.findIndex((m) => m.outputs.includes(r))))
    nodes.splice(rng.int(after + 1, nodes.length), 0, n)
  }
  const add = (op: string, inputs: string[], outs: string[], attrs: Node["attrs"] = {}) => place({ name: fresh(op.toLowerCase()), op, domain: "", inputs, outputs: outs, attrs })
  const extraOutput = (name: string, like: string) => outputs.push({ name, type: typeOf(like)! })
  const pick = () => rng.pick(floats)

  // dead chains, one of them through a constant only it reads
  for (let d = rng.int(1, 3); d > 0; d--) {
    const v = pick()
    const a = fresh("dead")
    add(rng.pick(["Neg", "Abs", "Relu"]), [v], [a])
    if (rng.next() < 0.5) add("Add", [a, constant(scalar(rng.float(-1, 1)), "dead_c")], [fresh("dead")])
  }
  // initializers nothing reads
  for (let u = rng.int(0, 2); u > 0; u--) constant(tensor("float32", [2], Float32Array.of(rng.float(-1, 1), rng.float(-1, 1))), "unused")
  // an If whose branches read w and a constant from the outer scope, not through any input
  if (rng.next() < 0.7) {
    const v = pick()
    const w = fresh("captured")
    add("Sigmoid", [v], [w])
    const cap = constant(scalar(rng.float(-1, 1)), "captured_c")
    const t = typeOf(v)!
    const branch = (name: string, body: Node[], out: string) => makeGraph({ name, opset: g.opset, inputs: [], outputs: [{ name: out, type: t }], nodes: body })
    const thenOut = fresh("then_y")
    const elseOut = fresh("else_y")
    const thenBranch = branch("then", [{ name: fresh("then_add"), op: "Add", domain: "", inputs: [w, cap], outputs: [thenOut], attrs: {} }], thenOut)
    const elseBranch = branch("else", [{ name: fresh("else_neg"), op: "Neg", domain: "", inputs: [w], outputs: [elseOut], attrs: {} }], elseOut)
    const cond = constant(tensor("bool", [], Uint8Array.of(rng.int(0, 1))), "cond")
    const y = fresh("if_y")
    place({ name: fresh("if"), op: "If", domain: "", inputs: [cond], outputs: [y], attrs: { then_branch: attr.graph(thenBranch), else_branch: attr.graph(elseBranch) } })
    if (rng.next() < 0.6) extraOutput(y, v)
  }
  // omitted names: a live Clip without its lower bound, Dropouts without their mask (one dead)
  if (rng.next() < 0.6) {
    const v = pick()
    const y = fresh("clipped")
    add("Clip", [v, "", constant(scalar(rng.float(0, 1)), "clip_hi")], [y])
    extraOutput(y, v)
  }
  if (rng.next() < 0.6) add("Dropout", [pick()], [fresh("dead"), ""])
  if (rng.next() < 0.3) {
    const v = pick()
    const y = fresh("dropped")
    add("Dropout", [v], [y, ""])
    extraOutput(y, v)
  }
  return { graph: makeGraph({ name: g.name, opset: g.opset, inputs: g.inputs, outputs, initializers, nodes }), inputs: c.inputs }
}

/** Random and model-like cases with dead code, unused constants, captures and omitted names. */
export const arbDeadCodeCase = (maxNodes = 12): fc.Arbitrary<GraphCase> =>
  fc.tuple(arbGraphCase({ maxNodes, modelShare: 0.5, models: { maxMotifs: 4 } }), fc.integer({ min: 1, max: 0x7fffffff })).map(([c, seed]) => withDeadCode(c, seed))

/**
 * `c` with islands of constants added (seeded): elementwise chains over initializers and Constant
 * nodes, Expand and ConstantOfShape (outputs larger than their inputs), Split and Dropout with an
 * omitted ("") output, Clip without its lower bound, Shape of activations (one with a symbolic batch
 * dimension), an If on a constant condition that captures a value
 * computed from constants, and the constant results as graph outputs.
 */
export const withConstantIslands = (c: GraphCase, seed: number): GraphCase => {
  const rng = prng(seed)
  const g = bindSync(c.graph)
  const nodes = [...g.nodes]
  const initializers = new Map(g.initializers)
  const outputs: ValueInfo[] = [...g.outputs]
  const types = new Map(g.valueTypes)
  for (const i of g.inputs) types.set(i.name, i.type)
  for (const [k, t] of g.initializers) types.set(k, { dtype: t.dtype, shape: t.shape })
  let k = 0
  const fresh = (base: string) => `${base}_ci${k++}`
  const constant = (t: Tensor, base = "k") => {
    const name = fresh(base)
    initializers.set(name, t)
    types.set(name, { dtype: t.dtype, shape: t.shape })
    return name
  }
  const rand = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))
  const i64 = (xs: number[]) => tensor("int64", [xs.length], Float64Array.from(xs))
  /** Appends a node; its outputs' types as the case says. */
  const add = (op: string, inputs: string[], outs: { name: string; shape: number[]; dtype?: "float32" | "int64" }[], attrs: Node["attrs"] = {}) => {
    nodes.push({ name: fresh(op.toLowerCase()), op, domain: "", inputs, outputs: outs.map((o) => o.name), attrs })
    for (const o of outs) if (o.name !== "") types.set(o.name, { dtype: o.dtype ?? "float32", shape: o.shape })
  }
  const shapeOf = (v: string) => types.get(v)!.shape as number[]
  const results: string[] = []
  for (let island = rng.int(1, 3); island > 0; island--) {
    const shape = [rng.int(1, 4), rng.int(1, 6)]
    let v = rng.next() < 0.3 ? fresh("const_node") : constant(rand(shape))
    if (!initializers.has(v)) add("Constant", [], [{ name: v, shape }], { value: attr.tensor(rand(shape)) })
    for (let step = rng.int(1, 4); step > 0; step--) {
      const y = fresh("kv")
      const s = shapeOf(v)
      switch (rng.pick(["unary", "binary", "expand", "split", "dropout", "clip", "transpose"] as const)) {
        case "unary":
          add(rng.pick(["Neg", "Abs", "Relu", "Sigmoid"]), [v], [{ name: y, shape: s }])
          break
        case "binary":
          add(rng.pick(["Add", "Mul", "Sub"]), [v, constant(rand([s[s.length - 1]]))], [{ name: y, shape: s }])
          break
        case "expand": {
          const to = [rng.int(1, 3), ...s]
          add("Expand", [v, constant(i64(to), "kshape")], [{ name: y, shape: to }])
          break
        }
        case "split": {
          // two halves along the last axis (when even), the second omitted
          const last = s[s.length - 1]
          if (last % 2 !== 0) continue
          const half = [...s.slice(0, -1), last / 2]
          add("Split", [v, constant(i64([last / 2, last / 2]), "ksplit")], [{ name: y, shape: half }, { name: "", shape: half }], { axis: attr.int(-1) })
          break
        }
        case "dropout":
          add("Dropout", [v], [{ name: y, shape: s }, { name: "", shape: s }])
          break
        case "clip":
          // no lower bound: an omitted input
          add("Clip", [v, "", constant(tensor("float32", [], Float32Array.of(rng.float(0, 1))), "khi")], [{ name: y, shape: s }])
          break
        case "transpose":
          add("Transpose", [v], [{ name: y, shape: [...s].reverse() }])
          break
      }
      v = y
    }
    results.push(v)
  }
  // a large constant made from a small one (folded under a small size bound only if no larger than its inputs)
  if (rng.next() < 0.5) {
    const y = fresh("filled")
    const shape = [rng.int(1, 3), rng.int(2, 9)]
    add("ConstantOfShape", [constant(i64(shape), "kshape")], [{ name: y, shape }], { value: attr.tensor(tensor("float32", [1], Float32Array.of(rng.float(-1, 1)))) })
    results.push(y)
  }
  // Shape of an activation (static, so known without its data), or of an input with a symbolic
  // batch dimension (known only when it runs)
  const symbolic = rng.next() < 0.3
  const inputs = [...g.inputs]
  const feeds = new Map(c.inputs)
  if (symbolic) {
    inputs.push({ name: "xs_ci", type: { dtype: "float32", shape: ["N", 3] } })
    types.set("xs_ci", { dtype: "float32", shape: [rng.int(1, 3), 3] })
    feeds.set("xs_ci", rand([types.get("xs_ci")!.shape[0] as number, 3]))
  }
  if (symbolic || rng.next() < 0.5) {
    const x = symbolic ? "xs_ci" : rng.pick(g.inputs).name
    const y = fresh("shape")
    add("Shape", [x], [{ name: y, shape: [shapeOf(x).length], dtype: "int64" }])
    const f = fresh("shape_f")
    add("Cast", [y], [{ name: f, shape: [shapeOf(x).length] }], { to: attr.int(1) })
    results.push(f)
  }
  // an If on a constant condition whose branch captures a folded value (never folded itself)
  if (rng.next() < 0.4) {
    const v = rng.pick(results)
    const t = types.get(v)!
    const out = fresh("if_y")
    const branch = (name: string, op: string) => {
      const y = fresh(`${name}_y`)
      return makeGraph({ name, opset: g.opset, inputs: [], outputs: [{ name: y, type: t }], nodes: [{ name: fresh(name), op, domain: "", inputs: [v], outputs: [y], attrs: {} }] })
    }
    add("If", [constant(tensor("bool", [], Uint8Array.of(rng.int(0, 1))), "kcond")], [{ name: out, shape: shapeOf(v) }], {
      then_branch: attr.graph(branch("then", "Neg")),
      else_branch: attr.graph(branch("else", "Abs")),
    })
    results[results.indexOf(v)] = out
  }
  for (const v of results) outputs.push({ name: v, type: types.get(v)! })
  return { graph: makeGraph({ name: g.name, opset: g.opset, inputs, outputs, initializers, nodes }), inputs: feeds }
}

/** Random and model-like cases with constant islands (and dead code around them). */
export const arbConstantCase = (maxNodes = 10): fc.Arbitrary<GraphCase> =>
  fc
    .tuple(arbGraphCase({ maxNodes, modelShare: 0.5, models: { maxMotifs: 3 } }), fc.integer({ min: 1, max: 0x7fffffff }), fc.boolean())
    .map(([c, seed, dead]) => {
      const islands = withConstantIslands(c, seed)
      return dead ? withDeadCode(islands, seed + 1) : islands
    })

/**
 * `c` with duplicates for common-subexpression elimination (seeded): copies of nodes (read
 * downstream, some graph outputs, some captured by an If's branch, some in the "ai.onnx" domain,
 * an alias of the default one), Dropouts of one input with different omitted outputs, Constant
 * nodes with equal values and with values that differ in one element, copies of initializers (one
 * differing in its last element, one captured by a branch, one a graph output) and nodes that read
 * them, the same bytes in other shapes and dtypes, copies with their attributes in another order,
 * a Clip without its lower bound after merged nodes with an omitted output, and identical Ifs.
 */
export const withDuplicates = (c: GraphCase, seed: number): GraphCase => {
  const rng = prng(seed)
  const g = bindSync(c.graph)
  const nodes = [...g.nodes]
  const initializers = new Map(g.initializers)
  const outputs: ValueInfo[] = [...g.outputs]
  const types = new Map(g.valueTypes)
  for (const i of g.inputs) types.set(i.name, i.type)
  for (const [k, t] of g.initializers) types.set(k, { dtype: t.dtype, shape: t.shape })
  let k = 0
  const fresh = (base: string) => `${base}_cs${k++}`
  const isFloat = (v: string) => v !== "" && types.get(v)?.dtype === "float32" && types.get(v)!.shape.every((d) => typeof d === "number")
  const output = (v: string) => outputs.push({ name: v, type: types.get(v)! })
  /** `v` read by a new node (placed last) whose output is a graph output: `v` itself stays mergeable. */
  const readBy = (v: string) => {
    const y = fresh("read")
    nodes.push({ name: fresh("neg"), op: "Neg", domain: "", inputs: [v], outputs: [y], attrs: {} })
    types.set(y, types.get(v)!)
    output(y)
  }
  /** Inserts `n` at a random place after the producers of what it reads (its outputs typed as `like`'s). */
  const place = (n: Node, like?: readonly string[]) => {
    const after = Math.max(-1, ...readsOf(n).map((r) => nodes.findIndex((m) => m.outputs.includes(r))))
    nodes.splice(rng.int(after + 1, nodes.length), 0, n)
    n.outputs.forEach((o, j) => o !== "" && like?.[j] && types.has(like[j]) && types.set(o, types.get(like[j])!))
  }
  /** A copy of `n` under fresh names; its domain, and which of its outputs are named, as given. */
  const copy = (n: Node, domain = n.domain): Node => ({
    ...n,
    name: fresh(n.name),
    domain,
    outputs: n.outputs.map((o) => (o === "" ? "" : fresh(o))),
    // the same attributes, in another order
    attrs: Object.fromEntries(Object.entries(n.attrs).sort(() => rng.next() - 0.5)),
  })
  const plain = g.nodes.filter((n) => !Object.values(n.attrs).some((a) => a.kind === "graph" || a.kind === "graphs") && n.outputs.some(isFloat))
  const floats = [...g.inputs.map((i) => i.name), ...g.nodes.flatMap((n) => n.outputs)].filter(isFloat)
  const branchReading = (v: string, op: string) => {
    const y = fresh(`${op.toLowerCase()}_y`)
    return makeGraph({ name: op, opset: g.opset, inputs: [], outputs: [{ name: y, type: types.get(v)! }], nodes: [{ name: fresh(op), op, domain: "", inputs: [v], outputs: [y], attrs: {} }] })
  }
  const ifReading = (v: string, cond: string): Node => ({
    name: fresh("if"),
    op: "If",
    domain: "",
    inputs: [cond],
    outputs: [fresh("if_y")],
    attrs: { then_branch: attr.graph(branchReading(v, "Neg")), else_branch: attr.graph(branchReading(v, "Abs")) },
  })
  const cond = fresh("cond")
  initializers.set(cond, tensor("bool", [], Uint8Array.of(rng.int(0, 1))))

  // copies of nodes: plain, in the "ai.onnx" domain, as graph outputs, captured by a branch
  for (let d = Math.min(plain.length, rng.int(1, 4)); d > 0; d--) {
    const n = rng.pick(plain)
    const how = rng.pick(["plain", "plain", "domain", "output", "captured"] as const)
    const m = copy(n, how === "domain" ? "ai.onnx" : n.domain)
    place(m, n.outputs)
    const y = m.outputs.find(isFloat)
    if (!y) continue
    if (how === "output") output(y)
    else if (how === "captured") {
      const f = ifReading(y, cond)
      place(f, [y])
      output(f.outputs[0])
    } else {
      const z = fresh("uses")
      place({ name: fresh("use"), op: "Sub", domain: "", inputs: [n.outputs[m.outputs.indexOf(y)], y], outputs: [z], attrs: {} }, [y])
      output(z)
    }
  }
  // Dropouts of one input: mask omitted, absent or read
  if (floats.length > 0 && rng.next() < 0.6) {
    const v = rng.pick(floats)
    for (const shape of [[fresh("drop")], [fresh("drop"), ""], [fresh("drop"), ""], [fresh("drop"), fresh("mask")]].sort(() => rng.next() - 0.5)) {
      place({ name: fresh("dropout"), op: "Dropout", domain: "", inputs: [v], outputs: shape, attrs: {} }, [v])
      readBy(shape[0])
      if (shape[1]) {
        types.set(shape[1], { dtype: "bool", shape: types.get(v)!.shape })
        const f = fresh("mask_f")
        place({ name: fresh("cast"), op: "Cast", domain: "", inputs: [shape[1]], outputs: [f], attrs: { to: attr.int(1) } }, [v])
        readBy(f)
      }
    }
  }
  // an omitted input after merged nodes with omitted outputs
  if (floats.length > 0) {
    const v = rng.pick(floats)
    const hi = fresh("hi")
    initializers.set(hi, tensor("float32", [], Float32Array.of(0.5)))
    const y = fresh("clipped")
    nodes.push({ name: fresh("clip"), op: "Clip", domain: "", inputs: [v, "", hi], outputs: [y], attrs: {} })
    types.set(y, types.get(v)!)
    output(y)
  }
  // Constant nodes: equal values, and values that differ in one (the last) element
  if (rng.next() < 0.6) {
    const n = rng.int(1, 40)
    const a = Float32Array.from({ length: n }, () => rng.float(-1, 1))
    const b = a.slice()
    b[n - 1] += 1
    for (const data of [a, a.slice(), b, b.slice()].slice(0, rng.int(2, 4))) {
      // one dimension or two, [1, n] or [n, 1]: the same bytes in another shape
      const shape = rng.pick([[n], [1, n], [n, 1]])
      const y = fresh("const_node")
      place({ name: fresh("constant"), op: "Constant", domain: "", inputs: [], outputs: [y], attrs: { value: attr.tensor(tensor("float32", shape, data)) } })
      types.set(y, { dtype: "float32", shape })
      readBy(y)
    }
  }
  // copies of initializers, and nodes that read them as others read the originals
  const weights = [...g.initializers].filter(([, t]) => t.dtype === "float32" && t.data.length > 0)
  for (let d = Math.min(weights.length, rng.int(0, 3)); d > 0; d--) {
    const [name, t] = rng.pick(weights)
    const how = rng.pick(["same", "same", "last", "captured", "output"] as const)
    const data = t.data.slice()
    if (how === "last") data[data.length - 1] += 1
    const twin = fresh(name)
    initializers.set(twin, tensor(t.dtype, t.shape, data))
    types.set(twin, { dtype: t.dtype, shape: t.shape })
    if (how === "output") output(twin)
    else if (how === "captured") {
      const f = ifReading(twin, cond)
      place(f, [name])
      output(f.outputs[0])
    } else {
      const reader = g.nodes.find((n) => n.inputs.includes(name) && !Object.values(n.attrs).some((a) => a.kind === "graph"))
      if (!reader) continue
      const m = { ...copy(reader), inputs: reader.inputs.map((i) => (i === name ? twin : i)) }
      place(m, reader.outputs)
      for (const o of m.outputs) if (isFloat(o)) readBy(o)
    }
  }
  // the same bytes as another initializer in another shape ([1, n] and [n, 1]) or dtype (int32), and equal twins, read by nothing
  for (let d = rng.int(0, 3); d > 0; d--) {
    const n = rng.int(1, 6)
    const data = Float32Array.from({ length: n }, () => rng.float(-1, 1))
    const shapes = [[1, n], [n, 1], [n, 1]]
    for (const shape of shapes) initializers.set(fresh("twin"), tensor("float32", shape, data.slice()))
    initializers.set(fresh("twin"), tensor("int32", [n, 1], new Int32Array(data.slice().buffer)))
  }
  // identical Ifs (nodes with subgraphs are never merged)
  if (floats.length > 0 && rng.next() < 0.3) {
    const f = ifReading(rng.pick(floats), cond)
    place(f, [f.outputs[0]])
    const h = copy(f)
    place(h)
    for (const x of [f, h]) {
      types.set(x.outputs[0], { dtype: "float32", shape: (f.attrs.then_branch.value as Graph).outputs[0].type.shape })
      readBy(x.outputs[0])
    }
  }
  return { graph: makeGraph({ name: g.name, opset: g.opset, inputs: g.inputs, outputs, initializers, nodes }), inputs: c.inputs }
}

/** Model-like cases full of siblings, and random ones, with duplicates of every kind CSE meets. */
export const arbDuplicateCase = (): fc.Arbitrary<GraphCase> =>
  fc
    .tuple(
      fc.oneof(
        arbGraphCase({ maxNodes: 10 }),
        arbModelGraphCase({ motifs: ["siblings", "conv-bn-act", "pool", "attention", "linear", "gemm", "layer-norm", "split-weights", "split", "dropout-mask"], maxMotifs: 4 }),
      ),
      fc.integer({ min: 1, max: 0x7fffffff }),
    )
    .map(([c, seed]) => withDuplicates(c, seed))

/**
 * `c` with what SimplifyInference rewrites, and near misses it must leave (seeded), on the case's
 * float values: Identity chains; an Identity and an x*1 that an If's branches read; Dropouts with no inputs beyond the data, with a constant
 * training_mode of 0, with training_mode 1 (and ratio 0), with their mask read; Casts to the same
 * type and to another; x*1, 1*x, x+0, 0+x, x-0, 0-x, x/1 with the unit of rank 0, 1 or the
 * value's shape, one that broadcasts x to a larger shape, and a near unit; Transpose pairs that
 * cancel (inverse perms, or both reversing by default) or compose; Flatten → Reshape and Unsqueeze →
 * Squeeze chains that cancel or not; BatchNormalization after a 1×1 Conv that only it reads, or
 * that another node reads too, and on a value that is no Conv's (rank 2 to 4), some in training mode; Gemms with a
 * constant weight (transposed or not, alpha), a constant or computed bias (beta). Their results
 * are read by a Neg each (so the rewritten nodes are not graph outputs), some are graph outputs.
 */
export const withSimplifiable = (c: GraphCase, seed: number): GraphCase => {
  const rng = prng(seed)
  const g = bindSync(c.graph)
  const nodes = [...g.nodes]
  const initializers = new Map(g.initializers)
  const outputs: ValueInfo[] = [...g.outputs]
  const types = new Map(g.valueTypes)
  for (const i of g.inputs) types.set(i.name, i.type)
  const symbolic: ValueInfo[] = []
  const feeds = new Map(c.inputs)
  let k = 0
  const fresh = (base: string) => `${base}_si${k++}`
  const shapeOf = (v: string) => types.get(v)!.shape as number[]
  const floats = [...g.inputs.map((i) => i.name), ...g.nodes.flatMap((n) => n.outputs)].filter(
    (v) => v !== "" && types.get(v)?.dtype === "float32" && types.get(v)!.shape.every((d) => typeof d === "number") && shapeOf(v).length >= 1 && shapeOf(v).reduce((a, b) => a * b, 1) <= 4096,
  )
  if (floats.length === 0) return c
  const rand = (shape: readonly number[], lo = -1, hi = 1) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(lo, hi)))
  const filled = (shape: readonly number[], x: number) => tensor("float32", shape, new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(x))
  const i64 = (xs: readonly number[]) => tensor("int64", [xs.length], Float64Array.from(xs))
  const constant = (t: Tensor, base = "s") => {
    const name = fresh(base)
    initializers.set(name, t)
    types.set(name, { dtype: t.dtype, shape: t.shape })
    return name
  }
  const add = (op: string, inputs: string[], shape: readonly number[], attrs: Node["attrs"] = {}, outs?: string[], dtype: "float32" | "float64" | "float16" | "int32" | "bool" = "float32"): string => {
    const names = outs ?? [fresh("sv")]
    nodes.push({ name: fresh(op.toLowerCase()), op, domain: "", inputs, outputs: names, attrs })
    types.set(names[0], { dtype, shape })
    return names[0]
  }
  /** `v` read by a Neg whose output is a graph output (or `v` itself one, now and then). */
  const finish = (v: string) => {
    const t = types.get(v)!
    if (rng.next() < 0.15) outputs.push({ name: v, type: t })
    else outputs.push({ name: add("Neg", [v], t.shape as number[], {}, undefined, t.dtype as "float32"), type: t })
  }
  const pick = (pred: (v: string) => boolean = () => true) => {
    const cands = floats.filter(pred)
    return cands.length ? rng.pick(cands) : undefined
  }
  for (let step = rng.int(2, 6); step > 0; step--) {
    switch (rng.pick(["identity", "captured", "dropout", "cast", "unit", "transpose", "reshape", "bn", "gemm", "gemm"] as const)) {
      case "identity": {
        const v = pick()!
        finish(add("Identity", [add("Identity", [v], shapeOf(v))], shapeOf(v)))
        break
      }
      case "captured": {
        // x*1 and an Identity whose outputs an If's branches read from outside: they keep their names
        const v = pick()!
        const t = types.get(v)!
        const a = add("Identity", [v], shapeOf(v))
        const b = add("Mul", [v, constant(filled([], 1), "unit")], shapeOf(v))
        const branch = (name: string, op: string) => {
          const y = fresh(`${name}_y`)
          return makeGraph({ name, opset: g.opset, inputs: [], outputs: [{ name: y, type: t }], nodes: [{ name: fresh(name), op, domain: "", inputs: [a, b], outputs: [y], attrs: {} }] })
        }
        const cond = constant(tensor("bool", [], Uint8Array.of(rng.int(0, 1))), "cond")
        finish(add("If", [cond], shapeOf(v), { then_branch: attr.graph(branch("then", "Add")), else_branch: attr.graph(branch("else", "Sub")) }))
        break
      }
      case "dropout": {
        const v = pick()!
        const s = shapeOf(v)
        const how = rng.pick(["plain", "omitted", "eval", "train", "mask"] as const)
        if (how === "plain") finish(add("Dropout", [v], s))
        else if (how === "omitted") {
          const y = fresh("sv")
          add("Dropout", [v], s, {}, [y, ""])
          finish(y)
        }
        else if (how === "eval") finish(add("Dropout", [v, constant(filled([], 0.5)), constant(tensor("bool", [], Uint8Array.of(0)))], s))
        else if (how === "train") finish(add("Dropout", [v, constant(filled([], 0)), constant(tensor("bool", [], Uint8Array.of(1)))], s))
        else {
          const [y, m] = [fresh("sv"), fresh("mask")]
          add("Dropout", [v], s, {}, [y, m])
          types.set(m, { dtype: "bool", shape: s })
          finish(y)
          finish(add("Cast", [m], s, { to: attr.int(1) }))
        }
        break
      }
      case "cast": {
        const v = pick()!
        const s = shapeOf(v)
        finish(rng.next() < 0.5 ? add("Cast", [v], s, { to: attr.int(1) }) : add("Cast", [add("Cast", [v], s, { to: attr.int(11) }, undefined, "float64")], s, { to: attr.int(1) }))
        break
      }
      case "unit": {
        const v = pick()!
        const s = shapeOf(v)
        const op = rng.pick(["Mul", "Add", "Sub", "Div"] as const)
        const unit = op === "Mul" || op === "Div" ? 1 : 0
        const how = rng.pick(["scalar", "one", "full", "wider", "near", "prefix", "cross"] as const)
        // prefix: x [n] and a unit [n, n] (x's shape a prefix of the result's); cross: x [m, 1] and a unit [m, n]
        const n = rng.int(2, 3)
        const x = how === "prefix" ? add("Neg", [constant(rand([n]))], [n]) : how === "cross" ? add("Neg", [constant(rand([n + 1, 1]))], [n + 1, 1]) : v
        const shape = how === "scalar" ? [] : how === "one" ? [1] : how === "wider" ? [2, ...s] : how === "prefix" ? [n, n] : how === "cross" ? [n + 1, n] : s
        const t = filled(shape, unit)
        if (how === "near") t.data[t.data.length - 1] = unit + 0.5
        const u = constant(t, "unit")
        // (no 1/x: x may be 0)
        const left = op !== "Div" && rng.next() < 0.5
        finish(add(op, left ? [u, x] : [x, u], how === "wider" || how === "prefix" || how === "cross" ? shape : s))
        break
      }
      case "transpose": {
        const v = pick((x) => shapeOf(x).length >= 2)
        if (!v) break
        const s = shapeOf(v)
        const perm = s.map((_, i) => i).sort(() => rng.next() - 0.5)
        const how = rng.pick(["inverse", "default", "compose"] as const)
        if (how === "default") {
          const r = [...s].reverse()
          finish(add("Transpose", [add("Transpose", [v], r)], s))
        } else {
          const mid = add("Transpose", [v], perm.map((p) => s[p]), { perm: attr.ints(perm) })
          const second = how === "inverse" ? perm.map((_, i) => perm.indexOf(i)) : s.map((_, i) => i).sort(() => rng.next() - 0.5)
          const ms = shapeOf(mid)
          finish(add("Transpose", [mid], second.map((p) => ms[p]), { perm: attr.ints(second) }))
        }
        break
      }
      case "reshape": {
        const v = pick((x) => shapeOf(x).length >= 2)
        if (!v) break
        const s = shapeOf(v)
        const how = rng.pick(["flatten-reshape", "unsqueeze-squeeze", "any", "any", "symbolic"] as const)
        if (how === "flatten-reshape") {
          const flat = add("Flatten", [v], [s[0], s.slice(1).reduce((a, b) => a * b, 1)], { axis: attr.int(1) })
          const back = rng.next() < 0.6 ? s : [s.slice(0, -1).reduce((a, b) => a * b, 1), s[s.length - 1]]
          finish(add("Reshape", [flat, constant(i64(back), "shape")], back))
        } else if (how === "unsqueeze-squeeze") {
          const un = add("Unsqueeze", [v, constant(i64([0]), "axes")], [1, ...s])
          finish(add("Squeeze", [un, constant(i64([0]), "axes")], s))
        } else if (how === "any") {
          // one of the four ops after another (Squeeze where the leading dim is 1)
          const step = (x: string, op: string): string => {
            const xs = shapeOf(x)
            const size = xs.reduce((a, b) => a * b, 1)
            if (op === "Flatten") return add("Flatten", [x], [xs[0], size / xs[0]], { axis: attr.int(1) })
            if (op === "Unsqueeze") return add("Unsqueeze", [x, constant(i64([0]), "axes")], [1, ...xs])
            if (op === "Squeeze" && xs[0] === 1 && xs.length > 1) return add("Squeeze", [x, constant(i64([0]), "axes")], xs.slice(1))
            const to = rng.pick([[1, ...xs], s, [size]])
            return add("Reshape", [x, constant(i64(to), "shape")], to)
          }
          const ops = ["Reshape", "Flatten", "Squeeze", "Unsqueeze"]
          finish(step(step(v, rng.pick(ops)), rng.pick(ops)))
        } else {
          // over an input of symbolic batch: no static shape for a Reshape to take (the chain stays)
          const name = fresh("symbolic")
          const [N, A, B] = [rng.int(1, 2), rng.int(1, 3), rng.int(1, 3)]
          symbolic.push({ name, type: { dtype: "float32", shape: ["N", A, B] } })
          feeds.set(name, rand([N, A, B]))
          types.set(name, { dtype: "float32", shape: ["N", A, B] })
          const flat = add("Flatten", [name], ["N", A * B] as unknown as number[], { axis: attr.int(1) })
          finish(rng.next() < 0.5 ? add("Unsqueeze", [flat, constant(i64([2]), "axes")], ["N", A * B, 1] as unknown as number[]) : add("Reshape", [flat, constant(i64([0, B, A]), "shape")], ["N", B, A] as unknown as number[]))
        }
        break
      }
      case "bn": {
        const v = pick((x) => shapeOf(x).length >= 2 && shapeOf(x).length <= 4)
        if (!v) break
        const s = shapeOf(v)
        let x = v
        let C = s[1]
        const conv = s.length === 4 && rng.next() < 0.7
        // now and then in float16 (a fold would round the folded constants to half again: it stays) or float64 (it folds)
        const dt = rng.pick(["float32", "float32", "float32", "float32", "float16", "float64"] as const)
        if (dt !== "float32") x = add("Cast", [v], s, { to: attr.int(dt === "float16" ? 10 : 11) }, undefined, dt)
        const typed = (t: Tensor) => (dt === "float32" ? t : fromArray(dt, t.shape, t.data))
        if (conv) {
          C = rng.int(1, 4)
          // now and then a computed weight or bias (Abs of a constant): no fold into the conv
          const computed = rng.pick(["none", "none", "weight", "bias"] as const)
          const w = constant(typed(rand([C, s[1], 1, 1], -0.5, 0.5)), "w")
          const ins = [x, computed === "weight" ? add("Abs", [w], [C, s[1], 1, 1], {}, undefined, dt) : w]
          if (computed === "bias" || rng.next() < 0.5) {
            const b = constant(typed(rand([C])), "b")
            ins.push(computed === "bias" ? add("Abs", [b], [C], {}, undefined, dt) : b)
          }
          x = add("Conv", ins, [s[0], C, s[2], s[3]], { kernel_shape: attr.ints([1, 1]) }, undefined, dt)
          if (rng.next() < 0.3) finish(add("Relu", [x], shapeOf(x), {}, undefined, dt))
        }
        const params = [rand([C], 0.5, 1.5), rand([C]), rand([C]), rand([C], 0.5, 2)].map((t) => constant(typed(t), "bn"))
        // now and then one parameter computed (Abs of a constant): no fold at all
        if (rng.next() < 0.2) {
          const p = rng.int(0, 3)
          params[p] = add("Abs", [params[p]], [C], {}, undefined, dt)
        }
        // now and then in training mode (batch statistics): then it stays
        const bnAttrs: Node["attrs"] = { epsilon: attr.float(rng.pick([1e-5, 1e-3])), ...(rng.next() < 0.15 ? { training_mode: attr.int(1) } : {}) }
        finish(add("BatchNormalization", [x, ...params], shapeOf(x), bnAttrs, undefined, dt))
        break
      }
      case "gemm": {
        // a matrix: one of the case's, or a value flattened to one
        const any = pick()!
        const v = pick((x) => shapeOf(x).length === 2) ?? add("Flatten", [any], [shapeOf(any)[0], shapeOf(any).slice(1).reduce((a, b) => a * b, 1)], { axis: attr.int(1) })
        const [M, K] = shapeOf(v)
        const N = rng.int(1, 5)
        const transB = rng.int(0, 1)
        if (rng.next() < 0.2) {
          // int32 (a computed A, constant B and C): alpha and beta of ½ are not folded into integers
          const ints = (shape: number[]) => tensor("int32", shape, Int32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.int(-5, 5)))
          const A = add("Neg", [constant(ints([M, K]), "ga")], [M, K], {}, undefined, "int32")
          const ins = [A, constant(ints(transB ? [N, K] : [K, N]), "gw"), constant(ints([N]), "gc")]
          finish(add("Gemm", ins, [M, N], { transB: attr.int(transB), alpha: attr.float(rng.pick([1, 0.5])), beta: attr.float(rng.pick([1, 0.5])) }, undefined, "int32"))
          break
        }
        // now and then a computed weight (no fold of B; a constant C still folds its beta)
        const w = constant(rand(transB ? [N, K] : [K, N]), "gw")
        const ins = [v, rng.next() < 0.15 ? add("Neg", [w], transB ? [N, K] : [K, N]) : w]
        const bias = rng.pick(["none", "constant", "computed"] as const)
        if (bias === "constant") ins.push(constant(rand(rng.next() < 0.5 ? [N] : [M, N]), "gc"))
        if (bias === "computed") ins.push(add("Neg", [constant(rand([N]), "gc")], [N]))
        finish(add("Gemm", ins, [M, N], { transB: attr.int(transB), alpha: attr.float(rng.pick([1, 0.5])), beta: attr.float(rng.pick([1, 2])) }))
        break
      }
    }
  }
  return { graph: makeGraph({ name: g.name, opset: g.opset, inputs: [...g.inputs, ...symbolic], outputs, initializers, nodes }), inputs: feeds }
}

/** Random and model-like cases with what SimplifyInference rewrites, and near misses. */
export const arbSimplifiableCase = (): fc.Arbitrary<GraphCase> =>
  fc.tuple(arbGraphCase({ maxNodes: 8, modelShare: 0.4, models: { maxMotifs: 3 } }), fc.integer({ min: 1, max: 0x7fffffff })).map(([c, seed]) => withSimplifiable(c, seed))
