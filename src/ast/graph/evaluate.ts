// The reference interpreter: the meaning of the graph IR. Runs any Graph on typed arrays, node
// by node, with each op's reference kernel. Values are dropped after their last use, so whole
// CNNs run in bounded memory.
import { Effect } from "effect"
import { decodeAttrs } from "./attrs.js"
import { roundBF16, roundF16 } from "./dtype.js"
import { checkInterrupt, GraphError, InputError, isEvalError, NodeError, UnsupportedOpError, type EvalError, type Interrupt } from "./errors.js"
import type { Graph, Node } from "./graph.js"
import { LIMITS } from "./limits.js"
import { OpError, OpUnsupported, type AnyOpDef } from "./op.js"
import { runKernel } from "./ops/exact-int64.js"
import { KNOWN_DOMAINS, lookupOp, MICROSOFT_DOMAIN, MICROSOFT_OPS } from "./ops/index.js"
import { showShape, type Tensor } from "./tensor.js"

export const DEFAULT_DOMAINS: ReadonlySet<string> = new Set(["", "ai.onnx"])

/** A node's op definition and decoded attributes, or the typed error saying why there is none. */
export const resolveNode = (n: Node): { def: AnyOpDef; attrs: unknown } => {
  const def = KNOWN_DOMAINS.has(n.domain) ? lookupOp(n.op, n.domain) : undefined
  if (!def)
    throw new UnsupportedOpError({
      node: n.name,
      op: n.op,
      domain: n.domain,
      reason: !KNOWN_DOMAINS.has(n.domain)
        ? `operator domain '${n.domain}' is not supported (only the default ONNX domain and ${MICROSOFT_DOMAIN}'s quantized ops are)`
        : n.domain === MICROSOFT_DOMAIN
          ? `${MICROSOFT_DOMAIN} operator '${n.op}' is not implemented (Tessera implements ${Object.keys(MICROSOFT_OPS).join(", ")} of that domain)`
          : `no operator '${n.op}' in Tessera's registry`,
    })
  const a = decodeAttrs(def.attrs, n.attrs)
  if (!a.ok) throw new NodeError({ node: n.name, op: n.op, reason: a.error })
  const [minIn, maxIn] = def.inputs
  if (n.inputs.length < minIn || n.inputs.length > maxIn)
    throw new NodeError({ node: n.name, op: n.op, reason: `takes ${minIn}..${maxIn} inputs, got ${n.inputs.length}` })
  const [minOut, maxOut] = def.outputs
  if (n.outputs.length < minOut || n.outputs.length > maxOut)
    throw new NodeError({ node: n.name, op: n.op, reason: `gives ${minOut}..${maxOut} outputs, ${n.outputs.length} declared` })
  return { def, attrs: a.value }
}

const resolved = new WeakMap<Node, { def: AnyOpDef; attrs: unknown }>()
const resolveCached = (n: Node) => {
  let r = resolved.get(n)
  if (!r) {
    r = resolveNode(n)
    resolved.set(n, r)
  }
  return r
}

/** Checks fed tensors against the graph's declared inputs: presence, dtype, rank, static dims. */
export const checkFeeds = (graph: Graph, feeds: ReadonlyMap<string, Tensor>): void => {
  const symbols = new Map<string, { dim: number; input: string }>()
  for (const i of graph.inputs) {
    const t = feeds.get(i.name)
    if (!t) throw new InputError({ input: i.name, reason: `missing: the model needs a ${i.type.dtype} tensor of shape ${showShape(i.type.shape)}` })
    if (t.dtype !== i.type.dtype)
      throw new InputError({ input: i.name, reason: `has dtype ${t.dtype}, the model expects ${i.type.dtype}` })
    if (i.type.shape.length !== t.shape.length)
      throw new InputError({ input: i.name, reason: `has shape ${showShape(t.shape)}, the model expects rank ${i.type.shape.length} ${showShape(i.type.shape)}` })
    i.type.shape.forEach((d, k) => {
      const got = t.shape[k]
      if (typeof d === "number") {
        if (d >= 0 && d !== got)
          throw new InputError({ input: i.name, reason: `dim ${k} is ${got}, the model expects ${d} (shape ${showShape(i.type.shape)})` })
      } else if (d !== "") {
        const prev = symbols.get(d)
        if (prev && prev.dim !== got)
          throw new InputError({ input: i.name, reason: `dim ${k} ('${d}') is ${got}, but '${d}' is ${prev.dim} in input '${prev.input}'` })
        symbols.set(d, { dim: got, input: i.name })
      }
    })
  }
  const known = new Set(graph.inputs.map((i) => i.name))
  for (const name of feeds.keys())
    if (!known.has(name) && !graph.initializers.has(name))
      throw new InputError({ input: name, reason: `the model has no such input (inputs: ${[...known].join(", ") || "none"})` })
}

/** Rounds float16/bfloat16 kernel outputs to their type (kernels compute in wider floats). */
export const roundNarrow = (t: Tensor): void => {
  if (t.dtype !== "float16" && t.dtype !== "bfloat16") return
  const r = t.dtype === "float16" ? roundF16 : roundBF16
  const d = t.data
  for (let i = 0; i < d.length; i++) d[i] = r(d[i])
}

/** What a reference kernel threw, as the typed error naming its node (anything untyped: an internal error). */
export const kernelError = (n: Node, e: unknown): EvalError => toTyped(n, e)

/** A reference kernel's failure as the typed error the evaluator gives for it (the executor's fallback groups too). */
export const toTyped = (n: Node, e: unknown): EvalError => {
  if (isEvalError(e)) return e
  if (e instanceof OpUnsupported) return new UnsupportedOpError({ node: n.name, op: n.op, domain: n.domain, reason: e.message })
  if (e instanceof OpError) return new NodeError({ node: n.name, op: n.op, reason: e.message })
  if (e instanceof RangeError) return new NodeError({ node: n.name, op: n.op, reason: e.message })
  const msg = e instanceof Error ? `${e.name}: ${e.message}` : String(e)
  return new NodeError({ node: n.name, op: n.op, reason: `internal error in the reference kernel: ${msg}` })
}

/** Scope chain lookup for subgraphs: local values first, then the enclosing graphs'. */
export type Scope = { readonly get: (name: string) => Tensor | undefined }

/** Sees every node of the top-level graph run, with its inputs and outputs (checkers, profilers). */
export type NodeObserver = (node: Node, inputs: readonly (Tensor | undefined)[], outputs: readonly Tensor[]) => void

/**
 * Runs `graph` on `feeds` (plain function; throws the typed errors of `EvalError`).
 * `outer` gives the enclosing scope when running a subgraph. Returns the graph outputs in order.
 */
/**
 * What one run may spend: the caller's stop request (checked before each node) and the steps
 * left for subgraphs (each subgraph run counts one, and each node it runs one more), shared by
 * every subgraph the run enters, however nested.
 */
export interface RunLimits {
  readonly interrupt?: Interrupt
  readonly steps: { left: number }
}

export const newRunLimits = (interrupt?: Interrupt, steps: number = LIMITS.subgraphSteps): RunLimits => ({ ...(interrupt ? { interrupt } : {}), steps: { left: steps } })

/** Charges a subgraph run to the limits: an OpError (the running node's NodeError) past them. */
const chargeSubgraph = (limits: RunLimits, g: Graph): void => {
  limits.steps.left -= 1 + g.nodes.length
  if (limits.steps.left < 0)
    throw new OpError(`its subgraphs ran past the interpreter's limit of steps (iterations and nodes: ${LIMITS.subgraphSteps.toLocaleString("en-US")} a run): a loop this long would run for hours`)
}

export const runGraph = (
  graph: Graph,
  feeds: ReadonlyMap<string, Tensor>,
  outer?: Scope,
  observe?: NodeObserver,
  limits: RunLimits = newRunLimits(),
): Tensor[] => {
  const env = new Map<string, Tensor>()
  for (const [k, v] of graph.initializers) env.set(k, v)
  for (const [k, v] of feeds) env.set(k, v)
  const lookup = (name: string): Tensor | undefined => env.get(name) ?? outer?.get(name)
  const scope: Scope = { get: lookup }

  // last use of every value, so intermediates can be dropped
  const outputs = new Set(graph.outputs.map((o) => o.name))
  const lastUse = new Map<string, number>()
  graph.nodes.forEach((n, k) => {
    for (const i of n.inputs) if (i !== "") lastUse.set(i, k)
    for (const a of Object.values(n.attrs))
      if (a.kind === "graph") for (const sub of subgraphFreeNames(a.value)) lastUse.set(sub, k)
  })

  const runSubgraph = (g: Graph, subFeeds: ReadonlyMap<string, Tensor>): readonly Tensor[] => {
    chargeSubgraph(limits, g)
    return runGraph(g, subFeeds, scope, undefined, limits)
  }

  graph.nodes.forEach((n, k) => {
    checkInterrupt(limits.interrupt, () => `node '${n.name}' (${n.op})`)
    let outs: readonly Tensor[]
    let inputs: (Tensor | undefined)[] = []
    try {
      const { def, attrs } = resolveCached(n)
      inputs = n.inputs.map((name) => {
        if (name === "") return undefined
        const t = lookup(name)
        if (!t) throw new GraphError({ where: `node '${n.name}' (${n.op})`, reason: `input '${name}' is not defined before it is used` })
        return t
      })
      outs = runKernel(n.op, def, { node: n.name, attrs, opset: graph.opset, inputs, outputs: n.outputs.length, runSubgraph }, n.domain)
    } catch (e) {
      throw toTyped(n, e)
    }
    n.outputs.forEach((name, j) => {
      if (name === "") return
      const t = outs[j]
      if (!t) throw new NodeError({ node: n.name, op: n.op, reason: `kernel gave no output ${j}` })
      // a kernel may hand back an input as its output (Identity): round a copy, never the input
      const owned = (t.dtype === "float16" || t.dtype === "bfloat16") && inputs.some((i) => i?.data === t.data) ? { ...t, data: t.data.slice() } : t
      roundNarrow(owned)
      env.set(name, owned)
    })
    if (observe) {
      try {
        observe(n, inputs, outs)
      } catch (e) {
        throw toTyped(n, e)
      }
    }
    for (const i of n.inputs) if (i !== "" && lastUse.get(i) === k && !outputs.has(i) && !graph.initializers.has(i)) env.delete(i)
  })

  return graph.outputs.map((o) => {
    const t = lookup(o.name)
    if (!t) throw new GraphError({ where: `output '${o.name}'`, reason: "is never computed" })
    return t
  })
}

const freeNamesMemo = new WeakMap<Graph, readonly string[]>()

/** A kernel's runSubgraph outside runGraph (the executor's fallback nodes): charged to `limits`. */
export const subgraphRunner =
  (scope: Scope, limits: RunLimits) =>
  (g: Graph, feeds: ReadonlyMap<string, Tensor>): readonly Tensor[] => {
    chargeSubgraph(limits, g)
    return runGraph(g, feeds, scope, undefined, limits)
  }

/** Names a subgraph reads from its enclosing scopes (graphs are immutable: computed once per graph). */
export const subgraphFreeNames = (g: Graph): string[] => {
  const known = freeNamesMemo.get(g)
  if (known) return [...known]
  const defined = new Set<string>([...g.inputs.map((i) => i.name), ...g.initializers.keys()])
  const free = new Set<string>()
  for (const n of g.nodes) {
    for (const i of n.inputs) if (i !== "" && !defined.has(i)) free.add(i)
    for (const a of Object.values(n.attrs))
      if (a.kind === "graph") for (const s of subgraphFreeNames(a.value)) if (!defined.has(s)) free.add(s)
    for (const o of n.outputs) defined.add(o)
  }
  for (const o of g.outputs) if (!defined.has(o.name)) free.add(o.name)
  const names = [...free]
  freeNamesMemo.set(g, names)
  return [...names]
}

/** Evaluates a graph on named inputs; the outputs by name. */
export const evaluate = (graph: Graph, feeds: ReadonlyMap<string, Tensor>): Effect.Effect<ReadonlyMap<string, Tensor>, EvalError> =>
  Effect.try({
    try: () => {
      checkFeeds(graph, feeds)
      const outs = runGraph(graph, feeds)
      return new Map(graph.outputs.map((o, k) => [o.name, outs[k]] as const))
    },
    catch: (e) =>
      isEvalError(e)
        ? e
        : new GraphError({ where: graph.name, reason: e instanceof Error ? e.message : String(e) }),
  })
