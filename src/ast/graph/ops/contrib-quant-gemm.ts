// onnxruntime's com.microsoft QGemm (QOperator format): an int32 product of 8-bit A and B less
// their zero points, plus an int32 C, times alpha · a_scale · b_scale[j] (/ y_scale) in float32 —
// requantized to y_zero_point's type, or a float32 output where y_scale and y_zero_point are absent.
import { A, attrs } from "../attrs.js"
import { allocate, type DType } from "../dtype.js"
import { check, defineOp, fail, type Dim } from "../op.js"
import { broadcastIndex, tensor } from "../tensor.js"
import { checkParamTypes, f32, quantType, requantize, scaleOf, zeroPointOf } from "./contrib-quant-common.js"
import { check8bit } from "./nn-quant.js"
import { arity, req } from "./util.js"

// QGemm: A, a_scale, a_zero_point, B, b_scale, b_zero_point, C?, y_scale?, y_zero_point?

/** QGemm's output multipliers per column (or one): alpha · a_scale · b_scale[j] (/ y_scale), in float32 as onnxruntime orders them. */
export const qgemmScales = (alpha: number, as: number, bs: ArrayLike<number>, ys: number | undefined): number[] =>
  Array.from(bs, (b) => {
    const m = f32(f32(f32(alpha) * as) * b)
    return ys === undefined ? m : f32(m / ys)
  })

const gemmDims = (a: readonly Dim[], b: readonly Dim[], transA: number, transB: number) => {
  check(a.length === 2 && b.length === 2, () => `A and B must be 2-D, got ranks ${a.length} and ${b.length}`)
  const [M, K] = transA ? [a[1], a[0]] : [a[0], a[1]]
  const [K2, N] = transB ? [b[1], b[0]] : [b[0], b[1]]
  if (typeof K === "number" && typeof K2 === "number") check(K === K2, () => `A's K (${K}) differs from B's (${K2})`)
  return { M, N, K }
}

export const QGemm = defineOp({
  attrs: attrs({ alpha: A.float(1), transA: A.int(0), transB: A.int(0) }),
  inputs: arity.range(6, 9),
  outputs: arity.one,
  kind: "opaque",
  infer: (ctx) => {
    const a = quantType(ctx, 0, "A")
    const b = quantType(ctx, 3, "B")
    checkParamTypes(ctx, 1, 2, a.dtype, "a")
    checkParamTypes(ctx, 4, 5, b.dtype, "b")
    check(ctx.inputs[2] !== undefined, "a_zero_point (input 2) is required")
    const { M, N } = gemmDims(a.shape, b.shape, ctx.attrs.transA, ctx.attrs.transB)
    const c = ctx.inputs[6]
    if (c) check(c.dtype === "int32", () => `C must be int32, got ${c.dtype}`)
    const ys = ctx.inputs[7]
    const yz = ctx.inputs[8]
    if (!ys && !yz) return [{ dtype: "float32", shape: [M, N] }]
    check(ys !== undefined && yz !== undefined, "y_scale and y_zero_point must be given together (both absent: a float32 output)")
    check8bit(yz!, "y_zero_point")
    checkParamTypes(ctx, 7, 8, yz!.dtype, "y")
    return [{ dtype: yz!.dtype, shape: [M, N] }]
  },
  kernel: ({ inputs, attrs: at }) => {
    const a = req(inputs, 0, "A")
    const b = req(inputs, 3, "B")
    check8bit(a, "A")
    check8bit(b, "B")
    const { M, N, K } = gemmDims(a.shape, b.shape, at.transA, at.transB) as { M: number; N: number; K: number }
    const za = zeroPointOf(inputs, 2, "a_zero_point", a.dtype)
    const bsT = req(inputs, 4, "b_scale")
    const bzT = inputs[5]
    check(bsT.dtype === "float32" && (bsT.data.length === 1 || bsT.data.length === N), () => `b_scale must be float32 with 1 or N = ${N} values`)
    if (bzT) check(bzT.dtype === b.dtype && (bzT.data.length === 1 || bzT.data.length === N), () => `b_zero_point must be ${b.dtype} with 1 or N = ${N} values`)
    const ysT = inputs[7]
    const yzT = inputs[8]
    const quantized = ysT !== undefined || yzT !== undefined
    const scales = qgemmScales(at.alpha, scaleOf(inputs, 1, "a_scale"), bsT.data as ArrayLike<number>, quantized ? scaleOf(inputs, 7, "y_scale") : undefined)
    const ad = a.data as ArrayLike<number>
    const bd = b.data as ArrayLike<number>
    const bz = bzT ? (bzT.data as ArrayLike<number>) : [0]
    const c = inputs[6]
    let ci: Int32Array | undefined
    if (c) {
      check(c.dtype === "int32", () => `C must be int32, got ${c.dtype}`)
      ci = broadcastIndex(c.shape.length <= 2 ? c.shape : fail(`C must have rank ≤ 2, got [${c.shape.join(", ")}]`), [M, N])
    }
    const outDtype: DType = quantized ? req(inputs, 8, "y_zero_point").dtype : "float32"
    if (quantized) check8bit({ dtype: outDtype }, "y_zero_point")
    const yz = quantized ? zeroPointOf(inputs, 8, "y_zero_point", outDtype) : 0
    const out = allocate(outDtype, M * N)
    for (let m = 0; m < M; m++)
      for (let n = 0; n < N; n++) {
        const zb = bz[bz.length === 1 ? 0 : n]
        let acc = ci ? (c!.data[ci[m * N + n]] as number) : 0
        for (let k = 0; k < K; k++) {
          const av = ad[at.transA ? k * M + m : m * K + k] - za
          const bv = bd[at.transB ? n * K + k : k * N + n] - zb
          acc += av * bv
        }
        acc |= 0 // int32 accumulation, as MLAS's
        const v = f32(acc * scales[scales.length === 1 ? 0 : n])
        out[m * N + n] = quantized ? requantize(v, yz, outDtype) : v
      }
    return [tensor(outDtype, [M, N], out)]
  },
})
