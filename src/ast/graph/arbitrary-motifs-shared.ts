// Motifs of the model-like generator that fit any activation: siblings on one input (identical, or
// differing in one attribute), multi-output ops (Split, TopK, Dropout with its mask,
// LayerNormalization with its statistics) on activations and on constants with later nodes reading
// their second and third outputs, and islands of float16, int8 and int64 values.
//
// Motifs read values only where the reading is continuous in them: an index output feeds a gather
// of the tensor it indexes, an integer cast reads a graph input. So a rewrite that changes the
// float rounding upstream changes the results by rounding only, and a law's tolerance holds.
import { attr, type AttrValue } from "./attrs.js"
import { randomTensor, type GraphBuilder, type Val } from "./arbitrary-builder.js"
import { fromArray, sizeOf } from "./tensor.js"

const f32 = (b: GraphBuilder, shape: readonly number[], v: number) => b.constant(fromArray("float32", shape, new Array<number>(sizeOf(shape)).fill(v)))
const i64 = (b: GraphBuilder, xs: readonly number[], base = "k") => b.constant(fromArray("int64", [xs.length], xs), base)
const sameType = (a: Val, c: Val) => a.dtype === c.dtype && a.shape.length === c.shape.length && a.shape.every((d, i) => d === c.shape[i])

/** A random permutation of 0..n-1. */
const permutation = (b: GraphBuilder, n: number): number[] => {
  const p = Array.from({ length: n }, (_, i) => i)
  for (let i = n - 1; i > 0; i--) {
    const j = b.rng.int(0, i)
    ;[p[i], p[j]] = [p[j], p[i]]
  }
  return p
}

/**
 * Two nodes of one op on one input, identical (30%) or differing in one attribute — Transpose perm,
 * Softmax axis, LeakyRelu alpha, Clip bounds, LayerNormalization epsilon, Conv
 * strides, MaxPool kernel — both read downstream, so merging two that differ changes the result.
 */
export const siblings = (b: GraphBuilder, x: Val): Val => {
  const { rng } = b
  const rank = x.shape.length
  const same = rng.next() < 0.3
  const kinds = ["softmax", "softmax", "transpose", "leaky", "clip", "layernorm", ...(rank === 4 ? ["conv"] : []), ...(rank === 4 && x.shape[3] >= 2 ? ["pool"] : [])]
  const pair = (op: string, a1: Record<string, AttrValue>, a2: Record<string, AttrValue>, ins: readonly Val[] = [x]) => {
    const s1 = b.op1(op, ins, a1)
    const s2 = b.op1(op, ins, same ? a1 : a2)
    return [s1, s2] as const
  }
  const combine = (s1: Val, s2: Val) => (sameType(s1, s2) ? b.op1("Add", [s1, s2]) : b.op1("Add", [s1, b.op1("GlobalAveragePool", [s2])]))
  switch (rng.pick(kinds)) {
    case "softmax": {
      const a = rng.int(0, rank - 1)
      const other = (a + rng.int(1, rank - 1)) % rank
      return combine(...pair("Softmax", { axis: attr.int(a - (rng.next() < 0.5 ? rank : 0)) }, { axis: attr.int(other) }))
    }
    case "transpose": {
      const p1 = permutation(b, rank)
      let p2 = permutation(b, rank)
      if (p2.every((v, i) => v === p1[i])) p2 = [...p1.slice(1), p1[0]]
      const [s1, s2] = pair("Transpose", { perm: attr.ints(p1) }, { perm: attr.ints(p2) })
      // s2 put back in s1's order: x read through perm p1
      const back = p1.map((axis) => (same ? p1 : p2).indexOf(axis))
      return b.op1("Add", [s1, b.op1("Transpose", [s2], { perm: attr.ints(back) })])
    }
    case "leaky":
      return combine(...pair("LeakyRelu", { alpha: attr.float(0.1) }, { alpha: attr.float(rng.pick([0.01, 0.3])) }))
    case "clip": {
      const lo1 = f32(b, [], 0)
      const hi1 = f32(b, [], 6)
      const s1 = b.op1("Clip", [x, lo1, hi1])
      const s2 = same ? b.op1("Clip", [x, f32(b, [], 0), f32(b, [], 6)]) : b.op1("Clip", [x, f32(b, [], -0.5), f32(b, [], 0.5)])
      return combine(s1, s2)
    }
    case "layernorm": {
      const D = x.shape[rank - 1]
      const scale = b.constant(randomTensor(rng, [D], 0.5, 1.5), "ln")
      return combine(...pair("LayerNormalization", { axis: attr.int(-1), epsilon: attr.float(1e-5) }, { axis: attr.int(-1), epsilon: attr.float(0.5) }, [x, scale]))
    }
    case "conv": {
      // one weight, two windows: stride 1 and 2, or two paddings
      const C = x.shape[1]
      const w = b.constant(randomTensor(rng, [C, C, 3, 3], -1 / Math.sqrt(9 * C), 1 / Math.sqrt(9 * C)), "w")
      const strided = x.shape[2] >= 3 && x.shape[3] >= 3 && rng.next() < 0.6
      const a1 = { kernel_shape: attr.ints([3, 3]), pads: attr.ints([1, 1, 1, 1]) }
      const a2 = strided ? { ...a1, strides: attr.ints([2, 2]) } : { ...a1, pads: attr.ints([2, 0, 0, 2]) }
      return combine(...pair("Conv", a1, a2, [x, w]))
    }
    default: {
      // (pads stay below the kernel, as ONNX Runtime requires)
      const a1 = { kernel_shape: attr.ints([2, 2]), strides: attr.ints([1, 1]), pads: attr.ints([0, 0, 1, 1]) }
      return combine(...pair("MaxPool", a1, { ...a1, kernel_shape: attr.ints([2, 3]) }))
    }
  }
}

/**
 * Siblings that differ in Cast's `to`: a float32 graph input (exact, so truncation does not depend
 * on upstream rounding) scaled, cast to float16 and to int32, both cast back and summed.
 */
export const castSiblings = (b: GraphBuilder, input: Val): Val => {
  const m = b.op1("Mul", [input, f32(b, [], 10)])
  const t1 = b.rng.pick([10, 6])
  const t2 = b.rng.next() < 0.3 ? t1 : t1 === 10 ? 6 : 10
  const back = (to: number) => b.op1("Cast", [b.op1("Cast", [m], { to: attr.int(to) })], { to: attr.int(1) })
  return b.op1("Add", [back(t1), back(t2)])
}

/** Split of an activation along channels (or the last axis) into 2 or 3 parts, read back reordered or as a gate (GLU). */
export const splitActivation = (b: GraphBuilder, x: Val): Val => {
  const { rng } = b
  const axis = x.shape.length === 4 ? 1 : x.shape.length - 1
  const dim = x.shape[axis]
  if (dim < 2) return x
  if (dim % 2 === 0 && rng.next() < 0.4) {
    const [y0, y1] =
      rng.next() < 0.5
        ? b.op("Split", [x], { axis: attr.int(axis), num_outputs: attr.int(2) }, 2)
        : b.op("Split", [x, i64(b, [dim / 2, dim / 2], "split")], { axis: attr.int(axis) }, 2)
    return b.op1("Mul", [y0, b.op1("Sigmoid", [y1])])
  }
  const parts = dim >= 3 && rng.next() < 0.5 ? 3 : 2
  const cut1 = rng.int(1, dim - parts + 1)
  const sizes = parts === 2 ? [cut1, dim - cut1] : [cut1, rng.int(1, dim - cut1 - 1), 0]
  if (parts === 3) sizes[2] = dim - sizes[0] - sizes[1]
  const ys = b.op("Split", [x, i64(b, sizes, "split")], { axis: attr.int(axis) }, parts)
  const order = parts === 2 ? [1, 0] : rng.pick([[2, 0, 1], [1, 2, 0], [2, 1, 0]])
  return b.op1("Concat", order.map((k) => (k === 1 ? b.op1("Relu", [ys[k]]) : ys[k])), { axis: attr.int(axis) })
}

/** A fused weight (QKV-style) on constants split into 2 or 3 weights: x·W₀ ⊙ σ(x·W₁) (+ x·W₂). Images: 1×1 convs. */
export const splitWeights = (b: GraphBuilder, x: Val): Val => {
  const { rng } = b
  const image = x.shape.length === 4
  const D = image ? x.shape[1] : x.shape[x.shape.length - 1]
  const parts = rng.next() < 0.5 ? 3 : 2
  const M = image ? D : rng.pick([D, 8, 16])
  const s = 1 / Math.sqrt(D)
  const all = b.constant(randomTensor(rng, image ? [parts * M, D, 1, 1] : [D, parts * M], -s, s), "w")
  const ws = b.op("Split", [all, i64(b, new Array<number>(parts).fill(M), "split")], { axis: attr.int(image ? 0 : 1) }, parts)
  const apply = (w: Val) => (image ? b.op1("Conv", [x, w], { kernel_shape: attr.ints([1, 1]) }) : b.op1("MatMul", [x, w]))
  const g = b.op1("Mul", [apply(ws[0]), b.op1("Sigmoid", [apply(ws[1])])])
  return parts === 3 ? b.op1("Add", [g, apply(ws[2])]) : g
}

/** TopK along the last axis of an activation: the values, plus the same values gathered by the indices. */
export const topK = (b: GraphBuilder, x: Val): Val => {
  const { rng } = b
  const rank = x.shape.length
  const dim = x.shape[rank - 1]
  const k = rng.int(1, dim)
  const [v, idx] = b.op("TopK", [x, i64(b, [k])], { axis: attr.int(-1), largest: attr.int(rng.next() < 0.7 ? 1 : 0) }, 2)
  const again = b.op1("GatherElements", [x, idx], { axis: attr.int(rank - 1) })
  const s = b.op1("ReduceSum", [b.op1("Add", [v, again]), i64(b, [-1], "axes")], { keepdims: attr.int(1) })
  return b.op1("Add", [x, b.op1("Mul", [s, f32(b, [], 0.1)])])
}

/** TopK of a constant score vector picks k channels (or features) of x and scales them by their scores. */
export const topKConstant = (b: GraphBuilder, x: Val): Val => {
  const { rng } = b
  const axis = x.shape.length === 4 ? 1 : x.shape.length - 1
  const dim = x.shape[axis]
  const k = rng.int(1, dim)
  const [v, idx] = b.op("TopK", [b.constant(randomTensor(rng, [dim], 0.1, 1), "score"), i64(b, [k])], { axis: attr.int(0) }, 2)
  const picked = b.op1("Gather", [x, idx], { axis: attr.int(axis) })
  const scaleShape = x.shape.map((d, i) => (i === axis ? k : 1))
  return b.op1("Mul", [picked, b.op1("Reshape", [v, i64(b, scaleShape, "shape")])])
}

/** Dropout with its mask read: of an activation (Where(mask, y, 0) or y·Cast(mask)), or of a constant added to x where the mask says. */
export const dropoutMask = (b: GraphBuilder, x: Val): Val => {
  const { rng } = b
  const extra = rng.pick([[], [f32(b, [], 0.1)], [f32(b, [], 0.2), b.constant(fromArray("bool", [], [0]))]])
  if (rng.next() < 0.5) {
    const [y, mask] = b.op("Dropout", [x, ...extra], {}, 2)
    return rng.next() < 0.5 ? b.op1("Where", [mask, y, f32(b, [], 0)]) : b.op1("Mul", [y, b.op1("Cast", [mask], { to: attr.int(1) })])
  }
  const shape = x.shape.map((d, i) => (i === x.shape.length - 1 || (x.shape.length === 4 && i === 1) ? d : 1))
  const [c, mask] = b.op("Dropout", [b.constant(randomTensor(rng, shape, -0.5, 0.5)), ...extra], {}, 2)
  return b.op1("Where", [mask, b.op1("Add", [x, c]), x])
}

/** LayerNormalization with its Mean and InvStdDev outputs read: of the activation, or of a constant that scales it. */
export const layerNormStats = (b: GraphBuilder, x: Val): Val => {
  const { rng } = b
  const rank = x.shape.length
  const D = x.shape[rank - 1]
  const scale = b.constant(randomTensor(rng, [D], 0.5, 1.5), "ln")
  if (rng.next() < 0.5) {
    const [y, mean, inv] = b.op("LayerNormalization", [x, scale], { axis: attr.int(-1), epsilon: attr.float(1e-2) }, 3)
    return b.op1("Add", [y, b.op1("Mul", [mean, b.op1("Tanh", [inv])])])
  }
  const c = b.constant(randomTensor(rng, [2, D], -1, 1), "c")
  const [y, mean, inv] = b.op("LayerNormalization", [c, scale], { axis: attr.int(-1), epsilon: attr.float(0.1) }, 3)
  // y [2, D], mean and inv [2, 1]: a per-feature scale and shift
  const row = (v: Val, r: number) => b.op1("Gather", [v, b.constant(fromArray("int64", [], [r]), "row")], { axis: attr.int(0) })
  const gain = b.op1("Mul", [row(y, 0), row(inv, 1)])
  const shift = b.op1("Add", [row(y, 1), row(mean, 0)])
  return b.op1("Add", [b.op1("Mul", [x, b.op1("Tanh", [gain])]), shift])
}

/**
 * float16, int8 and int64 islands on a float32 graph input (exact, so the casts do not depend on
 * upstream rounding): x → Cast → ops in that type → Cast back; the result is a graph output.
 */
export const lowPrecision = (b: GraphBuilder, x: Val): Val => {
  const { rng } = b
  const shape = x.shape.map((d, i) => (i === x.shape.length - 1 ? d : 1))
  const cast = (v: Val, to: number) => b.op1("Cast", [v], { to: attr.int(to) })
  switch (rng.int(0, 2)) {
    case 0: {
      // float16: scale, shift, activation, softmax, in float16
      const h = cast(x, 10)
      const scaled = b.op1("Mul", [h, b.constant(randomTensor(rng, shape, 0.5, 2, "float16"))])
      const shifted = b.op1("Add", [scaled, b.constant(randomTensor(rng, [shape[shape.length - 1]], -1, 1, "float16"))])
      const act = rng.next() < 0.5 ? b.op1("Relu", [shifted]) : b.op1("Softmax", [shifted], { axis: attr.int(-1) })
      return cast(act, 1)
    }
    case 1: {
      // int8: x·20 truncated, plus and minus int8 constants within range
      const q = cast(b.op1("Mul", [x, f32(b, [], 20)]), 3)
      const r = b.op1("Sub", [b.op1("Add", [q, b.constant(fromArray("int8", shape, Array.from({ length: sizeOf(shape) }, () => rng.int(-50, 50))))]), b.constant(fromArray("int8", [], [rng.int(-50, 50)]))])
      return b.op1("Mul", [cast(r, 1), f32(b, [], 0.05)])
    }
    default: {
      // int64: x·10 truncated, times int64 weights, summed over the last axis (keepdims), shifted
      const q = cast(b.op1("Mul", [x, f32(b, [], 10)]), 7)
      const m = b.op1("Mul", [q, b.constant(fromArray("int64", shape, Array.from({ length: sizeOf(shape) }, () => rng.int(-3, 3))))])
      const s = b.op1("ReduceSum", [m, i64(b, [-1], "axes")], { keepdims: attr.int(1) })
      return b.op1("Add", [s, b.constant(fromArray("int64", [], [rng.int(-100, 100)]))])
    }
  }
}

/** A bool gate: Where(x > 0, x, α·x) — LeakyRelu as a comparison and a select. */
export const whereGate = (b: GraphBuilder, x: Val): Val => b.op1("Where", [b.op1("Greater", [x, f32(b, [], 0)]), x, b.op1("Mul", [x, f32(b, [], b.rng.pick([0.1, 0.2]))])])
