// Signal processing: the window generators (Hann, Hamming, Blackman), DFT, STFT and
// MelWeightMatrix. Complex values are a trailing dim of 2 (real, imaginary); a trailing dim of 1
// is a real signal. Transforms are computed in float64 with a twiddle table per length.
import { A, attrs } from "../attrs.js"
import { allocate, fromNumbers, ONNX_DTYPE, ONNX_DTYPE_NAME, type DType } from "../dtype.js"
import { check, defineOp, fail, unsupported, type AnyOpDef, type Dim } from "../op.js"
import { sizeOf, tensor, type Tensor } from "../tensor.js"
import { inputType, req } from "./util.js"
import { scalarOf, symDim } from "./tensor-common.js"

/** The dtype an `output_datatype` attribute names. */
const outputDType = (code: number): DType =>
  ONNX_DTYPE[code] ?? unsupported(`output_datatype ${code} (${ONNX_DTYPE_NAME[code] ?? "unknown"}) is not supported`)

// ---------------------------------------------------------------------------------------------
// Windows: w[n] = Σ_k (-1)^k a_k cos(2πkn / N), N = size (periodic) or size - 1 (symmetric).

const windowOp = (coeffs: readonly number[]) =>
  defineOp({
    attrs: attrs({ output_datatype: A.int(1), periodic: A.int(1) }),
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "opaque",
    infer: (ctx) => {
      const v = ctx.values[0]
      return [{ dtype: outputDType(ctx.attrs.output_datatype), shape: [v ? scalarOf(v, "size") : symDim(ctx, 0, 0)] }]
    },
    kernel: (ctx) => {
      const size = scalarOf(req(ctx.inputs, 0, "size"), "size")
      check(Number.isInteger(size) && size >= 0, () => `size ${size} must be a non-negative integer`)
      const dtype = outputDType(ctx.attrs.output_datatype)
      const N = ctx.attrs.periodic !== 0 ? size : size - 1
      const out = new Float64Array(size)
      for (let n = 0; n < size; n++) {
        let w = 0
        coeffs.forEach((a, k) => (w += (k % 2 ? -a : a) * Math.cos((2 * Math.PI * k * n) / N)))
        out[n] = w
      }
      return [tensor(dtype, [size], fromNumbers(dtype, out))]
    },
  })

// ---------------------------------------------------------------------------------------------
// DFT

/**
 * One-dimensional DFTs of every line along `axis` of a complex-as-trailing-dim tensor.
 * `x` is [..sig, c] with c = 1 or 2; each line is truncated or zero-padded to `L`; the output
 * keeps the first `keep` frequencies. Inverse transforms use e^{+2πi kt/L} and divide by L.
 * `real` (irfft): each line is the first half of a Hermitian spectrum; the rest is its mirrored
 * conjugate, the imaginary parts of the DC and Nyquist terms are dropped, and the output is real.
 */
const dftLines = (x: Tensor, axis: number, L: number, inverse: boolean, keep: number, dtype: DType, real = false): Tensor => {
  const c = x.shape[x.shape.length - 1]
  check(c === 1 || c === 2, () => `the last dim must be 1 (real) or 2 (complex), got ${c}`)
  const sig = x.shape.slice(0, -1)
  const outer = sizeOf(sig.slice(0, axis))
  const n = sig[axis]
  const inner = sizeOf(sig.slice(axis + 1))
  const cos = new Float64Array(L)
  const sin = new Float64Array(L)
  for (let t = 0; t < L; t++) {
    cos[t] = Math.cos((2 * Math.PI * t) / L)
    sin[t] = (inverse ? 1 : -1) * Math.sin((2 * Math.PI * t) / L)
  }
  const scale = inverse ? 1 / L : 1
  const half = Math.floor(L / 2) + 1
  const m = real ? L : Math.min(n, L)
  const re = new Float64Array(m)
  const im = new Float64Array(m)
  const oc = real ? 1 : 2
  const out = allocate(dtype, outer * keep * inner * oc)
  const d = x.data
  const at = (o: number, j: number, t: number) => ((o * n + t) * inner + j) * c
  for (let o = 0; o < outer; o++)
    for (let j = 0; j < inner; j++) {
      if (real) {
        re.fill(0)
        im.fill(0)
        for (let t = 0; t < Math.min(n, half); t++) {
          const p = at(o, j, t)
          re[t] = d[p]
          im[t] = c === 2 && t !== 0 && 2 * t !== L ? d[p + 1] : 0
          if (t > 0 && t < L - t) {
            re[L - t] = re[t]
            im[L - t] = -im[t]
          }
        }
      } else
        for (let t = 0; t < m; t++) {
          const p = at(o, j, t)
          re[t] = d[p]
          im[t] = c === 2 ? d[p + 1] : 0
        }
      for (let k = 0; k < keep; k++) {
        let sr = 0
        let si = 0
        for (let t = 0, e = 0; t < m; t++, e = (e + k) % L) {
          sr += re[t] * cos[e] - im[t] * sin[e]
          si += re[t] * sin[e] + im[t] * cos[e]
        }
        const q = ((o * keep + k) * inner + j) * oc
        out[q] = sr * scale
        if (!real) out[q + 1] = si * scale
      }
    }
  return tensor(dtype, [...sig.slice(0, axis), keep, ...sig.slice(axis + 1), oc], out)
}

/** DFT's signal axis: the attribute before opset 20, input 2 (default -2) from 20; over the input's rank. */
const dftAxis = (opset: number, attrAxis: number, axisInput: Tensor | undefined, rank: number): number => {
  const a = opset < 20 ? attrAxis : axisInput ? scalarOf(axisInput, "axis") : -2
  const ax = a < 0 ? a + rank : a
  check(Number.isInteger(ax) && ax >= 0 && ax <= rank - 2, () => `axis ${a} out of range [-${rank}, -2] ∪ [0, ${rank - 2}] for rank ${rank}`)
  return ax
}

const DFT = defineOp({
  attrs: attrs({ axis: A.int(1), inverse: A.int(0), onesided: A.int(0) }),
  inputs: [1, 3],
  outputs: [1, 1],
  kind: "opaque",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const rank = x.shape.length
    const irfft = ctx.attrs.onesided !== 0 && ctx.attrs.inverse !== 0
    // an axis known only at run time: every signal dim may change
    if (ctx.opset >= 20 && ctx.inputs[2] && !ctx.values[2])
      return [{ dtype: x.dtype, shape: [...x.shape.slice(0, -1).map((_, i) => symDim(ctx, 0, i)), irfft ? 1 : 2] }]
    const axis = dftAxis(ctx.opset, ctx.attrs.axis, ctx.values[2], rank)
    const lenV = ctx.values[1]
    const n = x.shape[axis]
    const sym = symDim(ctx, 0, axis)
    let L: Dim = ctx.inputs[1] ? (lenV ? scalarOf(lenV, "dft_length") : sym) : irfft ? (typeof n === "number" ? 2 * (n - 1) : sym) : n
    if (ctx.attrs.onesided !== 0 && !irfft) L = typeof L === "number" ? Math.floor(L / 2) + 1 : sym
    const shape: Dim[] = [...x.shape.slice(0, -1), irfft ? 1 : 2]
    shape[axis] = L
    return [{ dtype: x.dtype, shape }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const axis = dftAxis(ctx.opset, ctx.attrs.axis, ctx.inputs[2], x.shape.length)
    const lenT = ctx.inputs[1]
    const inverse = ctx.attrs.inverse !== 0
    const onesided = ctx.attrs.onesided !== 0
    // inverse and onesided: the input is a one-sided spectrum and the output real (irfft)
    const L = lenT ? scalarOf(lenT, "dft_length") : inverse && onesided ? 2 * (x.shape[axis] - 1) : x.shape[axis]
    check(Number.isInteger(L) && L >= 1, () => `dft_length ${L} must be a positive integer`)
    if (inverse && onesided) return [dftLines(x, axis, L, true, L, x.dtype, true)]
    if (onesided) check(x.shape[x.shape.length - 1] === 1, "onesided forward DFT needs a real input (last dim 1)")
    return [dftLines(x, axis, L, inverse, onesided ? Math.floor(L / 2) + 1 : L, x.dtype)]
  },
})

// ---------------------------------------------------------------------------------------------
// STFT: frames of the signal [batch, length, 1|2], each weighted by the window, then a DFT of
// frame_length; output [batch, frames, bins, 2].

const stftGeometry = (len: number, step: number, frameLength: number, onesided: boolean) => ({
  frames: Math.floor((len - frameLength) / step) + 1,
  bins: onesided ? Math.floor(frameLength / 2) + 1 : frameLength,
})

const STFT = defineOp({
  attrs: attrs({ onesided: A.int(1) }),
  inputs: [2, 4],
  outputs: [1, 1],
  kind: "opaque",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    check(x.shape.length === 3, () => `signal must be [batch, length, 1 or 2], got rank ${x.shape.length}`)
    const step = ctx.values[1]
    const fl = ctx.inputs[3] ? ctx.values[3] && scalarOf(ctx.values[3], "frame_length") : ctx.inputs[2]?.shape[0] ?? x.shape[1]
    const len = x.shape[1]
    if (step && typeof fl === "number" && typeof len === "number") {
      const g = stftGeometry(len, scalarOf(step, "frame_step"), fl, ctx.attrs.onesided !== 0)
      return [{ dtype: x.dtype, shape: [x.shape[0], g.frames, g.bins, 2] }]
    }
    return [{ dtype: x.dtype, shape: [x.shape[0], symDim(ctx, 0, 1), symDim(ctx, 0, 2), 2] }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    check(x.shape.length === 3, () => `signal must be [batch, length, 1 or 2], got rank ${x.shape.length}`)
    const [batch, len, c] = x.shape
    check(c === 1 || c === 2, () => `the last dim must be 1 (real) or 2 (complex), got ${c}`)
    const step = scalarOf(req(ctx.inputs, 1, "frame_step"), "frame_step")
    check(Number.isInteger(step) && step >= 1, () => `frame_step ${step} must be a positive integer`)
    const win = ctx.inputs[2]
    const flT = ctx.inputs[3]
    const L = flT ? scalarOf(flT, "frame_length") : win ? win.shape[0] : len
    check(Number.isInteger(L) && L >= 1 && L <= len, () => `frame_length ${L} must be in [1, ${len}]`)
    const onesided = ctx.attrs.onesided !== 0
    if (onesided && c === 2) fail("onesided output needs a real signal")
    const W = win ? win.shape[0] : L
    const w = win ? win.data : new Float64Array(L).fill(1)
    const { frames } = stftGeometry(len, step, L, onesided)
    // frames as [batch, frames, W, c], zero past the end of the signal
    const fr = new Float64Array(batch * frames * W * c)
    for (let b = 0; b < batch; b++)
      for (let f = 0; f < frames; f++)
        for (let t = 0; t < W; t++) {
          const s = f * step + t
          if (s >= len) continue
          for (let q = 0; q < c; q++) fr[((b * frames + f) * W + t) * c + q] = x.data[(b * len + s) * c + q] * w[t]
        }
    const framed = tensor("float64", [batch, frames, W, c], fr)
    return [dftLines(framed, 2, L, false, onesided ? Math.floor(L / 2) + 1 : L, x.dtype)]
  },
})

// ---------------------------------------------------------------------------------------------
// MelWeightMatrix: triangular filters on the mel scale, [dft_length / 2 + 1, num_mel_bins].

const MelWeightMatrix = defineOp({
  attrs: attrs({ output_datatype: A.int(1) }),
  inputs: [5, 5],
  outputs: [1, 1],
  kind: "opaque",
  infer: (ctx) => {
    const bins = ctx.values[0]
    const len = ctx.values[1]
    return [
      {
        dtype: outputDType(ctx.attrs.output_datatype),
        shape: [len ? Math.floor(scalarOf(len, "dft_length") / 2) + 1 : symDim(ctx, 0, 0), bins ? scalarOf(bins, "num_mel_bins") : symDim(ctx, 0, 1)],
      },
    ]
  },
  kernel: (ctx) => {
    const [mels, dftLen, rate, lo, hi] = [0, 1, 2, 3, 4].map((k) => scalarOf(req(ctx.inputs, k), ["num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"][k]))
    check(Number.isInteger(mels) && mels >= 0, () => `num_mel_bins ${mels} must be a non-negative integer`)
    check(Number.isInteger(dftLen) && dftLen >= 1, () => `dft_length ${dftLen} must be a positive integer`)
    check(rate > 0, () => `sample_rate ${rate} must be positive`)
    const spec = Math.floor(dftLen / 2) + 1
    const toMel = (hz: number) => 2595 * Math.log10(1 + hz / 700)
    const loMel = toMel(lo)
    const step = (toMel(hi) - loMel) / (mels + 2)
    const edges = Array.from({ length: mels + 2 }, (_, i) => {
      const hz = 700 * (Math.pow(10, (i * step + loMel) / 2595) - 1)
      return Math.floor(((dftLen + 1) * hz) / rate)
    })
    const dtype = outputDType(ctx.attrs.output_datatype)
    const out = new Float64Array(spec * mels)
    const set = (j: number, i: number, v: number) => {
      check(j >= 0 && j < spec, () => `mel filter ${i} reaches bin ${j}, outside [0, ${spec})`)
      out[j * mels + i] = v
    }
    for (let i = 0; i < mels; i++) {
      const [l, c, h] = [edges[i], edges[i + 1], edges[i + 2]]
      if (c === l) set(c, i, 1)
      else for (let j = l; j <= c; j++) set(j, i, (j - l) / (c - l))
      if (h > c) for (let j = c; j < h; j++) set(j, i, (h - j) / (h - c))
    }
    return [tensor(dtype, [spec, mels], fromNumbers(dtype, out))]
  },
})

export const miscSignalOps = {
  HannWindow: windowOp([0.5, 0.5]),
  HammingWindow: windowOp([25 / 46, 21 / 46]),
  BlackmanWindow: windowOp([0.42, 0.5, 0.08]),
  DFT,
  STFT,
  MelWeightMatrix,
} satisfies Record<string, AnyOpDef>
