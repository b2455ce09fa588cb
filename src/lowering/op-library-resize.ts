// Resize (opset 10+) and Upsample as injective computes, for modes nearest and linear (no
// antialias when downscaling, no exclude_outside, no tf_crop_and_resize). Every output coordinate
// maps to its source coordinate with the reference's float64 arithmetic, in the same order
// (src/ast/graph/ops/misc-resize.ts: sourceCoord, coefficients, axisTaps), so the nearest index
// and the linear taps are the reference's; linear sums its 2^k taps in float64.
import type { DType } from "../ast/graph/dtype.js"
import { add, c, call, cast, div, eq, ge, gt, max, min, mul, or, select, sub, type Expr } from "../ast/te/expr.js"
import { at, compute } from "../ast/te/tensor.js"
import { inp, isFloatDtype, ints, none, normAxis, num, shapeOf, type OpCompute, type OpComputeCtx } from "./op-library-common.js"

const W: DType = "float64"
const f = (x: number): Expr => c(x, W)

interface Plan {
  readonly mode: "nearest" | "linear"
  readonly ctm: string
  readonly nearest: string
  readonly scale: readonly number[]
}

/** Source coordinate of output coordinate `x` (as the reference's sourceCoord, same operation order). */
const sourceCoord = (ctm: string, x: Expr, scale: number, inW: number, outInt: number): Expr => {
  const outW = scale * inW
  const xf = cast(W, x)
  switch (ctm) {
    case "align_corners":
      return outW === 1 ? f(0) : div(mul(xf, f(inW - 1)), f(outW - 1))
    case "asymmetric":
      return div(xf, f(scale))
    case "pytorch_half_pixel":
      return outW === 1 ? f(-0.5) : sub(div(add(xf, f(0.5)), f(scale)), f(0.5))
    case "half_pixel":
      return sub(div(add(xf, f(0.5)), f(scale)), f(0.5))
    case "tf_half_pixel_for_nn":
      return div(add(xf, f(0.5)), f(scale))
    case "half_pixel_symmetric": {
      const adjustment = outInt / outW
      const offset = (inW / 2) * (1 - adjustment)
      return sub(add(f(offset), div(add(xf, f(0.5)), f(scale))), f(0.5))
    }
    default:
      return none(`Resize coordinate_transformation_mode '${ctm}'`)
  }
}

/** Taps of one axis at output coordinate `x`: clamped input indices and their weights. */
const axisTaps = (p: Plan, a: number, x: Expr, inW: number, outW: number): { idx: Expr; w: Expr }[] => {
  const xo = sourceCoord(p.ctm, x, p.scale[a], inW, outW)
  const flo = call("floor", xo)
  const ratio = select(eq(xo, flo), f(1), sub(xo, flo))
  const left = cast("int32", sub(xo, ratio))
  // the window [first, first + 1] stays within [-1, inW + 1), then each tap clamps into [0, inW)
  const first = min(max(left, c(-1)), c(inW - 1))
  const clampIdx = (e: Expr) => min(max(e, c(0)), c(inW - 1))
  if (p.mode === "linear")
    return [
      { idx: clampIdx(first), w: sub(f(1), ratio) },
      { idx: clampIdx(add(first, c(1))), w: ratio },
    ]
  const mode = p.nearest === "simple" ? (p.scale[a] < 1 ? "ceil" : "floor") : p.nearest
  const right =
    mode === "round_prefer_floor" ? gt(ratio, f(0.5)) : mode === "round_prefer_ceil" ? ge(ratio, f(0.5)) : mode === "ceil" ? c(1, "bool") : c(0, "bool")
  return [{ idx: clampIdx(add(first, select(or(eq(ratio, f(1)), right), c(1), c(0)))), w: f(1) }]
}

const interpolate = (ctx: OpComputeCtx, p: Plan): ReturnType<OpCompute> => {
  const x = inp(ctx, 0)
  const out = shapeOf(ctx.outputs[0])
  const dtype = x.dtype
  if (p.mode === "linear" && !isFloatDtype(dtype)) return none(`linear Resize of ${dtype} (rounding of the interpolated value)`)
  return [
    compute(ctx.name(), out, (...o) => {
      const perAxis = x.shape.map((inW, a) => (inW === out[a] && p.scale[a] === 1 ? [{ idx: o[a] as Expr, w: f(1) }] : axisTaps(p, a, o[a], inW, out[a])))
      if (p.mode === "nearest") return at(x, ...perAxis.map((t) => t[0].idx))
      // every combination of taps: Σ Π w · x[idx…]
      let terms: { idx: Expr[]; w: Expr | undefined }[] = [{ idx: [], w: undefined }]
      for (const taps of perAxis)
        terms = terms.flatMap((t) => taps.map((tap) => ({ idx: [...t.idx, tap.idx], w: taps.length === 1 ? t.w : t.w ? mul(t.w, tap.w) : tap.w })))
      let acc: Expr | undefined
      for (const t of terms) {
        const v = cast(W, at(x, ...t.idx))
        const term = t.w ? mul(t.w, v) : v
        acc = acc ? add(acc, term) : term
      }
      return cast(dtype, acc!)
    }, dtype),
  ]
}

const floats = (v: ArrayLike<number> | undefined): number[] | undefined => (v && v.length > 0 ? Array.from(v, Number) : undefined)

/** Per-axis scales as the reference's geometry (scales, or sizes under keep_aspect_ratio_policy). */
const scalesOf = (inShape: readonly number[], axes: readonly number[], scales: number[] | undefined, sizes: number[] | undefined, policy: string): number[] => {
  const scale = inShape.map(() => 1)
  if (sizes) {
    if (policy === "stretch") axes.forEach((a, i) => (scale[a] = sizes[i] / inShape[a]))
    else {
      const ratios = axes.map((a, i) => sizes[i] / inShape[a])
      const s = policy === "not_larger" ? Math.min(...ratios) : Math.max(...ratios)
      for (const a of axes) scale[a] = s
    }
  } else if (scales) axes.forEach((a, i) => (scale[a] = scales[i]))
  else none("Resize without constant scales or sizes")
  return scale
}

const resize: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const rank = x.shape.length
  const mode = (ctx.attrs.mode as string | undefined) ?? "nearest"
  if (mode !== "nearest" && mode !== "linear") return none(`Resize mode '${mode}'`)
  if (mode === "linear" && num(ctx.attrs.exclude_outside, 0) !== 0) return none("linear Resize with exclude_outside")
  const legacy = ctx.opset < 11
  const axes = (ints(ctx.attrs.axes) ?? x.shape.map((_, i) => i)).map((a) => normAxis(a, rank))
  const k = legacy ? { scales: 1, sizes: -1 } : { scales: 2, sizes: 3 }
  const known = (i: number) => i < 0 || !ctx.node.inputs[i] || ctx.constants[i] !== undefined
  if (!known(k.scales) || !known(k.sizes)) return none("Resize with runtime scales or sizes")
  const scale = scalesOf(x.shape, axes, floats(ctx.constants[k.scales]), k.sizes >= 0 ? floats(ctx.constants[k.sizes]) : undefined, (ctx.attrs.keep_aspect_ratio_policy as string | undefined) ?? "stretch")
  if (mode === "linear" && num(ctx.attrs.antialias, 0) !== 0 && scale.some((s) => s < 1)) return none("antialiased linear downscaling")
  return interpolate(ctx, {
    mode,
    ctm: legacy ? "asymmetric" : ((ctx.attrs.coordinate_transformation_mode as string | undefined) ?? "half_pixel"),
    nearest: legacy ? "simple" : ((ctx.attrs.nearest_mode as string | undefined) ?? "round_prefer_floor"),
    scale,
  })
}

const upsample: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const m = (ctx.attrs.mode as string | undefined) ?? "nearest"
  const mode = m === "bilinear" ? "linear" : m
  if (mode !== "nearest" && mode !== "linear") return none(`Upsample mode '${m}'`)
  const attr = ctx.attrs.scales as number[] | undefined
  const scales = attr ?? floats(ctx.constants[1]) ?? none("Upsample with runtime scales")
  return interpolate(ctx, { mode, ctm: "asymmetric", nearest: "simple", scale: scalesOf(x.shape, x.shape.map((_, i) => i), scales, undefined, "stretch") })
}

export const RESIZES: Record<string, OpCompute> = { Resize: resize, Upsample: upsample }
