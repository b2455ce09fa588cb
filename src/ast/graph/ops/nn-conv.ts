// Conv, ConvInteger and QLinearConv: N-d grouped convolution with strides, dilations, pads and
// auto_pad; the kernel shape comes from the weights. Float32 storage takes the fast im2col path.
import { A, attrs } from "../attrs.js"
import { converter, isFloat, type DType } from "../dtype.js"
import { check, defineOp, type AnyOpDef, type InferCtx, type ValueType } from "../op.js"
import { sizeOf, tensor, type Tensor } from "../tensor.js"
import { arity, inputType, req } from "./util.js"
import { kernelOf, spatialRank, windowAttrs, windowDims, windowOf, type Window, type WindowAttrs } from "./nn-common.js"
import { convFast, convNaive, type ConvSizes } from "./nn-conv-kernel.js"
import { check8bit, range8, saturate, scaleValues, shifted } from "./nn-quant.js"

const convAttrs = attrs({ ...windowAttrs, group: A.int(1) })
type ConvAttrs = WindowAttrs & { readonly group: number }

/** Output type of a convolution of input `xi` by weight `wi`. */
const inferConv = <T extends ConvAttrs>(ctx: InferCtx<T>, xi: number, wi: number, dtype: DType): ValueType[] => {
  const x = inputType(ctx, xi)
  const w = inputType(ctx, wi)
  const rank = spatialRank(x)
  check(w.shape.length === rank + 2, () => `weight rank ${w.shape.length} does not match input rank ${x.shape.length}`)
  const [c, wc] = [x.shape[1], w.shape[1]]
  if (typeof c === "number" && typeof wc === "number")
    check(wc * ctx.attrs.group === c, () => `weight has ${wc} channels per group, input has ${c} channels in ${ctx.attrs.group} groups`)
  const f = w.shape[0]
  check(ctx.attrs.group >= 1 && (typeof f !== "number" || f % ctx.attrs.group === 0), () => `group ${ctx.attrs.group} must divide the filters ${f}`)
  // the kernel is the weight's: a kernel_shape that says otherwise is refused here, as the
  // evaluator refuses it (else a compiled target would run the weight's and answer)
  const ks = ctx.attrs.kernel_shape
  if (ks && ks.length > 0)
    check(ks.length === rank && ks.every((k, i) => typeof w.shape[i + 2] !== "number" || k === w.shape[i + 2]), () =>
      `kernel_shape [${ks.join(", ")}] does not match the weight's [${w.shape.slice(2).join(", ")}]`)
  const kernel = kernelOf(ctx.attrs, w.shape)
  return [{ dtype, shape: [x.shape[0], w.shape[0], ...windowDims(ctx, x.shape.slice(2), kernel, ctx.attrs)] }]
}

/** Sizes and window of a convolution, checked against each other. */
export const convSetup = (x: Tensor, w: Tensor, a: ConvAttrs): { sizes: ConvSizes; win: Window } => {
  const rank = spatialRank(x)
  check(w.shape.length === rank + 2, () => `weight rank ${w.shape.length} does not match input rank ${x.shape.length}`)
  const [batch, channels] = x.shape
  const filters = w.shape[0]
  const group = a.group
  check(group >= 1 && channels % group === 0 && filters % group === 0, () =>
    `group ${group} must divide input channels ${channels} and filters ${filters}`)
  check(w.shape[1] * group === channels, () =>
    `weight has ${w.shape[1]} channels per group, input has ${channels} channels in ${group} groups`)
  const kernel = w.shape.slice(2)
  if (a.kernel_shape && a.kernel_shape.length > 0)
    check(a.kernel_shape.length === rank && a.kernel_shape.every((k, i) => k === kernel[i]), () =>
      `kernel_shape [${a.kernel_shape!.join(", ")}] does not match the weight's [${kernel.join(", ")}]`)
  return { sizes: { batch, channels, filters, group }, win: windowOf(x.shape.slice(2), kernel, a) }
}

const Conv = defineOp({
  attrs: convAttrs,
  inputs: arity.range(2, 3),
  outputs: arity.one,
  kind: "out-elementwise-fusable",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    check(isFloat(x.dtype), () => `Conv input must be a float tensor, got ${x.dtype}`)
    check(inputType(ctx, 1).dtype === x.dtype, () => `Conv weight type ${inputType(ctx, 1).dtype} differs from input type ${x.dtype}`)
    return inferConv(ctx, 0, 1, x.dtype)
  },
  kernel: ({ inputs, attrs: a }) => {
    const x = req(inputs, 0, "X")
    const w = req(inputs, 1, "W")
    const b = inputs[2]
    check(w.dtype === x.dtype && (!b || b.dtype === x.dtype), "Conv inputs must share one float type")
    const { sizes, win } = convSetup(x, w, a)
    if (b) check(b.data.length === sizes.filters, () => `bias has ${b.data.length} values for ${sizes.filters} filters`)
    const shape = [sizes.batch, sizes.filters, ...win.output]
    const bias = b ? (b.data as ArrayLike<number>) : undefined
    if (x.data instanceof Float32Array && w.data instanceof Float32Array)
      return [tensor(x.dtype, shape, convFast(x.data, w.data, bias, sizes, win))]
    return [tensor(x.dtype, shape, convNaive(x.data, w.data, bias, sizes, win))]
  },
})

const ConvInteger = defineOp({
  attrs: convAttrs,
  inputs: arity.range(2, 4),
  outputs: arity.one,
  kind: "opaque",
  infer: (ctx) => {
    check8bit(inputType(ctx, 0), "x")
    check8bit(inputType(ctx, 1), "w")
    return inferConv(ctx, 0, 1, "int32")
  },
  kernel: ({ inputs, attrs: a }) => {
    const x = req(inputs, 0, "x")
    const w = req(inputs, 1, "w")
    check8bit(x, "x")
    check8bit(w, "w")
    const { sizes, win } = convSetup(x, w, a)
    const shape = [sizes.batch, sizes.filters, ...win.output]
    const y = convFast(shifted(x, inputs[2], 1, "x"), shifted(w, inputs[3], 0, "w"), undefined, sizes, win, new Float64Array(sizeOf(shape)))
    return [tensor("int32", shape, Int32Array.from(y))]
  },
})

/** a·b/c in the scales' float type, as ONNX's reference computes x_scale·w_scale/y_scale. */
const scaleRatio = (a: number, b: number, c: number, dtype: DType): number => {
  const r = converter(dtype)
  return r(r(a * b) / c)
}

const QLinearConv = defineOp({
  attrs: convAttrs,
  inputs: arity.range(8, 9),
  outputs: arity.one,
  kind: "opaque",
  infer: (ctx) => {
    check8bit(inputType(ctx, 0), "x")
    check8bit(inputType(ctx, 3), "w")
    const yzp = ctx.inputs[7]
    return inferConv(ctx, 0, 3, yzp ? yzp.dtype : inputType(ctx, 0).dtype)
  },
  kernel: ({ inputs, attrs: a }) => {
    const x = req(inputs, 0, "x")
    const w = req(inputs, 3, "w")
    check8bit(x, "x")
    check8bit(w, "w")
    const xs = scaleValues(req(inputs, 1, "x_scale"), "x_scale")
    const ws = scaleValues(req(inputs, 4, "w_scale"), "w_scale")
    const ys = scaleValues(req(inputs, 6, "y_scale"), "y_scale")
    const yzp = inputs[7]
    const outType: DType = yzp ? yzp.dtype : x.dtype
    check(outType === "int8" || outType === "uint8", () => `y_zero_point must be int8 or uint8, got ${outType}`)
    check(xs.length === 1 && ys.length === 1, "x_scale and y_scale must be scalars")
    const { sizes, win } = convSetup(x, w, a)
    check(ws.length === 1 || ws.length === sizes.filters, () => `w_scale has ${ws.length} values for ${sizes.filters} filters`)
    const b = inputs[8]
    if (b) check(b.dtype === "int32" && b.data.length === sizes.filters, () => `B must be int32 with ${sizes.filters} values`)
    // integer sums stay exact: float64 accumulators and a float64 result
    const acc = convFast(
      shifted(x, inputs[2], 1, "x"),
      shifted(w, inputs[5], 0, "w"),
      b ? (b.data as ArrayLike<number>) : undefined,
      sizes,
      win,
      new Float64Array(sizes.batch * sizes.filters * sizeOf(win.output)),
    )
    const scaleType = req(inputs, 1).dtype
    const mult = Array.from({ length: sizes.filters }, (_, m) => scaleRatio(xs[0], ws[ws.length === 1 ? 0 : m], ys[0], scaleType))
    const z = yzp ? (yzp.data[0] as number) : 0
    const [lo, hi] = range8(outType)
    const per = acc.length / (sizes.batch * sizes.filters)
    const out = outType === "int8" ? new Int8Array(acc.length) : new Uint8Array(acc.length)
    for (let i = 0; i < acc.length; i++) out[i] = saturate(acc[i] * mult[Math.floor(i / per) % sizes.filters], z, lo, hi)
    return [tensor(outType, [sizes.batch, sizes.filters, ...win.output], out)]
  },
})

export const convOps = { Conv, ConvInteger, QLinearConv } satisfies Record<string, AnyOpDef>

