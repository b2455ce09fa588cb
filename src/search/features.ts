// Features of a candidate for the cost model, from its lowered TIR (AutoTVM's loop-variable
// features): for the innermost loops of the main loop nest, their extents and annotations; for
// the buffer accesses of its innermost store, strides on the innermost loop, touched elements and
// reuse over the innermost loops; nest counts and allocation sizes; plus the knob values, each known
// knob in a slot of its own (so rows of different templates and tasks line up, for transfer
// learning), the generated space's splits a slot per level and axis, other knobs after them by
// position.
import { collect, type Expr, type Var } from "../ast/te/expr.js"
import { evalExpr } from "../ast/te/eval-expr.js"
import type { PrimFunc, Stmt } from "../ast/tir/tir.js"
import { knobValue, type Config, type Knob } from "../lowering/templates/template.js"

const K_LOOPS = 6
const K_ACCESS = 4
/** The templates' knobs, a feature slot each (src/lowering/templates/). */
const KNOWN_KNOBS = [
  "tile_ow", "tile_oh", "tile_oc", "tile_ic", "reduce_order", "unroll_kh", "unroll_kw", "pad_root",
  "tile_inner", "tile_second", "vectorize", "unroll_tile", "fuse_epilogue", "oc_order", "ic_batch",
  "tile_rows", "tile_cols", "cols_outer", "sketch", "sk_vectorize", "sk_unroll", "sk_parallel", "sk_compute_at",
] as const
/**
 * The generated space's split knobs (sketch.ts), a slot per level: `sk_s<i>` = "a.b" as lg a and
 * lg b, `sk_r<j>` as lg of its factor. In the "others" slots by position they took the candidate's
 * index and only the first three got a slot, so configs that differed in a later axis's tile or in
 * a reduce factor (a 1×1 conv's `sk_r0` 2 against 8: 85 against 5.6 GFLOP/s) had one feature row.
 */
const K_SK_DATA = 6
const K_SK_REDUCE = 4
const K_OTHER = 3
/** Stores described one by one (the most work first), accesses per store, features per access. */
const K_STORES = 3
const K_STORE_ACCESS = 4
const PER_ACCESS = 5
const PER_STORE = 7 + K_STORE_ACCESS * PER_ACCESS
export const FEATURE_COUNT = K_LOOPS * 5 + K_ACCESS * 3 + 4 + KNOWN_KNOBS.length + 2 * K_SK_DATA + K_SK_REDUCE + K_OTHER + K_STORES * PER_STORE

/** A split knob with a slot of its own (past the slots, it goes to the "others" by position). */
const hasSketchSlot = (name: string): boolean => {
  const m = /^sk_([sr])(\d+)$/.exec(name)
  return m !== null && Number(m[2]) < (m[1] === "s" ? K_SK_DATA : K_SK_REDUCE)
}

interface Loop {
  readonly name: string
  readonly extent: number
  readonly kind: string
}

const lg = (x: number) => Math.log2(Math.max(x, 0) + 1)

const constExtent = (e: Expr): number => (e.kind === "const" ? e.value : 1)

/** Every store with the loops around it. */
const storesWithLoops = (s: Stmt, loops: Loop[], out: { loops: Loop[]; indices: readonly Expr[]; reads: Expr[]; value?: Expr }[]): void => {
  switch (s.kind) {
    case "for":
      storesWithLoops(s.body, [...loops, { name: s.var.name, extent: constExtent(s.extent), kind: s.forKind }], out)
      return
    case "seq":
      s.body.forEach((b) => storesWithLoops(b, loops, out))
      return
    case "if":
      storesWithLoops(s.then, loops, out)
      if (s.else) storesWithLoops(s.else, loops, out)
      return
    case "allocate":
    case "let":
      storesWithLoops(s.body, loops, out)
      return
    case "store":
      out.push({ loops, indices: s.indices, reads: collect(s.value, (e) => e.kind === "read"), value: s.value })
      return
    default:
      return
  }
}

const coefficient = (index: readonly Expr[], v: string): number => {
  if (index.length === 0) return 0
  // a multi-dimensional access: its last dimension's (contiguous) stride
  const e = index[index.length - 1]
  const vars = collect(e, (x) => x.kind === "var").map((x) => (x as Var).name)
  const at = (val: number) => evalExpr(e, new Map(vars.map((n) => [n, n === v ? val : 0])), () => 0)
  try {
    return Math.abs(at(1) - at(0))
  } catch {
    return 0
  }
}

export const featuresOf = (f: PrimFunc, knobs: readonly Knob[] = [], config: Config = {}): number[] => {
  const stores: { loops: Loop[]; indices: readonly Expr[]; reads: Expr[]; value?: Expr }[] = []
  storesWithLoops(f.body, [], stores)
  const work = (x: { loops: Loop[] }) => x.loops.reduce((p, l) => p * l.extent, 1)
  const main = stores.reduce<(typeof stores)[number] | undefined>((best, x) => (!best || work(x) > work(best) ? x : best), undefined)
  const feats: number[] = []
  const loops = main ? [...main.loops].reverse() : []
  for (let k = 0; k < K_LOOPS; k++) {
    const l = loops[k]
    feats.push(l ? lg(l.extent) : 0, l?.kind === "serial" ? 1 : 0, l?.kind === "parallel" ? 1 : 0, l?.kind === "vectorized" ? 1 : 0, l?.kind === "unrolled" ? 1 : 0)
  }
  const accesses: (readonly Expr[])[] = main ? [main.indices, ...main.reads.map((r) => (r.kind === "read" ? r.indices : []))] : []
  const inner = loops.slice(0, 3)
  for (let k = 0; k < K_ACCESS; k++) {
    const idx = accesses[k]
    if (!idx || !inner.length) {
      feats.push(0, 0, 0)
      continue
    }
    const stride = coefficient(idx, inner[0].name)
    const used = new Set(idx.flatMap((e) => collect(e, (x) => x.kind === "var").map((x) => (x as Var).name)))
    const touched = inner.reduce((p, l) => p * (used.has(l.name) ? l.extent : 1), 1)
    const iters = inner.reduce((p, l) => p * l.extent, 1)
    feats.push(lg(stride), lg(touched), lg(iters / touched))
  }
  let allocs = 0
  let allocBytes = 0
  const visit = (s: Stmt): void => {
    if (s.kind === "allocate") {
      allocs++
      allocBytes += s.buffer.shape.reduce((a, b) => a * b, 1) * 4
    }
    if (s.kind === "for" || s.kind === "allocate" || s.kind === "let") visit(s.body)
    if (s.kind === "seq") s.body.forEach(visit)
    if (s.kind === "if") {
      visit(s.then)
      if (s.else) visit(s.else)
    }
  }
  visit(f.body)
  feats.push(main ? lg(work(main)) : 0, stores.length, allocs, lg(allocBytes))
  const value = (knob: Knob | undefined): number => {
    const v = knob ? knobValue(knob, config) : undefined
    return typeof v === "number" ? lg(v) : typeof v === "boolean" ? (v ? 1 : 0) : typeof v === "string" && knob ? (knob.candidates as readonly unknown[]).indexOf(v) : 0
  }
  for (const name of KNOWN_KNOBS) feats.push(value(knobs.find((k) => k.name === name)))
  const knobAt = (name: string) => {
    const knob = knobs.find((k) => k.name === name)
    return knob ? knobValue(knob, config) : undefined
  }
  for (let i = 0; i < K_SK_DATA; i++) {
    const [a, b] = String(knobAt(`sk_s${i}`) ?? "1.1").split(".").map(Number)
    feats.push(lg(a || 1), lg(b || 1))
  }
  for (let j = 0; j < K_SK_REDUCE; j++) feats.push(lg(Number(knobAt(`sk_r${j}`) ?? 1)))
  const others = knobs.filter((k) => !(KNOWN_KNOBS as readonly string[]).includes(k.name) && !hasSketchSlot(k.name))
  for (let k = 0; k < K_OTHER; k++) feats.push(value(others[k]))
  const ranked = stores.map((x, k) => ({ x, k, w: work(x) })).sort((a, b) => b.w - a.w || a.k - b.k)
  for (let k = 0; k < K_STORES; k++) feats.push(...storeFeatures(ranked[k]?.x))
  return feats
}

const varsOf = (idx: readonly Expr[]): Set<string> => new Set(idx.flatMap((e) => collect(e, (x) => x.kind === "var").map((x) => (x as Var).name)))

const opsOf = (e: Expr): number => collect(e, (x) => x.kind === "bin" || x.kind === "call").length

/**
 * Ansor's per-store features, in small: the store's work and loop annotations (vectorized,
 * parallel and unrolled extents), its arithmetic (float ops and their intensity over the bytes
 * touched), and per access (the store, then its reads): bytes touched by the nest, reuse
 * (iterations per element), the stride along the innermost loop, the loops inside the
 * innermost one the access depends on (reuse distance in loops), and whether that stride is 1.
 */
const storeFeatures = (x: { loops: Loop[]; indices: readonly Expr[]; reads: Expr[]; value?: Expr } | undefined): number[] => {
  if (!x) return new Array<number>(PER_STORE).fill(0)
  const iters = x.loops.reduce((p, l) => p * l.extent, 1)
  const ext = (kind: string) => x.loops.filter((l) => l.kind === kind).reduce((p, l) => p * l.extent, 1)
  const ops = (x.value ? opsOf(x.value) : x.reads.length) * iters
  const accesses: (readonly Expr[])[] = [x.indices, ...x.reads.map((r) => (r.kind === "read" ? r.indices : []))]
  const inner = [...x.loops].reverse()
  let bytes = 0
  const per: number[] = []
  accesses.forEach((idx, k) => {
    const used = varsOf(idx)
    const touched = x.loops.reduce((p, l) => p * (used.has(l.name) ? l.extent : 1), 1)
    bytes += touched * 4
    if (k >= K_STORE_ACCESS) return
    const stride = inner.length ? coefficient(idx, inner[0].name) : 0
    const distance = inner.findIndex((l) => used.has(l.name))
    per.push(lg(touched * 4), lg(iters / touched), lg(stride), distance < 0 ? inner.length : distance, stride === 1 ? 1 : 0)
  })
  while (per.length < K_STORE_ACCESS * PER_ACCESS) per.push(0)
  return [lg(iters), x.loops.length, lg(ext("vectorized")), lg(ext("parallel")), lg(ext("unrolled")), lg(ops), lg(ops / Math.max(bytes, 1)), ...per]
}
