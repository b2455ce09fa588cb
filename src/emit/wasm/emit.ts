// The `wasm` target: PrimFuncs → one WebAssembly module (our own encoder, SIMD128), run in Node or
// a browser by src/device/wasm/. Pure and deterministic: the same funcs and options give the same
// bytes; names from programs never reach the module (exports are the caller's safe identifiers).
//
// Calling convention and memory:
// - the module imports its memory ("env" "memory"; shared when `sharedMemory`), and each kernel is
//   an export `(func (param $args $shared $frame $phase $begin $end i32))`: `$args` points at the
//   params' addresses (i32 each, in order; each buffer has the JS storage layout of its dtype and a
//   16-byte aligned address), so buffers stay where the host keeps them and a call copies nothing;
//   the body's allocations lie in a frame (a bump region per call: stack discipline, nested
//   allocations after their parents, siblings share space; WasmKernelLayout.frameBytes in all);
// - phases, for threads: under the body's top-level allocations and lets, each statement of its
//   sequence is a phase; `$phase` < 0 runs them all, else only that one. A phase that is a parallel
//   loop runs only its iterations [$begin, $end), so a host may run one phase's chunks on several
//   threads sharing the memory, each with its own `$frame`, and wait for all before the next phase;
//   the top-level allocations (which phases share) lie at `$shared`, the others at `$frame` (the
//   same offsets: a frame leaves the shared part unused). One thread passes $shared = $frame;
// - loops: serial, parallel (split only as above), unrolled, thread and vthread loops are wasm
//   loops; vectorized loops use f32x4 / i32x4 where vector.ts admits them, scalar otherwise;
// - barriers are no-ops outside thread loops and rejected inside (their phases need threads);
// - `boundsCheck` (a debug mode) traps (unreachable) on any index outside its buffer's storage, so
//   a wrong index never reads another buffer silently; without it the TIR is trusted.
//
// This file assembles the module; a kernel's layout is layout.ts, its phases phases.ts, its
// statements stmt.ts (loop address hoisting hoist.ts, SIMD vector.ts, register tiles
// registers.ts, the 8-bit dot dot.ts), its expressions expr.ts (convert.ts, binary.ts, call.ts), its bytes encoder.ts.
import { simplifyMemo } from "../../ast/te/simplify.js"
import type { Buffer, PrimFunc } from "../../ast/tir/tir.js"
import { seenOnEntry, storedBuffers } from "../../ast/tir/analysis.js"
import { isIdentifier } from "../c-family/names.js"
import { EmitError } from "../emit-error.js"
import { encodeModule, type Op, type ValType, type WasmFunc, type WasmImportFunc, type WasmModule } from "./encoder.js"
import { FnBuilder, HELPERS, MATH_IMPORTS, type BufInfo, type Helper } from "./builder.js"
import { ARGS, FrameSize, KERNEL_TYPE, type WasmKernelLayout, type WasmParamLayout, type WasmPhase } from "./layout.js"
import { emitPhases } from "./phases.js"

export type { WasmKernelLayout, WasmParamLayout, WasmPhase } from "./layout.js"

/** What the wasm target does with each TIR construct. */
export const WASM_CAPABILITIES = {
  parallel: "serial loop; the loop of a phase runs [begin, end) of its iterations (a host's threads share it)",
  vectorized: "f32x4 / i32x4 for unit-stride float32/int32 bodies, scalar otherwise and for the remainder",
  unrolled: "loop (UnrollLoops has already copied the small ones)",
  thread: "serial loop",
  vthread: "serial loop",
  barrier: "no-op outside thread loops; rejected inside",
  intrinsic: "the 8-bit dot (simd128_dot_4x4) as i32x4.dot_i16x8_s (dot.ts); any other needs lowering.LowerIntrinsics",
  allocate: "a region of the call's frame (stack discipline)",
} as const

export interface WasmEmitOptions {
  /** Trap on any out-of-bounds index (debug). Default false. */
  readonly boundsCheck?: boolean
  /** Import a shared memory (for a host that runs kernels from workers). Default false. */
  readonly sharedMemory?: boolean
  /** Reuse a guarded vector read (a select) that recurs in a straight-line region (vector.ts). Default true; false for the law that compares. */
  readonly reuseGuardedReads?: boolean
  /** Step an innermost loop's addresses by their strides instead of recomputing them (hoist.ts: stepBases). Default true; false for the law that compares. */
  readonly stepAddresses?: boolean
}

export interface WasmEmitted {
  readonly bytes: Uint8Array
  readonly module: WasmModule
  readonly kernels: readonly WasmKernelLayout[]
}

const prod = (s: readonly number[]) => s.reduce((a, d) => a * d, 1)

/** One kernel: its function and its layout. */
export const emitWasmFunction = (f: PrimFunc, exportName: string, uses: Set<string>, opts: WasmEmitOptions = {}): { func: WasmFunc; layout: WasmKernelLayout } => {
  const fb = new FnBuilder(uses, KERNEL_TYPE.params.length, exportName)
  const written = storedBuffers(f.body)
  const seen = seenOnEntry(f.body)
  const bufs = new Map<string, BufInfo>()
  const params: WasmParamLayout[] = f.params.map((p: Buffer, k) => {
    const shape = p.view?.shape ?? p.shape
    const length = Math.max(prod(p.shape), prod(shape))
    if (bufs.has(p.name)) fb.fail(`param '${p.name}' appears twice`)
    // its address, from the args
    const base = fb.local("i32")
    fb.op("local.get", ARGS)
    fb.op("i32.load", 2, 4 * k)
    fb.op("local.set", base)
    bufs.set(p.name, { base, offset: 0, dtype: p.dtype, length })
    return { dtype: p.dtype, length, shape, written: written.has(p.name), copyIn: !written.has(p.name) || seen.has(p.name) }
  })
  const frame = new FrameSize()
  const phases: WasmPhase[] = []
  emitPhases(fb, { vars: new Map(), bufs, bounds: new Map(), simplified: simplifyMemo(), boundsCheck: opts.boundsCheck ?? false, top: 0, inThread: false, addrCache: new Map(), vcache: new Map(), reuseGuardedReads: opts.reuseGuardedReads ?? true, stepAddresses: opts.stepAddresses ?? true }, f.body, frame, phases)
  const notes = params.map((p, k) => `param ${k}: ${p.dtype}[${p.shape.join("x")}], ${p.length} elements${p.written ? ", written" : ""}${p.copyIn ? "" : ", not copied in"}`)
  notes.push(`frame: ${frame.max} bytes`)
  notes.push(`phases: ${phases.map((p) => `${p.parallel !== undefined ? `parallel ${p.parallel}` : "serial"} (${p.work} stores)`).join(", ")}`)
  return {
    func: { name: exportName, exported: true, type: KERNEL_TYPE, locals: fb.locals, code: fb.code, notes },
    layout: { name: exportName, params, frameBytes: frame.max, phases },
  }
}

const HELPER_FUNCS: { readonly [H in Exclude<Helper, `${string}64`>]: () => WasmFunc } = {
  // q = a / b truncated; q - (a rem b != 0 && (a ^ b) < 0)
  floordiv_i32: () => {
    const fb = new FnBuilder(new Set())
    fb.local("i32") // index 1 is the param b
    const q = fb.local("i32")
    for (const [op, a] of [["local.get", 0], ["local.get", 1], ["i32.div_s"], ["local.set", q], ["local.get", q], ["local.get", 0], ["local.get", 1], ["i32.rem_s"], ["i32.const", 0], ["i32.ne"], ["local.get", 0], ["local.get", 1], ["i32.xor"], ["i32.const", 0], ["i32.lt_s"], ["i32.and"], ["i32.sub"]] as const)
      fb.op(op, a)
    return { name: "$floordiv_i32", exported: false, type: { params: ["i32", "i32"], results: ["i32"] }, locals: fb.locals.slice(1), code: fb.code }
  },
  // r = a rem b; r + (r != 0 && (r ^ b) < 0 ? b : 0)
  floormod_i32: () => {
    const fb = new FnBuilder(new Set())
    fb.local("i32") // index 1 is the param b
    const r = fb.local("i32")
    for (const [op, a] of [["local.get", 0], ["local.get", 1], ["i32.rem_s"], ["local.tee", r], ["local.get", 1], ["i32.const", 0], ["local.get", r], ["i32.const", 0], ["i32.ne"], ["local.get", r], ["local.get", 1], ["i32.xor"], ["i32.const", 0], ["i32.lt_s"], ["i32.and"], ["select"], ["i32.add"]] as const)
      fb.op(op, a)
    return { name: "$floormod_i32", exported: false, type: { params: ["i32", "i32"], results: ["i32"] }, locals: fb.locals.slice(1), code: fb.code }
  },
}

/** A helper of `params` → `result` (locals after the params), its code written by `body`. */
const helperFunc = (name: Helper, params: readonly ValType[], result: ValType, locals: readonly ValType[], body: (fb: FnBuilder) => void): WasmFunc => {
  const fb = new FnBuilder(new Set(), params.length)
  for (const l of locals) fb.local(l)
  body(fb)
  return { name: `$${name}`, exported: false, type: { params, results: [result] }, locals: fb.locals, code: fb.code }
}

type Step = readonly [Op, number?] | "if" | "else" | "end"
const steps = (fb: FnBuilder, list: readonly Step[]): void => {
  for (const s of list) {
    if (s === "if") fb.block("if", "i64")
    else if (s === "else" || s === "end") fb.op(s)
    else fb.op(s[0], s[1])
  }
}
/** b == 0 → 0; b == -1 → -a (wrapped: INT64_MIN / -1 traps in wasm); else `then` */
const byZeroOrMinusOne = (then: readonly Step[]): Step[] => [
  ["local.get", 1], ["i64.eqz"], "if", ["i64.const", 0], "else",
  ["local.get", 1], ["i64.const", -1], ["i64.eq"], "if", ["i64.const", 0], ["local.get", 0], ["i64.sub"], "else", ...then, "end", "end",
]

// int64 / uint64 division and conversion (wasm traps where C's helpers and the evaluator's wrap give a value: see binary.ts)
const I64_HELPERS: { readonly [H in Extract<Helper, `${string}64`>]: () => WasmFunc } = {
  div_i64: () => helperFunc("div_i64", ["i64", "i64"], "i64", [], (fb) => steps(fb, byZeroOrMinusOne([["local.get", 0], ["local.get", 1], ["i64.div_s"]]))),
  // q - (a rem b != 0 && (a ^ b) < 0)
  floordiv_i64: () =>
    helperFunc("floordiv_i64", ["i64", "i64"], "i64", [], (fb) =>
      steps(fb, byZeroOrMinusOne([
        ["local.get", 0], ["local.get", 1], ["i64.div_s"],
        ["local.get", 0], ["local.get", 1], ["i64.rem_s"], ["i64.const", 0], ["i64.ne"],
        ["local.get", 0], ["local.get", 1], ["i64.xor"], ["i64.const", 0], ["i64.lt_s"], ["i32.and"], ["i64.extend_i32_u"], ["i64.sub"],
      ])),
    ),
  // b == 0 or -1 → 0; else r + (r != 0 && (r ^ b) < 0 ? b : 0), r = a rem b
  floormod_i64: () =>
    helperFunc("floormod_i64", ["i64", "i64"], "i64", ["i64"], (fb) =>
      steps(fb, [
        ["local.get", 1], ["i64.eqz"], ["local.get", 1], ["i64.const", -1], ["i64.eq"], ["i32.or"], "if", ["i64.const", 0], "else",
        ["local.get", 0], ["local.get", 1], ["i64.rem_s"], ["local.tee", 2],
        ["local.get", 1], ["i64.const", 0],
        ["local.get", 2], ["i64.const", 0], ["i64.ne"], ["local.get", 2], ["local.get", 1], ["i64.xor"], ["i64.const", 0], ["i64.lt_s"], ["i32.and"],
        ["select"], ["i64.add"], "end",
      ]),
    ),
  div_u64: () => helperFunc("div_u64", ["i64", "i64"], "i64", [], (fb) => steps(fb, [["local.get", 1], ["i64.eqz"], "if", ["i64.const", 0], "else", ["local.get", 0], ["local.get", 1], ["i64.div_u"], "end"])),
  rem_u64: () => helperFunc("rem_u64", ["i64", "i64"], "i64", [], (fb) => steps(fb, [["local.get", 1], ["i64.eqz"], "if", ["i64.const", 0], "else", ["local.get", 0], ["local.get", 1], ["i64.rem_u"], "end"])),
  // a float to int64: truncated; within ±2^63 directly, else wrapped modulo 2^64 in f64 (exact
  // there: t is a multiple of 2^11) and read as unsigned; NaN and ±∞ give 0 (trunc_sat of NaN)
  f2i64: () =>
    helperFunc("f2i64", ["f64"], "i64", ["f64"], (fb) =>
      steps(fb, [
        ["local.get", 0], ["f64.abs"], ["f64.const", 2 ** 63], ["f64.lt"], "if", ["local.get", 0], ["i64.trunc_sat_f64_s"], "else",
        ["local.get", 0], ["f64.trunc"], ["local.tee", 1], ["local.get", 1], ["f64.const", 2 ** -64], ["f64.mul"], ["f64.floor"], ["f64.const", 2 ** 64], ["f64.mul"], ["f64.sub"], ["i64.trunc_sat_f64_u"], "end",
      ]),
    ),
}

/** Every helper's definition (a new Helper fails to compile until it is here). */
const HELPER_TABLE: { readonly [H in Helper]: () => WasmFunc } = { ...HELPER_FUNCS, ...I64_HELPERS }

const fail = (reason: string): never => {
  throw new EmitError({ target: "wasm", reason })
}

/** One module exporting each PrimFunc under its given name (a safe identifier), with its frame layout. */
export const emitWasmModule = (funcs: readonly { readonly name: string; readonly func: PrimFunc }[], opts: WasmEmitOptions = {}): WasmEmitted => {
  const names = new Set<string>()
  for (const f of funcs) {
    if (!isIdentifier(f.name)) fail(`kernel name '${f.name}' is not a safe identifier`)
    if (names.has(f.name)) fail(`kernel name '${f.name}' is given twice`)
    names.add(f.name)
  }
  const uses = new Set<string>()
  const kernels = funcs.map((f) => emitWasmFunction(f.func, f.name, uses, opts))
  const imports: WasmImportFunc[] = MATH_IMPORTS.filter((m) => uses.has(m)).map((m) => ({
    module: "math",
    field: m,
    name: `$${m}`,
    type: { params: m === "pow" ? ["f64", "f64"] : ["f64"], results: ["f64"] },
  }))
  const helpers = HELPERS.filter((h) => uses.has(h)).map((h) => HELPER_TABLE[h]())
  const module: WasmModule = {
    memory: { module: "env", field: "memory", minPages: 1, ...(opts.sharedMemory ? { maxPages: 16384 } : {}), shared: opts.sharedMemory ?? false },
    imports,
    funcs: [...helpers, ...kernels.map((k) => k.func)],
  }
  return { bytes: encodeModule(module), module, kernels: kernels.map((k) => k.layout) }
}
