// Quantization (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear) and the remaining
// normalizations (GroupNormalization, RMSNormalization, MeanVarianceNormalization,
// LpNormalization). Quantized integers round half to even and saturate to their type's range;
// scales apply per tensor, per axis, or per block along an axis.
import { A, attrs } from "../attrs.js"
import { allocate, converter, isInteger, type DType } from "../dtype.js"
import { check, defineOp, fail, unsupported, type AnyOpDef } from "../op.js"
import { normAxis, sizeOf, stridesOf, tensor, type Tensor } from "../tensor.js"
import { inferSame, req } from "./util.js"

const RANGES: Partial<Record<DType, [number, number]>> = {
  uint8: [0, 255],
  int8: [-128, 127],
  uint16: [0, 65535],
  int16: [-32768, 32767],
  int32: [-(2 ** 31), 2 ** 31 - 1],
}

const roundHalfEven = (x: number): number => {
  const r = Math.round(x)
  return Math.abs(x - Math.trunc(x)) === 0.5 && r % 2 !== 0 ? r - 1 : r
}

const DTYPE_CODES: Record<number, DType> = { 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 1: "float32", 10: "float16", 16: "bfloat16", 11: "float64" }
const NAMES: Record<number, string> = { 17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1", 25: "uint2", 26: "int2" }

/** Index of the scale/zero-point element for flat index i of x (per tensor, per axis, or blocked). */
const paramIndex = (x: Tensor, scale: Tensor, axis: number, block: number): ((i: number) => number) => {
  if (scale.data.length === 1 && scale.shape.length <= 1 && block === 0) return () => 0
  const ax = normAxis(axis, x.shape.length)
  const xs = stridesOf(x.shape)
  if (block === 0) {
    check(scale.shape.length === 1 && scale.shape[0] === x.shape[ax], () => `per-axis scale has shape [${scale.shape.join(", ")}], axis ${ax} has ${x.shape[ax]}`)
    return (i) => Math.floor(i / xs[ax]) % x.shape[ax]
  }
  // blocked: scale has x's shape with the axis divided by the block size (rounded up)
  check(scale.shape.length === x.shape.length, "blocked scale must have the input's rank")
  const ss = stridesOf(scale.shape)
  return (i) => {
    let off = 0
    let rest = i
    for (let d = 0; d < x.shape.length; d++) {
      const c = Math.floor(rest / xs[d])
      rest -= c * xs[d]
      off += (d === ax ? Math.floor(c / block) : c) * ss[d]
    }
    return off
  }
}

export const quantOps = {
  QuantizeLinear: defineOp({
    attrs: attrs({ axis: A.int(1), block_size: A.int(0), saturate: A.int(1), output_dtype: A.int(0), precision: A.int(0) }),
    inputs: [2, 3],
    outputs: [1, 1],
    kind: "broadcast",
    infer: (ctx) => {
      const x = ctx.inputs[0] ?? fail("input x is required")
      const zp = ctx.inputs[2]
      const code = ctx.attrs.output_dtype
      const dtype = zp ? zp.dtype : code ? (DTYPE_CODES[code] ?? unsupported(`output type ${NAMES[code] ?? code}`)) : "uint8"
      return [{ dtype, shape: x.shape }]
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const scale = req(ctx.inputs, 1)
      const zp = ctx.inputs[2]
      const code = ctx.attrs.output_dtype
      if (code && !DTYPE_CODES[code]) unsupported(`QuantizeLinear to ${NAMES[code] ?? `type ${code}`}`)
      const dtype: DType = zp ? zp.dtype : code ? DTYPE_CODES[code] : "uint8"
      const range = RANGES[dtype] ?? unsupported(`QuantizeLinear to ${dtype}`)
      const at = paramIndex(x, scale, ctx.attrs.axis, ctx.attrs.block_size)
      const narrow = scale.dtype === "float64" ? (v: number) => v : Math.fround
      const out = allocate(dtype, x.data.length)
      for (let i = 0; i < out.length; i++) {
        const k = at(i)
        // the quotient in the scale's precision (float32 models divide in float32)
        const q = roundHalfEven(narrow(x.data[i] / scale.data[k])) + (zp ? zp.data[k] : 0)
        out[i] = Math.min(range[1], Math.max(range[0], q))
      }
      return [tensor(dtype, x.shape, out)]
    },
  }),
  DequantizeLinear: defineOp({
    attrs: attrs({ axis: A.int(1), block_size: A.int(0), output_dtype: A.int(0) }),
    inputs: [2, 3],
    outputs: [1, 1],
    kind: "broadcast",
    infer: (ctx) => {
      const x = ctx.inputs[0] ?? fail("input x is required")
      const scale = ctx.inputs[1] ?? fail("input x_scale is required")
      return [{ dtype: ctx.attrs.output_dtype ? (DTYPE_CODES[ctx.attrs.output_dtype] ?? unsupported("output type")) : scale.dtype, shape: x.shape }]
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const scale = req(ctx.inputs, 1)
      const zp = ctx.inputs[2]
      if (!isInteger(x.dtype)) unsupported(`DequantizeLinear of ${x.dtype}`)
      const dtype = ctx.attrs.output_dtype ? DTYPE_CODES[ctx.attrs.output_dtype] : scale.dtype
      const at = paramIndex(x, scale, ctx.attrs.axis, ctx.attrs.block_size)
      const out = allocate(dtype, x.data.length)
      const conv = converter(dtype)
      for (let i = 0; i < out.length; i++) {
        const k = at(i)
        out[i] = conv((x.data[i] - (zp ? zp.data[k] : 0)) * scale.data[k])
      }
      return [tensor(dtype, x.shape, out)]
    },
  }),
  DynamicQuantizeLinear: defineOp({
    attrs: attrs({}),
    inputs: [1, 1],
    outputs: [3, 3],
    kind: "opaque",
    infer: (ctx) => {
      const x = ctx.inputs[0] ?? fail("input x is required")
      return [
        { dtype: "uint8", shape: x.shape },
        { dtype: "float32", shape: [] },
        { dtype: "uint8", shape: [] },
      ]
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      let lo = 0
      let hi = 0
      for (let i = 0; i < x.data.length; i++) {
        lo = Math.min(lo, x.data[i])
        hi = Math.max(hi, x.data[i])
      }
      const scale = Math.fround((hi - lo) / 255)
      // every step in float32, as the operator is defined
      const zp = scale === 0 ? 0 : Math.min(255, Math.max(0, roundHalfEven(Math.fround(0 - Math.fround(lo / scale)))))
      const out = allocate("uint8", x.data.length)
      for (let i = 0; i < out.length; i++) out[i] = Math.min(255, Math.max(0, (scale === 0 ? 0 : roundHalfEven(Math.fround(x.data[i] / scale))) + zp))
      return [tensor("uint8", x.shape, out), tensor("float32", [], Float32Array.of(scale)), tensor("uint8", [], Uint8Array.of(zp))]
    },
  }),
  GroupNormalization: defineOp({
    attrs: attrs({ epsilon: A.float(1e-5), num_groups: A.int(), stash_type: A.int(1) }),
    inputs: [3, 3],
    outputs: [1, 1],
    kind: "opaque",
    infer: inferSame(0),
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const scale = req(ctx.inputs, 1)
      const bias = req(ctx.inputs, 2)
      const [N, C] = x.shape
      const G = ctx.attrs.num_groups
      check(C % G === 0, () => `${C} channels do not split into ${G} groups`)
      const perGroupScale = scale.data.length === G && G !== C // opset 18 form
      const inner = sizeOf(x.shape.slice(2))
      const cpg = C / G
      const out = allocate(x.dtype, x.data.length)
      const conv = converter(x.dtype)
      for (let n = 0; n < N; n++)
        for (let g = 0; g < G; g++) {
          const base = (n * C + g * cpg) * inner
          const len = cpg * inner
          let m = 0
          for (let i = 0; i < len; i++) m += x.data[base + i]
          m /= len
          let v = 0
          for (let i = 0; i < len; i++) v += (x.data[base + i] - m) ** 2
          v /= len
          const inv = 1 / Math.sqrt(v + ctx.attrs.epsilon)
          for (let c = 0; c < cpg; c++) {
            const ch = g * cpg + c
            const s = perGroupScale ? scale.data[g] : scale.data[ch]
            const b = perGroupScale ? bias.data[g] : bias.data[ch]
            for (let i = 0; i < inner; i++) {
              const k = base + c * inner + i
              out[k] = conv((x.data[k] - m) * inv * s + b)
            }
          }
        }
      return [tensor(x.dtype, x.shape, out)]
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
      const scale = req(ctx.inputs, 1)
      const axis = normAxis(ctx.attrs.axis, x.shape.length)
      const outer = sizeOf(x.shape.slice(0, axis))
      const inner = sizeOf(x.shape.slice(axis))
      const sShape = scale.shape
      const out = allocate(x.dtype, x.data.length)
      const conv = converter(x.dtype)
      // scale broadcasts against the normalized dims (its shape is a suffix of them, or 1s)
      const normShape = x.shape.slice(axis)
      const off = normShape.length - sShape.length
      const nStr = stridesOf(normShape)
      const sStr = stridesOf(sShape)
      const sIdx = (i: number) => {
        let o = 0
        for (let d = 0; d < sShape.length; d++) {
          const coord = Math.floor(i / nStr[d + off]) % normShape[d + off]
          o += (sShape[d] === 1 ? 0 : coord) * sStr[d]
        }
        return o
      }
      for (let o = 0; o < outer; o++) {
        let ms = 0
        for (let i = 0; i < inner; i++) ms += x.data[o * inner + i] ** 2
        const inv = 1 / Math.sqrt(ms / inner + ctx.attrs.epsilon)
        for (let i = 0; i < inner; i++) out[o * inner + i] = conv(x.data[o * inner + i] * inv * scale.data[sIdx(i)])
      }
      return [tensor(x.dtype, x.shape, out)]
    },
  }),
  MeanVarianceNormalization: defineOp({
    attrs: attrs({ axes: A.ints([0, 2, 3]) }),
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "opaque",
    infer: inferSame(0),
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const axes = ctx.attrs.axes.map((a) => normAxis(a, x.shape.length))
      const st = stridesOf(x.shape)
      // group elements by their coordinates on the kept axes
      const keyOf = (i: number) => {
        let key = 0
        let mul = 1
        for (let d = x.shape.length - 1; d >= 0; d--) {
          if (axes.includes(d)) continue
          key += (Math.floor(i / st[d]) % x.shape[d]) * mul
          mul *= x.shape[d]
        }
        return key
      }
      const groups = new Map<number, number[]>()
      for (let i = 0; i < x.data.length; i++) {
        const k = keyOf(i)
        const g = groups.get(k)
        if (g) g.push(i)
        else groups.set(k, [i])
      }
      const out = allocate(x.dtype, x.data.length)
      const conv = converter(x.dtype)
      for (const idx of groups.values()) {
        let m = 0
        for (const i of idx) m += x.data[i]
        m /= idx.length
        let v = 0
        for (const i of idx) v += (x.data[i] - m) ** 2
        const sd = Math.sqrt(v / idx.length)
        for (const i of idx) out[i] = conv((x.data[i] - m) / (sd + 1e-9))
      }
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
      const p = ctx.attrs.p
      if (p !== 1 && p !== 2) fail(`p must be 1 or 2, got ${p}`)
      const axis = normAxis(ctx.attrs.axis, x.shape.length)
      const n = x.shape[axis]
      const inner = sizeOf(x.shape.slice(axis + 1))
      const outer = sizeOf(x.shape.slice(0, axis))
      const out = allocate(x.dtype, x.data.length)
      const conv = converter(x.dtype)
      for (let o = 0; o < outer; o++)
        for (let i = 0; i < inner; i++) {
          let norm = 0
          for (let k = 0; k < n; k++) {
            const v = x.data[(o * n + k) * inner + i]
            norm += p === 1 ? Math.abs(v) : v * v
          }
          if (p === 2) norm = Math.sqrt(norm)
          for (let k = 0; k < n; k++) {
            const j = (o * n + k) * inner + i
            out[j] = conv(norm === 0 ? 0 : x.data[j] / norm)
          }
        }
      return [tensor(x.dtype, x.shape, out)]
    },
  }),
} satisfies Record<string, AnyOpDef>
