// Pooling: MaxPool (with its optional Indices output), AveragePool, LpPool, their Global forms
// and MaxUnpool. Windows over 1-3 spatial dims run as 3-D loop nests (leading dims of size 1).
import { A, attrs } from "../attrs.js"
import { allocate, isFloat, type DType } from "../dtype.js"
import { check, defineOp, fail, unsupported, type AnyOpDef, type Dim, type InferCtx, type ValueType } from "../op.js"
import { sizeOf, stridesOf, tensor, toNumbers, type Tensor } from "../tensor.js"
import { arity, inputType, req } from "./util.js"
import { as3d, padsOf, spatialRank, stepsOf, windowAttrs, windowDims, windowOf, type Window, type WindowAttrs } from "./nn-common.js"

type PoolMode = "max" | "avg" | "lp"

interface PoolOptions {
  readonly mode: PoolMode
  readonly countIncludePad: boolean
  readonly p: number
  /** MaxPool's Indices: flat input index of each maximum (column-major spatial when storage_order is 1). */
  readonly indices?: Float64Array
  readonly columnMajor: boolean
}

/**
 * Per output coordinate of one dim: the kernel taps [lo, hi) that land inside the input, and how
 * many land inside the padded input (AveragePool's count_include_pad divisor).
 */
const taps = (out: number, input: number, k: number, s: number, d: number, pb: number, pe: number) => {
  const lo = new Int32Array(out)
  const hi = new Int32Array(out)
  const padded = new Int32Array(out)
  for (let o = 0; o < out; o++) {
    const start = o * s - pb
    lo[o] = Math.min(k, Math.max(0, Math.ceil(-start / d)))
    hi[o] = Math.max(lo[o], Math.min(k, Math.ceil((input - start) / d)))
    padded[o] = Math.max(0, Math.min(k, Math.ceil((input + pe - start) / d)))
  }
  return { lo, hi, padded }
}

interface Taps {
  readonly lo: Int32Array
  readonly hi: Int32Array
  readonly padded: Int32Array
}

/** Max over each window (NaN propagates); `at` records the flat in-plane index of the first maximum. */
const maxPool = (x: ArrayLike<number>, planes: number, win: Window, y: { [i: number]: number }, t: readonly Taps[], at: Int32Array | undefined): void => {
  const [D, H, W] = win.input
  const [OD, OH, OW] = win.output
  const [sd, sh, sw] = win.strides
  const [dd, dh, dw] = win.dilations
  const [pd, ph, pw] = win.padBegin
  const [td, th, tw] = t
  const inSize = D * H * W
  let out = 0
  for (let c = 0; c < planes; c++) {
    const base = c * inSize
    for (let od = 0; od < OD; od++) {
      const d0 = od * sd - pd
      const dLo = td.lo[od]
      const dHi = td.hi[od]
      for (let oh = 0; oh < OH; oh++) {
        const h0 = oh * sh - ph
        const hLo = th.lo[oh]
        const hHi = th.hi[oh]
        for (let ow = 0; ow < OW; ow++, out++) {
          const w0 = ow * sw - pw
          const wLo = tw.lo[ow]
          const wHi = tw.hi[ow]
          let best = 0
          let arg = -1
          for (let kd = dLo; kd < dHi; kd++)
            for (let kh = hLo; kh < hHi; kh++) {
              const row = ((d0 + kd * dd) * H + h0 + kh * dh) * W + w0
              for (let kw = wLo; kw < wHi; kw++) {
                const v = x[base + row + kw * dw]
                // a NaN anywhere in the window is the maximum (NumPy's max, the onnx reference, the
                // compiled targets and GlobalMaxPool), not only a NaN that comes first; `at` its first
                if (arg < 0 || v > best || (v !== v && best === best)) {
                  best = v
                  arg = row + kw * dw
                }
              }
            }
          y[out] = arg < 0 ? 0 : best
          if (at) at[out] = arg
        }
      }
    }
  }
}

/** Sum (or Σ|x|^p) over each window, then the average (or the p-th root). */
const sumPool = (x: ArrayLike<number>, planes: number, win: Window, y: { [i: number]: number }, t: readonly Taps[], o: PoolOptions): void => {
  const [D, H, W] = win.input
  const [OD, OH, OW] = win.output
  const [sd, sh, sw] = win.strides
  const [dd, dh, dw] = win.dilations
  const [pd, ph, pw] = win.padBegin
  const [td, th, tw] = t
  const inSize = D * H * W
  const lp = o.mode === "lp"
  const p = o.p
  const includePad = o.countIncludePad
  let out = 0
  for (let c = 0; c < planes; c++) {
    const base = c * inSize
    for (let od = 0; od < OD; od++) {
      const d0 = od * sd - pd
      const dLo = td.lo[od]
      const dHi = td.hi[od]
      for (let oh = 0; oh < OH; oh++) {
        const h0 = oh * sh - ph
        const hLo = th.lo[oh]
        const hHi = th.hi[oh]
        for (let ow = 0; ow < OW; ow++, out++) {
          const w0 = ow * sw - pw
          const wLo = tw.lo[ow]
          const wHi = tw.hi[ow]
          let acc = 0
          for (let kd = dLo; kd < dHi; kd++)
            for (let kh = hLo; kh < hHi; kh++) {
              const row = base + ((d0 + kd * dd) * H + h0 + kh * dh) * W + w0
              if (lp) for (let kw = wLo; kw < wHi; kw++) acc += Math.pow(Math.abs(x[row + kw * dw]), p)
              else for (let kw = wLo; kw < wHi; kw++) acc += x[row + kw * dw]
            }
          if (lp) y[out] = Math.pow(acc, 1 / p)
          else {
            const div = includePad ? td.padded[od] * th.padded[oh] * tw.padded[ow] : (dHi - dLo) * (hHi - hLo) * (wHi - wLo)
            y[out] = div > 0 ? acc / div : NaN
          }
        }
      }
    }
  }
}

/** Pools every (batch, channel) plane of `x` over `window` into `y`. */
const pool = (x: ArrayLike<number>, planes: number, window: Window, y: { [i: number]: number }, o: PoolOptions): void => {
  const win = as3d(window)
  const t = [0, 1, 2].map((d) =>
    taps(win.output[d], win.input[d], win.kernel[d], win.strides[d], win.dilations[d], win.padBegin[d], win.padEnd[d]))
  if (o.mode !== "max") return sumPool(x, planes, win, y, t, o)
  const at = o.indices ? new Int32Array(o.indices.length) : undefined
  maxPool(x, planes, win, y, t, at)
  if (!at || !o.indices) return
  // flat input indices: plane offset plus the in-plane index, column-major when storage_order is 1
  const [D, H, W] = win.input
  const per = at.length / Math.max(planes, 1)
  for (let i = 0; i < at.length; i++) {
    let a = at[i]
    if (a < 0) {
      o.indices[i] = -1
      continue
    }
    if (o.columnMajor) {
      const iw = a % W
      const ih = ((a - iw) / W) % H
      const id = (a - iw - ih * W) / (H * W)
      a = id + ih * D + iw * D * H
    }
    o.indices[i] = Math.floor(i / per) * D * H * W + a
  }
}

const poolAttrs = {
  ...windowAttrs,
  ceil_mode: A.int(0),
}
type PoolAttrs = WindowAttrs & { readonly ceil_mode: number }

const kernelAttr = (a: WindowAttrs, rank: number): number[] => {
  const k = a.kernel_shape
  if (!k || k.length === 0) return fail("kernel_shape is required")
  check(k.length === rank, () => `kernel_shape has ${k.length} dims for ${rank} spatial dims`)
  return [...k]
}

const inferPool = <T extends PoolAttrs>(ctx: InferCtx<T>, outputs: number): ValueType[] => {
  const x = inputType(ctx, 0)
  const rank = spatialRank(x)
  const shape: Dim[] = [x.shape[0], x.shape[1], ...windowDims(ctx, x.shape.slice(2), kernelAttr(ctx.attrs, rank), ctx.attrs, ctx.attrs.ceil_mode !== 0)]
  const out: ValueType[] = [{ dtype: x.dtype, shape }]
  if (outputs > 1) out.push({ dtype: "int64", shape })
  return out
}

const runPool = (x: Tensor, a: PoolAttrs, o: Omit<PoolOptions, "indices">, withIndices: boolean): Tensor[] => {
  const rank = spatialRank(x)
  if (rank > 3) return unsupported(`pooling over ${rank} spatial dims is not supported (at most 3)`)
  const win = windowOf(x.shape.slice(2), kernelAttr(a, rank), a, a.ceil_mode !== 0)
  const shape = [x.shape[0], x.shape[1], ...win.output]
  const n = sizeOf(shape)
  const y = allocate(x.dtype, n)
  const indices = withIndices ? new Float64Array(n) : undefined
  pool(x.data, x.shape[0] * x.shape[1], win, y, { ...o, indices })
  const out = [tensor(x.dtype, shape, y)]
  if (indices) out.push(tensor("int64", shape, indices))
  return out
}

const requireFloat = (d: DType, op: string) => check(isFloat(d), () => `${op} input must be a float tensor, got ${d}`)

const MaxPool = defineOp({
  attrs: attrs({ ...poolAttrs, storage_order: A.int(0) }),
  inputs: arity.one,
  outputs: arity.range(1, 2),
  kind: "out-elementwise-fusable",
  infer: (ctx) => inferPool(ctx, ctx.outputs),
  kernel: ({ inputs, attrs: a, outputs }) => {
    const x = req(inputs, 0, "X")
    check(x.dtype !== "bool", "MaxPool does not take bool")
    return runPool(x, a, { mode: "max", countIncludePad: false, p: 1, columnMajor: a.storage_order === 1 }, outputs > 1)
  },
})

const AveragePool = defineOp({
  attrs: attrs({ ...poolAttrs, count_include_pad: A.int(0) }),
  inputs: arity.one,
  outputs: arity.one,
  kind: "out-elementwise-fusable",
  infer: (ctx) => {
    requireFloat(inputType(ctx, 0).dtype, "AveragePool")
    return inferPool(ctx, 1)
  },
  kernel: ({ inputs, attrs: a }) =>
    runPool(req(inputs, 0, "X"), a, { mode: "avg", countIncludePad: a.count_include_pad !== 0, p: 1, columnMajor: false }, false),
})

const LpPool = defineOp({
  attrs: attrs({ ...poolAttrs, p: A.float(2) }),
  inputs: arity.one,
  outputs: arity.one,
  kind: "out-elementwise-fusable",
  infer: (ctx) => {
    requireFloat(inputType(ctx, 0).dtype, "LpPool")
    return inferPool(ctx, 1)
  },
  kernel: ({ inputs, attrs: a }) => runPool(req(inputs, 0, "X"), a, { mode: "lp", countIncludePad: false, p: a.p, columnMajor: false }, false),
})

/** Global pools: one value per (batch, channel) plane, spatial dims kept as 1. */
const globalPool = (mode: PoolMode, op: string) =>
  defineOp({
    attrs: attrs({ p: A.float(2) }),
    inputs: arity.one,
    outputs: arity.one,
    kind: "out-elementwise-fusable",
    infer: (ctx) => {
      const x = inputType(ctx, 0)
      if (mode !== "max") requireFloat(x.dtype, op)
      const rank = spatialRank(x)
      return [{ dtype: x.dtype, shape: [x.shape[0], x.shape[1], ...new Array<number>(rank).fill(1)] }]
    },
    kernel: ({ inputs, attrs: a }) => {
      const x = req(inputs, 0, "X")
      const rank = spatialRank(x)
      const planes = x.shape[0] * x.shape[1]
      const size = sizeOf(x.shape.slice(2))
      const y = allocate(x.dtype, planes)
      const d = x.data
      for (let c = 0; c < planes; c++) {
        const base = c * size
        let acc = mode === "max" ? -Infinity : 0
        if (mode === "max") {
          for (let i = 0; i < size; i++) {
            const v = d[base + i]
            if (v > acc || Number.isNaN(v)) acc = v
            if (Number.isNaN(v)) break
          }
        } else if (mode === "avg") {
          for (let i = 0; i < size; i++) acc += d[base + i]
          acc /= size
        } else {
          for (let i = 0; i < size; i++) acc += Math.pow(Math.abs(d[base + i]), a.p)
          acc = Math.pow(acc, 1 / a.p)
        }
        y[c] = acc
      }
      return [tensor(x.dtype, [x.shape[0], x.shape[1], ...new Array<number>(rank).fill(1)], y)]
    },
  })

/** MaxUnpool's default output dims: (in − 1)·stride + kernel − pads. */
const unpoolDims = (a: WindowAttrs, input: readonly Dim[], kernel: readonly number[], node: string): Dim[] => {
  const rank = input.length
  const { strides } = stepsOf(a, rank)
  const { begin, end } = padsOf(a.pads, rank)
  return input.map((d, i) => (typeof d === "number" ? (d - 1) * strides[i] + kernel[i] - begin[i] - end[i] : `${node}.out0.d${i + 2}`))
}

const MaxUnpool = defineOp({
  attrs: attrs(windowAttrs),
  inputs: arity.range(2, 3),
  outputs: arity.one,
  kind: "opaque",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const rank = spatialRank(x)
    const kernel = kernelAttr(ctx.attrs, rank)
    if (ctx.inputs[2]) {
      const v = ctx.values[2]
      if (v) return [{ dtype: x.dtype, shape: toNumbers(v) }]
      return [{ dtype: x.dtype, shape: x.shape.map((_, i) => `${ctx.node}.out0.d${i}`) }]
    }
    return [{ dtype: x.dtype, shape: [x.shape[0], x.shape[1], ...unpoolDims(ctx.attrs, x.shape.slice(2), kernel, ctx.node)] }]
  },
  kernel: ({ inputs, attrs: a, node }) => {
    const x = req(inputs, 0, "X")
    const idx = req(inputs, 1, "I")
    check(idx.data.length === x.data.length, "I must have the shape of X")
    const rank = spatialRank(x)
    const kernel = kernelAttr(a, rank)
    // scatter into the default shape, then place that at the origin of output_shape when given
    const inferred = [x.shape[0], x.shape[1], ...(unpoolDims(a, x.shape.slice(2), kernel, node) as number[])]
    const y0 = allocate(x.dtype, sizeOf(inferred))
    const I = idx.data as ArrayLike<number>
    for (let j = 0; j < I.length; j++) {
      const t = I[j]
      check(t >= 0 && t < y0.length, () => `index ${t} out of range for output of ${y0.length} elements`)
      y0[t] = x.data[j]
    }
    if (!inputs[2]) return [tensor(x.dtype, inferred, y0)]
    const shape = toNumbers(inputs[2])
    check(shape.length === x.shape.length && shape.every((d, i) => d >= inferred[i]), () =>
      `output_shape [${shape.join(", ")}] must have rank ${x.shape.length} and hold [${inferred.join(", ")}]`)
    const y = allocate(x.dtype, sizeOf(shape))
    const inner = inferred[inferred.length - 1]
    const os = stridesOf(shape)
    const counter = new Array<number>(inferred.length).fill(0)
    for (let src = 0; src < y0.length; src += inner) {
      let dst = 0
      for (let d = 0; d < inferred.length; d++) dst += counter[d] * os[d]
      for (let j = 0; j < inner; j++) y[dst + j] = y0[src + j]
      for (let d = inferred.length - 2; d >= 0; d--) {
        if (++counter[d] < inferred[d]) break
        counter[d] = 0
      }
    }
    return [tensor(x.dtype, shape, y)]
  },
})

export const poolOps = {
  MaxPool,
  AveragePool,
  LpPool,
  GlobalMaxPool: globalPool("max", "GlobalMaxPool"),
  GlobalAveragePool: globalPool("avg", "GlobalAveragePool"),
  GlobalLpPool: globalPool("lp", "GlobalLpPool"),
  MaxUnpool,
} satisfies Record<string, AnyOpDef>
