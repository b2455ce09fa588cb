// Scalar expressions shared by TE and TIR: immutable nodes with smart constructors that fold
// constants as they build. Index arithmetic is on integers with floor division/modulo; values
// carry a dtype so the evaluators and emitters know what they compute.
import type { DType } from "../graph/dtype.js"

export type BinOp =
  | "add"
  | "sub"
  | "mul"
  | "div" // true division for floats, truncating for ints (C semantics)
  | "floordiv"
  | "floormod"
  | "min"
  | "max"
  | "eq"
  | "ne"
  | "lt"
  | "le"
  | "gt"
  | "ge"
  | "and"
  | "or"

export type Intrinsic =
  | "exp"
  | "log"
  | "sqrt"
  | "rsqrt"
  | "tanh"
  | "erf"
  | "pow"
  /**
   * x·y + z rounded once to the operands' type, float32 only (`fma32` builds it): c and cuda emit
   * fmaf; js and wasm compute x·y + z in float64 and round it to float32, which is the fused result
   * wherever x·y + z is exact in float64 — x·y of two float32 values always is (48 bits); a use must
   * show the sum is too (QLinearAdd's, op-library-quant-contrib.ts, checks it from its constants).
   */
  | "fma"
  | "sigmoid"
  | "fabs"
  | "floor"
  | "ceil"
  | "round"
  | "sin"
  | "cos"
  | "neg"
  | "not"

export interface Var {
  readonly kind: "var"
  readonly name: string
  readonly dtype: DType
}

/** A tensor read in TE (of a TE tensor, held in `tensor`) or TIR (of a buffer): `source` names it. */
export interface Read {
  readonly kind: "read"
  readonly source: string
  readonly indices: readonly Expr[]
  readonly dtype: DType
  readonly tensor?: TeTensor
}

export type Expr =
  | { readonly kind: "const"; readonly value: number; readonly dtype: DType }
  | Var
  | { readonly kind: "bin"; readonly op: BinOp; readonly a: Expr; readonly b: Expr; readonly dtype: DType }
  | { readonly kind: "select"; readonly cond: Expr; readonly t: Expr; readonly f: Expr; readonly dtype: DType }
  | { readonly kind: "cast"; readonly value: Expr; readonly dtype: DType }
  | { readonly kind: "call"; readonly fn: Intrinsic; readonly args: readonly Expr[]; readonly dtype: DType }
  | Read
  | Reduce

/** A commutative reduction over `axes` (TE only; lowering turns it into init + update loops). */
export interface Reduce {
  readonly kind: "reduce"
  readonly combiner: Combiner
  readonly source: Expr
  readonly axes: readonly IterVar[]
  /** Only elements where this holds are combined (padding, predicates). */
  readonly where?: Expr
  readonly dtype: DType
}

export interface Combiner {
  readonly name: string
  /** combine(acc, x) as an expression over the two vars. */
  readonly lhs: Var
  readonly rhs: Var
  readonly result: Expr
  readonly identity: (dtype: DType) => number
}

export interface Range {
  readonly min: number
  readonly extent: number
}

export interface IterVar {
  readonly var: Var
  readonly dom: Range
  readonly type: "data" | "reduce"
}

// TE tensors (constructed in tensor.ts): declared here because expressions and tensors refer to
// each other — a Read holds the tensor it reads, a compute holds its body.
export interface Placeholder {
  readonly kind: "placeholder"
  readonly name: string
  readonly shape: readonly number[]
  readonly dtype: DType
}

/**
 * What a compute is, where a schedule cares (TVM's compute `tag`): the op library sets it on the
 * stage a schedule template is built around, and the template is chosen by it. A compute without a
 * tag is whatever its body says (elementwise, injective, a plain reduction).
 */
export const COMPUTE_TAGS = [
  /** A direct convolution in NCHW (2-D). */
  "conv2d_nchw",
  /** A direct convolution of one or three or more spatial dims (NCW, NCDHW, …). */
  "conv_nd",
  /** A transposed convolution, any spatial rank. */
  "conv_transpose",
  /** A convolution in the blocked layout: output [n, oc block, oh, ow, oc lane], reduce [ic, kh, kw]. */
  "conv2d_nchwc",
  /** The batched products M of a Winograd convolution (ConvWinogradNCHWc): [α, α, tiles, oc block, oc lane]. */
  "conv2d_winograd_product",
  /** Gemm's product: [M, K] × [K, N], either side transposed. */
  "dense",
  /** DensePack's product into column panels [M, panel, lane] (TVM's dense_pack). */
  "dense_pack",
  /** MatMul: batched, broadcast, 1-D operands. */
  "matmul",
  /** MatMulPacked's product: A [..., M, K] · a constant B in column panels [P, K, w], column j read at panel j / w, lane j % w. */
  "matmul_packed",
  /** A windowed pooling reduction (max, sum, Lp), NCHW or blocked. */
  "pool",
  /** A pooling reduction over the whole spatial extent. */
  "global_pool",
  /**
   * An 8-bit product in the VNNI layout (op-library-int8-blocked.ts): [..., 16 output lanes] int32
   * sums of u8 activations × s8 packed weights, innermost reduce axis 4 (vpdpbusd's dot).
   */
  "int8_dot",
  /**
   * A 1×1 8-bit convolution's product with the output's pixels in the lanes
   * (op-library-int8-blocked.ts's packedConvPixels): [n, o, pixels / 16, 16] int32 sums of u8
   * activations [.., pixel, 4] × one channel's 4 s8 weights, reduce [C / 4, 4].
   */
  "int8_dot_px",
  /**
   * A depthwise 8-bit convolution's int32 sums [n, o, p] over a grid of its phases' width (p = oh·Wq
   * + ow) of the int16 phases of its padded, zero-shifted input (op-library-int8-depthwise.ts):
   * reduce [kh, kw] (and a group's channels), the grid's pixels vectorized.
   */
  "int8_depthwise",
] as const

export type ComputeTag = (typeof COMPUTE_TAGS)[number]

export interface ComputeTensor {
  readonly kind: "compute"
  readonly name: string
  readonly shape: readonly number[]
  readonly dtype: DType
  /** One data axis per output dim, domain [0, shape[i]). */
  readonly axes: readonly IterVar[]
  /** The element at `axes`; a Reduce at the top for reductions. */
  readonly body: Expr
  /** Tensors the body reads, in first-read order. */
  readonly inputs: readonly TeTensor[]
  /** What the compute is, for the schedule (not part of its meaning: printTE leaves it out). */
  readonly tag?: ComputeTag
}

export type TeTensor = Placeholder | ComputeTensor

const INT = "int32" as const
export const isIntDtype = (d: DType): boolean => {
  switch (d) {
    case "int8":
    case "int16":
    case "int32":
    case "int64":
    case "uint8":
    case "uint16":
    case "uint32":
    case "uint64":
    case "bool":
      return true
    default:
      return false
  }
}
const BOOL: DType = "bool"

export const v = (name: string, dtype: DType = INT): Var => ({ kind: "var", name, dtype })
export const c = (value: number, dtype: DType = INT): Expr => ({ kind: "const", value, dtype })
export const f32 = (value: number): Expr => ({ kind: "const", value: Math.fround(value), dtype: "float32" })

const isConst = (e: Expr): e is { kind: "const"; value: number; dtype: DType } => e.kind === "const"
export const constValue = (e: Expr): number | undefined => (e.kind === "const" ? e.value : undefined)

const floorDiv = (a: number, b: number) => Math.floor(a / b)
const floorMod = (a: number, b: number) => a - Math.floor(a / b) * b

/**
 * Applies a binary op to numbers with the dtype's semantics; an integer result is never −0 (which
 * integers lack: `0 * -3` and `trunc(-1 / 3)` are −0 in doubles, and exprKey, which tells the
 * floats −0 and 0 apart, would give one integer two keys).
 */
export const applyBin = (op: BinOp, x: number, y: number, dtype: DType): number => {
  const r = applyBinRaw(op, x, y, dtype)
  return r === 0 && isIntDtype(dtype) ? 0 : r
}

const applyBinRaw = (op: BinOp, x: number, y: number, dtype: DType): number => {
  const int = isIntDtype(dtype)
  switch (op) {
    case "add":
      return x + y
    case "sub":
      return x - y
    case "mul":
      return x * y
    case "div":
      return int ? Math.trunc(x / y) : x / y
    case "floordiv":
      return int ? floorDiv(x, y) : Math.floor(x / y)
    case "floormod":
      return floorMod(x, y)
    case "min":
      return Math.min(x, y)
    case "max":
      return Math.max(x, y)
    case "eq":
      return x === y ? 1 : 0
    case "ne":
      return x !== y ? 1 : 0
    case "lt":
      return x < y ? 1 : 0
    case "le":
      return x <= y ? 1 : 0
    case "gt":
      return x > y ? 1 : 0
    case "ge":
      return x >= y ? 1 : 0
    case "and":
      return x && y ? 1 : 0
    case "or":
      return x || y ? 1 : 0
  }
}

const isCmp = (op: BinOp): boolean => op === "eq" || op === "ne" || op === "lt" || op === "le" || op === "gt" || op === "ge" || op === "and" || op === "or"

/** Builds a binary node, folding constants and the trivial identities (x+0, x*1, x*0 for ints). */
export const bin = (op: BinOp, a: Expr, b: Expr): Expr => binFolded(op, a, b) ?? { kind: "bin", op, a, b, dtype: isCmp(op) ? BOOL : a.dtype }

/** What `bin` folds op(a, b) to (a constant, or one side); undefined where it builds a node. */
const binFolded = (op: BinOp, a: Expr, b: Expr): Expr | undefined => {
  if (isConst(a) && isConst(b)) {
    if ((op === "div" || op === "floordiv" || op === "floormod") && b.value === 0 && isIntDtype(a.dtype)) return undefined
    return c(applyBin(op, a.value, b.value, a.dtype), isCmp(op) ? BOOL : a.dtype)
  }
  const int = isIntDtype(a.dtype)
  if (op === "add" && isConst(b) && b.value === 0) return a
  if (op === "add" && isConst(a) && a.value === 0) return b
  if (op === "sub" && isConst(b) && b.value === 0) return a
  if (op === "mul" && isConst(b) && b.value === 1) return a
  if (op === "mul" && isConst(a) && a.value === 1) return b
  if (op === "mul" && int && ((isConst(a) && a.value === 0) || (isConst(b) && b.value === 0))) return c(0, a.dtype)
  if ((op === "floordiv" || op === "div") && isConst(b) && b.value === 1) return a
  if (op === "floormod" && isConst(b) && b.value === 1 && int) return c(0, a.dtype)
  return undefined
}

/**
 * bin(x.op, a, b) for a node `x` whose children were mapped to a and b: `x` itself where bin
 * would build a node equal to it (both children and the dtype unchanged), as mapExpr keeps it.
 */
export const rebin = (x: Extract<Expr, { kind: "bin" }>, a: Expr, b: Expr): Expr => {
  const folded = binFolded(x.op, a, b)
  if (folded) return folded
  const dtype = isCmp(x.op) ? BOOL : a.dtype
  return a === x.a && b === x.b && dtype === x.dtype ? x : { kind: "bin", op: x.op, a, b, dtype }
}

export const add = (a: Expr, b: Expr) => bin("add", a, b)
export const sub = (a: Expr, b: Expr) => bin("sub", a, b)
export const mul = (a: Expr, b: Expr) => bin("mul", a, b)
export const div = (a: Expr, b: Expr) => bin("div", a, b)
export const floordiv = (a: Expr, b: Expr) => bin("floordiv", a, b)
export const floormod = (a: Expr, b: Expr) => bin("floormod", a, b)
export const min = (a: Expr, b: Expr) => bin("min", a, b)
export const max = (a: Expr, b: Expr) => bin("max", a, b)
export const lt = (a: Expr, b: Expr) => bin("lt", a, b)
export const le = (a: Expr, b: Expr) => bin("le", a, b)
export const gt = (a: Expr, b: Expr) => bin("gt", a, b)
export const ge = (a: Expr, b: Expr) => bin("ge", a, b)
export const eq = (a: Expr, b: Expr) => bin("eq", a, b)
export const and = (a: Expr, b: Expr) => bin("and", a, b)
export const or = (a: Expr, b: Expr) => bin("or", a, b)

export const select = (cond: Expr, t: Expr, f: Expr): Expr => {
  if (isConst(cond)) return cond.value ? t : f
  return { kind: "select", cond, t, f, dtype: t.dtype }
}
export const cast = (dtype: DType, value: Expr): Expr => {
  if (value.dtype === dtype) return value
  if (isConst(value)) return c(isIntDtype(dtype) ? Math.trunc(value.value) : dtype === "float32" ? Math.fround(value.value) : value.value, dtype)
  return { kind: "cast", value, dtype }
}
export const call = (fn: Intrinsic, ...args: Expr[]): Expr => ({ kind: "call", fn, args, dtype: fn === "not" ? BOOL : args[0].dtype })

/** x·y + z rounded once to float32 (the "fma" intrinsic; see its note for the targets without one). */
export const fma32 = (x: Expr, y: Expr, z: Expr): Expr => {
  if (x.dtype !== "float32" || y.dtype !== "float32" || z.dtype !== "float32") throw new TypeError(`fma32 of ${x.dtype}, ${y.dtype}, ${z.dtype} (float32 only)`)
  return call("fma", x, y, z)
}

export const read = (source: string, indices: readonly Expr[], dtype: DType): Read => ({ kind: "read", source, indices, dtype })

// ---------------------------------------------------------------------------------------------
// Traversals

/** Whether two lists hold the same objects. */
export const sameItems = <A>(xs: readonly A[], ys: readonly A[]): boolean => xs.every((x, i) => x === ys[i])

/**
 * Rebuilds `e` bottom-up, giving each node to `f` (which may replace it) before its children are
 * mapped; a node is rebuilt through its smart constructor (bin, select, cast: folding what they
 * fold). A node whose children come back unchanged, and which its constructor would build as it
 * is, is kept (not copied): a pass that changes a few indices of a large body (FlattenStorage,
 * Simplify over Winograd kernels) no longer copies the rest, and mapStmt keeps the statements
 * around what is kept. Equal either way: the copy was the same structure.
 */
export const mapExpr = (e: Expr, f: (e: Expr) => Expr | undefined): Expr => {
  const rec = (x: Expr): Expr => {
    const pre = f(x)
    if (pre) return pre
    switch (x.kind) {
      case "const":
      case "var":
        return x
      case "bin": {
        return rebin(x, rec(x.a), rec(x.b))
      }
      case "select": {
        // a condition that maps to a constant picks its arm before the other is mapped: a chain of
        // selects over an unrolled loop's index (Winograd's transforms) costs one arm per copy
        const cond = rec(x.cond)
        if (isConst(cond)) return rec(cond.value ? x.t : x.f)
        const [t, f] = [rec(x.t), rec(x.f)]
        return cond === x.cond && t === x.t && f === x.f && x.dtype === t.dtype ? x : select(cond, t, f)
      }
      case "cast": {
        const value = rec(x.value)
        return value === x.value && value.dtype !== x.dtype && !isConst(value) ? x : cast(x.dtype, value)
      }
      case "call": {
        const args = x.args.map(rec)
        return sameItems(args, x.args) ? x : { ...x, args }
      }
      case "read": {
        const indices = x.indices.map(rec)
        return sameItems(indices, x.indices) ? x : { ...x, indices }
      }
      case "reduce": {
        const source = rec(x.source)
        const where = x.where ? rec(x.where) : undefined
        return source === x.source && where === x.where ? x : { ...x, source, ...(where ? { where } : {}) }
      }
    }
  }
  return rec(e)
}

/**
 * A string equal for structurally equal expressions (a map key). A TE read's `tensor` is left out:
 * it refers to the whole producer's definition, which JSON.stringify would copy into every key
 * (a Winograd transform's keys ran to megabytes).
 */
export const exprKey = (e: Expr): string => JSON.stringify(e, keyReplacer)

/**
 * exprKey's JSON: a tensor's data left out, and the numbers JSON has no text for kept apart —
 * JSON writes NaN, ±Infinity as null and -0 as 0, which made the constants NaN and +Infinity one
 * key (the wasm emitter hoisted one splat for both: min(min(x, +inf), NaN) ran as min(x, +inf)).
 */
const keyReplacer = (k: string, v: unknown): unknown =>
  k === "tensor" ? undefined : typeof v === "number" && (!Number.isFinite(v) || Object.is(v, -0)) ? `#${Object.is(v, -0) ? "-0" : String(v)}` : v

/**
 * Whether exprKey(a) === exprKey(b), found without writing either: the same JSON data — own keys
 * in the same order, `tensor` and the values JSON leaves out (undefined, functions) skipped,
 * numbers equal as exprKey keeps them apart (Object.is: NaN one value, -0 not 0). Where the two
 * could differ it is the stricter (a number never equals exprKey's text for it, an undefined in an
 * array never a null). A walk that stops at the first difference and allocates nothing.
 */
export const sameExprKey = (a: Expr, b: Expr): boolean => sameKeyData(a, b)

const skipped = (o: object, k: string): boolean => {
  if (k === "tensor") return true
  const x = (o as Record<string, unknown>)[k]
  return x === undefined || typeof x === "function" || typeof x === "symbol"
}

const sameKeyData = (a: unknown, b: unknown): boolean => {
  // (numbers first: -0 === 0)
  if (typeof a === "number") return typeof b === "number" && Object.is(a, b)
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false
    for (let i = 0; i < a.length; i++) if (!sameKeyData(a[i], b[i])) return false
    return true
  }
  const ka = Object.keys(a)
  const kb = Object.keys(b)
  let i = 0
  let j = 0
  for (;;) {
    while (i < ka.length && skipped(a, ka[i])) i++
    while (j < kb.length && skipped(b, kb[j])) j++
    if (i === ka.length || j === kb.length) return i === ka.length && j === kb.length
    if (ka[i] !== kb[j] || !sameKeyData((a as Record<string, unknown>)[ka[i]], (b as Record<string, unknown>)[kb[j]])) return false
    i++
    j++
  }
}

/** Replaces variables by name. */
export const substitute = (e: Expr, env: ReadonlyMap<string, Expr>): Expr =>
  env.size === 0 ? e : mapExpr(e, (x) => (x.kind === "var" ? env.get(x.name) : undefined))

/** Every sub-expression, pre-order. */
export const collect = (e: Expr, pred: (e: Expr) => boolean): Expr[] => {
  const out: Expr[] = []
  const rec = (x: Expr) => {
    if (pred(x)) out.push(x)
    switch (x.kind) {
      case "bin":
        rec(x.a)
        rec(x.b)
        break
      case "select":
        rec(x.cond)
        rec(x.t)
        rec(x.f)
        break
      case "cast":
        rec(x.value)
        break
      case "call":
        x.args.forEach(rec)
        break
      case "read":
        x.indices.forEach(rec)
        break
      case "reduce":
        rec(x.source)
        if (x.where) rec(x.where)
        break
    }
  }
  rec(e)
  return out
}

export const freeVars = (e: Expr): Set<string> => new Set(collect(e, (x) => x.kind === "var").map((x) => (x as Var).name))

// ---------------------------------------------------------------------------------------------
// Printing

const OPS: Partial<Record<BinOp, string>> = { add: "+", sub: "-", mul: "*", div: "/", eq: "==", ne: "!=", lt: "<", le: "<=", gt: ">", ge: ">=", and: "&&", or: "||" }

export const showExpr = (e: Expr): string => {
  switch (e.kind) {
    case "const":
      return isIntDtype(e.dtype) ? String(e.value) : Number.isInteger(e.value) ? `${e.value}.0f` : `${e.value}f`
    case "var":
      return e.name
    case "bin": {
      const sym = OPS[e.op]
      return sym ? `(${showExpr(e.a)} ${sym} ${showExpr(e.b)})` : `${e.op}(${showExpr(e.a)}, ${showExpr(e.b)})`
    }
    case "select":
      return `select(${showExpr(e.cond)}, ${showExpr(e.t)}, ${showExpr(e.f)})`
    case "cast":
      return `${e.dtype}(${showExpr(e.value)})`
    case "call":
      return `${e.fn}(${e.args.map(showExpr).join(", ")})`
    case "read":
      return `${e.source}[${e.indices.map(showExpr).join(", ")}]`
    case "reduce":
      return `${e.combiner.name}(${showExpr(e.source)}, axis=[${e.axes.map((a) => a.var.name).join(", ")}]${e.where ? `, where=${showExpr(e.where)}` : ""})`
  }
}
