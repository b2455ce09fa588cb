// Normalizations over trailing axes or arbitrary axis sets: LayerNormalization, RMSNormalization
// (the dims from `axis` on), MeanVarianceNormalization (an axis set), LpNormalization (one axis)
// and LRN (a window of neighbouring channels). Statistics in float64, results stored in the
// input's dtype.
import { A, attrs } from "../attrs.js"
import { allocate, converter } from "../dtype.js"
import { check, defineOp, fail, type AnyOpDef } from "../op.js"
import { broadcastIndex, broadcastShapes, normAxis, sizeOf, tensor, type Tensor } from "../tensor.js"
import { meanVar, paramIndex, stashDType, statShape } from "./norm-common.js"
import { inferSame, req } from "./util.js"

/** x seen as [outer, inner] split at `axis`. */
const rows = (x: Tensor, axis: number): [number, number] => [sizeOf(x.shape.slice(0, axis)), sizeOf(x.shape.slice(axis))]

export const normLayerOps = {
  LayerNormalization: defineOp({
    attrs: attrs({ axis: A.int(-1), epsilon: A.float(1e-5), stash_type: A.int(1) }),
    inputs: [2, 3],
    outputs: [1, 3],
    kind: "opaque",
    infer: (ctx) => {
      const x = ctx.inputs[0] ?? fail("input X is required")
      const axis = normAxis(ctx.attrs.axis, x.shape.length)
      // scale and B broadcast to X, as the kernel checks (a compiled target would index past them)
      const xs = x.shape
      if (xs.every((d): d is number => typeof d === "number"))
        for (const [k, what] of [[1, "scale"], [2, "B"]] as const) {
          const p = ctx.inputs[k]
          if (p && p.shape.every((d): d is number => typeof d === "number")) {
            const b = broadcastShapes(p.shape as number[], xs)
            check(b !== undefined && b.length === xs.length && b.every((d, i) => d === xs[i]), () => `${what} of shape [${p.shape.join(", ")}] does not broadcast to [${xs.join(", ")}]`)
          }
        }
      const stat = { dtype: stashDType(ctx.attrs.stash_type), shape: statShape(x.shape, axis) }
      return [x, stat, stat].slice(0, ctx.outputs)
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const axis = normAxis(ctx.attrs.axis, x.shape.length)
      const [outer, inner] = rows(x, axis)
      const scale = req(ctx.inputs, 1)
      const bias = ctx.inputs[2]
      const si = paramIndex(scale, x.shape, "scale")
      const bi = bias && paramIndex(bias, x.shape, "B")
      const conv = converter(x.dtype)
      const out = allocate(x.dtype, x.data.length)
      const statType = stashDType(ctx.attrs.stash_type)
      const means = allocate(statType, outer)
      const invs = allocate(statType, outer)
      const toStat = converter(statType)
      for (let o = 0; o < outer; o++) {
        const start = o * inner
        const [m, v] = meanVar(x.data, start, inner)
        const inv = 1 / Math.sqrt(v + ctx.attrs.epsilon)
        means[o] = toStat(m)
        invs[o] = toStat(inv)
        // as ONNX's reference: the standardized value is stored in X's type, then scaled and shifted
        for (let i = start; i < start + inner; i++) {
          const y = conv((x.data[i] - m) * inv) * scale.data[si[i]]
          out[i] = conv(bias && bi ? y + bias.data[bi[i]] : y)
        }
      }
      const shape = statShape(x.shape, axis)
      return [tensor(x.dtype, x.shape, out), tensor(statType, shape, means), tensor(statType, shape, invs)].slice(0, ctx.outputs)
    },
  }),
  RMSNormalization: defineOp({
    attrs: attrs({ axis: A.int(-1), epsilon: A.float(1e-5), stash_type: A.int(1) }),
    inputs: [2, 2],
    outputs: [1, 1],
    kind: "opaque",
    infer: inferSame(0),
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const axis = normAxis(ctx.attrs.axis, x.shape.length)
      stashDType(ctx.attrs.stash_type)
      const [outer, inner] = rows(x, axis)
      const scale = req(ctx.inputs, 1)
      const si = paramIndex(scale, x.shape, "scale")
      const conv = converter(x.dtype)
      const out = allocate(x.dtype, x.data.length)
      for (let o = 0; o < outer; o++) {
        const start = o * inner
        let sq = 0
        for (let i = start; i < start + inner; i++) sq += x.data[i] * x.data[i]
        const inv = 1 / Math.sqrt(sq / inner + ctx.attrs.epsilon)
        for (let i = start; i < start + inner; i++) out[i] = conv(x.data[i] * inv * scale.data[si[i]])
      }
      return [tensor(x.dtype, x.shape, out)]
    },
  }),
  MeanVarianceNormalization: defineOp({
    // opset 1 (Caffe's MVN): across_channels / normalize_variance; opset 9 on: axes
    attrs: attrs({ axes: A.ints([0, 2, 3]), across_channels: A.int(0), normalize_variance: A.int(1) }),
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "opaque",
    infer: inferSame(0),
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const rank = x.shape.length
      const legacy = ctx.opset < 9
      const axes = legacy ? (ctx.attrs.across_channels ? [1, 2, 3] : [2, 3]).filter((a) => a < rank) : ctx.attrs.axes.map((a) => normAxis(a, rank))
      check(new Set(axes).size === axes.length, () => `axes [${ctx.attrs.axes.join(", ")}] repeat an axis`)
      const keep = x.shape.map((d, i) => (axes.includes(i) ? 1 : d))
      const groups = sizeOf(keep)
      // for each element, the statistic (one per kept index) it belongs to
      const gi = broadcastIndex(keep, x.shape)
      const count = groups === 0 ? 0 : x.data.length / groups
      const mean = new Float64Array(groups)
      const sq = new Float64Array(groups)
      for (let i = 0; i < x.data.length; i++) mean[gi[i]] += x.data[i]
      for (let g = 0; g < groups; g++) mean[g] /= count
      for (let i = 0; i < x.data.length; i++) sq[gi[i]] += (x.data[i] - mean[gi[i]]) ** 2
      const normalizeVariance = !legacy || ctx.attrs.normalize_variance !== 0
      // ONNX's reference divides by the standard deviation plus 1e-9
      const div = Float64Array.from(sq, (s) => (normalizeVariance ? Math.sqrt(s / count) + 1e-9 : 1))
      const conv = converter(x.dtype)
      const out = allocate(x.dtype, x.data.length)
      for (let i = 0; i < x.data.length; i++) out[i] = conv((x.data[i] - mean[gi[i]]) / div[gi[i]])
      return [tensor(x.dtype, x.shape, out)]
    },
  }),
  LpNormalization: defineOp({
    attrs: attrs({ axis: A.int(-1), p: A.int(2) }),
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "opaque",
    infer: inferSame(0),
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const { p } = ctx.attrs
      check(p === 1 || p === 2, () => `p must be 1 or 2, got ${p}`)
      const axis = normAxis(ctx.attrs.axis, x.shape.length)
      const dim = x.shape.length === 0 ? 1 : x.shape[axis]
      const inner = sizeOf(x.shape.slice(axis + 1))
      const outer = dim * inner === 0 ? 0 : x.data.length / (dim * inner)
      const conv = converter(x.dtype)
      const out = allocate(x.dtype, x.data.length)
      for (let o = 0; o < outer; o++)
        for (let j = 0; j < inner; j++) {
          const base = o * dim * inner + j
          let acc = 0
          for (let k = 0; k < dim; k++) {
            const v = x.data[base + k * inner]
            acc += p === 1 ? Math.abs(v) : v * v
          }
          const norm = p === 1 ? acc : Math.sqrt(acc)
          // a zero vector stays zero (the reference divides with 0/0 → 0)
          for (let k = 0; k < dim; k++) out[base + k * inner] = conv(norm === 0 ? 0 : x.data[base + k * inner] / norm)
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
      const { alpha, beta, bias, size } = ctx.attrs
      check(size > 0, () => `size must be positive, got ${size}`)
      const [N, C] = x.shape
      const inner = sizeOf(x.shape.slice(2))
      // the window over channels c − ⌊(size−1)/2⌋ .. c + ⌈(size−1)/2⌉, clipped to [0, C)
      const lo = Math.floor((size - 1) / 2)
      const hi = Math.ceil((size - 1) / 2)
      const out = allocate(x.dtype, x.data.length)
      const conv = converter(x.dtype)
      for (let n = 0; n < N; n++)
        for (let c = 0; c < C; c++) {
          const [k0, k1] = [Math.max(0, c - lo), Math.min(C - 1, c + hi)]
          for (let i = 0; i < inner; i++) {
            let sq = 0
            for (let k = k0; k <= k1; k++) sq += x.data[(n * C + k) * inner + i] ** 2
            const at = (n * C + c) * inner + i
            out[at] = conv(x.data[at] / Math.pow(bias + (alpha / size) * sq, beta))
          }
        }
      return [tensor(x.dtype, x.shape, out)]
    },
  }),
} satisfies Record<string, AnyOpDef>
