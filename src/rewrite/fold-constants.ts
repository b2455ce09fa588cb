// rewrite.FoldConstants: every node whose inputs are all constant is evaluated with its
// reference kernel and replaced by an initializer — shape subgraphs (Shape → Gather → Concat →
// Reshape) included, since Shape of a value with a static shape is a constant too. A size bound
// keeps huge constants (ConstantOfShape of a large shape) from being materialized needlessly.
import { resolveNode, roundNarrow, subgraphFreeNames } from "../ast/graph/evaluate.js"
import type { Graph, Node } from "../ast/graph/graph.js"
import { bindMemo, bindSync, propagatedOutputs } from "../ast/graph/infer.js"
import { runKernel } from "../ast/graph/ops/exact-int64.js"
import { sizeOf, type Tensor } from "../ast/graph/tensor.js"
import { graphPass } from "./pass.js"
import { freshNames } from "./rules.js"

export interface FoldOptions {
  /** A folded output larger than this many elements is kept only if it is no larger than its inputs. */
  readonly maxElements: number
}
export const defaultFoldOptions: FoldOptions = { maxElements: 1 << 20 }

const hasSubgraph = (n: Node) => Object.values(n.attrs).some((a) => a.kind === "graph" || a.kind === "graphs")

export const foldConstantsSync = (graph: Graph, options: FoldOptions = defaultFoldOptions): Graph => {
  // (the bind evaluates the small constants already — DenseNet-121's light model's 836
  // ConstantOfShape weights — and its memo hands them to the fold and to the bind at the end)
  const memo = bindMemo()
  const g = bindSync(graph, undefined, { memo })
  const outputs = new Set(g.outputs.map((o) => o.name))
  // the values known so far (what later nodes fold with), and the initializers of the result: a
  // folded graph output is known under its own name but stored under a fresh one (see foldInto)
  const known = new Map(g.initializers)
  const constants = new Map(g.initializers)
  const fresh = freshNames(g)
  const nodes: Node[] = []
  let changed = false
  for (const n of g.nodes) {
    const { def, attrs } = resolveNode(n)
    if (n.op === "Shape") {
      // Shape of a statically shaped value is known without its data
      const t = g.valueTypes.get(n.inputs[0])
      if (t && t.shape.every((d) => typeof d === "number")) {
        const shapeOnly: Tensor = { dtype: t.dtype, shape: t.shape as number[], data: new Float32Array(0) }
        foldInto(n, def.kernel({ node: n.name, attrs, opset: g.opset, inputs: [shapeOnly], outputs: 1, runSubgraph: () => [] }))
        continue
      }
    }
    const ins = n.inputs.map((i) => (i === "" ? undefined : known.get(i)))
    // (every op but Constant reads at least one input: a node with none is a Constant)
    if (hasSubgraph(n) || !ins.every((t, k) => t !== undefined || n.inputs[k] === "")) {
      nodes.push(n)
      continue
    }
    const inElems = ins.reduce((s, t) => s + (t ? t.data.length : 0), 0)
    // an omitted ("") output is never materialized: it has no size
    const outTypes = n.outputs.filter((o) => o !== "").map((o) => g.valueTypes.get(o))
    const outElems = outTypes.reduce((s, t) => s + (t && t.shape.every((d) => typeof d === "number") ? sizeOf(t.shape as number[]) : Infinity), 0)
    if (outElems > options.maxElements && outElems > inElems) {
      nodes.push(n)
      continue
    }
    // (int64 exact: the interpreter's kernel choice, see ops/exact-int64.ts)
    const out = propagatedOutputs(memo, n, ins) ?? runKernel(n.op, def, { node: n.name, attrs, opset: g.opset, inputs: ins, outputs: n.outputs.length, runSubgraph: () => [] }, n.domain)
    foldInto(n, out)
  }
  function foldInto(n: Node, out: readonly Tensor[]) {
    changed = true
    out.forEach(roundNarrow)
    n.outputs.forEach((o, j) => {
      if (o === "") return
      known.set(o, out[j])
      if (outputs.has(o)) {
        // a graph output keeps its name: the constant under a fresh name, then Identity
        const c = fresh(`${o}_const`)
        constants.set(c, out[j])
        nodes.push({ name: fresh(`${n.name}_folded`), op: "Identity", domain: "", inputs: [c], outputs: [o], attrs: {} })
      } else constants.set(o, out[j])
    })
  }
  if (!changed) return graph
  const live = new Set<string>()
  for (const n of nodes) {
    for (const i of n.inputs) live.add(i)
    for (const a of Object.values(n.attrs)) if (a.kind === "graph") for (const f of subgraphFreeNames(a.value)) live.add(f)
  }
  for (const o of outputs) live.add(o)
  const initializers = new Map([...constants].filter(([k]) => live.has(k)))
  return bindSync({ ...g, nodes, initializers }, undefined, { memo })
}

export const foldConstants = graphPass("rewrite.FoldConstants", 1, (g) => foldConstantsSync(g))
