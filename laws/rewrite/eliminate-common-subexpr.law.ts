// rewrite.EliminateCommonSubexpr on model-like graphs full of siblings: two nodes of one op on one
// input, identical or differing in one attribute (Transpose perm, Softmax axis, LeakyRelu alpha,
// Clip bounds, Cast's type, LayerNormalization epsilon, Conv strides and pads, MaxPool kernel), both
// read downstream. Merging two that differ changes the result; leaving two identical ones is a
// missed merge.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbModelGraphCase } from "../../src/ast/graph/arbitrary-models.js"
import type { Graph } from "../../src/ast/graph/graph.js"
import type { Tensor } from "../../src/ast/graph/tensor.js"
import { pendingRecipe, scaledRows } from "../../src/ast/graph/deferred.js"
import { eliminateCommonSubexpr, eliminateCommonSubexprSync, withPassConfig } from "../../src/rewrite/index.js"
import { assertAllClose, evalGraph, lawParams } from "../support.js"
import { arbDuplicateCase, readsOf } from "./cases.js"

const cse = (g: Graph): Graph => Effect.runSync(eliminateCommonSubexpr.run(g).pipe(withPassConfig({ verify: true })))

const withSiblings = arbModelGraphCase({
  motifs: ["siblings", "conv-bn-act", "pool", "attention", "linear", "gemm", "layer-norm", "split-weights"],
  maxMotifs: 5,
})

/** A node's op, inputs and attributes (tensor attributes by their bytes) as a string. */
const keyOf = (n: Graph["nodes"][number]): string =>
  JSON.stringify([n.domain, n.op, n.inputs, n.outputs.length, Object.entries(n.attrs).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => [k, v.kind === "tensor" ? Array.from(v.value.data) : v.value])])

describe("rewrite.EliminateCommonSubexpr on siblings", () => {
  it("keeps siblings that differ in an attribute apart: evaluate(cse(g)) ≈ evaluate(g)", () => {
    fc.assert(
      fc.property(withSiblings, ({ graph, inputs }) => {
        assertAllClose(evalGraph(cse(graph), inputs), evalGraph(graph, inputs))
      }),
      lawParams(80),
    )
  })

  it("merges identical siblings: no two nodes left with the same op, inputs and attributes (graph outputs aside)", () => {
    fc.assert(
      fc.property(withSiblings, ({ graph }) => {
        const after = cse(graph)
        const outputs = new Set(after.outputs.map((o) => o.name))
        const seen = new Map<string, string>()
        for (const n of after.nodes) {
          if (n.outputs.some((o) => outputs.has(o))) continue
          const key = keyOf(n)
          const prev = seen.get(key)
          if (prev) throw new Error(`${prev} and ${n.name} (${n.op}) compute the same value and were not merged`)
          seen.set(key, n.name)
        }
      }),
      lawParams(80),
    )
  })
})

// rewrite.EliminateCommonSubexpr against an oracle of what a merge may be, on cases with
// duplicates of every kind (cases.ts): copies of nodes (read downstream, graph outputs, captured by
// an If's branch, in another domain), Dropouts with different omitted outputs, Constant nodes equal
// or differing in one element, copies of initializers (equal, differing in the last element,
// captured, graph outputs) and their readers, identical Ifs.
const duplicates = arbDuplicateCase()

/** A node's domain, op, inputs, which outputs are named and exact attributes (tensors by their bytes; subgraphs never equal). */
const exactKey = (n: Graph["nodes"][number], rename: ReadonlyMap<string, string>): string | undefined => {
  if (Object.values(n.attrs).some((a) => a.kind === "graph" || a.kind === "graphs")) return undefined
  const attrs = Object.entries(n.attrs)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => [k, v.kind, v.kind === "tensor" ? [v.value.dtype, v.value.shape, Array.from(v.value.data)] : v.kind === "tensors" ? v.value.map((t) => [t.dtype, t.shape, Array.from(t.data)]) : v.value])
  return JSON.stringify([n.domain, n.op, n.inputs.map((i) => rename.get(i) ?? i), n.outputs.map((o) => o !== ""), attrs])
}
const sameTensor = (a: Tensor, b: Tensor) => a.dtype === b.dtype && a.shape.join() === b.shape.join() && a.data.length === b.data.length && a.data.every((x, i) => Object.is(x, b.data[i]))

/**
 * Throws unless `after` is `before` with merges only: every initializer or node it dropped has an
 * earlier survivor with the same bytes / domain, op, (renamed) inputs, named outputs and exact
 * attributes, and is neither a graph output nor captured by a subgraph; the survivors read through
 * the renames; and nothing mergeable is left.
 */
const checkMerges = (before: Graph, after: Graph): void => {
  const pinned = new Set([...before.outputs.map((o) => o.name), ...before.nodes.flatMap((n) => readsOf(n).filter((r) => !n.inputs.includes(r)))])
  const rename = new Map<string, string>()
  const kept: [string, Tensor][] = []
  for (const [k, t] of before.initializers) {
    if (after.initializers.has(k)) {
      if (after.initializers.get(k) !== t) throw new Error(`initializer ${k} changed`)
      const twin = kept.find(([, u]) => sameTensor(t, u))
      if (twin && !pinned.has(k)) throw new Error(`initializers ${twin[0]} and ${k} hold the same bytes and were not merged`)
      kept.push([k, t])
      continue
    }
    if (pinned.has(k)) throw new Error(`initializer ${k} is a graph output or captured, and was merged`)
    const twin = kept.find(([, u]) => sameTensor(t, u))
    if (!twin) throw new Error(`initializer ${k} was dropped with no equal one kept`)
    rename.set(k, twin[0])
  }
  const byName = new Map(after.nodes.map((n) => [n.name, n]))
  const seen = new Map<string, Graph["nodes"][number]>()
  const order: string[] = []
  for (const n of before.nodes) {
    const key = exactKey(n, rename)
    const m = byName.get(n.name)
    if (m) {
      order.push(n.name)
      expect(m.inputs).toEqual(n.inputs.map((i) => rename.get(i) ?? i))
      if (key !== undefined && seen.has(key) && !n.outputs.some((o) => pinned.has(o))) throw new Error(`${seen.get(key)!.name} and ${n.name} (${n.op}) are equal and were not merged`)
      if (key !== undefined && !seen.has(key)) seen.set(key, n)
      continue
    }
    if (n.outputs.some((o) => pinned.has(o))) throw new Error(`${n.name} (${n.op}) has an output that is a graph output or captured, and was merged`)
    const survivor = key === undefined ? undefined : seen.get(key)
    if (!survivor) throw new Error(`${n.name} (${n.op}) was dropped with no equal node before it`)
    n.outputs.forEach((o, j) => o !== "" && rename.set(o, survivor.outputs[j]))
  }
  expect(after.nodes.map((n) => n.name)).toEqual(order)
  expect(after.outputs).toEqual(before.outputs)
}

describe("rewrite.EliminateCommonSubexpr: merges only what is equal, everything that is", () => {
  it("drops only nodes and initializers equal to an earlier one (never graph outputs, captured names, subgraphs), leaves none; evaluates as before", () => {
    let merged = 0
    fc.assert(
      fc.property(duplicates, ({ graph, inputs }) => {
        const after = eliminateCommonSubexprSync(graph)
        checkMerges(graph, after)
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs))
        merged += graph.nodes.length - after.nodes.length + graph.initializers.size - after.initializers.size
      }),
      lawParams(120),
    )
    expect(merged).toBeGreaterThan(100)
  })

  it("merges deferred weights (a pending BatchNorm fold, compared a chunk at a time) exactly as their computed copies, without computing them", () => {
    fc.assert(
      fc.property(duplicates, ({ graph }) => {
        // each float initializer as a deferred twin: its rows scaled by 1 (the same values, not yet computed)
        const twins = new Map([...graph.initializers].map(([k, t]) => [k, (t.dtype === "float32" || t.dtype === "float64") && t.shape.length > 0 && t.shape[0] > 0 ? scaledRows(t, new Float64Array(t.shape[0]).fill(1)) : t] as const))
        const deferredGraph = { ...graph, initializers: twins }
        const [plain, viaTwins] = [eliminateCommonSubexprSync(graph), eliminateCommonSubexprSync(deferredGraph)]
        expect([...viaTwins.initializers.keys()]).toEqual([...plain.initializers.keys()])
        expect(viaTwins.nodes.map((n) => [n.name, n.inputs])).toEqual(plain.nodes.map((n) => [n.name, n.inputs]))
        for (const t of viaTwins.initializers.values()) if (t !== graph.initializers.get([...twins].find(([, u]) => u === t)?.[0] ?? "")) expect(pendingRecipe(t)).toBeDefined()
      }),
      lawParams(80),
    )
  })

  it("gives back its input itself when nothing merges: a second run is the identity", () => {
    fc.assert(
      fc.property(duplicates, ({ graph }) => {
        const once = eliminateCommonSubexprSync(graph)
        expect(eliminateCommonSubexprSync(once)).toBe(once)
      }),
      lawParams(60),
    )
  })
})
