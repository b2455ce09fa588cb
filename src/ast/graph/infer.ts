// Type inference and shape binding: every value's dtype and shape from the inputs' shapes, by
// each op's type relation. Values computable at compile time (initializers, Constant nodes and
// small subgraphs over them — the shape subgraphs of PyTorch exports) are propagated, so shapes
// that depend on them come out static.
import { Effect } from "effect"
import { checkInterrupt, GraphError, InputError, isEvalError, NodeError, UnsupportedOpError, type EvalError, type Interrupt } from "./errors.js"
import { resolveNode, roundNarrow, subgraphFreeNames } from "./evaluate.js"
import { runKernel } from "./ops/exact-int64.js"
import type { Graph, Node, ValueInfo } from "./graph.js"
import { OpError, OpUnsupported, type Dim, type ValueType } from "./op.js"
import { LIMITS, showCount } from "./limits.js"
import { sizeOf, type Tensor } from "./tensor.js"

/** Largest constant (elements) the binder computes to resolve shapes. */
export const MAX_PROPAGATED_ELEMENTS = 1 << 16

export const typeOf = (t: Tensor): ValueType => ({ dtype: t.dtype, shape: t.shape })

const isStatic = (t: ValueType): boolean => t.shape.every((d) => typeof d === "number")

const toTyped = (n: Node, e: unknown): EvalError => {
  if (isEvalError(e)) return e
  if (e instanceof OpUnsupported) return new UnsupportedOpError({ node: n.name, op: n.op, domain: n.domain, reason: e.message })
  if (e instanceof OpError || e instanceof RangeError) return new NodeError({ node: n.name, op: n.op, reason: e.message })
  return new NodeError({ node: n.name, op: n.op, reason: `internal error in type inference: ${e instanceof Error ? e.message : String(e)}` })
}

/**
 * Subgraph inference memoized for one bind: a body's output types depend only on its input types
 * and on the types and constants of the outer values it reads, so a body met again with the same
 * ones (a Loop's fixed point re-inferring its body, nested at every level) is inferred once.
 * Without it, nested Loops cost 2^depth.
 */
export interface InferMemo {
  /** The caller's stop request, checked before each node. */
  readonly interrupt?: Interrupt
  readonly results: WeakMap<Graph, Map<string, (ValueType | undefined)[]>>
  readonly tensorIds: WeakMap<Tensor, number>
  next: number
}

export const newInferMemo = (interrupt?: Interrupt): InferMemo => ({ ...(interrupt ? { interrupt } : {}), results: new WeakMap(), tensorIds: new WeakMap(), next: 0 })

const tensorId = (memo: InferMemo, t: Tensor | undefined): string => {
  if (!t) return "-"
  let id = memo.tensorIds.get(t)
  if (id === undefined) {
    id = memo.next++
    memo.tensorIds.set(t, id)
  }
  return String(id)
}

// (JSON keeps a symbolic dim "4" apart from the number 4)
const showMaybe = (t: ValueType | undefined): string => (t ? `${t.dtype}${JSON.stringify(t.shape)}` : "?")

/** A statically shaped output over the element limit is refused where it is inferred, naming the node. */
const checkElements = (n: Node, j: number, t: ValueType): void => {
  if (!isStatic(t)) return
  const count = (t.shape as number[]).reduce((a, d) => a * d, 1)
  if (count > LIMITS.tensorElements)
    throw new NodeError({
      node: n.name,
      op: n.op,
      reason: `output ${j} would have shape [${t.shape.join(", ")}] (${showCount(count)} elements), over the limit of ${showCount(LIMITS.tensorElements)} elements a tensor`,
    })
}

/** A graph over the node limit (subgraphs included) is refused before anything walks it. */
const checkSize = (g: Graph): void => {
  let count = 0
  const stack: Graph[] = [g]
  while (stack.length) {
    const h = stack.pop()!
    count += h.nodes.length
    if (count > LIMITS.nodes) throw new GraphError({ where: g.name, reason: `has more than ${showCount(LIMITS.nodes)} nodes, subgraphs included (Tessera's limit)` })
    for (const n of h.nodes)
      for (const a of Object.values(n.attrs)) {
        if (a.kind === "graph") stack.push(a.value)
        else if (a.kind === "graphs") stack.push(...a.value)
      }
  }
}

/**
 * What one node's inference read and set: its input types and constants, the opset, and the types
 * and constants it set, in order — for the next bind of a graph that kept the node (the same
 * object) with the same inputs.
 */
interface NodeInference {
  readonly opset: number
  readonly inTypes: readonly (ValueType | undefined)[]
  readonly inValues: readonly (Tensor | undefined)[]
  readonly types: readonly (readonly [string, ValueType])[]
  readonly values: readonly (readonly [string, Tensor])[]
}

/**
 * A memo for the binds of one rewrite to a fixed point (rules.ts makes one per call and drops it):
 * a sweep changes a few nodes and keeps the other node objects, each of which a bind re-inferred
 * (AlterLayout's sixteen sweeps over DenseNet-121's thousand nodes, each bind evaluating its small
 * constants again). A kept node whose input types are equal (dtype and dims) and whose input
 * constants are the same tensors gets what it got last time, which is what inferring it again
 * gives: a type relation and a kernel read only the node, its inputs and the opset. Nodes with
 * subgraphs, whose inference reads the enclosing scope, are always inferred.
 */
export type BindMemo = Map<Node, NodeInference>

export const bindMemo = (): BindMemo => new Map()

/**
 * The constants a bind through `memo` computed for node `n` (its reference kernel, narrow floats
 * rounded) from exactly these inputs (the same tensors), one per output; undefined where it computed
 * none, or where an output is omitted. What running the kernel on them again gives.
 */
export const propagatedOutputs = (memo: BindMemo, n: Node, inputs: readonly (Tensor | undefined)[]): Tensor[] | undefined => {
  const known = memo.get(n)
  if (!known || known.values.length === 0 || n.outputs.some((o) => o === "") || !inputs.every((t, k) => t === known.inValues[k])) return undefined
  const byName = new Map(known.values)
  const outs = n.outputs.map((o) => byName.get(o))
  return outs.every((t) => t !== undefined) ? (outs as Tensor[]) : undefined
}

const sameType = (a: ValueType | undefined, b: ValueType | undefined): boolean =>
  a === b || (a !== undefined && b !== undefined && a.dtype === b.dtype && a.shape.length === b.shape.length && a.shape.every((d, k) => d === b.shape[k]))

/**
 * Binds the graph inputs' symbolic dims from `shapes` (whole input shapes by input name), then
 * infers every value's type. With `requireStatic`, an input dim left unbound is an InputError
 * naming the input and the dim. `memo`: one fixed point's (see BindMemo).
 */
export const bindSync = (
  graph: Graph,
  shapes: ReadonlyMap<string, readonly number[]> = new Map(),
  options: { readonly requireStatic?: boolean; readonly interrupt?: Interrupt; readonly memo?: BindMemo } = {},
): Graph => {
  const symbols = new Map<string, number>()
  const inputs: ValueInfo[] = graph.inputs.map((i) => {
    const given = shapes.get(i.name)
    if (given) {
      if (given.length !== i.type.shape.length)
        throw new InputError({ input: i.name, reason: `shape [${given.join("x")}] has rank ${given.length}, the model expects rank ${i.type.shape.length}` })
      i.type.shape.forEach((d, k) => {
        const g = given[k]
        if (!Number.isInteger(g) || g < 0) throw new InputError({ input: i.name, reason: `dim ${k} is ${g}: dims must be non-negative integers` })
        if (typeof d === "number" && d !== g) throw new InputError({ input: i.name, reason: `dim ${k} is ${g}, the model fixes it at ${d}` })
        if (typeof d === "string") {
          const prev = symbols.get(d)
          if (prev !== undefined && prev !== g) throw new InputError({ input: i.name, reason: `dim ${k} ('${d}') is ${g}, but '${d}' is bound to ${prev} elsewhere` })
          symbols.set(d, g)
        }
      })
    }
    return i
  })
  const bound: ValueInfo[] = inputs.map((i) => {
    const shape: Dim[] = i.type.shape.map((d, k) => {
      if (typeof d === "number") return d
      const v = symbols.get(d)
      if (v !== undefined) return v
      if (options.requireStatic)
        throw new InputError({
          input: i.name,
          reason: `dim ${k} ('${d}') is symbolic and unbound: give the input's data, or its shape with --shape ${i.name}=${i.type.shape.map((x) => (typeof x === "number" ? x : "N")).join("x")}`,
        })
      return d
    })
    return { name: i.name, type: { dtype: i.type.dtype, shape } }
  })
  const types = new Map<string, ValueType>()
  const values = new Map<string, Tensor>()
  for (const i of bound) types.set(i.name, i.type)
  for (const [k, t] of graph.initializers) {
    types.set(k, typeOf(t))
    values.set(k, t)
  }
  checkSize(graph)
  inferNodes(graph, types, values, newInferMemo(options.interrupt), 0, options.memo)
  const outputs = graph.outputs.map((o) => ({ name: o.name, type: types.get(o.name) ?? o.type }))
  const valueTypes = new Map(graph.valueTypes)
  for (const [k, t] of types) valueTypes.set(k, t)
  return { ...graph, inputs: bound, outputs, valueTypes }
}

/**
 * Infers the types of a graph's nodes in order, into `types` (which holds the inputs',
 * initializers' and enclosing scopes' types) and propagates small constants into `values`.
 */
export const inferNodes = (graph: Graph, types: Map<string, ValueType>, values: Map<string, Tensor>, memo: InferMemo = newInferMemo(), depth = 0, nodes?: BindMemo): void => {
  if (depth > LIMITS.subgraphDepth) throw new GraphError({ where: graph.name, reason: `subgraphs are nested more than ${LIMITS.subgraphDepth} deep (Tessera's limit)` })
  for (const n of graph.nodes) {
    checkInterrupt(memo.interrupt, () => `inferring node '${n.name}' (${n.op})`)
    const known = nodes?.get(n)
    if (
      known &&
      known.opset === graph.opset &&
      n.inputs.every((name, k) => (name === "" ? known.inTypes[k] === undefined : sameType(types.get(name) ?? graph.valueTypes.get(name), known.inTypes[k]) && values.get(name) === known.inValues[k]))
    ) {
      for (const [o, t] of known.types) types.set(o, t)
      for (const [o, v] of known.values) values.set(o, v)
      continue
    }
    // what this node sets, for the memo
    const setTypes: [string, ValueType][] = []
    const setValues: [string, Tensor][] = []
    const setType = (o: string, t: ValueType) => {
      types.set(o, t)
      setTypes.push([o, t])
    }
    const setValue = (o: string, v: Tensor) => {
      values.set(o, v)
      setValues.push([o, v])
    }
    try {
      const { def, attrs } = resolveNode(n)
      const inTypes = n.inputs.map((name) => {
        if (name === "") return undefined
        const t = types.get(name) ?? graph.valueTypes.get(name)
        if (!t) throw new GraphError({ where: `node '${n.name}' (${n.op})`, reason: `input '${name}' has no known type` })
        return t
      })
      const inValues = n.inputs.map((name) => (name === "" ? undefined : values.get(name)))
      const hasGraph = Object.values(n.attrs).some((a) => a.kind === "graph" || a.kind === "graphs")
      if (nodes && !hasGraph) nodes.set(n, { opset: graph.opset, inTypes, inValues, types: setTypes, values: setValues })
      const outTypes = def.infer({
        node: n.name,
        attrs,
        opset: graph.opset,
        inputs: inTypes,
        values: inValues,
        outputs: n.outputs.length,
        inferSubgraph: (sub, subInputs) => inferSubgraphTypes(sub, subInputs, types, values, memo, depth + 1),
      })
      n.outputs.forEach((o, j) => {
        if (o === "") return
        const t = outTypes[j]
        if (!t) throw new NodeError({ node: n.name, op: n.op, reason: `type relation gave no type for output ${j}` })
        checkElements(n, j, t)
        setType(o, t)
      })
      // Shape and Size of a statically shaped value are known without its data
      if ((n.op === "Shape" || n.op === "Size") && n.inputs[0] !== "" && !inValues[0] && inTypes[0] && isStatic(inTypes[0])) {
        const shapeOnly: Tensor = { dtype: inTypes[0].dtype, shape: inTypes[0].shape as number[], data: new Float32Array(0) }
        const [out] = def.kernel({ node: n.name, attrs, opset: graph.opset, inputs: [shapeOnly], outputs: 1, runSubgraph: () => [] })
        setValue(n.outputs[0], out)
        setType(n.outputs[0], typeOf(out))
        continue
      }
      // constant propagation: all inputs known, no subgraphs, small outputs
      const allConst = n.inputs.every((name, k) => name === "" || inValues[k] !== undefined)
      const small = outTypes.every((t) => isStatic(t) && sizeOf(t.shape as number[]) <= MAX_PROPAGATED_ELEMENTS)
      if (allConst && !hasGraph && small) {
        const outs = runKernel(
          n.op,
          def,
          {
            node: n.name,
            attrs,
            opset: graph.opset,
            inputs: n.inputs.map((name, k) => (name === "" ? undefined : inValues[k])),
            outputs: n.outputs.length,
            runSubgraph: () => [],
          },
          n.domain,
        )
        outs.forEach(roundNarrow)
        n.outputs.forEach((o, j) => {
          if (o !== "" && outs[j]) {
            setValue(o, outs[j])
            setType(o, typeOf(outs[j]))
          }
        })
      }
    } catch (e) {
      // (a node whose inference failed is not remembered)
      nodes?.delete(n)
      throw toTyped(n, e)
    }
  }
}

/** Output types of a subgraph given its input types, seeing the enclosing scope's types and constants. */
export const inferSubgraphTypes = (
  sub: Graph,
  inputs: readonly (ValueType | undefined)[],
  outerTypes: ReadonlyMap<string, ValueType>,
  outerValues: ReadonlyMap<string, Tensor>,
  memo: InferMemo = newInferMemo(),
  depth = 1,
): (ValueType | undefined)[] => {
  const own = new Set(sub.inputs.map((i) => i.name))
  const free = subgraphFreeNames(sub).filter((f) => !own.has(f))
  const key = [
    sub.inputs.map((i, k) => showMaybe(inputs[k] ?? i.type)).join(";"),
    free.map((f) => `${f}:${showMaybe(outerTypes.get(f))}:${tensorId(memo, outerValues.get(f))}`).join(";"),
  ].join("|")
  let byKey = memo.results.get(sub)
  const known = byKey?.get(key)
  if (known) return [...known]
  const types = new Map(outerTypes)
  const values = new Map(outerValues)
  sub.inputs.forEach((i, k) => {
    const t = inputs[k] ?? i.type
    types.set(i.name, t)
    values.delete(i.name)
  })
  for (const [k, t] of sub.initializers) {
    types.set(k, typeOf(t))
    values.set(k, t)
  }
  inferNodes(sub, types, values, memo, depth)
  const out = sub.outputs.map((o) => types.get(o.name))
  if (!byKey) memo.results.set(sub, (byKey = new Map()))
  byKey.set(key, out)
  return [...out]
}

/** Effect form of `bindSync`. */
export const bind = (
  graph: Graph,
  shapes: ReadonlyMap<string, readonly number[]> = new Map(),
  options: { readonly requireStatic?: boolean; readonly interrupt?: Interrupt } = {},
): Effect.Effect<Graph, EvalError> =>
  Effect.try({
    try: () => bindSync(graph, shapes, options),
    catch: (e) =>
      isEvalError(e)
        ? e
        : new GraphError({ where: graph.name, reason: e instanceof Error ? e.message : String(e) }),
  })

/** Does an inferred type describe a concrete tensor? Numeric dims must match; symbolic ones match anything. */
export const typeAdmits = (t: ValueType, actual: Tensor): boolean =>
  t.dtype === actual.dtype && t.shape.length === actual.shape.length && t.shape.every((d, k) => typeof d === "string" || d === actual.shape[k])
