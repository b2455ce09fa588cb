// The `c` target: PrimFuncs → one C11 translation unit (plus its header), built by gcc or clang
// into a shared library and called through an FFI. Pure and deterministic: same funcs and options,
// same bytes. Identifiers are generated (b0 for buffers, v3 for variables) in order of first
// appearance; names from programs appear only in escaped comments.
//
// Lowering to C:
// - one `void name(T* restrict b0, …)` per PrimFunc, params in order, typed by their storage type
//   (src/emit/c-expr.ts: float16/bfloat16 as float, int64/uint64 as double, bool as uint8_t);
//   params never stored to are `const`. `restrict` says params do not overlap: in-place kernels
//   whose output shares an input's storage with a different index pattern need `restrict: false`;
// - loops are `for (int64_t v = min; v < min + extent; ++v)`; parallel loops carry
//   `#pragma omp parallel for` (OpenMP; nested ones run serially in their thread), vectorized
//   loops `#pragma omp simd`, unrolled loops `#pragma GCC unroll n`; thread / vthread loops run
//   serially (a CPU has no thread binding);
// - allocations are aligned stack arrays up to `stackBytes`, aligned heap blocks above (freed at
//   the end of their statement); their contents start undefined (the evaluator's are zero: no
//   lowered program reads before writing; `poison` fills them with 0xff bytes to check that);
// - barriers are no-ops outside thread loops (as in the evaluator); a barrier inside a thread loop
//   is a GPU schedule whose phases a serial loop cannot keep, and is rejected;
// - tensor intrinsics: a `tessera_gemm_*` micro-kernel (TensorIntrinsic.emit.c) is called with
//   its definition included once, when its operands have unit inner strides; any other intrinsic
//   must be lowered first (lowering.LowerIntrinsics), else emission throws.
import { add, c, mul, type Expr } from "../ast/te/expr.js"
import type { Interval } from "../ast/te/simplify.js"
import { intervalOf } from "../ast/te/simplify.js"
import type { Buffer, PrimFunc, Region, Stmt } from "../ast/tir/tir.js"
import { castC, commentSafe, C_PRELUDE, C_STORAGE, C_VALUE, exprC, valueClass, type ExprScope } from "./c-expr.js"

/** What the c target does with each TIR construct (the emitter below implements exactly this). */
export const C_CAPABILITIES = {
  parallel: "OpenMP parallel for (nested ones serial)",
  vectorized: "omp simd",
  unrolled: "GCC unroll",
  thread: "serial loop",
  vthread: "serial loop",
  barrier: "no-op outside thread loops; rejected inside",
  intrinsic: "tessera_gemm_* micro-kernels called; others need lowering.LowerIntrinsics",
  allocate: "aligned stack array up to stackBytes, aligned heap above",
} as const

export interface CEmitOptions {
  /** Params are declared `restrict` (they never overlap). Default true. */
  readonly restrict?: boolean
  /** Allocations up to this many bytes live on the stack. Default 32 KiB. */
  readonly stackBytes?: number
  /** Fill every allocation with 0xff bytes (NaN / -1) so a read before write shows. Default false. */
  readonly poison?: boolean
  /** The header's include guard and the library's name in comments. Default "tessera_kernels". */
  readonly libName?: string
}

export interface CEmitted {
  readonly source: string
  readonly header: string
}

export class CEmitError extends Error {
  override readonly name = "CEmitError"
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/
const C_KEYWORDS = new Set(
  "auto break case char const continue default do double else enum extern float for goto if inline int long register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while main _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local".split(
    " ",
  ),
)

/** Whether `name` can be an exported C symbol here (no keyword, no reserved or generated prefix). */
export const isSafeCName = (name: string): boolean =>
  IDENT.test(name) && !C_KEYWORDS.has(name) && !name.startsWith("tessera_") && !name.startsWith("_") && !/^[bv][0-9]+$/.test(name) && name.length <= 200

class Names {
  private readonly map = new Map<string, string>()
  constructor(private readonly prefix: string) {}
  get(name: string): string {
    let n = this.map.get(name)
    if (n === undefined) {
      n = `${this.prefix}${this.map.size}`
      this.map.set(name, n)
    }
    return n
  }
}

const rowMajor = (shape: readonly number[]): number[] => {
  const st = new Array<number>(shape.length)
  let acc = 1
  for (let i = shape.length - 1; i >= 0; i--) {
    st[i] = acc
    acc *= shape[i]
  }
  return st
}

const elements = (b: Buffer): number => {
  const st = b.strides ?? rowMajor(b.shape)
  return b.shape.length ? b.shape.reduce((s, d, k) => s + (d - 1) * st[k], 1) : 1
}

const storedBuffers = (s: Stmt, out: Set<string>): Set<string> => {
  switch (s.kind) {
    case "store":
      out.add(s.buffer)
      break
    case "intrinsic":
      out.add(s.output.buffer)
      break
    case "for":
    case "allocate":
    case "let":
      storedBuffers(s.body, out)
      break
    case "seq":
      s.body.forEach((b) => storedBuffers(b, out))
      break
    case "if":
      storedBuffers(s.then, out)
      if (s.else) storedBuffers(s.else, out)
      break
  }
  return out
}

interface Ctx {
  readonly vars: Names
  readonly bufs: Names
  /** Buffers in scope by name (params, then allocations; inner ones shadow). */
  readonly buffers: Map<string, Buffer>
  readonly bounds: Map<string, Interval>
  /** Inside `#pragma omp simd`: no OpenMP construct may nest there. */
  readonly inSimd: boolean
  readonly inThreadLoop: boolean
  readonly options: Required<Omit<CEmitOptions, "libName">>
  /** Intrinsic definitions used, by function name (in first-use order). */
  readonly intrinsics: Map<string, string>
  readonly out: string[]
}

const scopeOf = (ctx: Ctx): ExprScope => ({
  variable: (name) => ctx.vars.get(name),
  access: (source, indices) => access(ctx, source, indices),
  bounds: ctx.bounds,
})

/** The flat element index: one index is already flat; several go through the buffer's strides. */
const flatIndex = (ctx: Ctx, source: string, indices: readonly Expr[]): string => {
  const b = ctx.buffers.get(source)
  if (!b) throw new CEmitError(`access to the unknown buffer ${commentSafe(source)}`)
  if (indices.length === 1) return e(ctx, indices[0])
  if (indices.length !== b.shape.length) throw new CEmitError(`buffer ${commentSafe(source)} of rank ${b.shape.length} accessed with ${indices.length} indices`)
  const st = b.strides ?? rowMajor(b.shape)
  return e(ctx, indices.reduce<Expr>((acc, x, k) => add(acc, mul(x, c(st[k]))), c(0)))
}

const access = (ctx: Ctx, source: string, indices: readonly Expr[]): string => `${ctx.bufs.get(source)}[${flatIndex(ctx, source, indices)}]`

const e = (ctx: Ctx, x: Expr): string => exprC(x, scopeOf(ctx))

const withBounds = (ctx: Ctx, name: string, iv: Interval | undefined, patch: Partial<Ctx> = {}): Ctx => {
  const bounds = new Map(ctx.bounds)
  if (iv) bounds.set(name, iv)
  else bounds.delete(name)
  return { ...ctx, ...patch, bounds }
}

const KNOWN_PRAGMAS = new Set(["auto_unroll_max_step"])

const emitFor = (s: Extract<Stmt, { kind: "for" }>, ind: string, ctx: Ctx): void => {
  const v = ctx.vars.get(s.var.name)
  const min = e(ctx, s.min)
  const ext = e(ctx, s.extent)
  const lo = s.min.kind === "const" ? s.min.value : undefined
  const n = s.extent.kind === "const" ? s.extent.value : undefined
  const end = lo === 0 ? ext : lo !== undefined && n !== undefined ? String(lo + n) : `${min} + ${ext}`
  for (const [k, val] of s.pragmas ?? []) if (!KNOWN_PRAGMAS.has(k)) ctx.out.push(`${ind}/* pragma ${commentSafe(k)} = ${commentSafe(val)} */`)
  const autoUnroll = (s.pragmas ?? []).filter(([k]) => k === "auto_unroll_max_step").map(([, val]) => Number(val))
  let simd = ctx.inSimd
  let inThread = ctx.inThreadLoop
  switch (s.forKind) {
    case "parallel":
      ctx.out.push(ctx.inSimd ? `${ind}/* parallel (inside a simd loop: serial) */` : `${ind}#pragma omp parallel for schedule(static)`)
      break
    case "vectorized":
      if (!ctx.inSimd) ctx.out.push(`${ind}#pragma omp simd`)
      simd = true
      break
    case "unrolled":
      ctx.out.push(`${ind}#pragma GCC unroll ${n !== undefined ? Math.max(1, Math.min(n, 64)) : 8}`)
      break
    case "thread":
    case "vthread":
      ctx.out.push(`${ind}/* ${s.forKind} ${commentSafe(s.thread ?? "")}: serial on a CPU */`)
      if (s.forKind === "thread" && s.thread?.startsWith("threadIdx")) inThread = true
      break
    case "serial":
      if (n !== undefined && autoUnroll.some((m) => n <= m)) ctx.out.push(`${ind}#pragma GCC unroll ${n}`)
      break
  }
  ctx.out.push(`${ind}for (int64_t ${v} = ${min}; ${v} < ${end}; ++${v}) {`)
  const lo2 = intervalOf(s.min, ctx.bounds)
  const ext2 = intervalOf(s.extent, ctx.bounds)
  const iv = Number.isFinite(lo2.min) && Number.isFinite(lo2.max + ext2.max) ? { min: lo2.min, max: lo2.max + ext2.max - 1 } : undefined
  emitStmt(s.body, ind + "  ", withBounds(ctx, s.var.name, iv, { inSimd: simd, inThreadLoop: inThread }))
  ctx.out.push(`${ind}}`)
}

const emitAllocate = (s: Extract<Stmt, { kind: "allocate" }>, ind: string, ctx: Ctx): void => {
  const b = s.buffer
  const id = ctx.bufs.get(b.name)
  const t = C_STORAGE[b.dtype]
  const n = Math.max(1, elements(b))
  const bytes = n * BYTES[t]
  const note = `/* ${commentSafe(b.name)} ${b.dtype}[${b.shape.join("x")}] @${commentSafe(b.scope)} */`
  const heap = bytes > ctx.options.stackBytes
  ctx.out.push(`${ind}{`)
  const inner = ind + "  "
  if (heap) ctx.out.push(`${inner}${t}* restrict ${id} = (${t}*)tessera_alloc(${bytes}); ${note}`)
  else ctx.out.push(`${inner}_Alignas(64) ${t} ${id}[${n}]; ${note}`)
  if (ctx.options.poison) ctx.out.push(`${inner}memset(${id}, 0xff, ${bytes});`)
  const buffers = new Map(ctx.buffers).set(b.name, b)
  emitStmt(s.body, inner, { ...ctx, buffers })
  if (heap) ctx.out.push(`${inner}tessera_free(${id}, ${bytes});`)
  ctx.out.push(`${ind}}`)
}

const BYTES: Readonly<Record<string, number>> = { float: 4, double: 8, int8_t: 1, int16_t: 2, int32_t: 4, uint8_t: 1, uint16_t: 2, uint32_t: 4 }

/** A `tessera_gemm_*` call: c[m×n] (+)= a[m×k] · b[k×n] with leading dims from the flat regions. */
const emitIntrinsic = (s: Extract<Stmt, { kind: "intrinsic" }>, ind: string, ctx: Ctx): void => {
  const def = s.intrin.emit.c
  const lower = `intrinsic ${commentSafe(s.intrin.name)} needs lowering.LowerIntrinsics before the c emitter`
  if (!def || !def.fn.startsWith("tessera_gemm_") || !IDENT.test(def.fn)) throw new CEmitError(lower)
  const operand = (r: Region, shape: readonly number[]): { ptr: string; ld: number } => {
    const b = ctx.buffers.get(r.buffer)
    if (!b || b.dtype !== "float32") throw new CEmitError(lower)
    const st = r.strides ?? b.strides ?? rowMajor(b.shape)
    const inner = st.slice(st.length - shape.length)
    if (shape.length !== 2 || inner.length !== 2 || inner[1] !== 1) throw new CEmitError(lower)
    const base = r.strides ? e(ctx, r.base[0]) : flatIndex(ctx, r.buffer, r.base)
    return { ptr: `&${ctx.bufs.get(r.buffer)}[${base}]`, ld: inner[0] }
  }
  const out = operand(s.output, s.intrin.compute.shape)
  const ins = s.intrin.inputs.map((p, k) => operand(s.inputs[k], p.shape))
  if (!ctx.intrinsics.has(def.fn)) ctx.intrinsics.set(def.fn, def.header)
  ctx.out.push(`${ind}${def.fn}(${[out, ...ins].map((o) => `${o.ptr}, ${o.ld}`).join(", ")});`)
}

const emitStmt = (s: Stmt, ind: string, ctx: Ctx): void => {
  switch (s.kind) {
    case "for":
      return emitFor(s, ind, ctx)
    case "seq":
      for (const b of s.body) emitStmt(b, ind, ctx)
      return
    case "store": {
      const b = ctx.buffers.get(s.buffer)
      if (!b) throw new CEmitError(`store to the unknown buffer ${commentSafe(s.buffer)}`)
      const lhs = access(ctx, s.buffer, s.indices)
      ctx.out.push(`${ind}${lhs} = ${castC(b.dtype, s.value.dtype, e(ctx, s.value))};`)
      return
    }
    case "if":
      ctx.out.push(`${ind}if (${e(ctx, s.cond)}) {`)
      emitStmt(s.then, ind + "  ", ctx)
      if (s.else) {
        ctx.out.push(`${ind}} else {`)
        emitStmt(s.else, ind + "  ", ctx)
      }
      ctx.out.push(`${ind}}`)
      return
    case "allocate":
      return emitAllocate(s, ind, ctx)
    case "let": {
      const cls = valueClass(s.var.dtype)
      ctx.out.push(`${ind}{`)
      ctx.out.push(`${ind}  const ${C_VALUE[cls]} ${ctx.vars.get(s.var.name)} = ${e(ctx, s.value)};`)
      const iv = cls === "int" ? intervalOf(s.value, ctx.bounds) : undefined
      emitStmt(s.body, ind + "  ", withBounds(ctx, s.var.name, iv && Number.isFinite(iv.min) && Number.isFinite(iv.max) ? iv : undefined))
      ctx.out.push(`${ind}}`)
      return
    }
    case "evaluate":
      ctx.out.push(`${ind}(void)(${e(ctx, s.value)});`)
      return
    case "barrier":
      if (ctx.inThreadLoop) throw new CEmitError("a barrier inside a thread loop (a GPU schedule) cannot run on the c target")
      ctx.out.push(`${ind}/* barrier: no-op outside thread loops */`)
      return
    case "intrinsic":
      return emitIntrinsic(s, ind, ctx)
  }
}

/** The definition's signature; the header's prototype drops `restrict` (a top-level qualifier, so the two agree, and C++ can include it). */
const signature = (f: PrimFunc, bufs: Names, restrict: boolean): string => {
  const stored = storedBuffers(f.body, new Set())
  const params = f.params.map((p) => `${stored.has(p.name) ? "" : "const "}${C_STORAGE[p.dtype]}*${restrict ? " restrict" : ""} ${bufs.get(p.name)}`)
  return `void ${f.name}(${params.join(", ")})`
}

const describe = (f: PrimFunc): string => {
  const stored = storedBuffers(f.body, new Set())
  return `/* ${commentSafe(f.name)}: ${f.params.map((p) => `${commentSafe(p.name)} ${p.dtype}[${(p.view?.shape ?? p.shape).join("x")}]${stored.has(p.name) ? " out" : ""}`).join(", ")} */`
}

const checkNames = (funcs: readonly PrimFunc[]): void => {
  const seen = new Set<string>()
  for (const f of funcs) {
    if (!isSafeCName(f.name)) throw new CEmitError(`function name ${commentSafe(f.name)} is not a safe C identifier (rename it, e.g. k0)`)
    if (seen.has(f.name)) throw new CEmitError(`function name ${f.name} appears twice`)
    seen.add(f.name)
  }
}

/** One C translation unit defining every function, and the header declaring them. */
export const emitC = (funcs: readonly PrimFunc[], options: CEmitOptions = {}): CEmitted => {
  checkNames(funcs)
  const restrict = options.restrict ?? true
  const opts = { restrict, stackBytes: options.stackBytes ?? 32 * 1024, poison: options.poison ?? false }
  const lib = options.libName ?? "tessera_kernels"
  if (!IDENT.test(lib)) throw new CEmitError(`library name ${commentSafe(lib)} is not a safe C identifier`)
  const intrinsics = new Map<string, string>()
  const bodies: string[] = []
  const protos: string[] = []
  for (const f of funcs) {
    const vars = new Names("v")
    const bufs = new Names("b")
    const sig = signature(f, bufs, restrict)
    const out: string[] = [describe(f), `${sig} {`]
    const ctx: Ctx = { vars, bufs, buffers: new Map(f.params.map((p) => [p.name, p] as const)), bounds: new Map(), inSimd: false, inThreadLoop: false, options: opts, intrinsics, out }
    emitStmt(f.body, "  ", ctx)
    out.push("}")
    bodies.push(out.join("\n"))
    protos.push(`${describe(f)}\n${signature(f, new Names("b"), false)};`)
  }
  const source = [`/* Generated by Tessera (c target): ${lib}. Do not edit. */`, C_PRELUDE, ...[...intrinsics.values()].map((h) => `${h}\n`), ...bodies.map((b) => `${b}\n`)].join("\n")
  const guard = `${lib.toUpperCase()}_H`
  const header = [
    `/* Generated by Tessera (c target): ${lib}. Do not edit. */`,
    `#ifndef ${guard}`,
    `#define ${guard}`,
    `#include <stdint.h>`,
    `#ifdef __cplusplus`,
    `extern "C" {`,
    `#endif`,
    "",
    ...protos.map((p) => `${p}\n`),
    `#ifdef __cplusplus`,
    `}`,
    `#endif`,
    `#endif`,
    "",
  ].join("\n")
  return { source, header }
}
