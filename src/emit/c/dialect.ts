// The c dialect of the C-family walker (../c-family): what the c target renders for each TIR
// construct. Lowering to C:
// - one `void name(T* restrict b0, …)` per PrimFunc, params in order, typed by their storage type
//   (expr.ts: float16/bfloat16 as float, int64 / uint64 as int64_t / uint64_t, bool as uint8_t); params never
//   stored to are `const`. `restrict` says params do not overlap: in-place kernels whose output
//   shares an input's storage with a different index pattern need `restrict: false`;
// - loops are `for (int64_t v = min; v < min + extent; ++v)`; vectorized loops carry
//   `#pragma omp simd`, unrolled loops `#pragma GCC unroll n`; thread / vthread loops run serially
//   (a CPU has no thread binding); a parallel loop, under `parallel: "pool"`, has its body outlined
//   into a static task over a range of its iterations (the buffers and variables it uses passed in
//   a struct, then as `restrict` params of a second function that runs the range) and is run by
//   Tessera's thread pool, `tessera_parallel_for(task, &args, extent)` (pool.ts); under "openmp" it
//   carries `#pragma omp parallel for schedule(static)`; nested ones run serially either way;
// - allocations are aligned stack arrays up to `stackBytes`, aligned heap blocks above (freed at
//   the end of their statement); their contents start undefined (the evaluator's are zero: no
//   lowered program reads before writing; `poison` fills them with 0xff bytes to check that);
// - barriers are no-ops outside thread loops (as in the evaluator); a barrier inside a thread loop
//   is a GPU schedule whose phases a serial loop cannot keep, and is rejected;
// - tensor intrinsics: a `tessera_gemm_*` micro-kernel (TensorIntrinsic.emit.c) is called with
//   its definition included once, when its operands have unit inner strides; any other intrinsic
//   must be lowered first (lowering.LowerIntrinsics), else emission throws.
import { storageBytes } from "../../ast/graph/dtype.js"
import { add, c, mul, type Expr } from "../../ast/te/expr.js"
import { intervalOf } from "../../ast/te/simplify.js"
import { LOOP_PARTITION_HINT, PARALLEL_CHUNKS, type PrimFunc, type Region } from "../../ast/tir/tir.js"
import { rowMajor, storageElements } from "../../ast/tir/analysis.js"
import type { CDialect, ForStmt, OutlinedLoop, ReduceLoop, StmtOf, Walk } from "../c-family/dialect.js"
import { commentSafe, isIdentifier } from "../c-family/names.js"
import { castC, cStorage, C_EXPR, C_VALUE, valueClass } from "./expr.js"
import { C_PRELUDE } from "./prelude.js"
import { cPool } from "./pool.js"
import { requantizeStoreLoop } from "./requantize-store.js"
import { vectorStoreLoop } from "./vector-store.js"

/** What the c target does with each TIR construct (the dialect below implements exactly this). */
export const C_CAPABILITIES = {
  parallel: "Tessera's thread pool, the body outlined (or OpenMP parallel for); nested ones serial",
  vectorized: "omp simd",
  unrolled: "GCC unroll",
  thread: "serial loop",
  vthread: "serial loop",
  barrier: "no-op outside thread loops; rejected inside",
  intrinsic: "tessera_gemm_* micro-kernels and the VNNI dot (vpdpbusd) called; others need lowering.LowerIntrinsics",
  allocate: "aligned stack array up to stackBytes, aligned heap above",
} as const

export interface CDialectOptions {
  /** Params are declared `restrict` (they never overlap). */
  readonly restrict: boolean
  /** Allocations up to this many bytes live on the stack. */
  readonly stackBytes: number
  /** Fill every allocation with 0xff bytes (NaN / -1) so a read before write shows. */
  readonly poison: boolean
  /** What runs parallel loops: Tessera's thread pool (pool.ts) or OpenMP (`#pragma omp parallel for`). */
  readonly parallel: CParallel
}

/** What runs the c target's parallel loops: the backend record's choice (src/backend/index.ts). */
export type CParallel = "pool" | "openmp"

/** The comment before a kernel: its name and params' tensors, outputs marked. */
export const describeC = (f: PrimFunc, stored: ReadonlySet<string>): string =>
  `/* ${commentSafe(f.name)}: ${f.params.map((p) => `${commentSafe(p.name)} ${p.dtype}[${(p.view?.shape ?? p.shape).join("x")}]${stored.has(p.name) ? " out" : ""}`).join(", ")} */`

/** A kernel's declaration; the header's prototype drops `restrict` (a top-level qualifier, so the two agree, and C++ can include it). */
export const declareC = (name: string, f: PrimFunc, params: readonly string[], stored: ReadonlySet<string>, restrict: boolean): string =>
  `void ${name}(${f.params.map((p, k) => `${stored.has(p.name) ? "" : "const "}${cStorage(p.dtype)}*${restrict ? " restrict" : ""} ${params[k]}`).join(", ")})`

/** The flat element index: one index is already flat; several go through the buffer's strides. */
const flatIndex = (w: Walk, source: string, indices: readonly Expr[]): string => {
  const b = w.buffer(source)
  if (!b) return w.fail(`access to the unknown buffer ${commentSafe(source)}`)
  if (indices.length === 1) return w.expr(indices[0])
  if (indices.length !== b.shape.length) return w.fail(`buffer ${commentSafe(source)} of rank ${b.shape.length} accessed with ${indices.length} indices`)
  const st = b.strides ?? rowMajor(b.shape)
  return w.expr(indices.reduce<Expr>((acc, x, k) => add(acc, mul(x, c(st[k]))), c(0)))
}

const access = (source: string, indices: readonly Expr[], w: Walk): string => `${w.buf(source)}[${flatIndex(w, source, indices)}]`

const KNOWN_PRAGMAS = new Set(["auto_unroll_max_step", LOOP_PARTITION_HINT, PARALLEL_CHUNKS])

const loopOf = (parallel: CParallel) => (s: ForStmt, w: Walk): { open: string[]; close: string[] } => {
  const v = w.variable(s.var.name)
  const min = w.expr(s.min)
  const ext = w.expr(s.extent)
  const lo = s.min.kind === "const" ? s.min.value : undefined
  const n = s.extent.kind === "const" ? s.extent.value : undefined
  const end = lo === 0 ? ext : lo !== undefined && n !== undefined ? String(lo + n) : `${min} + ${ext}`
  const open: string[] = []
  for (const [k, val] of s.pragmas ?? []) if (!KNOWN_PRAGMAS.has(k)) open.push(`/* pragma ${commentSafe(k)} = ${commentSafe(val)} */`)
  const autoUnroll = (s.pragmas ?? []).filter(([k]) => k === "auto_unroll_max_step").map(([, val]) => Number(val))
  // inside `#pragma omp simd` no OpenMP construct may nest
  const inSimd = w.loops.some((l) => l.forKind === "vectorized")
  switch (s.forKind) {
    case "parallel":
      // (under the pool, a parallel loop reaching here is inside another: the walker outlines the outer ones)
      open.push(inSimd ? `/* parallel (inside a simd loop: serial) */` : parallel === "pool" ? `/* parallel (inside a parallel loop: serial) */` : `#pragma omp parallel for schedule(static)`)
      break
    case "vectorized":
      if (!inSimd) open.push(`#pragma omp simd`)
      break
    case "unrolled":
      open.push(`#pragma GCC unroll ${n !== undefined ? Math.max(1, Math.min(n, 64)) : 8}`)
      break
    case "thread":
    case "vthread":
      open.push(`/* ${s.forKind} ${commentSafe(s.thread ?? "")}: serial on a CPU */`)
      break
    case "serial":
      if (n !== undefined && autoUnroll.some((m) => n <= m)) open.push(`#pragma GCC unroll ${n}`)
      break
  }
  open.push(`for (int64_t ${v} = ${min}; ${v} < ${end}; ++${v}) {`)
  // (cache hints at the top of the body: read, keep in all levels)
  for (const p of s.prefetch ?? []) open.push(`  __builtin_prefetch(&${access(p.buffer, [p.index], w)}, 0, 3);`)
  return { open, close: ["}"] }
}

/**
 * A loop reducing into one float element (sum, max or min): the element in a register of its
 * value class, the loop under `#pragma omp simd reduction(…)` so gcc vectorizes it, then stored
 * once. A sum's additions are reassociated (lanes of partial sums, as onnxruntime's are); max and
 * min are exact, and a NaN anywhere makes the result NaN (as the evaluator's Math.max / Math.min
 * do), kept in a flag beside the vector max. Float32 and float64 buffers only (integer classes and
 * the 64-bit integers stay as written); none inside another simd loop (OpenMP nests none).
 */
const reduceLoop = (s: ForStmt, r: ReduceLoop, w: Walk): string[] | undefined => {
  const b = w.buffer(r.store.buffer)
  if (!b || (b.dtype !== "float32" && b.dtype !== "float64") || r.term.dtype !== b.dtype) return undefined
  if (w.loops.slice(0, -1).some((l) => l.forKind === "vectorized")) return undefined
  const type = C_VALUE[valueClass(b.dtype)]
  const acc = w.variable(`${s.var.name}#acc`)
  const target = w.access(r.store.buffer, r.store.indices)
  const header = loopOf("openmp")({ ...s, forKind: "serial", pragmas: (s.pragmas ?? []).filter(([k]) => k !== "auto_unroll_max_step") }, w).open.map((l) => `  ${l}`)
  if (r.op === "add")
    return ["{", `  ${type} ${acc} = ${target};`, `  #pragma omp simd reduction(+:${acc})`, ...header, `    ${acc} = ${acc} + ${w.expr(r.term)};`, "  }", `  ${target} = ${acc};`, "}"]
  const nan = w.variable(`${s.var.name}#nan`)
  const x = w.variable(`${s.var.name}#x`)
  const cmp = r.op === "max" ? ">" : "<"
  return [
    "{",
    `  ${type} ${acc} = ${target};`,
    `  int ${nan} = ${acc} != ${acc};`,
    `  #pragma omp simd reduction(${r.op}:${acc}) reduction(|:${nan})`,
    ...header,
    `    const ${type} ${x} = ${w.expr(r.term)};`,
    `    ${acc} = ${x} ${cmp} ${acc} ? ${x} : ${acc};`,
    `    ${nan} |= ${x} != ${x};`,
    "  }",
    `  ${target} = ${nan} ? (${type})NAN : ${acc};`,
    "}",
  ]
}

/** A thread loop over threadIdx: a GPU schedule's block of threads, which a barrier synchronises. */
const inThreadLoop = (w: Walk): boolean => w.loops.some((l) => l.forKind === "thread" && l.thread?.startsWith("threadIdx") === true)

/**
 * A VNNI dot: `tessera_vnni_dot_16x4(c, a, b)` (c int32[16], a uint8[4], b int8[16×4]) or
 * `tessera_vnni_dot_px_16x4(c, a, b)` (a uint8[16×4], b int8[4]), `tessera_vnni_dot_ch_16x4(c, a, b)`
 * (a uint8[4×16], b int8[16×4]), `tessera_vnni_dot_win_16x4_s*_d*(c, a, b)`
 * (a uint8[15·s + 3·d + 1], b int8[4]), or the first's AVX2 form
 * `tessera_avx2_dot_16x4` (vpmaddubsw / vpmaddwd, exact), each operand one contiguous run
 * (unit inner strides, a [16×4] operand's rows 4 apart), as the intrinsic's placeholders declare.
 */
const vnniCall = (s: StmtOf<"intrinsic">, w: Walk, lower: string): string[] => {
  const def = s.intrin.emit.c!
  const operand = (r: Region, shape: readonly number[], dtype: string): string => {
    const b = w.buffer(r.buffer)
    if (!b || b.dtype !== dtype) return w.fail(lower)
    const st = r.strides ?? b.strides ?? rowMajor(b.shape)
    const inner = st.slice(st.length - shape.length)
    const dense = shape.every((_, k) => inner[k] === shape.slice(k + 1).reduce((a, x) => a * x, 1))
    if (inner.length !== shape.length || !dense) return w.fail(lower)
    return `&${w.buf(r.buffer)}[${r.strides ? w.expr(r.base[0]) : flatIndex(w, r.buffer, r.base)}]`
  }
  const out = operand(s.output, [16], "int32")
  const [a, b] = s.intrin.inputs.map((p, k) => operand(s.inputs[k], p.shape, p.dtype))
  w.define(def.fn, def.header)
  return [`${def.fn}(${out}, ${a}, ${b});`]
}

/** A `tessera_gemm_*` call: c[m×n] (+)= a[m×k] · b[k×n] with leading dims from the flat regions. */
const intrinsic = (s: StmtOf<"intrinsic">, w: Walk): string[] => {
  const def = s.intrin.emit.c
  const lower = `intrinsic ${commentSafe(s.intrin.name)} needs lowering.LowerIntrinsics before the c emitter`
  if (def?.fn === "tessera_vnni_dot_16x4" || def?.fn === "tessera_vnni_dot_px_16x4" || def?.fn === "tessera_vnni_dot_ch_16x4" || def?.fn === "tessera_avx2_dot_16x4" || /^tessera_vnni_dot_win_16x4_s\d+_d\d+$/.test(def?.fn ?? "")) return vnniCall(s, w, lower)
  if (!def || !def.fn.startsWith("tessera_gemm_") || !isIdentifier(def.fn)) return w.fail(lower)
  const operand = (r: Region, shape: readonly number[]): { ptr: string; ld: number } => {
    const b = w.buffer(r.buffer)
    if (!b || b.dtype !== "float32") return w.fail(lower)
    const st = r.strides ?? b.strides ?? rowMajor(b.shape)
    const inner = st.slice(st.length - shape.length)
    if (shape.length !== 2 || inner.length !== 2 || inner[1] !== 1) return w.fail(lower)
    const base = r.strides ? w.expr(r.base[0]) : flatIndex(w, r.buffer, r.base)
    return { ptr: `&${w.buf(r.buffer)}[${base}]`, ld: inner[0] }
  }
  const out = operand(s.output, s.intrin.compute.shape)
  const ins = s.intrin.inputs.map((p, k) => operand(s.inputs[k], p.shape))
  w.define(def.fn, def.header)
  return [`${def.fn}(${[out, ...ins].map((o) => `${o.ptr}, ${o.ld}`).join(", ")});`]
}

/**
 * A parallel loop outlined for the pool: a struct of what the body uses, a function running
 * iterations [lo, hi) with them as params (`restrict` as the kernel's: so gcc vectorizes the body as
 * it would in place), the task that unpacks the struct into it, and the call in place of the loop.
 */
const outlineLoop = (restrict: boolean) => (o: OutlinedLoop, w: Walk): { definition: string[]; call: string[] } => {
  const r = restrict ? " restrict" : ""
  // (names no kernel can have: emit.ts's codeKey takes the kernel's name out of them)
  const task = `tessera_par${o.index}_${o.kernel}`
  const range = `tessera_range${o.index}_${o.kernel}`
  const fields = [
    ...o.buffers.map(({ buffer: b, stored }) => ({ name: w.buf(b.name), type: `${stored ? "" : "const "}${cStorage(b.dtype)}*`, qual: r })),
    ...o.vars.map((x) => ({ name: w.variable(x.name), type: `${C_VALUE[valueClass(x.dtype)]}`, qual: "" })),
  ]
  const lo = o.min === "0" ? "tessera_lo" : `${o.min} + tessera_lo`
  const hi = o.min === "0" ? "tessera_hi" : `${o.min} + tessera_hi`
  const params = [...fields.map((f) => `${f.type}${f.qual} ${f.name}`), "int64_t tessera_lo", "int64_t tessera_hi"]
  const definition = [
    `/* ${commentSafe(o.loop.var.name)}: a parallel loop's body, run by the thread pool over iterations [lo, hi) */`,
    `struct ${task} { ${fields.map((f) => `${f.type} ${f.name}; `).join("")}};`,
    `static void ${range}(${params.join(", ")}) {`,
    `  for (int64_t ${o.variable} = ${lo}; ${o.variable} < ${hi}; ++${o.variable}) {`,
    ...o.body,
    "  }",
    "}",
    `static void ${task}(const void* tessera_args, int64_t tessera_lo, int64_t tessera_hi) {`,
    `  const struct ${task}* tessera_a = (const struct ${task}*)tessera_args;`,
    `  ${range}(${[...fields.map((f) => `tessera_a->${f.name}`), "tessera_lo", "tessera_hi"].join(", ")});`,
    "}",
  ]
  // (a short region's loop: its chunks a thread from the pragma, lowering.ParallelChunks; else the pool's)
  const chunks = (o.loop.pragmas ?? []).find(([k]) => k === PARALLEL_CHUNKS)?.[1]
  const run = chunks === undefined ? `tessera_parallel_for(${task}, &tessera_args, ${w.expr(o.loop.extent)});` : `tessera_parallel_for_chunks(${task}, &tessera_args, ${w.expr(o.loop.extent)}, ${Number(chunks)});`
  const call = ["{", `  const struct ${task} tessera_args = { ${fields.map((f) => f.name).join(", ")} };`, `  ${run}`, "}"]
  return { definition, call }
}

/** The c dialect under `options`. */
export const cDialect = (options: CDialectOptions): CDialect => ({
  target: "c",
  prelude: options.parallel === "pool" ? `${C_PRELUDE}${cPool("static ")}` : C_PRELUDE,
  signature: (f, name, params, stored) => [describeC(f, stored), `${declareC(name, f, params, stored, options.restrict)} {`],
  expr: C_EXPR,
  access,
  loop: loopOf(options.parallel),
  reduceLoop,
  // (a vectorized loop of 16 float lanes storing a clamped value: one vector statement, vminps / vmaxps;
  // one of 16 lanes or more storing a requantized integer: AVX-512 statements of 16 lanes)
  wholeLoop: (s, w) => requantizeStoreLoop(s, w) ?? vectorStoreLoop(s, w),
  ...(options.parallel === "pool" ? { outline: outlineLoop(options.restrict) } : {}),
  allocate: (s, w) => {
    const b = s.buffer
    const id = w.buf(b.name)
    const t = cStorage(b.dtype)
    const n = storageElements(b)
    const bytes = n * storageBytes(b.dtype)
    const note = `/* ${commentSafe(b.name)} ${b.dtype}[${b.shape.join("x")}] @${commentSafe(b.scope)} */`
    const heap = bytes > options.stackBytes
    const open = ["{", heap ? `  ${t}* restrict ${id} = (${t}*)tessera_alloc(${bytes}); ${note}` : `  _Alignas(64) ${t} ${id}[${n}]; ${note}`]
    if (options.poison) open.push(`  memset(${id}, 0xff, ${bytes});`)
    return { open, close: heap ? [`  tessera_free(${id}, ${bytes});`, "}"] : ["}"] }
  },
  let: (s, w) => {
    const cls = valueClass(s.var.dtype)
    const open = ["{", `  const ${C_VALUE[cls]} ${w.variable(s.var.name)} = ${w.expr(s.value)};`]
    const iv = cls === "int" ? intervalOf(s.value, w.bounds) : undefined
    return { open, close: ["}"], ...(iv && Number.isFinite(iv.min) && Number.isFinite(iv.max) ? { bound: iv } : {}) }
  },
  leaf: {
    store: (s, w) => {
      const b = w.buffer(s.buffer)
      if (!b) return w.fail(`store to the unknown buffer ${commentSafe(s.buffer)}`)
      const lhs = w.access(s.buffer, s.indices)
      return [`${lhs} = ${castC(b.dtype, s.value.dtype, w.expr(s.value))};`]
    },
    evaluate: (s, w) => [`(void)(${w.expr(s.value)});`],
    barrier: (_s, w) => (inThreadLoop(w) ? w.fail("a barrier inside a thread loop (a GPU schedule) cannot run on the c target") : ["/* barrier: no-op outside thread loops */"]),
    shuffle: (_s, w) => w.fail("a warp shuffle (a cuda reduction across threads) cannot run on the c target"),
    intrinsic,
  },
})
