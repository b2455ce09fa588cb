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
// (a scaled row's product rounded into float32, then copied by the pack). The artifact's constants
// are written straight from the recipes (writeInto), so a weight nothing reads during compilation
// is computed once, into constants.bin.
import { allocate, DTYPE_INFO, type DType, type TypedArray } from "./dtype.js"
import { sizeOf, type Tensor } from "./tensor.js"

/** How a deferred tensor's values come from another tensor's (what a transform may read through). */
export type Recipe =
  /** row o (of the source's first axis) times scale[o], rounded to the dtype */
  | { readonly kind: "scaled-rows"; readonly source: Tensor; readonly scale: Float64Array }
  /** an OIHW kernel packed OIHW[ib]i[ob]o ([⌈O/ob⌉, ⌈I/ib⌉, KH, KW, ib, ob], the padding zero) */
  | { readonly kind: "packed-kernel"; readonly source: Tensor; readonly ib: number; readonly ob: number }
  /** the Winograd kernel transform U = G g Gᵀ of a packed 3×3 kernel */
  | { readonly kind: "winograd"; readonly source: Tensor; readonly m: number }
  /** a 2-D Gemm weight [r, c] times alpha, transposed ([c, r]) or not, rounded to the dtype */
  | { readonly kind: "scaled-matrix"; readonly source: Tensor; readonly alpha: number; readonly transpose: boolean }
  /** a dense weight [K, N] in column panels [⌈N/b⌉, K, b] (the padding zero) */
  | { readonly kind: "dense-panels"; readonly source: Tensor; readonly b: number }
  /** the bytes of a model's file, read when asked (`stored`): any range of elements, or all of them in a buffer lent meanwhile (lendingSources) */
  | { readonly kind: "stored" }

/**
 * How a deferred tensor computes: a stretch of whole units into an array of its dtype (all of it
 * when read; a few units at a time when the artifact's constants are written through a small
 * buffer reused, writeRangeInto), or one element (unrounded; elementOf rounds it).
 */
export interface Compute {
  /** Elements [start, start + out.length) into `out`; start and out.length multiples of `unit`. */
  readonly fillRange: (start: number, out: TypedArray) => void
  /** The run of elements fillRange computes as one (a packed block; a Winograd row of planes). */
  readonly unit: number
  readonly element: (j: number) => number
}

const RECIPE = Symbol("deferred.recipe")
const PENDING = Symbol("deferred.pending")
const LEND = Symbol("deferred.lend")

interface Deferred extends Tensor {
  readonly [RECIPE]: Recipe
  /** its computation while `data` has not been read; afterwards undefined */
  readonly [PENDING]: () => Compute | undefined
}

/** A stored tensor (`stored`): its values may be lent an array for a while (lendingSources). */
interface Lendable extends Deferred {
  readonly [LEND]: (values: TypedArray | undefined) => void
}

/** A tensor whose data is computed on first read (once, by `compute.fillRange`); `recipe` says how, for a transform that reads through it. */
export const deferred = (dtype: DType, shape: readonly number[], recipe: Recipe, compute: Compute): Tensor => {
  let data: TypedArray | undefined
  const t: Tensor = {
    dtype,
    shape: [...shape],
    get data(): TypedArray {
      if (data === undefined) {
        const out = allocate(dtype, sizeOf(shape))
        compute.fillRange(0, out)
        data = out
      }
      return data
    },
  }
  Object.defineProperty(t, RECIPE, { value: recipe })
  Object.defineProperty(t, PENDING, { value: () => (data === undefined ? compute : undefined) })
  return t
}

const pending = (t: Tensor): Compute | undefined => (t as Partial<Deferred>)[PENDING]?.()

/** Reads a stored tensor's bytes from `byteOffset` on into `out` (all of out.length), from wherever they are kept (a model's file: the reader src/device gives). */
export type ByteSource = (byteOffset: number, out: Uint8Array) => void

/**
 * A tensor whose values are bytes kept elsewhere (a weight's raw data left in the model's file:
 * src/device/model-bytes.ts), read when asked: `data` reads them all once and keeps them; a range
 * (readInto, writeRangeInto) is read straight into the caller's array, so constants.bin copies an
 * unchanged weight through its reused buffer, and a weight is never held in fresh memory. The
 * bytes are the dtype's array's own (little-endian, as raw_data): a NaN keeps its payload.
 * While lendingSources holds it, `data` is an array lent to it (values read in), and it is not pending.
 */
export const stored = (dtype: DType, shape: readonly number[], read: ByteSource): Tensor => {
  const width = DTYPE_INFO[dtype].array.BYTES_PER_ELEMENT
  let data: TypedArray | undefined
  let lent: TypedArray | undefined
  const fillRange = (start: number, out: TypedArray): void => read(start * width, new Uint8Array(out.buffer, out.byteOffset, out.byteLength))
  const compute: Compute = {
    fillRange,
    unit: 1,
    element: (j) => {
      const one = allocate(dtype, 1)
      fillRange(j, one)
      return one[0]
    },
  }
  const t: Tensor = {
    dtype,
    shape: [...shape],
    get data(): TypedArray {
      if (lent !== undefined) return lent
      if (data === undefined) {
        const out = allocate(dtype, sizeOf(shape))
        fillRange(0, out)
        data = out
      }
      return data
    },
  }
  Object.defineProperty(t, RECIPE, { value: { kind: "stored" } satisfies Recipe })
  Object.defineProperty(t, PENDING, { value: () => (data === undefined && lent === undefined ? compute : undefined) })
  Object.defineProperty(t, LEND, { value: (values: TypedArray | undefined) => void (lent = values) })
  return t
}

/** The pending stored tensors a pending tensor's recipes read, down its chain (a stored one itself included). */
export const storedSources = (t: Tensor): Tensor[] => {
  const r = pendingRecipe(t)
  return r === undefined ? [] : r.kind === "stored" ? [t] : storedSources(r.source)
}

/** The bytes lendingSources needs to hold every stored source of `t` at once. */
export const sourceBytes = (t: Tensor): number => storedSources(t).reduce((n, s) => n + sizeOf(s.shape) * DTYPE_INFO[s.dtype].array.BYTES_PER_ELEMENT, 0)

/**
 * Runs `f` with every stored source of `t` (storedSources) read whole into `scratch` (at least
 * sourceBytes(t) of it, reused call after call), so a deferred weight computed unit by unit reads
 * its source from memory already touched, each source read once; afterwards they are pending again
 * and the scratch is the caller's. The values are the same, so nothing computed differs.
 */
export const lendingSources = <A>(t: Tensor, scratch: ArrayBuffer, f: () => A): A => {
  const sources = storedSources(t) as Lendable[]
  try {
    let at = 0
    for (const s of sources) {
      const { array } = DTYPE_INFO[s.dtype]
      at = Math.ceil(at / array.BYTES_PER_ELEMENT) * array.BYTES_PER_ELEMENT
      const values = new array(scratch, at, sizeOf(s.shape)) as TypedArray
      pending(s)!.fillRange(0, values)
      s[LEND](values)
      at += values.byteLength
    }
    return f()
  } finally {
    for (const s of sources) s[LEND](undefined)
  }
}

/** A deferred tensor's recipe while its data has not been computed (after that, reading `data` costs nothing more); else undefined. */
export const pendingRecipe = (t: Tensor): Recipe | undefined => (pending(t) ? (t as Deferred)[RECIPE] : undefined)

/** One element of each dtype's array: a value rounded as that array stores it. */
const ROUND = new Map<DType, TypedArray>()
const rounded = (dtype: DType, v: number): number => {
  const one = ROUND.get(dtype) ?? allocate(dtype, 1)
  ROUND.set(dtype, one)
  one[0] = v
  return one[0]
}

/** Element j of a tensor's values as its array stores it, without computing a deferred tensor whole. */
export const elementOf = (t: Tensor, j: number): number => {
  const c = pending(t)
  return c ? rounded(t.dtype, c.element(j)) : t.data[j]
}

/**
 * Elements [start, start + out.length) of a tensor's values, stored into `out` (an array of its
 * dtype), without computing a deferred tensor whole: EliminateCommonSubexpr compares weights of one
 * shape a chunk at a time, and unequal weights differ in the first.
 */
export const readInto = (t: Tensor, start: number, out: TypedArray): TypedArray => {
  const c = pending(t)
  if (!c) out.set(t.data.subarray(start, start + out.length) as never)
  else if (c.unit === 1) c.fillRange(start, out)
  else for (let k = 0; k < out.length; k++) out[k] = c.element(start + k)
  return out
}

/** All of a tensor's values stored into `out` (an array of its dtype and size): a deferred one computed straight into it, never kept. */
export const writeInto = (t: Tensor, out: TypedArray): void => writeRangeInto(t, 0, out)

/** The run of elements writeRangeInto computes as one: a pending tensor's unit; 1 for any other. */
export const rangeUnit = (t: Tensor): number => pending(t)?.unit ?? 1

/**
 * Elements [start, start + out.length) of a tensor's values stored into `out` (an array of its
 * dtype), start and out.length multiples of rangeUnit(t): a deferred one computed straight into it,
 * never kept. The artifact's constants are written this way, a few units at a time through one
 * small buffer, so their bytes never sit in fresh memory (on a VM where a first touch of a page
 * costs ~15 µs, ResNet-50's 159 MB cost 0.6 s in page faults written whole).
 */
export const writeRangeInto = (t: Tensor, start: number, out: TypedArray): void => {
  const c = pending(t)
  if (c) c.fillRange(start, out)
  else out.set(t.data.subarray(start, start + out.length) as never)
}

/**
 * `out` holding elements [start, start + out.length) of `w` with row o (`per` elements) scaled by
 * s[o], rounded to `out`'s type; `w` holds elements from `wStart` on (`out` itself may be `w`, those
 * elements read into it: each is read before it is written). One pass, in a function of its own: inside a rule's closure the
 * loop was optimized on the stack with the whole rule around it (a typed array's map with a
 * callback costs ~10× a plain loop).
 */
export const scaleRows = <T extends TypedArray>(w: TypedArray, s: Float64Array, per: number, start: number, out: T, wStart = 0): T => {
  const end = start + out.length
  for (let o = Math.floor(start / per), j = start; j < end; o++) for (let stop = Math.min(end, (o + 1) * per), so = s[o]; j < stop; j++) out[j - start] = w[j - wStart] * so
  return out
}

/** `w` (any shape; its first axis the rows) with row o scaled by s[o], deferred: computed when read, or read through by packKernel. */
export const scaledRows = (w: Tensor, s: Float64Array): Tensor => {
  const per = sizeOf(w.shape) / w.shape[0]
  return deferred(w.dtype, w.shape, { kind: "scaled-rows", source: w, scale: s }, {
    // a pending source (a weight still in the model's file) read by the range, not whole
    fillRange: (start, out) => void (pending(w) ? scaleRows(readInto(w, start, out), s, per, start, out, start) : scaleRows(w.data, s, per, start, out)),
    unit: 1,
    element: (j) => elementOf(w, j) * s[Math.floor(j / per)],
  })
}

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
  const taps = KH * KW
  const L = ib * ob
  // the filters and input channels of the block inside the kernel; past them the block is zero
  const oEnd = Math.min(ob, O - oo * ob)
  const iEnd = Math.min(ib, I - ii * ib)
  if (oEnd < ob || iEnd < ib) out.fill(0, at, at + taps * L)
  // In the source's order: filter o's taps of input channels ii·ib… are one contiguous run of
  // ib·KH·KW values, each stored into the block (kh, kw, i, o) at (kh·KW + kw)·L + i·ob + o. Read o
  // innermost (a stride of I·KH·KW values), ResNet-50's weights cost ~0.45 s of cache misses.
  for (let o = 0; o < oEnd; o++) {
    const oc = oo * ob + o
    const row = (oc * I + ii * ib) * taps
    if (scale === undefined) {
      if (taps === 1) for (let i = 0, k = at + o; i < iEnd; i++, k += ob) out[k] = src[row + i]
      else for (let i = 0; i < iEnd; i++) for (let t = 0, k = at + i * ob + o, from = row + i * taps; t < taps; t++, k += L) out[k] = src[from + t]
    } else {
      const so = scale[oc]
      if (taps === 1) for (let i = 0, k = at + o; i < iEnd; i++, k += ob) out[k] = src[row + i] * so
      else for (let i = 0; i < iEnd; i++) for (let t = 0, k = at + i * ob + o, from = row + i * taps; t < taps; t++, k += L) out[k] = src[from + t] * so
    }
  }
}

/** The OIHW data and row scale packBlockInto reads for a kernel: a pending BatchNorm fold's source and scale, read through; else its data. */
export const kernelSource = (w: Tensor): { readonly src: TypedArray; readonly scale?: Float64Array } => {
  const r = pendingRecipe(w)
  return r?.kind === "scaled-rows" && r.source.shape.length === w.shape.length ? { src: r.source.data, scale: r.scale } : { src: w.data }
}

/**
 * A 2-D weight [r, c] times alpha, transposed to [c, r] or not (Gemm's B folded to its canonical
 * form), deferred: computed when read, or read through by packDense. Rows of the result are its
 * units; transposed, they are computed in tiles of 32 × 32 (reads down a column of the source,
 * one at a time, were a cache miss each: ResNet-50's 2048 × 1000 classifier).
 */
export const scaledMatrix = (w: Tensor, alpha: number, transpose: boolean): Tensor => {
  const [r, c] = w.shape
  const T = 32
  return deferred(w.dtype, transpose ? [c, r] : [r, c], { kind: "scaled-matrix", source: w, alpha, transpose }, {
    // transposed: out[i, j] = w[j, i] · alpha at (i - i0)·r + j, rows i from start / r
    fillRange: (start, out) => {
      // not transposed, a pending source (a weight still in the model's file) is read by the range
      const [src, from] = !transpose && pending(w) ? [readInto(w, start, out), 0] : [w.data, start]
      if (!transpose) for (let k = 0; k < out.length; k++) out[k] = src[from + k] * alpha
      else
        for (let i0 = start / r, iEnd = i0 + out.length / r, ib = i0; ib < iEnd; ib += T)
          for (let jb = 0; jb < r; jb += T)
            for (let i = ib, iStop = Math.min(iEnd, ib + T); i < iStop; i++)
              for (let j = jb, jStop = Math.min(r, jb + T); j < jStop; j++) out[(i - i0) * r + j] = src[j * c + i] * alpha
    },
    unit: transpose ? r : 1,
    element: (k) => elementOf(w, transpose ? (k % r) * c + Math.floor(k / r) : k) * alpha,
  })
}
