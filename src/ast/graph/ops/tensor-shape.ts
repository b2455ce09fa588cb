// Ops that only change the shape, sharing the input's data: Reshape, Flatten, Squeeze and
// Unsqueeze; and the shape queries Shape and Size.
import { A, attrs } from "../attrs.js"
import { check, defineOp, fail, unsupported, type AnyOpDef, type Dim } from "../op.js"
import { fromArray, scalar, sizeOf, type Tensor } from "../tensor.js"
import { inputType, req } from "./util.js"
import { dimProduct, intValues, staticLength, symDim, symShape, uniqueAxes, view } from "./tensor-common.js"

// ---------------------------------------------------------------------------------------------
// Reshape

/**
 * Reshape's output dims from the input dims and the target: 0 copies the input dim (unless
 * allowzero), one -1 takes what is left. Works on symbolic dims: a -1 that symbolic dims leave
 * undetermined is `unknown`.
 */
const reshapeDims = (inShape: readonly Dim[], target: readonly number[], allowzero: boolean, unknown: string): Dim[] => {
  check(target.every((t) => Number.isInteger(t) && t >= -1), () => `shape [${target.join(", ")}] has a dim below -1`)
  const minus = target.filter((t) => t === -1).length
  check(minus <= 1, () => `shape [${target.join(", ")}] has more than one -1`)
  if (allowzero) check(!(minus && target.includes(0)), () => `shape [${target.join(", ")}] has both 0 and -1 with allowzero=1`)
  const out: Dim[] = target.map((t, i) => {
    if (t !== 0 || allowzero) return t
    check(i < inShape.length, () => `shape [${target.join(", ")}] copies dim ${i} (0) but the input has rank ${inShape.length}`)
    return inShape[i]
  })
  if (minus) {
    const k = out.indexOf(-1)
    out[k] = inferredDim(inShape, out.filter((_, i) => i !== k), target, unknown)
  } else {
    const total = dimProduct(inShape, unknown)
    const known = dimProduct(out, unknown)
    if (typeof total === "number" && typeof known === "number")
      check(total === known, () => `cannot reshape [${inShape.join(", ")}] (${total} elements) into [${out.join(", ")}]`)
  }
  return out
}

/**
 * The dim a -1 stands for: the input's element count over the other output dims. Symbolic dims
 * cancel where they appear on both sides ([N, 3, 4] → [N, -1] gives 12), so batch-symbolic
 * flattens stay static.
 */
const inferredDim = (inShape: readonly Dim[], others: readonly Dim[], target: readonly number[], unknown: string): Dim => {
  if (inShape.includes(0) && !others.includes(0)) return 0
  const syms = new Map<string, number>()
  let num = 1
  for (const d of inShape)
    if (typeof d === "number") num *= d
    else syms.set(d, (syms.get(d) ?? 0) + 1)
  let den = 1
  for (const d of others) {
    if (typeof d === "number") den *= d
    else {
      const c = syms.get(d) ?? 0
      if (c === 0) return unknown
      syms.set(d, c - 1)
    }
  }
  const left = [...syms].filter(([, c]) => c > 0)
  check(den !== 0, () => `cannot infer the -1 in shape [${target.join(", ")}]: the other dims have 0 elements`)
  if (left.length === 0) {
    check(num % den === 0, () => `cannot reshape [${inShape.join(", ")}] (${num} elements) into [${target.join(", ")}]`)
    return num / den
  }
  return left.length === 1 && left[0][1] === 1 && num === den ? left[0][0] : unknown
}

const reshapeTarget = (ctx: { opset: number; attrs: { shape?: readonly number[] } }, value: Tensor | undefined): number[] | undefined =>
  ctx.attrs.shape ? [...ctx.attrs.shape] : value ? intValues(value, "shape") : undefined

const Reshape = defineOp({
  attrs: attrs({ allowzero: A.int(0), shape: A.optInts() }),
  inputs: [1, 2],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const target = reshapeTarget(ctx, ctx.values[1])
    if (target) return [{ dtype: x.dtype, shape: reshapeDims(x.shape, target, ctx.attrs.allowzero === 1, symDim(ctx, 0, 0)) }]
    check(ctx.inputs[1] !== undefined, "needs a shape (input 1, or the 'shape' attribute before opset 5)")
    const rank = staticLength(ctx.inputs[1])
    if (rank === undefined) return unsupported("the shape input's length is not static, so the output rank is unknown")
    return [{ dtype: x.dtype, shape: symShape(ctx, 0, rank) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const target = reshapeTarget(ctx, ctx.inputs[1]) ?? fail("needs a shape (input 1, or the 'shape' attribute before opset 5)")
    return [view(x, reshapeDims(x.shape, target, ctx.attrs.allowzero === 1, "?") as number[])]
  },
})

// ---------------------------------------------------------------------------------------------
// Flatten, Squeeze, Unsqueeze

const flattenAxis = (axis: number, rank: number): number => {
  const a = axis < 0 ? axis + rank : axis
  check(a >= 0 && a <= rank, () => `axis ${axis} out of range [-${rank}, ${rank}]`)
  return a
}

const Flatten = defineOp({
  attrs: attrs({ axis: A.int(1) }),
  inputs: [1, 1],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const a = flattenAxis(ctx.attrs.axis, x.shape.length)
    return [{ dtype: x.dtype, shape: [dimProduct(x.shape.slice(0, a), symDim(ctx, 0, 0)), dimProduct(x.shape.slice(a), symDim(ctx, 0, 1))] }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const a = flattenAxis(ctx.attrs.axis, x.shape.length)
    return [view(x, [sizeOf(x.shape.slice(0, a)), sizeOf(x.shape.slice(a))])]
  },
})

/** Axes from the attribute (older opsets) or input 1 (opset 13+); undefined when not given. */
const axesArg = (attr: readonly number[] | undefined, input: Tensor | undefined): number[] | undefined =>
  attr ? [...attr] : input ? intValues(input, "axes") : undefined

/** Squeeze's axes; none given, or an empty list, means every 1-dim (as onnxruntime reads it). */
const squeezeAxes = (attr: readonly number[] | undefined, input: Tensor | undefined): number[] | undefined => {
  const axes = axesArg(attr, input)
  return axes && axes.length ? axes : undefined
}

const squeezeDims = (shape: readonly Dim[], axes: readonly number[] | undefined): Dim[] => {
  if (axes === undefined) {
    if (shape.some((d) => typeof d !== "number")) return unsupported(`squeezing every 1-dim of [${shape.join(", ")}] with symbolic dims gives an unknown rank`)
    return shape.filter((d) => d !== 1)
  }
  const ax = uniqueAxes(axes, shape.length)
  for (const a of ax) check(typeof shape[a] !== "number" || shape[a] === 1, () => `cannot squeeze axis ${a} of size ${shape[a]}`)
  return shape.filter((_, i) => !ax.includes(i))
}

const Squeeze = defineOp({
  attrs: attrs({ axes: A.optInts() }),
  inputs: [1, 2],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const axes = squeezeAxes(ctx.attrs.axes, ctx.values[1])
    if (axes === undefined && ctx.inputs[1] && !ctx.values[1]) {
      const n = staticLength(ctx.inputs[1]) ?? unsupported("the axes input's length is not static, so the output rank is unknown")
      if (n > 0) return [{ dtype: x.dtype, shape: symShape(ctx, 0, x.shape.length - n) }]
    }
    return [{ dtype: x.dtype, shape: squeezeDims(x.shape, axes) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    return [view(x, squeezeDims(x.shape, squeezeAxes(ctx.attrs.axes, ctx.inputs[1])) as number[])]
  },
})

const unsqueezeDims = (shape: readonly Dim[], axes: readonly number[]): Dim[] => {
  const rank = shape.length + axes.length
  const ax = uniqueAxes(axes, rank)
  const out: Dim[] = []
  let k = 0
  for (let i = 0; i < rank; i++) out.push(ax.includes(i) ? 1 : shape[k++])
  return out
}

const Unsqueeze = defineOp({
  attrs: attrs({ axes: A.optInts() }),
  inputs: [1, 2],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const axes = axesArg(ctx.attrs.axes, ctx.values[1])
    if (axes) return [{ dtype: x.dtype, shape: unsqueezeDims(x.shape, axes) }]
    check(ctx.inputs[1] !== undefined, "needs axes (input 1, or the 'axes' attribute before opset 13)")
    const n = staticLength(ctx.inputs[1]) ?? unsupported("the axes input's length is not static, so the output rank is unknown")
    return [{ dtype: x.dtype, shape: symShape(ctx, 0, x.shape.length + n) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const axes = axesArg(ctx.attrs.axes, ctx.inputs[1]) ?? fail("needs axes (input 1, or the 'axes' attribute before opset 13)")
    return [view(x, unsqueezeDims(x.shape, axes) as number[])]
  },
})

// ---------------------------------------------------------------------------------------------
// Shape, Size

/** Shape's [start, end) window, clamped to [0, rank]. */
const shapeWindow = (rank: number, start: number, end: number | undefined): [number, number] => {
  const clamp = (v: number) => Math.min(Math.max(v < 0 ? v + rank : v, 0), rank)
  const s = clamp(start)
  const e = clamp(end ?? rank)
  return [s, Math.max(e, s)]
}

const Shape = defineOp({
  attrs: attrs({ start: A.int(0), end: A.optInt() }),
  inputs: [1, 1],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const [s, e] = shapeWindow(inputType(ctx, 0).shape.length, ctx.attrs.start, ctx.attrs.end)
    return [{ dtype: "int64", shape: [e - s] }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const [s, e] = shapeWindow(x.shape.length, ctx.attrs.start, ctx.attrs.end)
    return [fromArray("int64", [e - s], x.shape.slice(s, e))]
  },
})

const Size = defineOp({
  attrs: attrs({}),
  inputs: [1, 1],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    inputType(ctx, 0)
    return [{ dtype: "int64", shape: [] }]
  },
  kernel: (ctx) => [scalar("int64", sizeOf(req(ctx.inputs, 0).shape))],
})

export const tensorShapeOps = {
  Reshape,
  Flatten,
  Squeeze,
  Unsqueeze,
  Shape,
  Size,
} satisfies Record<string, AnyOpDef>
