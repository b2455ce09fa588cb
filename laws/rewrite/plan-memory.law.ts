// rewrite.PlanMemory's promises beyond "no two live values share a block" (structure.law.ts), under
// alignments 1 to 128 and match ranges 1 to 16, fused, one group per node and random runs of nodes: every value's block
// size is its byte size rounded up to the alignment; a block is as large as the largest value it
// holds, and the totals are the sums of blocks and of values; no block is made while a free one
// could take the value, a free block taken is the smallest that fits (else the largest within the
// match range, grown); an elementwise or broadcast group writes in place over an input of its type
// that dies there whenever one still holds its block; and at no group do the live values need more
// than the plan reserves.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbGraphCase } from "../../src/ast/graph/arbitrary.js"
import { BYTES, type DType } from "../../src/ast/graph/dtype.js"
import { makeGraph, type Graph, type ValueType } from "../../src/ast/graph/graph.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import type { PatternKind } from "../../src/ast/graph/op.js"
import { defaultPasses, fuseOpsSync, planMemory, planMemoryPass, singletonGroups, type FusedGraph } from "../../src/rewrite/index.js"
import { defaultPlanOptions, type MemoryPlan, type PlanOptions, type ValueAssignment } from "../../src/rewrite/plan-memory.js"
import { lawParams } from "../support.js"
import { readsOf } from "./cases.js"

const optimized = (g: Graph) => Effect.runSync(defaultPasses.run(g))

/** How the nodes are grouped: by FuseOps, one per node, or in random runs of consecutive nodes with random kinds. */
type Grouping = "fused" | "single" | { readonly cuts: readonly number[]; readonly kinds: readonly PatternKind[] }

const KINDS: readonly PatternKind[] = ["elementwise", "broadcast", "injective", "reduction", "out-elementwise-fusable", "opaque"]

/** Diamonds of elementwise ops between ops that change sizes: many values of one type dying at once, and of several sizes. */
const PLAN_OPS = ["Relu", "Sigmoid", "Tanh", "Neg", "Add", "Mul", "Sub", "Conv", "MaxPool", "GlobalAveragePool", "Concat", "Reshape"]

const cases = fc.tuple(
  fc.oneof(arbGraphCase({ maxNodes: 16, modelShare: 0.3, models: { maxMotifs: 4 } }), arbGraphCase({ maxNodes: 24, ops: PLAN_OPS })),
  fc.oneof(
    fc.constantFrom<Grouping>("fused", "single"),
    fc.record({ cuts: fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 3, maxLength: 16 }), kinds: fc.array(fc.constantFrom(...KINDS), { minLength: 16, maxLength: 16 }) }),
  ),
  fc.record({ alignment: fc.constantFrom(1, 4, 16, 64, 128), matchRange: fc.constantFrom(1, 2, 4, 16) }),
)

/**
 * A schedule alone, as the planner sees it: groups in order with random kinds, each writing one to
 * three values of sizes whose ratios are powers of two (so a free block is often exactly the match
 * range short of a request) or of a symbolic size, and reading values written before it; some
 * values are graph outputs.
 */
const arbSchedule: fc.Arbitrary<FusedGraph> = fc
  .array(
    fc.record({
      kind: fc.constantFrom(...KINDS),
      outputs: fc.array(fc.record({ elems: fc.constantFrom<number | string>(1, 16, 32, 64, 128, 256, 1024, "N"), dtype: fc.constantFrom<DType>("float32", "float32", "int8", "float64"), output: fc.boolean() }), { minLength: 1, maxLength: 3 }),
      reads: fc.array(fc.nat(), { maxLength: 3 }),
    }),
    { minLength: 2, maxLength: 20 },
  )
  .map((specs) => {
    const valueTypes = new Map<string, ValueType>([["x", { dtype: "float32", shape: [4] }]])
    const made: string[] = ["x"]
    const outputs: string[] = []
    const groups = specs.map((spec, id) => {
      const inputs = [...new Set(spec.reads.map((r) => made[r % made.length]))]
      const outs = spec.outputs.map((o, j) => {
        const name = `g${id}_${j}`
        valueTypes.set(name, { dtype: o.dtype, shape: [o.elems] })
        if (o.output && (id + j) % 3 === 0) outputs.push(name)
        return name
      })
      made.push(...outs)
      return { id, nodes: [`n${id}`], ops: ["Opaque"], kind: spec.kind, anchor: `n${id}`, inputs: inputs.length ? inputs : [made[made.length - outs.length - 1]], outputs: outs }
    })
    const graph = makeGraph({ opset: 18, inputs: [{ name: "x", type: valueTypes.get("x")! }], outputs: outputs.map((o) => ({ name: o, type: valueTypes.get(o)! })), nodes: [], valueTypes })
    return { graph, groups }
  })

/**
 * Runs of consecutive nodes (convex: a path that leaves a run cannot come back into it) as groups of
 * the given kinds, reading what their nodes read from outside and writing what is read after them
 * or is a graph output.
 */
const runsOf = (graph: Graph, cuts: readonly number[], kinds: readonly PatternKind[]): FusedGraph => {
  const at = [...new Set(cuts.map((c) => c % graph.nodes.length))].filter((c) => c > 0).sort((a, b) => a - b)
  const bounds = [0, ...at, graph.nodes.length].filter((b, i, all) => i === 0 || b > all[i - 1])
  const outputs = new Set(graph.outputs.map((o) => o.name))
  const runs = bounds.slice(1).map((end, k) => graph.nodes.slice(bounds[k], end))
  return {
    graph,
    groups: runs.map((run, id) => {
      const made = new Set(run.flatMap((n) => n.outputs))
      const later = new Set(runs.slice(id + 1).flat().flatMap(readsOf))
      return {
        id,
        nodes: run.map((n) => n.name),
        ops: run.map((n) => n.op),
        kind: kinds[id % kinds.length],
        anchor: run[run.length - 1].name,
        inputs: [...new Set(run.flatMap(readsOf))].filter((v) => !made.has(v)),
        outputs: [...made].filter((o) => o !== "" && (later.has(o) || outputs.has(o))),
      }
    }),
  }
}

const fusedOf = (graph: Graph, grouping: Grouping): FusedGraph =>
  grouping === "fused" ? fuseOpsSync(optimized(graph)) : grouping === "single" ? singletonGroups(optimized(graph)) : runsOf(bindSync(graph), grouping.cuts, grouping.kinds)

const sameType = (g: Graph, a: string, b: string): boolean => {
  const [x, y] = [g.valueTypes.get(a), g.valueTypes.get(b)]
  return !!x && !!y && x.dtype === y.dtype && x.shape.length === y.shape.length && x.shape.every((d, k) => d === y.shape[k])
}

/** Throws unless block sizes, block bytes and totals are as promised (a value of symbolic size gets none: it is allocated when it runs). */
const checkSizes = (f: FusedGraph, plan: MemoryPlan, options: PlanOptions): void => {
  for (const v of plan.values) {
    const t = f.graph.valueTypes.get(v.value)!
    expect(t.shape.every((d) => typeof d === "number")).toBe(true)
    const raw = (t.shape as number[]).reduce((a, b) => a * b, 1) * BYTES[t.dtype]
    expect({ value: v.value, bytes: v.bytes }).toEqual({ value: v.value, bytes: Math.max(options.alignment, Math.ceil(raw / options.alignment) * options.alignment) })
  }
  plan.storages.forEach((s, id) => {
    expect(s.id).toBe(id)
    const held = plan.values.filter((v) => v.storage === id)
    expect(held.length).toBeGreaterThan(0)
    expect(s.bytes).toBe(Math.max(...held.map((v) => v.bytes)))
  })
  expect(plan.plannedBytes).toBe(plan.storages.reduce((a, s) => a + s.bytes, 0))
  expect(plan.naiveBytes).toBe(plan.values.reduce((a, v) => a + v.bytes, 0))
}

/**
 * Replays the plan in its order of assignment (group by group, the order values are written) and
 * throws unless each choice is the one promised, given which blocks were free and how large.
 */
const checkChoices = (f: FusedGraph, plan: MemoryPlan, options: PlanOptions): void => {
  const size = new Map<number, number>() // block → bytes so far
  const holder = new Map<number, ValueAssignment>() // block → the last value assigned to it
  const byValue = new Map(plan.values.map((v) => [v.value, v]))
  for (const v of plan.values) {
    const k = v.def
    // free at this moment: the last value it was given is read by no group from this one on
    const free = [...holder].filter(([, w]) => w.lastUse < k).map(([s]) => s)
    const grp = f.groups[k]
    const inPlaceKind = grp.kind === "elementwise" || grp.kind === "broadcast"
    const victims = grp.inputs.filter((i) => {
      const w = byValue.get(i)
      return !!w && w.lastUse === k && holder.get(w.storage) === w && sameType(f.graph, i, v.value)
    })
    if (v.inPlaceOf !== undefined) {
      expect(inPlaceKind).toBe(true)
      expect(victims[0]).toBe(v.inPlaceOf)
      expect(v.storage).toBe(byValue.get(v.inPlaceOf)!.storage)
    } else if (inPlaceKind && victims.length > 0) throw new Error(`${v.value} could be written in place over ${victims[0]} and was not`)
    else if (!size.has(v.storage)) {
      // a new block: no free one could take it
      for (const s of free) if (size.get(s)! >= v.bytes || size.get(s)! * options.matchRange >= v.bytes) throw new Error(`${v.value} got a new block while block ${s} (${size.get(s)} bytes) was free`)
      expect(v.storage).toBe(size.size)
    } else {
      expect(free).toContain(v.storage)
      const have = size.get(v.storage)!
      const fits = free.filter((s) => size.get(s)! >= v.bytes).map((s) => size.get(s)!)
      if (fits.length > 0) expect(have).toBe(Math.min(...fits))
      else {
        const within = free.filter((s) => size.get(s)! * options.matchRange >= v.bytes).map((s) => size.get(s)!)
        expect(have).toBe(Math.max(...within))
      }
    }
    size.set(v.storage, Math.max(size.get(v.storage) ?? 0, v.bytes))
    holder.set(v.storage, v)
  }
}

/** The most bytes the values live at one group need (values that share a block in place counted once). */
const livePeak = (f: FusedGraph, plan: MemoryPlan): number => {
  let peak = 0
  f.groups.forEach((_, k) => {
    const live = plan.values.filter((v) => v.def <= k && k <= v.lastUse)
    const inPlace = new Set(live.flatMap((v) => (v.inPlaceOf !== undefined && live.some((w) => w.value === v.inPlaceOf) ? [v.inPlaceOf] : [])))
    peak = Math.max(peak, live.filter((v) => !inPlace.has(v.value)).reduce((a, v) => a + v.bytes, 0))
  })
  return peak
}

/** A grouped graph, or a schedule alone, with plan options. */
const either = fc.oneof(
  cases.map(([{ graph }, grouping, options]) => [fusedOf(graph, grouping), options] as const),
  fc.tuple(arbSchedule, cases.map(([, , options]) => options)),
)

describe("rewrite.PlanMemory: sizes, choices and the peak", () => {
  it("blocks are the aligned sizes, each as large as its largest value; the totals add up; the reserve covers the live peak", () => {
    fc.assert(
      fc.property(either, ([f, options]) => {
        for (const reuse of [true, false]) {
          const plan = planMemory(f, { ...options, reuse })
          checkSizes(f, plan, options)
          expect(livePeak(f, plan)).toBeLessThanOrEqual(plan.plannedBytes)
          if (!reuse) expect(plan.plannedBytes).toBe(plan.naiveBytes)
        }
        // skipped (disabled), the plan is the default one without reuse
        expect(planMemoryPass.skip!(f).memory).toEqual(planMemory(f, { ...defaultPlanOptions, reuse: false }))
      }),
      lawParams(60),
    )
  })

  it("takes the smallest free block that fits, else the largest free one within the match range, else a new one; writes in place when it can", () => {
    let reused = 0
    let grown = 0
    let inPlace = 0
    fc.assert(
      fc.property(either, ([f, options]) => {
        const plan = planMemory(f, options)
        checkChoices(f, plan, options)
        reused += plan.values.length - plan.storages.length
        grown += plan.storages.filter((s) => plan.values.find((v) => v.storage === s.id)!.bytes < s.bytes).length
        inPlace += plan.values.filter((v) => v.inPlaceOf !== undefined).length
      }),
      lawParams(150),
    )
    // the cases reuse blocks, grow some and write in place
    expect(reused).toBeGreaterThan(300)
    expect(grown).toBeGreaterThan(20)
    expect(inPlace).toBeGreaterThan(30)
  })
})
