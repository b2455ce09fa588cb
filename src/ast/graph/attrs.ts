// Node attributes: the raw values ONNX carries, and io-ts codecs that give each op its typed
// attributes with ONNX's defaults. An op's codec is `attrs({ axis: A.int(1), ... })`.
import * as t from "io-ts"
import { isLeft } from "fp-ts/lib/Either.js"
import type { AttrValue, Attrs, Graph } from "./graph.js"
import type { Tensor } from "./tensor.js"

// AttrValue and Attrs are declared with the graph IR (an attribute may hold a subgraph, a node
// holds its attributes); exported from here as before.
export type { AttrValue, Attrs } from "./graph.js"

const mk = <A>(
  name: string,
  check: (u: unknown) => u is A,
  fallback: { readonly has: true; readonly value: A } | { readonly has: false },
): t.Type<A, A, unknown> =>
  new t.Type<A, A, unknown>(
    name,
    check,
    (u, c) => {
      if (u === undefined) return fallback.has ? t.success(fallback.value) : t.failure(u, c, `required attribute missing`)
      const v = (u as AttrValue).value
      return check(v) ? t.success(v) : t.failure(u, c, `expected ${name}`)
    },
    t.identity,
  )

const optional = <A>(name: string, check: (u: unknown) => u is A): t.Type<A | undefined, A | undefined, unknown> =>
  new t.Type<A | undefined, A | undefined, unknown>(
    name,
    (u): u is A | undefined => u === undefined || check(u),
    (u, c) => {
      if (u === undefined) return t.success(undefined)
      const v = (u as AttrValue).value
      return check(v) ? t.success(v) : t.failure(u, c, `expected ${name}`)
    },
    t.identity,
  )

const isInt = (u: unknown): u is number => typeof u === "number" && Number.isInteger(u)
const isNum = (u: unknown): u is number => typeof u === "number"
const isStr = (u: unknown): u is string => typeof u === "string"
const isInts = (u: unknown): u is readonly number[] => Array.isArray(u) && u.every(isInt)
const isNums = (u: unknown): u is readonly number[] => Array.isArray(u) && u.every(isNum)
const isStrs = (u: unknown): u is readonly string[] => Array.isArray(u) && u.every(isStr)
const isTensor = (u: unknown): u is Tensor =>
  typeof u === "object" && u !== null && "dtype" in u && "shape" in u && "data" in u
const isGraph = (u: unknown): u is Graph => typeof u === "object" && u !== null && "nodes" in u && "outputs" in u

const some = <A>(value: A) => ({ has: true as const, value })
const none = { has: false as const }

/** Attribute codecs. `A.int(1)` has default 1; `A.int()` is required; `A.optInt()` may be absent. */
export const A = {
  int: (d?: number) => mk("int", isInt, d === undefined ? none : some(d)),
  float: (d?: number) => mk("float", isNum, d === undefined ? none : some(d)),
  str: (d?: string) => mk("string", isStr, d === undefined ? none : some(d)),
  ints: (d?: readonly number[]) => mk("ints", isInts, d === undefined ? none : some(d)),
  floats: (d?: readonly number[]) => mk("floats", isNums, d === undefined ? none : some(d)),
  strs: (d?: readonly string[]) => mk("strings", isStrs, d === undefined ? none : some(d)),
  tensor: () => mk("tensor", isTensor, none),
  graph: () => mk("graph", isGraph, none),
  optInt: () => optional("int", isInt),
  optFloat: () => optional("float", isNum),
  optStr: () => optional("string", isStr),
  optInts: () => optional("ints", isInts),
  optFloats: () => optional("floats", isNums),
  optStrs: () => optional("strings", isStrs),
  optTensor: () => optional("tensor", isTensor),
  optGraph: () => optional("graph", isGraph),
  /** A string attribute restricted to `values` (upper/lower case as given), with a default. */
  oneOf: <S extends string>(values: readonly S[], d: S) =>
    mk(`one of ${values.join("|")}`, (u): u is S => typeof u === "string" && (values as readonly string[]).includes(u), some(d)),
} as const

/** The codec of an op's attributes: an io-ts `type` over attribute codecs. */
export const attrs = <P extends t.Props>(props: P) => t.type(props)
export const noAttrs = t.type({})

export type AttrCodec<A> = t.Type<A, unknown, unknown>

/** Decodes raw attributes; on failure, a message naming the attribute and what was expected. */
export const decodeAttrs = <A>(codec: AttrCodec<A>, raw: Attrs): { ok: true; value: A } | { ok: false; error: string } => {
  const r = codec.decode(raw)
  if (!isLeft(r)) return { ok: true, value: r.right }
  const msgs = r.left.map((e) => {
    const key = e.context.map((c) => c.key).filter((k) => k !== "").join(".")
    return `attribute '${key}': ${e.message ?? "invalid value"}`
  })
  return { ok: false, error: msgs.join("; ") }
}

/** Shorthands to build raw attributes (zoo, tests, rewrites). */
export const attr = {
  int: (value: number): AttrValue => ({ kind: "int", value }),
  float: (value: number): AttrValue => ({ kind: "float", value }),
  str: (value: string): AttrValue => ({ kind: "string", value }),
  ints: (value: readonly number[]): AttrValue => ({ kind: "ints", value }),
  floats: (value: readonly number[]): AttrValue => ({ kind: "floats", value }),
  strs: (value: readonly string[]): AttrValue => ({ kind: "strings", value }),
  tensor: (value: Tensor): AttrValue => ({ kind: "tensor", value }),
  graph: (value: Graph): AttrValue => ({ kind: "graph", value }),
}
