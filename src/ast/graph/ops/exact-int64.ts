// Exact int64 / uint64 in the reference interpreter (see ../int64.ts for the representation).
//
// Every node runs through `runKernel`. For int64 / uint64 it picks one of three ways:
// - an exact kernel (EXACT): the op computed on BigInt values, wrapped to 64 bits like C and
//   numpy (Add, Sub, Mul, Div, Mod, Neg, Abs, Sign, Max, Min, Sum, the comparisons, Cast,
//   CastLike, Range, CumSum, CumProd, ConstantOfShape, ReduceSum / Prod / Max / Min, the bitwise
//   ops and BitShift);
// - a move (MOVES): ops whose outputs are elements of some inputs (Reshape, Gather, Concat,
//   Slice, Where…) run their own kernel on the element *indices* of those inputs, and the outputs
//   take the exact values at the indices they got — so every data-movement kernel is exact
//   without a BigInt version of it;
// - any other op: its kernel, which computes in double — refused (OpUnsupported, naming the input
//   and the value) when an input holds a value that is not a double, and when an int64 output
//   reaches 2^53, where the double it computed may have been rounded.
// Float paths pay one dtype test per input and output.
import { allocateBig, isWide, roundBigToBits, wrapWide } from "../int64.js"
import { allocate, roundBF16, roundF16, type DType } from "../dtype.js"
import { LIMITS } from "../limits.js"
import { check, fail, OpUnsupported, type AnyOpDef, type KernelCtx } from "../op.js"
import { broadcastIndex, broadcastShapes, exactAt, exactValues, firstInexact, showShape, sizeOf, tensor, wideTensor, type Tensor } from "../tensor.js"
import { castTarget } from "./elementwise-convert.js"
import { reducedMask, reduceShape, reductionIndex, type ReduceAttrs, type ReduceName } from "./reduce.js"
import { axisIn, intValues, scalarOf } from "./tensor-common.js"

type Ctx = KernelCtx<unknown>
/** An exact kernel, or undefined where the node has no int64 / uint64 to be exact about. */
type ExactKernel = (ctx: Ctx) => readonly Tensor[] | undefined

const wideIn = (ctx: Ctx): boolean => ctx.inputs.some((t) => t !== undefined && isWide(t.dtype))

/** A bigint stored in `dtype`, as Cast does: integers wrap, floats round once (numpy's, C's conversion). */
export const bigToDtype = (v: bigint, dtype: DType): number => {
  switch (dtype) {
    case "float64":
      return Number(v)
    case "float32":
      return Math.fround(roundBigToBits(v, 24))
    case "float16":
      return roundF16(roundBigToBits(v, 11))
    case "bfloat16":
      return roundBF16(roundBigToBits(v, 8))
    case "bool":
      return v !== 0n ? 1 : 0
    case "int8":
      return Number(BigInt.asIntN(8, v))
    case "int16":
      return Number(BigInt.asIntN(16, v))
    case "int32":
      return Number(BigInt.asIntN(32, v))
    case "uint8":
      return Number(BigInt.asUintN(8, v))
    case "uint16":
      return Number(BigInt.asUintN(16, v))
    case "uint32":
      return Number(BigInt.asUintN(32, v))
    case "int64":
    case "uint64":
      return Number(wrapWide(dtype, v))
  }
}

/** A number as the int64 / uint64 Cast makes of it: truncated toward zero and wrapped; NaN and ±∞ give 0. */
const numberToBig = (x: number, to: "int64" | "uint64"): bigint => (Number.isFinite(x) ? wrapWide(to, BigInt(Math.trunc(x))) : 0n)

const castExact = (x: Tensor, to: DType): Tensor | undefined => {
  if (x.dtype === to) return x
  if (isWide(to)) {
    const out = allocateBig(to, x.data.length)
    if (isWide(x.dtype)) {
      const src = exactValues(x)
      for (let i = 0; i < out.length; i++) out[i] = wrapWide(to, src[i])
    } else for (let i = 0; i < out.length; i++) out[i] = numberToBig(x.data[i], to)
    return wideTensor(to, x.shape, out)
  }
  if (!isWide(x.dtype)) return undefined
  const src = exactValues(x)
  const out = allocate(to, src.length)
  for (let i = 0; i < src.length; i++) out[i] = bigToDtype(src[i], to)
  return tensor(to, x.shape, out)
}

/** Broadcasts the (present) inputs against each other: the output shape and each input's index map. */
const broadcastAll = (xs: readonly Tensor[]): { shape: number[]; maps: Int32Array[] } => {
  let shape: number[] = xs[0].shape.slice()
  for (const t of xs.slice(1)) shape = broadcastShapes(shape, t.shape) ?? fail(`shapes ${xs.map((x) => showShape(x.shape)).join(", ")} do not broadcast`)
  return { shape, maps: xs.map((t) => broadcastIndex(t.shape, shape)) }
}

type Big2 = (a: bigint, b: bigint) => bigint

/** Truncating division (C's, the reference kernel's); by zero an OpError as there. */
const divBig: Big2 = (a, b) => (b === 0n ? fail("integer division by zero") : a / b)
const modBig = (fmod: number): Big2 => (a, b) => {
  if (b === 0n) return fail("integer modulo by zero")
  const r = a % b
  return fmod === 0 && r !== 0n && r < 0n !== b < 0n ? r + b : r
}
const maxBig: Big2 = (a, b) => (a > b ? a : b)
const minBig: Big2 = (a, b) => (a < b ? a : b)

/** An n-ary broadcasting op over int64 / uint64 inputs of one dtype, wrapped to it. */
const arith =
  (f: (ctx: Ctx) => Big2, variadic = false): ExactKernel =>
  (ctx) => {
    if (!wideIn(ctx) || ctx.opset < 7) return undefined
    const xs = (variadic ? ctx.inputs : ctx.inputs.slice(0, 2)).filter((t): t is Tensor => t !== undefined)
    const d = xs[0].dtype
    if (!isWide(d) || xs.some((t) => t.dtype !== d)) return undefined // the kernel's own type error
    const op = f(ctx)
    const { shape, maps } = broadcastAll(xs)
    const vals = xs.map(exactValues)
    const n = sizeOf(shape)
    const out = allocateBig(d, n)
    for (let i = 0; i < n; i++) {
      let acc = vals[0][maps[0][i]]
      for (let k = 1; k < vals.length; k++) acc = op(acc, vals[k][maps[k][i]])
      out[i] = wrapWide(d, acc)
    }
    return [wideTensor(d, shape, out)]
  }

const compare =
  (f: (a: bigint, b: bigint) => boolean): ExactKernel =>
  (ctx) => {
    if (!wideIn(ctx) || ctx.opset < 7) return undefined
    const [a, b] = ctx.inputs as Tensor[]
    if (!a || !b || a.dtype !== b.dtype) return undefined
    const { shape, maps } = broadcastAll([a, b])
    const va = exactValues(a)
    const vb = exactValues(b)
    const out = new Uint8Array(sizeOf(shape))
    for (let i = 0; i < out.length; i++) out[i] = f(va[maps[0][i]], vb[maps[1][i]]) ? 1 : 0
    return [tensor("bool", shape, out)]
  }

const unary =
  (f: (v: bigint) => bigint): ExactKernel =>
  (ctx) => {
    const x = ctx.inputs[0]
    if (!x || !isWide(x.dtype)) return undefined
    const d = x.dtype
    const v = exactValues(x)
    const out = allocateBig(d, v.length)
    for (let i = 0; i < v.length; i++) out[i] = wrapWide(d, f(v[i]))
    return [wideTensor(d, x.shape, out)]
  }

const REDUCE: Partial<Record<ReduceName, { init: (d: "int64" | "uint64") => bigint; step: Big2 }>> = {
  ReduceSum: { init: () => 0n, step: (a, b) => a + b },
  ReduceProd: { init: () => 1n, step: (a, b) => a * b },
  ReduceMax: { init: (d) => (d === "uint64" ? 0n : -(2n ** 63n)), step: maxBig },
  ReduceMin: { init: (d) => (d === "uint64" ? 2n ** 64n - 1n : 2n ** 63n - 1n), step: minBig },
}

const reduceExact =
  (op: ReduceName): ExactKernel =>
  (ctx) => {
    const x = ctx.inputs[0]
    if (!x || !isWide(x.dtype)) return undefined
    const d = x.dtype
    const fold = REDUCE[op]!
    const a = ctx.attrs as ReduceAttrs
    const axesT = ctx.inputs[1]
    const mask = reducedMask(op, a, ctx.opset, x.shape.length, axesT ? intValues(axesT, "axes") : undefined, axesT !== undefined)!
    const shape = reduceShape(x.shape, mask, a.keepdims !== 0, 1)
    const map = reductionIndex(x.shape, mask)
    const acc = new Array<bigint>(sizeOf(shape)).fill(fold.init(d))
    const v = exactValues(x)
    for (let i = 0; i < map.length; i++) acc[map[i]] = wrapWide(d, fold.step(acc[map[i]], v[i]))
    const out = allocateBig(d, acc.length)
    acc.forEach((x, i) => (out[i] = x))
    return [wideTensor(d, shape, out)]
  }

const rangeExact: ExactKernel = (ctx) => {
  const [s, l, dl] = ctx.inputs
  if (!s || !l || !dl || !isWide(s.dtype) || s.dtype !== l.dtype || s.dtype !== dl.dtype) return undefined
  const d = s.dtype
  check(s.data.length === 1 && l.data.length === 1 && dl.data.length === 1, "start, limit and delta must be scalars")
  const [start, limit, delta] = [exactAt(s, 0), exactAt(l, 0), exactAt(dl, 0)]
  const n = rangeCountBig(start, limit, delta)
  check(n <= BigInt(LIMITS.tensorElements), () => `range(${start}, ${limit}, ${delta}) has ${n} elements, past the limit of ${LIMITS.tensorElements}`)
  const out = allocateBig(d, Number(n))
  for (let i = 0; i < out.length; i++) out[i] = wrapWide(d, start + BigInt(i) * delta)
  return [wideTensor(d, [out.length], out)]
}

/** max(ceil((limit - start) / delta), 0), exactly. */
export const rangeCountBig = (start: bigint, limit: bigint, delta: bigint): bigint => {
  if (delta === 0n) return fail("delta must not be 0")
  const num = limit - start
  let q = num / delta
  if (q * delta !== num && num < 0n === delta < 0n) q += 1n
  return q > 0n ? q : 0n
}

/** CumSum / CumProd along the axis of input 1, inclusive or exclusive, forward or reverse, wrapped to 64 bits at every step. */
const scanExact =
  (prod: boolean): ExactKernel =>
  (ctx) => {
    const x = ctx.inputs[0]
    const axT = ctx.inputs[1]
    if (!x || !axT || !isWide(x.dtype)) return undefined
    const d = x.dtype
    const axis = axisIn(scalarOf(axT, "axis"), x.shape.length)
    const a = ctx.attrs as { exclusive: number; reverse: number }
    const dim = x.shape[axis]
    const outer = sizeOf(x.shape.slice(0, axis))
    const inner = sizeOf(x.shape.slice(axis + 1))
    const v = exactValues(x)
    const out = allocateBig(d, v.length)
    for (let o = 0; o < outer; o++)
      for (let j = 0; j < inner; j++) {
        const base = o * dim * inner + j
        let acc = prod ? 1n : 0n
        for (let s = 0; s < dim; s++) {
          const p = base + (a.reverse !== 0 ? dim - 1 - s : s) * inner
          const next = wrapWide(d, prod ? acc * v[p] : acc + v[p])
          out[p] = a.exclusive !== 0 ? acc : next
          acc = next
        }
      }
    return [wideTensor(d, x.shape, out)]
  }

/** ConstantOfShape of an int64 / uint64 value: every element the value's exact one (past 2^53 the plain kernel's output would be refused). */
const constantOfShapeExact: ExactKernel = (ctx) => {
  const value = (ctx.attrs as { value?: Tensor }).value
  const shapeT = ctx.inputs[0]
  if (!value || !shapeT || !isWide(value.dtype)) return undefined
  check(value.data.length === 1, () => `value must have one element, got shape [${value.shape.join(", ")}]`)
  const shape = intValues(shapeT, "shape")
  check(shape.every((n) => Number.isInteger(n) && n >= 0), () => `shape [${shape.join(", ")}] has a negative dim`)
  const n = sizeOf(shape)
  check(n <= LIMITS.tensorElements, () => `shape [${shape.join(", ")}] has ${n} elements, past the limit of ${LIMITS.tensorElements}`)
  const out = allocateBig(value.dtype, n)
  const v = exactAt(value, 0)
  for (let i = 0; i < n; i++) out[i] = v
  return [wideTensor(value.dtype, shape, out)]
}

const shiftExact = arith((ctx) => ((ctx.attrs as { direction: string }).direction === "LEFT" ? (a, b) => (b >= 64n ? 0n : a << b) : (a, b) => (b >= 64n ? 0n : a >> b)))

const EXACT: ReadonlyMap<string, ExactKernel> = new Map<string, ExactKernel>([
  ["Add", arith(() => (a, b) => a + b)],
  ["Sub", arith(() => (a, b) => a - b)],
  ["Mul", arith(() => (a, b) => a * b)],
  ["Div", arith(() => divBig)],
  ["Mod", arith((ctx) => modBig((ctx.attrs as { fmod: number }).fmod))],
  ["Max", arith(() => maxBig, true)],
  ["Min", arith(() => minBig, true)],
  ["Sum", arith(() => (a, b) => a + b, true)],
  ["Equal", compare((a, b) => a === b)],
  ["Less", compare((a, b) => a < b)],
  ["LessOrEqual", compare((a, b) => a <= b)],
  ["Greater", compare((a, b) => a > b)],
  ["GreaterOrEqual", compare((a, b) => a >= b)],
  ["Neg", unary((v) => -v)],
  ["Abs", unary((v) => (v < 0n ? -v : v))],
  ["Sign", unary((v) => (v > 0n ? 1n : v < 0n ? -1n : 0n))],
  ["Cast", (ctx) => {
    const x = ctx.inputs[0]
    if (!x) return undefined
    const r = castExact(x, castTarget((ctx.attrs as { to: number | string }).to))
    return r && [r]
  }],
  ["CastLike", (ctx) => {
    const [x, like] = ctx.inputs
    if (!x || !like) return undefined
    const r = castExact(x, like.dtype)
    return r && [r]
  }],
  ["Range", rangeExact],
  ["CumSum", scanExact(false)],
  ["CumProd", scanExact(true)],
  ["ConstantOfShape", constantOfShapeExact],
  ["BitwiseAnd", arith(() => (a, b) => a & b)],
  ["BitwiseOr", arith(() => (a, b) => a | b)],
  ["BitwiseXor", arith(() => (a, b) => a ^ b)],
  ["BitwiseNot", unary((v) => ~v)],
  // (BitShift takes unsigned integers: of ours, uint64 is the wide one; a shift by 64 or more is 0)
  ["BitShift", (ctx) => (ctx.inputs[0]?.dtype === "uint64" ? shiftExact(ctx) : undefined)],
  ...(["ReduceSum", "ReduceProd", "ReduceMax", "ReduceMin"] as const).map((op) => [op, reduceExact(op)] as const),
])

/** Ops whose outputs are elements of these inputs ("all": every input), moved without arithmetic. */
const MOVES: ReadonlyMap<string, readonly number[] | "all"> = new Map<string, readonly number[] | "all">([
  ["Identity", [0]],
  ["Reshape", [0]],
  ["Flatten", [0]],
  ["Squeeze", [0]],
  ["Unsqueeze", [0]],
  ["Transpose", [0]],
  ["Expand", [0]],
  ["Tile", [0]],
  ["Gather", [0]],
  ["GatherElements", [0]],
  ["GatherND", [0]],
  ["Slice", [0]],
  ["Split", [0]],
  ["Concat", "all"],
  ["Where", [1, 2]],
  ["ScatterElements", [0, 2]],
  ["ScatterND", [0, 2]],
  ["Scatter", [0, 2]],
  ["DepthToSpace", [0]],
  ["SpaceToDepth", [0]],
  ["Compress", [0]],
  ["ReverseSequence", [0]],
])

/**
 * Ops whose int64 results a double computes exactly whenever their inputs are doubles: moves,
 * selections, indices and casts of integers (lowering keeps a Cast from a float, which wraps past
 * 2^63, apart). Where int64 storage is a double (js, wasm) lowering compiles these and keeps every
 * other op that computes int64 on the reference kernels.
 */
export const INT64_EXACT_IN_DOUBLE: ReadonlySet<string> = new Set([...MOVES.keys(), "ArgMax", "ArgMin", "Cast", "CastLike", "Max", "Min", "Shape", "Size", "Trilu", "EyeLike"])

/** Ops that hand on tensors they were given (attribute values, subgraph results): any input taken, outputs checked. */
const PASSES: ReadonlySet<string> = new Set(["Constant", "If", "Loop", "Scan"])

/** The kernel run on element indices of the moved inputs; each output takes the exact values at the indices it got. */
const moveExact = (def: AnyOpDef, ctx: Ctx, moved: readonly number[] | "all"): readonly Tensor[] => {
  const which = ctx.inputs.map((t, k) => t !== undefined && (moved === "all" || moved.includes(k)))
  const pool: bigint[] = []
  const inputs = ctx.inputs.map((t, k) => {
    if (!t || !which[k]) return t
    const v = exactValues(t)
    const idx = new Float64Array(v.length)
    for (let i = 0; i < v.length; i++) {
      idx[i] = pool.length
      pool.push(v[i])
    }
    return tensor(t.dtype, t.shape, idx)
  })
  const outs = def.kernel({ ...ctx, inputs })
  return outs.map((o) => {
    if (!isWide(o.dtype)) return o
    const out = allocateBig(o.dtype, o.data.length)
    for (let i = 0; i < out.length; i++) out[i] = pool[o.data[i]] ?? fail("internal: a moved element has no source")
    return wideTensor(o.dtype, o.shape, out)
  })
}

const TWO53 = 2 ** 53

/**
 * Runs a node's reference kernel with int64 / uint64 exact: an exact kernel, a move, or the op's
 * own kernel, refused where its double arithmetic could round (see the file header).
 */
export const runKernel = (op: string, def: AnyOpDef, ctx: Ctx, domain = ""): readonly Tensor[] => {
  if (domain === "" || domain === "ai.onnx") {
    const exact = EXACT.get(op)
    if (exact) {
      const r = exact(ctx)
      if (r) return r
    }
    const moved = MOVES.get(op)
    if (moved) return ctx.inputs.some((t) => t?.exact) ? moveExact(def, ctx, moved) : def.kernel(ctx)
  }
  const passes = (domain === "" || domain === "ai.onnx") && PASSES.has(op)
  if (!passes)
    ctx.inputs.forEach((t, k) => {
      const v = t && firstInexact(t)
      if (v !== undefined)
        throw new OpUnsupported(
          `input ${k} (${t!.dtype}) holds ${v}, which a double does not hold exactly, and ${op}'s reference kernel computes in double (exact for int64 beyond 2^53: ${[...EXACT.keys(), ...MOVES.keys()].join(", ")})`,
        )
    })
  // (from an op that hands tensors on, an output that carries exact values was handed on whole —
  // a Constant's value, an If branch's result; one without them was computed, or copied from
  // doubles — a Scan's stacked outputs. From any other op, every int64 output was computed in double.)
  const outs = def.kernel(ctx)
  outs.forEach((o, k) => {
    if (!o || !isWide(o.dtype) || (passes && o.exact)) return
    const d = o.data
    for (let i = 0; i < d.length; i++)
      if (d[i] >= TWO53 || d[i] <= -TWO53)
        throw new OpUnsupported(`output ${k} (${o.dtype}) reaches ${d[i]}, beyond 2^53, where ${op}'s reference kernel (in double) may have rounded it; it has no exact int64 kernel`)
  })
  return outs
}

