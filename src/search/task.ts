// Tuning tasks: one per distinct workload (the group's TE program, its template and the target),
// so identical layers share a task. A task carries its knobs (the search space, as data).
import type { FusedGroup } from "../rewrite/fuse-ops.js"
import type { ComputeTensor } from "../ast/te/tensor.js"
import { printTE } from "../ast/te/tensor.js"
import type * as S from "../ast/schedule/schedule.js"
import { targetKey } from "../ast/target.js"
import { knobValue, type Config, type Knob, type ScheduleTarget, type Template } from "../lowering/templates/template.js"
import { searchTemplateFor } from "../lowering/templates/template-for.js"
import { canonicalConfig } from "../lowering/templates/sketch.js"

export interface Task {
  /** A short stable id: hash of the workload. */
  readonly id: string
  /** What identifies the workload: template, TE program (shapes, ops, layout), target. */
  readonly workload: string
  /** Anchor op and shapes, for people. */
  readonly label: string
  readonly template: Template
  readonly knobs: readonly Knob[]
  readonly outputs: readonly ComputeTensor[]
  readonly base: S.Schedule
  /** Groups of the program that run this workload. */
  readonly groups: readonly number[]
  readonly flops: number
}

export const fnv1a = (s: string): string => {
  let h = 2166136261
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619) >>> 0
  return h.toString(16).padStart(8, "0")
}

/** A config's canonical JSON (sorted keys) and its hash. */
export const configKey = (c: Config): string => JSON.stringify(Object.fromEntries(Object.keys(c).sort().map((k) => [k, c[k]])))
export const configHash = (c: Config): string => fnv1a(configKey(c))

/** The key of tuning records for a target (its kind, lanes and cores): src/ast/target.ts's. */
export { targetKey }

/**
 * The workload key of a group's TE program: its printed form with tensor names replaced by
 * position, so the same layer at two places in a network is the same task.
 */
export const workloadOf = (outputs: readonly ComputeTensor[], template: Template, target: string): string => {
  const text = printTE(outputs)
  const names = [...new Set(text.match(/\b[pt]\d+(_\w+)?\b/g) ?? [])]
  let canon = text
  names.forEach((n, k) => (canon = canon.replace(new RegExp(`\\b${n}\\b`, "g"), `T${k}`)))
  return `${template.name}|${target}|${canon}`
}

export interface GroupProgram {
  readonly group: FusedGroup
  readonly outputs: readonly ComputeTensor[]
  readonly base: S.Schedule
  readonly flops: number
}

/** How a target's tasks are keyed and templated, where not the CPU's (`targetKey`, `searchTemplateFor`). */
export interface TaskSpace {
  /** The key its records are filed under (the tuned lookup's `keyOf`: a GPU's is `cuda:sm_90`). */
  readonly key: string
  /** The template a group is tuned and compiled with (the cuda target's GPU rules). */
  readonly templateOf: (base: S.Schedule) => Template
}

/**
 * Tasks from the compiled groups that have a reduction anchor (the ones schedules matter for),
 * each under the template and key the target compiles with (`space`; absent: the CPU templates').
 */
export const extractTasks = (groups: readonly GroupProgram[], target: ScheduleTarget & { readonly kind: string }, space?: TaskSpace): Task[] => {
  const byWorkload = new Map<string, Task>()
  const tkey = space?.key ?? targetKey(target)
  for (const g of groups) {
    const template = space ? space.templateOf(g.base) : searchTemplateFor(g.base)
    if (!template.tunable) continue
    const workload = workloadOf(g.outputs, template, tkey)
    const prev = byWorkload.get(workload)
    if (prev) {
      byWorkload.set(workload, { ...prev, groups: [...prev.groups, g.group.id] })
      continue
    }
    const anchor = g.group.ops.find((op) => ["Conv", "ConvNCHWc", "ConvWinogradNCHWc", "MatMul", "Gemm", "DensePack", "MatMulPacked", "MaxPool", "AveragePool"].includes(op)) ?? g.group.ops[0]
    const shape = g.outputs[g.outputs.length - 1].shape.join("x")
    byWorkload.set(workload, {
      id: fnv1a(workload),
      workload,
      label: `${anchor} ${shape}`,
      template,
      knobs: template.space(g.outputs, g.base),
      outputs: g.outputs,
      base: g.base,
      groups: [g.group.id],
      flops: g.flops,
    })
  }
  return [...byWorkload.values()]
}

/** The size of a task's space. */
export const spaceSize = (knobs: readonly Knob[]): number => knobs.reduce((n, k) => n * k.candidates.length, 1)

/** The i-th config of the space (mixed radix over the knobs, first knob fastest). */
export const configAt = (knobs: readonly Knob[], index: number): Config => {
  const out: Record<string, string | number | boolean> = {}
  let rest = index
  for (const k of knobs) {
    out[k.name] = k.candidates[rest % k.candidates.length]
    rest = Math.floor(rest / k.candidates.length)
  }
  return canonicalConfig(knobs, out)
}

/**
 * A uniform draw from the space: by index where the space is small enough for an index to be
 * exact in a double, else knob by knob (the same distribution).
 */
export const sampleConfig = (knobs: readonly Knob[], size: number, rng: { readonly next: () => number }): Config =>
  size <= 2 ** 32
    ? configAt(knobs, Math.floor(rng.next() * size))
    : canonicalConfig(knobs, Object.fromEntries(knobs.map((k) => [k.name, k.candidates[Math.floor(rng.next() * k.candidates.length)]])))

/**
 * The index of a config in the space, or undefined when a knob's value is not a candidate (stale
 * record). A knob the config lacks counts as its `absent` value where it declares one (a knob
 * added after the record was written).
 */
export const indexOfConfig = (knobs: readonly Knob[], c: Config): number | undefined => {
  let idx = 0
  let mul = 1
  for (const k of knobs) {
    const i = k.candidates.indexOf(knobValue(k, c) as never)
    if (i < 0) return undefined
    idx += i * mul
    mul *= k.candidates.length
  }
  return idx
}

/**
 * Whether a config is a point of the space: every knob's value (or its absent one) one of its
 * candidates, and no key that is not a knob. What a record must be to be resumed from or applied.
 */
export const fitsKnobs = (knobs: readonly Knob[], c: Config): boolean => {
  if (indexOfConfig(knobs, c) === undefined) return false
  const names = new Set(knobs.map((k) => k.name))
  return Object.keys(c).every((k) => names.has(k))
}

/** A task straight from a TE program (tests, benchmarks of single operators). */
export const taskFromTE = (
  outputs: readonly ComputeTensor[],
  base: S.Schedule,
  target: ScheduleTarget & { readonly kind: string },
  flops: number,
  label = "te",
): Task => {
  const template = searchTemplateFor(base)
  const workload = workloadOf(outputs, template, targetKey(target))
  return { id: fnv1a(workload), workload, label, template, knobs: template.space(outputs, base), outputs, base, groups: [], flops }
}
