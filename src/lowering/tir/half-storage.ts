// lowering.HalfStorage (the cuda target's `--precision fp16`): a lowered kernel's float32 params
// that the arena holds as halves become float16 buffers — loads widen to float, stores round to
// nearest even through float16 (the TIR evaluator's converter and CUDA's __float2half_rn alike) —
// while everything inside the kernel stays float32: registers, shared memory (a fetch converts
// once), workspace, and every accumulation. A param the kernel reads back after storing to it (a
// reduction that accumulates in its output, as the auto-bind rule's serial reductions and the
// tiling rule's epilogue-free anchors do) would round every partial sum to half; it gets a
// float32 twin in the workspace instead, every access redirected to it, and one more launch at the
// end copies the twin out, rounding once. So a kernel's outputs are its float32 results rounded
// once, the law in laws/lowering/tir/half-storage.law.ts. Runs after the cuda pipeline (storage
// flat), on one PrimFunc and the set of its params stored as halves. Pure.
import { Data } from "effect"
import { bin, c, collect, read, v, type Expr } from "../../ast/te/expr.js"
import type { CudaAttrs } from "../../ast/target.js"
import { mapStmt, seq, type Buffer, type PrimFunc, type Stmt } from "../../ast/tir/tir.js"
import { bindThreads } from "../templates/gpu/auto-bind.js"
import { gpuLimits } from "../templates/gpu/limits.js"

export const HALF_STORAGE_PASS = "lowering.HalfStorage"

/** The suffix of a half param's float32 twin in the workspace. */
export const ACCUMULATOR_SUFFIX = ".f32acc"

export interface HalfStorageOptions {
  /** For the laws: keep the read-back params as halves (accumulation rounded to half at every step). Never set in Tessera. */
  readonly accumulateInHalf?: boolean
}

/** Whether `s` reads buffer `name`, and whether it stores to it. */
const accessOf = (s: Stmt, name: string): { readonly reads: boolean; readonly stores: boolean } => {
  let reads = false
  let stores = false
  mapStmt(
    s,
    (x) => {
      if ((x.kind === "store" || x.kind === "shuffle") && x.buffer === name) stores = true
      if (x.kind === "intrinsic") {
        if (x.output.buffer === name) stores = true
        if (x.inputs.some((r) => r.buffer === name)) reads = true
      }
      return undefined
    },
    (e) => {
      if (!reads && collect(e, (y) => y.kind === "read" && y.source === name).length) reads = true
      return e
    },
  )
  return { reads, stores }
}

/** Every access to buffer `from` made to `to` (reads keep their dtype: the twin is float32, as the param's reads were). */
const redirect = (s: Stmt, from: string, to: string): Stmt =>
  mapStmt(
    s,
    (x) => {
      // (mapStmt has redirected the statement's expressions already)
      if ((x.kind === "store" || x.kind === "shuffle") && x.buffer === from) return { ...x, buffer: to }
      return undefined
    },
    (e) => redirectExpr(e, from, to),
  )

const redirectExpr = (e: Expr, from: string, to: string): Expr => {
  switch (e.kind) {
    case "read":
      return read(e.source === from ? to : e.source, e.indices.map((i) => redirectExpr(i, from, to)), e.dtype)
    case "bin":
      return { ...e, a: redirectExpr(e.a, from, to), b: redirectExpr(e.b, from, to) }
    case "select":
      return { ...e, cond: redirectExpr(e.cond, from, to), t: redirectExpr(e.t, from, to), f: redirectExpr(e.f, from, to) }
    case "cast":
      return { ...e, value: redirectExpr(e.value, from, to) }
    case "call":
      return { ...e, args: e.args.map((a) => redirectExpr(a, from, to)) }
    default:
      return e
  }
}

/** One launch copying `src` (float32) into `dst` (float16) element by element over their flat storage, auto-bound as the GPU rules bind an injective stage. */
const copyOut = (dst: Buffer, src: Buffer, attrs: CudaAttrs, k: number): Stmt => {
  const n = dst.shape[0]
  const threads = Math.min(bindThreads(n, gpuLimits(attrs)), n)
  const blocks = Math.ceil(n / threads)
  const b = v(`half_copy${k}_b`)
  const t = v(`half_copy${k}_t`)
  const i = bin("add", bin("mul", b, c(threads)), t)
  const store: Stmt = { kind: "store", buffer: dst.name, indices: [i], value: read(src.name, [i], "float32") }
  const body: Stmt = blocks * threads === n ? store : { kind: "if", cond: bin("lt", i, c(n)), then: store }
  return {
    kind: "for",
    var: b,
    min: c(0),
    extent: c(blocks),
    forKind: "thread",
    thread: "blockIdx.x",
    body: { kind: "for", var: t, min: c(0), extent: c(threads), forKind: "thread", thread: "threadIdx.x", body },
  }
}

/** A kernel that cannot hold a param as halves (a defect of the caller or of lowering; the cuda emitter reports it as an EmitError naming the kernel). */
export class HalfStorageError extends Data.TaggedError("HalfStorageError")<{ readonly kernel: string; readonly reason: string }> {}

/**
 * `f` with the params named in `half` (float32, flat) stored as float16: read-only and write-only
 * ones retyped in place, read-back ones through a float32 twin copied out at the end.
 */
export const halfStorage = (f: PrimFunc, half: ReadonlySet<string>, attrs: CudaAttrs, options: HalfStorageOptions = {}): PrimFunc => {
  let body = f.body
  const twins: { readonly param: Buffer; readonly twin: Buffer }[] = []
  const params = f.params.map((p): Buffer => {
    if (!half.has(p.name)) return p
    if (p.dtype !== "float32") throw new HalfStorageError({ kernel: f.name, reason: `param ${p.name} is ${p.dtype}; only float32 params are stored as halves` })
    if (p.shape.length !== 1) throw new HalfStorageError({ kernel: f.name, reason: `param ${p.name} is not flat (rank ${p.shape.length}): ${HALF_STORAGE_PASS} runs after lowering.FlattenStorage` })
    const h: Buffer = { ...p, dtype: "float16" }
    const use = accessOf(body, p.name)
    if (use.reads && use.stores && !options.accumulateInHalf) {
      const twin: Buffer = { name: `${p.name}${ACCUMULATOR_SUFFIX}`, dtype: "float32", shape: p.shape, ...(p.strides ? { strides: p.strides } : {}), scope: "global" }
      body = redirect(body, p.name, twin.name)
      twins.push({ param: h, twin })
    }
    return h
  })
  if (twins.length === 0) return { ...f, params }
  const copies = twins.map((x, k) => copyOut(x.param, x.twin, attrs, k))
  const wrapped = twins.reduceRight<Stmt>((inner, x) => ({ kind: "allocate", buffer: x.twin, body: inner }), seq([body, ...copies]))
  return { ...f, params, body: wrapped }
}
