// lowering.PrefetchNextTile (the c target): where each iteration of a parallel loop reads a slab of
// its own from a large read-only param — a conv's weights for a tile of output channels, Winograd's
// transformed kernel U for a tile position and channel tile: index S·p + rest, 0 ≤ rest < S — a
// serial loop around those reads gets a prefetch of the next iteration's slab, its lines spread
// evenly over the iteration's steps (the step t of N fetches line ⌊t·lines / N⌋). The loop: the
// outermost serial one down to the register tile's step whose N steps leave at most MAX_PER_STEP
// lines a step — further in, each line would be asked for several times.
//
// A group of G iterations may share a slab: a channel tile fused with the G row tiles of its image
// into the parallel loop (a 7×7 layer's 16 channel tiles × 7 rows; the conv template fuses them so
// two cores split 112 iterations, not 16), index S·⌊p / G⌋ + rest, rest depending on p only through
// p mod G. Then the group's G iterations together prefetch the next group's slab, the step t of
// iteration p mod G being the group's step (p mod G)·N + t of G·N.
//
// Why: a slab larger than the caches a core keeps it in between calls comes from memory, and the
// hardware prefetcher fetches it only as the iteration first reads it: the first pass over it runs
// at the memory's speed, the passes after it from L2 leave memory idle. ResNet-50's last 1×1 convs
// (4 MiB of weights, a channel tile's 64 KiB read by 7 row tiles) and ResNet-18's 7×7 Winograd
// products (U 16.8 MB, 64 KiB a position and channel tile) ran 12–32% faster with the next slab
// fetched through the current one's steps (a C harness, weights flushed, Zen 5; docs/backends.md).
//
// Which: a param the kernel never writes, of more bytes than `minBytes` (the caller passes the
// target record's L2: a buffer that size is not in L2 when the kernel starts), whose every read in
// the loop's body has a constant coefficient S of the parallel variable and a rest within [0, S)
// over the body's loop bounds, with S's slab and the next one together within `maxSlabBytes` (the
// L2 too: the current slab stays cached while the next one comes in), read at least MIN_REUSE
// times an iteration (a slab read once is what the hardware prefetcher streams well by itself), and
// read in the vector loops of a register tile's step (the step's serial loop around them, or one
// outside it, issues the hints) — or as a tensor intrinsic's operand, one contiguous run from its
// flat base (the VNNI dot the c emitter calls: 64 bytes of weights a call, a step by itself; its
// reads count its operand's elements). The int8 convs with their channels in the lanes read their
// weights so, a channel tile's slab shared by the G row tiles fused with it: ResNet-18's 14² and 7²
// convs (0.3–2.4 MB of weights) ran 0.25 ms a run faster with the next slab fetched (docs/backends.md).
//
// Meaning: a prefetch reads nothing into the program and writes nothing; the evaluators skip it.
// Its index is kept within the buffer (the next slab of the last iteration is its own), which the
// pass's law checks with every line of the next slab fetched (laws/lowering/tir/prefetch-next-tile.law.ts).
import { BYTES } from "../../ast/graph/dtype.js"
import { storedBuffers } from "../../ast/tir/analysis.js"
import { mapStmt, type Buffer, type Prefetch, type PrimFunc, type Stmt } from "../../ast/tir/tir.js"
import { add, c, collect, div, floordiv, floormod, mapExpr, min, mul, substitute, v, type Expr, type Read, type Var } from "../../ast/te/expr.js"
import { mentions } from "../../ast/te/linear-index.js"
import { coef } from "../../ast/te/linear-index.js"
import { tirPass, type TirPass } from "./tir-pass.js"

type ForStmt = Extract<Stmt, { kind: "for" }>

/** Bytes of a cache line (the prefetch's unit). */
export const CACHE_LINE_BYTES = 64

/** Times an iteration reads its slab (elements read over the slab's size) from which the next slab is prefetched. */
export const MIN_REUSE = 2

/** Prefetches a step issues at most (more lines than that per step of the innermost loop: the slab is too large for its steps). */
export const MAX_PER_STEP = 4

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
  /** Elements the read takes from `index` on, contiguous (1: a scalar read; an intrinsic's operand: its placeholder's size). */
  readonly span: number
  /** A tensor intrinsic's operand: a vector step by itself (the VNNI dot the c emitter calls). */
  readonly intrinsic: boolean
  /** Read in a form whose elements the pass does not follow (an intrinsic's operand not one contiguous run): no plan for its buffer. */
  readonly opaque: boolean
}

const constantLoop = (l: ForStmt): { min: number; extent: number } | undefined =>
  l.min.kind === "const" && l.extent.kind === "const" ? { min: l.min.value, extent: l.extent.value } : undefined

/** Every read of `buffers` in `s`, with the loops around it. */
const readSites = (s: Stmt, buffers: ReadonlySet<string>, loops: readonly ForStmt[], out: Map<string, Site[]>): void => {
  const exprs = (es: readonly Expr[]) => {
    for (const e of es)
      for (const r of collect(e, (x) => x.kind === "read" && buffers.has((x as Read).source)) as Read[]) {
        if (r.indices.length !== 1) continue
        out.set(r.source, [...(out.get(r.source) ?? []), { index: r.indices[0], loops, span: 1, intrinsic: false, opaque: false }])
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
    case "intrinsic":
      // (an operand one contiguous run from its flat base — the VNNI dot's, as the c emitter requires)
      return s.inputs.forEach((r, k) => {
        if (!buffers.has(r.buffer)) return
        const shape = s.intrin.inputs[k]?.shape ?? []
        const inner = r.strides?.slice(r.strides.length - shape.length) ?? []
        const dense = r.base.length === 1 && inner.length === shape.length && shape.every((_, d) => inner[d] === shape.slice(d + 1).reduce((a, x) => a * x, 1))
        const span = shape.reduce((a, x) => a * x, 1)
        out.set(r.buffer, [...(out.get(r.buffer) ?? []), { index: r.base[0] ?? c(0), loops, span, intrinsic: true, opaque: !dense }])
      })
    case "barrier":
      return
  }
}

/**
 * How the parallel loop's iterations share slabs: G iterations a slab (G = 1: each its own), and
 * every read's index with ⌊p / G⌋ as the variable `group` and p mod G as `within`; undefined where p
 * appears otherwise, or in quotients by more than one G.
 */
const groupsOf = (par: ForStmt, sites: readonly Site[]): { G: number; indices: Expr[]; group: Var; within: Var } | undefined => {
  const p = par.var.name
  const isP = (e: Expr) => e.kind === "var" && e.name === p
  const quotient = (e: Expr) => e.kind === "bin" && (e.op === "floordiv" || e.op === "div") && isP(e.a) && e.b.kind === "const"
  const remainder = (e: Expr) => e.kind === "bin" && e.op === "floormod" && isP(e.a) && e.b.kind === "const"
  const Gs = new Set(sites.flatMap((site) => collect(site.index, (x) => quotient(x) || remainder(x)).map((x) => ((x as { b: Expr }).b as { value: number }).value)))
  const group = v(`${p}.group`, par.var.dtype)
  const within = v(`${p}.within`, par.var.dtype)
  if (Gs.size === 0) return { G: 1, indices: sites.map((site) => substitute(site.index, new Map([[p, group]]))), group, within }
  const range = constantLoop(par)
  const G = [...Gs][0]
  if (Gs.size > 1 || G < 2 || !range || range.min !== 0 || range.extent % G !== 0) return undefined
  const indices = sites.map((site) => mapExpr(site.index, (x) => (quotient(x) ? group : remainder(x) ? within : undefined)))
  return indices.some((e) => mentions(e, p)) ? undefined : { G, indices, group, within }
}

/** The prefetch plan for one buffer's sites in a parallel loop: the serial loop that issues it and its hints. */
const planFor = (par: ForStmt, buffer: Buffer, sites: readonly Site[], maxSlabBytes: number): { loop: ForStmt; prefetch: Prefetch[] } | undefined => {
  const range = constantLoop(par)
  if (!range || sites.some((site) => site.opaque)) return undefined
  const grouping = groupsOf(par, sites)
  if (!grouping) return undefined
  const { G, indices, group, within } = grouping
  // the groups' first and last (G = 1: the iterations')
  const [first, last] = G === 1 ? [range.min, range.min + range.extent - 1] : [0, range.extent / G - 1]
  if (last <= first) return undefined
  const coefficients = new Set(indices.map((index) => coef(index, group.name)))
  if (coefficients.size !== 1) return undefined
  const S = [...coefficients][0]
  if (S === undefined || S <= 0 || 2 * S * BYTES[buffer.dtype] > maxSlabBytes) return undefined
  // each read's rest within [0, S) over the loop bounds inside the parallel loop (and the group's iterations)
  for (const [k, site] of sites.entries()) {
    const ranges = new Map<string, readonly [number, number]>([[within.name, [0, G - 1]]])
    for (const l of site.loops) {
      const r = constantLoop(l)
      if (!r) return undefined
      ranges.set(l.var.name, [r.min, r.min + r.extent - 1])
    }
    const b = exprBounds(substitute(indices[k], new Map([[group.name, c(0, par.var.dtype)]])), ranges)
    if (!b || b[0] < 0 || b[1] + site.span - 1 >= S) return undefined
  }
  // the innermost serial loop around the reads, and the serial loops down to it: where the reads sit
  // in several loop nests side by side in the parallel loop's body (a matmul's row tiles and, beside
  // them, the tail tile LoopPartition peeled off), the one most of them run in issues the hints —
  // the others read the same slab (checked above). Not where they share a serial loop (a conv's
  // window positions unrolled into sibling loops inside its channel loop: left as it was measured)
  const serialPath = (site: Site) => site.loops.filter((l) => l.forKind === "serial")
  const innermost = (site: Site) => serialPath(site).at(-1)
  if (sites.some((site) => !innermost(site) || serialPath(site).some((l) => !constantLoop(l)))) return undefined
  const readsOf = (site: Site) => site.span * site.loops.reduce((m, l) => m * constantLoop(l)!.extent, 1)
  const loops = [...new Set(sites.map(innermost))]
  const total = (l: ForStmt | undefined) => sites.reduce((n, site) => n + (innermost(site) === l ? readsOf(site) : 0), 0)
  const loop = loops.reduce((a, b) => (total(b) > total(a) ? b : a))!
  const issuing = sites.filter((site) => innermost(site) === loop)
  const path = serialPath(issuing[0])
  if (issuing.some((site) => serialPath(site).some((l, k) => l !== path[k]))) return undefined
  if (sites.some((site) => innermost(site) !== loop && site.loops.some((l) => path.includes(l)))) return undefined
  // (a step of a vector register tile: every read in a vectorized loop inside `loop` — not a scalar
  // loop the emitter turns into a vector reduction of its own, a LayerNorm's row sum)
  // (or a tensor intrinsic, a vector step by itself: the VNNI dot)
  if (sites.some((site) => !site.intrinsic && !site.loops.slice(site.loops.indexOf(innermost(site)!) + 1).some((l) => l.forKind === "vectorized"))) return undefined
  // the slab read at least twice a group (a slab read once streams well as it is: the hardware
  // prefetcher follows it, and a prefetch more a step only splits the bandwidth — a DensePack's
  // panels, one weight vector a step, ran 1.2–1.7× slower with them)
  const extents = path.map((l) => constantLoop(l)!.extent)
  const readsPerStep = issuing.reduce((n, site) => n + site.span * site.loops.slice(site.loops.indexOf(loop) + 1).reduce((m, l) => m * constantLoop(l)!.extent, 1), 0)
  if (G * extents.reduce((a, b) => a * b, 1) * readsPerStep < MIN_REUSE * S) return undefined
  const lineElems = Math.max(1, Math.floor(CACHE_LINE_BYTES / BYTES[buffer.dtype]))
  // (a slab that does not start on a line: one more, its last element's)
  const lines = Math.ceil(S / lineElems) + (S % lineElems === 0 ? 0 : 1)
  // the loop that issues the hints: the outermost serial loop down to `loop` whose steps leave at
  // most MAX_PER_STEP lines a step (a loop further in asks for each line several times: ViT-B/16's
  // patch embedding, 14 steps a line at `loop`, ran 1.3× slower with a hint every step)
  const stepsTo = (k: number) => G * extents.slice(0, k + 1).reduce((a, b) => a * b, 1)
  const at = path.findIndex((_, k) => stepsTo(k) * MAX_PER_STEP >= lines)
  if (at < 0) return undefined
  const steps = stepsTo(at)
  const perStep = Math.ceil(lines / steps)
  // the group's step t of its G·N: the iteration's place in its group, then the serial loops down
  // to the hinting one linearized, outermost first
  const i = par.var as Var
  let t: Expr = G === 1 ? c(0, i.dtype) : floormod(i, c(G, i.dtype))
  for (const l of path.slice(0, at + 1)) {
    const r = constantLoop(l)!
    t = add(mul(t, c(r.extent, i.dtype)), l.min.kind === "const" && l.min.value === 0 ? l.var : add(l.var, c(-r.min, i.dtype)))
  }
  const groupOf: Expr = G === 1 ? i : floordiv(i, c(G, i.dtype))
  const next = mul(min(add(groupOf, c(1, i.dtype)), c(last, i.dtype)), c(S, i.dtype))
  const prefetch = Array.from({ length: perStep }, (_, j) => {
    // line ⌊(t·perStep + j) · lines / (steps · perStep)⌋ of the next slab
    const line = div(mul(add(mul(t, c(perStep, i.dtype)), c(j, i.dtype)), c(lines, i.dtype)), c(steps * perStep, i.dtype))
    return { buffer: buffer.name, index: add(next, min(mul(line, c(lineElems, i.dtype)), c(S - 1, i.dtype))) }
  })
  return { loop: path[at], prefetch }
}

/**
 * The prefetch plan for a buffer no slab plan takes, read in tiles along a serial loop inside the
 * parallel one (a projection's column tiles over its input's channel planes): at each step of the
 * loop `H` the reads' lines of the next step of the tile loop `X`. `H` is the innermost serial loop
 * around every read that moves some read by a line or more, the loops inside it each within a line
 * (a block's lanes, the vector loop); `X` the innermost serial loop outside `H` that moves every
 * read by the same C ≠ 0 (loops between them that do not move the reads, channel tiles, repeat the
 * hints). A hint is a read's index at X + 1, the loops inside `H` at their first step, kept within
 * the buffer (the last tile's next is the next parallel iteration's first, or none). Only for a
 * buffer past the L2 (`l2Bytes`: it streams from beyond it), where the reads inside `H` start on a
 * line (every other coefficient and the constant multiples of a line), each line of a step of `X`
 * is read at least MIN_REUSE times a line's elements, that step's lines and the next step's fit half
 * the L1 (`l1Bytes`: the current tile's lines, read again by every channel tile, stay while the
 * next come in, beside the weights streaming through), and `H` hints at most one line per line of
 * reads of its step. Why: the input streams from beyond the L2 in as many streams as the tile
 * reads planes (16 at ResNet-50's 56² projections), which the hardware prefetcher does not run
 * ahead of (docs/scheduling.md, twelfth session).
 */
const planNextTile = (buffer: Buffer, sites: readonly Site[], l1Bytes: number, l2Bytes: number): { loop: ForStmt; prefetch: Prefetch[] } | undefined => {
  if (buffer.shape.reduce((a, d) => a * d, 1) * BYTES[buffer.dtype] <= l2Bytes || sites.some((site) => site.intrinsic)) return undefined
  const lineElems = Math.max(1, Math.floor(CACHE_LINE_BYTES / BYTES[buffer.dtype]))
  const common = sites[0].loops.filter((l, k) => sites.every((site) => site.loops[k] === l))
  if (common.some((l) => !constantLoop(l)) || sites.some((site) => site.loops.some((l) => !constantLoop(l)))) return undefined
  const extent = (l: ForStmt) => constantLoop(l)!.extent
  const within = (site: Site, l: ForStmt) => {
    const k = coef(site.index, l.var.name)
    return k !== undefined && Math.abs(k) * (extent(l) - 1) < lineElems
  }
  const serial = common.filter((l) => l.forKind === "serial")
  const h = [...serial].reverse().find((l) => sites.some((site) => !within(site, l)))
  if (!h) return undefined
  const inner = (site: Site) => site.loops.slice(site.loops.indexOf(h) + 1)
  if (sites.some((site) => inner(site).some((l) => !within(site, l)))) return undefined
  const x = [...serial.slice(0, serial.indexOf(h))].reverse().find((l) => sites.every((site) => coef(site.index, l.var.name) !== 0))
  if (!x || extent(x) < 2) return undefined
  const steps = new Set(sites.map((site) => coef(site.index, x.var.name)))
  if (steps.size !== 1 || [...steps][0] === undefined) return undefined
  // each read's index with the loops inside H at their first step: on a line's start
  const starts = sites.map((site) => substitute(site.index, new Map(inner(site).map((l) => [l.var.name, l.min] as const))))
  const aligned = (e: Expr) => {
    const vars = [...collect(e, (y) => y.kind === "var")].map((y) => (y as Var).name)
    const cs = vars.map((n) => coef(e, n))
    const at0 = exprBounds(substitute(e, new Map(vars.map((n) => [n, c(0)] as const))), new Map())
    return at0 !== undefined && at0[0] % lineElems === 0 && cs.every((k) => k !== undefined && k % lineElems === 0)
  }
  if (!starts.every(aligned)) return undefined
  const i = x.var as Var
  const next = (e: Expr) => substitute(e, new Map([[i.name, add(i, c(1, i.dtype))]]))
  const size = buffer.shape.reduce((a, d) => a * d, 1)
  const keys = new Map<string, Prefetch>()
  for (const e of starts) keys.set(JSON.stringify(e), { buffer: buffer.name, index: min(next(e), c(size - 1, i.dtype)) })
  const hints = [...keys.values()]
  // reads a step of X and of H, against the lines they touch
  const between = common.slice(common.indexOf(x) + 1, common.indexOf(h) + 1)
  // (a vector loop that does not move a read broadcasts it: one load)
  const readsInside = (site: Site, from: ForStmt) =>
    site.loops.slice(site.loops.indexOf(from) + 1).reduce((m, l) => (l.forKind === "vectorized" && coef(site.index, l.var.name) === 0 ? m : m * extent(l)), 1)
  const readsX = sites.reduce((n, site) => n + readsInside(site, x), 0)
  const linesX = hints.length * between.filter((l) => sites.some((site) => coef(site.index, l.var.name) !== 0)).reduce((m, l) => m * extent(l), 1)
  if (readsX < MIN_REUSE * linesX * lineElems || 2 * linesX * CACHE_LINE_BYTES > l1Bytes / 2) return undefined
  if (hints.length * lineElems > sites.reduce((n, site) => n + readsInside(site, h), 0)) return undefined
  return { loop: h, prefetch: hints }
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
    const bySize = large.filter((b) => sites.has(b.name)).sort((a, b) => b.shape.reduce((x, d) => x * d, 1) * BYTES[b.dtype] - a.shape.reduce((x, d) => x * d, 1) * BYTES[a.dtype])
    const slabs = bySize.map((b) => planFor(s, b, sites.get(b.name)!, maxSlabBytes)).filter((x) => x !== undefined)
    // (else the next tile of a buffer read in tiles along a serial loop)
    const plans = slabs.length ? slabs : bySize.map((b) => planNextTile(b, sites.get(b.name)!, minBytes, maxSlabBytes)).filter((x) => x !== undefined)
    if (plans.length === 0) return undefined
    const { loop, prefetch } = plans[0]
    const inner = mapStmt(s.body, (x) => (x === loop ? { ...loop, prefetch: [...(loop.prefetch ?? []), ...prefetch] } : undefined))
    return { ...s, body: inner }
  })
  return body === f.body ? f : { ...f, body }
}

/**
 * The pass: buffers over `minBytes` streamed, slabs of up to half `maxSlabBytes`; a buffer's next
 * tile where it exceeds `maxSlabBytes` and two tiles' lines fit half of `minBytes` (the caller: the
 * target record's L1 and L2).
 */
export const prefetchNextTile = (minBytes: number, maxSlabBytes: number = minBytes): TirPass =>
  tirPass("lowering.PrefetchNextTile", 2, (f) => prefetchNextTiles(f, minBytes, maxSlabBytes))
