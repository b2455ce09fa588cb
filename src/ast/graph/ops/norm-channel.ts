// Normalizations over the channel axis 1 of (N, C, D1, ...): BatchNormalization (running
// statistics, or batch statistics in training mode), InstanceNormalization (per sample and
// channel) and GroupNormalization (per sample and group of channels). Statistics in float64,
// results stored in the input's dtype.
import { A, attrs } from "../attrs.js"
import { allocate, converter } from "../dtype.js"
import { check, defineOp, fail, type AnyOpDef, type ValueType } from "../op.js"
import { sizeOf, tensor, type Tensor } from "../tensor.js"
import { meanVar, perChannel, stashDType } from "./norm-common.js"
import { inferSame, req } from "./util.js"

/** x of rank ≥ 2 (or 1: one channel) seen as [N, C, inner]. */
const nci = (x: Tensor): [number, number, number] => {
  const N = x.shape.length > 0 ? x.shape[0] : 1
  const C = x.shape.length > 1 ? x.shape[1] : 1
  return [N, C, x.shape.length > 2 ? sizeOf(x.shape.slice(2)) : 1]
}

/** y = s[c] · (x − m[c]) / √(v[c] + ε) + b[c] over [N, C, inner] (C×inner = P·Q with P params). */
const affine = (x: Tensor, P: number, Q: number, s: Float64Array, b: Float64Array, m: Float64Array, v: Float64Array, eps: number): Tensor => {
  const out = allocate(x.dtype, x.data.length)
  const conv = converter(x.dtype)
  const N = x.data.length / (P * Q)
  for (let p = 0; p < P; p++) {
    const inv = 1 / Math.sqrt(v[p] + eps)
    for (let n = 0; n < N; n++) {
      const base = (n * P + p) * Q
      for (let i = 0; i < Q; i++) out[base + i] = conv((s[p] * (x.data[base + i] - m[p])) * inv + b[p])
    }
  }
  return tensor(x.dtype, x.shape, out)
}

/** Mean and population variance per parameter p over all n and i of [N, P, Q]. */
const batchStats = (x: Tensor, P: number, Q: number): [Float64Array, Float64Array] => {
  const N = x.data.length / (P * Q)
  const mean = new Float64Array(P)
  const variance = new Float64Array(P)
  const count = N * Q
  for (let p = 0; p < P; p++) {
    let m = 0
    for (let n = 0; n < N; n++) for (let i = 0, base = (n * P + p) * Q; i < Q; i++) m += x.data[base + i]
    m /= count
    let v = 0
    for (let n = 0; n < N; n++)
      for (let i = 0, base = (n * P + p) * Q; i < Q; i++) {
        const d = x.data[base + i] - m
        v += d * d
      }
    mean[p] = m
    variance[p] = v / count
  }
  return [mean, variance]
}

export const batchNormTraining = (ctx: { opset: number; outputs: number; attrs: { training_mode: number } }): boolean =>
  // opset 14 on: the attribute says; before, the optional statistics outputs mark training mode
  ctx.opset >= 14 ? ctx.attrs.training_mode !== 0 : ctx.outputs > 1

/**
 * Group normalization of x [N, C, inner] in `G` groups of C/G channels, then the per-channel
 * affine transform s[c]·x̂ + b[c]. InstanceNormalization is G = C.
 */
const groupNorm = (x: Tensor, G: number, s: Float64Array, b: Float64Array, eps: number): Tensor => {
  const [N, C, inner] = nci(x)
  check(G > 0 && C % G === 0, () => `${C} channels do not split into ${G} groups`)
  const per = C / G
  const len = per * inner
  const out = allocate(x.dtype, x.data.length)
  const conv = converter(x.dtype)
  for (let n = 0; n < N; n++)
    for (let g = 0; g < G; g++) {
      const start = (n * G + g) * len
      const [m, v] = meanVar(x.data, start, len)
      const inv = 1 / Math.sqrt(v + eps)
      for (let k = 0; k < per; k++) {
        const c = g * per + k
        const base = start + k * inner
        for (let i = 0; i < inner; i++) out[base + i] = conv((x.data[base + i] - m) * inv * s[c] + b[c])
      }
    }
  return tensor(x.dtype, x.shape, out)
}

export const normChannelOps = {
  BatchNormalization: defineOp({
    // is_test / spatial / consumed_inputs (opsets 1-8) are read only where they change the meaning
    attrs: attrs({ epsilon: A.float(1e-5), momentum: A.float(0.9), training_mode: A.int(0), spatial: A.int(1) }),
    inputs: [5, 5],
    outputs: [1, 5],
    kind: "broadcast",
    infer: (ctx) => {
      const x = ctx.inputs[0] ?? fail("input X is required")
      const mean = ctx.inputs[3] ?? fail("input mean is required")
      const stats: ValueType = { dtype: ctx.opset >= 14 ? mean.dtype : x.dtype, shape: mean.shape }
      check(ctx.outputs === 1 || batchNormTraining(ctx), "BatchNormalization has statistics outputs only in training mode (training_mode=1)")
      // the per-channel parameters' counts, as the kernel checks them (a compiled target reads C of each)
      const C = x.shape[1]
      const legacy = ctx.opset < 9 && ctx.attrs.spatial === 0
      if (typeof C === "number" && !legacy)
        for (const [k, what] of [[1, "scale"], [2, "B"], [3, "mean"], [4, "var"]] as const) {
          const t = ctx.inputs[k]
          if (t && t.shape.every((d): d is number => typeof d === "number")) {
            const n = t.shape.reduce((a, b) => a * b, 1)
            check(n === C || n === 1, () => `${what} has ${n} values for ${C} channels`)
          }
        }
      return [x, ...Array.from({ length: ctx.outputs - 1 }, () => stats)]
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const [scale, bias, mean, variance] = [1, 2, 3, 4].map((k) => req(ctx.inputs, k))
      const [, C, inner] = nci(x)
      // spatial=0 (before opset 9): one statistic per activation of [C, D1, ...], not per channel
      const perActivation = ctx.opset < 9 && ctx.attrs.spatial === 0 && scale.data.length === C * inner && inner > 1
      const [P, Q] = perActivation ? [C * inner, 1] : [C, inner]
      const [s, b, m, v] = [scale, bias, mean, variance].map((t, k) => perChannel(t, P, ["scale", "B", "mean", "var"][k]))
      const eps = ctx.attrs.epsilon
      check(ctx.outputs === 1 || batchNormTraining(ctx), "BatchNormalization has statistics outputs only in training mode (training_mode=1)")
      if (!batchNormTraining(ctx)) return [affine(x, P, Q, s, b, m, v, eps)]
      check(x.data.length > 0, "BatchNormalization in training mode needs a non-empty batch")
      // training mode, as ONNX's reference: normalize with the batch statistics, and blend them
      // into the running ones with `momentum`
      const [bm, bv] = batchStats(x, P, Q)
      const mom = ctx.attrs.momentum
      const statType = ctx.opset >= 14 ? mean.dtype : x.dtype
      const stat = (vals: Float64Array): Tensor => {
        const conv = converter(statType)
        const out = allocate(statType, vals.length)
        for (let i = 0; i < vals.length; i++) out[i] = conv(vals[i])
        return tensor(statType, mean.shape, out)
      }
      const running = (old: Float64Array, batch: Float64Array) => stat(old.map((o, p) => o * mom + batch[p] * (1 - mom)))
      const y = affine(x, P, Q, s, b, bm, bv, eps)
      const outs = ctx.opset >= 14 ? [y, running(m, bm), running(v, bv)] : [y, running(m, bm), running(v, bv), stat(bm), stat(bv)]
      return outs.slice(0, Math.max(1, ctx.outputs))
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
      check(x.shape.length >= 2, () => `InstanceNormalization needs an input of rank ≥ 2 (N, C, ...), got rank ${x.shape.length}`)
      const C = x.shape[1]
      return [groupNorm(x, C, perChannel(req(ctx.inputs, 1), C, "scale"), perChannel(req(ctx.inputs, 2), C, "B"), ctx.attrs.epsilon)]
    },
  }),
  GroupNormalization: defineOp({
    attrs: attrs({ num_groups: A.int(), epsilon: A.float(1e-5), stash_type: A.int(1) }),
    inputs: [3, 3],
    outputs: [1, 1],
    kind: "opaque",
    infer: inferSame(0),
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      check(x.shape.length >= 2, () => `GroupNormalization needs an input of rank ≥ 2 (N, C, ...), got rank ${x.shape.length}`)
      stashDType(ctx.attrs.stash_type)
      const C = x.shape[1]
      const G = ctx.attrs.num_groups
      check(G > 0 && C % G === 0, () => `${C} channels do not split into num_groups=${G}`)
      // opset 18: scale and bias per group; opset 21: per channel (the lengths tell them apart)
      const expand = (t: Tensor, what: string): Float64Array => {
        if (t.data.length === C) return perChannel(t, C, what)
        check(t.data.length === G, () => `${what} has ${t.data.length} values for ${C} channels in ${G} groups`)
        const per = C / G
        return Float64Array.from({ length: C }, (_, c) => t.data[Math.floor(c / per)])
      }
      return [groupNorm(x, G, expand(req(ctx.inputs, 1), "scale"), expand(req(ctx.inputs, 2), "bias"), ctx.attrs.epsilon)]
    },
  }),
} satisfies Record<string, AnyOpDef>
