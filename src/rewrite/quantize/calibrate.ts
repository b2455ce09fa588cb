// Calibration: the range each activation is quantized over, from the values it took on the
// calibration inputs. Three methods, as onnxruntime's calibrate.py and TensorRT name them:
// - minmax: the smallest and largest value seen;
// - percentile: the values at the p-th and (100 - p)-th percentile of a histogram of each side
//   (p = 99.99 by default), so rare outliers are clipped;
// - entropy: the symmetric threshold whose 128-level quantization of a 2048-bin histogram loses
//   the least information (Kullback-Leibler divergence between the clipped histogram and its
//   quantized expansion, both smoothed so that empty bins have a small weight), clamped to the
//   range seen.
// The histograms need the range first, so percentile and entropy take two passes over the data
// (minmax, then the histogram over it). Pure: plain arrays in, numbers out.
import type { Range } from "./params.js"

export const CALIBRATION_METHODS = ["minmax", "percentile", "entropy"] as const
export type CalibrationMethod = (typeof CALIBRATION_METHODS)[number]

export const DEFAULT_PERCENTILE = 99.99
/** Histogram bins for percentile and entropy (TensorRT's 2048). */
export const HISTOGRAM_BINS = 2048
/** Levels the entropy method quantizes a candidate to (half of them each side of 0, as int8's 256 over ±). */
export const ENTROPY_QUANTIZED_BINS = 128

/** Running min and max of one tensor over the calibration inputs. */
export class MinMax {
  min = Infinity
  max = -Infinity
  add(data: ArrayLike<number>): void {
    let lo = this.min
    let hi = this.max
    for (let i = 0; i < data.length; i++) {
      const v = data[i]
      if (v < lo) lo = v
      if (v > hi) hi = v
    }
    this.min = lo
    this.max = hi
  }
  range(): Range {
    return this.min <= this.max ? { min: this.min, max: this.max } : { min: 0, max: 0 }
  }
}

/** A histogram over a fixed [lo, hi] (values outside count in the end bins). */
export class Histogram {
  readonly counts: Float64Array
  constructor(
    readonly lo: number,
    readonly hi: number,
    readonly bins: number = HISTOGRAM_BINS,
  ) {
    this.counts = new Float64Array(bins)
  }
  add(data: ArrayLike<number>): void {
    const { lo, hi, bins, counts } = this
    const w = hi - lo
    if (!(w > 0)) {
      counts[0] += data.length
      return
    }
    const k = bins / w
    for (let i = 0; i < data.length; i++) {
      let b = Math.floor((data[i] - lo) * k)
      if (b < 0) b = 0
      else if (b >= bins) b = bins - 1
      counts[b]++
    }
  }
  edge(i: number): number {
    return this.lo + ((this.hi - this.lo) * i) / this.bins
  }
}

/** The histogram a method needs for a tensor whose minmax range is `r` (none for minmax). */
export const histogramFor = (method: CalibrationMethod, r: Range): Histogram | undefined => {
  if (method === "minmax") return undefined
  if (method === "entropy") {
    const a = Math.max(Math.abs(r.min), Math.abs(r.max))
    return new Histogram(-a, a)
  }
  return new Histogram(Math.min(r.min, 0), Math.max(r.max, 0))
}

/** The range between the (100 - p)-th and p-th percentiles of the histogram (bin edges). */
export const percentileRange = (h: Histogram, percentile: number, seen: Range): Range => {
  const total = h.counts.reduce((a, b) => a + b, 0)
  if (total === 0 || !(h.hi > h.lo)) return seen
  const upper = (percentile / 100) * total
  const lower = (1 - percentile / 100) * total
  let acc = 0
  let lo = h.lo
  let loSet = false
  let hi = h.hi
  for (let i = 0; i < h.bins; i++) {
    acc += h.counts[i]
    if (!loSet && acc > lower) {
      lo = h.edge(i)
      loSet = true
    }
    if (acc >= upper) {
      hi = h.edge(i + 1)
      break
    }
  }
  return { min: Math.max(lo, seen.min), max: Math.min(hi, seen.max) }
}

/** p with empty bins given eps and the others lowered to keep the sum (onnxruntime's smooth_distribution). */
const smooth = (p: Float64Array, eps = 0.0001): Float64Array | undefined => {
  let zeros = 0
  for (const v of p) if (v === 0) zeros++
  const nonzeros = p.length - zeros
  if (nonzeros === 0) return undefined
  const eps1 = (eps * zeros) / nonzeros
  const out = new Float64Array(p.length)
  for (let i = 0; i < p.length; i++) out[i] = p[i] === 0 ? eps : p[i] - eps1
  return out
}

/** KL(p ‖ q) of two unnormalized distributions (each normalized first, as scipy's entropy). */
const klDivergence = (p: Float64Array, q: Float64Array): number => {
  let sp = 0
  let sq = 0
  for (let i = 0; i < p.length; i++) {
    sp += p[i]
    sq += q[i]
  }
  let kl = 0
  for (let i = 0; i < p.length; i++) {
    const a = p[i] / sp
    const b = q[i] / sq
    if (a > 0) kl += b > 0 ? a * Math.log(a / b) : Infinity
  }
  return kl
}

/**
 * The entropy method's range: over symmetric candidates [-t, t] (t from the quantized bins' half
 * to the whole histogram), the one whose clipped histogram p (outliers added to its end bins)
 * and p quantized to ENTROPY_QUANTIZED_BINS levels and spread back over p's non-empty bins
 * differ least; clamped to the range seen. The histogram must be symmetric around 0.
 */
export const entropyRange = (h: Histogram, seen: Range, quantizedBins: number = ENTROPY_QUANTIZED_BINS): Range => {
  const bins = h.bins
  const total = h.counts.reduce((a, b) => a + b, 0)
  if (total === 0 || !(h.hi > h.lo)) return seen
  const zero = bins >> 1
  const half = quantizedBins >> 1
  let best = Infinity
  let bestRange: Range = { min: h.lo, max: h.hi }
  // prefix sums for the outliers folded into the end bins
  const prefix = new Float64Array(bins + 1)
  for (let i = 0; i < bins; i++) prefix[i + 1] = prefix[i] + h.counts[i]
  for (let i = half; i <= zero; i++) {
    const start = zero - i
    const end = Math.min(zero + i + 1, bins)
    const width = end - start
    const p = h.counts.slice(start, end)
    p[0] += prefix[start]
    p[width - 1] += prefix[bins] - prefix[end]
    // quantize the clipped (un-folded) slice to `quantizedBins` levels, spread back over its non-empty bins
    const sliced = h.counts.slice(start, end)
    const merged = Math.floor(width / quantizedBins)
    const q = new Float64Array(width)
    if (merged === 0) continue
    for (let j = 0; j < quantizedBins; j++) {
      const s = j * merged
      const e = j === quantizedBins - 1 ? width : s + merged
      let sum = 0
      let nonzero = 0
      for (let k = s; k < e; k++) {
        sum += sliced[k]
        if (p[k] !== 0) nonzero++
      }
      if (nonzero > 0) for (let k = s; k < e; k++) q[k] = p[k] !== 0 ? sum / nonzero : 0
    }
    const ps = smooth(p)
    const qs = smooth(q)
    if (!ps || !qs) continue
    const kl = klDivergence(ps, qs)
    if (kl < best) {
      best = kl
      bestRange = { min: h.edge(start), max: h.edge(end) }
    }
  }
  return { min: Math.max(bestRange.min, seen.min), max: Math.min(bestRange.max, seen.max) }
}

/** The range a method gives a tensor from its minmax range and (percentile, entropy) its histogram. */
export const calibratedRange = (method: CalibrationMethod, seen: Range, h: Histogram | undefined, percentile: number): Range =>
  method === "minmax" || !h ? seen : method === "percentile" ? percentileRange(h, percentile, seen) : entropyRange(h, seen)
