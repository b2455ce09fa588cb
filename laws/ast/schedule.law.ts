// The schedule primitives as a contract: from random schedules of random computes (the default one,
// or a random legal one from randomSchedule, with stages attached, inlined, split, cached), a random
// request of any primitive — mostly well-formed, often not: unknown stages and axes, axes that are
// no longer leaves or belong to another stage, factors 0, -1 or 1.5, axes not adjacent or of
// another kind, stages that are outputs, reductions, scheduled or not attached, consumers that do
// not hold the others at their loop, attachments the request would break. Against an oracle written here from
// the primitives' documented rules:
// - a request the rules refuse is a ScheduleError naming its primitive and stage (and the axis,
//   where it says one), with a reason; one they allow is applied;
// - an applied request records exactly its step, changes only its stage (or, for cacheRead,
//   cacheWrite and rfactor, adds one stage where the rules say and redirects the reads), and leaves
//   the stage as the primitive says: split / fuse / reorder / tile's leaf order, names and extents,
//   the relation recorded, the annotation, pragma, attachment, scope, alignment or double buffer;
// - every attachment still holds afterwards (the target has loops: at root or itself attached; the axis is a leaf of the
//   target, the target a consumer through inlined stages, every other consumer computed at that loop);
// - the schedule still lowers to what the TE computes.
import { Effect, Result } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { prng } from "../../src/ast/graph/arbitrary.js"
import * as S from "../../src/ast/schedule/schedule.js"
import { arbComputeCase, randomSchedule, type ComputeCase } from "../../src/ast/te/arbitrary.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { add, c, mul } from "../../src/ast/te/expr.js"
import { at, compute, placeholder, reduceAxis, sum, type ComputeTensor } from "../../src/ast/te/tensor.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { assertAllClose, lawParams } from "../support.js"

type Rng = ReturnType<typeof prng>
type Step = S.Step

const THREADS: readonly S.ThreadTag[] = ["blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread"]
const SCOPES: readonly S.MemoryScope[] = ["global", "shared", "local"]

/** The stages that read `name` directly (by name), producers first. */
const readersOf = (s: S.Schedule, name: string): string[] => s.order.filter((n) => s.stages.get(n)!.op.inputs.some((t) => t.name === name))

/** The stages that read `name`, through inlined stages, under the attachments `attach`. */
const consumersThroughInline = (s: S.Schedule, name: string, attach: ReadonlyMap<string, S.Attach>): Set<string> => {
  const out = new Set<string>()
  const seen = new Set<string>()
  const pending = [name]
  while (pending.length) {
    for (const r of readersOf(s, pending.pop()!)) {
      if (seen.has(r)) continue
      seen.add(r)
      if (attach.get(r)!.kind === "inline") pending.push(r)
      else out.add(r)
    }
  }
  return out
}

/** The target reads the stage, and every other consumer is computed at the same loop of it (several consumers: their union). */
const consumersAt = (cons: ReadonlySet<string>, target: string, axis: string, attach: ReadonlyMap<string, S.Attach>): boolean =>
  cons.has(target) && [...cons].every((c) => {
    const a = attach.get(c)
    return c === target || (a?.kind === "at" && a.stage === target && a.axis === axis)
  })

/** The first broken attachment under `attach` and `leaf` (per stage), or undefined. */
const brokenAttachment = (s: S.Schedule, attach: ReadonlyMap<string, S.Attach>, leaf: ReadonlyMap<string, readonly string[]>): string | undefined => {
  for (const [name, a] of attach) {
    if (a.kind !== "at") continue
    const t = attach.get(a.stage)
    if (!t || t.kind === "inline") return `${name} is at ${a.stage}, which has no loops`
    if (!leaf.get(a.stage)!.includes(a.axis)) return `${name} is at ${a.stage}.${a.axis}, not a leaf axis`
    const cons = consumersThroughInline(s, name, attach)
    if (!consumersAt(cons, a.stage, a.axis, attach)) return `${name} is at ${a.stage}, not a consumer whose loop holds the others`
  }
  return undefined
}

const attachOf = (s: S.Schedule) => new Map([...s.stages].map(([n, st]) => [n, st.attach]))
const leafOf = (s: S.Schedule) => new Map([...s.stages].map(([n, st]) => [n, st.leaf]))

const isOutput = (s: S.Schedule, name: string) => s.outputs.some((o) => o.name === name)
const isLeaf = (st: S.Stage | undefined, axis: string) => st !== undefined && st.leaf.includes(axis)
const positiveInt = (n: number | undefined) => n !== undefined && Number.isInteger(n) && n >= 1

/**
 * Does the documented rule of the step's primitive allow it, attachments aside? And, for the
 * primitives whose effect on attachments the oracle models (all but the dataflow ones), would
 * every attachment still hold?
 */
const allowed = (s: S.Schedule, step: Step): { rules: boolean; attachments: boolean | "unmodelled" } => {
  const st = "stage" in step ? s.stages.get(step.stage) : undefined
  const attach = attachOf(s)
  const leaf = leafOf(s)
  const without = (axes: readonly string[]) => st && leaf.set(st.name, st.leaf.filter((a) => !axes.includes(a)))
  const type = (a: string) => st?.axes.get(a)?.type
  let rules: boolean
  switch (step.prim) {
    case "split":
      rules = isLeaf(st, step.axis) && positiveInt(step.factor ?? step.nparts)
      without([step.axis])
      break
    case "fuse":
      rules = isLeaf(st, step.outer) && isLeaf(st, step.inner) && st!.leaf.indexOf(step.inner) === st!.leaf.indexOf(step.outer) + 1 && type(step.outer) === type(step.inner)
      without([step.outer, step.inner])
      break
    case "reorder":
      rules = st !== undefined && step.order.every((a) => isLeaf(st, a)) && new Set(step.order).size === step.order.length
      break
    case "tile":
      rules = isLeaf(st, step.x) && isLeaf(st, step.y) && step.x !== step.y && positiveInt(step.xFactor) && positiveInt(step.yFactor)
      without([step.x, step.y])
      break
    case "parallel":
      rules = isLeaf(st, step.axis) && type(step.axis) === "data"
      break
    case "vectorize":
      rules = isLeaf(st, step.axis) && type(step.axis) === "data" && st!.axes.get(step.axis)!.extent <= S.MAX_VECTORIZED
      break
    case "unroll":
    case "pragma":
      rules = isLeaf(st, step.axis)
      break
    case "bind":
      rules = isLeaf(st, step.axis) && (type(step.axis) === "data" || step.thread === "vthread")
      break
    case "computeInline":
      rules = st !== undefined && !isOutput(s, st.name) && st.op.body.kind !== "reduce" && st.relations.length === 0 && st.annotations.size === 0
      if (st) attach.set(st.name, { kind: "inline" })
      break
    case "computeRoot":
      rules = st !== undefined
      if (st) attach.set(st.name, { kind: "root" })
      break
    case "computeAt": {
      const t = s.stages.get(step.target)
      const cons = st ? consumersThroughInline(s, st.name, attach) : new Set<string>()
      rules = st !== undefined && t !== undefined && consumersAt(cons, t.name, step.axis, attach) && !isOutput(s, st.name) && isLeaf(t, step.axis) && t.attach.kind !== "inline"
      if (st) attach.set(st.name, { kind: "at", stage: step.target, axis: step.axis })
      break
    }
    case "storageAlign":
      rules = st !== undefined && step.axisIndex >= 0 && step.axisIndex < st.op.shape.length - 1 && step.factor >= 1
      break
    case "doubleBuffer":
      rules = st !== undefined && st.attach.kind === "at"
      break
    case "setScope":
      rules = st !== undefined && (!isOutput(s, st.name) || step.scope === "global")
      break
    case "cacheRead": {
      const exists = s.stages.has(step.tensor) || [...s.stages.values()].some((x) => x.op.inputs.some((t) => t.name === step.tensor))
      rules = exists && step.readers.every((r) => {
        const x = s.stages.get(r)
        return x !== undefined && x.op.inputs.some((t) => t.name === step.tensor) && x.relations.length === 0
      })
      return { rules, attachments: "unmodelled" }
    }
    case "cacheWrite":
      rules = st !== undefined && st.relations.length === 0 && st.attach.kind === "root"
      return { rules, attachments: "unmodelled" }
    case "rfactor": {
      if (!st || st.op.body.kind !== "reduce" || !isLeaf(st, step.axis) || type(step.axis) !== "reduce") return { rules: false, attachments: "unmodelled" }
      const rootReduce = st.op.body.axes.map((a) => a.var.name)
      const half = st.relations.find((r) => r.kind === "split" && (r.outer === step.axis || r.inner === step.axis))
      rules = half ? half.kind === "split" && rootReduce.includes(half.parent) && st.relations.length === 1 : rootReduce.includes(step.axis) && st.relations.length === 0
      return { rules, attachments: "unmodelled" }
    }
    case "tensorize":
      throw new Error("tensorize has its own laws (laws/lowering/tensorize.law.ts)")
  }
  return { rules, attachments: rules && brokenAttachment(s, attach, leaf) === undefined }
}

/** The names a refusal of `step` may give as its stage and its axis. */
const namesOf = (step: Step): { stages: string[]; axes: string[] } => {
  switch (step.prim) {
    case "cacheRead":
      return { stages: [step.tensor, ...step.readers], axes: [] }
    case "computeAt":
      return { stages: [step.stage, step.target], axes: [step.axis] }
    case "fuse":
      return { stages: [step.stage], axes: [step.outer, step.inner, `${step.outer}, ${step.inner}`] }
    case "reorder":
      return { stages: [step.stage], axes: [...step.order] }
    case "tile":
      return { stages: [step.stage], axes: [step.x, step.y] }
    default:
      return { stages: [step.stage], axes: "axis" in step ? [step.axis] : [] }
  }
}

/** A random request of a random primitive, mostly well-formed. */
const randomRequest = (rng: Rng, s: S.Schedule): Step => {
  const chance = (p: number) => rng.next() < p
  const stageNames = [...s.order]
  const placeholders = [...new Set([...s.stages.values()].flatMap((x) => x.op.inputs.filter((t) => t.kind === "placeholder").map((t) => t.name)))]
  const stage = chance(0.05) ? rng.pick(["nope", ...placeholders]) : rng.pick(stageNames)
  const st = s.stages.get(stage)
  const leaf = st?.leaf ?? []
  const others = st ? [...st.axes.keys()].filter((a) => !leaf.includes(a)) : []
  const foreign = [...s.stages.values()].filter((x) => x.name !== stage).flatMap((x) => x.leaf)
  const axis = (): string => {
    const r = rng.next()
    if (leaf.length && r < 0.8) return rng.pick(leaf)
    if (others.length && r < 0.9) return rng.pick(others)
    if (foreign.length && r < 0.97) return rng.pick(foreign)
    return "nope"
  }
  const factor = (a: string): number => {
    const ext = st?.axes.get(a)?.extent ?? 4
    return chance(0.1) ? rng.pick([0, -1, 1.5]) : rng.pick([1, 2, 3, ext, ext + 1, Math.max(1, ext - 1)])
  }
  const prims: Step["prim"][] = ["split", "split", "fuse", "fuse", "reorder", "tile", "parallel", "vectorize", "unroll", "bind", "pragma", "computeInline", "computeRoot", "computeAt", "computeAt", "storageAlign", "doubleBuffer", "setScope", "cacheRead", "cacheWrite", "rfactor", "rfactor"]
  const prim = rng.pick(prims)
  switch (prim) {
    case "split": {
      const a = axis()
      return chance(0.7) ? { prim, stage, axis: a, factor: factor(a) } : { prim, stage, axis: a, nparts: factor(a) }
    }
    case "fuse": {
      const i = rng.int(0, Math.max(0, leaf.length - 2))
      const r = rng.next()
      if (leaf.length >= 2 && r < 0.7) return { prim, stage, outer: leaf[i], inner: leaf[i + 1] }
      if (leaf.length >= 2 && r < 0.85) return { prim, stage, outer: leaf[i + 1], inner: leaf[i] }
      return { prim, stage, outer: axis(), inner: axis() }
    }
    case "reorder": {
      const order = leaf.filter(() => chance(0.7))
      for (let i = order.length - 1; i > 0; i--) {
        const j = rng.int(0, i)
        ;[order[i], order[j]] = [order[j], order[i]]
      }
      if (chance(0.1) && order.length) order.push(order[0])
      if (chance(0.1)) order.push(axis())
      return { prim, stage, order }
    }
    case "tile": {
      const x = axis()
      const y = chance(0.9) ? axis() : x
      return { prim, stage, x, y, xFactor: factor(x), yFactor: factor(y) }
    }
    case "parallel":
    case "vectorize":
    case "unroll":
      return { prim, stage, axis: axis() }
    case "bind":
      return { prim, stage, axis: axis(), thread: rng.pick(THREADS) }
    case "pragma":
      return { prim, stage, axis: axis(), key: "auto_unroll_max_step", value: String(rng.int(1, 16)) }
    case "computeInline":
    case "computeRoot":
    case "doubleBuffer":
      return { prim, stage }
    case "computeAt": {
      const cons = st ? [...consumersThroughInline(s, stage, attachOf(s))] : []
      const target = cons.length && chance(0.8) ? rng.pick(cons) : rng.pick([...stageNames, "nope"])
      const tl = s.stages.get(target)?.leaf ?? []
      return { prim, stage, target, axis: tl.length && chance(0.9) ? rng.pick(tl) : axis() }
    }
    case "storageAlign":
      return { prim, stage, axisIndex: rng.int(-1, (st?.op.shape.length ?? 2) - 1), factor: rng.int(0, 8), offset: rng.int(0, 3) }
    case "setScope":
      return { prim, stage, scope: rng.pick(SCOPES) }
    case "cacheRead": {
      const r = rng.pick(stageNames)
      const inputs = s.stages.get(r)!.op.inputs.map((t) => t.name)
      const tensor = inputs.length && chance(0.85) ? rng.pick(inputs) : rng.pick([...stageNames, ...placeholders, "nope"])
      const readers = readersOf(s, tensor).filter((x) => x === r || chance(0.3))
      if (!readers.length || chance(0.1)) readers.push(rng.pick(stageNames.filter((x) => !readers.includes(x)).concat(r)))
      return { prim, tensor, scope: rng.pick(SCOPES), readers: [...new Set(readers)] }
    }
    case "cacheWrite":
      return { prim, stage, scope: rng.pick(SCOPES) }
    case "rfactor": {
      const red = leaf.filter((a) => st!.axes.get(a)!.type === "reduce")
      return { prim, stage, axis: red.length && chance(0.8) ? rng.pick(red) : axis() }
    }
    default:
      throw new Error(prim)
  }
}

/** A refusal: a ScheduleError naming the primitive (tile's own split or reorder), the stage, the axis where it gives one, and a reason. */
const assertRefusal = (step: Step, e: unknown) => {
  if (!(e instanceof S.ScheduleError)) throw e
  expect(e._tag).toBe("ScheduleError")
  expect(step.prim === "tile" ? ["tile", "split", "reorder"] : [step.prim]).toContain(e.primitive)
  const names = namesOf(step)
  expect(names.stages).toContain(e.stage)
  if (e.axis !== undefined) expect(names.axes).toContain(e.axis)
  expect(e.reason.length).toBeGreaterThan(0)
  expect(e.message).toBe(`${e.primitive} on stage '${e.stage}'${e.axis ? ` axis '${e.axis}'` : ""}: ${e.reason}`)
}

/** The leaf order reorder promises: the named axes, in order, in the positions they held. */
const reordered = (leaf: readonly string[], order: readonly string[]): string[] => {
  const queue = [...order]
  return leaf.map((a) => (order.includes(a) ? queue.shift()! : a))
}

/** The first of base, base1, base2, … that `taken` does not hold: the name a primitive gives a new stage or axis. */
const firstFree = (taken: ReadonlyMap<string, unknown>, base: string): string => {
  let name = base
  for (let k = 1; taken.has(name); k++) name = `${base}${k}`
  return name
}

/** `b` holds the same stage value as `a`, but for the fields named. */
const sameBut = (a: S.Stage, b: S.Stage, fields: readonly (keyof S.Stage)[]) => {
  for (const k of Object.keys(a) as (keyof S.Stage)[]) if (!fields.includes(k)) expect(b[k], `stage ${a.name}: ${k}`).toEqual(a[k])
}

/** The structural postconditions of an applied step. */
const assertApplied = (s: S.Schedule, step: Step, t: S.Schedule) => {
  expect(t.steps).toEqual([...s.steps, step])
  expect(t.outputs).toBe(s.outputs)
  if (step.prim === "cacheRead" || step.prim === "cacheWrite" || step.prim === "rfactor") {
    const base = step.prim === "cacheRead" ? `${step.tensor}.${step.scope}` : step.prim === "cacheWrite" ? `${step.stage}.${step.scope}` : `${step.stage}.rf`
    const added = t.order.filter((n) => !s.stages.has(n))
    expect(added).toHaveLength(1)
    const name = added[0]
    expect(name).toBe(firstFree(s.stages, base))
    const before = step.prim === "cacheRead" ? s.order.find((n) => step.readers.includes(n))! : step.stage
    // the new stage sits just before the first stage that reads it; the rest keep their order
    expect(t.order).toEqual(s.order.flatMap((n) => (n === before ? [name, n] : [n])))
    const fresh = t.stages.get(name)!
    expect(fresh.attach).toEqual({ kind: "root" })
    expect(fresh.leaf).toEqual(fresh.root.map((a) => a.name))
    if (step.prim === "cacheRead") {
      expect(fresh.scope).toBe(step.scope)
      expect(fresh.op.inputs.map((x) => x.name)).toEqual([step.tensor])
      for (const n of s.order) {
        const [x, y] = [s.stages.get(n)!, t.stages.get(n)!]
        if (step.readers.includes(n)) {
          expect(y.op.inputs.map((i) => i.name)).toEqual(x.op.inputs.map((i) => (i.name === step.tensor ? name : i.name)))
          sameBut(x, y, ["op"])
        } else expect(y).toBe(x)
      }
    } else {
      const [x, y] = [s.stages.get(step.stage)!, t.stages.get(step.stage)!]
      expect(y.op.inputs.map((i) => i.name)).toEqual([name])
      expect(y.scope).toBe(x.scope)
      expect(y.attach).toEqual(x.attach)
      expect(fresh.scope).toBe(step.prim === "cacheWrite" ? step.scope : "global")
      expect(fresh.op.shape).toEqual(step.prim === "cacheWrite" ? x.op.shape : [x.axes.get(step.axis)!.extent, ...x.op.shape])
      for (const n of s.order) if (n !== step.stage) expect(t.stages.get(n)).toBe(s.stages.get(n))
    }
    return
  }
  expect(t.order).toEqual(s.order)
  const name = step.stage
  for (const n of s.order) if (n !== name) expect(t.stages.get(n), n).toBe(s.stages.get(n))
  const [x, y] = [s.stages.get(name)!, t.stages.get(name)!]
  const fresh = (a: string) => expect(x.axes.has(a), `${a} is a new axis`).toBe(false)
  switch (step.prim) {
    case "split": {
      const ext = x.axes.get(step.axis)!.extent
      const factor = step.factor ?? Math.ceil(ext / step.nparts!)
      const i = x.leaf.indexOf(step.axis)
      const [outer, inner] = y.leaf.slice(i, i + 2)
      expect(y.leaf).toEqual([...x.leaf.slice(0, i), outer, inner, ...x.leaf.slice(i + 1)])
      expect([outer, inner]).toEqual([firstFree(x.axes, `${step.axis}.o`), firstFree(x.axes, `${step.axis}.i`)])
      expect(y.axes.get(outer)).toEqual({ name: outer, extent: Math.ceil(ext / factor), type: x.axes.get(step.axis)!.type })
      expect(y.axes.get(inner)).toEqual({ name: inner, extent: factor, type: x.axes.get(step.axis)!.type })
      expect(y.axes.size).toBe(x.axes.size + 2)
      expect(y.relations).toEqual([...x.relations, { kind: "split", parent: step.axis, outer, inner, factor }])
      sameBut(x, y, ["axes", "leaf", "relations"])
      break
    }
    case "fuse": {
      const i = x.leaf.indexOf(step.outer)
      const fused = y.leaf[i]
      expect(y.leaf).toEqual([...x.leaf.slice(0, i), fused, ...x.leaf.slice(i + 2)])
      expect(fused).toBe(firstFree(x.axes, `${step.outer}.${step.inner}.f`))
      expect(y.axes.get(fused)).toEqual({ name: fused, extent: x.axes.get(step.outer)!.extent * x.axes.get(step.inner)!.extent, type: x.axes.get(step.outer)!.type })
      expect(y.axes.size).toBe(x.axes.size + 1)
      expect(y.relations).toEqual([...x.relations, { kind: "fuse", outer: step.outer, inner: step.inner, fused }])
      sameBut(x, y, ["axes", "leaf", "relations"])
      break
    }
    case "reorder":
      expect(y.leaf).toEqual(reordered(x.leaf, step.order))
      sameBut(x, y, ["leaf"])
      break
    case "tile": {
      const [sx, sy] = y.relations.slice(-2)
      expect(y.relations.slice(0, -2)).toEqual(x.relations)
      if (sx.kind !== "split" || sy.kind !== "split") throw new Error("tile records two splits")
      expect([sx.parent, sx.factor, sy.parent, sy.factor]).toEqual([step.x, step.xFactor, step.y, step.yFactor])
      const split = x.leaf.flatMap((a) => (a === step.x ? [sx.outer, sx.inner] : a === step.y ? [sy.outer, sy.inner] : [a]))
      expect(y.leaf).toEqual(reordered(split, [sx.outer, sy.outer, sx.inner, sy.inner]))
      for (const a of [sx.outer, sx.inner, sy.outer, sy.inner]) fresh(a)
      expect(y.axes.get(sx.inner)!.extent).toBe(step.xFactor)
      expect(y.axes.get(sy.outer)!.extent).toBe(Math.ceil(x.axes.get(step.y)!.extent / step.yFactor))
      sameBut(x, y, ["axes", "leaf", "relations"])
      break
    }
    case "parallel":
    case "vectorize":
    case "unroll":
    case "bind": {
      const kind = { parallel: "parallel", vectorize: "vectorized", unroll: "unrolled" } as const
      const want: S.Annotation = step.prim === "bind" ? { kind: step.thread === "vthread" ? "vthread" : "thread", thread: step.thread } : { kind: kind[step.prim] }
      expect(y.annotations).toEqual(new Map(x.annotations).set(step.axis, want))
      sameBut(x, y, ["annotations"])
      break
    }
    case "pragma":
      expect(y.pragmas).toEqual(new Map(x.pragmas).set(step.axis, [...(x.pragmas.get(step.axis) ?? []), [step.key, step.value]]))
      sameBut(x, y, ["pragmas"])
      break
    case "computeInline":
    case "computeRoot":
    case "computeAt":
      expect(y.attach).toEqual(step.prim === "computeAt" ? { kind: "at", stage: step.target, axis: step.axis } : { kind: step.prim === "computeInline" ? "inline" : "root" })
      sameBut(x, y, ["attach"])
      break
    case "storageAlign":
      expect(y.align).toEqual([...x.align, [step.axisIndex, step.factor, step.offset]])
      sameBut(x, y, ["align"])
      break
    case "doubleBuffer":
      expect(y.doubleBuffer).toBe(true)
      sameBut(x, y, ["doubleBuffer"])
      break
    case "setScope":
      expect(y.scope).toBe(step.scope)
      sameBut(x, y, ["scope"])
      break
  }
}

const checkMeaning = (cc: ComputeCase, s: S.Schedule) => {
  const want = evaluateTE(cc.outputs, cc.inputs)
  const outs = evaluatePrimFunc(lowerSync(s), cc.inputs)
  const exact = cc.outputs.every((o) => o.dtype.startsWith("int"))
  assertAllClose(cc.outputs.map((o) => outs.get(o.name)!), want, exact ? 0 : 1e-4, exact ? 0 : 1e-5)
}

/** A compute, a starting schedule (the default one or a random legal one) and a random request. */
const arbRequest = fc.tuple(arbComputeCase(), fc.integer({ min: 0, max: 0x7fffffff }), fc.boolean()).map(([cc, seed, fromDefault]) => {
  const s = fromDefault ? S.createSchedule(cc.outputs) : randomSchedule(cc.outputs as ComputeTensor[], seed, 4)
  return { cc, s, step: randomRequest(prng(seed), s) }
})

describe("schedule primitives: the contract", () => {
  it("a request is refused (a ScheduleError naming it) exactly when the rules or the attachments forbid it; an applied one does what its primitive says and keeps the meaning", () => {
    const seen = { applied: new Set<string>(), refused: new Set<string>() }
    fc.assert(
      fc.property(arbRequest, ({ cc, s, step }) => {
        const want = allowed(s, step)
        let t: S.Schedule
        try {
          t = S.applyStep(s, step)
        } catch (e) {
          assertRefusal(step, e)
          seen.refused.add(step.prim)
          // refused: the rules forbid it, or it would break an attachment (where modelled, exactly then)
          if (want.rules && want.attachments !== false) {
            expect(want.attachments, `${JSON.stringify(step)} was refused: ${(e as Error).message}`).toBe("unmodelled")
            expect((e as S.ScheduleError).reason).toMatch(/compute it at root first/)
          }
          return
        }
        seen.applied.add(step.prim)
        expect(want.rules, `${JSON.stringify(step)} was applied though the rules forbid it`).toBe(true)
        expect(want.attachments, `${JSON.stringify(step)} was applied though it breaks an attachment`).not.toBe(false)
        expect(brokenAttachment(t, attachOf(t), leafOf(t))).toBeUndefined()
        assertApplied(s, step, t)
        checkMeaning(cc, t)
      }),
      lawParams(600),
    )
    // every primitive both applied and refused somewhere
    const prims = ["split", "fuse", "reorder", "tile", "parallel", "vectorize", "unroll", "bind", "pragma", "computeInline", "computeRoot", "computeAt", "storageAlign", "doubleBuffer", "setScope", "cacheRead", "cacheWrite", "rfactor"]
    expect(prims.filter((p) => !seen.applied.has(p))).toEqual([])
    expect(prims.filter((p) => !seen.refused.has(p) && p !== "computeRoot")).toEqual([])
  })

  it(`vectorize takes a loop of up to MAX_VECTORIZED (${S.MAX_VECTORIZED}) iterations and refuses a longer one`, () => {
    fc.assert(
      fc.property(fc.integer({ min: S.MAX_VECTORIZED - 2, max: S.MAX_VECTORIZED + 2 }), (n) => {
        const A = placeholder("A", [n])
        const B = compute("B", [n], (i) => add(at(A, i), c(1)))
        const s = S.createSchedule([B])
        const step: Step = { prim: "vectorize", stage: "B", axis: "B.i" }
        if (n <= S.MAX_VECTORIZED) expect(S.applyStep(s, step).stages.get("B")!.annotations.get("B.i")).toEqual({ kind: "vectorized" })
        else expect(() => S.applyStep(s, step)).toThrow(/too long to vectorize/)
      }),
      lawParams(10),
    )
  })

  it("printSchedule lists each stage, producers first: its attachment, scope and loops with extents and annotations", () => {
    const A = placeholder("A", [4, 6])
    const P = compute("P", [4, 6], (i, j) => add(at(A, i, j), c(1)))
    const Q = compute("Q", [4, 6], (i, j) => mul(at(P, i, j), c(2)))
    const k = reduceAxis(6, "k")
    const R = compute("R", [4], (i) => sum(at(Q, i, k.var), [k]))
    let s = S.computeInline(S.createSchedule([R]), "P")
    const sp = S.split(s, "R", "R.i", { factor: 2 })
    s = S.bind(sp.schedule, "R", sp.outer, "vthread")
    s = S.parallel(s, "R", sp.inner)
    s = S.computeAt(s, "Q", "R", sp.inner)
    s = S.bind(S.unroll(S.setScope(s, "Q", "local"), "Q", "Q.j"), "Q", "Q.i", "threadIdx.x")
    expect(S.printSchedule(s).split("\n")).toEqual([
      "stage P inline [global] P.i:4 P.j:6",
      "stage Q @ R.R.i.i [local] Q.i:4(threadIdx.x) Q.j:6(unrolled)",
      "stage R [global] R.i.o:2(vthread) R.i.i:2(parallel) k:6",
    ])
  })

  it("replay: a schedule's steps replay to it; a refused step fails the Effect with its ScheduleError, a step no primitive knows with one of its own", () => {
    const run = (outputs: readonly ComputeTensor[], steps: readonly Step[]) => Effect.runSync(Effect.result(S.replay(outputs, steps)))
    fc.assert(
      fc.property(arbRequest, ({ cc, s, step }) => {
        const outputs = cc.outputs as ComputeTensor[]
        const base = run(outputs, S.parseSteps(S.serializeSteps(s.steps)))
        if (Result.isFailure(base)) throw base.failure
        expect(S.printSchedule(base.success)).toBe(S.printSchedule(s))
        let want: S.Schedule | S.ScheduleError
        try {
          want = S.applyStep(s, step)
        } catch (e) {
          want = e as S.ScheduleError
        }
        const got = run(outputs, [...s.steps, step])
        if (want instanceof S.ScheduleError) expect(Result.isFailure(got) && got.failure).toEqual(want)
        else expect(Result.isSuccess(got) && S.printSchedule(got.success)).toBe(S.printSchedule(want))
        // a step of a primitive that does not exist (a hand-edited or newer log) leaves nothing to apply the next step to
        const bogus = run(outputs, [...s.steps, { prim: "bogus" } as unknown as Step, { prim: "computeRoot", stage: outputs[0].name }])
        if (Result.isSuccess(bogus)) throw new Error("a bogus step replayed")
        expect(bogus.failure).toBeInstanceOf(S.ScheduleError)
        expect([bogus.failure.primitive, bogus.failure.stage]).toEqual(["replay", "?"])
        expect(bogus.failure.reason.length).toBeGreaterThan(0)
      }),
      lawParams(100),
    )
  })

  it("tensorize by the name of an intrinsic no one declared is a ScheduleError", () => {
    const A = placeholder("A", [4])
    const B = compute("B", [4], (i) => add(at(A, i), c(1)))
    const step: Step = { prim: "tensorize", stage: "B", axis: "B.i", intrinsic: "no_such_intrinsic" }
    expect(() => S.applyStep(S.createSchedule([B]), step)).toThrow(/unknown intrinsic 'no_such_intrinsic'/)
  })

  it("createSchedule refuses two computes of one name, and lists the stages producers first", () => {
    const A = placeholder("A", [4])
    const B1 = compute("B", [4], (i) => add(at(A, i), c(1)))
    const B2 = compute("B", [4], (i) => mul(at(A, i), c(2)))
    const C = compute("C", [4], (i) => add(at(B1, i), at(B2, i)))
    try {
      S.createSchedule([C])
      throw new Error("expected a ScheduleError")
    } catch (e) {
      expect(e).toBeInstanceOf(S.ScheduleError)
      expect([(e as S.ScheduleError).primitive, (e as S.ScheduleError).stage]).toEqual(["createSchedule", "B"])
      expect((e as S.ScheduleError).reason).toMatch(/share/)
    }
    const D = compute("D", [4], (i) => mul(at(B1, i), at(B1, i)))
    expect(S.createSchedule([D]).order).toEqual(["B", "D"])
  })

  it("rfactor of a root reduce axis or of either half of its split (dividing or not): partials over the axis, then their reduction; the meaning kept", () => {
    fc.assert(
      fc.property(arbComputeCase(["matmul", "reduce", "pool", "conv2d", "depthwise"]), fc.integer({ min: 1, max: 5 }), fc.constantFrom("whole", "outer", "inner"), (cc, factor, half) => {
        let s = S.createSchedule(cc.outputs)
        const st = [...s.stages.values()].find((x) => x.op.body.kind === "reduce")
        if (!st) return
        const red = st.root.filter((a) => a.type === "reduce")
        const root = red[red.length - 1]
        let axis = root.name
        if (half !== "whole") {
          const sp = S.split(s, st.name, root.name, { factor })
          s = sp.schedule
          axis = half === "outer" ? sp.outer : sp.inner
        }
        const extent = s.stages.get(st.name)!.axes.get(axis)!.extent
        const r = S.rfactor(s, st.name, axis)
        const rf = r.schedule.stages.get(r.stage)!
        const top = r.schedule.stages.get(st.name)!
        expect(r.stage).toBe(firstFree(s.stages, `${st.name}.rf`))
        expect(rf.op.shape).toEqual([extent, ...st.op.shape])
        // the partials reduce over the other reduce axes (and the other half), the stage over the partials
        expect(rf.root.filter((a) => a.type === "reduce").map((a) => a.extent)).toEqual([
          ...(half === "whole" ? [] : [half === "outer" ? factor : Math.ceil(root.extent / factor)]),
          ...red.slice(0, -1).map((a) => a.extent),
        ])
        expect(top.root.filter((a) => a.type === "reduce")).toEqual([{ name: `${axis}.rf`, extent, type: "reduce" }])
        expect(top.op.inputs.map((t) => t.name)).toEqual([r.stage])
        checkMeaning(cc, r.schedule)
      }),
      lawParams(60),
    )
  })
})
