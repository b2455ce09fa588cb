// The TIR passes, each a named pure PrimFunc → PrimFunc transform:
//   lowering.Simplify            fold index arithmetic under the loop bounds; drop proven guards
//   lowering.LoopPartition       peel a guarded tail so the main loop body has no guard
//   lowering.VectorizeLoops      keep vectorized loops that a vector unit can run; scalarize the rest
//   lowering.UnrollLoops         replace unrolled loops (constant extent) by their copies
//   lowering.InjectVirtualThread interleave vthread copies statement by statement into one stream
//   lowering.FlattenStorage      multi-dimensional buffers → flat buffers with strides (storageAlign)
//   lowering.RewriteStorage      allocations whose lifetimes do not overlap share one buffer
//   lowering.PromoteAccumulators a register tile's sums kept in a tile-sized local array across
//                                the reduce loops around it (loaded from, stored back to, their
//                                local buffer once)
import { c, collect, exprKey, mapExpr, read, substitute, v, type Expr } from "../ast/te/expr.js"
import { intervalOf, simplify, type Bounds, type Interval } from "../ast/te/simplify.js"
import { mapStmt, seq, type Buffer, type PrimFunc, type Stmt } from "../ast/tir/tir.js"
import { add, mul } from "../ast/te/expr.js"

export interface TirPass {
  readonly name: string
  readonly run: (f: PrimFunc) => PrimFunc
}

const constOf = (e: Expr): number | undefined => (e.kind === "const" ? e.value : undefined)

// ---------------------------------------------------------------------------------------------

const isEmpty = (s: Stmt): boolean => s.kind === "seq" && s.body.length === 0

/** The bounds inside a loop over `name` from `lo`, `ext` iterations (unknown unless both are constant). */
const loopBounds = (bounds: ReadonlyMap<string, Interval>, name: string, lo: number | undefined, ext: number | undefined): Map<string, Interval> => {
  const inner = new Map(bounds)
  if (lo !== undefined && ext !== undefined) inner.set(name, { min: lo, max: lo + ext - 1 })
  else inner.delete(name)
  return inner
}

/** Could simplifyStmt empty `s`? Not without a guard, a loop of unknown or non-positive extent, or an empty seq. */
const mayEmpty = (s: Stmt): boolean => {
  switch (s.kind) {
    case "for":
      return s.extent.kind !== "const" || s.extent.value <= 0 || mayEmpty(s.body)
    case "seq":
      return s.body.length === 0 || s.body.every(mayEmpty)
    case "if":
      return true
    default:
      return false
  }
}

/**
 * isEmpty(simplifyStmt(s', bounds)) where s' is `s` with `substs` applied in order (as
 * substituteStmt would), deciding only the loop extents and guards that can empty a statement
 * (stores, allocations and lets never do): neither the body nor its expressions are rebuilt.
 */
const simplifiesToEmpty = (s: Stmt, bounds: Map<string, Interval>, substs: readonly ReadonlyMap<string, Expr>[] = []): boolean => {
  if (!mayEmpty(s)) return false
  const g = (e: Expr) => simplify(substs.reduce((x, env) => substitute(x, env), e), bounds)
  switch (s.kind) {
    case "for": {
      const min = g(s.min)
      const lo = constOf(min)
      const ext = constOf(g(s.extent))
      if (ext !== undefined && ext <= 0) return true
      if (simplifiesToEmpty(s.body, loopBounds(bounds, s.var.name, lo, ext), substs)) return true
      if (ext === 1 && s.forKind !== "thread" && s.forKind !== "vthread") return simplifiesToEmpty(s.body, bounds, [...substs, new Map([[s.var.name, min]])])
      return false
    }
    case "seq":
      return s.body.every((b) => simplifiesToEmpty(b, bounds, substs))
    case "if": {
      const cond = g(s.cond)
      if (cond.kind !== "const") return false
      return cond.value ? simplifiesToEmpty(s.then, bounds, substs) : s.else ? simplifiesToEmpty(s.else, bounds, substs) : true
    }
    default:
      return false
  }
}

/** Simplify with loop-variable bounds in scope. */
const simplifyStmt = (s: Stmt, bounds: Map<string, Interval>): Stmt => {
  const g = (e: Expr) => simplify(e, bounds)
  switch (s.kind) {
    case "for": {
      const min = g(s.min)
      const extent = g(s.extent)
      const lo = constOf(min)
      const ext = constOf(extent)
      if (ext !== undefined && ext <= 0) return seq([])
      const inner = loopBounds(bounds, s.var.name, lo, ext)
      if (ext === 1 && s.forKind !== "thread" && s.forKind !== "vthread") {
        // a loop of one iteration becomes its body at that iteration — unless the body is empty
        // with the var bounded to it (decided without rebuilding the body a second time)
        const once = simplifyStmt(substituteStmt(s.body, new Map([[s.var.name, min]])), bounds)
        return isEmpty(once) || simplifiesToEmpty(s.body, inner) ? seq([]) : once
      }
      const body = simplifyStmt(s.body, inner)
      if (isEmpty(body)) return body
      return { ...s, min, extent, body }
    }
    case "seq":
      return seq(s.body.map((b) => simplifyStmt(b, bounds)).filter((b) => !(b.kind === "seq" && b.body.length === 0)))
    case "if": {
      const cond = g(s.cond)
      if (cond.kind === "const") return cond.value ? simplifyStmt(s.then, bounds) : s.else ? simplifyStmt(s.else, bounds) : seq([])
      return { ...s, cond, then: simplifyStmt(s.then, bounds), ...(s.else ? { else: simplifyStmt(s.else, bounds) } : {}) }
    }
    case "store":
      return { ...s, indices: s.indices.map(g), value: g(s.value) }
    case "allocate":
      return { ...s, body: simplifyStmt(s.body, bounds) }
    case "let":
      return { ...s, value: g(s.value), body: simplifyStmt(s.body, bounds) }
    case "evaluate":
      return { ...s, value: g(s.value) }
    case "barrier":
      return s
    case "intrinsic":
      return { ...s, output: { ...s.output, base: s.output.base.map(g) }, inputs: s.inputs.map((r) => ({ ...r, base: r.base.map(g) })) }
  }
}

/** Substitutes variables everywhere in a statement. */
export const substituteStmt = (s: Stmt, env: ReadonlyMap<string, Expr>): Stmt => mapStmt(s, () => undefined, (e) => substitute(e, env))

export const simplifyPass: TirPass = { name: "lowering.Simplify", run: (f) => ({ ...f, body: simplifyStmt(f.body, new Map()) }) }

// ---------------------------------------------------------------------------------------------

const guardsIn = (s: Stmt, out: Expr[] = []): Expr[] => {
  mapStmt(s, (x) => {
    if (x.kind === "if") out.push(x.cond)
    return undefined
  })
  return out
}

/** Bounds of every loop variable declared inside `s` (constant loops only). */
const innerBounds = (s: Stmt): Map<string, Interval> => {
  const b = new Map<string, Interval>()
  mapStmt(s, (x) => {
    if (x.kind === "for") {
      const lo = constOf(x.min)
      const ext = constOf(x.extent)
      if (lo !== undefined && ext !== undefined) b.set(x.var.name, { min: lo, max: lo + ext - 1 })
    }
    return undefined
  })
  return b
}

/** The largest k such that the guard `e < n` holds for every inner iteration when the loop var is below k. */
const safePrefix = (cond: Expr, loopVar: string, inner: Bounds, outer: Bounds): number | undefined => {
  if (cond.kind !== "bin") return undefined
  if (cond.op === "and") {
    const a = safePrefix(cond.a, loopVar, inner, outer)
    const b = safePrefix(cond.b, loopVar, inner, outer)
    return a === undefined ? b : b === undefined ? a : Math.min(a, b)
  }
  if (cond.op !== "lt" || cond.b.kind !== "const") return undefined
  // e = a·v + rest, with a > 0: holds for v < (n - max(rest)) / a
  const e = cond.a
  const at0 = simplify(substitute(e, new Map([[loopVar, c(0)]])))
  const at1 = simplify(substitute(e, new Map([[loopVar, c(1)]])))
  const coef = simplify(add(at1, mul(at0, c(-1))))
  if (coef.kind !== "const" || coef.value <= 0) return undefined
  // linear in v only if e(v) - e(0) == coef·v
  const diff = simplify(add(e, mul(at0, c(-1))))
  const lin = simplify(mul(v(loopVar), coef))
  if (exprKey(diff) !== exprKey(lin)) return undefined
  const rest = intervalOf(at0, new Map([...outer, ...inner]))
  if (!Number.isFinite(rest.max)) return undefined
  return Math.ceil((cond.b.value - rest.max) / coef.value)
}

const partitionStmt = (s: Stmt, outer: Map<string, Interval>): Stmt => {
  if (s.kind === "for") {
    const lo = constOf(s.min)
    const ext = constOf(s.extent)
    const within = new Map(outer)
    if (lo !== undefined && ext !== undefined) within.set(s.var.name, { min: lo, max: lo + ext - 1 })
    const recurse = (loop: Stmt & { kind: "for" }, bounds: Map<string, Interval>): Stmt => {
      const l = constOf(loop.min)
      const e = constOf(loop.extent)
      const inner = new Map(bounds)
      if (l !== undefined && e !== undefined) inner.set(loop.var.name, { min: l, max: l + e - 1 })
      return { ...loop, body: partitionStmt(loop.body, inner) }
    }
    if (lo === undefined || ext === undefined || s.forKind === "thread" || s.forKind === "vthread") return recurse(s, outer)
    // outermost first: cut this loop where its guards start to fail, then look inside each part
    const inner = innerBounds(s.body)
    let k: number | undefined
    for (const g of guardsIn(s.body)) {
      const p = safePrefix(g, s.var.name, inner, outer)
      if (p !== undefined) k = k === undefined ? p : Math.min(k, p)
    }
    const cut = k === undefined ? undefined : Math.max(lo, Math.min(lo + ext, k))
    if (cut === undefined || cut <= lo || cut >= lo + ext) return recurse(s, outer)
    const parts = [simplifyStmt({ ...s, extent: c(cut - lo) }, outer), simplifyStmt({ ...s, min: c(cut), extent: c(lo + ext - cut) }, outer)]
    return seq(parts.map((p) => partitionStmt(p, outer)))
  }
  if (s.kind === "seq") return seq(s.body.map((b) => partitionStmt(b, outer)))
  if (s.kind === "allocate" || s.kind === "let") return { ...s, body: partitionStmt(s.body, outer) }
  if (s.kind === "if") return { ...s, then: partitionStmt(s.then, outer), ...(s.else ? { else: partitionStmt(s.else, outer) } : {}) }
  return s
}

export const loopPartition: TirPass = { name: "lowering.LoopPartition", run: (f) => ({ ...f, body: partitionStmt(f.body, new Map()) }) }

// ---------------------------------------------------------------------------------------------

const hasControl = (s: Stmt): boolean => {
  let found = false
  mapStmt(s, (x) => {
    if (x.kind === "for" || x.kind === "if" || x.kind === "allocate" || x.kind === "barrier") found = true
    return undefined
  })
  return found
}

/** Vectorized loops stay when constant-extent (≤ maxLanes) over straight-line stores; others become serial. */
export const vectorizeLoops = (maxLanes = 64): TirPass => ({
  name: "lowering.VectorizeLoops",
  run: (f) => ({
    ...f,
    body: mapStmt(f.body, (x) => {
      if (x.kind !== "for" || x.forKind !== "vectorized") return undefined
      const ext = constOf(x.extent)
      const ok = ext !== undefined && ext <= maxLanes && !hasControl(x.body)
      return ok ? undefined : { ...x, forKind: "serial" }
    }),
  }),
})

/** Unrolled loops with a constant extent ≤ maxUnroll become a sequence of copies. */
export const unrollLoops = (maxUnroll = 16): TirPass => ({
  name: "lowering.UnrollLoops",
  run: (f) => ({
    ...f,
    body: mapStmt(f.body, (x) => {
      if (x.kind !== "for" || x.forKind !== "unrolled") return undefined
      const lo = constOf(x.min)
      const ext = constOf(x.extent)
      if (lo === undefined || ext === undefined || ext > maxUnroll) return { ...x, forKind: "serial" }
      return seq(Array.from({ length: ext }, (_, i) => substituteStmt(x.body, new Map([[x.var.name, c(lo + i)]]))))
    }),
  }),
})

/**
 * vthread loops: their iterations are independent by construction, so their copies are
 * interleaved statement by statement (s1 of every vthread, then s2 of every vthread, …) into one
 * instruction stream — the latency-hiding order of the TVM paper.
 */
export const injectVirtualThread: TirPass = {
  name: "lowering.InjectVirtualThread",
  run: (f) => ({
    ...f,
    body: mapStmt(f.body, (x) => {
      if (x.kind !== "for" || x.forKind !== "vthread") return undefined
      const lo = constOf(x.min)
      const ext = constOf(x.extent)
      if (lo === undefined || ext === undefined) return { ...x, forKind: "serial" }
      const parts = x.body.kind === "seq" ? x.body.body : [x.body]
      const copy = (s: Stmt, i: number) => substituteStmt(s, new Map([[x.var.name, c(lo + i)]]))
      // allocations inside are per vthread: keep each copy's allocation around its own part
      if (parts.some((p) => p.kind === "allocate")) return seq(Array.from({ length: ext }, (_, i) => copy(x.body, i)))
      return seq(parts.flatMap((p) => Array.from({ length: ext }, (_, i) => copy(p, i))))
    }),
  }),
}

// ---------------------------------------------------------------------------------------------

const rowMajor = (shape: readonly number[]): number[] => {
  const st = new Array<number>(shape.length)
  let acc = 1
  for (let i = shape.length - 1; i >= 0; i--) {
    st[i] = acc
    acc *= shape[i]
  }
  return st
}

/** Strides with storageAlign applied: align = [axis, factor, offset] makes stride[axis] ≡ offset (mod factor). */
export const alignedStrides = (shape: readonly number[], align: readonly (readonly [number, number, number])[]): number[] => {
  const st = new Array<number>(shape.length)
  let acc = 1
  for (let i = shape.length - 1; i >= 0; i--) {
    const a = align.find(([axis]) => axis === i)
    if (a) {
      const [, factor, offset] = a
      while (((acc % factor) + factor) % factor !== ((offset % factor) + factor) % factor) acc++
    }
    st[i] = acc
    acc *= shape[i]
  }
  return st
}

/** Multi-dimensional accesses → one flat index through each buffer's strides. */
export const flattenStorage = (aligns: ReadonlyMap<string, readonly (readonly [number, number, number])[]> = new Map()): TirPass => ({
  name: "lowering.FlattenStorage",
  run: (f) => {
    const strides = new Map<string, number[]>()
    const sizes = new Map<string, number>()
    const register = (b: Buffer) => {
      const st = b.strides ? [...b.strides] : alignedStrides(b.shape, aligns.get(b.name) ?? [])
      strides.set(b.name, st)
      sizes.set(b.name, b.shape.length ? b.shape.reduce((s, d, k) => s + (d - 1) * st[k], 1) : 1)
    }
    f.params.forEach(register)
    mapStmt(f.body, (x) => {
      if (x.kind === "allocate") register(x.buffer)
      return undefined
    })
    const flat = (name: string, idx: readonly Expr[]): Expr[] => {
      const st = strides.get(name)
      if (!st || idx.length === 1) return [...idx]
      return [simplify(idx.reduce<Expr>((acc, e, k) => add(acc, mul(e, c(st[k]))), c(0)))]
    }
    const g = (e: Expr): Expr => mapExpr(e, (x) => (x.kind === "read" && strides.has(x.source) && x.indices.length !== 1 ? { ...x, indices: flat(x.source, x.indices.map(g)) } : undefined))
    const body = mapStmt(
      f.body,
      (x) => {
        if (x.kind === "store") return { ...x, indices: flat(x.buffer, x.indices) }
        if (x.kind === "intrinsic") {
          const r = (reg: (typeof x)["output"]) =>
            reg.strides || !strides.has(reg.buffer) ? reg : { buffer: reg.buffer, base: flat(reg.buffer, reg.base), strides: strides.get(reg.buffer)! }
          return { ...x, output: r(x.output), inputs: x.inputs.map(r) }
        }
        if (x.kind === "allocate") return { ...x, buffer: { ...x.buffer, shape: [sizes.get(x.buffer.name)!], strides: undefined } }
        return undefined
      },
      g,
    )
    // params keep their logical shape (callers see tensors) but are accessed flat through strides
    const params = f.params.map((p) => (p.shape.length === 1 && !p.view ? p : { ...p, shape: [sizes.get(p.name)!], view: { shape: p.shape, strides: strides.get(p.name)! } }))
    return { ...f, params, body: stripUndefinedStrides(body) }
  },
})

const stripUndefinedStrides = (s: Stmt): Stmt =>
  mapStmt(s, (x) => {
    if (x.kind !== "allocate" || x.buffer.strides !== undefined) return undefined
    const { strides: _, ...rest } = x.buffer
    return { ...x, buffer: rest }
  })

/**
 * Allocations of one dtype, in sequence at the top of the function, whose uses do not overlap
 * share one buffer (sized for the largest). Run after FlattenStorage (flat buffers).
 */
export const rewriteStorage: TirPass = {
  name: "lowering.RewriteStorage",
  run: (f) => {
    // peel the chain of top-level allocations
    const allocs: Buffer[] = []
    let body = f.body
    while (body.kind === "allocate") {
      allocs.push(body.buffer)
      body = body.body
    }
    if (allocs.length < 2 || allocs.some((b) => b.shape.length !== 1)) return f
    const parts = body.kind === "seq" ? body.body : [body]
    const uses = (s: Stmt, name: string) => {
      let used = false
      mapStmt(
        s,
        (x) => {
          if (x.kind === "store" && x.buffer === name) used = true
          return undefined
        },
        (e) => {
          mapExpr(e, (y) => {
            if (y.kind === "read" && y.source === name) used = true
            return undefined
          })
          return e
        },
      )
      return used
    }
    const span = new Map(allocs.map((b) => {
      const idx = parts.map((p, k) => (uses(p, b.name) ? k : -1)).filter((k) => k >= 0)
      return [b.name, { first: idx.length ? Math.min(...idx) : -1, last: idx.length ? Math.max(...idx) : -1 }] as const
    }))
    const rename = new Map<string, string>()
    const kept: { buffer: Buffer; last: number }[] = []
    for (const b of allocs) {
      const sp = span.get(b.name)!
      const host = kept.find((k) => k.buffer.dtype === b.dtype && k.buffer.scope === b.scope && k.last < sp.first)
      if (host && sp.first >= 0) {
        rename.set(b.name, host.buffer.name)
        host.buffer = { ...host.buffer, shape: [Math.max(host.buffer.shape[0], b.shape[0])] }
        host.last = sp.last
      } else kept.push({ buffer: b, last: sp.last })
    }
    if (rename.size === 0) return f
    const g = (e: Expr): Expr => mapExpr(e, (x) => (x.kind === "read" && rename.has(x.source) ? { ...x, source: rename.get(x.source)!, indices: x.indices.map(g) } : undefined))
    let out = mapStmt(body, (x) => (x.kind === "store" && rename.has(x.buffer) ? { ...x, buffer: rename.get(x.buffer)! } : undefined), g)
    for (const k of [...kept].reverse()) out = { kind: "allocate", buffer: k.buffer, body: out }
    return { ...f, body: out }
  },
}

/**
 * Intrinsic calls become the loop nest their TE declaration describes (for targets without the
 * instruction, and to check tensorized programs loop by loop).
 */
export const lowerIntrinsics: TirPass = {
  name: "lowering.LowerIntrinsics",
  run: (f) => ({
    ...f,
    body: mapStmt(f.body, (x) => {
      if (x.kind !== "intrinsic") return undefined
      const ic = x.intrin.compute
      const body = ic.body
      const vars = ic.axes.map((_, k) => v(`${x.output.buffer}.t${k}`))
      const env = new Map<string, Expr>(ic.axes.map((a, k) => [a.var.name, vars[k]]))
      // an operand of lower rank than its buffer covers the buffer's trailing dims
      const at = (r: (typeof x)["output"], idx: readonly Expr[]): Expr[] => {
        if (r.strides) {
          const st = r.strides.slice(r.strides.length - idx.length)
          return [simplify(idx.reduce<Expr>((acc, e, k) => add(acc, mul(e, c(st[k]))), r.base[0]))]
        }
        const extra = r.base.length - idx.length
        return r.base.map((b, k) => (k < extra ? b : simplify(add(b, idx[k - extra]))))
      }
      const mapReads = (e: Expr): Expr =>
        mapExpr(e, (y) => {
          if (y.kind !== "read") return undefined
          const k = x.intrin.inputs.findIndex((p) => p.name === y.source)
          return k < 0 ? undefined : { kind: "read", source: x.inputs[k].buffer, indices: at(x.inputs[k], y.indices.map(mapReads)), dtype: y.dtype }
        })
      const outIdx = at(x.output, vars)
      const outRead: Expr = { kind: "read", source: x.output.buffer, indices: outIdx, dtype: ic.dtype }
      let inner: Stmt
      if (body.kind === "reduce") {
        const rvars = body.axes.map((_, k) => v(`${x.output.buffer}.r${k}`))
        const renv = new Map<string, Expr>([...env, ...body.axes.map((a, k) => [a.var.name, rvars[k]] as const)])
        const src = mapReads(substitute(body.source, renv))
        const value = substitute(body.combiner.result, new Map([[body.combiner.lhs.name, outRead], [body.combiner.rhs.name, src]]))
        inner = body.axes.reduceRight<Stmt>((acc, a, k) => ({ kind: "for", var: rvars[k], min: c(a.dom.min), extent: c(a.dom.extent), forKind: "serial", body: acc }), {
          kind: "store",
          buffer: x.output.buffer,
          indices: outIdx,
          value,
        })
        if (x.intrin.mode === "store") throw new Error(`intrinsic ${x.intrin.name}: a reduction must be an update`)
      } else inner = { kind: "store", buffer: x.output.buffer, indices: outIdx, value: mapReads(substitute(body, env)) }
      return ic.axes.reduceRight<Stmt>((acc, a, k) => ({ kind: "for", var: vars[k], min: c(0), extent: c(a.dom.extent), forKind: "serial", body: acc }), inner)
    }),
  }),
}

// ---------------------------------------------------------------------------------------------

type ForStmt = Extract<Stmt, { kind: "for" }>
type StoreStmt = Extract<Stmt, { kind: "store" }>

/** Largest register tile promoted (elements). */
const MAX_PROMOTED = 256

/** A perfect nest from `s` down to one store: its loops and the store, else undefined. */
const perfectNest = (s: Stmt): { loops: ForStmt[]; store: StoreStmt } | undefined => {
  const loops: ForStmt[] = []
  let x = s
  while (x.kind === "for") {
    loops.push(x)
    x = x.body
  }
  return x.kind === "store" ? { loops, store: x } : undefined
}

const varsOf = (es: readonly Expr[]): Set<string> => new Set(es.flatMap((e) => collect(e, (x) => x.kind === "var").map((x) => (x as { name: string }).name)))

/** Whether `idx` takes a different value at every point of the tile loops (checked at a few outer points). */
const injective = (idx: readonly Expr[], tile: readonly ForStmt[]): boolean => {
  const outer = [...varsOf(idx)].filter((n) => !tile.some((l) => l.var.name === n))
  const extents = tile.map((l) => constOf(l.extent)!)
  const points = extents.reduce((p, e) => p * e, 1)
  for (const at of [0, 1, 3]) {
    const seen = new Set<string>()
    for (let k = 0; k < points; k++) {
      const env = new Map<string, Expr>(outer.map((n) => [n, c(at)] as const))
      let rest = k
      for (let j = tile.length - 1; j >= 0; j--) {
        env.set(tile[j].var.name, c(constOf(tile[j].min)! + (rest % extents[j])))
        rest = Math.floor(rest / extents[j])
      }
      const key = idx.map((e) => exprKey(simplify(substitute(e, env)))).join("|")
      if (seen.has(key)) return false
      seen.add(key)
    }
  }
  return true
}

/**
 * The promotion of one loop `r`, when it is the outer loop of a reduction into a local buffer
 * whose innermost loops are a register tile: r → reduce loops (none of them in the store's index)
 * → tile loops (constant bounds, each in the index) → `B[idx] = f(B[idx], …)`. The tile's values
 * live in a local array across r's loops: loaded from B before, stored back after.
 */
const promoteLoop = (r: ForStmt, locals: ReadonlyMap<string, Buffer>, fresh: () => number): Stmt | undefined => {
  const nest = perfectNest(r)
  if (!nest) return undefined
  const { loops, store } = nest
  const buf = locals.get(store.buffer)
  if (!buf) return undefined
  const idxVars = varsOf(store.indices)
  const first = loops.findIndex((l) => idxVars.has(l.var.name))
  if (first < 1) return undefined
  const tile = loops.slice(first)
  if (!tile.every((l) => idxVars.has(l.var.name) && constOf(l.min) !== undefined && constOf(l.extent) !== undefined)) return undefined
  const size = tile.reduce((p, l) => p * constOf(l.extent)!, 1)
  // a buffer of one tile is its own accumulator array already
  if (size > MAX_PROMOTED || size >= buf.shape.reduce((p, d) => p * d, 1)) return undefined
  // the value reads B at the store's index only (an update), and the index covers the tile one to one
  const key = store.indices.map(exprKey).join("|")
  const reads = collect(store.value, (x) => x.kind === "read" && x.source === store.buffer) as Extract<Expr, { kind: "read" }>[]
  if (reads.length === 0 || reads.some((x) => x.indices.map(exprKey).join("|") !== key)) return undefined
  if (!injective(store.indices, tile)) return undefined
  const n = fresh()
  const name = `${store.buffer}.tile${n}`
  const acc: Buffer = { name, dtype: buf.dtype, shape: [size], scope: "local" }
  // the tile's linear index, row-major over the tile loops
  const linOf = (vars: readonly Expr[]): Expr =>
    tile.reduce<Expr>((e, l, j) => add(mul(e, c(constOf(l.extent)!)), add(vars[j], c(-constOf(l.min)!))), c(0))
  const copy = (suffix: string, body: (lin: Expr, idx: readonly Expr[]) => Stmt): Stmt => {
    const vars = tile.map((l) => v(`${l.var.name}.${suffix}${n}`))
    const env = new Map(tile.map((l, j) => [l.var.name, vars[j] as Expr] as const))
    const idx = store.indices.map((e) => substitute(e, env))
    // (unrolled loops stay unrolled; the rest plain loops: a simd pragma on the copies kept gcc
    // from keeping the array in registers)
    return tile.reduceRight<Stmt>(
      (inner, l, j) => ({ kind: "for", var: vars[j] as ForStmt["var"], min: l.min, extent: l.extent, forKind: l.forKind === "unrolled" ? "unrolled" : "serial", body: inner }),
      body(simplify(linOf(vars)), idx),
    )
  }
  const lin = simplify(linOf(tile.map((l) => l.var)))
  const value = mapExpr(store.value, (x) => (x.kind === "read" && x.source === store.buffer ? read(name, [lin], x.dtype) : undefined))
  const main = loops.reduceRight<Stmt>((inner, l) => ({ ...l, body: inner }), { kind: "store", buffer: name, indices: [lin], value })
  const load = copy("in", (li, idx) => ({ kind: "store", buffer: name, indices: [li], value: read(store.buffer, idx, buf.dtype) }))
  const save = copy("out", (li, idx) => ({ kind: "store", buffer: store.buffer, indices: idx, value: read(name, [li], buf.dtype) }))
  return { kind: "allocate", buffer: acc, body: seq([load, main, save]) }
}

/**
 * lowering.PromoteAccumulators: where a local buffer is reduced into by a register tile under
 * reduce loops that its index does not use (a stage whose reduction is split outside its column
 * tiles, so its local buffer spans more than one register tile), the tile's sums stay in a
 * tile-sized local array across those loops, as the accumulators of a tile computed at its own
 * level do. The outermost such loop is promoted.
 */
export const promoteAccumulators: TirPass = {
  name: "lowering.PromoteAccumulators",
  run: (f) => {
    const locals = new Map<string, Buffer>()
    mapStmt(f.body, (x) => {
      if (x.kind === "allocate" && x.buffer.scope === "local") locals.set(x.buffer.name, x.buffer)
      return undefined
    })
    if (locals.size === 0) return f
    let count = 0
    const fresh = () => count++
    const rec = (s: Stmt): Stmt => {
      switch (s.kind) {
        case "for": {
          const p = s.forKind === "serial" ? promoteLoop(s, locals, fresh) : undefined
          if (p) return p
          const body = rec(s.body)
          return body === s.body ? s : { ...s, body }
        }
        case "seq": {
          const body = s.body.map(rec)
          return body.every((b, k) => b === s.body[k]) ? s : seq(body)
        }
        case "allocate":
        case "let": {
          const body = rec(s.body)
          return body === s.body ? s : { ...s, body }
        }
        case "if": {
          const then = rec(s.then)
          const otherwise = s.else ? rec(s.else) : undefined
          return then === s.then && otherwise === s.else ? s : { ...s, then, ...(otherwise ? { else: otherwise } : {}) }
        }
        default:
          return s
      }
    }
    const body = rec(f.body)
    return body === f.body ? f : { ...f, body }
  },
}

/** The default TIR pipeline for CPU targets. */
export const defaultTirPasses = (aligns?: ReadonlyMap<string, readonly (readonly [number, number, number])[]>): readonly TirPass[] => [
  simplifyPass,
  // (after Simplify: the region guards it proves away would break the nest)
  promoteAccumulators,
  loopPartition,
  vectorizeLoops(),
  unrollLoops(),
  injectVirtualThread,
  flattenStorage(aligns),
  rewriteStorage,
  simplifyPass,
]

export const runTirPasses = (f: PrimFunc, passes: readonly TirPass[]): PrimFunc => passes.reduce((g, p) => p.run(g), f)
