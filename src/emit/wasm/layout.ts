// The layout of a `wasm` kernel (emit.ts has the calling convention): its params as the host
// sees them (storage length, whether it is written, whether its value on entry matters), its
// phases, and its frame — the region where its allocations lie, at the offsets `frameSlot` gives.
import type { DType } from "../../ast/graph/dtype.js"
import type { Buffer } from "../../ast/tir/tir.js"
import { storageElements } from "../../ast/tir/analysis.js"
import type { FuncType } from "./encoder.js"
import { STORAGE, type BufInfo } from "./builder.js"

export interface WasmParamLayout {
  readonly dtype: DType
  /** Elements of storage (≥ the logical size). */
  readonly length: number
  /** The logical shape (the tensor the param holds). */
  readonly shape: readonly number[]
  /** Whether the kernel stores to it (a host that copies a buffer in copies these back). */
  readonly written: boolean
  /**
   * Whether the kernel may see its value on entry (a host that copies copies these in): false for an
   * output that is never read and stored only outside any `if` (a compute writes all of it).
   */
  readonly copyIn: boolean
}

/** One phase of a kernel (see the calling convention). */
export interface WasmPhase {
  /** The iterations of its parallel loop, when it is one: a host may split [0, parallel) across threads. */
  readonly parallel?: number
  /** Its stores, counted over the loops' constant extents (a host splits only phases worth a thread's wake-up). */
  readonly work: number
}

export interface WasmKernelLayout {
  readonly name: string
  readonly params: readonly WasmParamLayout[]
  /** Bytes of the frame (the body's allocations). */
  readonly frameBytes: number
  readonly phases: readonly WasmPhase[]
}

/** The kernel's params, locals 0 … 5 in order: the args' address, the shared region, the frame, the phase, the chunk. */
export const ARGS = 0
export const SHARED = 1
export const FRAME = 2
export const PHASE = 3
export const BEGIN = 4
export const END = 5

export const KERNEL_TYPE: FuncType = { params: ["i32", "i32", "i32", "i32", "i32", "i32"], results: [] }

/** The bytes of the frame a kernel's allocations reach (the largest end of any). */
export class FrameSize {
  max = 0
}

const align16 = (n: number) => Math.ceil(n / 16) * 16

/** Buffer `b` placed at byte `top` of the region whose address local `base` holds: its info, and the next free (16-byte aligned) byte. */
export const frameSlot = (b: Buffer, base: number, top: number, frame: FrameSize): { info: BufInfo; top: number } => {
  const length = storageElements(b)
  const next = align16(top + length * STORAGE[b.dtype].bytes)
  frame.max = Math.max(frame.max, next)
  return { info: { base, offset: top, dtype: b.dtype, length }, top: next }
}
