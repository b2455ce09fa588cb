// The cuda dialect of the C-family walker (../c-family): what the cuda target renders for each TIR
// construct of one launch (launch.ts). Lowering to CUDA C:
// - one `extern "C" __global__ void [__launch_bounds__(threads)] name(const T* __restrict__ b0, …)`
//   per launch (the bound only where a block could otherwise need more registers than it may hold:
//   needsLaunchBounds, or where the schedule asks for it: a loop's `launch_bounds = 1` pragma, the GPU
//   rules' `launch_bounds` knob), params typed by their storage type as the c target's (../c/expr.ts), never-stored
//   params `const`, `__restrict__` unless an in-place kernel passes one block as two params;
// - loop variables and integer lets are `int` where every integer the launch computes fits 32 bits
//   (index-width.ts), else `int64_t` as the c target's;
// - a blockIdx / threadIdx loop is its index, `const int v = (int)blockIdx.x;`, under a
//   guard `if (v < extent)` where the loop is narrower than the launch's grid or block;
// - serial, parallel and vectorized loops are C's `for` (parallel: a GPU thread runs it serially;
//   vectorized: one `float4` / `float2` load and store where src/ast/tir/vector-access.ts proves the loop an
//   aligned contiguous copy, else `#pragma unroll`); unrolled loops carry `#pragma unroll`;
// - an allocation inside a threadIdx loop is the thread's own array (registers, or local memory when
//   indexed at run time); outside every threadIdx loop, in a launch of several threads, it is the
//   block's `__shared__` array (as the evaluator gives one buffer to the block's threads);
// - barriers are `__syncthreads();` (verify.ts checks that they sit under block-uniform control);
// - a loop reducing into one float element keeps the element in a register and stores it once;
// - a float16 buffer (`--precision fp16`) is CUDA's `__half`: read as `__half2float(b[i])`, written
//   as `__float2half_rn(x)` (round to nearest even, the TIR evaluator's float16 store); a proven
//   vectorized copy of halves into float32 is one 4- or 8-byte load widened (tessera_load_half2/4);
// - expressions are the c target's (../c/expr.ts), their `tessera_*` helpers the prelude's,
//   compiled for the device.
import { storageBytes, type DType } from "../../ast/graph/dtype.js"
import { add, c, mul, type Expr } from "../../ast/te/expr.js"
import { intervalOf } from "../../ast/te/simplify.js"
import { someStmt, type PrimFunc, type Stmt } from "../../ast/tir/tir.js"
import { rowMajor, storageElements } from "../../ast/tir/analysis.js"
import type { Block, CDialect, ForStmt, ReduceLoop, Walk } from "../c-family/dialect.js"
import { commentSafe } from "../c-family/names.js"
import { castC, cStorage, C_EXPR, C_VALUE, valueClass } from "../c/expr.js"
import type { Launch } from "./launch.js"
import type { CudaAttrs } from "../../ast/target.js"
import { LAUNCH_BOUNDS_PRAGMA } from "../../lowering/templates/gpu/index.js"
import { vectorCopy } from "../../ast/tir/vector-access.js"

/** What the cuda target does with each TIR construct (the dialect below implements exactly this). */
export const CUDA_CAPABILITIES = {
  thread: "blockIdx / threadIdx index, guarded where narrower than the launch",
  vthread: "none left (lowering.InjectVirtualThread)",
  parallel: "serial loop in its thread",
  vectorized: "one float2 / float4 access where proven an aligned contiguous copy (src/ast/tir/vector-access.ts; from halves: one __half2 or 8-byte load, widened), else a #pragma unroll loop",
  unrolled: "#pragma unroll loop",
  barrier: "__syncthreads()",
  shuffle: "__shfl_down_sync(mask, value, offset, width)",
  intrinsic: "none (lowering.LowerIntrinsics)",
  allocate: "per-thread array inside threadIdx loops; __shared__ array of the block outside them",
} as const

export interface CudaDialectOptions {
  /** Params are declared `__restrict__` (they never overlap). */
  readonly restrict: boolean
  /** The type of loop variables and integer lets: `int` where the launch's integers fit 32 bits (index-width.ts), else `int64_t`. */
  readonly index: "int" | "int64_t"
  /** The widest vector access (bytes; the target record's maxVectorBytes): vectorized copies proven aligned and contiguous become float2 / float4 accesses up to it; 4 or less: none. */
  readonly maxVectorBytes: number
  /** The declaration carries `__launch_bounds__(threads)` (needsLaunchBounds). */
  readonly launchBounds: boolean
}

/**
 * Whether a launch of `threads` a block needs `__launch_bounds__`: only where ptxas's ceiling of
 * registers a thread (allocated a warp at a time, 8 registers a thread at a time) could make the
 * block need more than the registers a block may hold — a launch ptxas must then fit. Below that
 * the bound only invites ptxas to trade registers for occupancy: on an H100 it held kernels of 3,
 * 5 and 7 warps (96, 160, 196, 224 threads) to 32 registers and spilled 12–16 bytes a thread, where
 * unbounded they took 39–56 and spilled nothing (ResNet-18 0.985 → 0.946 ms, MobileNetV2 0.454 →
 * 0.427; docs/cuda.md, "Launch bounds").
 */
export const needsLaunchBounds = (threads: number, a: Pick<CudaAttrs, "warpSize" | "maxRegistersPerThread" | "registersPerBlock">): boolean =>
  Math.ceil(threads / a.warpSize) * a.warpSize * Math.ceil(a.maxRegistersPerThread / 8) * 8 > a.registersPerBlock

/** Whether some loop of a launch's body carries `launch_bounds = 1` (the schedule's choice of a bound). */
export const askedLaunchBounds = (body: Stmt): boolean =>
  someStmt(body, (s) => s.kind === "for" && (s.pragmas ?? []).some(([k, v]) => k === LAUNCH_BOUNDS_PRAGMA && v === "1"))

/** The comment before a kernel: its name and params' tensors, outputs marked. */
export const describeCuda = (f: PrimFunc, stored: ReadonlySet<string>): string =>
  `/* ${commentSafe(f.name)}: ${f.params.map((p) => `${commentSafe(p.name)} ${p.dtype}[${(p.view?.shape ?? p.shape).join("x")}]${stored.has(p.name) ? " out" : ""}`).join(", ")} */`

/** The C type of a cuda buffer's elements: the c target's (cStorage), but float16 as CUDA's `__half` (2 bytes: `--precision fp16`'s arena). */
export const cudaStorage = (d: DType): string => (d === "float16" ? "__half" : cStorage(d))

/** Bytes of one element of a cuda buffer (float16: 2, a `__half`; else our storage's). */
export const cudaBytes = (d: DType): number => (d === "float16" ? 2 : storageBytes(d))

/** A launch's declaration (`name` its symbol), params under their generated names. */
export const declareCuda = (name: string, threads: number, f: PrimFunc, params: readonly string[], stored: ReadonlySet<string>, restrict: boolean, launchBounds: boolean): string =>
  `extern "C" __global__ void ${launchBounds ? `__launch_bounds__(${threads}) ` : ""}${name}(${f.params.map((p, k) => `${stored.has(p.name) ? "" : "const "}${cudaStorage(p.dtype)}*${restrict ? " __restrict__" : ""} ${params[k]}`).join(", ")})`

const flatIndex = (w: Walk, source: string, indices: readonly Expr[]): string => {
  const b = w.buffer(source)
  if (!b) return w.fail(`access to the unknown buffer ${commentSafe(source)}`)
  if (indices.length === 1) return w.expr(indices[0])
  if (indices.length !== b.shape.length) return w.fail(`buffer ${commentSafe(source)} of rank ${b.shape.length} accessed with ${indices.length} indices`)
  const st = b.strides ?? rowMajor(b.shape)
  return w.expr(indices.reduce<Expr>((acc, x, k) => add(acc, mul(x, c(st[k]))), c(0)))
}

/** A buffer element as an lvalue (`b[i]`). */
const element = (source: string, indices: readonly Expr[], w: Walk): string => `${w.buf(source)}[${flatIndex(w, source, indices)}]`

const inThreadLoop = (w: Walk): boolean => w.loops.some((l) => l.forKind === "thread" && l.thread?.startsWith("threadIdx") === true)

/** The cuda dialect for one launch (its grid and block decide the guards and the shared arrays). */
export const cudaDialect = (launch: Launch, options: CudaDialectOptions): CDialect => {
  const threads = launch.block[0] * launch.block[1] * launch.block[2]
  const serialLoop = (s: ForStmt, w: Walk, pragma?: string): string[] => {
    const v = w.variable(s.var.name)
    const lo = s.min.kind === "const" ? s.min.value : undefined
    const n = s.extent.kind === "const" ? s.extent.value : undefined
    const end = lo === 0 ? w.expr(s.extent) : lo !== undefined && n !== undefined ? String(lo + n) : `${w.expr(s.min)} + ${w.expr(s.extent)}`
    return [...(pragma ? [pragma] : []), `for (${options.index} ${v} = ${w.expr(s.min)}; ${v} < ${end}; ++${v}) {`]
  }
  const loop = (s: ForStmt, w: Walk): Block => {
    const open: string[] = []
    for (const [k, val] of s.pragmas ?? []) if (k !== "auto_unroll_max_step" && k !== LAUNCH_BOUNDS_PRAGMA) open.push(`/* pragma ${commentSafe(k)} = ${commentSafe(val)} */`)
    switch (s.forKind) {
      case "thread": {
        const tag = s.thread ?? ""
        const m = /^(blockIdx|threadIdx)\.([xyz])$/.exec(tag)
        if (!m) return w.fail(`a thread loop bound to ${commentSafe(tag)}`)
        if (s.min.kind !== "const" || s.min.value !== 0 || s.extent.kind !== "const") return w.fail(`the ${tag} loop does not run over [0, constant)`)
        const dim = (m[1] === "blockIdx" ? launch.grid : launch.block)["xyz".indexOf(m[2])]
        const v = w.variable(s.var.name)
        const guard = s.extent.value < dim ? ` if (${v} < ${s.extent.value}) {` : ""
        return { open: [...open, `{ const ${options.index} ${v} = (${options.index})${tag};${guard}`], close: [guard ? "} }" : "}"] }
      }
      case "vthread":
        return w.fail("a vthread loop reached emission: lowering.InjectVirtualThread runs first")
      case "unrolled":
      case "vectorized":
        return { open: [...open, ...serialLoop(s, w, "#pragma unroll")], close: ["}"] }
      case "serial": {
        const n = s.extent.kind === "const" ? s.extent.value : undefined
        const auto = (s.pragmas ?? []).some(([k, val]) => k === "auto_unroll_max_step" && n !== undefined && n <= Number(val))
        return { open: [...open, ...serialLoop(s, w, auto ? "#pragma unroll" : undefined)], close: ["}"] }
      }
      case "parallel":
        return { open: [...open, `/* parallel: serial in its thread */`, ...serialLoop(s, w)], close: ["}"] }
    }
  }
  /** A float sum, max or min into one element: the element in a register, stored once. */
  const reduceLoop = (s: ForStmt, r: ReduceLoop, w: Walk): string[] | undefined => {
    const b = w.buffer(r.store.buffer)
    if (!b || (b.dtype !== "float32" && b.dtype !== "float64") || r.term.dtype !== b.dtype) return undefined
    const cls = valueClass(b.dtype)
    const type = C_VALUE[cls]
    const acc = w.variable(`${s.var.name}#acc`)
    const target = w.access(r.store.buffer, r.store.indices)
    const header = loop({ ...s, forKind: s.forKind === "unrolled" ? "unrolled" : "serial" }, w)
    const step = r.op === "add" ? `${acc} + ${w.expr(r.term)}` : `tessera_${r.op}${cls === "f32" ? "f" : "d"}(${acc}, ${w.expr(r.term)})`
    return ["{", `  ${type} ${acc} = ${target};`, ...header.open.map((l) => `  ${l}`), `    ${acc} = ${step};`, "  }", `  ${target} = ${acc};`, "}"]
  }
  /** A vectorized loop proven an aligned contiguous copy (src/ast/tir/vector-access.ts): one float2 / float4 load and store. */
  const wholeLoop = (s: ForStmt, w: Walk): string[] | undefined => {
    const v = vectorCopy(s, (name) => w.buffer(name)?.dtype, options.maxVectorBytes)
    if (!v) return undefined
    const t = `float${v.lanes}`
    // halves widened on the way (a fetch of a `--precision fp16` tensor into float32 shared memory): one __half2 or 8-byte load
    const load = v.srcDtype === "float16" ? `tessera_load_half${v.lanes}(&${w.buf(v.src)}[${w.expr(v.srcBase)}])` : `*reinterpret_cast<const ${t}*>(&${w.buf(v.src)}[${w.expr(v.srcBase)}])`
    return [`*reinterpret_cast<${t}*>(&${w.buf(v.dst)}[${w.expr(v.dstBase)}]) = ${load}; /* ${v.lanes} lanes, aligned */`]
  }
  return {
    target: "cuda",
    prelude: "",
    wholeLoop,
    signature: (f, name, params, stored) => [describeCuda(f, stored), `${declareCuda(name, threads, f, params, stored, options.restrict, options.launchBounds)} {`],
    expr: C_EXPR,
    // (a read: a half widens to float; stores write their element themselves)
    access: (source, indices, w) => (w.buffer(source)?.dtype === "float16" ? `__half2float(${element(source, indices, w)})` : element(source, indices, w)),
    loop,
    reduceLoop,
    allocate: (s, w) => {
      const b = s.buffer
      const n = storageElements(b)
      const shared = threads > 1 && !inThreadLoop(w)
      const note = `/* ${commentSafe(b.name)} ${b.dtype}[${b.shape.join("x")}] @${commentSafe(b.scope)}: ${n * cudaBytes(b.dtype)} bytes ${shared ? "of the block" : "of the thread"} */`
      return { open: ["{", `  ${shared ? "__shared__ __align__(16) " : "__align__(16) "}${cudaStorage(b.dtype)} ${w.buf(b.name)}[${n}]; ${note}`], close: ["}"] }
    },
    let: (s, w) => {
      const cls = valueClass(s.var.dtype)
      const open = ["{", `  const ${cls === "int" ? options.index : C_VALUE[cls]} ${w.variable(s.var.name)} = ${w.expr(s.value)};`]
      const iv = cls === "int" ? intervalOf(s.value, w.bounds) : undefined
      return { open, close: ["}"], ...(iv && Number.isFinite(iv.min) && Number.isFinite(iv.max) ? { bound: iv } : {}) }
    },
    leaf: {
      store: (s, w) => {
        const b = w.buffer(s.buffer)
        if (!b) return w.fail(`store to the unknown buffer ${commentSafe(s.buffer)}`)
        // a half is the float32 value rounded to nearest even (the TIR evaluator's float16 store)
        if (b.dtype === "float16") return [`${element(s.buffer, s.indices, w)} = __float2half_rn(${castC("float32", s.value.dtype, w.expr(s.value))});`]
        return [`${w.access(s.buffer, s.indices)} = ${castC(b.dtype, s.value.dtype, w.expr(s.value))};`]
      },
      evaluate: (s, w) => [`(void)(${w.expr(s.value)});`],
      barrier: () => ["__syncthreads();"],
      shuffle: (s, w) => {
        const b = w.buffer(s.buffer)
        if (!b) return w.fail(`shuffle into the unknown buffer ${commentSafe(s.buffer)}`)
        if (b.dtype === "float16") return w.fail(`a warp shuffle into the float16 buffer ${commentSafe(s.buffer)}: partial sums stay float32`)
        return [`${w.access(s.buffer, s.indices)} = __shfl_down_sync(0x${(s.mask >>> 0).toString(16)}u, ${castC(b.dtype, s.value.dtype, w.expr(s.value))}, ${s.offset}, ${s.width});`]
      },
      intrinsic: (s, w) => w.fail(`intrinsic ${commentSafe(s.intrin.name)} needs lowering.LowerIntrinsics before the cuda emitter`),
    },
  }
}
