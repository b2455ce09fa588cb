// TIR: the loop IR every target emits from. A PrimFunc runs statements over Buffers; loops carry
// their kind (serial, parallel, vectorized, unrolled, thread-bound, vthread).
import type { DType } from "../graph/dtype.js"
import { showExpr, substitute, type Expr, type Var } from "../te/expr.js"
import type { MemoryScope, ThreadTag } from "../schedule/stage.js"
import type { TensorIntrinsic } from "../te/intrinsic.js"

export interface Buffer {
  readonly name: string
  readonly dtype: DType
  readonly shape: readonly number[]
  /** Row-major unless given (storageAlign pads the strides). */
  readonly strides?: readonly number[]
  readonly scope: MemoryScope
  /** For a flattened param: the tensor it holds (logical shape and strides into the flat storage). */
  readonly view?: { readonly shape: readonly number[]; readonly strides: readonly number[] }
}

export type ForKind = "serial" | "parallel" | "vectorized" | "unrolled" | "thread" | "vthread"

export type Stmt =
  | {
      readonly kind: "for"
      readonly var: Var
      readonly min: Expr
      readonly extent: Expr
      readonly forKind: ForKind
      readonly thread?: ThreadTag
      readonly body: Stmt
      readonly pragmas?: readonly (readonly [string, string])[]
      /**
       * Cache hints issued at the start of every iteration (lowering.PrefetchNextTile): each asks for
       * the line holding buffer[index] (a flat index) ahead of its use. No effect on any value: the
       * evaluators skip them; an emitter without prefetches drops them.
       */
      readonly prefetch?: readonly Prefetch[]
    }
  | { readonly kind: "seq"; readonly body: readonly Stmt[] }
  | { readonly kind: "store"; readonly buffer: string; readonly indices: readonly Expr[]; readonly value: Expr }
  | { readonly kind: "if"; readonly cond: Expr; readonly then: Stmt; readonly else?: Stmt }
  | { readonly kind: "allocate"; readonly buffer: Buffer; readonly body: Stmt }
  | { readonly kind: "let"; readonly var: Var; readonly value: Expr; readonly body: Stmt }
  | { readonly kind: "evaluate"; readonly value: Expr }
  | { readonly kind: "barrier" }
  /**
   * A warp shuffle down (CUDA's `__shfl_down_sync(mask, value, offset, width)`): every lane of the
   * warp named in `mask` arrives here together, evaluates `value`, and stores into buffer[indices]
   * the value of the lane `offset` above it within its segment of `width` lanes (its own value
   * where that lane lies past the segment). The lane is the thread's threadIdx.x mod 32.
   */
  | { readonly kind: "shuffle"; readonly buffer: string; readonly indices: readonly Expr[]; readonly value: Expr; readonly offset: number; readonly width: number; readonly mask: number }
  /** A tensor intrinsic applied to buffer regions starting at `base` (one index per dim). */
  | { readonly kind: "intrinsic"; readonly intrin: TensorIntrinsic; readonly output: Region; readonly inputs: readonly Region[] }

/** A cache hint: the line holding `buffer[index]` (flat) fetched ahead of its use. */
export interface Prefetch {
  readonly buffer: string
  readonly index: Expr
}

export interface Region {
  readonly buffer: string
  /** One index per dim; after FlattenStorage, one flat index with the dims' `strides`. */
  readonly base: readonly Expr[]
  readonly strides?: readonly number[]
}

export interface PrimFunc {
  readonly name: string
  /** Inputs then outputs. */
  readonly params: readonly Buffer[]
  readonly body: Stmt
}

/** Whether `pred` holds of `s` or of a statement inside it (loops, allocations, lets, sequences, both branches of an if). */
export const someStmt = (s: Stmt, pred: (s: Stmt) => boolean): boolean => {
  if (pred(s)) return true
  switch (s.kind) {
    case "for":
    case "allocate":
    case "let":
      return someStmt(s.body, pred)
    case "seq":
      return s.body.some((b) => someStmt(b, pred))
    case "if":
      return someStmt(s.then, pred) || (s.else !== undefined && someStmt(s.else, pred))
    default:
      return false
  }
}

/** The pragma that asks lowering.LoopPartition to cut a loop on its body's select conditions too (TVM's name); no emitter prints it. */
export const LOOP_PARTITION_HINT = "loop_partition_hint"

/**
 * The pragma on a parallel loop giving the chunks a thread its region is cut into (lowering.ParallelChunks;
 * the c pool's `tessera_parallel_for_chunks`); absent: the pool's own count. No effect on any value.
 */
export const PARALLEL_CHUNKS = "parallel_chunks"

export const seq = (body: readonly Stmt[]): Stmt => {
  const flat = body.flatMap((s) => (s.kind === "seq" ? s.body : [s]))
  return flat.length === 1 ? flat[0] : { kind: "seq", body: flat }
}

const showBuffer = (b: Buffer) => `${b.name}: ${b.dtype}[${b.shape.join(", ")}]${b.scope !== "global" ? ` @${b.scope}` : ""}${b.strides ? ` strides(${b.strides.join(", ")})` : ""}`

export const printStmt = (s: Stmt, indent = "  "): string => {
  switch (s.kind) {
    case "for": {
      const kind = s.forKind === "serial" ? "for" : s.forKind === "thread" || s.forKind === "vthread" ? `for[${s.thread}]` : `for[${s.forKind}]`
      const pr = s.pragmas?.length ? ` pragma(${s.pragmas.map(([k, v]) => `${k}=${v}`).join(", ")})` : ""
      const pf = s.prefetch?.length ? ` prefetch(${s.prefetch.map((p) => `${p.buffer}[${showExpr(p.index)}]`).join(", ")})` : ""
      return `${indent}${kind} ${s.var.name} in [${showExpr(s.min)}, +${showExpr(s.extent)})${pr}${pf}:\n${printStmt(s.body, indent + "  ")}`
    }
    case "seq":
      return s.body.map((b) => printStmt(b, indent)).join("\n")
    case "store":
      return `${indent}${s.buffer}[${s.indices.map(showExpr).join(", ")}] = ${showExpr(s.value)}`
    case "if":
      return `${indent}if ${showExpr(s.cond)}:\n${printStmt(s.then, indent + "  ")}${s.else ? `\n${indent}else:\n${printStmt(s.else, indent + "  ")}` : ""}`
    case "allocate":
      return `${indent}allocate ${showBuffer(s.buffer)}\n${printStmt(s.body, indent)}`
    case "let":
      return `${indent}let ${s.var.name} = ${showExpr(s.value)}\n${printStmt(s.body, indent)}`
    case "evaluate":
      return `${indent}${showExpr(s.value)}`
    case "barrier":
      return `${indent}barrier()`
    case "shuffle":
      return `${indent}${s.buffer}[${s.indices.map(showExpr).join(", ")}] = shfl_down(${showExpr(s.value)}, ${s.offset}, width ${s.width}, mask 0x${(s.mask >>> 0).toString(16)})`
    case "intrinsic": {
      const r = (x: Region) => `${x.buffer}[${x.base.map(showExpr).join(", ")}]`
      return `${indent}${s.intrin.name}(${r(s.output)}${s.intrin.mode === "update" ? " +=" : " ="} ${s.inputs.map(r).join(", ")})`
    }
  }
}

export const printPrimFunc = (f: PrimFunc): string => `primfunc ${f.name}(${f.params.map(showBuffer).join(", ")}):\n${printStmt(f.body)}`

const sameList = <A>(xs: readonly A[], ys: readonly A[]): boolean => xs.every((x, i) => x === ys[i])

/** seq(body) when it would rebuild `x` as it is (no nested seq to flatten, not a singleton). */
const sameSeq = (x: Stmt & { kind: "seq" }, body: readonly Stmt[]): boolean => x.body.length !== 1 && sameList(x.body, body) && body.every((b) => b.kind !== "seq")

/**
 * Rebuilds a statement bottom-up; `f` may replace any statement (after its children are rebuilt).
 * A statement whose children and expressions come back unchanged is kept as it is (not copied).
 */
export const mapStmt = (s: Stmt, f: (s: Stmt) => Stmt | undefined, g: (e: Expr) => Expr = (e) => e): Stmt => {
  const gs = (es: readonly Expr[]): readonly Expr[] => {
    const out = es.map(g)
    return sameList(es, out) ? es : out
  }
  const region = (r: Region): Region => {
    const base = gs(r.base)
    return base === r.base ? r : { ...r, base }
  }
  const rec = (x: Stmt): Stmt => {
    let y: Stmt
    switch (x.kind) {
      case "for": {
        const min = g(x.min)
        const extent = g(x.extent)
        const body = rec(x.body)
        const prefetch = x.prefetch?.map((p) => ({ buffer: p.buffer, index: g(p.index) }))
        const samePrefetch = !x.prefetch || x.prefetch.every((p, i) => p.index === prefetch![i].index)
        y = min === x.min && extent === x.extent && body === x.body && samePrefetch ? x : { ...x, min, extent, body, ...(prefetch && !samePrefetch ? { prefetch } : {}) }
        break
      }
      case "seq": {
        const body = x.body.map(rec)
        y = sameSeq(x, body) ? x : seq(body)
        break
      }
      case "store": {
        const indices = gs(x.indices)
        const value = g(x.value)
        y = indices === x.indices && value === x.value ? x : { ...x, indices, value }
        break
      }
      case "if": {
        const cond = g(x.cond)
        const then = rec(x.then)
        const otherwise = x.else ? rec(x.else) : undefined
        y = cond === x.cond && then === x.then && otherwise === x.else ? x : { ...x, cond, then, ...(otherwise ? { else: otherwise } : {}) }
        break
      }
      case "allocate": {
        const body = rec(x.body)
        y = body === x.body ? x : { ...x, body }
        break
      }
      case "let": {
        const value = g(x.value)
        const body = rec(x.body)
        y = value === x.value && body === x.body ? x : { ...x, value, body }
        break
      }
      case "evaluate": {
        const value = g(x.value)
        y = value === x.value ? x : { ...x, value }
        break
      }
      case "barrier":
        y = x
        break
      case "shuffle": {
        const indices = gs(x.indices)
        const value = g(x.value)
        y = indices === x.indices && value === x.value ? x : { ...x, indices, value }
        break
      }
      case "intrinsic": {
        const output = region(x.output)
        const inputs = x.inputs.map(region)
        y = output === x.output && sameList(x.inputs, inputs) ? x : { ...x, output, inputs }
        break
      }
    }
    return f(y) ?? y
  }
  return rec(s)
}

/** Substitutes variables everywhere in a statement. */
export const substituteStmt = (s: Stmt, env: ReadonlyMap<string, Expr>): Stmt => mapStmt(s, () => undefined, (e) => substitute(e, env))
