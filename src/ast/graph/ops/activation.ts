// Activation functions: scalar functions of one input (with their ONNX attribute defaults), in
// float64, on the shared elementwise kernels; PRelu broadcasts its slope onto X.
import { A, attrs } from "../attrs.js"
import { check, defineOp, type AnyOpDef, type Dim } from "../op.js"
import { showShape } from "../tensor.js"
import { fast1, fast2, mapBinary, unary, unaryOp, type Run1, type Run2, type Scalar1, type Scalar2 } from "./elementwise-kernels.js"
import { erf } from "./elementwise-math.js"
import { inputType, req } from "./util.js"

const sigmoid: Scalar1 = (x) => {
  if (x >= 0) return 1 / (1 + Math.exp(-x))
  const e = Math.exp(x)
  return e / (1 + e)
}
/** log(1 + e^x) without overflow for large x or loss for very negative x. */
const softplus: Scalar1 = (x) => (x > 0 ? x + Math.log1p(Math.exp(-x)) : Math.log1p(Math.exp(x)))

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI)
const relu: Scalar1 = (x) => (x > 0 ? x : x === x ? 0 : x) // NaN stays NaN
const geluErf: Scalar1 = (x) => 0.5 * x * (1 + erf(x / Math.SQRT2))
const geluTanh: Scalar1 = (x) => 0.5 * x * (1 + Math.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
const hardSwish: Scalar1 = (x) => x * Math.max(0, Math.min(1, x / 6 + 0.5))

// the hot ones written out as runs (see Run1)
const RELU: Run1 = (out, x, n) => {
  for (let i = 0; i < n; i++) out[i] = relu(x[i])
}
const SIGMOID: Run1 = (out, x, n) => {
  for (let i = 0; i < n; i++) out[i] = sigmoid(x[i])
}
const GELU_ERF: Run1 = (out, x, n) => {
  for (let i = 0; i < n; i++) out[i] = geluErf(x[i])
}
const GELU_TANH: Run1 = (out, x, n) => {
  for (let i = 0; i < n; i++) out[i] = geluTanh(x[i])
}
const HARD_SWISH: Run1 = (out, x, n) => {
  for (let i = 0; i < n; i++) out[i] = hardSwish(x[i])
}
const prelu: Scalar2 = (v, s) => (v < 0 ? v * s : v)
const PRELU: Run2 = (out, o, a, ai, sa, b, bi, sb, n) => {
  for (let j = 0; j < n; j++) out[o + j] = prelu(a[ai + j * sa], b[bi + j * sb])
}

/**
 * PRelu's slope shape lined up with X. From opset 7 the slope broadcasts unidirectionally (NumPy,
 * onto X); before, a 1-D slope of X's channel count applies along axis 1.
 */
const slopeShape = <D extends Dim>(x: readonly D[], slope: readonly D[], opset: number): readonly (D | 1)[] => {
  const perChannel = opset < 7 && slope.length === 1 && x.length > 2 && slope[0] === x[1] && slope[0] !== 1
  const s: readonly (D | 1)[] = perChannel ? [slope[0], ...new Array<1>(x.length - 2).fill(1)] : slope
  const off = x.length - s.length
  check(
    off >= 0 && s.every((d, i) => d === 1 || d === x[off + i] || typeof d === "string" || typeof x[off + i] === "string"),
    () => `slope of shape ${showShape(slope)} does not broadcast onto X of shape ${showShape(x)}`,
  )
  return s
}

export const activationOps = {
  Relu: unary(relu, { run: RELU }),
  LeakyRelu: unaryOp({
    attrs: attrs({ alpha: A.float(0.01) }),
    fn: ({ alpha }, dtype) => {
      const run: Run1 = (out, x, n) => {
        for (let i = 0; i < n; i++) out[i] = x[i] >= 0 ? x[i] : alpha * x[i]
      }
      return fast1(dtype, run, (x) => (x >= 0 ? x : alpha * x))
    },
  }),
  PRelu: defineOp({
    attrs: attrs({}),
    inputs: [2, 2],
    outputs: [1, 1],
    kind: "broadcast",
    infer: (ctx) => {
      const x = inputType(ctx, 0)
      slopeShape(x.shape, inputType(ctx, 1).shape, ctx.opset)
      return [x]
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const slope = req(ctx.inputs, 1)
      return [mapBinary(x, slope, fast2(x.dtype, PRELU, prelu), x.dtype, slopeShape(x.shape, slope.shape, ctx.opset))]
    },
  }),
  Elu: unaryOp({ attrs: attrs({ alpha: A.float(1) }), fn: ({ alpha }) => (x) => (x >= 0 ? x : alpha * Math.expm1(x)) }),
  Selu: unaryOp({
    // the spec's defaults are these float32 values
    attrs: attrs({ alpha: A.float(1.67326319217681884765625), gamma: A.float(1.05070102214813232421875) }),
    fn: ({ alpha, gamma }) => (x) => (x > 0 ? gamma * x : gamma * alpha * Math.expm1(x)),
  }),
  Celu: unaryOp({
    attrs: attrs({ alpha: A.float(1) }),
    fn: ({ alpha }) => (x) => Math.max(0, x) + Math.min(0, alpha * Math.expm1(x / alpha)),
  }),
  Gelu: unaryOp({
    attrs: attrs({ approximate: A.oneOf(["none", "tanh"], "none") }),
    fn: ({ approximate }, dtype) => (approximate === "tanh" ? fast1(dtype, GELU_TANH, geluTanh) : fast1(dtype, GELU_ERF, geluErf)),
  }),
  HardSigmoid: unaryOp({
    attrs: attrs({ alpha: A.float(0.2), beta: A.float(0.5) }),
    fn: ({ alpha, beta }) => (x) => Math.max(0, Math.min(1, alpha * x + beta)),
  }),
  HardSwish: unary(hardSwish, { run: HARD_SWISH }),
  Sigmoid: unary(sigmoid, { run: SIGMOID }),
  Softplus: unary(softplus),
  Softsign: unary((x) => x / (1 + Math.abs(x))),
  Mish: unary((x) => x * Math.tanh(softplus(x))),
  ThresholdedRelu: unaryOp({ attrs: attrs({ alpha: A.float(1) }), fn: ({ alpha }) => (x) => (x > alpha ? x : 0) }),
  Shrink: unaryOp({
    attrs: attrs({ bias: A.float(0), lambd: A.float(0.5) }),
    fn: ({ bias, lambd }) => (x) => (x < -lambd ? x + bias : x > lambd ? x - bias : 0),
  }),
  Swish: unaryOp({ attrs: attrs({ alpha: A.float(1) }), fn: ({ alpha }) => (x) => x * sigmoid(alpha * x) }),
} satisfies Record<string, AnyOpDef>
