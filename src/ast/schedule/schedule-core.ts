// The schedule's data and the helpers its primitives share: the Schedule value, its recorded
// Steps, the ScheduleError every illegal request throws, the default schedule of a TE program, and
// the lookups and updates the primitives (schedule.ts, dataflow.ts) are built from.
import { Data } from "effect"
import type { IterVar } from "../te/expr.js"
import { postOrder, type ComputeTensor, type TeTensor } from "../te/tensor.js"
import type { Axis, MemoryScope, Stage, ThreadTag } from "./stage.js"

export class ScheduleError extends Data.TaggedError("ScheduleError")<{
  readonly primitive: string
  readonly stage: string
  readonly axis?: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.primitive} on stage '${this.stage}'${this.axis ? ` axis '${this.axis}'` : ""}: ${this.reason}`
  }
}

export type Step =
  | { readonly prim: "split"; readonly stage: string; readonly axis: string; readonly factor?: number; readonly nparts?: number }
  | { readonly prim: "fuse"; readonly stage: string; readonly outer: string; readonly inner: string }
  | { readonly prim: "reorder"; readonly stage: string; readonly order: readonly string[] }
  | { readonly prim: "tile"; readonly stage: string; readonly x: string; readonly y: string; readonly xFactor: number; readonly yFactor: number }
  | { readonly prim: "parallel" | "vectorize" | "unroll"; readonly stage: string; readonly axis: string }
  | { readonly prim: "bind"; readonly stage: string; readonly axis: string; readonly thread: ThreadTag }
  | { readonly prim: "pragma"; readonly stage: string; readonly axis: string; readonly key: string; readonly value: string }
  | { readonly prim: "computeInline" | "computeRoot"; readonly stage: string }
  | { readonly prim: "computeAt"; readonly stage: string; readonly target: string; readonly axis: string }
  | { readonly prim: "storageAlign"; readonly stage: string; readonly axisIndex: number; readonly factor: number; readonly offset: number }
  | { readonly prim: "doubleBuffer"; readonly stage: string }
  | { readonly prim: "setScope"; readonly stage: string; readonly scope: MemoryScope }
  | { readonly prim: "cacheRead"; readonly tensor: string; readonly scope: MemoryScope; readonly readers: readonly string[] }
  | { readonly prim: "cacheWrite"; readonly stage: string; readonly scope: MemoryScope }
  | { readonly prim: "rfactor"; readonly stage: string; readonly axis: string }
  | { readonly prim: "tensorize"; readonly stage: string; readonly axis: string; readonly intrinsic: string }

export interface Schedule {
  readonly outputs: readonly TeTensor[]
  readonly stages: ReadonlyMap<string, Stage>
  /** Compute stages, producers first. */
  readonly order: readonly string[]
  readonly steps: readonly Step[]
}

export const rootAxes = (op: ComputeTensor): Axis[] => {
  const data = op.axes.map((a) => ({ name: a.var.name, extent: a.dom.extent, type: "data" as const }))
  const red = op.body.kind === "reduce" ? op.body.axes.map((a: IterVar) => ({ name: a.var.name, extent: a.dom.extent, type: "reduce" as const })) : []
  return [...data, ...red]
}

/** The default schedule: every compute at root, loops in declaration order. */
export const createSchedule = (outputs: readonly TeTensor[]): Schedule => {
  const stages = new Map<string, Stage>()
  const order: string[] = []
  for (const t of postOrder(outputs)) {
    if (t.kind !== "compute") continue
    if (stages.has(t.name)) throw new ScheduleError({ primitive: "createSchedule", stage: t.name, reason: "two tensors share this name" })
    stages.set(t.name, freshStage(t))
    order.push(t.name)
  }
  return { outputs, stages, order, steps: [] }
}

export const stageOf = (s: Schedule, prim: string, name: string): Stage => {
  const st = s.stages.get(name)
  if (!st) throw new ScheduleError({ primitive: prim, stage: name, reason: `no such stage (stages: ${[...s.stages.keys()].join(", ")})` })
  return st
}

export const leafAxis = (st: Stage, prim: string, axis: string): Axis => {
  const a = st.axes.get(axis)
  if (!a) throw new ScheduleError({ primitive: prim, stage: st.name, axis, reason: `no such axis (leaf axes: ${st.leaf.join(", ")})` })
  if (!st.leaf.includes(axis)) throw new ScheduleError({ primitive: prim, stage: st.name, axis, reason: "is not a leaf axis (it was split or fused already)" })
  return a
}

export const update = (s: Schedule, st: Stage, step: Step): Schedule => ({ ...s, stages: new Map(s.stages).set(st.name, st), steps: [...s.steps, step] })

export const freshAxis = (st: Stage, base: string): string => {
  let name = base
  for (let k = 1; st.axes.has(name); k++) name = `${base}${k}`
  return name
}

export const isOutput = (s: Schedule, stage: string) => s.outputs.some((o) => o.name === stage)

export const freshStage = (op: ComputeTensor): Stage => {
  const root = rootAxes(op)
  return {
    name: op.name,
    op,
    root,
    axes: new Map(root.map((a) => [a.name, a])),
    leaf: root.map((a) => a.name),
    relations: [],
    annotations: new Map(),
    pragmas: new Map(),
    attach: { kind: "root" },
    scope: "global",
    align: [],
    doubleBuffer: false,
  }
}

/** A tensor of the program by name (a stage's op or a placeholder some stage reads). */
export const tensorByName = (s: Schedule, name: string): TeTensor | undefined => {
  const st = s.stages.get(name)
  if (st) return st.op
  for (const x of s.stages.values()) for (const t of x.op.inputs) if (t.name === name) return t
  return undefined
}

export const uniqueStageName = (s: Schedule, base: string): string => {
  let name = base
  for (let k = 1; s.stages.has(name); k++) name = `${base}${k}`
  return name
}


/** The compute stages that read `stage` directly. */
export const consumersOf = (s: Schedule, stage: string): string[] =>
  s.order.filter((name) => s.stages.get(name)!.op.inputs.some((t) => t.name === stage))

/** The stages that read `stage`, looking through inlined stages to the stages they are inlined into. */
export const effectiveConsumers = (s: Schedule, stage: string): string[] => {
  const out = new Set<string>()
  const visit = (name: string) => {
    for (const c of consumersOf(s, name)) {
      if (s.stages.get(c)!.attach.kind === "inline") visit(c)
      else out.add(c)
    }
  }
  visit(stage)
  return [...out]
}

/**
 * What computeAt established and a later step must keep: a stage computed at (target, axis) needs
 * the target to have loops of its own (at root, or itself computed at a stage: attachments nest,
 * as a GPU schedule's shared-memory tile is computed at its register tile's reduction, which is
 * computed at the output's thread loop), `axis` to be one of its leaf axes, and the target to be
 * one of its consumers (through inlined stages), every other consumer computed at the same loop of
 * the target (TVM's several consumers: the stage is computed there for the union of their regions —
 * a softmax's exps, read by the row's sum and by its division). The first attachment that no
 * longer holds, or undefined.
 */
export const attachmentProblem = (s: Schedule): string | undefined => {
  for (const [name, st] of s.stages) {
    if (st.attach.kind !== "at") continue
    const { stage: target, axis } = st.attach
    const t = s.stages.get(target)
    if (!t || t.attach.kind === "inline") return `'${name}' is computed at '${target}', which would have no loops of its own`
    if (!t.leaf.includes(axis)) return `'${name}' is computed at '${target}' axis '${axis}', which would not be a leaf axis`
    const problem = consumersProblem(s, name, target, axis)
    if (problem) return `'${name}' is computed at '${target}', ${problem}`
  }
  return undefined
}

/**
 * Why `stage` cannot be computed at (target, axis) for its consumers, or undefined: the target must
 * read it, and every other consumer must be computed at that same loop of the target (its sibling,
 * computed after it in the loop's body: the stage's region there is the union of theirs).
 */
export const consumersProblem = (s: Schedule, stage: string, target: string, axis: string): string | undefined => {
  const readers = effectiveConsumers(s, stage)
  if (!readers.includes(target)) return `which does not read it (consumers: ${readers.join(", ") || "none"})`
  const apart = readers.filter((r) => {
    const a = s.stages.get(r)!.attach
    return r !== target && !(a.kind === "at" && a.stage === target && a.axis === axis)
  })
  return apart.length ? `whose loop '${axis}' would not hold its other consumers ${apart.map((r) => `'${r}'`).join(", ")} (each must be computed at that loop too)` : undefined
}

/** `s` when every attachment still holds; otherwise the ScheduleError of the step that broke one. */
export const checkAttachments = (s: Schedule, primitive: string, stage: string, axis?: string): Schedule => {
  const problem = attachmentProblem(s)
  if (problem) throw new ScheduleError({ primitive, stage, ...(axis ? { axis } : {}), reason: `${problem}; compute it at root first` })
  return s
}
