// Shared pieces of the tensor ops: reading small integer inputs (shapes, axes, indices), symbolic
// dims for shapes that depend on values not known at compile time, and the two copy kernels every
// data-movement op is built from (`strided` for affine index maps, `remap` for per-axis maps).
import { allocate, isInteger, type DType } from "../dtype.js"
import { check, fail, type Dim, type InferCtx, type ValueType } from "../op.js"
import { reshapeView, sizeOf, stridesOf, tensor, toNumbers, type Tensor } from "../tensor.js"

/** A data-dependent dim of output `out`, axis `d`: `node.out0.d1`. */
export const symDim = <A>(ctx: InferCtx<A>, out: number, d: number): string => `${ctx.node}.out${out}.d${d}`

/** `rank` symbolic dims for output `out`. */
export const symShape = <A>(ctx: InferCtx<A>, out: number, rank: number): Dim[] =>
  Array.from({ length: rank }, (_, d) => symDim(ctx, out, d))

/** The integer values of a small tensor (shape, axes, pads, repeats...), checked to be integral. */
export const intValues = (t: Tensor, what: string): number[] => {
  check(isInteger(t.dtype), () => `${what} must be an integer tensor, got ${t.dtype}`)
  return toNumbers(t)
}

/** Compile-time value of input k as integers, when known. */
export const constInts = <A>(ctx: InferCtx<A>, k: number, what: string): number[] | undefined => {
  const v = ctx.values[k]
  return v ? intValues(v, what) : undefined
}

/** The length of a 1-D input from its type (numeric), or undefined. */
export const staticLength = (t: ValueType | undefined): number | undefined => {
  if (!t) return undefined
  if (t.shape.length === 0) return 1
  const d = t.shape[0]
  return typeof d === "number" ? d : undefined
}

/** Normalises an axis against `rank` with a message naming the op's axis. */
export const axisIn = (axis: number, rank: number, what = "axis"): number => {
  const a = axis < 0 ? axis + rank : axis
  if (!Number.isInteger(a) || a < 0 || a >= rank) return fail(`${what} ${axis} out of range for rank ${rank}`)
  return a
}

/** Normalised, duplicate-free axes. */
export const uniqueAxes = (axes: readonly number[], rank: number, what = "axes"): number[] => {
  const out = axes.map((a) => axisIn(a, rank, what.replace(/s$/, "")))
  check(new Set(out).size === out.length, () => `${what} [${axes.join(", ")}] repeat an axis`)
  return out
}

/** Product of dims; a string when any is symbolic (and none is 0). */
export const dimProduct = (dims: readonly Dim[], name: string): Dim => {
  if (dims.some((d) => d === 0)) return 0
  let p = 1
  for (const d of dims) {
    if (typeof d !== "number") return name
    p *= d
  }
  return p
}

/** One scalar (or one-element) input as a number. */
export const scalarOf = (t: Tensor, what: string): number => {
  check(t.data.length === 1, () => `${what} must have exactly one element, got shape [${t.shape.join(", ")}]`)
  return t.data[0]
}

/**
 * Affine copy: `out[i0..ik] = src[offset + Σ i_d * strides[d]]` over `outShape`. Transpose,
 * Slice, Expand and DepthToSpace are this with different strides.
 */
export const strided = (src: Tensor, outShape: readonly number[], offset: number, strides: readonly number[]): Tensor => {
  const n = sizeOf(outShape)
  const out = allocate(src.dtype, n)
  const rank = outShape.length
  const d = src.data
  if (n === 0) return tensor(src.dtype, outShape, out)
  if (rank === 0) {
    out[0] = d[offset]
    return tensor(src.dtype, outShape, out)
  }
  const inner = outShape[rank - 1]
  const is = strides[rank - 1]
  const counter = new Array<number>(rank).fill(0)
  let base = offset
  for (let o = 0; o < n; o += inner) {
    let p = base
    for (let j = 0; j < inner; j++, p += is) out[o + j] = d[p]
    for (let k = rank - 2; k >= 0; k--) {
      counter[k]++
      base += strides[k]
      if (counter[k] < outShape[k]) break
      base -= strides[k] * counter[k]
      counter[k] = 0
    }
  }
  return tensor(src.dtype, outShape, out)
}

/**
 * Per-axis index maps: `maps[d][c]` is the input coordinate that output coordinate `c` of axis
 * `d` reads, or -1 where the output takes `fill`. Pad (every mode), Tile and CenterCropPad.
 */
/**
 * Per-axis source maps for `remap`: entry c of axis i is `at(i, c)`. An output with no elements
 * gets empty maps (an axis of 2^25 beside an axis of 0 costs nothing: Tile with a 0 repeat).
 */
export const indexMaps = (out: readonly number[], at: (axis: number, c: number) => number): Int32Array[] => {
  if (sizeOf(out) === 0) return out.map(() => new Int32Array(0))
  return out.map((n, i) => {
    const m = new Int32Array(n)
    for (let c = 0; c < n; c++) m[c] = at(i, c)
    return m
  })
}

export const remap = (src: Tensor, outShape: readonly number[], maps: readonly Int32Array[], fill = 0): Tensor => {
  const n = sizeOf(outShape)
  const out = allocate(src.dtype, n)
  const rank = outShape.length
  const d = src.data
  if (n === 0) return tensor(src.dtype, outShape, out)
  if (rank === 0) {
    out[0] = d[0]
    return tensor(src.dtype, outShape, out)
  }
  const strides = stridesOf(src.shape)
  // offsets: map entries premultiplied by the input stride, -1 stays -1
  const offs = maps.map((m, k) => m.map((c) => (c < 0 ? -1 : c * strides[k])))
  const inner = offs[rank - 1]
  const len = outShape[rank - 1]
  const counter = new Array<number>(rank).fill(0)
  for (let o = 0; o < n; o += len) {
    let base = 0
    let hole = false
    for (let k = 0; k < rank - 1; k++) {
      const v = offs[k][counter[k]]
      if (v < 0) {
        hole = true
        break
      }
      base += v
    }
    if (hole) out.fill(fill, o, o + len)
    else
      for (let j = 0; j < len; j++) {
        const v = inner[j]
        out[o + j] = v < 0 ? fill : d[base + v]
      }
    for (let k = rank - 2; k >= 0; k--) {
      if (++counter[k] < outShape[k]) break
      counter[k] = 0
    }
  }
  return tensor(src.dtype, outShape, out)
}

/** General transpose: output axis i is input axis perm[i]. */
export const transpose = (t: Tensor, perm: readonly number[]): Tensor => {
  const s = stridesOf(t.shape)
  return strided(
    t,
    perm.map((p) => t.shape[p]),
    0,
    perm.map((p) => s[p]),
  )
}

/**
 * The same elements under another shape, sharing storage. float16/bfloat16 are copied: the
 * evaluator rounds narrow-float outputs in place, which must never reach an input's storage.
 */
export const view = (t: Tensor, shape: readonly number[]): Tensor =>
  t.dtype === "float16" || t.dtype === "bfloat16" ? tensor(t.dtype, shape, t.data.slice()) : reshapeView(t, shape)

/** Outer (dims before axis), the axis dim and inner (dims after) sizes. */
export const aroundAxis = (shape: readonly number[], axis: number): { outer: number; dim: number; inner: number } => ({
  outer: sizeOf(shape.slice(0, axis)),
  dim: shape[axis],
  inner: sizeOf(shape.slice(axis + 1)),
})

/** Wraps a possibly negative index once into [0, bound), failing with the index and bound otherwise. */
export const wrapIndex = (i: number, bound: number, what: string): number => {
  const j = i < 0 ? i + bound : i
  if (!(j >= 0 && j < bound)) return fail(`${what} ${i} out of range [-${bound}, ${bound - 1}]`)
  return j
}

/** A tensor of `dtype` and `shape` holding `values` as given (no conversion). */
export const filled = (dtype: DType, shape: readonly number[], value: number): Tensor => {
  const data = allocate(dtype, sizeOf(shape))
  data.fill(value)
  return tensor(dtype, shape, data)
}
