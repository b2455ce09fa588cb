// rewrite.PlanMemory: static memory planning over the executor's order (the fused groups).
// Every intermediate value (a group output that is not a graph output) gets a storage block;
// blocks are reused once their value is dead, chosen by size class (the smallest free block that
// fits, else a free block grown to fit when it is within `matchRange` of the request), and in
// place where an elementwise group's output overwrites an input that dies in that group.
import { BYTES } from "../ast/graph/dtype.js"
import type { Graph } from "../ast/graph/graph.js"
import { sizeOf } from "../ast/graph/tensor.js"
import { Effect } from "effect"
import type { FusedGraph } from "./fuse-ops.js"
import type { Pass } from "./pass.js"

export interface StorageBlock {
  readonly id: number
  readonly bytes: number
}

export interface ValueAssignment {
  readonly value: string
  readonly storage: number
  readonly bytes: number
  /** Index of the group that writes it. */
  readonly def: number
  /** Index of the last group that reads it. */
  readonly lastUse: number
  /** The value whose storage it takes over in place (born in the group where that one dies). */
  readonly inPlaceOf?: string
}

export interface MemoryPlan {
  readonly storages: readonly StorageBlock[]
  readonly values: readonly ValueAssignment[]
  /** Sum of the planned blocks. */
  readonly plannedBytes: number
  /** One buffer per intermediate tensor. */
  readonly naiveBytes: number
}

export interface PlanOptions {
  /** A free block is grown for a request at most this many times its size (TVM uses 16). */
  readonly matchRange: number
  /** Storage alignment in bytes. */
  readonly alignment: number
  /** Whether a dead value's block is taken again (false: every value a block of its own, nothing in place). */
  readonly reuse?: boolean
}
export const defaultPlanOptions: PlanOptions = { matchRange: 16, alignment: 64 }

const IN_PLACE_KINDS = new Set(["elementwise", "broadcast"])

const bytesOf = (g: Graph, v: string, align: number): number | undefined => {
  const t = g.valueTypes.get(v)
  if (!t || !t.shape.every((d) => typeof d === "number")) return undefined
  const b = sizeOf(t.shape as number[]) * BYTES[t.dtype]
  return Math.max(align, Math.ceil(b / align) * align)
}

export const planMemory = (fused: FusedGraph, options: PlanOptions = defaultPlanOptions): MemoryPlan => {
  const { graph, groups } = fused
  const external = new Set<string>([...graph.inputs.map((i) => i.name), ...graph.initializers.keys(), ...graph.outputs.map((o) => o.name)])
  const defAt = new Map<string, number>()
  const lastUse = new Map<string, number>()
  groups.forEach((grp, k) => {
    for (const o of grp.outputs) if (!external.has(o)) defAt.set(o, k)
    for (const i of grp.inputs) if (defAt.has(i)) lastUse.set(i, k)
  })
  const storages: { id: number; bytes: number }[] = []
  const free: number[] = [] // storage ids
  const holder = new Map<number, string>()
  const values: ValueAssignment[] = []
  const byValue = new Map<string, ValueAssignment>()
  let naive = 0

  const take = (bytes: number): number => {
    if (options.reuse === false) {
      storages.push({ id: storages.length, bytes })
      return storages.length - 1
    }
    let best = -1
    for (const id of free) if (storages[id].bytes >= bytes && (best < 0 || storages[id].bytes < storages[best].bytes)) best = id
    if (best < 0)
      for (const id of free)
        if (storages[id].bytes * options.matchRange >= bytes && (best < 0 || storages[id].bytes > storages[best].bytes)) best = id
    if (best >= 0) {
      free.splice(free.indexOf(best), 1)
      if (storages[best].bytes < bytes) storages[best].bytes = bytes
      return best
    }
    storages.push({ id: storages.length, bytes })
    return storages.length - 1
  }

  groups.forEach((grp, k) => {
    const dying = grp.inputs.filter((i) => lastUse.get(i) === k && byValue.has(i))
    for (const o of grp.outputs) {
      if (!defAt.has(o)) continue
      const bytes = bytesOf(graph, o, options.alignment)
      if (bytes === undefined) continue // dynamic size: allocated at run time
      naive += bytes
      // in place only over an input of the same type and shape (read at the index it is written),
      // never over a broadcast operand
      const sameType = (i: string) => {
        const a = graph.valueTypes.get(i)
        const b = graph.valueTypes.get(o)
        return !!a && !!b && a.dtype === b.dtype && a.shape.length === b.shape.length && a.shape.every((d, k) => d === b.shape[k])
      }
      const victim = IN_PLACE_KINDS.has(grp.kind) && options.reuse !== false ? dying.find((i) => sameType(i) && holder.get(byValue.get(i)!.storage) === i) : undefined
      let storage: number
      let inPlaceOf: string | undefined
      if (victim !== undefined) {
        storage = byValue.get(victim)!.storage
        inPlaceOf = victim
      } else storage = take(bytes)
      holder.set(storage, o)
      const a: ValueAssignment = { value: o, storage, bytes, def: k, lastUse: lastUse.get(o) ?? k, ...(inPlaceOf ? { inPlaceOf } : {}) }
      values.push(a)
      byValue.set(o, a)
    }
    // values whose last reader is this group free their storage after it
    for (const i of grp.inputs) {
      const a = byValue.get(i)
      if (a && lastUse.get(i) === k && holder.get(a.storage) === i) {
        holder.delete(a.storage)
        free.push(a.storage)
      }
    }
    // values nobody reads are dead at once
    for (const o of grp.outputs) {
      const a = byValue.get(o)
      if (a && !lastUse.has(o) && holder.get(a.storage) === o) {
        holder.delete(a.storage)
        free.push(a.storage)
      }
    }
  })
  const plannedBytes = storages.reduce((s, b) => s + b.bytes, 0)
  return { storages, values, plannedBytes, naiveBytes: naive }
}

/** A fused graph with its memory plan: what lowering and the executor take. */
export interface PlannedGraph extends FusedGraph {
  readonly memory: MemoryPlan
}

/** Memory planning as a pass; skipped (disabled), every intermediate value gets a block of its own. */
export const planMemoryPass: Pass<FusedGraph, PlannedGraph> = {
  name: "rewrite.PlanMemory",
  optLevel: 0,
  run: (fused) => Effect.succeed({ ...fused, memory: planMemory(fused) }),
  skip: (fused) => ({ ...fused, memory: planMemory(fused, { ...defaultPlanOptions, reuse: false }) }),
}
