// Motifs of convolutional networks for the model-like generator, on an NCHW activation:
// Conv(+bias) → BatchNormalization → activation with the BN statistics matched to the conv's
// output channel (so variances run down to 1e-4 without blowing the values up, as in a trained
// network), residual blocks (identity or strided 1×1 shortcut), squeeze-and-excitation, pooling,
// and per-channel broadcasts. Windows draw strides 1, 2 and uneven, symmetric, asymmetric and zero
// pads, every auto_pad, dilation and ceil_mode; channel counts make several vector blocks.
import { attr, type AttrValue } from "./attrs.js"
import { randomTensor, type GraphBuilder, type Rng, type Val } from "./arbitrary-builder.js"
import { windowOf, type AutoPad } from "./ops/nn-common.js"
import { fromArray, sizeOf } from "./tensor.js"

type Attrs = Record<string, AttrValue>

/** Channel counts of the model-like generator: several blocks of 4, 8 and 16 lanes, and a few odd ones. */
export const MODEL_CHANNELS = [8, 16, 24, 32, 8, 16, 3, 6] as const

/** Epsilons of BatchNormalization and LayerNormalization: the default, and the large ones real models use. */
export const NORM_EPSILONS = [1e-5, 1e-5, 1e-3, 1e-2, 1e-1] as const

/** The spatial output of a window over `x` (NCHW), or undefined when it does not fit. */
const windowOut = (x: Val, kernel: readonly number[], a: Attrs, ceil = false): number[] | undefined => {
  const ints = (k: string) => (a[k]?.value as readonly number[] | undefined) ?? undefined
  const autoPad = ((a.auto_pad?.value as string | undefined) ?? "NOTSET") as AutoPad
  const room = x.shape.slice(2).every((d, i) => {
    const span = (kernel[i] - 1) * (ints("dilations")?.[i] ?? 1) + 1
    const pads = ints("pads")
    return autoPad === "SAME_UPPER" || autoPad === "SAME_LOWER" || d + (autoPad === "NOTSET" && pads ? pads[i] + pads[i + 2] : 0) >= span
  })
  if (!room) return undefined
  const win = windowOf(x.shape.slice(2), kernel, { auto_pad: autoPad, dilations: ints("dilations"), kernel_shape: undefined, pads: ints("pads"), strides: ints("strides") }, ceil)
  return win.output.every((d) => d >= 1) ? [...win.output] : undefined
}

/**
 * Window attributes for `kernel`: strides 1, 2 or uneven; dilation sometimes; pads symmetric,
 * asymmetric, zero, or an auto_pad. Pads stay below the kernel's span, as ONNX asks.
 */
export const windowAttrs = (rng: Rng, x: Val, kernel: readonly number[], o: { readonly strided: boolean; readonly dilate: boolean }): Attrs => {
  const strides = o.strided ? rng.pick([[1, 1], [2, 2], [2, 2], [1, 2], [2, 1]]) : [1, 1]
  const dilations = o.dilate && kernel.some((k) => k > 1) && rng.next() < 0.2 ? rng.pick([[2, 2], [1, 2], [2, 1]]) : [1, 1]
  const span = kernel.map((k, i) => (k - 1) * dilations[i] + 1)
  const a: Attrs = { kernel_shape: attr.ints(kernel) }
  if (strides.some((s) => s !== 1)) a.strides = attr.ints(strides)
  if (dilations.some((d) => d !== 1)) a.dilations = attr.ints(dilations)
  const r = rng.next()
  if (r < 0.3) a.pads = attr.ints([...span, ...span].map((s) => Math.floor(s / 2)))
  else if (r < 0.55) a.pads = attr.ints([...span, ...span].map((s) => rng.int(0, s - 1)))
  else if (r < 0.65) a.pads = attr.ints([0, 0, 0, 0])
  else if (r < 0.9) a.auto_pad = attr.str(rng.pick(["SAME_UPPER", "SAME_LOWER"]))
  else a.auto_pad = attr.str("VALID")
  if (windowOut(x, kernel, a)) return a
  // the window does not fit the image: the same kernel, stride 1, padded to keep the size
  return { kernel_shape: attr.ints(kernel), pads: attr.ints([...kernel, ...kernel].map((k) => Math.floor(k / 2))) }
}

/** Per-output-channel scales σ: log-uniform in [0.02, 1], as the channels of a trained conv differ. */
const channelScales = (rng: Rng, O: number): number[] => Array.from({ length: O }, () => Math.exp(rng.float(Math.log(0.02), 0)))

export interface ConvOptions {
  readonly O?: number
  readonly strided?: boolean
  /** Keep the spatial size (stride 1, "same" padding). */
  readonly same?: boolean
  readonly kernel?: readonly number[]
  readonly bias?: boolean
  /** Per-output-channel weight scales (default 1). */
  readonly scales?: readonly number[]
  /** The group count (default: depthwise 20% of the time when O is not given, else 1). */
  readonly group?: number
  /** The window attributes (default: drawn by windowAttrs, or "same" padding). */
  readonly attrs?: Attrs
}

/** A Conv on `x` (NCHW) with weights ~ U(-1, 1)·σ_o/√fan-in and, by default, a bias ~ U(-½, ½)·σ_o. */
export const conv = (b: GraphBuilder, x: Val, o: ConvOptions = {}): Val => {
  const { rng } = b
  const C = x.shape[1]
  const group = o.group ?? (C > 1 && o.O === undefined && rng.next() < 0.2 ? C : 1)
  const O = o.O ?? (group === C && C > 1 ? C : rng.pick(b.channels))
  const kernel = o.kernel ?? rng.pick([[1, 1], [3, 3], [3, 3], [3, 3], [1, 3], [3, 1]])
  const attrs: Attrs = o.attrs
    ? { ...o.attrs }
    : o.same
    ? { kernel_shape: attr.ints(kernel), ...(rng.next() < 0.5 ? { pads: attr.ints([...kernel, ...kernel].map((k) => Math.floor(k / 2))) } : { auto_pad: attr.str("SAME_UPPER") }) }
    : windowAttrs(rng, x, kernel, { strided: o.strided ?? true, dilate: true })
  if (group !== 1) attrs.group = attr.int(group)
  const scales = o.scales ?? new Array<number>(O).fill(1)
  const fanIn = (C / group) * kernel[0] * kernel[1]
  const w = randomTensor(rng, [O, C / group, ...kernel], -1, 1)
  const wd = w.data as Float32Array
  for (let i = 0; i < wd.length; i++) wd[i] = Math.fround((wd[i] * scales[Math.floor(i / fanIn)]) / Math.sqrt(fanIn))
  const bias = o.bias ?? rng.next() < 0.7
  const ins = [x, b.constant(w, "w")]
  if (bias) ins.push(b.constant(fromArray("float32", [O], scales.map((s) => s * rng.float(-0.5, 0.5))), "b"))
  return b.op1("Conv", ins, attrs)
}

/** BatchNormalization of `x` whose running statistics fit a conv output of channel scales σ. */
export const batchNorm = (b: GraphBuilder, x: Val, scales?: readonly number[]): Val => {
  const { rng } = b
  const C = x.shape[1]
  const s = scales ?? new Array<number>(C).fill(1)
  const mean = Array.from({ length: C }, (_, c) => s[c] * rng.float(-0.3, 0.3))
  const variance = Array.from({ length: C }, (_, c) => Math.max(1e-4, s[c] * s[c] * rng.float(0.05, 0.4)))
  const t = (v: readonly number[]) => b.constant(fromArray("float32", [C], v), "bn")
  return b.op1("BatchNormalization", [x, t(Array.from({ length: C }, () => rng.float(0.5, 1.5))), t(Array.from({ length: C }, () => rng.float(-1, 1))), t(mean), t(variance)], {
    epsilon: attr.float(rng.pick(NORM_EPSILONS)),
  })
}

/** An activation as networks use them: Relu, Relu6 (Clip), LeakyRelu, SiLU (x·Sigmoid x), HardSwish, or none. */
export const activation = (b: GraphBuilder, x: Val): Val => {
  const { rng } = b
  switch (rng.int(0, 5)) {
    case 0:
    case 1:
      return b.op1("Relu", [x])
    case 2: {
      const lo = b.constant(fromArray("float32", [], [0]))
      const hi = b.constant(fromArray("float32", [], [6]))
      return b.op1("Clip", [x, lo, hi])
    }
    case 3:
      return b.op1("LeakyRelu", [x], { alpha: attr.float(rng.pick([0.01, 0.1, 0.2])) })
    case 4:
      return b.op1("Mul", [x, b.op1("Sigmoid", [x])])
    default:
      return rng.next() < 0.5 ? b.op1("HardSwish", [x]) : x
  }
}

/** Conv(+bias; dense, depthwise or 2 groups) → BatchNormalization (statistics matched to the channel) → activation. */
export const convBnAct = (b: GraphBuilder, x: Val, o: ConvOptions = {}): Val => {
  const { rng } = b
  const C = x.shape[1]
  const r = rng.next()
  const group = o.group ?? (C > 1 && r < 0.25 ? C : C % 2 === 0 && (o.O ?? 2) % 2 === 0 && r < 0.35 ? 2 : 1)
  const even = b.channels.filter((c) => c % 2 === 0)
  const O = group === C && C > 1 ? C : (o.O ?? (group === 2 ? rng.pick(even.length ? even : [8]) : rng.pick(b.channels)))
  const scales = channelScales(rng, O)
  const c = conv(b, x, { ...o, O, group, scales })
  return activation(b, batchNorm(b, c, scales))
}

/** A residual block: two conv-BN layers and an identity shortcut, or a strided one through a 1×1 conv-BN. */
export const residual = (b: GraphBuilder, x: Val): Val => {
  const { rng } = b
  const C = x.shape[1]
  const down = x.shape[2] >= 4 && x.shape[3] >= 4 && rng.next() < 0.4
  if (!down) {
    const y = convBnAct(b, x, { O: C, same: true, kernel: [3, 3] })
    const scales = channelScales(rng, C)
    const z = batchNorm(b, conv(b, y, { O: C, same: true, kernel: [3, 3], scales, group: 1 }), scales)
    return b.op1("Relu", [b.op1("Add", [z, x])])
  }
  // a 3×3 stride 2 pad 1 conv and a 1×1 stride 2 conv give ⌈H/2⌉ × ⌈W/2⌉ both
  const O = rng.pick(b.channels)
  const main = (v: Val, kernel: number[]) => {
    const scales = channelScales(rng, O)
    const attrs = { kernel_shape: attr.ints(kernel), strides: attr.ints([2, 2]), pads: attr.ints([...kernel, ...kernel].map((k) => Math.floor(k / 2))) }
    return batchNorm(b, conv(b, v, { O, kernel, attrs, scales, bias: true, group: 1 }), scales)
  }
  const y = b.op1("Relu", [main(x, [3, 3])])
  const z = batchNorm(b, conv(b, y, { O, same: true, kernel: [3, 3], group: 1 }))
  return b.op1("Relu", [b.op1("Add", [z, main(x, [1, 1])])])
}

/** Squeeze-and-excitation: GlobalAveragePool → 1×1 conv → Relu → 1×1 conv → Sigmoid, times x ([N,C,1,1] against [N,C,H,W]). */
export const squeezeExcite = (b: GraphBuilder, x: Val): Val => {
  const C = x.shape[1]
  const s = b.op1("GlobalAveragePool", [x])
  const r = b.op1("Relu", [conv(b, s, { O: Math.max(2, Math.floor(C / 4)), kernel: [1, 1], strided: false, bias: true, group: 1 })])
  const e = b.op1("Sigmoid", [conv(b, r, { O: C, kernel: [1, 1], strided: false, bias: true, group: 1 })])
  return b.rng.next() < 0.5 ? b.op1("Mul", [x, e]) : b.op1("Mul", [e, x])
}

/** MaxPool or AveragePool: kernels 2 and 3 (uneven too), strides, pads, auto_pad, dilation (max), ceil_mode, count_include_pad. */
export const pool = (b: GraphBuilder, x: Val): Val => {
  const { rng } = b
  const max = rng.next() < 0.5
  const kernel = rng.pick([[2, 2], [3, 3], [2, 3], [3, 2], [1, 2]])
  const a = windowAttrs(rng, x, kernel, { strided: true, dilate: max })
  if (rng.next() < 0.3 && windowOut(x, kernel, a, true)) a.ceil_mode = attr.int(1)
  if (!max && rng.next() < 0.5) a.count_include_pad = attr.int(1)
  return b.op1(max ? "MaxPool" : "AveragePool", [x], a)
}

/** Same-rank size-1 broadcasts: x − mean over HW (keepdims), x·scale[1,C,1,1] + shift[C,1,1], or a spatial gate [N,1,H,W]. */
export const channelBroadcast = (b: GraphBuilder, x: Val): Val => {
  const { rng } = b
  const C = x.shape[1]
  const axes = (xs: number[]) => b.constant(fromArray("int64", [xs.length], xs), "axes")
  switch (rng.int(0, 3)) {
    case 0:
      return b.op1("Sub", [x, b.op1("ReduceMean", [x, axes([2, 3])], { keepdims: attr.int(1) })])
    case 1: {
      const scale = b.constant(randomTensor(rng, [1, C, 1, 1], 0.5, 1.5))
      const shift = b.constant(randomTensor(rng, [C, 1, 1], -0.5, 0.5))
      return b.op1("Add", [b.op1("Mul", [x, scale]), shift])
    }
    case 2:
      return b.op1("Mul", [x, b.op1("Sigmoid", [b.op1("ReduceMean", [x, axes([1])], { keepdims: attr.int(1) })])])
    default: {
      const m = b.op1("ReduceMax", [x, axes([1, 2, 3])], { keepdims: attr.int(1) })
      return b.op1("Div", [x, b.op1("Add", [b.op1("Abs", [m]), b.constant(fromArray("float32", [1, 1, 1, 1], [1]))])])
    }
  }
}

/** GlobalAveragePool or GlobalMaxPool → Flatten: the [N, C] features of a classifier head. */
export const head = (b: GraphBuilder, x: Val): Val => {
  const g = b.op1(b.rng.next() < 0.7 ? "GlobalAveragePool" : "GlobalMaxPool", [x])
  return b.op1("Flatten", [g], { axis: attr.int(1) })
}

/** [N, C, H, W] → [N, H·W, C]: image patches as the tokens of a transformer. */
export const toTokens = (b: GraphBuilder, x: Val): Val => {
  const [N, C, H, W] = x.shape
  const r = b.op1("Reshape", [x, b.constant(fromArray("int64", [3], [N, C, H * W]), "shape")])
  return b.op1("Transpose", [r], { perm: attr.ints([0, 2, 1]) })
}

export const fitsImage = (x: Val): boolean => x.dtype === "float32" && x.shape.length === 4 && sizeOf(x.shape) <= 8192
