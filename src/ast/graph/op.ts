// The operator registry's entry type. An op is registered with everything every stage needs:
// its attribute codec (ONNX defaults), arity, type/shape relation, fusion pattern kind and
// reference kernel. All fields are required, so an op that lacks one does not compile.
import type { AttrCodec } from "./attrs.js"
import type { DType } from "./dtype.js"
import type { Dim, Graph, ValueType } from "./graph.js"
import type { Tensor } from "./tensor.js"

// Dim and ValueType are declared with the graph IR, whose values they type; exported from here as before.
export type { Dim, ValueType } from "./graph.js"

/** TVM's operator pattern kinds, which drive fusion. */
export type PatternKind =
  | "elementwise"
  | "broadcast"
  | "injective"
  | "reduction"
  | "out-elementwise-fusable"
  | "opaque"

export interface InferCtx<A> {
  readonly node: string
  readonly attrs: A
  readonly opset: number
  /** Types of the inputs; undefined where an optional input is omitted. */
  readonly inputs: readonly (ValueType | undefined)[]
  /** Values of inputs that are constant at compile time (initializers, folded subgraphs). */
  readonly values: readonly (Tensor | undefined)[]
  /** How many outputs the node declares. */
  readonly outputs: number
  /** Output types of a subgraph attribute given its input types, in this node's scope (If/Loop/Scan). */
  readonly inferSubgraph?: (graph: Graph, inputs: readonly (ValueType | undefined)[]) => readonly (ValueType | undefined)[]
}

export interface KernelCtx<A> {
  readonly node: string
  readonly attrs: A
  readonly opset: number
  /** Input tensors; undefined where an optional input is omitted. */
  readonly inputs: readonly (Tensor | undefined)[]
  /** How many outputs the node declares (some are optional, e.g. MaxPool's Indices). */
  readonly outputs: number
  /** Runs a subgraph attribute (If/Loop/Scan bodies) with the given feeds; outer-scope values are visible. */
  readonly runSubgraph: (graph: Graph, feeds: ReadonlyMap<string, Tensor>) => readonly Tensor[]
}

export interface OpDef<A> {
  readonly attrs: AttrCodec<A>
  /** [min, max] inputs (max may be Infinity for variadic ops). */
  readonly inputs: readonly [number, number]
  /** [min, max] outputs. */
  readonly outputs: readonly [number, number]
  readonly kind: PatternKind
  /** Output types from input types (and constant input values where shapes depend on them). */
  readonly infer: (ctx: InferCtx<A>) => readonly ValueType[]
  /** The reference kernel: the meaning of the op. */
  readonly kernel: (ctx: KernelCtx<A>) => readonly Tensor[]
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyOpDef = OpDef<any>

/** Registers an op; the attribute type is inferred from its codec. */
export const defineOp = <A>(def: OpDef<A>): OpDef<A> => def

/** Thrown by kernels and type relations on input the op rejects (bad shapes, bad values). */
export class OpError extends Error {
  override readonly name = "OpError"
}

/** Thrown by kernels and type relations for a valid configuration this implementation does not support. */
export class OpUnsupported extends Error {
  override readonly name = "OpUnsupported"
}

export const fail = (message: string): never => {
  throw new OpError(message)
}
export const unsupported = (message: string): never => {
  throw new OpUnsupported(message)
}
export const check = (cond: boolean, message: string | (() => string)): void => {
  if (!cond) throw new OpError(typeof message === "string" ? message : message())
}

/** Static dims of a type, or an OpUnsupported error naming the symbolic dim. */
export const staticShape = (t: ValueType): number[] =>
  t.shape.map((d) => (typeof d === "number" ? d : unsupported(`dim '${d}' is not static`)))
