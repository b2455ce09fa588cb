// Random QDQ graphs for rewrite.QdqToInteger's law and tests: a float input quantized once, then a
// chain of quantized layers — Conv (grouped, depthwise, strided, padded; bias or not; per-tensor or
// per-channel weights; Relu / Clip before the Q or not), MatMul (2-D or batched, per-column B or
// not), Gemm (transposed B or not, int32 bias or not), the 8-bit moves (MaxPool, Pad with the zero
// point, Slice, Transpose, Concat, Flatten, Reshape, Relu/Clip with equal params) and the ops whose
// integer form is a com.microsoft QLinear op (AveragePool, GlobalAveragePool, residual Add, Mul —
// these two with a Relu / Clip before their Q now and then —, Sigmoid, LeakyRelu) — these with one 8-bit type throughout mostly, so they become integer, and
// with a mixed type now and then, so they stay float (onnxruntime's kernels take one type) — int8
// or uint8 at random per tensor, random scales and zero points. The graph's output is the last 8-bit tensor itself, so results compare
// in LSBs.
//
// Each case carries the bound the law tests, derived as the generator builds it (u = 2⁻²⁴):
// - a requantized layer (integer op; y = Σ_k (x_k−zx)(w_k−zw)·sx·sw + b·sb, r = y / sy): the float
//   reference dequantizes x and w to float32 (each rounded, relative u), sums the K products in
//   float32 (each sum relative u), adds the rounded bias and rounds y/sy (u); the integer path sums
//   exactly and multiplies by a rounded fround(fround(sx·sw)/sy) (2u). So the two values rounded
//   to integers differ by at most E = (K + 8)·u·m·(Xmax·Σ_k|w_k−zw| + |b|) with m = sx·sw/sy and
//   Xmax the largest |x − zx| the input type allows; and by B_in·m·Σ_k|w_k−zw| more where the
//   inputs already differ by B_in LSBs. Rounding turns a difference d into at most ⌊d⌋ + 1, and
//   saturation and the clamps of Relu / Clip do not widen it:
//       B_out = ⌊B_in·max_o(m_o·Σ_k|w_ok−zw_o|) + E⌋ + 1.
//   With B_in = 0 and E < 1 (the single-layer cases assert it) that is exactly 1 LSB.
// - an 8-bit move: B_out = B_in (exact: q(dq(v)) = v for equal params, and these ops commute
//   with the monotone dq / q); so chains of moves alone are compared for equality.
// - a com.microsoft QLinear op (one requantization: onnxruntime's float32 arithmetic on the exact
//   integer operands, against the reference's float32 dequantize → op → divide; both round values
//   of magnitude ≤ V output units a few times, E = c·u·V, asserted < 1 in the single-layer cases):
//       B_out = ⌊Lipschitz·Σ B_i·s_i / sy + E⌋ + 1
//   (Lipschitz 1 for Add / the pools, 1/4 for Sigmoid, max(1, |α|) for LeakyRelu; for Mul
//   |Δ(ab)| ≤ A_max·Δb + B_max·Δa + Δa·Δb with A_max, B_max the largest dequantized magnitudes) —
//   so 1 LSB where the inputs agree.
// - an op left float (the same float computation on inputs that differ by B LSBs):
//   B_out = 0 if every input's B is 0, else the same ⌊Lipschitz·Σ B_i·s_i / sy⌋ + 1.
import { attr } from "../../src/ast/graph/attrs.js"
import { prng } from "../../src/ast/graph/arbitrary.js"
import { makeGraph, node, type Graph, type Node } from "../../src/ast/graph/graph.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import { fromArray, tensor, type Tensor } from "../../src/ast/graph/tensor.js"

export type Q8 = "int8" | "uint8"
export interface QP {
  readonly dtype: Q8
  readonly scale: number
  readonly zp: number
}

export type LayerKind =
  | "conv" | "matmul" | "gemm"
  | "maxpool" | "pad" | "slice" | "transpose" | "concat" | "flatten" | "reshape" | "relu" | "clip"
  | "averagepool" | "add" | "mul" | "sigmoid" | "leakyrelu"

export const INTEGER_KINDS: readonly LayerKind[] = ["conv", "matmul", "gemm"]
export const MOVE_KINDS: readonly LayerKind[] = ["maxpool", "pad", "slice", "transpose", "concat", "flatten", "reshape", "relu", "clip"]
/** Kinds whose integer form is a com.microsoft QLinear op (float where their types are mixed). */
export const CONTRIB_KINDS: readonly LayerKind[] = ["averagepool", "add", "mul", "sigmoid", "leakyrelu"]

export interface QdqCase {
  readonly graph: Graph
  readonly inputs: ReadonlyMap<string, Tensor>
  /** The layers built, in order. */
  readonly layers: readonly LayerKind[]
  /** The bound in output LSBs (see the header). */
  readonly bound: number
  /** E of each requantized layer (its float reference's rounding, in output LSBs). */
  readonly roundingE: readonly number[]
  /**
   * Each contrib-kind layer's float output (in the QDQ graph), whether the pass should make it
   * integer, and the Relu / Clip between it and its Q (a residual Add → Relu), whose output then
   * should be gone: folded into the output range.
   */
  readonly contrib: readonly { readonly value: string; readonly integer: boolean; readonly act?: string }[]
}

const U = 2 ** -24
const f32 = Math.fround
const range = (t: Q8): [number, number] => (t === "int8" ? [-128, 127] : [0, 255])

export interface CaseOptions {
  /** Which layers to draw from (each picked where the current rank allows). */
  readonly kinds: readonly LayerKind[]
  readonly minLayers: number
  readonly maxLayers: number
}

/** Draws one QDQ case from `seed`. */
export const qdqCase = (seed: number, o: CaseOptions): QdqCase => {
  const rng = prng(seed)
  const nodes: Node[] = []
  const inits = new Map<string, Tensor>()
  let k = 0
  const fresh = (b: string) => `${b}${k++}`
  const konst = (b: string, t: Tensor) => {
    const n = fresh(b)
    inits.set(n, t)
    return n
  }
  const pickParams = (around?: number): QP => {
    const dtype: Q8 = rng.pick(["int8", "uint8"])
    const zp = dtype === "int8" ? rng.int(-30, 30) : rng.int(90, 160)
    return { dtype, scale: f32((around ?? 0.02) * rng.float(0.5, 2)), zp }
  }
  const dq = (v: string, p: QP): string => {
    const out = fresh("dq")
    nodes.push(node("DequantizeLinear", [v, konst("s", fromArray("float32", [], [p.scale])), konst("z", fromArray(p.dtype, [], [p.zp]))], [out]))
    return out
  }
  const q = (v: string, p: QP): string => {
    const out = fresh("q")
    nodes.push(node("QuantizeLinear", [v, konst("s", fromArray("float32", [], [p.scale])), konst("z", fromArray(p.dtype, [], [p.zp]))], [out]))
    return out
  }
  const N = rng.int(1, 2)
  let shape: number[] = [N, rng.int(1, 5), rng.int(3, 7), rng.int(3, 7)]
  const inShape = [...shape]
  const xData = Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-2, 2))
  let p = pickParams(0.02)
  let cur = q("x", p)
  let bound = 0
  const roundingE: number[] = []
  const contrib: { value: string; integer: boolean; act?: string }[] = []
  const layers: LayerKind[] = []
  // a quantized tensor of the same shape seen earlier, for residual adds
  const seen: { v: string; p: QP; shape: number[]; bound: number }[] = [{ v: cur, p, shape: [...shape], bound: 0 }]

  /** Random quantized weights and their per-channel (or per-tensor) params along axis `axis` of `wShape`. */
  const weights = (wShape: number[], axis: number, perChannel: boolean) => {
    const dtype: Q8 = rng.pick(["int8", "uint8"])
    const C = wShape[axis]
    const zps = Array.from({ length: C }, () => (dtype === "int8" ? (rng.next() < 0.7 ? 0 : rng.int(-10, 10)) : rng.int(110, 145)))
    const scales = Array.from({ length: C }, () => f32(rng.float(0.002, 0.05)))
    const z = perChannel ? zps : new Array<number>(C).fill(zps[0])
    const s = perChannel ? scales : new Array<number>(C).fill(scales[0])
    const [lo, hi] = range(dtype)
    const n = wShape.reduce((a, b) => a * b, 1)
    const inner = wShape.slice(axis + 1).reduce((a, b) => a * b, 1)
    const data = Array.from({ length: n }, (_, i) => {
      const c = Math.floor(i / inner) % C
      return Math.max(lo, Math.min(hi, z[c] + rng.int(-90, 90)))
    })
    const w = fromArray(dtype, wShape, data)
    // Σ_k |w − zw| per channel
    const l1 = new Array<number>(C).fill(0)
    data.forEach((v, i) => (l1[Math.floor(i / inner) % C] += Math.abs(v - z[Math.floor(i / inner) % C])))
    const dqw = fresh("dqw")
    nodes.push(
      node("DequantizeLinear", [
        konst("w", w),
        konst("ws", perChannel ? fromArray("float32", [C], s) : fromArray("float32", [], [s[0]])),
        konst("wz", perChannel ? fromArray(dtype, [C], z) : fromArray(dtype, [], [z[0]])),
      ], [dqw], perChannel ? { axis: attr.int(axis) } : {}),
    )
    return { dqw, s, l1, dtype }
  }
  const bias = (C: number, sx: number, s: number[]) => {
    const b = Array.from({ length: C }, () => rng.int(-3000, 3000))
    const out = fresh("dqb")
    const perChannel = s.some((v) => v !== s[0])
    nodes.push(node("DequantizeLinear", [
      konst("b", fromArray("int32", [C], b)),
      // the bias scale as onnxruntime's quantizer writes it: the float32 product
      konst("bs", perChannel ? fromArray("float32", [C], s.map((v) => f32(sx * v))) : fromArray("float32", [], [f32(sx * s[0])])),
    ], [out], perChannel ? { axis: attr.int(0) } : {}))
    return { out, b }
  }
  /** The output params of a requantized layer whose outputs spread about `spread`·sx·sw. */
  const outParams = (spread: number): QP => pickParams(spread / 50)
  /** Bound bookkeeping of a requantized layer. */
  const requantized = (K: number, pin: QP, pout: QP, s: number[], l1: number[], b: number[] | undefined) => {
    const [lo, hi] = range(pin.dtype)
    const xmax = Math.max(pin.zp - lo, hi - pin.zp)
    let E = 0
    let gain = 0
    s.forEach((sw, c) => {
      const m = (pin.scale * sw) / pout.scale
      E = Math.max(E, (K + 8) * U * m * (xmax * l1[c] + Math.abs(b ? b[c] : 0)))
      gain = Math.max(gain, m * l1[c])
    })
    roundingE.push(E)
    bound = Math.floor(bound * gain + E) + 1
  }
  const act = (v: string, pout: QP): string => {
    const r = rng.next()
    if (r < 0.4) return v
    const out = fresh("act")
    if (r < 0.7) nodes.push(node("Relu", [v], [out]))
    else {
      const lo = rng.pick([0, -pout.scale * 20, -1e9])
      const hi = rng.pick([pout.scale * 40, 6 * pout.scale * 10, 1e9])
      nodes.push(node("Clip", [v, konst("lo", fromArray("float32", [], [lo])), konst("hi", fromArray("float32", [], [hi]))], [out]))
    }
    return out
  }

  const count = rng.int(o.minLayers, o.maxLayers)
  for (let l = 0; l < count; l++) {
    const rank4 = shape.length === 4
    const ok = o.kinds.filter((kind) =>
      rank4 ? !["matmul", "gemm"].includes(kind) : !["conv", "maxpool", "pad", "slice", "concat", "flatten", "averagepool"].includes(kind))
    if (ok.length === 0) break
    const kind = rng.pick(ok)
    layers.push(kind)
    const x = dq(cur, p)
    let y: string
    let pout = p
    if (kind === "conv") {
      const [n, C, H, W] = shape
      const depthwise = C > 1 && rng.next() < 0.3
      const group = depthwise ? C : 1
      const M = depthwise ? C : rng.int(1, 6)
      const kh = rng.pick([1, 3])
      const pad = kh === 3 ? (Math.min(H, W) < 3 ? 1 : rng.int(0, 1)) : 0
      const stride = rng.pick([1, 1, 2])
      const perChannel = rng.next() < 0.6
      const w = weights([M, C / group, kh, kh], 0, perChannel)
      const withBias = rng.next() < 0.7
      const b = withBias ? bias(M, p.scale, w.s) : undefined
      const K = (C / group) * kh * kh
      pout = outParams(p.scale * w.s[0] * Math.sqrt(K) * 60 * 60)
      const c = fresh("conv")
      nodes.push(node("Conv", [x, w.dqw, ...(b ? [b.out] : [])], [c], { kernel_shape: attr.ints([kh, kh]), pads: attr.ints([pad, pad, pad, pad]), strides: attr.ints([stride, stride]), group: attr.int(group) }))
      y = act(c, pout)
      requantized(K, p, pout, w.s, w.l1, b?.b)
      const out = (d: number) => Math.floor((d + 2 * pad - kh) / stride) + 1
      shape = [n, M, out(H), out(W)]
    } else if (kind === "matmul" || kind === "gemm") {
      const Kd = shape[shape.length - 1]
      const Nd = rng.int(1, 7)
      const gemm = kind === "gemm" && shape.length === 2
      const transB = gemm && rng.next() < 0.5
      const perChannel = rng.next() < 0.6
      const w = weights(transB ? [Nd, Kd] : [Kd, Nd], transB ? 0 : 1, perChannel)
      const b = gemm && rng.next() < 0.7 ? bias(Nd, p.scale, w.s) : undefined
      pout = outParams(p.scale * w.s[0] * Math.sqrt(Kd) * 60 * 60)
      const mm = fresh("mm")
      nodes.push(gemm ? node("Gemm", [x, w.dqw, ...(b ? [b.out] : [])], [mm], transB ? { transB: attr.int(1) } : {}) : node("MatMul", [x, w.dqw], [mm]))
      y = act(mm, pout)
      requantized(Kd, p, pout, w.s, w.l1, b?.b)
      shape = [...shape.slice(0, -1), Nd]
      if (kind === "gemm" && !gemm) layers[layers.length - 1] = "matmul"
    } else if (kind === "maxpool") {
      const [n, C, H, W] = shape
      const k3 = H >= 3 && W >= 3 && rng.next() < 0.5
      y = fresh("mp")
      nodes.push(node("MaxPool", [x], [y], k3 ? { kernel_shape: attr.ints([3, 3]), pads: attr.ints([1, 1, 1, 1]) } : { kernel_shape: attr.ints([2, 2]), strides: attr.ints([2, 2]) }))
      shape = k3 ? shape : [n, C, Math.floor(H / 2) || 1, Math.floor(W / 2) || 1]
      if (!k3 && (H < 2 || W < 2)) {
        // (too small to pool by 2: an identity-sized pool instead)
        nodes.pop()
        nodes.push(node("MaxPool", [x], [y], { kernel_shape: attr.ints([1, 1]) }))
        shape = [n, C, H, W]
      }
    } else if (kind === "pad") {
      const mode = rng.pick(["constant", "constant", "edge", "reflect"])
      const pads = [0, 0, 1, rng.int(0, 1), 0, 0, rng.int(0, 1), 1]
      y = fresh("pad")
      const canReflect = shape[2] > 1 && shape[3] > 1
      nodes.push(node("Pad", [x, konst("pads", fromArray("int64", [8], pads)), ...(mode === "constant" && rng.next() < 0.5 ? [konst("cv", fromArray("float32", [], [0]))] : [])], [y], { mode: attr.str(mode === "reflect" && !canReflect ? "edge" : mode) }))
      shape = shape.map((d, i) => d + pads[i] + pads[i + 4])
    } else if (kind === "slice") {
      const H = shape[2]
      const start = rng.int(0, H - 1)
      const end = rng.int(start + 1, H)
      y = fresh("slice")
      nodes.push(node("Slice", [x, konst("st", fromArray("int64", [1], [start])), konst("en", fromArray("int64", [1], [end])), konst("ax", fromArray("int64", [1], [2]))], [y]))
      shape = [shape[0], shape[1], end - start, shape[3]]
    } else if (kind === "transpose") {
      const perm = shape.length === 4 ? [0, 1, 3, 2] : [1, 0]
      y = fresh("tr")
      nodes.push(node("Transpose", [x], [y], { perm: attr.ints(perm) }))
      shape = perm.map((i) => shape[i])
    } else if (kind === "concat") {
      y = fresh("cat")
      nodes.push(node("Concat", [x, dq(cur, p)], [y], { axis: attr.int(1) }))
      shape = [shape[0], 2 * shape[1], shape[2], shape[3]]
    } else if (kind === "flatten") {
      y = fresh("flat")
      nodes.push(node("Flatten", [x], [y], { axis: attr.int(1) }))
      shape = [shape[0], shape[1] * shape[2] * shape[3]]
    } else if (kind === "reshape") {
      const total = shape.reduce((a, b) => a * b, 1)
      const to = shape.length === 4 ? [shape[0], total / shape[0]] : [shape[0], shape[1]]
      y = fresh("rs")
      nodes.push(node("Reshape", [x, konst("shape", fromArray("int64", [to.length], to))], [y]))
      shape = to
    } else if (kind === "relu" || kind === "clip") {
      y = act(x, p)
      if (y === x) {
        y = fresh("relu")
        nodes.push(node("Relu", [x], [y]))
      }
    } else {
      // a contrib kind: integer (one 8-bit type throughout) or, one time in five, mixed and left float
      const mixed = rng.next() < 0.2
      const like = (t: Q8, around: number): QP => {
        const d = pickParams(around)
        const dtype: Q8 = mixed ? (t === "int8" ? "uint8" : "int8") : t
        return { dtype, scale: d.scale, zp: dtype === "int8" ? rng.int(-30, 30) : rng.int(90, 160) }
      }
      const xmax = (t: QP) => Math.max(t.zp - range(t.dtype)[0], range(t.dtype)[1] - t.zp)
      // Σ_i Lipschitz_i · B_i · s_i / sy (the inputs' disagreement in output units) and E
      let spread: number
      let E: number
      let inputsExact = bound === 0
      if (kind === "averagepool") {
        const [n, C, H, W] = shape
        y = fresh("ap")
        const global = rng.next() < 0.4
        nodes.push(global ? node("GlobalAveragePool", [x], [y]) : node("AveragePool", [x], [y], { kernel_shape: attr.ints([Math.min(2, H), Math.min(2, W)]) }))
        const size = global ? H * W : Math.min(2, H) * Math.min(2, W)
        shape = global ? [n, C, 1, 1] : [n, C, H - Math.min(2, H) + 1, W - Math.min(2, W) + 1]
        pout = like(p.dtype, p.scale)
        spread = (bound * p.scale) / pout.scale
        E = (size + 8) * U * ((xmax(p) * p.scale) / pout.scale + Math.abs(pout.zp))
      } else if (kind === "add" || kind === "mul") {
        const other = seen.filter((s) => s.shape.join() === shape.join()).at(-1) ?? { v: cur, p, shape, bound }
        y = fresh(kind)
        nodes.push(node(kind === "add" ? "Add" : "Mul", [x, dq(other.v, other.p)], [y]))
        inputsExact = bound === 0 && other.bound === 0
        const [aa, ab] = [xmax(p) * p.scale, xmax(other.p) * other.p.scale]
        if (kind === "add") {
          pout = like(p.dtype, p.scale * 1.5)
          spread = (bound * p.scale + other.bound * other.p.scale) / pout.scale
          E = 8 * U * ((aa + ab + Math.abs(p.zp) * p.scale + Math.abs(other.p.zp) * other.p.scale) / pout.scale + Math.abs(pout.zp))
        } else {
          pout = like(p.dtype, (aa * ab) / 60)
          const [da, db] = [bound * p.scale, other.bound * other.p.scale]
          spread = (aa * db + ab * da + da * db) / pout.scale
          E = 8 * U * ((aa * ab) / pout.scale + Math.abs(pout.zp))
        }
        if (other.p.dtype !== pout.dtype) contrib.push({ value: y, integer: false })
      } else if (kind === "sigmoid") {
        y = fresh("sig")
        nodes.push(node("Sigmoid", [x], [y]))
        const dtype: Q8 = mixed ? (p.dtype === "int8" ? "uint8" : "int8") : p.dtype
        pout = { dtype, scale: f32(1 / 256), zp: dtype === "int8" ? -128 : 0 }
        spread = (bound * p.scale) / (4 * pout.scale)
        E = 8 * U * (1 / pout.scale + 128)
      } else {
        const alpha = f32(rng.pick([0.01, 0.1, 0.3, 1.5]))
        y = fresh("lrelu")
        nodes.push(node("LeakyRelu", [x], [y], { alpha: attr.float(alpha) }))
        const L = Math.max(1, alpha)
        pout = like(p.dtype, p.scale * L)
        spread = (bound * p.scale * L) / pout.scale
        E = 8 * U * ((xmax(p) * p.scale * L) / pout.scale + Math.abs(pout.zp))
      }
      // Add / Mul → Relu / Clip → Q now and then: the clamp is monotone, so it does not widen the bound
      const value = y
      if (kind === "add" || kind === "mul") y = act(y, pout)
      const folds = y !== value ? { act: y } : {}
      const integer = !contrib.some((c) => c.value === value) && pout.dtype === p.dtype
      if (!integer) {
        const known = contrib.find((c) => c.value === value)
        if (known) Object.assign(known, folds)
        else contrib.push({ value, integer, ...folds })
      }
      if (integer) {
        contrib.push({ value, integer, ...folds })
        roundingE.push(E)
        bound = Math.floor(spread + E) + 1
      } else bound = inputsExact ? 0 : Math.floor(spread) + 1
    }
    cur = q(y, pout)
    p = pout
    seen.push({ v: cur, p, shape: [...shape], bound })
  }
  const g = bindSync(makeGraph({
    name: `qdq${seed}`,
    opset: 17,
    inputs: [{ name: "x", type: { dtype: "float32", shape: inShape } }],
    outputs: [{ name: cur, type: { dtype: p.dtype, shape } }],
    initializers: inits,
    nodes,
  }))
  return { graph: g, inputs: new Map([["x", tensor("float32", inShape, xData)]]), layers, bound, roundingE, contrib }
}
