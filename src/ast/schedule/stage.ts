// The data of one schedule stage: its loop axes (root, split halves, fused), the relations
// between them, annotations, attachment, memory scope and tensorize point. schedule.ts builds and
// transforms stages; tensorize-match.ts reads them.
import type { ComputeTensor } from "../te/tensor.js"
import type { TensorIntrinsic } from "../te/intrinsic.js"

export type AxisKind = "serial" | "parallel" | "vectorized" | "unrolled" | "thread" | "vthread"
export type ThreadTag = "blockIdx.x" | "blockIdx.y" | "blockIdx.z" | "threadIdx.x" | "threadIdx.y" | "threadIdx.z" | "vthread"
export type MemoryScope = "global" | "shared" | "local" | "acc_buffer" | "inp_buffer" | "wgt_buffer"

export interface Axis {
  readonly name: string
  readonly extent: number
  readonly type: "data" | "reduce"
}

export type Relation =
  | { readonly kind: "split"; readonly parent: string; readonly outer: string; readonly inner: string; readonly factor: number }
  | { readonly kind: "fuse"; readonly outer: string; readonly inner: string; readonly fused: string }

export interface Annotation {
  readonly kind: AxisKind
  readonly thread?: ThreadTag
}

export type Attach =
  | { readonly kind: "root" }
  | { readonly kind: "inline" }
  | { readonly kind: "at"; readonly stage: string; readonly axis: string }

export interface Stage {
  readonly name: string
  readonly op: ComputeTensor
  /** The compute's data axes then its reduce axes, as declared. */
  readonly root: readonly Axis[]
  /** Every axis ever made (root, split halves, fused). */
  readonly axes: ReadonlyMap<string, Axis>
  /** Loop order, outermost first. */
  readonly leaf: readonly string[]
  readonly relations: readonly Relation[]
  readonly annotations: ReadonlyMap<string, Annotation>
  readonly pragmas: ReadonlyMap<string, readonly (readonly [string, string])[]>
  readonly attach: Attach
  readonly scope: MemoryScope
  /** storageAlign: [axis index, factor, offset]. */
  readonly align: readonly (readonly [number, number, number])[]
  readonly doubleBuffer: boolean
  /** The leaf axis from which the loop nest is one tensor intrinsic. */
  readonly tensorize?: { readonly axis: string; readonly intrin: TensorIntrinsic }
}
