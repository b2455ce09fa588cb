// Convolution kernels. `convFast` is the float32 path (float16/bfloat16 share its storage):
// im2col over blocks of output pixels, each block a product with the weights by `gemmNT`;
// pointwise (1×1, stride 1, unpadded) convolutions skip im2col (a transpose suffices), and
// one-input-channel-per-group (depthwise) convolutions run as a direct loop. `convNaive` is the
// plain N-d definition over any numbers, accumulating in float64: float64 and integer inputs,
// more than three spatial dims, and the oracle of the tests.
import { as3d, type Window } from "./nn-common.js"
import { gemmNT, transposeInto } from "./nn-gemm.js"

/** Sizes of a grouped convolution: x [batch, channels, ...], w [filters, channels/group, ...]. */
export interface ConvSizes {
  readonly batch: number
  readonly channels: number
  readonly filters: number
  readonly group: number
}

const prod = (v: readonly number[]): number => v.reduce((a, b) => a * b, 1)

/** y [batch, filters, ...win.output] = conv(x, w) + bias, N-d, in float64. */
export const convNaive = (
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
  const oc = new Array<number>(rank).fill(0)
  const kc = new Array<number>(rank).fill(0)
  for (let n = 0; n < s.batch; n++)
    for (let m = 0; m < s.filters; m++) {
      const g = Math.floor(m / mg)
      const yOff = (n * s.filters + m) * outSize
      for (let o = 0; o < outSize; o++) {
        // output coordinates of o
        for (let d = rank - 1, r = o; d >= 0; d--) {
          oc[d] = r % win.output[d]
          r = Math.floor(r / win.output[d])
        }
        let acc = bias ? bias[m] : 0
        for (let kk = 0; kk < kSize; kk++) {
          let inOff = 0
          let inside = true
          for (let d = rank - 1, r = kk; d >= 0; d--) {
            kc[d] = r % win.kernel[d]
            r = Math.floor(r / win.kernel[d])
          }
          for (let d = 0; d < rank; d++) {
            const i = oc[d] * win.strides[d] - win.padBegin[d] + kc[d] * win.dilations[d]
            if (i < 0 || i >= win.input[d]) {
              inside = false
              break
            }
            inOff = inOff * win.input[d] + i
          }
          if (!inside) continue
          for (let c = 0; c < cg; c++)
            acc += x[(n * s.channels + g * cg + c) * inSize + inOff] * w[(m * cg + c) * kSize + kk]
        }
        y[yOff + o] = acc
      }
    }
  return y
}

/** im2col of output pixels [p0, p1) of image (n, group g) into `buf` as [pixels, cg·kernel] rows. */
const im2col = (
  x: Float32Array,
  xOff: number,
  cg: number,
  w: Window,
  p0: number,
  p1: number,
  buf: Float32Array,
): void => {
  const [D, H, W] = w.input
  const [KD, KH, KW] = w.kernel
  const [, OH, OW] = w.output
  const [sd, sh, sw] = w.strides
  const [dd, dh, dw] = w.dilations
  const [pd, ph, pw] = w.padBegin
  const hw = H * W
  const dhw = D * hw
  let q = 0
  for (let p = p0; p < p1; p++) {
    const ow = p % OW
    const t = (p - ow) / OW
    const oh = t % OH
    const od = (t - oh) / OH
    const id0 = od * sd - pd
    const ih0 = oh * sh - ph
    const iw0 = ow * sw - pw
    const wInside = iw0 >= 0 && iw0 + (KW - 1) * dw < W
    for (let c = 0; c < cg; c++) {
      const xc = xOff + c * dhw
      for (let kd = 0; kd < KD; kd++) {
        const id = id0 + kd * dd
        if (id < 0 || id >= D) {
          buf.fill(0, q, q + KH * KW)
          q += KH * KW
          continue
        }
        const xd = xc + id * hw
        for (let kh = 0; kh < KH; kh++) {
          const ih = ih0 + kh * dh
          if (ih < 0 || ih >= H) {
            buf.fill(0, q, q + KW)
            q += KW
            continue
          }
          const row = xd + ih * W + iw0
          if (wInside) {
            for (let kw = 0, o = row; kw < KW; kw++, o += dw) buf[q++] = x[o]
          } else {
            for (let kw = 0; kw < KW; kw++) {
              const iw = iw0 + kw * dw
              buf[q++] = iw >= 0 && iw < W ? x[row + kw * dw] : 0
            }
          }
        }
      }
    }
  }
}

/** The output coordinates [lo, hi) whose tap at kernel offset k lands inside an input dim of size n. */
const validRange = (k: number, n: number, out: number, s: number, d: number, p: number): [number, number] => {
  const lo = Math.max(0, Math.ceil((p - k * d) / s))
  const hi = Math.min(out, Math.floor((n - 1 + p - k * d) / s) + 1)
  return [lo, Math.max(lo, hi)]
}

/**
 * Direct convolution for one input channel per group (depthwise, with any channel multiplier):
 * each kernel tap adds w·(a shifted input row) to an output row, over the outputs it reaches.
 */
const depthwise = (
  x: Float32Array,
  w: Float32Array,
  bias: ArrayLike<number> | undefined,
  s: ConvSizes,
  win: Window,
  y: Float32Array | Float64Array,
): void => {
  const [D, H, W] = win.input
  const [KD, KH, KW] = win.kernel
  const [OD, OH, OW] = win.output
  const [sd, sh, sw] = win.strides
  const [dd, dh, dw] = win.dilations
  const [pd, ph, pw] = win.padBegin
  const inSize = D * H * W
  const outSize = OD * OH * OW
  const kSize = KD * KH * KW
  const mg = s.filters / s.group
  const rd = Array.from({ length: KD }, (_, k) => validRange(k, D, OD, sd, dd, pd))
  const rh = Array.from({ length: KH }, (_, k) => validRange(k, H, OH, sh, dh, ph))
  const rw = Array.from({ length: KW }, (_, k) => validRange(k, W, OW, sw, dw, pw))
  const acc = new Float64Array(outSize)
  for (let n = 0; n < s.batch; n++)
    for (let m = 0; m < s.filters; m++) {
      const xOff = (n * s.channels + Math.floor(m / mg)) * inSize
      acc.fill(bias ? bias[m] : 0)
      for (let kd = 0; kd < KD; kd++) {
        const [d0, d1] = rd[kd]
        for (let kh = 0; kh < KH; kh++) {
          const [h0, h1] = rh[kh]
          for (let kw = 0; kw < KW; kw++) {
            const [w0, w1] = rw[kw]
            const wv = w[m * kSize + (kd * KH + kh) * KW + kw]
            const shift = kw * dw - pw
            for (let od = d0; od < d1; od++) {
              const id = od * sd - pd + kd * dd
              for (let oh = h0; oh < h1; oh++) {
                const xr = xOff + (id * H + oh * sh - ph + kh * dh) * W + shift
                const yr = (od * OH + oh) * OW
                if (sw === 1) for (let ow = w0; ow < w1; ow++) acc[yr + ow] += wv * x[xr + ow]
                else for (let ow = w0; ow < w1; ow++) acc[yr + ow] += wv * x[xr + ow * sw]
              }
            }
          }
        }
      }
      y.set(acc, (n * s.filters + m) * outSize)
    }
}

/**
 * y [batch, filters, ...win.output] = conv(x, w) + bias over float32 storage. Results go to a fresh
 * Float32Array, or into `out` when given: a Float64Array keeps integer sums exact (ConvInteger).
 */
export const convFast = <Y extends Float32Array | Float64Array = Float32Array>(
  x: Float32Array,
  w: Float32Array,
  bias: ArrayLike<number> | undefined,
  s: ConvSizes,
  window: Window,
  out?: Y,
): Y => {
  if (window.input.length > 3) {
    const r = convNaive(x, w, bias, s, window)
    if (out) out.set(r)
    return out ?? (Float32Array.from(r) as Y)
  }
  const win = as3d(window)
  const inSize = prod(win.input)
  const outSize = prod(win.output)
  const kSize = prod(win.kernel)
  const cg = s.channels / s.group
  const mg = s.filters / s.group
  const y = out ?? (new Float32Array(s.batch * s.filters * outSize) as Y)
  if (y.length === 0) return y
  if (cg === 1 && kSize > 1) {
    depthwise(x, w, bias, s, win, y)
    return y
  }
  const K = cg * kSize
  const pointwise =
    kSize === 1 &&
    win.strides.every((v) => v === 1) &&
    win.padBegin.every((v) => v === 0) &&
    win.padEnd.every((v) => v === 0)
  const block = Math.min(outSize, Math.max(64, (262144 / K) | 0))
  const buf = new Float32Array(block * K)
  for (let g = 0; g < s.group; g++) {
    const gBias = bias ? Float64Array.from({ length: mg }, (_, i) => bias[g * mg + i]) : undefined
    for (let n = 0; n < s.batch; n++) {
      const xOff = (n * s.channels + g * cg) * inSize
      const yOff = (n * s.filters + g * mg) * outSize
      for (let p0 = 0; p0 < outSize; p0 += block) {
        const p1 = Math.min(outSize, p0 + block)
        if (pointwise) transposeInto(x, xOff + p0, cg, p1 - p0, inSize, buf)
        else im2col(x, xOff, cg, win, p0, p1, buf)
        gemmNT(mg, p1 - p0, K, w, g * mg * K, K, buf, 0, K, y, yOff + p0, outSize, gBias)
      }
    }
  }
  return y
}
