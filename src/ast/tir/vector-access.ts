// Vector accesses (float2 / float4) of the cuda target, where they are proven: a vectorized loop
// `for[vectorized] e in [0, n): D[i] = S[j]` (a copy of 4-byte elements: the tiling rule's
// cooperative fetches into shared memory) whose indices are each `base + e` for every e < n — the
// lanes contiguous — with `base` a multiple of n for every value of the variables around it — the
// access aligned to n elements, given that every buffer starts 16-byte aligned (the arena's regions
// are 256-byte aligned, constants 64-byte, `__shared__` and local arrays `__align__(16)`). The
// proof is symbolic, over the flat index: `laneSplit` writes an index as base + k·e through sums,
// products by constants, floordiv and floormod (a floordiv or floormod by d keeps the lanes whole
// when d is a multiple of k·n and the base a multiple of k·n); `residue` gives an expression's value
// modulo m where the variables' values do not matter (a product by a multiple of m, floormod by a
// multiple of m, floordiv through the residue modulo d·m). What it cannot prove stays the scalar
// `#pragma unroll` loop. The width n·4 bytes is what the static verifier checks against the target
// record's maxVectorBytes (verify.ts) before anything is emitted. A source of halves (`--precision
// fp16`) into float32 is the same proof: base a multiple of n elements is n·2-byte aligned, and the
// emitter loads the n halves as one 4- or 8-byte access, widened. Pure.
import type { DType } from "../graph/dtype.js"
import { bin, c, freeVars, type Expr } from "../te/expr.js"
import { simplify } from "../te/simplify.js"
import type { Stmt } from "./tir.js"

type ForStmt = Stmt & { readonly kind: "for" }

/** `e mod m` (in [0, m)) when it is the same for every value of the variables in it; undefined when not proven. */
export const residue = (e: Expr, m: number): number | undefined => {
  if (m === 1) return 0
  const mod = (x: number) => ((x % m) + m) % m
  switch (e.kind) {
    case "const":
      return Number.isInteger(e.value) ? mod(e.value) : undefined
    case "bin": {
      const { a, b } = e
      switch (e.op) {
        case "add":
        case "sub": {
          const ra = residue(a, m)
          const rb = residue(b, m)
          return ra === undefined || rb === undefined ? undefined : mod(e.op === "add" ? ra + rb : ra - rb)
        }
        case "mul": {
          if ((a.kind === "const" && a.value % m === 0) || (b.kind === "const" && b.value % m === 0)) return 0
          const ra = residue(a, m)
          const rb = residue(b, m)
          return ra === undefined || rb === undefined ? undefined : mod(ra * rb)
        }
        case "floormod":
          return b.kind === "const" && b.value > 0 && b.value % m === 0 ? residue(a, m) : undefined
        case "floordiv": {
          if (b.kind !== "const" || b.value <= 0) return undefined
          const r = residue(a, b.value * m)
          return r === undefined ? undefined : mod(Math.floor(r / b.value))
        }
        default:
          return undefined
      }
    }
    default:
      return undefined
  }
}

const mentions = (e: Expr, name: string): boolean => freeVars(e).has(name)

/** `e` as base + k·lane for every lane in [0, n) (base free of the lane variable), when proven. */
export const laneSplit = (e: Expr, lane: string, n: number): { readonly base: Expr; readonly k: number } | undefined => {
  if (!mentions(e, lane)) return { base: e, k: 0 }
  if (e.kind === "var") return e.name === lane ? { base: c(0), k: 1 } : { base: e, k: 0 }
  if (e.kind !== "bin") return undefined
  const { a, b } = e
  switch (e.op) {
    case "add":
    case "sub": {
      const x = laneSplit(a, lane, n)
      const y = laneSplit(b, lane, n)
      if (!x || !y) return undefined
      return { base: bin(e.op, x.base, y.base), k: e.op === "add" ? x.k + y.k : x.k - y.k }
    }
    case "mul": {
      const [k, other] = a.kind === "const" ? [a.value, b] : b.kind === "const" ? [b.value, a] : [undefined, undefined]
      if (k === undefined || other === undefined) return undefined
      const x = laneSplit(other, lane, n)
      return x && { base: bin("mul", x.base, c(k)), k: x.k * k }
    }
    case "floordiv":
    case "floormod": {
      if (b.kind !== "const" || b.value <= 0) return undefined
      const x = laneSplit(a, lane, n)
      if (!x || x.k < 0) return undefined
      // the same value at every lane (a floordiv of the lanes' block, say): so is its quotient or remainder
      if (x.k === 0) return { base: bin(e.op, x.base, b), k: 0 }
      // the lanes stay within one block of d: d a multiple of k·n, the base a multiple of k·n
      const span = x.k * n
      if (b.value % span !== 0 || residue(x.base, span) !== 0) return undefined
      return e.op === "floordiv" ? { base: bin("floordiv", x.base, b), k: 0 } : { base: bin("floormod", x.base, b), k: x.k }
    }
    default:
      return undefined
  }
}

/** A vectorized loop that is an aligned contiguous copy of n 4-byte elements: its store and read's buffers and the bases at lane 0. */
export interface VectorCopy {
  readonly lanes: number
  readonly dst: string
  readonly dstBase: Expr
  readonly src: string
  readonly srcBase: Expr
  /** The source's elements: float32, or float16 widened to float32 on the way (`--precision fp16`: n·2 bytes read, n·4 written). */
  readonly srcDtype: "float32" | "float16"
}

export const vectorCopy = (s: ForStmt, dtypeOf: (buffer: string) => DType | undefined, maxVectorBytes: number): VectorCopy | undefined => {
  if (s.forKind !== "vectorized" || s.min.kind !== "const" || s.min.value !== 0 || s.extent.kind !== "const") return undefined
  const n = s.extent.value
  if ((n !== 2 && n !== 4) || n * 4 > maxVectorBytes) return undefined
  const st = s.body
  if (st.kind !== "store" || st.indices.length !== 1 || st.value.kind !== "read" || st.value.indices.length !== 1) return undefined
  const srcDtype = dtypeOf(st.value.source)
  if (st.value.dtype !== "float32" || dtypeOf(st.buffer) !== "float32" || (srcDtype !== "float32" && srcDtype !== "float16")) return undefined
  const lane = s.var.name
  const d = laneSplit(st.indices[0], lane, n)
  const r = laneSplit(st.value.indices[0], lane, n)
  if (!d || !r || d.k !== 1 || r.k !== 1 || residue(d.base, n) !== 0 || residue(r.base, n) !== 0) return undefined
  return { lanes: n, dst: st.buffer, dstBase: simplify(d.base), src: st.value.source, srcBase: simplify(r.base), srcDtype }
}

/** Whether a condition has the same value for every lane in [0, n): each comparison's operands laneSplit with no lane term. */
export const laneInvariant = (e: Expr, lane: string, n: number): boolean => {
  if (!mentions(e, lane)) return true
  if (e.kind === "call" && e.fn === "not") return laneInvariant(e.args[0], lane, n)
  if (e.kind !== "bin") return false
  if (e.op === "and" || e.op === "or") return laneInvariant(e.a, lane, n) && laneInvariant(e.b, lane, n)
  if (!["lt", "le", "gt", "ge", "eq", "ne"].includes(e.op)) return false
  const a = laneSplit(e.a, lane, n)
  const b = laneSplit(e.b, lane, n)
  return a !== undefined && b !== undefined && a.k === 0 && b.k === 0
}
