// lowering.PrefetchNextTile (the c target): where each iteration of a parallel loop reads a slab of
// its own from a large read-only param — a conv's weights for a tile of output channels, Winograd's
// transformed kernel U for a tile position and channel tile: index S·p + rest, 0 ≤ rest < S — the
// innermost serial loop around those reads gets a prefetch of the next iteration's slab, its lines
// spread evenly over the iteration's steps (the step t of N fetches line ⌊t·lines / N⌋).
//
// Why: a slab larger than the caches a core keeps it in between calls comes from memory, and the
// hardware prefetcher fetches it only as the iteration first reads it: the first pass over it runs
// at the memory's speed, the passes after it from L2 leave memory idle. ResNet-50's last 1×1 convs
// (4 MiB of weights, a channel tile's 64 KiB read by 7 row tiles) and ResNet-18's 7×7 Winograd
// products (U 16.8 MB, 64 KiB a position and channel tile) ran 12–32% faster with the next slab
// fetched through the current one's steps (a C harness, weights flushed, Zen 5; docs/backends.md).
//
// Which: a param the kernel never writes, of more bytes than `minBytes` (the caller passes the
// target record's L1: a buffer past it is not in L1 when the kernel starts, and in a network's run
// not in L2 either — the kernels between two runs of one read more than the L2), whose every read
// in the loop's body is S·q + rest, q the parallel variable or its quotient ⌊p / R⌋ (a parallel
// loop fused from the slab's loop and R iterations inside it: a 1×1 conv's channel tiles and the 7
// rows of a 7×7 image — the R iterations of a slab then fetch the next one between them, iteration
// p the (p mod R)-th part), with a rest within [0, S) over the body's loop bounds, with S's slab
// and the next one together within `maxSlabBytes` (the L2: the current slab stays cached while the
// next one comes in), read at least MIN_REUSE times by the iterations that share it (a slab read
// once is what the hardware prefetcher streams well by itself), and read in the vector loops of a
// register tile's step (the loop that issues the hints is the step's serial loop around them).
//
// Meaning: a prefetch reads nothing into the program and writes nothing; the evaluators skip it.
// Its index is kept within the buffer (the next slab of the last iteration is its own), which the
// pass's law checks with every line of the next slab fetched (laws/lowering/tir/prefetch-next-tile.law.ts).
import { BYTES } from "../../ast/graph/dtype.js"
import { storedBuffers } from "../../ast/tir/analysis.js"
import { mapStmt, type Buffer, type Prefetch, type PrimFunc, type Stmt } from "../../ast/tir/tir.js"
import { add, c, collect, div, floordiv, floormod, mapExpr, min, mul, substitute, v, type Expr, type Read, type Var } from "../../ast/te/expr.js"
import { coef, mentions } from "../../ast/te/linear-index.js"
import { tirPass, type TirPass } from "./tir-pass.js"

type ForStmt = Extract<Stmt, { kind: "for" }>

/** Bytes of a cache line (the prefetch's unit). */
export const CACHE_LINE_BYTES = 64

/** Times an iteration reads its slab (elements read over the slab's size) from which the next slab is prefetched. */
export const MIN_REUSE = 2

/** Prefetches a step issues at most (more lines than that per step: the slab is too large for its steps). */
const MAX_PER_STEP = 4

/** [lo, hi] of an integer expression over variables in `ranges` (inclusive); undefined beyond + − × and constants. */
export const exprBounds = (e: Expr, ranges: ReadonlyMap<string, readonly [number, number]>): readonly [number, number] | undefined => {
  if (e.kind === "const") return [e.value, e.value]
  if (e.kind === "var") return ranges.get(e.name)
  if (e.kind !== "bin" || (e.op !== "add" && e.op !== "sub" && e.op !== "mul")) return undefined
  const a = exprBounds(e.a, ranges)
  const b = exprBounds(e.b, ranges)
  if (!a || !b) return undefined
  if (e.op === "add") return [a[0] + b[0], a[1] + b[1]]
  if (e.op === "sub") return [a[0] - b[1], a[1] - b[0]]
  const products = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
  return [Math.min(...products), Math.max(...products)]
}

/** A read of a buffer inside the parallel loop: its flat index and the loops around it (outermost first, the parallel one's body inward). */
interface Site {
  readonly index: Expr
  readonly loops: readonly ForStmt[]
}

const constantLoop = (l: ForStmt): { min: number; extent: number } | undefined =>
  l.min.kind === "const" && l.extent.kind === "const" ? { min: l.min.value, extent: l.extent.value } : undefined

/** Every read of `buffers` in `s`, with the loops around it. */
const readSites = (s: Stmt, buffers: ReadonlySet<string>, loops: readonly ForStmt[], out: Map<string, Site[]>): void => {
  const exprs = (es: readonly Expr[]) => {
    for (const e of es)
      for (const r of collect(e, (x) => x.kind === "read" && buffers.has((x as Read).source)) as Read[]) {
        if (r.indices.length !== 1) continue
        out.set(r.source, [...(out.get(r.source) ?? []), { index: r.indices[0], loops }])
      }
  }
  switch (s.kind) {
    case "for":
      exprs([s.min, s.extent])
      return readSites(s.body, buffers, [...loops, s], out)
    case "seq":
      return s.body.forEach((b) => readSites(b, buffers, loops, out))
    case "store":
      return exprs([...s.indices, s.value])
    case "if":
      exprs([s.cond])
      readSites(s.then, buffers, loops, out)
      if (s.else) readSites(s.else, buffers, loops, out)
      return
    case "allocate":
      return readSites(s.body, buffers, loops, out)
    case "let":
      exprs([s.value])
      return readSites(s.body, buffers, loops, out)
    case "evaluate":
      return exprs([s.value])
    case "shuffle":
      return exprs([...s.indices, s.value])
    case "barrier":
    case "intrinsic":
      return
  }
}

/** A quotient ⌊p / R⌋ of the parallel variable `p` (R > 1, a constant): its R. */
const quotientOf = (x: Expr, p: string): number | undefined =>
  x.kind === "bin" && (x.op === "floordiv" || x.op === "div") && x.a.kind === "var" && x.a.name === p && x.b.kind === "const" && Number.isInteger(x.b.value) && x.b.value > 1 ? x.b.value : undefined

/**
 * The slab a read's index takes in an iteration of the parallel loop `p` (≥ 0): S·q + rest, q = p
 * (R = 1) or q = ⌊p / R⌋, `rest` the index with q at 0; undefined where the index is not of that
 * form (p elsewhere in it: its remainder p mod R, a halo's offset).
 */
export const slabIndex = (index: Expr, p: Var): { readonly R: number; readonly S: number; readonly rest: Expr } | undefined => {
  const direct = coef(index, p.name)
  if (direct !== undefined) return { R: 1, S: direct, rest: substitute(index, new Map([[p.name, c(0, p.dtype)]])) }
  const Rs = new Set(collect(index, (x) => quotientOf(x, p.name) !== undefined).map((x) => quotientOf(x, p.name)!))
  if (Rs.size !== 1) return undefined
  const R = [...Rs][0]
  // (⌊p / R⌋ named by a variable no loop binds: a name with a slash)
  const q = v(`${p.name}/${R}`, p.dtype)
  const replaced = mapExpr(index, (x) => (quotientOf(x, p.name) === R ? q : undefined))
  const S = mentions(replaced, p.name) ? undefined : coef(replaced, q.name)
  return S === undefined ? undefined : { R, S, rest: substitute(replaced, new Map([[q.name, c(0, p.dtype)]])) }
}

/** The prefetch plan for one buffer's sites in a parallel loop: the serial loop that issues it and its hints. */
const planFor = (par: ForStmt, buffer: Buffer, sites: readonly Site[], maxSlabBytes: number): { loop: ForStmt; prefetch: Prefetch[] } | undefined => {
  const p = par.var.name
  const range = constantLoop(par)
  if (!range || range.extent < 2) return undefined
  const slabs = sites.map((s) => slabIndex(s.index, par.var))
  const keys = new Set(slabs.map((x) => (x ? `${x.R}:${x.S}` : "none")))
  if (keys.size !== 1 || !slabs[0]) return undefined
  const { R, S } = slabs[0]
  // (a quotient's slabs start at a multiple of R: each slab's R iterations fetch the next one whole)
  if (S <= 0 || 2 * S * BYTES[buffer.dtype] > maxSlabBytes || range.min % R !== 0 || (R > 1 && range.extent <= R)) return undefined
  // each read's rest within [0, S) over the loop bounds inside the parallel loop
  for (const [k, site] of sites.entries()) {
    const ranges = new Map<string, readonly [number, number]>()
    for (const l of site.loops) {
      const r = constantLoop(l)
      if (!r) return undefined
      ranges.set(l.var.name, [r.min, r.min + r.extent - 1])
    }
    const b = exprBounds(slabs[k]!.rest, ranges)
    if (!b || b[0] < 0 || b[1] >= S) return undefined
  }
  // the innermost serial loop around every read (the same one for all), and the serial loops down to it
  const serialPath = (site: Site) => site.loops.filter((l) => l.forKind === "serial")
  const paths = sites.map(serialPath)
  const loop = paths[0][paths[0].length - 1]
  if (!loop || paths.some((path) => path[path.length - 1] !== loop)) return undefined
  const path = paths[0]
  if (path.some((l) => !constantLoop(l))) return undefined
  // (a step of a vector register tile: every read in a vectorized loop inside `loop` — not a scalar
  // loop the emitter turns into a vector reduction of its own, a LayerNorm's row sum)
  if (sites.some((site) => !site.loops.slice(site.loops.indexOf(loop) + 1).some((l) => l.forKind === "vectorized"))) return undefined
  // the step t of N (the serial loops down to `loop` linearized, outermost first)
  let t: Expr = c(0, par.var.dtype)
  let steps = 1
  for (const l of path) {
    const r = constantLoop(l)!
    t = add(mul(t, c(r.extent, par.var.dtype)), l.min.kind === "const" && l.min.value === 0 ? l.var : add(l.var, c(-r.min, par.var.dtype)))
    steps *= r.extent
  }
  // the slab read at least twice an iteration (a slab read once streams well as it is: the
  // hardware prefetcher follows it, and a prefetch more a step only splits the bandwidth — a
  // DensePack's panels, one weight vector a step, ran 1.2–1.7× slower with them)
  const readsPerStep = sites.reduce((n, site) => n + site.loops.slice(site.loops.indexOf(loop) + 1).reduce((m, l) => m * constantLoop(l)!.extent, 1), 0)
  if (R * steps * readsPerStep < MIN_REUSE * S) return undefined
  const lineElems = Math.max(1, Math.floor(CACHE_LINE_BYTES / BYTES[buffer.dtype]))
  // (a slab that does not start on a line: one more, its last element's)
  const lines = Math.ceil(S / lineElems) + (S % lineElems === 0 ? 0 : 1)
  // the slab's R iterations' steps in turn: iteration p's step t is step (p mod R)·steps + t of R·steps
  // (R = 1: t of steps — floormod by 1 folds to 0, floordiv by 1 to p)
  const slabSteps = R * steps
  const perStep = Math.ceil(lines / slabSteps)
  if (perStep > MAX_PER_STEP) return undefined
  const i = par.var as Var
  const last = range.min + range.extent - 1
  const slab = floordiv(i, c(R, i.dtype))
  const step = add(mul(floormod(i, c(R, i.dtype)), c(steps, i.dtype)), t)
  const next = mul(min(add(slab, c(1, i.dtype)), c(Math.floor(last / R), i.dtype)), c(S, i.dtype))
  const prefetch = Array.from({ length: perStep }, (_, j) => {
    // line ⌊(step·perStep + j) · lines / (slabSteps · perStep)⌋ of the next slab
    const line = div(mul(add(mul(step, c(perStep, i.dtype)), c(j, i.dtype)), c(lines, i.dtype)), c(slabSteps * perStep, i.dtype))
    return { buffer: buffer.name, index: add(next, min(mul(line, c(lineElems, i.dtype)), c(S - 1, i.dtype))) }
  })
  return { loop, prefetch }
}

/** `f` with its parallel loops' next slabs prefetched (see the header); `f` itself where none qualifies. */
export const prefetchNextTiles = (f: PrimFunc, minBytes: number, maxSlabBytes: number): PrimFunc => {
  const written = storedBuffers(f.body)
  const large = f.params.filter((b) => !written.has(b.name) && b.scope === "global" && b.shape.reduce((a, d) => a * d, 1) * BYTES[b.dtype] > minBytes)
  if (large.length === 0) return f
  const names = new Set(large.map((b) => b.name))
  const body = mapStmt(f.body, (s) => {
    if (s.kind !== "for" || s.forKind !== "parallel") return undefined
    const sites = new Map<string, Site[]>()
    readSites(s.body, names, [], sites)
    // the largest buffer with a plan (one stream per parallel loop)
    const plans = large
      .filter((b) => sites.has(b.name))
      .sort((a, b) => b.shape.reduce((x, d) => x * d, 1) * BYTES[b.dtype] - a.shape.reduce((x, d) => x * d, 1) * BYTES[a.dtype])
      .map((b) => planFor(s, b, sites.get(b.name)!, maxSlabBytes))
      .filter((x) => x !== undefined)
    if (plans.length === 0) return undefined
    const { loop, prefetch } = plans[0]
    const inner = mapStmt(s.body, (x) => (x === loop ? { ...loop, prefetch: [...(loop.prefetch ?? []), ...prefetch] } : undefined))
    return { ...s, body: inner }
  })
  return body === f.body ? f : { ...f, body }
}

/** The pass: buffers over `minBytes` streamed (the caller: the target record's L1), slabs of up to half `maxSlabBytes` (its L2). */
export const prefetchNextTile = (minBytes: number, maxSlabBytes: number = minBytes): TirPass =>
  tirPass("lowering.PrefetchNextTile", 2, (f) => prefetchNextTiles(f, minBytes, maxSlabBytes))
