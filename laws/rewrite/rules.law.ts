// The rule engine (src/rewrite/rules.ts) on its own, with rules written for the law: what
// `rewriteToFixedPoint` promises any rule set, whatever the rules and the graph's names are.
//
// - `freshNames(g)` avoids every name of g — its inputs, initializers, node names, node outputs,
//   and those of its subgraphs — and never gives one name twice.
// - The rules' view of the graph (RuleCtx) answers for values: an omitted ("") name has no producer
//   and no consumers.
// - A sweep puts each replacement in place of its node: the values a rule says now hold the node's
//   outputs are read instead, downstream; a graph output keeps its name; an output the rule leaves
//   out (a shorter `outputs`) or names itself keeps its value; an omitted ("") output is no value,
//   even when the rule returns one for it (a later omitted input must stay omitted); the graph
//   gets the replacements' constants and no other initializer, and every original initializer
//   stays as it was. So when the rules keep meaning, the result evaluates as the input did, each
//   value is written once, and the report counts each rule's firings.
//
// The cases are chains over one activation (Neg, Relu, Add of a constant, Clip without its lower
// bound, Split in two with its second output omitted, read, or a graph output, Concat back), whose
// inputs and initializers are named what the law's rules ask `fresh` for (`v3_zero`, `v3_neg_1`):
// a fresh name that collides overwrites a constant or writes a value twice.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attr } from "../../src/ast/graph/attrs.js"
import { prng } from "../../src/ast/graph/arbitrary.js"
import { makeGraph, type Graph, type Node, type ValueInfo } from "../../src/ast/graph/graph.js"
import { tensor, type Tensor } from "../../src/ast/graph/tensor.js"
import { freshNames, rewriteToFixedPoint, type Rule, type RuleCtx } from "../../src/rewrite/rules.js"
import { assertAllClose, evalGraph, lawParams } from "../support.js"
import { arbDeadCodeCase } from "./cases.js"

/** Every name a graph and its subgraphs use: inputs, initializers, node names and outputs. */
const namesOf = (g: Graph, into = new Set<string>()): Set<string> => {
  for (const i of g.inputs) into.add(i.name)
  for (const k of g.initializers.keys()) into.add(k)
  for (const n of g.nodes) {
    into.add(n.name)
    for (const o of n.outputs) into.add(o)
    for (const a of Object.values(n.attrs)) if (a.kind === "graph") namesOf(a.value, into)
  }
  into.delete("")
  return into
}

describe("rewrite rule engine: freshNames", () => {
  it("avoids every name of the graph, its subgraphs' included, and never gives a name twice", () => {
    let subgraphNames = 0
    fc.assert(
      fc.property(arbDeadCodeCase(), fc.integer({ min: 1, max: 0x7fffffff }), ({ graph }, seed) => {
        const rng = prng(seed)
        const names = namesOf(graph)
        const outer = new Set([...graph.inputs.map((i) => i.name), ...graph.initializers.keys(), ...graph.nodes.flatMap((n) => [n.name, ...n.outputs])])
        subgraphNames += [...names].filter((x) => !outer.has(x)).length
        const fresh = freshNames(graph)
        // every name of the graph as a base, names it does not have, and some bases twice (the second call must differ)
        const free = Array.from({ length: 3 }, (_, k) => `${rng.pick([...names])}_free${k}`)
        const bases = [...names, ...free, ...Array.from({ length: 8 }, () => rng.pick([...names, ...free]))]
        const given = new Set<string>()
        for (const base of bases) {
          const f = fresh(base)
          expect(f.startsWith(base)).toBe(true)
          expect(names.has(f)).toBe(false)
          expect(given.has(f)).toBe(false)
          given.add(f)
        }
      }),
      lawParams(60),
    )
    // the cases have names only subgraphs use (If branches)
    expect(subgraphNames).toBeGreaterThan(30)
  })
})

// ---------------------------------------------------------------------------------------------
// Chains whose names are the names the rules below ask for.

type Step = "neg" | "relu" | "add" | "clip" | "split-omitted" | "split-read" | "split-output"

interface ChainCase {
  readonly graph: Graph
  readonly inputs: ReadonlyMap<string, Tensor>
}

const SHAPE = [2, 4]
const f32 = (shape: number[]) => ({ dtype: "float32" as const, shape })
const randomTensor = (rng: ReturnType<typeof prng>, shape: number[]) =>
  tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-2, 2)))

const buildChain = (steps: readonly Step[], seed: number): ChainCase => {
  const rng = prng(seed)
  // the names the rules will ask fresh() for, taken by inputs and initializers first
  const traps = steps.flatMap((step, i) =>
    step === "neg" ? [`v${i + 1}_zero`, `v${i + 1}_neg`, `n${i}_sub`, `v${i + 1}_neg_1`] : step.startsWith("split") ? [`n${i}_re`, `v${i + 1}_a_neg`, `v${i + 1}_a_zero`, `n${i}_re_1`] : [],
  )
  for (let i = traps.length - 1; i > 0; i--) {
    const j = rng.int(0, i)
    ;[traps[i], traps[j]] = [traps[j], traps[i]]
  }
  let k = 0
  const trap = () => traps.pop() ?? `c${k++}`
  const input = rng.next() < 0.5 ? trap() : "x"
  const initializers = new Map<string, Tensor>()
  const constant = (t: Tensor) => {
    const name = trap()
    initializers.set(name, t)
    return name
  }
  const nodes: Node[] = []
  const outputs: ValueInfo[] = []
  // initializers nothing reads, named like what the rules will make
  for (let u = rng.int(0, 3); u > 0; u--) constant(randomTensor(rng, [1]))
  let v = input
  steps.forEach((step, i) => {
    const y = `v${i + 1}`
    const add = (op: string, inputs: string[], outs: string[], attrs: Node["attrs"] = {}) => nodes.push({ name: `n${i}`, op, domain: "", inputs, outputs: outs, attrs })
    switch (step) {
      case "neg":
        add("Neg", [v], [y])
        break
      case "relu":
        add("Relu", [v], [y])
        break
      case "add":
        add("Add", [v, constant(randomTensor(rng, [4]))], [y])
        break
      case "clip":
        add("Clip", [v, "", constant(tensor("float32", [], Float32Array.of(rng.float(0, 1.5))))], [y])
        break
      default: {
        const [a, b] = [`${y}_a`, step === "split-omitted" ? "" : `${y}_b`]
        add("Split", [v], [a, b], { axis: attr.int(1) })
        nodes.push({ name: `n${i}_cat`, op: "Concat", domain: "", inputs: [a, b === "" ? a : b], outputs: [y], attrs: { axis: attr.int(1) } })
        if (step === "split-output") outputs.push({ name: b, type: f32([2, 2]) })
      }
    }
    if (i + 1 < steps.length && rng.next() < 0.3) outputs.push({ name: y, type: f32(SHAPE) })
    v = y
  })
  outputs.push({ name: v, type: f32(SHAPE) })
  const graph = makeGraph({ opset: 13, inputs: [{ name: input, type: f32(SHAPE) }], outputs, initializers, nodes })
  return { graph, inputs: new Map([[input, randomTensor(rng, SHAPE)]]) }
}

const arbChain: fc.Arbitrary<ChainCase> = fc
  .tuple(fc.array(fc.constantFrom<Step>("neg", "relu", "add", "clip", "split-omitted", "split-read", "split-output"), { minLength: 1, maxLength: 10 }), fc.integer({ min: 1, max: 0x7fffffff }))
  .map(([steps, seed]) => buildChain(steps, seed))

/** `ctx` whose fresh() counts the names it could not give as asked. */
const counting = (ctx: RuleCtx, stepped: { count: number }): RuleCtx => ({
  ...ctx,
  fresh: (base) => {
    const f = ctx.fresh(base)
    if (f !== base) stepped.count++
    return f
  },
})

/**
 * Rules that keep meaning, and record the initializers they add: Neg(x) → Sub(0, x) (a new value
 * and constant), and Split(x) → Split(x, sizes) with new names for its outputs — a value for an
 * omitted output too; a graph output either left out of `outputs` or named itself, and written by
 * the new Split under its own name; and Concat along axis 1 → Concat along axis -1 (rank 2), with
 * no constants.
 */
const lawRules = (added: Set<string>, stepped: { count: number }, mode: (n: Node) => "leave-out" | "name-itself"): Rule[] => [
  {
    name: "neg-to-sub",
    apply: (n, ctx0) => {
      if (n.op !== "Neg") return undefined
      const ctx = counting(ctx0, stepped)
      const zero = ctx.fresh(`${n.outputs[0]}_zero`)
      const y = ctx.fresh(`${n.outputs[0]}_neg`)
      added.add(zero)
      return {
        nodes: [{ name: ctx.fresh(`${n.name}_sub`), op: "Sub", domain: "", inputs: [zero, n.inputs[0]], outputs: [y], attrs: {} }],
        outputs: [y],
        constants: new Map([[zero, tensor("float32", [], Float32Array.of(0))]]),
      }
    },
  },
  {
    name: "split-sizes",
    apply: (n, ctx0) => {
      if (n.op !== "Split" || n.inputs.length !== 1) return undefined
      const ctx = counting(ctx0, stepped)
      const sizes = ctx.fresh(`${n.name}_re`)
      added.add(sizes)
      const [a, b] = n.outputs
      const a2 = ctx.fresh(`${a}_neg`)
      const kept = ctx.isOutput(b)
      const b2 = kept ? b : ctx.fresh(`${a}_zero`)
      return {
        nodes: [{ ...n, name: ctx.fresh(`${n.name}_re`), inputs: [n.inputs[0], sizes], outputs: [a2, b2] }],
        outputs: kept && mode(n) === "leave-out" ? [a2] : [a2, b2],
        constants: new Map([[sizes, tensor("int64", [2], Float64Array.of(2, 2))]]),
      }
    },
  },
  {
    name: "concat-last-axis",
    apply: (n, ctx) => {
      if (n.op !== "Concat" || n.attrs.axis?.value !== 1) return undefined
      const y = ctx.fresh(`${n.outputs[0]}_neg`)
      return { nodes: [{ ...n, name: ctx.fresh(`${n.name}_re`), outputs: [y], attrs: { axis: attr.int(-1) } }], outputs: [y] }
    },
  },
]

/**
 * A rule that never fires and checks what `ctx` says of the node's inputs and outputs: an omitted
 * name ("") is no value (no producer, no consumers); a value's producer writes it and its
 * consumers read it.
 */
const probe = (wrong: string[]): Rule => ({
  name: "probe",
  apply: (n, ctx) => {
    const say = (why: string) => wrong.push(`${n.name}: ${why}`)
    if (ctx.producer("") !== undefined) say("\"\" has a producer")
    if (ctx.consumers("").length > 0) say("\"\" has consumers")
    for (const v of [...n.inputs, ...n.outputs]) {
      if (v === "") continue
      const p = ctx.producer(v)
      if (p && !p.outputs.includes(v)) say(`the producer of ${v} does not write it`)
      for (const c of ctx.consumers(v)) if (!c.inputs.includes(v)) say(`a consumer of ${v} does not read it`)
    }
    return undefined
  },
})

describe("rewrite rule engine: rewriteToFixedPoint", () => {
  it("puts each replacement in place of its node: meaning kept, values written once, graph outputs and omitted names kept, only the rules' constants added", () => {
    const seen = { keptOutput: 0, omittedRead: 0, collided: 0 }
    fc.assert(
      fc.property(arbChain, fc.boolean(), ({ graph, inputs }, leaveOut) => {
        const added = new Set<string>()
        const stepped = { count: 0 }
        const wrong: string[] = []
        const report = rewriteToFixedPoint(graph, [probe(wrong), ...lawRules(added, stepped, () => (leaveOut ? "leave-out" : "name-itself"))])
        expect(wrong).toEqual([])
        const after = report.graph
        expect(report.stop).toBe("Saturated")
        // every Neg and one-input Split rewritten, each once
        const count = (g: Graph, p: (n: Node) => boolean) => g.nodes.filter(p).length
        const negs = count(graph, (n) => n.op === "Neg")
        const splits = count(graph, (n) => n.op === "Split")
        expect(count(after, (n) => n.op === "Neg" || (n.op === "Split" && n.inputs.length === 1))).toBe(0)
        expect(report.fired.get("neg-to-sub") ?? 0).toBe(negs)
        expect(report.fired.get("split-sizes") ?? 0).toBe(splits)
        expect(report.fired.get("concat-last-axis") ?? 0).toBe(splits)
        // each value written once, by a node or as an input or initializer; every read defined
        const written = [...after.inputs.map((i) => i.name), ...after.initializers.keys(), ...after.nodes.flatMap((n) => n.outputs.filter((o) => o !== ""))]
        expect(new Set(written).size).toBe(written.length)
        const defined = new Set(written)
        for (const n of after.nodes) for (const i of n.inputs) if (i !== "") expect(defined.has(i)).toBe(true)
        // omitted inputs stay omitted
        expect(count(after, (n) => n.op === "Clip" && n.inputs[1] === "")).toBe(count(graph, (n) => n.op === "Clip"))
        // the original initializers as they were, and only the rules' constants besides
        for (const [k, t] of graph.initializers) expect(after.initializers.get(k)).toBe(t)
        for (const k of after.initializers.keys()) expect(graph.initializers.has(k) || added.has(k)).toBe(true)
        expect(after.outputs.map((o) => o.name)).toEqual(graph.outputs.map((o) => o.name))
        assertAllClose(evalGraph(after, inputs), evalGraph(graph, inputs))
        if (graph.nodes.some((n) => n.op === "Split" && graph.outputs.some((o) => o.name === n.outputs[1]))) seen.keptOutput++
        if (graph.nodes.some((n) => n.op === "Split" && n.outputs[1] === "") && graph.nodes.some((n) => n.op === "Clip")) seen.omittedRead++
        if (stepped.count > 0) seen.collided++
      }),
      lawParams(150),
    )
    // the cases reach what the law is for: a Split writing a graph output, an omitted output
    // before an omitted input, and fresh names that had to step past a taken one
    expect(seen.keptOutput).toBeGreaterThan(20)
    expect(seen.omittedRead).toBeGreaterThan(20)
    expect(seen.collided).toBeGreaterThan(20)
  })
})
