// Resize and the deprecated Upsample, as one N-d separable interpolation.
//
// Each resized axis gets a tap table: for every output coordinate, the input indices it reads
// and their weights (nearest: one tap; linear: two; cubic: four; antialiased: a wider window
// when downscaling). The axes are then applied one after another, which computes exactly the
// tensor-product sum of ONNX's recursive reference (op_resize.py), in another order of
// additions. tf_crop_and_resize marks output coordinates whose source lies outside the input:
// an output element with any such coordinate takes extrapolation_value.
import { A, attrs } from "../attrs.js"
import { allocate, converter, isFloat, isInteger } from "../dtype.js"
import { check, defineOp, fail, unsupported, type AnyOpDef, type Dim } from "../op.js"
import { sizeOf, tensor, toNumbers, type Tensor } from "../tensor.js"
import { inputType, req } from "./util.js"
import { symDim, uniqueAxes } from "./tensor-common.js"

type Mode = "nearest" | "linear" | "cubic"
type Ctm =
  | "half_pixel"
  | "half_pixel_symmetric"
  | "pytorch_half_pixel"
  | "align_corners"
  | "asymmetric"
  | "tf_crop_and_resize"
  | "tf_half_pixel_for_nn" // opsets 11-12 only
/** "simple" is the rounding of Upsample and Resize-10: floor when upscaling, ceil when downscaling. */
type NearestMode = "round_prefer_floor" | "round_prefer_ceil" | "floor" | "ceil" | "simple"

interface ResizeConfig {
  readonly mode: Mode
  readonly ctm: Ctm
  readonly nearest: NearestMode
  readonly cubicA: number
  readonly excludeOutside: boolean
  readonly extrapolation: number
  readonly antialias: boolean
}

// ---------------------------------------------------------------------------------------------
// Output geometry

interface Geometry {
  readonly outShape: number[]
  /** The scale of each axis (output / input, or as given). */
  readonly scale: number[]
}

/**
 * Output sizes and per-axis scales from `scales` or `sizes` over `axes` (ONNX's _interpolate_nd):
 * scales give floor(scale * in); sizes give scale = out / in, or under keep_aspect_ratio_policy
 * one scale for every axis and sizes round_half_up(scale * in).
 */
const geometry = (
  inShape: readonly number[],
  axes: readonly number[],
  scales: readonly number[] | undefined,
  sizes: readonly number[] | undefined,
  policy: string,
): Geometry => {
  const outShape = [...inShape]
  const scale = inShape.map(() => 1)
  if (sizes) {
    check(sizes.length === axes.length, () => `sizes has ${sizes.length} values for ${axes.length} axes`)
    sizes.forEach((s, i) => check(Number.isInteger(s) && s >= 0, () => `size ${s} must be a non-negative integer`))
    if (policy === "stretch") {
      axes.forEach((a, i) => {
        outShape[a] = sizes[i]
        scale[a] = sizes[i] / inShape[a]
      })
    } else {
      const ratios = axes.map((a, i) => sizes[i] / inShape[a])
      const s = policy === "not_larger" ? Math.min(...ratios) : Math.max(...ratios)
      for (const a of axes) {
        scale[a] = s
        outShape[a] = Math.floor(s * inShape[a] + 0.5)
      }
    }
  } else if (scales) {
    check(scales.length === axes.length, () => `scales has ${scales.length} values for ${axes.length} axes`)
    axes.forEach((a, i) => {
      check(scales[i] > 0, () => `scale ${scales[i]} must be positive`)
      scale[a] = scales[i]
      outShape[a] = Math.floor(scales[i] * inShape[a])
    })
  } else fail("one of scales and sizes is required")
  return { outShape, scale }
}

// ---------------------------------------------------------------------------------------------
// Taps of one axis

interface Taps {
  readonly n: number // taps per output coordinate
  readonly index: Int32Array // [out * n], clamped into [0, in)
  readonly weight: Float64Array // [out * n]
  readonly outside: Uint8Array | undefined // tf_crop_and_resize: 1 where the source is outside
}

/** Source coordinate of output coordinate x (ONNX's coordinate_transformation_mode). */
const sourceCoord = (ctm: Ctm, x: number, scale: number, inW: number, outInt: number, roi: readonly [number, number]): number => {
  const outW = scale * inW
  switch (ctm) {
    case "align_corners":
      return outW === 1 ? 0 : (x * (inW - 1)) / (outW - 1)
    case "asymmetric":
      return x / scale
    case "tf_crop_and_resize":
      return (
        (outW === 1 ? ((roi[1] - roi[0]) * (inW - 1)) / 2 : (x * (roi[1] - roi[0]) * (inW - 1)) / (outW - 1)) + roi[0] * (inW - 1)
      )
    case "pytorch_half_pixel":
      return outW === 1 ? -0.5 : (x + 0.5) / scale - 0.5
    case "half_pixel":
      return (x + 0.5) / scale - 0.5
    case "tf_half_pixel_for_nn":
      return (x + 0.5) / scale
    case "half_pixel_symmetric": {
      const adjustment = outInt / outW
      const offset = (inW / 2) * (1 - adjustment)
      return offset + (x + 0.5) / scale - 0.5
    }
  }
}

const cubicKernel = (A: number) => (t: number): number => {
  const x = Math.abs(t)
  if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1
  if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
  return 0
}

/**
 * Weights of the window at offsets `start .. start + n - 1` from the left neighbour, for a source
 * coordinate at `ratio` ∈ (0, 1] past it (ONNX's *_coeffs functions).
 */
const coefficients = (cfg: ResizeConfig, ratio: number, scale: number): { start: number; w: number[] } => {
  switch (cfg.mode) {
    case "nearest": {
      if (ratio === 1) return { start: 0, w: [0, 1] }
      const mode = cfg.nearest === "simple" ? (scale < 1 ? "ceil" : "floor") : cfg.nearest
      const right =
        mode === "round_prefer_floor" ? ratio > 0.5 : mode === "round_prefer_ceil" ? ratio >= 0.5 : mode === "ceil"
      return { start: 0, w: right ? [0, 1] : [1, 0] }
    }
    case "linear": {
      if (!cfg.antialias || scale >= 1) return { start: 0, w: [1 - ratio, ratio] }
      const start = Math.floor(-1 / scale) + 1
      const w: number[] = []
      for (let i = start; i < 2 - start; i++) w.push(Math.min(1, Math.max(0, 1 - Math.abs((i - ratio) * scale))))
      return { start, w: normalised(w) }
    }
    case "cubic": {
      const k = cubicKernel(cfg.cubicA)
      const s = cfg.antialias ? Math.min(scale, 1) : 1
      const start = Math.floor(-2 / s) + 1
      const w: number[] = []
      for (let i = start; i < 2 - start; i++) w.push(k(s * (i - ratio)))
      return { start, w: cfg.antialias ? normalised(w) : w }
    }
  }
}

const normalised = (w: number[]): number[] => {
  const s = w.reduce((a, b) => a + b, 0)
  return w.map((v) => v / s)
}

const axisTaps = (cfg: ResizeConfig, inW: number, outW: number, scale: number, roi: readonly [number, number]): Taps => {
  let n = 0
  let index = new Int32Array(0)
  let weight = new Float64Array(0)
  const outside = cfg.ctm === "tf_crop_and_resize" ? new Uint8Array(outW) : undefined
  for (let x = 0; x < outW; x++) {
    const xo = sourceCoord(cfg.ctm, x, scale, inW, outW, roi)
    if (outside && (xo < 0 || xo > inW - 1)) {
      outside[x] = 1
      continue
    }
    // the left neighbour: ratio ∈ (0, 1], so an integral coordinate leans on its left
    const fl = Math.floor(xo)
    const ratio = xo === fl ? 1 : xo - fl
    const left = xo - ratio
    const { start, w } = coefficients(cfg, ratio, scale)
    if (n === 0) {
      n = w.length
      index = new Int32Array(outW * n)
      weight = new Float64Array(outW * n)
    }
    // the window stays within the edge-padded range [-pad, inW + pad), as ONNX's neighbour search does
    const pad = Math.ceil(n / 2)
    let first = left + start
    if (first < -pad) first = -pad
    if (first + n > inW + pad) first = inW + pad - n
    if (cfg.excludeOutside) {
      let sum = 0
      for (let t = 0; t < n; t++) {
        const i = first + t
        if (i < 0 || i >= inW) w[t] = 0
        sum += w[t]
      }
      for (let t = 0; t < n; t++) w[t] /= sum
    }
    for (let t = 0; t < n; t++) {
      const i = first + t
      index[x * n + t] = i < 0 ? 0 : i >= inW ? inW - 1 : i
      weight[x * n + t] = w[t]
    }
  }
  if (n === 0) n = 1
  if (index.length === 0) {
    index = new Int32Array(outW)
    weight = new Float64Array(outW)
  }
  return { n, index, weight, outside }
}

/** Applies one axis's taps: [outer, inW, inner] → [outer, outW, inner]. */
const applyAxis = (src: Float64Array, outer: number, inW: number, inner: number, outW: number, taps: Taps): Float64Array => {
  const dst = new Float64Array(outer * outW * inner)
  const { n, index, weight } = taps
  for (let o = 0; o < outer; o++) {
    const sb = o * inW * inner
    const db = o * outW * inner
    for (let x = 0; x < outW; x++) {
      const d0 = db + x * inner
      for (let t = 0; t < n; t++) {
        const w = weight[x * n + t]
        if (w === 0) continue
        const s0 = sb + index[x * n + t] * inner
        for (let j = 0; j < inner; j++) dst[d0 + j] += w * src[s0 + j]
      }
    }
  }
  return dst
}

/** The whole resize of `x` to `g.outShape`; `roi` is [starts..., ends...] over every axis. */
const resize = (x: Tensor, g: Geometry, roi: readonly number[], cfg: ResizeConfig): Tensor => {
  const rank = x.shape.length
  let cur: Float64Array = Float64Array.from(x.data as ArrayLike<number>)
  const shape = [...x.shape]
  const outsideMasks: { axis: number; mask: Uint8Array }[] = []
  for (let a = 0; a < rank; a++) {
    const r: [number, number] = [roi[a], roi[rank + a]]
    const crop = cfg.ctm === "tf_crop_and_resize" && (r[0] !== 0 || r[1] !== 1)
    if (g.outShape[a] === x.shape[a] && g.scale[a] === 1 && !crop) continue
    const taps = axisTaps(cfg, x.shape[a], g.outShape[a], g.scale[a], r)
    const outer = sizeOf(shape.slice(0, a))
    const inner = sizeOf(shape.slice(a + 1))
    cur = applyAxis(cur, outer, x.shape[a], inner, g.outShape[a], taps)
    shape[a] = g.outShape[a]
    if (taps.outside?.some((v) => v !== 0)) outsideMasks.push({ axis: a, mask: taps.outside })
  }
  for (const { axis, mask } of outsideMasks) {
    const outer = sizeOf(shape.slice(0, axis))
    const dim = shape[axis]
    const inner = sizeOf(shape.slice(axis + 1))
    for (let o = 0; o < outer; o++)
      for (let k = 0; k < dim; k++) if (mask[k]) cur.fill(cfg.extrapolation, (o * dim + k) * inner, (o * dim + k + 1) * inner)
  }
  const out = allocate(x.dtype, cur.length)
  if (isFloat(x.dtype)) out.set(cur)
  else {
    const conv = converter(x.dtype)
    for (let i = 0; i < cur.length; i++) out[i] = conv(cur[i])
  }
  return tensor(x.dtype, shape, out)
}

// ---------------------------------------------------------------------------------------------
// Resize

const MODES: readonly string[] = ["nearest", "linear", "cubic"]
const CTMS: readonly string[] = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"]
const NEAREST: readonly string[] = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
const POLICIES: readonly string[] = ["stretch", "not_larger", "not_smaller"]

const resizeAttrs = attrs({
  mode: A.str("nearest"),
  coordinate_transformation_mode: A.str("half_pixel"),
  nearest_mode: A.str("round_prefer_floor"),
  cubic_coeff_a: A.float(-0.75),
  exclude_outside: A.int(0),
  extrapolation_value: A.float(0),
  antialias: A.int(0),
  axes: A.optInts(),
  keep_aspect_ratio_policy: A.str("stretch"),
})
type ResizeAttrs = typeof resizeAttrs._A

const resizeConfig = (a: ResizeAttrs, opset: number): ResizeConfig => {
  check(MODES.includes(a.mode), () => `mode '${a.mode}' is not one of ${MODES.join(", ")}`)
  const legacy = opset < 11 // Resize-10: Upsample's geometry
  const ctms = opset < 13 ? [...CTMS, "tf_half_pixel_for_nn"] : CTMS
  check(legacy || ctms.includes(a.coordinate_transformation_mode), () => `coordinate_transformation_mode '${a.coordinate_transformation_mode}' is not one of ${ctms.join(", ")}`)
  check(legacy || NEAREST.includes(a.nearest_mode), () => `nearest_mode '${a.nearest_mode}' is not one of ${NEAREST.join(", ")}`)
  check(POLICIES.includes(a.keep_aspect_ratio_policy), () => `keep_aspect_ratio_policy '${a.keep_aspect_ratio_policy}' is not one of ${POLICIES.join(", ")}`)
  if (legacy && a.mode === "cubic") unsupported("mode 'cubic' does not exist before opset 11")
  return {
    mode: a.mode as Mode,
    ctm: legacy ? "asymmetric" : (a.coordinate_transformation_mode as Ctm),
    nearest: legacy ? "simple" : (a.nearest_mode as NearestMode),
    cubicA: a.cubic_coeff_a,
    excludeOutside: a.exclude_outside !== 0,
    extrapolation: a.extrapolation_value,
    antialias: a.antialias !== 0 && a.mode !== "nearest",
  }
}

/** Resize's inputs by opset: [X, scales] at opset 10, [X, roi, scales, sizes] after. */
const resizeInputs = <T>(inputs: readonly (T | undefined)[], opset: number) =>
  opset < 11 ? { roi: undefined, scales: inputs[1], sizes: undefined } : { roi: inputs[1], scales: inputs[2], sizes: inputs[3] }

const floatValues = (t: Tensor, what: string): number[] => {
  check(isFloat(t.dtype), () => `${what} must be a float tensor, got ${t.dtype}`)
  return toNumbers(t)
}
const intList = (t: Tensor, what: string): number[] => {
  check(isInteger(t.dtype), () => `${what} must be an integer tensor, got ${t.dtype}`)
  return toNumbers(t)
}

/** An empty tensor stands for an omitted input (opset 11's placeholder scales or roi). */
const present = (t: Tensor | undefined): Tensor | undefined => (t && t.data.length > 0 ? t : undefined)

const Resize = defineOp({
  attrs: resizeAttrs,
  inputs: [1, 4],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const rank = x.shape.length
    resizeConfig(ctx.attrs, ctx.opset)
    const axes = ctx.attrs.axes ? uniqueAxes(ctx.attrs.axes, rank) : x.shape.map((_, i) => i)
    const v = resizeInputs(ctx.values, ctx.opset)
    const t = resizeInputs(ctx.inputs, ctx.opset)
    const scalesKnown = v.scales !== undefined || t.scales === undefined
    const sizesKnown = v.sizes !== undefined || t.sizes === undefined
    const inStatic = x.shape.every((d): d is number => typeof d === "number")
    if (scalesKnown && sizesKnown && inStatic) {
      const g = geometry(x.shape as number[], axes, present(v.scales) && floatValues(v.scales!, "scales"), present(v.sizes) && intList(v.sizes!, "sizes"), ctx.attrs.keep_aspect_ratio_policy)
      return [{ dtype: x.dtype, shape: g.outShape }]
    }
    // sizes known and stretched: those dims are known even with symbolic input dims
    const sizes = present(v.sizes) && ctx.attrs.keep_aspect_ratio_policy === "stretch" ? intList(v.sizes!, "sizes") : undefined
    const shape: Dim[] = [...x.shape]
    axes.forEach((a, i) => (shape[a] = sizes ? sizes[i] : symDim(ctx, 0, a)))
    return [{ dtype: x.dtype, shape }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const rank = x.shape.length
    const cfg = resizeConfig(ctx.attrs, ctx.opset)
    const axes = ctx.attrs.axes ? uniqueAxes(ctx.attrs.axes, rank) : x.shape.map((_, i) => i)
    const { roi, scales, sizes } = resizeInputs(ctx.inputs, ctx.opset)
    const sc = present(scales)
    const sz = present(sizes)
    check(!(sc && sz), "only one of scales and sizes may be given")
    const g = geometry(x.shape, axes, sc && floatValues(sc, "scales"), sz && intList(sz, "sizes"), ctx.attrs.keep_aspect_ratio_policy)
    // roi over every axis: [starts..., ends...], [0, 1] on axes not listed
    const fullRoi = [...x.shape.map(() => 0), ...x.shape.map(() => 1)]
    const r = present(roi)
    if (cfg.ctm === "tf_crop_and_resize") {
      const vals = r ? floatValues(r, "roi") : fail("roi is required for coordinate_transformation_mode 'tf_crop_and_resize'")
      check(vals.length === 2 * axes.length, () => `roi has ${vals.length} values for ${axes.length} axes (needs ${2 * axes.length})`)
      axes.forEach((a, i) => {
        fullRoi[a] = vals[i]
        fullRoi[rank + a] = vals[axes.length + i]
      })
    }
    return [resize(x, g, fullRoi, cfg)]
  },
})

// ---------------------------------------------------------------------------------------------
// Upsample (deprecated): scales as an attribute (opset 7-8) or input (opset 9), nearest or linear,
// asymmetric coordinates.

const Upsample = defineOp({
  attrs: attrs({ mode: A.str("nearest"), scales: A.optFloats() }),
  inputs: [1, 2],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    if (ctx.opset < 7) unsupported("Upsample before opset 7 (height_scale / width_scale attributes) is not supported")
    const s = ctx.attrs.scales ?? (ctx.values[1] ? floatValues(ctx.values[1], "scales") : undefined)
    if (s) check(s.length === x.shape.length, () => `scales has ${s.length} values for rank ${x.shape.length}`)
    return [{ dtype: x.dtype, shape: x.shape.map((d, i) => (s && typeof d === "number" ? Math.floor(s[i] * d) : s && s[i] === 1 ? d : symDim(ctx, 0, i))) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    if (ctx.opset < 7) unsupported("Upsample before opset 7 (height_scale / width_scale attributes) is not supported")
    const mode = ctx.attrs.mode === "bilinear" ? "linear" : ctx.attrs.mode
    check(mode === "nearest" || mode === "linear", () => `mode '${ctx.attrs.mode}' is not one of nearest, linear`)
    const s = ctx.attrs.scales ?? floatValues(req(ctx.inputs, 1, "scales"), "scales")
    const axes = x.shape.map((_, i) => i)
    const g = geometry(x.shape, axes, s, undefined, "stretch")
    const cfg: ResizeConfig = { mode: mode as Mode, ctm: "asymmetric", nearest: "simple", cubicA: -0.75, excludeOutside: false, extrapolation: 0, antialias: false }
    return [resize(x, g, [], cfg)]
  },
})

export const miscResizeOps = { Resize, Upsample } satisfies Record<string, AnyOpDef>
