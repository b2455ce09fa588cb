// The generated search space (Ansor's sketch + annotations): for any group built around a
// reduction (conv, matmul, dense, depthwise, pooling, inner reductions), knobs derived from the
// anchor's loop structure alone — no hand-written space per op.
//   sketch: multi-level tiling "S S R R S": every data axis tiled in two levels (an L1 tile of
//   register tiles, `sk_s<i>` = "a.b": a register tiles of b), every reduce axis split once
//   (`sk_r<j>`), the register tile innermost under the reduction (its sums stay in registers);
//   annotations: vectorize the innermost tile axis, auto-unroll the innermost loops up to a max
//   step, parallel over the outermost tile loops fused (how many), and where the anchor is
//   computed relative to its epilogue (at the register tile, at the L1 tile, or at root).
// `searchable(template)` puts this space beside a template's own under a `sketch` knob whose
// absent value is the template: the template's defaults (the untuned schedules) and older tuning
// logs are unchanged; the generated knobs are active only under `sketch: "generated"`.
import * as S from "../../ast/schedule/schedule.js"
import { anchorStage, dataLeaves, divisors, parallelize, tileStages } from "./common.js"
import { knobActive, type Config, type Knob, type Template } from "./template.js"

/** A register tile's factor at most, and an L1 tile's count of register tiles at most. */
const MAX_TILE = 64

/** Unroll max steps (0: none; Ansor's auto_unroll_max_step). */
export const UNROLL_STEPS = [0, 16, 64, 512] as const

/** "a.b" factor pairs of an extent: b (the register tile) divides it, a divides what is left. */
export const tilePairs = (extent: number): string[] => {
  const out: string[] = []
  for (const b of divisors(extent, MAX_TILE)) for (const a of divisors(extent / b, MAX_TILE)) out.push(`${a}.${b}`)
  return out
}

export const parsePair = (v: unknown): [number, number] => {
  const [a, b] = String(v).split(".").map(Number)
  return [a || 1, b || 1]
}

const GENERATED = { knob: "sketch", value: "generated" } as const
const TEMPLATE = { knob: "sketch", value: "template" } as const

/** The generated knobs of a group (none without a reduction anchor). */
export const sketchSpace = (base: S.Schedule): Knob[] => {
  const st = anchorStage(base)
  if (!st) return []
  const data = dataLeaves(st)
  const red = st.leaf.filter((a) => st.axes.get(a)!.type === "reduce")
  const extent = (a: string) => st.axes.get(a)!.extent
  const computeAt = tileStages(base, st) ? ["inner", "tile", "root"] : ["root"]
  return [
    ...data.map((a, i): Knob => ({ kind: "choice", name: `sk_s${i}`, extent: extent(a), levels: 2, candidates: tilePairs(extent(a)), absent: "1.1", when: GENERATED })),
    ...red.map((a, j): Knob => ({ kind: "choice", name: `sk_r${j}`, extent: extent(a), candidates: divisors(extent(a), MAX_TILE), absent: 1, when: GENERATED })),
    { kind: "choice", name: "sk_vectorize", candidates: [true, false], absent: false, when: GENERATED },
    { kind: "choice", name: "sk_unroll", candidates: [...UNROLL_STEPS], absent: 0, when: GENERATED },
    { kind: "choice", name: "sk_parallel", candidates: Array.from({ length: Math.min(data.length, 3) + 1 }, (_, k) => k), absent: 0, when: GENERATED },
    { kind: "choice", name: "sk_compute_at", candidates: computeAt, absent: computeAt[0], when: GENERATED },
  ]
}

/** Fuses the first `count` of `axes` (adjacent, outermost first) and marks the loop parallel. */
const parallelFirst = (s0: S.Schedule, stage: string, axes: readonly string[], count: number): { schedule: S.Schedule; loops: string[] } => {
  if (count <= 0 || axes.length === 0) return { schedule: s0, loops: [...axes] }
  let s = s0
  let cur = axes[0]
  for (const next of axes.slice(1, count)) {
    const f = S.fuse(s, stage, cur, next)
    s = f.schedule
    cur = f.fused
  }
  const loops = [cur, ...axes.slice(Math.max(count, 1))]
  return { schedule: s.stages.get(stage)!.axes.get(cur)!.extent > 1 ? S.parallel(s, stage, cur) : s, loops }
}

/**
 * Unrolls the innermost loops of `stage` (innermost first) while their product stays within
 * `step`; a vectorized loop counts as one step and stops nothing.
 */
const autoUnroll = (s0: S.Schedule, stage: string, step: number): S.Schedule => {
  if (step <= 1) return s0
  let s = s0
  const st = s.stages.get(stage)!
  let product = 1
  for (const a of [...st.leaf].reverse()) {
    const kind = st.annotations.get(a)?.kind ?? "serial"
    const extent = st.axes.get(a)!.extent
    if (kind === "vectorized") continue
    if (kind !== "serial" || product * extent > step) break
    product *= extent
    if (extent > 1) s = S.unroll(s, stage, a)
  }
  return s
}

/** Splits `axes` of a stage by their register tiles `b` (and L1 tiles `a` where given): [outer, mid, inner] each. */
const tileAxes = (s0: S.Schedule, stage: string, axes: readonly string[], pairs: readonly [number, number][], twoLevels: boolean) => {
  let s = s0
  const outer: string[] = []
  const mid: string[] = []
  const inner: string[] = []
  axes.forEach((a, i) => {
    const [ta, tb] = pairs[i]
    const sb = S.split(s, stage, a, { factor: tb })
    s = sb.schedule
    inner.push(sb.inner)
    if (twoLevels) {
      const sa = S.split(s, stage, sb.outer, { factor: ta })
      s = sa.schedule
      outer.push(sa.outer)
      mid.push(sa.inner)
    } else outer.push(sb.outer)
  })
  return { schedule: s, outer, mid, inner }
}

const splitReduce = (s0: S.Schedule, stage: string, axes: readonly string[], factors: readonly number[]) => {
  let s = s0
  const outer: string[] = []
  const inner: string[] = []
  axes.forEach((a, j) => {
    const sp = S.split(s, stage, a, { factor: factors[j] })
    s = sp.schedule
    outer.push(sp.outer)
    inner.push(sp.inner)
  })
  return { schedule: s, outer, inner }
}

const vectorizeLast = (s: S.Schedule, stage: string, axis: string | undefined, on: boolean): S.Schedule => {
  if (!on || !axis) return s
  const e = s.stages.get(stage)!.axes.get(axis)!.extent
  return e > 1 && e <= S.MAX_VECTORIZED ? S.vectorize(s, stage, axis) : s
}

/** The generated schedule of a config (every config of `sketchSpace` is legal). */
export const applySketch = (base: S.Schedule, config: Config): S.Schedule => {
  const st = anchorStage(base)
  if (!st) return base
  const data = dataLeaves(st)
  const red = st.leaf.filter((a) => st.axes.get(a)!.type === "reduce")
  const pairs = data.map((_, i) => parsePair(config[`sk_s${i}`] ?? "1.1"))
  const rf = red.map((_, j) => Number(config[`sk_r${j}`] ?? 1))
  const vec = config.sk_vectorize === true
  const step = Number(config.sk_unroll ?? 0)
  const par = Number(config.sk_parallel ?? 0)
  const at = String(config.sk_compute_at ?? "root")
  const tiled = at !== "root" ? tileStages(base, st) : undefined
  if (!tiled) {
    // the anchor tiled where it is: [outer, mid, reduce outer, reduce inner, register tile]
    const t = tileAxes(base, st.name, data, pairs, true)
    const r = splitReduce(t.schedule, st.name, red, rf)
    let s = S.reorder(r.schedule, st.name, [...t.outer, ...t.mid, ...r.outer, ...r.inner, ...t.inner])
    s = parallelFirst(s, st.name, t.outer, par).schedule
    s = vectorizeLast(s, st.name, t.inner.at(-1), vec)
    s = autoUnroll(s, st.name, step)
    return parallelize(s, vec, st.name)
  }
  // the output (epilogue, or the anchor's copy) tiled in two levels; the anchor computed at its
  // register tile ("inner") or its L1 tile ("tile"), its reduction outside its own register tile
  const { out, local } = tiled
  const odata = dataLeaves(tiled.schedule.stages.get(out)!)
  const t = tileAxes(tiled.schedule, out, odata, pairs, true)
  let s = S.reorder(t.schedule, out, [...t.outer, ...t.mid, ...t.inner])
  const p = parallelFirst(s, out, t.outer, par)
  s = vectorizeLast(p.schedule, out, t.inner.at(-1), vec)
  s = S.computeAt(s, local, out, at === "inner" ? t.mid.at(-1)! : p.loops.at(-1)!)
  const ls = s.stages.get(local)!
  const ldata = dataLeaves(ls)
  const lred = ls.leaf.filter((a) => ls.axes.get(a)!.type === "reduce")
  const lt = tileAxes(s, local, ldata, pairs, false)
  const lr = splitReduce(lt.schedule, local, lred, rf)
  s = S.reorder(lr.schedule, local, [...lt.outer, ...lr.outer, ...lr.inner, ...lt.inner])
  s = vectorizeLast(s, local, lt.inner.at(-1), vec)
  s = autoUnroll(s, local, step)
  return parallelize(s, vec, out)
}

/**
 * The canonical form of a config: knobs that are not active in it (the template's under the
 * generated sketch and the other way round) at their absent value (else their first candidate),
 * so two configs that give one schedule are one config.
 */
export const canonicalConfig = (knobs: readonly Knob[], c: Config): Config => {
  if (!knobs.some((k) => k.when)) return c
  const out: Record<string, string | number | boolean> = { ...c }
  for (const k of knobs) if (!knobActive(knobs, k, c)) out[k.name] = k.kind === "choice" && k.absent !== undefined ? k.absent : k.candidates[0]
  return out
}

/**
 * A template with the generated space beside its own (a `sketch` knob chooses; absent: the
 * template), for any group with a reduction anchor; the template itself otherwise. Its name,
 * defaults and the schedules of its defaults are the template's.
 */
export const searchable = (template: Template): Template => ({
  name: template.name,
  tunable: true,
  space: (outputs, base) => {
    const generated = sketchSpace(base)
    const own = template.space(outputs, base)
    if (generated.length === 0) return own
    return [
      ...own.map((k): Knob => ({ ...k, when: TEMPLATE })),
      { kind: "choice", name: "sketch", candidates: ["template", "generated"], absent: "template" },
      ...generated,
    ]
  },
  defaults: (knobs, target) => {
    const own = knobs.filter((k) => k.when?.value !== "generated" && k.name !== "sketch")
    const d = template.defaults(own, target)
    if (!knobs.some((k) => k.name === "sketch")) return d
    return canonicalConfig(knobs, { ...d, sketch: "template" })
  },
  apply: (outputs, base, config) => (config.sketch === "generated" ? applySketch(base, config) : template.apply(outputs, base, config)),
})
