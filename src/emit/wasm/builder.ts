// The pieces every part of the wasm emitter shares: value classes and storage of each dtype, the
// imported math and helper functions, and the builder of one function's code and locals (which
// also throws the function's EmitError).
import { DTYPE_INFO, DTYPES, storageBytes, type DType } from "../../ast/graph/dtype.js"
import { EmitError } from "../emit-error.js"
import { ins, type Instr, type Op, type ValType } from "./encoder.js"

export type VT = "i32" | "f32" | "f64"

/** The value class of each dtype (from the one dtype table). */
export const VCLASS: { readonly [D in DType]: VT } = Object.fromEntries(DTYPES.map((d) => [d, DTYPE_INFO[d].wasm.vclass])) as { readonly [D in DType]: VT }

/** Load/store opcodes, element bytes and alignment (log2) of each dtype's storage (the one dtype table's). */
export const STORAGE: { readonly [D in DType]: { readonly load: Op; readonly store: Op; readonly bytes: number; readonly align: number } } = Object.fromEntries(
  DTYPES.map((d) => [d, { load: DTYPE_INFO[d].wasm.load, store: DTYPE_INFO[d].wasm.store, bytes: storageBytes(d), align: DTYPE_INFO[d].wasm.align }]),
) as { readonly [D in DType]: { readonly load: Op; readonly store: Op; readonly bytes: number; readonly align: number } }

/** JS imports (module "math"), each f64 → f64 (pow: two args), by symbolic name. */
export const MATH_IMPORTS = ["exp", "log", "tanh", "erf", "pow", "sigmoid", "sin", "cos", "round_f16", "round_bf16"] as const
export type MathImport = (typeof MATH_IMPORTS)[number]

/** Helper functions defined in the module when used. */
export const HELPERS = ["floordiv_i32", "floormod_i32"] as const
export type Helper = (typeof HELPERS)[number]

export interface BufInfo {
  /** The local holding the address the buffer's offset is relative to (a param's pointer, or a frame). */
  readonly base: number
  /** Byte offset from that address. */
  readonly offset: number
  readonly dtype: DType
  /** Elements of storage. */
  readonly length: number
}

/** One function under construction: its code, locals (after its `params` i32 params) and the symbols it calls. */
export class FnBuilder {
  readonly code: Instr[] = []
  readonly locals: ValType[] = []
  private readonly free = new Map<ValType, number[]>()
  constructor(
    readonly uses: Set<string>,
    readonly params = 1,
    /** The kernel it emits (named in its errors). */
    readonly kernel?: string,
  ) {}
  /** Throws the wasm target's EmitError for this kernel. */
  fail(reason: string): never {
    throw new EmitError({ target: "wasm", ...(this.kernel === undefined ? {} : { kernel: this.kernel }), reason })
  }
  local(t: ValType): number {
    this.locals.push(t)
    return this.params + this.locals.length - 1
  }
  temp(t: ValType): number {
    return this.free.get(t)?.pop() ?? this.local(t)
  }
  /** Stores the value on the stack in a fresh temp and returns the temp (release it after use). */
  stash(t: ValType): number {
    const k = this.temp(t)
    this.op("local.set", k)
    return k
  }
  release(t: ValType, k: number): void {
    const f = this.free.get(t) ?? []
    f.push(k)
    this.free.set(t, f)
  }
  op(op: Op, a?: number, b?: number): void {
    this.code.push(ins(op, a, b))
  }
  /** i8x16.shuffle of the two v128 on the stack: byte k of the result is byte lanes[k] of their concatenation. */
  shuffle(lanes: readonly number[]): void {
    this.code.push({ op: "i8x16.shuffle", lanes })
  }
  block(op: "block" | "loop" | "if", t?: ValType): void {
    this.code.push(t ? { op, t } : { op })
  }
  call(sym: MathImport | Helper): void {
    this.uses.add(sym)
    this.code.push({ op: "call", sym: `$${sym}` })
  }
}

/** The end of a counted loop's body: `v += step`, branch back while `v < end` (signed), close the loop. */
export const emitLoopLatch = (fb: FnBuilder, v: number, end: number, step: number): void => {
  fb.op("local.get", v)
  fb.op("i32.const", step)
  fb.op("i32.add")
  fb.op("local.tee", v)
  fb.op("local.get", end)
  fb.op("i32.lt_s")
  fb.op("br_if", 0)
  fb.op("end")
}
