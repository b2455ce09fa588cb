// rewrite.FoldConstants on multi-output ops: Split (2 or 3 parts, QKV-style fused weights), TopK
// (values and indices), Dropout (its mask) and LayerNormalization (its Mean and InvStdDev) on
// constants, with later nodes reading their second and third outputs — each output folds into its
// own constant — and the same ops on activations, which stay.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbModelGraphCase } from "../../src/ast/graph/arbitrary-models.js"
import { structurallyEqual, type Graph } from "../../src/ast/graph/graph.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import { defaultFoldOptions, foldConstantsSync } from "../../src/rewrite/fold-constants.js"
import { eliminateDeadCodeSync, foldConstants, withPassConfig } from "../../src/rewrite/index.js"
import { assertAllClose, evalGraph, lawParams } from "../support.js"
import { arbConstantCase, readsOf } from "./cases.js"

const fold = (g: Graph): Graph => Effect.runSync(foldConstants.run(g).pipe(withPassConfig({ verify: true })))

const multiOutput = arbModelGraphCase({
  motifs: ["split-weights", "topk-constant", "dropout-mask", "layer-norm-stats", "split", "topk", "conv-bn-act", "linear", "gemm", "pool"],
  maxMotifs: 5,
})

const MULTI = new Set(["Split", "TopK", "Dropout", "LayerNormalization"])

describe("rewrite.FoldConstants on multi-output ops", () => {
  it("folds each output of Split, TopK, Dropout and LayerNormalization on constants into its own value: evaluate(fold(g)) ≈ evaluate(g)", () => {
    fc.assert(
      fc.property(multiOutput, ({ graph, inputs }) => {
        assertAllClose(evalGraph(fold(graph), inputs), evalGraph(graph, inputs))
      }),
      lawParams(80),
    )
  })

  it("leaves no node whose inputs are all constant, and every multi-output node it keeps reads an activation", () => {
    let folded = 0
    fc.assert(
      fc.property(multiOutput, ({ graph }) => {
        const after = fold(graph)
        for (const n of after.nodes) {
          const constant = n.inputs.every((i) => i === "" || after.initializers.has(i))
          // an Identity that keeps a folded graph output's name is all that may read constants only
          if (constant && n.op !== "Identity") throw new Error(`${n.name} (${n.op}) reads only constants and was not folded`)
        }
        folded += graph.nodes.filter((n) => MULTI.has(n.op) && n.outputs.length > 1).length - after.nodes.filter((n) => MULTI.has(n.op) && n.outputs.length > 1).length
      }),
      lawParams(80),
    )
    // the cases do hold multi-output ops on constants
    expect(folded).toBeGreaterThan(20)
  })
})

// rewrite.FoldConstants' promise on constant islands (cases.ts: chains over initializers and
// Constant nodes, Expand and ConstantOfShape, Split and Dropout with an omitted output, Shape of
// activations, an If capturing a folded value, dead code) under size bounds at and around the
// islands' sizes: no node is left whose inputs are all constant unless its outputs exceed the
// bound and its inputs (or it holds a subgraph, or it keeps a graph output's name), none is folded
// that does, no Shape of a static shape is left, no initializer is left that nothing reads, and
// the result evaluates as before.
const BOUNDS = [defaultFoldOptions.maxElements, 1, 2, 4, 6, 8, 12, 16, 24]
const islands = fc.tuple(arbConstantCase(), fc.constantFrom(...BOUNDS))

const isStatic = (t: { readonly shape: readonly (number | string)[] } | undefined): boolean => !!t && t.shape.every((d) => typeof d === "number")

/**
 * What `after` (= foldConstants(before, { maxElements })) left that it must not: a Shape of a
 * static shape, an initializer nothing reads (with `unread`), a node whose inputs are all constant (an Identity
 * that keeps a folded graph output's name aside, with `keepers`) unless it holds a subgraph or
 * its outputs exceed both the bound and its inputs.
 */
const leftToFold = (after: Graph, maxElements: number, { keepers = true, unread = true } = {}): string[] => {
  const outputs = new Set(after.outputs.map((o) => o.name))
  const elems = (v: string) => {
    const t = after.valueTypes.get(v)
    return t && isStatic(t) ? (t.shape as number[]).reduce((a, b) => a * b, 1) : Infinity
  }
  const reads = new Set(after.nodes.flatMap(readsOf))
  // a folded graph output: a constant under its own name too
  const kept = new Map(after.nodes.filter((n) => n.op === "Identity" && outputs.has(n.outputs[0]) && after.initializers.has(n.inputs[0])).map((n) => [n.outputs[0], after.initializers.get(n.inputs[0])!]))
  const constant = (v: string) => after.initializers.get(v) ?? kept.get(v)
  const bad: string[] = []
  if (unread) for (const [k] of after.initializers) if (!reads.has(k) && !outputs.has(k)) bad.push(`initializer ${k} is read by nothing`)
  for (const n of after.nodes) {
    if (n.op === "Shape" && isStatic(after.valueTypes.get(n.inputs[0]))) bad.push(`${n.name}: Shape of a static shape is left`)
    if (!n.inputs.every((i) => i === "" || constant(i))) continue
    if (keepers && kept.has(n.outputs[0])) continue
    if (Object.values(n.attrs).some((a) => a.kind === "graph" || a.kind === "graphs")) continue
    const out = n.outputs.filter((o) => o !== "").reduce((s, o) => s + elems(o), 0)
    const ins = n.inputs.reduce((s, i) => s + (i === "" ? 0 : constant(i)!.data.length), 0)
    if (!(out > maxElements && out > ins)) bad.push(`${n.name} (${n.op}) reads only constants, ${out} elements out of ${ins} under a bound of ${maxElements}, and was not folded`)
  }
  return bad
}

/**
 * What `after` folded that the bound keeps: a new constant (or the constant behind a folded graph
 * output) whose node in `before` writes more than `maxElements` elements and more than it reads
 * (Shape aside: it reads no data).
 */
const foldedOverBound = (before: Graph, after: Graph, maxElements: number): string[] => {
  const b = bindSync(before)
  const producer = new Map(b.nodes.flatMap((n) => n.outputs.map((o) => [o, n] as const)))
  const elems = (v: string) => b.initializers.get(v)?.data.length ?? (b.valueTypes.get(v)!.shape as number[]).reduce((x, y) => x * y, 1)
  const keeperOf = new Map(after.nodes.filter((n) => n.op === "Identity").map((n) => [n.inputs[0], n.outputs[0]]))
  const bad: string[] = []
  for (const k of after.initializers.keys()) {
    if (b.initializers.has(k)) continue
    const n = producer.get(keeperOf.get(k) ?? k)
    if (!n || n.op === "Shape") continue
    const out = n.outputs.filter((o) => o !== "").reduce((s, o) => s + elems(o), 0)
    const ins = n.inputs.filter((i) => i !== "").reduce((s, i) => s + elems(i), 0)
    if (out > maxElements && out > ins) bad.push(`${n.name} (${n.op}) writes ${out} elements from ${ins} over a bound of ${maxElements}, and was folded`)
  }
  return bad
}

describe("rewrite.FoldConstants on constant islands, under size bounds", () => {
  it("leaves only what the size bound keeps, no Shape of a static shape, no unread initializer; evaluates as before", () => {
    let folded = 0
    let kept = 0
    fc.assert(
      fc.property(islands, ([{ graph, inputs }, maxElements]) => {
        const after = foldConstantsSync(graph, { maxElements })
        // (a graph it leaves alone keeps its initializers, read or not)
        expect(leftToFold(after, maxElements, { unread: after !== graph })).toEqual([])
        expect(foldedOverBound(graph, after, maxElements)).toEqual([])
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs))
        folded += graph.nodes.length - after.nodes.length
        kept += after.nodes.filter((n) => n.inputs.length > 0 && n.inputs.every((i) => i === "" || after.initializers.has(i)) && n.op !== "Identity" && n.op !== "If").length
      }),
      lawParams(120),
    )
    // the cases fold much, and keep some nodes for their size
    expect(folded).toBeGreaterThan(200)
    expect(kept).toBeGreaterThan(10)
  })

  it("is idempotent (up to names) under each bound, and gives back its input itself when nothing folds", () => {
    let unchanged = 0
    fc.assert(
      fc.property(islands, ([{ graph }, maxElements]) => {
        const once = foldConstantsSync(graph, { maxElements })
        const twice = foldConstantsSync(once, { maxElements })
        if (!structurallyEqual(twice, once)) throw new Error("a second run changed the graph")
        // without the Identities that keep folded outputs' names, nothing may be left to fold
        const settled = eliminateDeadCodeSync({ ...once, outputs: once.outputs.filter((o) => !once.nodes.some((n) => n.op === "Identity" && n.outputs[0] === o.name && once.initializers.has(n.inputs[0]))) })
        if (leftToFold(settled, maxElements, { keepers: false }).length > 0) return
        unchanged += 1
        expect(foldConstantsSync(settled, { maxElements })).toBe(settled)
      }),
      lawParams(60),
    )
    expect(unchanged).toBeGreaterThan(20)
  })
})
