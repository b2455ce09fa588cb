// Deferred constants: a weight a graph pass derives from another (SimplifyInference's BatchNorm fold
// scales a conv's rows, AlterLayout packs the kernel OIHW[ib]i[ob]o) whose `data` is computed when
// first read, and whose recipe the next transform may read through instead. On ResNet-50 the folded
// OIHW weights are read only by the pack, and the packed 3×3 ones only by the Winograd transform:
// each a fresh 85–90 MB array, and on a VM where the first touch of a page costs ~15 µs (2026-11-26,
// eighth session) each cost about 0.4 s of a 3 s compile. Read through, the chain writes one array
// (TVM folds its layout transforms into the constants after AlterOpLayout the same way).
//
// A deferred tensor is a Tensor like any other: `data` (an own, enumerable getter, so a spread copy
// gets the values) computes once and keeps the array; its recipe is not enumerable, so a copy made
// with another shape never carries it. Every value equals what the materialized chain stores,
// bit for bit: each recipe rounds once, at the store into the dtype's array, as the chain did
// (a scaled row's product rounded into float32, then copied by the pack).
import { allocate, type DType, type TypedArray } from "./dtype.js"
import { sizeOf, type Tensor } from "./tensor.js"

/** How a deferred tensor's values come from another tensor's. */
export type Recipe =
  /** row o (of the source's first axis) times scale[o], rounded to the dtype */
  | { readonly kind: "scaled-rows"; readonly source: Tensor; readonly scale: Float64Array }
  /** an OIHW kernel packed OIHW[ib]i[ob]o ([⌈O/ob⌉, ⌈I/ib⌉, KH, KW, ib, ob], the padding zero) */
  | { readonly kind: "packed-kernel"; readonly source: Tensor; readonly ib: number; readonly ob: number }

const RECIPE = Symbol("deferred.recipe")
const COMPUTED = Symbol("deferred.computed")

interface Deferred extends Tensor {
  readonly [RECIPE]: Recipe
  readonly [COMPUTED]: () => boolean
}

/** A tensor whose data `compute` makes on first read (once); `recipe` says how, for a transform that reads through it. */
export const deferred = (dtype: DType, shape: readonly number[], recipe: Recipe, compute: () => TypedArray): Tensor => {
  let data: TypedArray | undefined
  const t: Tensor = {
    dtype,
    shape: [...shape],
    get data(): TypedArray {
      if (data === undefined) {
        data = compute()
        if (data.length !== sizeOf(shape)) throw new Error(`deferred tensor: ${data.length} elements for shape [${shape.join(", ")}]`)
      }
      return data
    },
  }
  Object.defineProperty(t, RECIPE, { value: recipe })
  Object.defineProperty(t, COMPUTED, { value: () => data !== undefined })
  return t
}

/** A deferred tensor's recipe while its data has not been computed (after that, reading `data` costs nothing more); else undefined. */
export const pendingRecipe = (t: Tensor): Recipe | undefined => {
  const d = t as Partial<Deferred>
  return d[RECIPE] !== undefined && !d[COMPUTED]!() ? d[RECIPE] : undefined
}

/** Element j of a tensor's values, unrounded where a recipe computes it (the store into a dtype's array rounds it as the chain did). */
const elementAt = (t: Tensor, j: number): number => {
  const r = pendingRecipe(t)
  if (!r) return t.data[j]
  if (r.kind === "scaled-rows") return elementAt(r.source, j) * r.scale[Math.floor(j / (sizeOf(r.source.shape) / r.source.shape[0]))]
  const [O, I, KH, KW] = r.source.shape
  const [IB, ib, ob] = [Math.ceil(I / r.ib), r.ib, r.ob]
  // j = ((((oo·IB + ii)·KH + kh)·KW + kw)·ib + i)·ob + o
  const o = j % ob
  const i = Math.floor(j / ob) % ib
  const kw = Math.floor(j / (ob * ib)) % KW
  const kh = Math.floor(j / (ob * ib * KW)) % KH
  const ii = Math.floor(j / (ob * ib * KW * KH)) % IB
  const oo = Math.floor(j / (ob * ib * KW * KH * IB))
  const [oc, ic] = [oo * ob + o, ii * ib + i]
  return oc < O && ic < I ? elementAt(r.source, ((oc * I + ic) * KH + kh) * KW + kw) : 0
}

/**
 * Elements [start, start + out.length) of a tensor's values, stored into `out` (an array of its
 * dtype), without computing a deferred tensor whole: EliminateCommonSubexpr compares weights of one
 * shape a chunk at a time, and unequal weights differ in the first.
 */
export const readInto = (t: Tensor, start: number, out: TypedArray): TypedArray => {
  if (!pendingRecipe(t)) out.set(t.data.subarray(start, start + out.length) as never)
  else for (let k = 0; k < out.length; k++) out[k] = elementAt(t, start + k)
  return out
}

/**
 * `out` holding `w` with row o (`per` elements) scaled by s[o], rounded to `out`'s type. One pass,
 * in a function of its own: inside a rule's closure the loop was optimized on the stack with the
 * whole rule around it (a typed array's map with a callback costs ~10× a plain loop).
 */
export const scaleRows = <T extends TypedArray>(w: TypedArray, s: Float64Array, per: number, out: T): T => {
  for (let o = 0, j = 0; o < s.length; o++) for (let end = j + per, so = s[o]; j < end; j++) out[j] = w[j] * so
  return out
}

/** `w` (any shape; its first axis the rows) with row o scaled by s[o], deferred: computed when read, or read through by packKernel. */
export const scaledRows = (w: Tensor, s: Float64Array): Tensor =>
  deferred(w.dtype, w.shape, { kind: "scaled-rows", source: w, scale: s }, () => scaleRows(w.data, s, sizeOf(w.shape) / w.shape[0], allocate(w.dtype, sizeOf(w.shape))))

/**
 * Block (oo, ii) of an OIHW kernel packed OIHW[ib]i[ob]o — its KH·KW·ib·ob values, (kh, kw, i, o)
 * with o innermost — into `out` from `at`; filters and input channels past O and I zero. The values
 * read from `src` (the OIHW data), each row o times `scale[o]` where a scale is given (a pending
 * BatchNorm fold, read through), rounded into `out`'s type.
 */
export const packBlockInto = (
  src: TypedArray,
  scale: Float64Array | undefined,
  shape: readonly number[],
  ib: number,
  ob: number,
  oo: number,
  ii: number,
  out: TypedArray,
  at: number,
): void => {
  const [O, I, KH, KW] = shape
  // strides of o, i, kh in the OIHW source (kw's is 1)
  const sO = I * KH * KW
  const sI = KH * KW
  let k = at
  for (let kh = 0; kh < KH; kh++)
    for (let kw = 0; kw < KW; kw++) {
      const base = oo * ob * sO + ii * ib * sI + kh * KW + kw
      for (let i = 0; i < ib; i++)
        for (let o = 0, from = base + i * sI; o < ob; o++, from += sO, k++)
          if (oo * ob + o < O && ii * ib + i < I) out[k] = scale === undefined ? src[from] : src[from] * scale[oo * ob + o]
          else out[k] = 0
    }
}

/** The OIHW data and row scale packBlockInto reads for a kernel: a pending BatchNorm fold's source and scale, read through; else its data. */
export const kernelSource = (w: Tensor): { readonly src: TypedArray; readonly scale?: Float64Array } => {
  const r = pendingRecipe(w)
  return r?.kind === "scaled-rows" && r.source.shape.length === w.shape.length ? { src: r.source.data, scale: r.scale } : { src: w.data }
}
