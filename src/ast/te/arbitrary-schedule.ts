// Random legal schedules for the operator-level laws, using every primitive of the schedule
// language where it is legal, in the order the primitives allow:
//   1. dataflow, before any loop of the stages involved changes: rfactor (of a root reduce axis or
//      a half of its split), cacheWrite (local), cacheRead (local, sometimes shared);
//   2. computeInline of some elementwise stages;
//   3. loops of the stages (all at root still): split by a factor (often one that does not divide
//      the extent) or by nparts, tile, fuse, reorder, parallel, vectorize, unroll, pragma; and a
//      data axis of a stage that others can attach to bound to a vthread (often the outer half of
//      a split);
//   4. attachment, consumers first: computeAt into the one consumer (or the one whose loop holds the others), at its vthread axis or an axis
//      inside it where there is one, else at any leaf; computeRoot undoing some;
//   5. the attached stages' storage and loops: doubleBuffer, setScope, storageAlign, annotations.
// Illegal candidates are skipped (a ScheduleError), never recorded.
import { prng } from "../graph/arbitrary.js"
import * as S from "../schedule/schedule.js"
import type { ComputeTensor } from "./tensor.js"

type Rng = ReturnType<typeof prng>

/** A split factor for `extent`: half the time one that does not divide it (when there is one). */
const factorFor = (rng: Rng, extent: number): number => {
  const nonDividing = Array.from({ length: Math.max(0, extent - 2) }, (_, k) => k + 2).filter((f) => extent % f !== 0)
  return nonDividing.length && rng.next() < 0.5 ? rng.pick(nonDividing) : rng.int(1, extent + 1)
}

/** A random permutation of `xs`. */
const shuffle = <T>(rng: Rng, xs: readonly T[]): T[] => {
  const out = [...xs]
  for (let i = out.length - 1; i > 0; i--) {
    const j = rng.int(0, i)
    ;[out[i], out[j]] = [out[j], out[i]]
  }
  return out
}

/** The schedule under construction: each attempt either applies or is skipped (a ScheduleError). */
class Draft {
  constructor(public s: S.Schedule) {}

  /** Runs `f` on the schedule; its result, or undefined when the request is illegal. */
  try<T extends { schedule: S.Schedule } | S.Schedule>(f: (s: S.Schedule) => T): T | undefined {
    try {
      const r = f(this.s)
      this.s = "schedule" in r ? r.schedule : r
      return r
    } catch (e) {
      if (e instanceof S.ScheduleError) return undefined
      throw e
    }
  }

  stage(name: string): S.Stage {
    return this.s.stages.get(name)!
  }

  extent(name: string, axis: string): number {
    return this.stage(name).axes.get(axis)!.extent
  }

  isOutput(name: string): boolean {
    return this.s.outputs.some((o) => o.name === name)
  }

  /** Non-inlined stages, producers first. */
  live(): string[] {
    return this.s.order.filter((n) => this.stage(n).attach.kind !== "inline")
  }
}

/** One random loop transformation or annotation of a stage's leaf axis. */
const loopStep = (rng: Rng, d: Draft, name: string, menu: number): void => {
  const st = d.stage(name)
  const a = rng.pick(st.leaf)
  const ext = d.extent(name, a)
  switch (rng.int(0, menu)) {
    case 0:
    case 1:
      d.try((s) => S.split(s, name, a, { factor: factorFor(rng, ext) }))
      break
    case 2:
      d.try((s) => S.split(s, name, a, { nparts: rng.int(1, ext + 1) }))
      break
    case 3:
      d.try((s) => S.reorder(s, name, shuffle(rng, st.leaf)))
      break
    case 4:
      d.try((s) => S.unroll(s, name, a))
      break
    case 5:
      d.try((s) => S.vectorize(s, name, a))
      break
    case 6:
      d.try((s) => S.pragma(s, name, a, "auto_unroll_max_step", String(rng.int(1, 16))))
      break
    case 7: {
      const i = st.leaf.indexOf(a)
      if (i + 1 < st.leaf.length) d.try((s) => S.fuse(s, name, a, st.leaf[i + 1]))
      break
    }
    case 8: {
      const b = rng.pick(st.leaf)
      if (b !== a) d.try((s) => S.tile(s, name, a, b, factorFor(rng, ext), factorFor(rng, d.extent(name, b))))
      break
    }
    case 9:
      d.try((s) => S.parallel(s, name, a))
      break
  }
}

/** Stages still at root draw from every kind of loop step (0–9). */
const ROOT_MENU = 9
/** Attached stages' own loops draw from kinds 0–7: no tile, and no parallel loop inside another loop. */
const ATTACHED_MENU = 7

/** 1. rfactor, cacheWrite, cacheRead: each a new stage, made before any loop is transformed. */
const dataflow = (rng: Rng, d: Draft): void => {
  const reductions = d.s.order.filter((n) => d.stage(n).op.body.kind === "reduce")
  if (reductions.length && rng.next() < 0.2) {
    const name = rng.pick(reductions)
    const red = d.stage(name).leaf.filter((a) => d.stage(name).axes.get(a)!.type === "reduce")
    const a = rng.pick(red)
    if (rng.next() < 0.6) {
      const sp = d.try((s) => S.split(s, name, a, { factor: factorFor(rng, d.extent(name, a)) }))
      if (sp) d.try((s) => S.rfactor(s, name, rng.next() < 0.5 ? sp.outer : sp.inner))
    } else d.try((s) => S.rfactor(s, name, a))
  }
  if (rng.next() < 0.4) {
    const name = rng.pick(d.s.order)
    d.try((s) => S.cacheWrite(s, name, "local"))
  }
  for (let k = rng.pick([0, 1, 1, 2]); k > 0; k--) {
    const reader = rng.pick(d.s.order)
    const inputs = d.stage(reader).op.inputs
    if (!inputs.length) continue
    const tensor = rng.pick(inputs).name
    d.try((s) => S.cacheRead(s, tensor, rng.next() < 0.8 ? "local" : "shared", [reader]))
  }
}

/** 2. Some elementwise intermediates inlined into their consumers. */
const inlining = (rng: Rng, d: Draft): void => {
  for (const name of [...d.s.order].reverse()) {
    if (d.isOutput(name) || d.stage(name).op.body.kind === "reduce") continue
    if (rng.next() < 0.3) d.try((s) => S.computeInline(s, name))
  }
}

/** The stages whose one (effective) consumer is `name`: what could attach to it. */
const attachable = (d: Draft, name: string): string[] =>
  d.live().filter((p) => !d.isOutput(p) && p !== name && S.effectiveConsumers(d.s, p).length === 1 && S.effectiveConsumers(d.s, p)[0] === name)

/** 3. Loop transformations at root, then a vthread for some stages that others can attach to. */
const rootLoops = (rng: Rng, d: Draft, maxSteps: number): void => {
  for (let k = rng.int(0, maxSteps); k > 0; k--) loopStep(rng, d, rng.pick(d.live()), ROOT_MENU)
  for (const name of d.live()) {
    const hosts = attachable(d, name).length > 0
    if (rng.next() >= (hosts ? 0.6 : 0.1)) continue
    const st = d.stage(name)
    // (a vthread of one iteration interleaves nothing: an axis of two or more where there is one)
    const data = st.leaf.filter((a) => st.axes.get(a)!.type === "data")
    const wide = data.filter((a) => st.axes.get(a)!.extent >= 2)
    if (!data.length) continue
    const a = rng.pick(wide.length ? wide : data)
    const ext = d.extent(name, a)
    const sp = ext >= 2 && rng.next() < 0.8 ? d.try((s) => S.split(s, name, a, rng.next() < 0.6 ? { nparts: rng.int(2, Math.min(4, ext)) } : { factor: factorFor(rng, ext) })) : undefined
    d.try((s) => S.bind(s, name, sp ? sp.outer : a, "vthread"))
  }
}

/** The loop of one reader that every other reader is computed at, if there is one. */
const siblingLoop = (d: Draft, readers: readonly string[]): { stage: string; axis: string } | undefined => {
  for (const target of readers) {
    const others = readers.filter((r) => r !== target).map((r) => d.stage(r).attach)
    const first = others[0]
    if (first.kind === "at" && first.stage === target && others.every((a) => a.kind === "at" && a.stage === target && a.axis === first.axis)) return { stage: target, axis: first.axis }
  }
  return undefined
}

/** 4. computeAt, consumers first (so a stage may be attached into one that is attached itself: nested attachments). */
const attachments = (rng: Rng, d: Draft): void => {
  for (const name of [...d.live()].reverse()) {
    if (d.isOutput(name)) continue
    const readers = S.effectiveConsumers(d.s, name)
    // several consumers, all but one computed at one loop of that one: computed there too (their union)
    const shared = readers.length > 1 ? siblingLoop(d, readers) : undefined
    if (shared) {
      if (rng.next() < 0.75) d.try((s) => S.computeAt(s, name, shared.stage, shared.axis))
      continue
    }
    if (readers.length !== 1 || rng.next() >= 0.75) continue
    const target = readers[0]
    const leaf = d.stage(target).leaf
    const vt = leaf.findIndex((a) => d.stage(target).annotations.get(a)?.kind === "vthread")
    const data = leaf.filter((a) => d.stage(target).axes.get(a)!.type === "data")
    const r = rng.next()
    const axis = vt >= 0 && r < 0.6 ? leaf[vt] : vt >= 0 && r < 0.85 ? rng.pick(leaf.slice(vt)) : data.length && rng.next() < 0.8 ? rng.pick(data) : rng.pick(leaf)
    if (!d.try((s) => S.computeAt(s, name, target, axis))) continue
    if (rng.next() < 0.08) d.try((s) => S.computeRoot(s, name))
  }
  // an inlined stage computed at root again, now and then
  for (const name of d.s.order) if (d.stage(name).attach.kind === "inline" && rng.next() < 0.1) d.try((s) => S.computeRoot(s, name))
}

/** 5. Storage (doubleBuffer, setScope, storageAlign) and the attached stages' own loops. */
const storage = (rng: Rng, d: Draft): void => {
  for (const name of d.live()) {
    const st = d.stage(name)
    if (st.attach.kind === "at") {
      if (rng.next() < 0.5) loopStep(rng, d, name, ATTACHED_MENU)
      if (rng.next() < 0.3) d.try((s) => S.doubleBuffer(s, name))
    }
    if (!d.isOutput(name) && rng.next() < 0.12) d.try((s) => S.setScope(s, name, rng.pick(["local", "shared"] as const)))
    if (!d.isOutput(name) && st.op.shape.length >= 2 && rng.next() < 0.2)
      d.try((s) => S.storageAlign(s, name, rng.int(0, st.op.shape.length - 2), rng.pick([2, 4, 8]), rng.int(0, 3)))
  }
}

/**
 * Random legal schedule steps for a compute (illegal candidates are skipped, never recorded); up
 * to `maxSteps` random loop transformations of the stages at root, besides the other phases.
 */
export const randomSchedule = (outputs: readonly ComputeTensor[], seed: number, maxSteps = 8): S.Schedule => {
  const rng = prng(seed ^ 0x5bd1e995)
  const d = new Draft(S.createSchedule(outputs))
  dataflow(rng, d)
  inlining(rng, d)
  rootLoops(rng, d, maxSteps)
  attachments(rng, d)
  storage(rng, d)
  return d.s
}

/**
 * The classic GPU schedule of a matmul C = A·B (the laws' and the cuda goldens' fixed one): C's
 * rows and columns split by `tile` and bound to blockIdx.y/x and threadIdx.y/x, the reduction `k`
 * split by `kt`, and A and B read into shared memory at each outer reduction step, each tile
 * fetched cooperatively (its rows and columns spread over the block's threads).
 */
export const sharedTiledMatmul = (outputs: readonly ComputeTensor[], tile: number, kt: number): S.Schedule => {
  let s = S.createSchedule(outputs)
  const As = S.cacheRead(s, "A", "shared", ["C"])
  const Bs = S.cacheRead(As.schedule, "B", "shared", ["C"])
  s = Bs.schedule
  const i = S.split(s, "C", "C.i", { factor: tile })
  const j = S.split(i.schedule, "C", "C.j", { factor: tile })
  const k = S.split(j.schedule, "C", "k", { factor: kt })
  s = S.reorder(k.schedule, "C", [i.outer, j.outer, i.inner, j.inner, k.outer, k.inner])
  s = S.bind(s, "C", i.outer, "blockIdx.y")
  s = S.bind(s, "C", j.outer, "blockIdx.x")
  s = S.bind(s, "C", i.inner, "threadIdx.y")
  s = S.bind(s, "C", j.inner, "threadIdx.x")
  for (const st of [As.stage, Bs.stage]) {
    s = S.computeAt(s, st, "C", k.outer)
    const leaf = s.stages.get(st)!.leaf
    const r = S.split(s, st, leaf[0], { factor: tile })
    const c2 = S.split(r.schedule, st, leaf[1], { factor: tile })
    s = S.bind(S.bind(c2.schedule, st, r.inner, "threadIdx.y"), st, c2.inner, "threadIdx.x")
  }
  return s
}
