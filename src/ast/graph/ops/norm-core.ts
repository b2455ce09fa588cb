// Normalization ops in their inference forms: BatchNormalization (running statistics),
// LayerNormalization, InstanceNormalization, LRN — statistics in float64, stored in the input's dtype.
import { A, attrs } from "../attrs.js"
import { allocate, converter } from "../dtype.js"
import { check, defineOp, fail, unsupported, type AnyOpDef } from "../op.js"
import { normAxis, sizeOf, tensor, type Tensor } from "../tensor.js"
import { inferSame, req } from "./util.js"

/** y[n, c, ...] = x · s[c] + t[c] over a channel axis 1. */
const perChannel = (x: Tensor, s: Float64Array, t: Float64Array): Tensor => {
  const [N, C] = [x.shape[0], x.shape.length > 1 ? x.shape[1] : 1]
  const inner = x.shape.length > 2 ? sizeOf(x.shape.slice(2)) : 1
  const out = allocate(x.dtype, x.data.length)
  const conv = converter(x.dtype)
  for (let n = 0; n < N; n++)
    for (let c = 0; c < C; c++) {
      const base = (n * C + c) * inner
      for (let i = 0; i < inner; i++) out[base + i] = conv(x.data[base + i] * s[c] + t[c])
    }
  return tensor(x.dtype, x.shape, out)
}

export const normCoreOps = {
  BatchNormalization: defineOp({
    attrs: attrs({ epsilon: A.float(1e-5), momentum: A.float(0.9), training_mode: A.int(0), spatial: A.int(1), is_test: A.int(0) }),
    inputs: [5, 5],
    outputs: [1, 5],
    kind: "broadcast",
    infer: (ctx) => {
      const x = ctx.inputs[0] ?? fail("input X is required")
      const mean = ctx.inputs[3] ?? fail("input mean is required")
      return [x, mean, mean, mean, mean].slice(0, ctx.outputs)
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const [scale, bias, mean, variance] = [1, 2, 3, 4].map((k) => req(ctx.inputs, k))
      if (ctx.attrs.training_mode || (ctx.opset < 14 && ctx.outputs > 1 && ctx.opset >= 7)) unsupported("BatchNormalization in training mode")
      if (ctx.attrs.spatial === 0 && ctx.opset < 9) unsupported("BatchNormalization with spatial=0")
      const C = x.shape.length > 1 ? x.shape[1] : 1
      check(scale.data.length === C, () => `scale has ${scale.data.length} values for ${C} channels`)
      const s = new Float64Array(C)
      const t = new Float64Array(C)
      for (let c = 0; c < C; c++) {
        s[c] = scale.data[c] / Math.sqrt(variance.data[c] + ctx.attrs.epsilon)
        t[c] = bias.data[c] - mean.data[c] * s[c]
      }
      return [perChannel(x, s, t)]
    },
  }),
  LayerNormalization: defineOp({
    attrs: attrs({ axis: A.int(-1), epsilon: A.float(1e-5), stash_type: A.int(1) }),
    inputs: [2, 3],
    outputs: [1, 3],
    kind: "opaque",
    infer: (ctx) => {
      const x = ctx.inputs[0] ?? fail("input X is required")
      const axis = normAxis(ctx.attrs.axis, x.shape.length)
      const stat = { dtype: ctx.attrs.stash_type === 1 ? ("float32" as const) : x.dtype, shape: x.shape.map((d, i) => (i < axis ? d : 1)) }
      return [x, stat, stat].slice(0, ctx.outputs)
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const scale = req(ctx.inputs, 1)
      const bias = ctx.inputs[2]
      const axis = normAxis(ctx.attrs.axis, x.shape.length)
      const outer = sizeOf(x.shape.slice(0, axis))
      const inner = sizeOf(x.shape.slice(axis))
      check(scale.data.length === inner || scale.data.length === 1, () => `scale has ${scale.data.length} values, the normalized dims ${inner}`)
      const out = allocate(x.dtype, x.data.length)
      const conv = converter(x.dtype)
      const statType = ctx.attrs.stash_type === 1 ? "float32" : x.dtype
      const means = allocate(statType, outer)
      const invs = allocate(statType, outer)
      const at = (t: Tensor, i: number) => (t.data.length === 1 ? t.data[0] : t.data[i])
      for (let o = 0; o < outer; o++) {
        let m = 0
        for (let i = 0; i < inner; i++) m += x.data[o * inner + i]
        m /= inner
        let v = 0
        for (let i = 0; i < inner; i++) v += (x.data[o * inner + i] - m) ** 2
        v /= inner
        const inv = 1 / Math.sqrt(v + ctx.attrs.epsilon)
        means[o] = m
        invs[o] = inv
        for (let i = 0; i < inner; i++) out[o * inner + i] = conv((x.data[o * inner + i] - m) * inv * at(scale, i) + (bias ? at(bias, i) : 0))
      }
      const statShape = x.shape.map((d, i) => (i < axis ? d : 1))
      return [tensor(x.dtype, x.shape, out), tensor(statType, statShape, means), tensor(statType, statShape, invs)].slice(0, ctx.outputs)
    },
  }),
  InstanceNormalization: defineOp({
    attrs: attrs({ epsilon: A.float(1e-5) }),
    inputs: [3, 3],
    outputs: [1, 1],
    kind: "opaque",
    infer: inferSame(0),
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const scale = req(ctx.inputs, 1)
      const bias = req(ctx.inputs, 2)
      const [N, C] = x.shape
      const inner = sizeOf(x.shape.slice(2))
      const out = allocate(x.dtype, x.data.length)
      const conv = converter(x.dtype)
      for (let n = 0; n < N; n++)
        for (let c = 0; c < C; c++) {
          const base = (n * C + c) * inner
          let m = 0
          for (let i = 0; i < inner; i++) m += x.data[base + i]
          m /= inner
          let v = 0
          for (let i = 0; i < inner; i++) v += (x.data[base + i] - m) ** 2
          v /= inner
          const inv = 1 / Math.sqrt(v + ctx.attrs.epsilon)
          for (let i = 0; i < inner; i++) out[base + i] = conv((x.data[base + i] - m) * inv * scale.data[c] + bias.data[c])
        }
      return [tensor(x.dtype, x.shape, out)]
    },
  }),
  LRN: defineOp({
    attrs: attrs({ alpha: A.float(0.0001), beta: A.float(0.75), bias: A.float(1), size: A.int() }),
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "opaque",
    infer: inferSame(0),
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      check(x.shape.length >= 2, "LRN needs an input of rank ≥ 2 (N, C, ...)")
      const [N, C] = x.shape
      const inner = sizeOf(x.shape.slice(2))
      const { alpha, beta, bias, size } = ctx.attrs
      const lo = Math.floor((size - 1) / 2)
      const hi = Math.ceil((size - 1) / 2)
      const out = allocate(x.dtype, x.data.length)
      const conv = converter(x.dtype)
      for (let n = 0; n < N; n++)
        for (let c = 0; c < C; c++)
          for (let i = 0; i < inner; i++) {
            let sq = 0
            for (let k = Math.max(0, c - lo); k <= Math.min(C - 1, c + hi); k++) sq += x.data[(n * C + k) * inner + i] ** 2
            const v = x.data[(n * C + c) * inner + i]
            out[(n * C + c) * inner + i] = conv(v / Math.pow(bias + (alpha / size) * sq, beta))
          }
      return [tensor(x.dtype, x.shape, out)]
    },
  }),
} satisfies Record<string, AnyOpDef>
