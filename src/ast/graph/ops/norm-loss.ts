// The loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (log-softmax over the class
// axis 1, then the same gather), with per-class weights, ignore_index and none/sum/mean reductions
// as ONNX's reference computes them (a weighted mean divides by the weights of the counted targets).
import { A, attrs } from "../attrs.js"
import { allocate, converter, isFloat, isInteger } from "../dtype.js"
import { check, defineOp, fail, type AnyOpDef, type InferCtx, type ValueType } from "../op.js"
import { sizeOf, tensor, type Tensor } from "../tensor.js"
import { req } from "./util.js"

const lossAttrs = attrs({ reduction: A.oneOf(["none", "sum", "mean"], "mean"), ignore_index: A.optInt() })
type LossAttrs = { readonly reduction: "none" | "sum" | "mean"; readonly ignore_index: number | undefined }

/** Scores [N, C, d1, ...] and targets [N, d1, ...]: checked, with N·D positions and C classes. */
const lossShapes = (x: { shape: readonly (number | string)[] }, t: { shape: readonly (number | string)[] }): void => {
  check(x.shape.length >= 2, () => `input must have rank ≥ 2 (N, C, ...), got rank ${x.shape.length}`)
  check(t.shape.length === x.shape.length - 1, () => `target must have rank ${x.shape.length - 1}, got ${t.shape.length}`)
  const same = (a: number | string, b: number | string) => typeof a !== "number" || typeof b !== "number" || a === b
  check(same(x.shape[0], t.shape[0]) && x.shape.slice(2).every((d, k) => same(d, t.shape[k + 1])), () =>
    `target shape [${t.shape.join(", ")}] does not match input [${x.shape.join(", ")}] without its class axis`)
}

const inferLoss = (ctx: InferCtx<LossAttrs>, withLogProb: boolean): ValueType[] => {
  const x = ctx.inputs[0] ?? fail("input 0 is required")
  const t = ctx.inputs[1] ?? fail("input 1 (target) is required")
  lossShapes(x, t)
  const loss: ValueType = { dtype: x.dtype, shape: ctx.attrs.reduction === "none" ? t.shape : [] }
  return (withLogProb ? [loss, x] : [loss]).slice(0, ctx.outputs)
}

/**
 * loss[n, d] = −logp[n, target[n, d], d] · weight[target[n, d]], 0 where target = ignore_index,
 * then reduced. `logp` is float64 [N, C, D].
 */
const nll = (logp: ArrayLike<number>, x: Tensor, target: Tensor, weight: Tensor | undefined, a: LossAttrs): Tensor => {
  const [N, C] = x.shape
  const D = sizeOf(x.shape.slice(2))
  check(isInteger(target.dtype), () => `target must be an integer tensor, got ${target.dtype}`)
  if (weight) check(weight.data.length === C, () => `weight has ${weight.data.length} values for ${C} classes`)
  const loss = new Float64Array(N * D)
  // the reference divides by the weights' sum whenever weights or ignore_index take part
  const weighted = weight !== undefined || a.ignore_index !== undefined
  let sum = 0
  let wsum = 0
  for (let n = 0; n < N; n++)
    for (let d = 0; d < D; d++) {
      const k = target.data[n * D + d]
      if (k === a.ignore_index) continue
      check(k >= 0 && k < C, () => `target ${k} is not a class index in [0, ${C})`)
      const w = weight ? weight.data[k] : 1
      const l = -logp[(n * C + k) * D + d] * w
      loss[n * D + d] = l
      sum += l
      wsum += w
    }
  const conv = converter(x.dtype)
  if (a.reduction === "none") {
    const out = allocate(x.dtype, loss.length)
    for (let i = 0; i < loss.length; i++) out[i] = conv(loss[i])
    return tensor(x.dtype, target.shape, out)
  }
  const value = a.reduction === "sum" ? sum : weighted ? sum / wsum : sum / (N * D)
  const out = allocate(x.dtype, 1)
  out[0] = conv(value)
  return tensor(x.dtype, [], out)
}

/** log-softmax over axis 1 of [N, C, D], in float64. */
const logSoftmax = (x: Tensor): Float64Array => {
  const [N, C] = x.shape
  const D = sizeOf(x.shape.slice(2))
  const out = new Float64Array(x.data.length)
  for (let n = 0; n < N; n++)
    for (let d = 0; d < D; d++) {
      const base = n * C * D + d
      let max = -Infinity
      for (let c = 0; c < C; c++) max = Math.max(max, x.data[base + c * D])
      let s = 0
      for (let c = 0; c < C; c++) s += Math.exp(x.data[base + c * D] - max)
      const lse = max + Math.log(s)
      for (let c = 0; c < C; c++) out[base + c * D] = x.data[base + c * D] - lse
    }
  return out
}

const lossInputs = (inputs: readonly (Tensor | undefined)[]): [Tensor, Tensor, Tensor | undefined] => {
  const x = req(inputs, 0)
  const t = req(inputs, 1, "target")
  check(isFloat(x.dtype), () => `input must be a float tensor, got ${x.dtype}`)
  lossShapes(x, t)
  return [x, t, inputs[2]]
}

export const normLossOps = {
  NegativeLogLikelihoodLoss: defineOp({
    attrs: lossAttrs,
    inputs: [2, 3],
    outputs: [1, 1],
    kind: "opaque",
    infer: (ctx) => inferLoss(ctx, false),
    kernel: (ctx) => {
      const [x, t, w] = lossInputs(ctx.inputs)
      return [nll(x.data, x, t, w, ctx.attrs)]
    },
  }),
  SoftmaxCrossEntropyLoss: defineOp({
    attrs: lossAttrs,
    inputs: [2, 3],
    outputs: [1, 2],
    kind: "opaque",
    infer: (ctx) => inferLoss(ctx, true),
    kernel: (ctx) => {
      const [x, t, w] = lossInputs(ctx.inputs)
      const logp = logSoftmax(x)
      const loss = nll(logp, x, t, w, ctx.attrs)
      if (ctx.outputs < 2) return [loss]
      const conv = converter(x.dtype)
      const lp = allocate(x.dtype, logp.length)
      for (let i = 0; i < logp.length; i++) lp[i] = conv(logp[i])
      return [loss, tensor(x.dtype, x.shape, lp)]
    },
  }),
} satisfies Record<string, AnyOpDef>
