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
import { nodeKind } from "../../src/rewrite/fuse-ops.js"
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

describe("rewrite.PlanMemory", () => {
  it("never gives two tensors that are live at once overlapping storage", () => {
    fc.assert(
      fc.property(arbGraphCase({ maxNodes: 16 }), ({ graph }) => {
        const plan = planMemory(fuseOpsSync(optimized(graph)))
        for (const a of plan.values)
          for (const b of plan.values) {
            if (a === b || a.storage !== b.storage) continue
            const overlap = a.def <= b.lastUse && b.def <= a.lastUse
            const takeover = (b.inPlaceOf === a.value && b.def === a.lastUse) || (a.inPlaceOf === b.value && a.def === b.lastUse)
            if (overlap && !takeover) throw new Error(`${a.value} [${a.def}, ${a.lastUse}] and ${b.value} [${b.def}, ${b.lastUse}] share storage ${a.storage}`)
          }
        if (plan.plannedBytes > plan.naiveBytes) throw new Error(`planned ${plan.plannedBytes} > naive ${plan.naiveBytes}`)
      }),
      lawParams(80),
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
