// Computes of onnxruntime's com.microsoft quantized ops (src/ast/graph/ops/contrib-quant.ts holds
// their meaning). Scales and zero points are per tensor and must be constants (initializers, as
// onnxruntime's quantization tool writes them): the scale ratios are then computed here, in
// float32 exactly as the reference kernels do, and the kernels do integer work plus one or two
// float32 steps. Float steps run in float64 rounded to float32 after each operation (a cast pair
// every emitter keeps), so js (which computes in doubles), wasm and c give the same bits, and no
// compiler contracts a product and a sum into an FMA across the rounding — except QLinearAdd's
// multiply-adds where its constants show the float64 form exact (qlinearAddFusable): there the
// "fma" intrinsic, one float32 rounding, which c emits as fmaf (16 lanes a vector, not 8 doubles).
import type { DType } from "../ast/graph/dtype.js"
import { globalAvgScale, qlinearAddFixed, spanScalars } from "../ast/graph/ops/contrib-quant.js"
import { softmaxConstants, softmaxPlan } from "../ast/graph/ops/contrib-quant-softmax.js"
import { toChannelsFirst, toChannelsLast } from "../ast/graph/ops/contrib-quant-common.js"
import { add, c, call, cast, div, fma32, ge, gt, lt, max, min, mul, select, sub, type Expr } from "../ast/te/expr.js"
import { at, compute, maxReduce, reduceAxis, sum, type ComputeTensor, type TeTensor } from "../ast/te/tensor.js"
import { poolNd } from "./op-library-conv.js"
import { bread, inp, none, num, shapeOf, type OpCompute, type OpComputeCtx } from "./op-library-common.js"
import { TENSOR_MOVES } from "./op-library-tensor.js"

const W: DType = "float64"
const F32: DType = "float32"
const RANGE: Partial<Record<DType, readonly [number, number]>> = { int8: [-128, 127], uint8: [0, 255] }

/** `e` (float64) rounded to float32 and widened back. */
const r32 = (e: Expr): Expr => cast(W, cast("float32", e))
const f64 = (x: number): Expr => c(x, W)
const wide = (e: Expr): Expr => cast(W, e)

/** A per-tensor scale input's value: a constant float32 scalar, or the op declines. */
const scaleAt = (ctx: OpComputeCtx, k: number, what: string): number => {
  const v = ctx.constants[k] ?? none(`${ctx.node.op}: ${what} (input ${k}) is not a constant`)
  if (v.length !== 1) none(`${ctx.node.op}: ${what} is not a scalar`)
  return v[0]
}

/** A per-tensor zero point's value (0 where the optional input is omitted): a constant, or the op declines. */
const zeroAt = (ctx: OpComputeCtx, k: number, what: string): number => {
  if (!ctx.node.inputs[k]) return 0
  const v = ctx.constants[k] ?? none(`${ctx.node.op}: ${what} (input ${k}) is not a constant`)
  if (v.length !== 1) none(`${ctx.node.op}: ${what} is not a scalar`)
  return v[0]
}

/**
 * A float64 value already rounded to float32 (every caller's `r32`), in output units, rounded half
 * to even, plus the zero point, saturated and stored as `dtype`. The steps after the rounding to
 * float32 run in float32: rounding a float32 value to an integer is exact in either type, and so is
 * adding a zero point of at most 255 below 2^24 (beyond, float32 may round the sum, but it saturates
 * to the same bound). The saturation is min / max by constants, the form the c emitter converts
 * with its vectorizable conversion (the selects it left to tessera_f2i, a scalar loop: ResNet-18
 * int8's QLinearAdds took 3.7 of its 20 ms).
 */
const store = (v: Expr, zp: number, dtype: DType): Expr => {
  const [lo, hi] = RANGE[dtype] ?? none(`an 8-bit output of type ${dtype}`)
  const q = add(call("round", cast(F32, v)), c(zp, F32))
  return cast(dtype, min(max(q, c(lo, F32)), c(hi, F32)))
}

/** An 8-bit value minus its zero point, as float64 (exact). */
const shifted = (x: Expr, zp: number): Expr => sub(wide(x), f64(zp))

/** quantize(dequantize(x)) into other params, in float32 as onnxruntime's requantizing table. */
const requant = (x: Expr, xs: number, xz: number, ys: number, yz: number, dtype: DType): Expr =>
  store(r32(div(r32(mul(shifted(x, xz), f64(xs))), f64(ys))), yz, dtype)

/**
 * QLinearAdd (`add2`) or QLinearMul, with the reference kernels' rules (qlinearAddRule,
 * qlinearMulRule): Add on the raw operands with onnxruntime's fixed part and fused multiply-adds
 * (the product of an 8-bit value and a float32 ratio is exact in float64, so a float64 sum rounded
 * once to float32 is the fused result), its scalar-per-span form chosen from the shapes as
 * onnxruntime's broadcast walk chooses it.
 */
const binary = (add2: boolean): OpCompute => (ctx) => {
  const a = inp(ctx, 0)
  const b = inp(ctx, 3)
  const dtype = ctx.outputs[0].dtype
  const out = shapeOf(ctx.outputs[0])
  const [za, zb, zc] = [zeroAt(ctx, 2, "A_zero_point"), zeroAt(ctx, 5, "B_zero_point"), zeroAt(ctx, 7, "C_zero_point")]
  const [sa, sb, sc] = [scaleAt(ctx, 1, "A_scale"), scaleAt(ctx, 4, "B_scale"), scaleAt(ctx, 6, "C_scale")]
  const ra = Math.fround(sa / sc)
  const rb = Math.fround(sb / sc)
  const r = Math.fround(Math.fround(sa * sb) / sc)
  const span = spanScalars(a.shape, b.shape, out)
  const fixed = qlinearAddFixed(ra, za, rb, zb, zc, span.aScalar)
  // (both operands' products fused in float32 where the float64 form is provably the same value)
  const fused = add2 && !span.aScalar && !span.bScalar && qlinearAddFusable(ra, rb, fixed, dtype)
  /** x·y + z rounded once to float32: in float64, rounded after (exact: the sums stay below 2^53 units). */
  const fma64 = (x: Expr, y: number, z: Expr) => r32(add(mul(x, f64(y)), z))
  return [
    compute(ctx.name(), out, (...i) => {
      if (fused) {
        const [x, y] = [cast(F32, bread(a, i)), cast(F32, bread(b, i))]
        return store(fma32(x, c(ra, F32), fma32(y, c(rb, F32), c(fixed, F32))), 0, dtype)
      }
      const x = wide(bread(a, i))
      const y = wide(bread(b, i))
      if (!add2) return store(r32(mul(mul(sub(x, f64(za)), sub(y, f64(zb))), f64(r))), zc, dtype)
      const v = span.aScalar
        ? fma64(y, rb, r32(add(f64(fixed), r32(mul(x, f64(ra))))))
        : span.bScalar
          ? fma64(x, ra, r32(add(f64(fixed), r32(mul(y, f64(rb))))))
          : fma64(x, ra, fma64(y, rb, f64(fixed)))
      return store(v, 0, dtype)
    }, dtype),
  ]
}

/** The largest power of two that divides a finite `k` (0 for 0): every multiple of `k` by an integer is a multiple of it. */
const granule = (k: number): number => {
  if (k === 0) return 0
  let g = 2 ** Math.floor(Math.log2(Math.abs(k)))
  while (k % g !== 0) g /= 2
  return g
}

/**
 * Whether QLinearAdd's two-operand form a·ra + (b·rb + fixed) (8-bit a, b; float32 ra, rb, fixed),
 * each sum rounded once to float32, computes the same float32 value in float64 — each exact sum
 * rounded to float64, then to float32, the reference kernel's form and the one js and wasm emit —
 * as fused (the "fma" intrinsic: c's fmaf, one rounding). It does when each exact sum is a float64:
 * every term is a multiple of the smallest granule g of ra, rb and fixed (the product of an integer
 * and a float32 is a multiple of the float32's granule, and a float32 rounding of a multiple of g is
 * one), so a sum of magnitude at most B is k·g with |k| ≤ B / g, a float64 below 2^53.
 */
export const qlinearAddFusable = (ra: number, rb: number, fixed: number, dtype: DType): boolean => {
  const [lo, hi] = RANGE[dtype] ?? none(`an 8-bit output of type ${dtype}`)
  const big = Math.max(-lo, hi)
  const inner = granule(fixed) === 0 ? granule(rb) : Math.min(granule(rb), granule(fixed))
  const innerMax = big * Math.abs(rb) + Math.abs(fixed)
  const outer = Math.min(granule(ra), inner)
  // (the inner sum's float32 rounding may round its magnitude up: at most one part in 2^23)
  const outerMax = big * Math.abs(ra) + innerMax * (1 + 2 ** -22)
  const exact = (max: number, g: number) => g > 0 && Number.isFinite(max) && max / g < 2 ** 52
  return exact(innerMax, inner) && exact(outerMax, outer)
}

/** An elementwise op through dequantize → g (float32) → quantize; `g` maps a float64 expr to one rounded to float32. */
const unary = (g: (v: Expr, ctx: OpComputeCtx) => Expr): OpCompute => (ctx) => {
  const x = inp(ctx, 0)
  const dtype = ctx.outputs[0].dtype
  const [xs, xz, ys, yz] = [scaleAt(ctx, 1, "X_scale"), zeroAt(ctx, 2, "X_zero_point"), scaleAt(ctx, 3, "Y_scale"), zeroAt(ctx, 4, "Y_zero_point")]
  return [
    compute(ctx.name(), shapeOf(ctx.outputs[0]), (...i) => {
      const v = r32(mul(shifted(at(x, ...i), xz), f64(xs)))
      return store(r32(div(g(v, ctx), f64(ys))), yz, dtype)
    }, dtype),
  ]
}

const globalAveragePool: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const dtype = ctx.outputs[0].dtype
  const last = num(ctx.attrs.channels_last, 0) !== 0
  const r = x.shape.length
  const spatial = last ? x.shape.slice(1, r - 1) : x.shape.slice(2)
  const size = spatial.reduce((p, d) => p * d, 1)
  const [xz, yz] = [zeroAt(ctx, 2, "x_zero_point"), zeroAt(ctx, 4, "y_zero_point")]
  const scale = globalAvgScale(scaleAt(ctx, 1, "x_scale"), scaleAt(ctx, 3, "y_scale"), size)
  const rk = spatial.map((d, j) => reduceAxis(d, `${ctx.name()}.r${j}`))
  const out = shapeOf(ctx.outputs[0])
  // the integer sum of each channel (exact in int32: at most 2^24 values of 8 bits)
  if (size >= 1 << 23) none(`QLinearGlobalAveragePool over ${size} values (int32 sum)`)
  const acc = compute(ctx.name("sum"), out, (...i) => {
    const ks = rk.map((k) => k.var)
    const idx = last ? [i[0], ...ks, i[r - 1]] : [i[0], i[1], ...ks]
    return sum(cast("int32", at(x, ...idx)), rk)
  }, "int32", "global_pool")
  return [acc, compute(ctx.name(), out, (...i) => store(r32(mul(sub(wide(at(acc, ...i)), f64(xz * size)), f64(scale))), yz, dtype), dtype)]
}

/** A rank-r permutation of `t` as a compute (out dim k reads dim perm[k]). */
const permuted = (ctx: OpComputeCtx, t: TeTensor, perm: readonly number[], suffix: string): ComputeTensor => {
  const shape = perm.map((p) => t.shape[p])
  return compute(ctx.name(suffix), shape, (...i) => {
    const idx = new Array<Expr>(perm.length)
    perm.forEach((p, k) => (idx[p] = i[k]))
    return at(t, ...idx)
  }, t.dtype)
}

const averagePool: OpCompute = (ctx) => {
  const x0 = inp(ctx, 0)
  const dtype = ctx.outputs[0].dtype
  const last = num(ctx.attrs.channels_last, 0) !== 0
  const r = x0.shape.length
  const [xs, xz, ys, yz] = [scaleAt(ctx, 1, "x_scale"), zeroAt(ctx, 2, "x_zero_point"), scaleAt(ctx, 3, "y_scale"), zeroAt(ctx, 4, "y_zero_point")]
  const pre: ComputeTensor[] = []
  const x = last ? permuted(ctx, x0, toChannelsFirst(r), "nchw") : x0
  if (x.kind === "compute") pre.push(x)
  // dequantized in float32, pooled in float32 (AveragePool's compute), quantized
  const deq = compute(ctx.name("deq"), x.shape, (...i) => cast("float32", mul(shifted(at(x, ...i), xz), f64(xs))), "float32")
  const outShape = shapeOf(ctx.outputs[0])
  const nchwOut = last ? toChannelsFirst(r).map((p) => outShape[p]) : outShape
  const pooled = poolNd("avg")({
    ...ctx,
    inputs: [deq],
    outputs: [{ dtype: "float32", shape: nchwOut }],
    name: (s) => ctx.name(s ? `avg_${s}` : "avg"),
  })
  const avg = pooled[pooled.length - 1]
  const q = compute(last ? ctx.name("q") : ctx.name(), nchwOut, (...i) => store(r32(div(wide(at(avg, ...i)), f64(ys))), yz, dtype), dtype)
  const post = last ? [permuted(ctx, q, toChannelsLast(r), "")] : []
  return [...pre, deq, ...pooled, q, ...post]
}

const concat: OpCompute = (ctx) => {
  const dtype = ctx.outputs[0].dtype
  const [ys, yz] = [scaleAt(ctx, 0, "Y_scale"), zeroAt(ctx, 1, "Y_zero_point")]
  const made: ComputeTensor[] = []
  const parts: TeTensor[] = []
  for (let k = 2; k < ctx.inputs.length; k += 3) {
    const x = inp(ctx, k)
    const [xs, xz] = [scaleAt(ctx, k + 1, `input ${k + 1} (a scale)`), zeroAt(ctx, k + 2, `input ${k + 2} (a zero point)`)]
    if (xs === ys && xz === yz) parts.push(x)
    else {
      const q = compute(ctx.name(`rq${k}`), x.shape, (...i) => requant(at(x, ...i), xs, xz, ys, yz, dtype), dtype)
      made.push(q)
      parts.push(q)
    }
  }
  const joined = TENSOR_MOVES.Concat({ ...ctx, inputs: parts, constants: [] })
  return [...made, ...joined]
}

const where: OpCompute = (ctx) => {
  const cond = inp(ctx, 0)
  const x = inp(ctx, 1)
  const y = inp(ctx, 4)
  const dtype = ctx.outputs[0].dtype
  const [zs, zz] = [scaleAt(ctx, 7, "z_scale"), zeroAt(ctx, 8, "z_zero_point")]
  const side = (t: TeTensor, k: number, i: readonly Expr[]) => {
    const [s, z] = [scaleAt(ctx, k, "a scale"), zeroAt(ctx, k + 1, "a zero point")]
    const v = bread(t, i)
    return s === zs && z === zz ? v : requant(v, s, z, zs, zz, dtype)
  }
  return [compute(ctx.name(), shapeOf(ctx.outputs[0]), (...i) => select(bread(cond, i), side(x, 2, i), side(y, 5, i)), dtype)]
}

const qgemm: OpCompute = (ctx) => {
  const a = inp(ctx, 0)
  const b = inp(ctx, 3)
  const bias = ctx.inputs[6]
  const transA = num(ctx.attrs.transA, 0) !== 0
  const transB = num(ctx.attrs.transB, 0) !== 0
  const [M, N] = shapeOf(ctx.outputs[0])
  const K = transA ? a.shape[0] : a.shape[1]
  const za = zeroAt(ctx, 2, "a_zero_point")
  const bs = inp(ctx, 4)
  const bz = ctx.inputs[5]
  const quantized = ctx.node.inputs.length > 7 && ctx.node.inputs[7] !== ""
  const as = scaleAt(ctx, 1, "a_scale")
  const ys = quantized ? scaleAt(ctx, 7, "y_scale") : undefined
  const yz = quantized ? zeroAt(ctx, 8, "y_zero_point") : 0
  /** A per-tensor (one value) or per-column (N values) parameter at column n. */
  const column = (t: TeTensor, n: Expr): Expr => (t.shape.reduce((p, d) => p * d, 1) === 1 ? at(t, ...t.shape.map(() => c(0))) : at(t, n))
  // the multiplier of column n exactly as qgemmScales computes it: alpha · a_scale, times b_scale[n], over y_scale
  const scale = (n: Expr): Expr => {
    const m = r32(mul(f64(Math.fround(Math.fround(num(ctx.attrs.alpha, 1)) * as)), wide(column(bs, n))))
    return ys === undefined ? m : r32(div(m, f64(ys)))
  }
  const rk = reduceAxis(K, `${ctx.name()}.k`)
  const acc = compute(ctx.name("acc"), [M, N], (m, n) => {
    const av = sub(cast("int32", transA ? at(a, rk.var, m) : at(a, m, rk.var)), c(za, "int32"))
    const bv0 = cast("int32", transB ? at(b, n, rk.var) : at(b, rk.var, n))
    const bv = bz ? sub(bv0, cast("int32", column(bz, n))) : bv0
    return sum(mul(av, bv), [rk])
  }, "int32")
  const out = ctx.outputs[0].dtype
  return [
    acc,
    compute(ctx.name(), [M, N], (m, n) => {
      const total = bias ? add(at(acc, m, n), bread(bias, [m, n])) : at(acc, m, n)
      const v = r32(mul(wide(total), scale(n)))
      return quantized ? store(v, yz, out) : cast("float32", v)
    }, out),
  ]
}

const softmax: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const dtype = ctx.outputs[0].dtype
  const opset = num(ctx.attrs.opset, 13)
  const { axis, D } = softmaxPlan(x.shape, typeof ctx.attrs.axis === "number" ? ctx.attrs.axis : undefined, opset)
  const xs = scaleAt(ctx, 1, "X_scale")
  const { shift, mult } = softmaxConstants(xs, scaleAt(ctx, 3, "y_scale"), D)
  const yz = zeroAt(ctx, 4, "y_zero_point")
  // the reduced dims: axis alone (opset 13+) or axis and every later one (before 13)
  const reduced = x.shape.map((_, k) => (opset < 13 ? k >= axis : k === axis))
  const rowShape = x.shape.map((d, k) => (reduced[k] ? 1 : d))
  const rk = x.shape.flatMap((d, k) => (reduced[k] ? [reduceAxis(d, `${ctx.name()}.r${k}`)] : []))
  const inRow = (i: readonly Expr[]) => {
    let j = 0
    return i.map((e, k) => (reduced[k] ? rk[j++].var : e))
  }
  const rowOf = (i: readonly Expr[]) => i.map((e, k) => (reduced[k] ? c(0) : e))
  const mx = compute(ctx.name("max"), rowShape, (...i) => maxReduce(cast("int32", at(x, ...inRow(i))), rk), "int32")
  const e = compute(ctx.name("exp"), x.shape, (...i) => {
    const d = wide(sub(cast("int32", at(x, ...i)), at(mx, ...rowOf(i))))
    return cast("float32", call("exp", mul(add(d, f64(shift)), f64(xs))))
  }, "float32")
  const total = compute(ctx.name("sum"), rowShape, (...i) => sum(at(e, ...inRow(i)), rk), "float32")
  return [
    mx,
    e,
    total,
    compute(ctx.name(), x.shape, (...i) => store(r32(div(r32(mul(wide(at(e, ...i)), f64(mult))), wide(at(total, ...rowOf(i))))), yz, dtype), dtype),
  ]
}

/** The com.microsoft computes, by op name (looked up for nodes of that domain only). */
export const CONTRIB_QUANT: Readonly<Record<string, OpCompute>> = {
  QLinearAdd: binary(true),
  QLinearMul: binary(false),
  QLinearSigmoid: unary((v) => r32(call("sigmoid", v))),
  QLinearLeakyRelu: unary((v, ctx) => {
    const alpha = Math.fround(num(ctx.attrs.alpha, 0.01))
    return select(ge(v, f64(0)), v, r32(mul(v, f64(alpha))))
  }),
  QLinearGlobalAveragePool: globalAveragePool,
  QLinearAveragePool: averagePool,
  QLinearConcat: concat,
  QLinearWhere: where,
  QLinearSoftmax: softmax,
  QGemm: qgemm,
}
