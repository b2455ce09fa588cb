// ConvTranspose: the gradient of Conv with respect to its input. Input pixel i of channel c adds
// x·w[c, m, k] to output pixel i·stride − padBegin + k·dilation of filter m. Float32 storage runs
// it as a product (columns = Wᵀ·X by `gemmNT`) followed by col2im; other types scatter directly.
import { A, attrs } from "../attrs.js"
import { isFloat } from "../dtype.js"
import { check, defineOp, type AnyOpDef, type Dim } from "../op.js"
import { tensor, type Tensor } from "../tensor.js"
import { arity, inputType, req } from "./util.js"
import { as3d, kernelOf, padsOf, spatialRank, stepsOf, windowAttrs, type Window, type WindowAttrs } from "./nn-common.js"
import type { ConvSizes } from "./nn-conv-kernel.js"
import { gemmNT, transposeInto } from "./nn-gemm.js"

const convTransposeAttrs = attrs({
  ...windowAttrs,
  group: A.int(1),
  output_padding: A.optInts(),
  output_shape: A.optInts(),
})
type ConvTransposeAttrs = WindowAttrs & {
  readonly group: number
  readonly output_padding: readonly number[] | undefined
  readonly output_shape: readonly number[] | undefined
}

/** Output size and pads of one spatial dim, as ONNX's reference derives them. */
const transposeDim = (
  a: ConvTransposeAttrs,
  i: number,
  rank: number,
  input: number,
  kernel: number,
): { out: number; begin: number; end: number } => {
  const { strides, dilations } = stepsOf(a, rank)
  const s = strides[i]
  const span = (kernel - 1) * dilations[i] + 1
  const outPad = a.output_padding && a.output_padding.length > 0 ? a.output_padding[i] ?? 0 : 0
  const full = s * (input - 1) + outPad + span
  const given = a.output_shape && a.output_shape.length > 0 ? a.output_shape.slice(-rank)[i] : undefined
  if (a.auto_pad === "SAME_UPPER" || a.auto_pad === "SAME_LOWER") {
    const out = given ?? input * s
    const total = full - out
    const half = Math.floor(total / 2)
    const begin = a.auto_pad === "SAME_UPPER" ? half : total - half
    return { out, begin, end: total - begin }
  }
  const pads = padsOf(a.auto_pad === "VALID" ? undefined : a.pads, rank)
  const out = given ?? full - pads.begin[i] - pads.end[i]
  return { out, begin: pads.begin[i], end: pads.end[i] }
}

const transposeWindow = (input: readonly number[], kernel: readonly number[], a: ConvTransposeAttrs): Window => {
  const rank = input.length
  const { strides, dilations } = stepsOf(a, rank)
  const dims = input.map((d, i) => transposeDim(a, i, rank, d, kernel[i]))
  check(dims.every((d) => d.out >= 0), () => `output shape [${dims.map((d) => d.out).join(", ")}] is negative`)
  return {
    input,
    kernel,
    strides,
    dilations,
    padBegin: dims.map((d) => d.begin),
    padEnd: dims.map((d) => d.end),
    output: dims.map((d) => d.out),
  }
}

const prod = (v: readonly number[]): number => v.reduce((x, y) => x * y, 1)

/** y [batch, filters, ...out] from x [batch, channels, ...in], w [channels, filters/group, ...k]; N-d, float64. */
export const convTransposeNaive = (
  x: ArrayLike<number>,
  w: ArrayLike<number>,
  bias: ArrayLike<number> | undefined,
  s: ConvSizes,
  win: Window,
): Float64Array => {
  const rank = win.input.length
  const inSize = prod(win.input)
  const outSize = prod(win.output)
  const kSize = prod(win.kernel)
  const cg = s.channels / s.group
  const mg = s.filters / s.group
  const y = new Float64Array(s.batch * s.filters * outSize)
  for (let n = 0; n < s.batch; n++)
    for (let m = 0; m < s.filters; m++) y.fill(bias ? bias[m] : 0, (n * s.filters + m) * outSize, (n * s.filters + m + 1) * outSize)
  const ic = new Array<number>(rank).fill(0)
  for (let i = 0; i < inSize; i++) {
    for (let d = rank - 1, r = i; d >= 0; d--) {
      ic[d] = r % win.input[d]
      r = Math.floor(r / win.input[d])
    }
    for (let kk = 0; kk < kSize; kk++) {
      let o = 0
      let inside = true
      for (let d = 0, r = kk, div = kSize; d < rank; d++) {
        div /= win.kernel[d]
        const k = Math.floor(r / div) % win.kernel[d]
        const c = ic[d] * win.strides[d] - win.padBegin[d] + k * win.dilations[d]
        if (c < 0 || c >= win.output[d]) {
          inside = false
          break
        }
        o = o * win.output[d] + c
      }
      if (!inside) continue
      for (let n = 0; n < s.batch; n++)
        for (let ch = 0; ch < s.channels; ch++) {
          const g = Math.floor(ch / cg)
          const xv = x[(n * s.channels + ch) * inSize + i]
          if (xv === 0) continue
          for (let mm = 0; mm < mg; mm++) {
            const m = g * mg + mm
            y[(n * s.filters + m) * outSize + o] += xv * w[(ch * mg + mm) * kSize + kk]
          }
        }
    }
  }
  return y
}

/** The float32 path: per image and group, columns = W_gᵀ · X_g, then col2im into the output. */
const convTransposeFast = (x: Float32Array, w: Float32Array, bias: ArrayLike<number> | undefined, s: ConvSizes, window: Window): Float32Array => {
  const win = as3d(window)
  const [D, H, W] = win.input
  const [KD, KH, KW] = win.kernel
  const [OD, OH, OW] = win.output
  const [sd, sh, sw] = win.strides
  const [dd, dh, dw] = win.dilations
  const [pd, ph, pw] = win.padBegin
  const inSize = D * H * W
  const outSize = OD * OH * OW
  const kSize = KD * KH * KW
  const cg = s.channels / s.group
  const mg = s.filters / s.group
  const rows = mg * kSize
  const y = new Float64Array(s.batch * s.filters * outSize)
  const wt = new Float32Array(rows * cg)
  const xt = new Float32Array(inSize * cg)
  const col = new Float32Array(rows * inSize)
  for (let g = 0; g < s.group; g++) {
    transposeInto(w, g * cg * rows, cg, rows, rows, wt)
    for (let n = 0; n < s.batch; n++) {
      transposeInto(x, (n * s.channels + g * cg) * inSize, cg, inSize, inSize, xt)
      gemmNT(rows, inSize, cg, wt, 0, cg, xt, 0, cg, col, 0, inSize)
      for (let mm = 0; mm < mg; mm++) {
        const m = g * mg + mm
        const yOff = (n * s.filters + m) * outSize
        let r = mm * kSize * inSize
        for (let kd = 0; kd < KD; kd++)
          for (let kh = 0; kh < KH; kh++)
            for (let kw = 0; kw < KW; kw++, r += inSize) {
              let q = r
              for (let id = 0; id < D; id++) {
                const od = id * sd - pd + kd * dd
                if (od < 0 || od >= OD) {
                  q += H * W
                  continue
                }
                for (let ih = 0; ih < H; ih++) {
                  const oh = ih * sh - ph + kh * dh
                  if (oh < 0 || oh >= OH) {
                    q += W
                    continue
                  }
                  const row = yOff + (od * OH + oh) * OW
                  for (let iw = 0; iw < W; iw++, q++) {
                    const ow = iw * sw - pw + kw * dw
                    if (ow >= 0 && ow < OW) y[row + ow] += col[q]
                  }
                }
              }
            }
        if (bias) {
          const b = bias[m]
          for (let o = 0; o < outSize; o++) y[yOff + o] += b
        }
      }
    }
  }
  return Float32Array.from(y)
}

const setup = (x: Tensor, w: Tensor, a: ConvTransposeAttrs): { sizes: ConvSizes; win: Window } => {
  const rank = spatialRank(x)
  check(w.shape.length === rank + 2, () => `weight rank ${w.shape.length} does not match input rank ${x.shape.length}`)
  const [batch, channels] = x.shape
  check(w.shape[0] === channels, () => `weight has ${w.shape[0]} input channels, X has ${channels}`)
  const group = a.group
  check(group >= 1 && channels % group === 0, () => `group ${group} must divide input channels ${channels}`)
  const kernel = kernelOf(a, w.shape)
  check(kernel.length === rank && kernel.every((k, i) => k === w.shape[i + 2]), () =>
    `kernel_shape [${kernel.join(", ")}] does not match the weight's [${w.shape.slice(2).join(", ")}]`)
  return { sizes: { batch, channels, filters: w.shape[1] * group, group }, win: transposeWindow(x.shape.slice(2), kernel, a) }
}

const ConvTranspose = defineOp({
  attrs: convTransposeAttrs,
  inputs: arity.range(2, 3),
  outputs: arity.one,
  kind: "out-elementwise-fusable",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const w = inputType(ctx, 1)
    check(isFloat(x.dtype) && w.dtype === x.dtype, () => `ConvTranspose needs float inputs of one type, got ${x.dtype} and ${w.dtype}`)
    const rank = spatialRank(x)
    check(w.shape.length === rank + 2, () => `weight rank ${w.shape.length} does not match input rank ${x.shape.length}`)
    const kernel = kernelOf(ctx.attrs, w.shape)
    const filters: Dim = typeof w.shape[1] === "number" ? w.shape[1] * ctx.attrs.group : `${ctx.node}.out0.d1`
    const spatial = x.shape.slice(2).map((d, i) =>
      typeof d === "number" ? transposeDim(ctx.attrs, i, rank, d, kernel[i]).out : `${ctx.node}.out0.d${i + 2}`)
    return [{ dtype: x.dtype, shape: [x.shape[0], filters, ...spatial] }]
  },
  kernel: ({ inputs, attrs: a }) => {
    const x = req(inputs, 0, "X")
    const w = req(inputs, 1, "W")
    const b = inputs[2]
    const { sizes, win } = setup(x, w, a)
    if (b) check(b.data.length === sizes.filters, () => `bias has ${b.data.length} values for ${sizes.filters} filters`)
    const bias = b ? (b.data as ArrayLike<number>) : undefined
    const shape = [sizes.batch, sizes.filters, ...win.output]
    if (x.data instanceof Float32Array && w.data instanceof Float32Array && win.input.length <= 3)
      return [tensor(x.dtype, shape, convTransposeFast(x.data, w.data, bias, sizes, win))]
    return [tensor(x.dtype, shape, convTransposeNaive(x.data, w.data, bias, sizes, win))]
  },
})

export const convTransposeOps = { ConvTranspose } satisfies Record<string, AnyOpDef>
