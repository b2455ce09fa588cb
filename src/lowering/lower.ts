// Lowering a schedule to a TIR PrimFunc: inline stages substituted into their consumers, a loop
// nest per stage over its leaf axes (root axes recovered through the split/fuse relations, with
// guards where a split does not divide), reductions as an init and an update, computeAt stages
// nested in their consumer's loop over the region one iteration needs (bound inference), then the
// TIR passes (simplify, …).
import { Data, Effect } from "effect"
import { add, and, c, floordiv, floormod, ge, lt, mapExpr, mul, read, substitute, v, type Expr, type Var } from "../ast/te/expr.js"
import { simplify, simplifyMemo, intervalOf, constDifference, type Bounds } from "../ast/te/simplify.js"
import type { ComputeTensor, TeTensor } from "../ast/te/tensor.js"
import { effectiveConsumers, type Schedule, type Stage } from "../ast/schedule/schedule.js"
import { alignedStrides } from "../ast/tir/analysis.js"
import { matchIntrinsicRegions } from "../ast/schedule/tensorize-match.js"
import { seq, type Buffer, type ForKind, type PrimFunc, type Stmt } from "../ast/tir/tir.js"

export class LowerError extends Data.TaggedError("LowerError")<{ readonly stage: string; readonly reason: string }> {
  override get message(): string {
    return `lowering stage '${this.stage}': ${this.reason}`
  }
}

/** Bodies with inline stages substituted (reads of an inlined tensor replaced by its definition). */
const inlineBodies = (s: Schedule): Map<string, Expr> => {
  const bodies = new Map<string, Expr>()
  for (const name of s.order) {
    const st = s.stages.get(name)!
    const body = mapExpr(st.op.body, (e) => {
      if (e.kind !== "read") return undefined
      const src = s.stages.get(e.source)
      if (!src || src.attach.kind !== "inline") return undefined
      const def = bodies.get(e.source)!
      const env = new Map<string, Expr>(src.op.axes.map((a, k) => [a.var.name, e.indices[k]]))
      return substitute(def, env)
    })
    bodies.set(name, body)
  }
  return bodies
}

/** Root axis values from leaf loop vars, following the relations backwards. */
const rootValues = (st: Stage): { values: Map<string, Expr>; guards: Expr[] } => {
  const values = new Map<string, Expr>(st.leaf.map((a) => [a, v(a)]))
  const guards: Expr[] = []
  for (let k = st.relations.length - 1; k >= 0; k--) {
    const r = st.relations[k]
    if (r.kind === "split") {
      const parent = add(mul(values.get(r.outer)!, c(r.factor)), values.get(r.inner)!)
      values.set(r.parent, parent)
      const ext = st.axes.get(r.parent)!.extent
      if (ext % r.factor !== 0) guards.push(lt(parent, c(ext)))
    } else {
      const inner = st.axes.get(r.inner)!.extent
      const f = values.get(r.fused)!
      values.set(r.outer, floordiv(f, c(inner)))
      values.set(r.inner, floormod(f, c(inner)))
    }
  }
  // a reduce axis over [min, min + extent) loops from 0: its value is its loop's plus min
  if (st.op.body.kind === "reduce") for (const a of st.op.body.axes) if (a.dom.min !== 0) values.set(a.var.name, add(values.get(a.var.name)!, c(a.dom.min)))
  return { values, guards }
}

const forKind = (st: Stage, axis: string): { forKind: ForKind; thread?: Stage["annotations"] extends ReadonlyMap<string, infer A> ? A extends { thread?: infer T } ? T : never : never } => {
  const a = st.annotations.get(axis)
  if (!a) return { forKind: "serial" }
  return a.thread ? { forKind: a.kind, thread: a.thread } : { forKind: a.kind }
}

interface Region {
  /** Start of the region per producer dim, in terms of the consumer's outer loop vars. */
  readonly start: readonly Expr[]
  readonly extent: readonly number[]
  /** Double buffering: which of the two copies this iteration of the attach loop uses. */
  readonly parity?: Expr
  /** Whether some iteration's region runs past the producer's shape (its loop nest guards those elements). */
  readonly overhangs?: boolean
}

/** Everything the lowering of one stage needs to know about where it writes. */
interface Target {
  readonly buffer: string
  /** Offsets subtracted from indices (computeAt regions). */
  readonly offset: readonly Expr[]
  /** A leading index (double buffering's copy). */
  readonly prefix?: Expr
}

export const lowerSync = (s: Schedule, name = "main"): PrimFunc => {
  // simplify's memo for this lowering: its stages' stores, guards and regions repeat index expressions
  const memo = simplifyMemo()
  const simp = (e: Expr, bounds: Bounds = new Map()): Expr => simplify(e, bounds, memo)
  const bodies = inlineBodies(s)
  const outputs = new Set(s.outputs.map((o) => o.name))
  const placeholders: TeTensor[] = []
  const seen = new Set<string>()
  const visit = (t: TeTensor) => {
    if (seen.has(t.name)) return
    seen.add(t.name)
    if (t.kind === "placeholder") placeholders.push(t)
    else t.inputs.forEach(visit)
  }
  for (const n of s.order) s.stages.get(n)!.op.inputs.forEach((t) => t.kind === "placeholder" && visit(t))
  const bufferOf = (t: TeTensor, scope: Buffer["scope"] = "global"): Buffer => ({ name: t.name, dtype: t.dtype, shape: t.shape, scope })

  // attached stages by their target
  const attached = new Map<string, Stage[]>()
  for (const n of s.order) {
    const st = s.stages.get(n)!
    if (st.attach.kind === "at") attached.set(st.attach.stage, [...(attached.get(st.attach.stage) ?? []), st])
  }
  // an attached stage's buffer is `<stage>.local`, unless a stage or input already has that name
  // (cacheRead and cacheWrite name their stages `<tensor>.<scope>`)
  const taken = new Set([...s.order, ...placeholders.map((t) => t.name)])
  const localName = new Map<string, string>()
  for (const n of s.order) {
    if (s.stages.get(n)!.attach.kind !== "at") continue
    let name = `${n}.local`
    for (let k = 1; taken.has(name); k++) name = `${n}.local${k}`
    taken.add(name)
    localName.set(n, name)
  }

  /** Reads of attached producers are redirected to their local buffers, shifted by their region start. */
  const regions = new Map<string, Region>()
  const redirect = (e: Expr): Expr =>
    mapExpr(e, (x) => {
      if (x.kind !== "read") return undefined
      const r = regions.get(x.source)
      if (!r) return undefined
      const idx = x.indices.map((i, k) => simp(add(redirect(i), mul(r.start[k], c(-1)))))
      return read(localName.get(x.source)!, r.parity ? [r.parity, ...idx] : idx, x.dtype)
    })

  // (`outer`: the loops this stage is computed inside — a region's start reads their variables)
  const lowerStage = (st: Stage, target: Target, region?: Region, outer: Bounds = new Map()): Stmt => {
    const loops: Bounds = new Map([...outer, ...st.leaf.map((a) => [a, { min: 0, max: st.axes.get(a)!.extent - 1 }] as const)])
    // regions of the stages attached inside this one, before any read is redirected to them
    // (consumers first: a stage read by a sibling computed at the same loop covers that sibling's region too)
    for (const p of [...(attached.get(st.name) ?? [])].reverse())
      if (p.attach.kind === "at") {
        const at = p.attach.axis
        const siblings = effectiveConsumers(s, p.name).filter((c) => c !== st.name).map((c) => ({ stage: s.stages.get(c)!, region: regions.get(c)! }))
        const r = regionFor(p, st, at, region, siblings)
        const overhangs = r.start.some((e, k) => {
          const at = intervalOf(e, loops)
          return at.min < 0 || at.max + r.extent[k] > p.op.shape[k]
        })
        regions.set(p.name, { ...r, ...(p.doubleBuffer ? { parity: floormod(v(p.attach.axis), c(2)) } : {}), ...(overhangs ? { overhangs } : {}) })
      }
    const op: ComputeTensor = st.op
    const body = bodies.get(st.name)!
    const { values, guards } = rootValues(st)
    const dataIdx = op.axes.map((a) => values.get(a.var.name)!)
    // a stage computed over a region: its data root vars are offset by the region start
    const absIdx = region ? dataIdx.map((e, k) => add(e, region.start[k])) : dataIdx
    const env = new Map<string, Expr>(op.axes.map((a, k) => [a.var.name, absIdx[k]]))
    const withPrefix = (idx: Expr[]): Expr[] => (target.prefix ? [target.prefix, ...idx] : idx)
    const storeIdx = withPrefix(absIdx.map((e, k) => simp(add(e, mul(target.offset[k] ?? c(0), c(-1))))))
    const regionGuards = region ? absIdx.flatMap((e, k) => [lt(e, c(op.shape[k])), ge(e, c(0))]) : []
    const extentOf = (a: string) => st.axes.get(a)!.extent
    const bounds = new Map(st.leaf.map((a) => [a, { min: 0, max: extentOf(a) - 1 }]))
    const guard = (stmt: Stmt, conds: Expr[]): Stmt => {
      const cond = conds.map((x) => simp(x, bounds)).filter((x) => !(x.kind === "const" && x.value === 1)).reduce<Expr | undefined>((a, b) => (a ? and(a, b) : b), undefined)
      return cond ? { kind: "if", cond, then: stmt } : stmt
    }
    const tensorized = (): Stmt => {
      // a stage computed over a region reads its inputs at its absolute indices (the region's
      // start added to its root vars), as its loop nest would; its output base is region-relative
      const absolute = region ? { ...st, op: { ...op, body: substitute(op.body, new Map(op.axes.map((a, k) => [a.var.name, add(v(a.var.name), region.start[k])]))) } } : st
      const m = matchIntrinsicRegions(absolute, st.tensorize!.axis, st.tensorize!.intrin)
      if (typeof m === "string") throw new LowerError({ stage: st.name, reason: `tensorize: ${m}` })
      // (an intrinsic has no guards: it cannot compute the part of a region that lies in the tensor)
      if (region?.overhangs) throw new LowerError({ stage: st.name, reason: "tensorize: the region it is computed over runs past the tensor in some iteration of the loop it is attached at (split that loop by a factor that divides the tensor)" })
      const shift = (e: Expr, k: number, start: readonly Expr[] | undefined) => simp(add(e, mul(start?.[k] ?? c(0), c(-1))))
      const absOut = m.output.map((e, k) => (region ? add(e, region.start[k]) : e))
      return {
        kind: "intrinsic",
        intrin: st.tensorize!.intrin,
        output: { buffer: target.buffer, base: withPrefix(absOut.map((e, k) => shift(e, k, target.offset))) },
        inputs: m.inputs.map((r) => {
          const reg = regions.get(r.tensor)
          if (reg?.parity) throw new LowerError({ stage: st.name, reason: `tensorize reads the double-buffered '${r.tensor}', which is not supported` })
          return reg ? { buffer: localName.get(r.tensor)!, base: r.base.map((e, k) => shift(e, k, reg.start)) } : { buffer: r.tensor, base: r.base }
        }),
      }
    }
    const wrap = (axes: readonly string[], inner: Stmt): Stmt =>
      axes.reduceRight<Stmt>((acc, a) => {
        if (st.tensorize && st.tensorize.axis === a) return tensorized()
        if (st.tensorize && st.leaf.indexOf(a) > st.leaf.indexOf(st.tensorize.axis)) return acc
        const kids = (attached.get(st.name) ?? []).filter((p) => p.attach.kind === "at" && p.attach.axis === a)
        // attached producers: allocated around their computation and the rest of this loop body
        const withKids = kids.reduceRight<Stmt>((inner, p) => {
          const { buffer, stmt } = lowerAttached(p, loops)
          if (buffer.scope === "shared") {
            // a cooperative fetch: every thread waits until the tile is complete, and until every
            // thread is done with the previous tile before it is overwritten
            hoisted.push(buffer)
            return seq([{ kind: "barrier" }, stmt, { kind: "barrier" }, inner])
          }
          return { kind: "allocate", buffer, body: seq([stmt, inner]) }
        }, acc)
        const pr = st.pragmas.get(a)
        return { kind: "for", var: v(a), min: c(0), extent: c(extentOf(a)), ...forKind(st, a), body: withKids, ...(pr ? { pragmas: pr } : {}) }
      }, inner)

    if (body.kind !== "reduce") {
      const value = redirect(substitute(body, env))
      const store: Stmt = { kind: "store", buffer: target.buffer, indices: storeIdx, value: simp(value, bounds) }
      return wrap(st.leaf, guard(store, [...guards, ...regionGuards]))
    }
    // reduction: init over the data axes, then the update
    const redEnv = new Map(env)
    for (const a of body.axes) redEnv.set(a.var.name, values.get(a.var.name)!)
    const acc = read(target.buffer, storeIdx, op.dtype)
    const x = redirect(substitute(body.source, redEnv))
    const combined = substitute(body.combiner.result, new Map([[body.combiner.lhs.name, acc as Expr], [body.combiner.rhs.name, x]]))
    const where = body.where ? [redirect(substitute(body.where, redEnv))] : []
    const update: Stmt = guard({ kind: "store", buffer: target.buffer, indices: storeIdx, value: simp(combined, bounds) }, [...guards, ...regionGuards, ...where])
    const init = (indices: readonly Expr[]): Stmt => ({ kind: "store", buffer: target.buffer, indices, value: c(body.combiner.identity(op.dtype), op.dtype) })
    const isData = (a: string) => {
      // a leaf axis is data when every root axis it derives from is data
      const ax = st.axes.get(a)!
      return ax.type === "data"
    }
    const firstReduce = st.leaf.findIndex((a) => !isData(a))
    // (a tensorized nest is one update instruction: its init is a separate nest before it)
    const dataFirst = !st.tensorize && (firstReduce < 0 || st.leaf.slice(firstReduce).every((a) => !isData(a)))
    if (dataFirst) {
      // init just outside the reduce loops, where every data axis is bound
      const outer = firstReduce < 0 ? st.leaf : st.leaf.slice(0, firstReduce)
      const inner = firstReduce < 0 ? [] : st.leaf.slice(firstReduce)
      const dataGuards = guards.filter((g) => !body.axes.some((a) => [...collectVars(g)].some((n) => deriveFrom(st, n, a.var.name))))
      return wrap(outer, seq([guard(init(storeIdx), [...dataGuards, ...regionGuards]), wrap(inner, update)]))
    }
    // reduce axes outside data axes: a separate init nest over the data root axes
    const initVars = op.axes.map((a, k) => v(`${st.name}.init${k}`))
    const initNest = op.axes.reduceRight<Stmt>(
      (accum, a, k) => ({ kind: "for", var: initVars[k], min: c(0), extent: c(region ? region.extent[k] : a.dom.extent), forKind: "serial", body: accum }),
      guard(
        init(withPrefix(initVars.map((iv, k) => (region ? simp(add(add(iv, region.start[k]), mul(target.offset[k] ?? c(0), c(-1)))) : iv)))),
        region ? initVars.flatMap((iv, k) => [lt(add(iv, region.start[k]), c(op.shape[k])), ge(add(iv, region.start[k]), c(0))]) : [],
      ),
    )
    return seq([initNest, wrap(st.leaf, update)])
  }

  /** The threadIdx- and vthread-bound loops around stage `st`'s loops: its targets' (and theirs) up to the loops it is computed at. */
  const enclosingThreads = (st: Stage): { name: string; extent: number }[] => {
    if (st.attach.kind !== "at") return []
    const t = s.stages.get(st.attach.stage)!
    const outer = t.leaf.slice(0, t.leaf.indexOf(st.attach.axis) + 1).filter((a) => sharedAcross(t, a))
    return [...enclosingThreads(t), ...outer.map((a) => ({ name: a, extent: t.axes.get(a)!.extent }))]
  }

  /**
   * The region of `p` one iteration of `consumer`'s loop `axis` reads (bound inference); where the
   * consumer is itself computed over a region (nested attachments), its root vars are offset by
   * that region's start, in terms of the loops around it. `siblings`: the other consumers, computed
   * at the same loop over their regions — the union of what they and the consumer read (TVM's).
   */
  const regionFor = (p: Stage, consumer: Stage, axis: string, consumerRegion: Region | undefined, siblings: readonly { stage: Stage; region: Region }[] = []): Region => {
    const pos = consumer.leaf.indexOf(axis)
    // shared memory serves every thread and virtual thread of a block: their indices are relaxed
    // like inner loops (the consumer's own up to the attach loop, and those of the loops it is
    // computed in) — TVM's bound inference relaxes a shared stage over threadIdx and vthread alike
    // (both rank 1), so one fetch a step fills the tile of every vthread
    const relaxed = p.scope === "shared" ? consumer.leaf.slice(0, pos + 1).filter((a) => sharedAcross(consumer, a)) : []
    const outerThreads = p.scope === "shared" ? enclosingThreads(s.stages.get(consumer.name)!) : []
    const innerAxes = [...relaxed, ...consumer.leaf.slice(pos + 1)]
    const { values } = rootValues(consumer)
    if (consumerRegion) consumer.op.axes.forEach((a, k) => values.set(a.var.name, add(values.get(a.var.name)!, consumerRegion.start[k])))
    const cbody = bodies.get(consumer.name)!
    const innerBounds: Bounds = new Map([
      ...innerAxes.map((a) => [a, { min: 0, max: consumer.axes.get(a)!.extent - 1 }] as const),
      ...outerThreads.map((t) => [t.name, { min: 0, max: t.extent - 1 }] as const),
    ])
    innerAxes.push(...outerThreads.map((t) => t.name))
    const zeroInner = new Map<string, Expr>(innerAxes.map((a) => [a, c(0)]))
    // each read's indices, with the bounds of the loops inside the attach point it runs in
    const reads: { idx: Expr[]; inner: Bounds; zero: Map<string, Expr> }[] = []
    const scan = (body: Expr, vals: Map<string, Expr>, inner: Bounds, zero: Map<string, Expr>) => {
      const visit = (e: Expr) =>
        mapExpr(e, (x) => {
          if (x.kind === "read" && x.source === p.name) reads.push({ idx: x.indices.map((i) => simp(substitute(i, vals))), inner, zero })
          return undefined
        })
      if (body.kind === "reduce") {
        visit(body.source)
        if (body.where) visit(body.where)
      } else visit(body)
    }
    scan(cbody, values, innerBounds, zeroInner)
    // a sibling runs all of its loops inside the attach point, over its region
    for (const sib of siblings) {
      const own = rootValues(sib.stage).values
      sib.stage.op.axes.forEach((a, k) => own.set(a.var.name, add(own.get(a.var.name)!, sib.region.start[k])))
      // (its loops span its region, not its tensor: the extents it is lowered with)
      const sized = withExtents(sib.stage, sib.region.extent)
      const inner: Bounds = new Map([...innerBounds, ...sized.leaf.map((a) => [a, { min: 0, max: sized.axes.get(a)!.extent - 1 }] as const)])
      scan(bodies.get(sib.stage.name)!, own, inner, new Map([...zeroInner, ...sib.stage.leaf.map((a) => [a, c(0)] as const)]))
    }
    const start: Expr[] = []
    const extent: number[] = []
    p.op.shape.forEach((dim, k) => {
      let base0: Expr | undefined
      let lo = Infinity
      let hi = -Infinity
      for (const { idx, inner: innerBounds, zero } of reads) {
        const base = simp(substitute(idx[k], zero))
        // (where the difference spans more than one index as it simplifies alone, also simplified
        // under the inner loops' bounds, and the two intervals intersected: a read at (16·b + i) // 16,
        // i < 16, is b's block alone — floordiv splits there, the interval of the unsplit form is ±b's range)
        const diff = add(idx[k], mul(base, c(-1)))
        const loose = intervalOf(simp(diff), innerBounds)
        const tight = loose.min === loose.max ? loose : intervalOf(simp(diff, innerBounds), innerBounds)
        const delta = { min: Math.max(loose.min, tight.min), max: Math.min(loose.max, tight.max) }
        base0 ??= base
        const d = constDifference(base, base0)
        if (d === undefined || !Number.isFinite(delta.min) || !Number.isFinite(delta.max)) {
          lo = -Infinity
          break
        }
        lo = Math.min(lo, d + delta.min)
        hi = Math.max(hi, d + delta.max)
      }
      if (base0 && Number.isFinite(lo) && hi - lo + 1 <= dim) {
        start.push(simp(add(base0, c(lo))))
        extent.push(hi - lo + 1)
      } else {
        start.push(c(0))
        extent.push(dim)
      }
    })
    return { start, extent }
  }

  /** A producer attached in `consumer`'s loop: allocated there, computed over its region. */
  const lowerAttached = (p: Stage, outer: Bounds): { buffer: Buffer; stmt: Stmt } => {
    const region = regions.get(p.name)!
    // double buffering: two copies, alternating with the attach loop, so the fill of the next
    // tile does not overwrite the one being read (the latency-hiding form of the TVM paper)
    const shape = region.parity ? [2, ...region.extent] : region.extent
    const local: Buffer = { name: localName.get(p.name)!, dtype: p.op.dtype, shape, scope: p.scope === "global" ? "local" : p.scope }
    const target = { buffer: local.name, offset: region.start, ...(region.parity ? { prefix: region.parity } : {}) }
    return { buffer: local, stmt: lowerStage(withExtents(p, region.extent), target, region, outer) }
  }
  /** Shared-memory buffers live for the whole kernel (one per block), not per thread. */
  const hoisted: Buffer[] = []

  const roots = s.order.map((n) => s.stages.get(n)!).filter((st) => st.attach.kind === "root")
  const allocs: Buffer[] = []
  const stmts = roots.map((st) => {
    if (!outputs.has(st.name)) {
      const b = bufferOf(st.op, st.scope)
      allocs.push(st.align.length ? { ...b, strides: alignedStrides(b.shape, st.align) } : b)
    }
    return lowerStage(st, { buffer: st.name, offset: [] })
  })
  // attached stages are allocated where they are computed; remove redirects of unrelated stages
  let body: Stmt = seq(stmts)
  for (const b of [...allocs, ...hoisted].reverse()) body = { kind: "allocate", buffer: b, body }
  const params = [...placeholders.map((t) => bufferOf(t)), ...s.outputs.map((t) => bufferOf(t))]
  return { name, params, body }
}

/** Whether a leaf axis is bound to threads a block's shared memory serves together: threadIdx or vthread. */
const sharedAcross = (st: Stage, axis: string): boolean => {
  const a = st.annotations.get(axis)
  return !!a?.thread?.startsWith("threadIdx") || a?.kind === "vthread"
}

/** The stage with its root data axes given new extents (a computeAt region), splits and fuses re-derived. */
const withExtents = (st: Stage, rootExtents: readonly number[]): Stage => {
  const axes = new Map(st.axes)
  st.op.axes.forEach((a, k) => axes.set(a.var.name, { ...axes.get(a.var.name)!, extent: rootExtents[k] }))
  for (const r of st.relations) {
    if (r.kind === "split") {
      const parent = axes.get(r.parent)!.extent
      axes.set(r.outer, { ...axes.get(r.outer)!, extent: Math.ceil(parent / r.factor) })
      axes.set(r.inner, { ...axes.get(r.inner)!, extent: r.factor })
    } else axes.set(r.fused, { ...axes.get(r.fused)!, extent: axes.get(r.outer)!.extent * axes.get(r.inner)!.extent })
  }
  return { ...st, axes }
}

const collectVars = (e: Expr): Set<string> => {
  const out = new Set<string>()
  mapExpr(e, (x) => {
    if (x.kind === "var") out.add(x.name)
    return undefined
  })
  return out
}

/** Does leaf axis `leaf` derive from root axis `root` in this stage? */
const deriveFrom = (st: Stage, leaf: string, root: string): boolean => {
  const parents = new Map<string, string[]>()
  for (const r of st.relations) {
    if (r.kind === "split") {
      parents.set(r.outer, [r.parent])
      parents.set(r.inner, [r.parent])
    } else parents.set(r.fused, [r.outer, r.inner])
  }
  const stack = [leaf]
  while (stack.length) {
    const a = stack.pop()!
    if (a === root) return true
    stack.push(...(parents.get(a) ?? []))
  }
  return false
}

/** Lowers a schedule; failures are LowerError. */
export const lower = (s: Schedule, name = "main"): Effect.Effect<PrimFunc, LowerError> =>
  Effect.try({
    try: () => lowerSync(s, name),
    catch: (e) => (e instanceof LowerError ? e : new LowerError({ stage: "?", reason: e instanceof Error ? e.message : String(e) })),
  })
