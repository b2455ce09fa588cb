// Schedules: an immutable value over the stages of a TE program. Every primitive is a pure
// function Schedule → Schedule that also appends a serializable step, so a schedule can be
// stored, replayed and hashed. Illegal requests throw a ScheduleError naming the stage and axis
// (`replay` turns that into the Effect error channel).
import { Effect } from "effect"
import type { TeTensor } from "../te/tensor.js"
import { lookupIntrinsic, type TensorIntrinsic } from "../te/intrinsic.js"
import type { Annotation, MemoryScope, Stage, ThreadTag } from "./stage.js"
import { matchIntrinsic } from "./tensorize-match.js"
import { cacheRead, cacheWrite, rfactor } from "./dataflow.js"
import { checkAttachments, consumersProblem, createSchedule, freshAxis, isOutput, leafAxis, ScheduleError, stageOf, update, type Schedule, type Step } from "./schedule-core.js"

// The schedule's data and the dataflow primitives live beside this file; exported from here as before.
export { consumersOf, createSchedule, effectiveConsumers, ScheduleError, type Schedule, type Step } from "./schedule-core.js"
export { cacheRead, cacheWrite, rfactor } from "./dataflow.js"

// A stage's data (its axes, relations, annotations) is declared in stage.ts, which tensorize-match
// reads too; exported from here as before.
export type { Annotation, Attach, Axis, AxisKind, MemoryScope, Relation, Stage, ThreadTag } from "./stage.js"

/** split(axis, factor) → outer (extent ⌈n/factor⌉) and inner (extent factor); nparts fixes the outer extent. */
export const split = (s: Schedule, stage: string, axis: string, by: { factor: number } | { nparts: number }): { schedule: Schedule; outer: string; inner: string } => {
  const st = stageOf(s, "split", stage)
  const a = leafAxis(st, "split", axis)
  const n = "factor" in by ? by.factor : by.nparts
  if (!Number.isInteger(n) || n < 1) throw new ScheduleError({ primitive: "split", stage, axis, reason: `factor must be a positive integer, got ${n}` })
  const factor = "factor" in by ? by.factor : Math.ceil(a.extent / by.nparts)
  const outer = freshAxis(st, `${axis}.o`)
  const inner = freshAxis(st, `${axis}.i`)
  const axes = new Map(st.axes)
    .set(outer, { name: outer, extent: Math.ceil(a.extent / factor), type: a.type })
    .set(inner, { name: inner, extent: factor, type: a.type })
  const leaf = st.leaf.flatMap((x) => (x === axis ? [outer, inner] : [x]))
  const next: Stage = { ...st, axes, leaf, relations: [...st.relations, { kind: "split", parent: axis, outer, inner, factor }] }
  const step: Step = "factor" in by ? { prim: "split", stage, axis, factor: by.factor } : { prim: "split", stage, axis, nparts: by.nparts }
  return { schedule: checkAttachments(update(s, next, step), "split", stage, axis), outer, inner }
}

/** fuse(outer, inner): two adjacent leaf axes become one of their product's extent. */
export const fuse = (s: Schedule, stage: string, outer: string, inner: string): { schedule: Schedule; fused: string } => {
  const st = stageOf(s, "fuse", stage)
  const ao = leafAxis(st, "fuse", outer)
  const ai = leafAxis(st, "fuse", inner)
  const io = st.leaf.indexOf(outer)
  if (st.leaf[io + 1] !== inner) throw new ScheduleError({ primitive: "fuse", stage, axis: `${outer}, ${inner}`, reason: "axes must be adjacent, outer first" })
  if (ao.type !== ai.type) throw new ScheduleError({ primitive: "fuse", stage, axis: `${outer}, ${inner}`, reason: "cannot fuse a data axis with a reduce axis" })
  const fused = freshAxis(st, `${outer}.${inner}.f`)
  const axes = new Map(st.axes).set(fused, { name: fused, extent: ao.extent * ai.extent, type: ao.type })
  const leaf = st.leaf.flatMap((x) => (x === outer ? [fused] : x === inner ? [] : [x]))
  const next: Stage = { ...st, axes, leaf, relations: [...st.relations, { kind: "fuse", outer, inner, fused }] }
  return { schedule: checkAttachments(update(s, next, { prim: "fuse", stage, outer, inner }), "fuse", stage, `${outer}, ${inner}`), fused }
}

/** reorder(axes): the given leaf axes take, in this order, the positions they occupied. */
export const reorder = (s: Schedule, stage: string, order: readonly string[]): Schedule => {
  const st = stageOf(s, "reorder", stage)
  for (const a of order) leafAxis(st, "reorder", a)
  if (new Set(order).size !== order.length) throw new ScheduleError({ primitive: "reorder", stage, reason: `an axis is repeated in [${order.join(", ")}]` })
  const positions = st.leaf.map((a, k) => (order.includes(a) ? k : -1)).filter((k) => k >= 0)
  const leaf = [...st.leaf]
  positions.forEach((p, k) => (leaf[p] = order[k]))
  return update(s, { ...st, leaf }, { prim: "reorder", stage, order })
}

/** tile(x, y, xf, yf): split both and reorder to x.o, y.o, x.i, y.i. */
export const tile = (s: Schedule, stage: string, x: string, y: string, xFactor: number, yFactor: number) => {
  const a = split(s, stage, x, { factor: xFactor })
  const b = split(a.schedule, stage, y, { factor: yFactor })
  const r = reorder(b.schedule, stage, [a.outer, b.outer, a.inner, b.inner])
  // record tile as one step (replay re-derives the four axes)
  const steps = [...s.steps, { prim: "tile", stage, x, y, xFactor, yFactor } as Step]
  return { schedule: { ...r, steps }, xo: a.outer, yo: b.outer, xi: a.inner, yi: b.inner }
}

/** The longest loop `vectorize` takes: a longer one is split first (or left to the C compiler's own vectorizer). */
export const MAX_VECTORIZED = 64

const annotate = (s: Schedule, prim: "parallel" | "vectorize" | "unroll" | "bind", stage: string, axis: string, ann: Annotation, step: Step): Schedule => {
  const st = stageOf(s, prim, stage)
  const a = leafAxis(st, prim, axis)
  if (prim === "vectorize" && a.type === "reduce") throw new ScheduleError({ primitive: prim, stage, axis, reason: "a reduce axis cannot be vectorized" })
  if (prim === "parallel" && a.type === "reduce") throw new ScheduleError({ primitive: prim, stage, axis, reason: "a reduce axis cannot run in parallel (use rfactor first)" })
  if (prim === "vectorize" && a.extent > MAX_VECTORIZED) throw new ScheduleError({ primitive: prim, stage, axis, reason: `extent ${a.extent} is too long to vectorize (split it first)` })
  return update(s, { ...st, annotations: new Map(st.annotations).set(axis, ann) }, step)
}

export const parallel = (s: Schedule, stage: string, axis: string) => annotate(s, "parallel", stage, axis, { kind: "parallel" }, { prim: "parallel", stage, axis })
export const vectorize = (s: Schedule, stage: string, axis: string) => annotate(s, "vectorize", stage, axis, { kind: "vectorized" }, { prim: "vectorize", stage, axis })
export const unroll = (s: Schedule, stage: string, axis: string) => annotate(s, "unroll", stage, axis, { kind: "unrolled" }, { prim: "unroll", stage, axis })
export const bind = (s: Schedule, stage: string, axis: string, thread: ThreadTag) => {
  const st = stageOf(s, "bind", stage)
  if (leafAxis(st, "bind", axis).type === "reduce" && thread !== "vthread")
    throw new ScheduleError({ primitive: "bind", stage, axis, reason: "binding a reduce axis to a thread needs a cross-thread reduction, which is not supported" })
  return annotate(s, "bind", stage, axis, { kind: thread === "vthread" ? "vthread" : "thread", thread }, { prim: "bind", stage, axis, thread })
}

export const pragma = (s: Schedule, stage: string, axis: string, key: string, value: string): Schedule => {
  const st = stageOf(s, "pragma", stage)
  leafAxis(st, "pragma", axis)
  const prev = st.pragmas.get(axis) ?? []
  return update(s, { ...st, pragmas: new Map(st.pragmas).set(axis, [...prev, [key, value] as const]) }, { prim: "pragma", stage, axis, key, value })
}

/** computeInline: the stage's body is substituted into its consumers (not for outputs or reductions). */
export const computeInline = (s: Schedule, stage: string): Schedule => {
  const st = stageOf(s, "computeInline", stage)
  if (isOutput(s, stage)) throw new ScheduleError({ primitive: "computeInline", stage, reason: "an output stage cannot be inlined" })
  if (st.op.body.kind === "reduce") throw new ScheduleError({ primitive: "computeInline", stage, reason: "a reduction cannot be inlined" })
  if (st.relations.length || st.annotations.size) throw new ScheduleError({ primitive: "computeInline", stage, reason: "the stage has loop transformations; inline it before scheduling it" })
  return checkAttachments(update(s, { ...st, attach: { kind: "inline" } }, { prim: "computeInline", stage }), "computeInline", stage)
}

export const computeRoot = (s: Schedule, stage: string): Schedule => {
  const st = stageOf(s, "computeRoot", stage)
  return checkAttachments(update(s, { ...st, attach: { kind: "root" } }, { prim: "computeRoot", stage }), "computeRoot", stage)
}



/**
 * computeAt(target, axis): the stage is computed inside target's loop `axis`, for the region that
 * iteration needs — with several consumers (the others computed at that loop first), the union of
 * their regions.
 */
export const computeAt = (s: Schedule, stage: string, target: string, axis: string): Schedule => {
  const st = stageOf(s, "computeAt", stage)
  const tgt = stageOf(s, "computeAt", target)
  const problem = consumersProblem(s, stage, target, axis)
  if (problem) throw new ScheduleError({ primitive: "computeAt", stage, axis, reason: `the target '${target}', ${problem}` })
  if (isOutput(s, stage)) throw new ScheduleError({ primitive: "computeAt", stage, reason: "an output stage cannot be attached" })
  leafAxis(tgt, "computeAt", axis)
  if (tgt.attach.kind === "inline") throw new ScheduleError({ primitive: "computeAt", stage, axis, reason: `the target '${target}' is inlined (it has no loops)` })
  return checkAttachments(update(s, { ...st, attach: { kind: "at", stage: target, axis } }, { prim: "computeAt", stage, target, axis }), "computeAt", stage, axis)
}

export const storageAlign = (s: Schedule, stage: string, axisIndex: number, factor: number, offset: number): Schedule => {
  const st = stageOf(s, "storageAlign", stage)
  if (axisIndex < 0 || axisIndex >= st.op.shape.length - 1)
    throw new ScheduleError({ primitive: "storageAlign", stage, reason: `axis index ${axisIndex} must name a dim other than the last` })
  if (factor < 1) throw new ScheduleError({ primitive: "storageAlign", stage, reason: "factor must be positive" })
  return update(s, { ...st, align: [...st.align, [axisIndex, factor, offset] as const] }, { prim: "storageAlign", stage, axisIndex, factor, offset })
}

export const doubleBuffer = (s: Schedule, stage: string): Schedule => {
  const st = stageOf(s, "doubleBuffer", stage)
  if (st.attach.kind !== "at") throw new ScheduleError({ primitive: "doubleBuffer", stage, reason: "only a stage attached inside a loop (computeAt) can be double-buffered" })
  return update(s, { ...st, doubleBuffer: true }, { prim: "doubleBuffer", stage })
}

export const setScope = (s: Schedule, stage: string, scope: MemoryScope): Schedule => {
  const st = stageOf(s, "setScope", stage)
  if (isOutput(s, stage) && scope !== "global") throw new ScheduleError({ primitive: "setScope", stage, reason: "an output lives in global memory" })
  return update(s, { ...st, scope }, { prim: "setScope", stage, scope })
}

/**
 * tensorize(axis, intrinsic): the loop nest from `axis` inwards is replaced by the intrinsic. The
 * nest must compute exactly what the intrinsic declares: same axes and extents (data then reduce),
 * the same expression with each tensor read at an offset that only moves with the outer loops.
 */
export const tensorize = (s: Schedule, stage: string, axis: string, intrin: TensorIntrinsic): Schedule => {
  const st = stageOf(s, "tensorize", stage)
  leafAxis(st, "tensorize", axis)
  const problem = matchIntrinsic(st, axis, intrin)
  if (problem) throw new ScheduleError({ primitive: "tensorize", stage, axis, reason: `${intrin.name} does not match: ${problem}` })
  return update(s, { ...st, tensorize: { axis, intrin } }, { prim: "tensorize", stage, axis, intrinsic: intrin.name })
}

/** Applies one recorded step. */
export const applyStep = (s: Schedule, step: Step): Schedule => {
  switch (step.prim) {
    case "split":
      return split(s, step.stage, step.axis, step.factor !== undefined ? { factor: step.factor } : { nparts: step.nparts ?? 1 }).schedule
    case "fuse":
      return fuse(s, step.stage, step.outer, step.inner).schedule
    case "reorder":
      return reorder(s, step.stage, step.order)
    case "tile":
      return tile(s, step.stage, step.x, step.y, step.xFactor, step.yFactor).schedule
    case "parallel":
      return parallel(s, step.stage, step.axis)
    case "vectorize":
      return vectorize(s, step.stage, step.axis)
    case "unroll":
      return unroll(s, step.stage, step.axis)
    case "bind":
      return bind(s, step.stage, step.axis, step.thread)
    case "pragma":
      return pragma(s, step.stage, step.axis, step.key, step.value)
    case "computeInline":
      return computeInline(s, step.stage)
    case "computeRoot":
      return computeRoot(s, step.stage)
    case "computeAt":
      return computeAt(s, step.stage, step.target, step.axis)
    case "storageAlign":
      return storageAlign(s, step.stage, step.axisIndex, step.factor, step.offset)
    case "doubleBuffer":
      return doubleBuffer(s, step.stage)
    case "setScope":
      return setScope(s, step.stage, step.scope)
    case "cacheRead":
      return cacheRead(s, step.tensor, step.scope, step.readers).schedule
    case "cacheWrite":
      return cacheWrite(s, step.stage, step.scope).schedule
    case "rfactor":
      return rfactor(s, step.stage, step.axis).schedule
    case "tensorize": {
      const intrin = lookupIntrinsic(step.intrinsic)
      if (!intrin) throw new ScheduleError({ primitive: "tensorize", stage: step.stage, axis: step.axis, reason: `unknown intrinsic '${step.intrinsic}'` })
      return tensorize(s, step.stage, step.axis, intrin)
    }
  }
}

/** Replays steps on the default schedule of `outputs` (plain; throws ScheduleError). */
export const replaySync = (outputs: readonly TeTensor[], steps: readonly Step[]): Schedule => steps.reduce(applyStep, createSchedule(outputs))

/** Replays steps; an illegal step is the ScheduleError in the error channel. */
export const replay = (outputs: readonly TeTensor[], steps: readonly Step[]): Effect.Effect<Schedule, ScheduleError> =>
  Effect.try({
    try: () => replaySync(outputs, steps),
    catch: (e) => (e instanceof ScheduleError ? e : new ScheduleError({ primitive: "replay", stage: "?", reason: String(e) })),
  })

/** The steps as JSON (stable key order), and back. */
export const serializeSteps = (steps: readonly Step[]): string => JSON.stringify(steps)
export const parseSteps = (json: string): Step[] => JSON.parse(json) as Step[]

/** A readable listing of the schedule (tests, --dump-ir). */
export const printSchedule = (s: Schedule): string =>
  s.order
    .map((name) => {
      const st = s.stages.get(name)!
      const attach = st.attach.kind === "at" ? ` @ ${st.attach.stage}.${st.attach.axis}` : st.attach.kind === "inline" ? " inline" : ""
      const loops = st.leaf
        .map((a) => {
          const ann = st.annotations.get(a)
          return `${a}:${st.axes.get(a)!.extent}${ann ? `(${ann.thread ?? ann.kind})` : ""}`
        })
        .join(" ")
      return `stage ${name}${attach} [${st.scope}] ${loops}`
    })
    .join("\n")
