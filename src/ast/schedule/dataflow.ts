// The primitives that change a schedule's dataflow, each a new stage: cacheRead (a copy of a tensor
// its readers read instead), cacheWrite (the stage computes into a copy, then copies it out) and
// rfactor (a reduce axis becomes a data axis of partial results).
import { add, and, c, lt, mapExpr, mul, substitute, type Expr, type Reduce } from "../te/expr.js"
import { at, compute, reduceAxis, type ComputeTensor, type TeTensor } from "../te/tensor.js"
import { checkAttachments, freshStage, leafAxis, ScheduleError, stageOf, tensorByName, uniqueStageName, type Schedule } from "./schedule-core.js"
import type { MemoryScope, Stage } from "./stage.js"

/** Replaces reads of `from` by reads of `to` (same indices) in an op; a new op with fresh inputs. */
const redirectReads = (op: ComputeTensor, from: string, to: TeTensor): ComputeTensor => {
  const body = mapExpr(op.body, (e) => (e.kind === "read" && e.source === from ? at(to, ...e.indices) : undefined))
  const inputs = op.inputs.map((t) => (t.name === from ? to : t))
  return { ...op, body, inputs }
}

/**
 * cacheRead(tensor, scope, readers): a new stage copies `tensor` into `scope`, and the readers
 * read the copy. Schedule the copy (computeAt, bind) to make it a cooperative fetch.
 */
export const cacheRead = (s: Schedule, tensor: string, scope: MemoryScope, readers: readonly string[]): { schedule: Schedule; stage: string } => {
  const t = tensorByName(s, tensor)
  if (!t) throw new ScheduleError({ primitive: "cacheRead", stage: tensor, reason: "no such tensor" })
  for (const r of readers) {
    const st = stageOf(s, "cacheRead", r)
    if (!st.op.inputs.some((x) => x.name === tensor)) throw new ScheduleError({ primitive: "cacheRead", stage: r, reason: `does not read '${tensor}'` })
    if (st.relations.length) throw new ScheduleError({ primitive: "cacheRead", stage: r, reason: "cache the reads of a stage before splitting or fusing its axes" })
  }
  const name = uniqueStageName(s, `${tensor}.${scope}`)
  const copy = compute(name, t.shape, (...idx) => at(t, ...idx), t.dtype)
  const stages = new Map(s.stages)
  for (const r of readers) {
    const st = stages.get(r)!
    stages.set(r, { ...st, op: redirectReads(st.op, tensor, copy) })
  }
  stages.set(name, { ...freshStage(copy), scope })
  const first = Math.min(...readers.map((r) => s.order.indexOf(r)))
  const order = [...s.order.slice(0, first), name, ...s.order.slice(first)]
  return { schedule: checkAttachments({ ...s, stages, order, steps: [...s.steps, { prim: "cacheRead", tensor, scope, readers }] }, "cacheRead", tensor), stage: name }
}

/** cacheWrite(stage, scope): the stage computes into a new `scope` stage, then copies it out. */
export const cacheWrite = (s: Schedule, stage: string, scope: MemoryScope): { schedule: Schedule; stage: string } => {
  const st = stageOf(s, "cacheWrite", stage)
  if (st.relations.length || st.attach.kind !== "root") throw new ScheduleError({ primitive: "cacheWrite", stage, reason: "cache the writes of a stage before scheduling it" })
  const name = uniqueStageName(s, `${stage}.${scope}`)
  const op = st.op
  const local = compute(name, op.shape, (...idx) => substitute(op.body, new Map(op.axes.map((a, k) => [a.var.name, idx[k] as Expr]))), op.dtype)
  const out: ComputeTensor = { ...compute(stage, op.shape, (...idx) => at(local, ...idx), op.dtype) }
  const stages = new Map(s.stages).set(name, { ...freshStage(local), scope }).set(stage, { ...freshStage(out), scope: st.scope })
  // consumers keep reading `stage` by name; their ops hold the old object only as a name
  const i = s.order.indexOf(stage)
  const order = [...s.order.slice(0, i), name, ...s.order.slice(i)]
  return { schedule: checkAttachments({ ...s, stages, order, steps: [...s.steps, { prim: "cacheWrite", stage, scope }] }, "cacheWrite", stage), stage: name }
}

/**
 * rfactor(stage, axis): a reduce axis (a root reduce axis, or one half of its split) becomes a
 * data axis of a new stage of partial results; the stage then reduces those partials.
 */
export const rfactor = (s: Schedule, stage: string, axis: string): { schedule: Schedule; stage: string } => {
  const st = stageOf(s, "rfactor", stage)
  const body = st.op.body
  if (body.kind !== "reduce") throw new ScheduleError({ primitive: "rfactor", stage, axis, reason: "the stage is not a reduction" })
  const a = leafAxis(st, "rfactor", axis)
  if (a.type !== "reduce") throw new ScheduleError({ primitive: "rfactor", stage, axis, reason: "is not a reduce axis" })
  const split = st.relations.find((r) => r.kind === "split" && (r.outer === axis || r.inner === axis)) as Extract<Stage["relations"][number], { kind: "split" }> | undefined
  const root = split ? split.parent : axis
  const rootIter = body.axes.find((x) => x.var.name === root)
  if (!rootIter) throw new ScheduleError({ primitive: "rfactor", stage, axis, reason: "must be a root reduce axis or a direct half of one split" })
  if (st.relations.some((r) => r !== split)) throw new ScheduleError({ primitive: "rfactor", stage, axis, reason: "apply rfactor before other splits and fuses of the stage" })
  const name = uniqueStageName(s, `${stage}.rf`)
  const op = st.op
  const others = body.axes.filter((x) => x !== rootIter)
  const rfExtent = a.extent
  const rf = compute(name, [rfExtent, ...op.shape], (kf, ...idx) => {
    const env = new Map<string, Expr>(op.axes.map((x, k) => [x.var.name, idx[k] as Expr]))
    let axes = others
    let guard: Expr | undefined
    if (split) {
      const restName = split.outer === axis ? split.inner : split.outer
      const rest = reduceAxis(split.outer === axis ? split.factor : Math.ceil(rootIter.dom.extent / split.factor), `${restName}.r`)
      const value = split.outer === axis ? add(mul(kf, c(split.factor)), rest.var) : add(mul(rest.var, c(split.factor)), kf)
      env.set(root, add(value, c(rootIter.dom.min)))
      guard = lt(value, c(rootIter.dom.extent))
      axes = [rest, ...others]
    } else env.set(root, add(kf, c(rootIter.dom.min)))
    const source = substitute(body.source, env)
    const where = body.where ? substitute(body.where, env) : undefined
    const cond = where && guard ? and(where, guard) : (where ?? guard)
    const red: Reduce = { kind: "reduce", combiner: body.combiner, source, axes, ...(cond ? { where: cond } : {}), dtype: body.dtype }
    return red
  }, op.dtype)
  const k2 = reduceAxis(rfExtent, `${axis}.rf`)
  const top = compute(stage, op.shape, (...idx) => ({ kind: "reduce", combiner: body.combiner, source: at(rf, k2.var, ...idx), axes: [k2], dtype: body.dtype }), op.dtype)
  const stages = new Map(s.stages).set(name, freshStage(rf)).set(stage, { ...freshStage(top), attach: st.attach, scope: st.scope })
  const i = s.order.indexOf(stage)
  const order = [...s.order.slice(0, i), name, ...s.order.slice(i)]
  return { schedule: checkAttachments({ ...s, stages, order, steps: [...s.steps, { prim: "rfactor", stage, axis }] }, "rfactor", stage, axis), stage: name }
}

