// Structural laws: fusion groups are convex, cover every node exactly once, opaque ops stand
// alone; a memory plan never lets two live tensors share storage (except an in-place takeover
// in the group where the old value dies); inserted layout transforms never stay adjacent to
// their inverse.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbGraphCase } from "../../src/ast/graph/arbitrary.js"
import type { Graph } from "../../src/ast/graph/graph.js"
import { alterLayoutSync, defaultPasses, fuseOpsSync, planMemory, planMemoryPass, type FusedGraph } from "../../src/rewrite/index.js"
import { nodeKind, singletonGroups } from "../../src/rewrite/fuse-ops.js"
import type { MemoryPlan, ValueAssignment } from "../../src/rewrite/plan-memory.js"
import { subgraphFreeNames } from "../../src/ast/graph/evaluate.js"
import { lawParams } from "../support.js"

const optimized = (g: Graph) => Effect.runSync(defaultPasses.run(g))

/** Throws unless the groups partition the nodes into convex sets with opaque ops alone. */
export const checkPartition = (f: FusedGraph): void => {
  const { graph, groups } = f
  const groupOf = new Map<string, number>()
  for (const grp of groups)
    for (const n of grp.nodes) {
      if (groupOf.has(n)) throw new Error(`node ${n} is in two groups`)
      groupOf.set(n, grp.id)
    }
  for (const n of graph.nodes) if (!groupOf.has(n.name)) throw new Error(`node ${n.name} is in no group`)
  for (const grp of groups)
    if (grp.nodes.length > 1)
      for (const name of grp.nodes) {
        const n = graph.nodes.find((m) => m.name === name)!
        if (nodeKind(n) === "opaque") throw new Error(`opaque ${n.op} shares group ${grp.id}`)
      }
  // convexity: no path leaves a group and re-enters it
  const producer = new Map<string, string>()
  for (const n of graph.nodes) for (const o of n.outputs) producer.set(o, n.name)
  const preds = new Map(graph.nodes.map((n) => [n.name, n.inputs.map((i) => producer.get(i)).filter((p): p is string => !!p)]))
  // for each node, the set of groups reachable backwards after leaving the node's group
  const leftFrom = new Map<string, Set<number>>()
  for (const n of graph.nodes) {
    const g = groupOf.get(n.name)!
    const acc = new Set<number>()
    for (const p of preds.get(n.name)!) {
      const pg = groupOf.get(p)!
      for (const x of leftFrom.get(p)!) acc.add(x)
      if (pg !== g) acc.add(pg)
    }
    if (acc.has(g)) throw new Error(`group ${g} is not convex: a path leaves it and re-enters at ${n.name}`)
    leftFrom.set(n.name, acc)
  }
  // group order respects dependencies
  const order = new Map(groups.map((grp, k) => [grp.id, k]))
  for (const n of graph.nodes)
    for (const p of preds.get(n.name)!)
      if (order.get(groupOf.get(p)!)! > order.get(groupOf.get(n.name)!)!) throw new Error(`group of ${p} runs after the group of ${n.name}`)
}

describe("rewrite.FuseOps", () => {
  it("groups are convex, cover every node once, opaque ops stand alone", () => {
    fc.assert(
      fc.property(arbGraphCase({ maxNodes: 16, modelShare: 0.5 }), ({ graph }) => {
        checkPartition(fuseOpsSync(optimized(graph)))
        checkPartition(fuseOpsSync(graph))
      }),
      lawParams(80),
    )
  })
})

/** Where each value lives, recomputed from the graph and the groups alone (never from a plan). */
interface LiveRange {
  /** Index (in group order) of the group that writes it. */
  readonly def: number
  /** Index of the last group that reads it (its writer when no other group does). */
  readonly last: number
  readonly kind: FusedGraph["groups"][number]["kind"]
}

/**
 * The intermediate values that cross groups (written by one group, read by a later one, neither a
 * graph input, constant nor output) with their live ranges: reads are the nodes' inputs and the
 * names their subgraphs capture, as the evaluator counts them.
 */
const liveRanges = (f: FusedGraph): Map<string, LiveRange> => {
  const { graph, groups } = f
  const groupAt = new Map<string, number>()
  groups.forEach((grp, k) => grp.nodes.forEach((n) => groupAt.set(n, k)))
  const external = new Set([...graph.inputs.map((i) => i.name), ...graph.initializers.keys(), ...graph.outputs.map((o) => o.name)])
  const def = new Map<string, number>()
  const last = new Map<string, number>()
  for (const n of graph.nodes) {
    const k = groupAt.get(n.name)!
    const reads = [...n.inputs, ...Object.values(n.attrs).flatMap((a) => (a.kind === "graph" ? subgraphFreeNames(a.value) : []))]
    for (const i of reads) if (i !== "") last.set(i, Math.max(last.get(i) ?? -1, k))
    for (const o of n.outputs) if (o !== "" && !external.has(o)) def.set(o, k)
  }
  const ranges = new Map<string, LiveRange>()
  for (const [v, d] of def) if ((last.get(v) ?? d) > d) ranges.set(v, { def: d, last: last.get(v)!, kind: groups[d].kind })
  return ranges
}

const sameType = (g: Graph, a: string, b: string): boolean => {
  const [x, y] = [g.valueTypes.get(a), g.valueTypes.get(b)]
  return !!x && !!y && x.dtype === y.dtype && x.shape.length === y.shape.length && x.shape.every((d, k) => d === y.shape[k])
}

/**
 * Throws unless the plan gives storage to exactly the values that cross groups, and no two values
 * whose recomputed live ranges overlap share a block — except an in-place takeover the plan
 * declares and the ranges permit: the writer's group is the victim's last reader, the group is
 * elementwise or broadcast, and both have one dtype and shape.
 */
export const checkMemoryPlan = (f: FusedGraph, plan: MemoryPlan): void => {
  const live = liveRanges(f)
  const planned = new Set(plan.values.map((a) => a.value))
  for (const a of plan.values) if (!live.has(a.value)) throw new Error(`${a.value} is planned but is no intermediate value read by a later group`)
  for (const v of live.keys()) if (!planned.has(v)) throw new Error(`${v} crosses groups but has no storage`)
  if (planned.size !== plan.values.length) throw new Error("a value is planned twice")
  const takesOver = (b: ValueAssignment, a: ValueAssignment): boolean => {
    const [ra, rb] = [live.get(a.value)!, live.get(b.value)!]
    return b.inPlaceOf === a.value && rb.def === ra.last && (rb.kind === "elementwise" || rb.kind === "broadcast") && sameType(f.graph, a.value, b.value)
  }
  for (const a of plan.values)
    for (const b of plan.values) {
      if (a === b || a.storage !== b.storage) continue
      const [ra, rb] = [live.get(a.value)!, live.get(b.value)!]
      const overlap = ra.def <= rb.last && rb.def <= ra.last
      if (overlap && !takesOver(a, b) && !takesOver(b, a))
        throw new Error(`${a.value} (live in groups ${ra.def}..${ra.last}) and ${b.value} (live in groups ${rb.def}..${rb.last}) share storage ${a.storage}`)
    }
}

describe("rewrite.PlanMemory", () => {
  it("never gives two values live at once (ranges recomputed from the groups) overlapping storage", () => {
    fc.assert(
      fc.property(arbGraphCase({ maxNodes: 16 }), ({ graph }) => {
        const fused = fuseOpsSync(optimized(graph))
        const plan = planMemory(fused)
        checkMemoryPlan(fused, plan)
        checkMemoryPlan(singletonGroups(optimized(graph)), planMemory(singletonGroups(optimized(graph))))
        if (plan.plannedBytes > plan.naiveBytes) throw new Error(`planned ${plan.plannedBytes} > naive ${plan.naiveBytes}`)
      }),
      lawParams(80),
    )
  })

  it("reports each value's writer and last reader as the groups say", () => {
    fc.assert(
      fc.property(arbGraphCase({ maxNodes: 16 }), ({ graph }) => {
        const fused = fuseOpsSync(optimized(graph))
        const live = liveRanges(fused)
        for (const a of planMemory(fused).values) expect({ value: a.value, def: a.def, last: a.lastUse }).toEqual({ value: a.value, def: live.get(a.value)?.def, last: live.get(a.value)?.last })
      }),
      lawParams(40),
    )
  })

  it("skipped (disabled), every intermediate value gets a block of its own and nothing is in place", () => {
    fc.assert(
      fc.property(arbGraphCase({ maxNodes: 16 }), ({ graph }) => {
        const fused = fuseOpsSync(optimized(graph))
        const plan = planMemoryPass.skip!(fused).memory
        expect(new Set(plan.values.map((v) => v.storage)).size).toBe(plan.values.length)
        expect(plan.values.some((v) => v.inPlaceOf !== undefined)).toBe(false)
        expect(plan.values.map((v) => v.value).sort()).toEqual(planMemory(fused).values.map((v) => v.value).sort())
      }),
      lawParams(60),
    )
  })
})

describe("rewrite.AlterLayout", () => {
  it("leaves no layout transform adjacent to its inverse", () => {
    fc.assert(
      fc.property(arbGraphCase({ maxNodes: 16, modelShare: 0.5 }), ({ graph }) => {
        const g = alterLayoutSync(graph, { vectorLanes: 4 })
        const producer = new Map<string, (typeof g.nodes)[number]>()
        for (const n of g.nodes) for (const o of n.outputs) producer.set(o, n)
        for (const n of g.nodes) {
          if (n.op !== "LayoutTransform") continue
          const p = producer.get(n.inputs[0])
          if (p && p.op === "LayoutTransform" && p.attrs.src_layout.value === n.attrs.dst_layout.value && p.attrs.dst_layout.value === n.attrs.src_layout.value)
            throw new Error(`${p.name} and ${n.name} are inverse and adjacent`)
        }
      }),
      lawParams(60),
    )
  })
})
