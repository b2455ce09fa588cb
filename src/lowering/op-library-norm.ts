// Normalizations: LayerNormalization, RMSNormalization, InstanceNormalization and
// GroupNormalization (statistics in float64), LRN, LpNormalization and MeanVarianceNormalization,
// each as its reference kernel in src/ast/graph/ops/norm-*.ts computes it.
import type { DType } from "../ast/graph/dtype.js"
import { add, and, c, call, cast, div, eq, floordiv, ge, le, mul, select, sub, type Expr, type IterVar } from "../ast/te/expr.js"
import { at, compute, reduceAxis, sum, type ComputeTensor, type TeTensor } from "../ast/te/tensor.js"
import { bread, fl, inp, ints, none, normAxis, num, type OpCompute, type OpComputeCtx } from "./op-library-common.js"

/** Mean and Σ(x − mean)² over the trailing dims `inner` of x (float64), per index of `lead`. */
const normStats = (ctx: OpComputeCtx, x: TeTensor, lead: readonly number[], inner: readonly number[]): [ComputeTensor, ComputeTensor] => {
  const W: DType = "float64"
  const n = inner.reduce((p, d) => p * d, 1)
  const statShape = lead.length ? lead : [1]
  const li = (i: readonly Expr[]) => (lead.length ? i : [])
  const r1 = inner.map((d, k) => reduceAxis(d, `${ctx.name()}.a${k}`))
  const mean = compute(ctx.name("mean"), statShape, (...i) => sum(mul(cast(W, at(x, ...li(i), ...r1.map((r) => r.var))), fl(W, 1 / n)), r1), W)
  const r2 = inner.map((d, k) => reduceAxis(d, `${ctx.name()}.b${k}`))
  const inv = compute(ctx.name("var"), statShape, (...i) => {
    const d = sub(cast(W, at(x, ...li(i), ...r2.map((r) => r.var))), at(mean, ...i))
    return sum(mul(d, d), r2)
  }, W)
  return [mean, inv]
}

const layerNorm: OpCompute = (ctx) => {
  if (ctx.node.outputs.slice(1).some((o) => o !== "")) return none("LayerNormalization's Mean / InvStdDev outputs")
  const x = inp(ctx, 0)
  const scale = inp(ctx, 1)
  const bias = ctx.inputs[2]
  const rank = x.shape.length
  const axis = normAxis(num(ctx.attrs.axis, -1), rank)
  const eps = num(ctx.attrs.epsilon, 1e-5)
  const lead = x.shape.slice(0, axis)
  const inner = x.shape.slice(axis)
  const n = inner.reduce((p, d) => p * d, 1)
  const [mean, ss] = normStats(ctx, x, lead, inner)
  const W: DType = "float64"
  const dtype = x.dtype
  return [
    mean,
    ss,
    compute(ctx.name(), x.shape, (...i) => {
      const si = lead.length ? i.slice(0, axis) : [c(0)]
      const inv = div(fl(W, 1), call("sqrt", add(div(at(ss, ...si), fl(W, n)), fl(W, eps))))
      // as the reference: the standardized value in X's type, then scaled and shifted
      const y = mul(cast(W, cast(dtype, mul(sub(cast(W, at(x, ...i)), at(mean, ...si)), inv))), cast(W, bread(scale, i)))
      return cast(dtype, bias ? add(y, cast(W, bread(bias, i))) : y)
    }, dtype),
  ]
}

/**
 * y = s[c]·(x − m)/√(v + ε) + b[c] with mean and variance per sample and group of channels
 * (InstanceNormalization: one channel per group). Scale and bias hold one value per channel, per
 * group (GroupNormalization-18) or a single one.
 */
const groupNormWith = (ctx: OpComputeCtx, G: number): ReturnType<OpCompute> => {
  const x = inp(ctx, 0)
  if (x.shape.length < 2) return none(`${ctx.node.op} of rank ${x.shape.length}`)
  const scale = inp(ctx, 1)
  const bias = inp(ctx, 2)
  const eps = num(ctx.attrs.epsilon, 1e-5)
  const [N, C] = x.shape
  if (G <= 0 || C % G !== 0) return none(`${C} channels in ${G} groups`)
  const per = C / G
  const spatial = x.shape.slice(2)
  const n = per * spatial.reduce((p, d) => p * d, 1)
  const W: DType = "float64"
  const red = (tag: string) => [reduceAxis(per, `${ctx.name()}.${tag}c`), ...spatial.map((d, k) => reduceAxis(d, `${ctx.name()}.${tag}${k}`))]
  const read = (b: Expr, g: Expr, rs: readonly IterVar[]) => cast(W, at(x, b, add(mul(g, c(per)), rs[0].var), ...rs.slice(1).map((r) => r.var)))
  const r1 = red("a")
  const mean = compute(ctx.name("mean"), [N, G], (b, g) => sum(mul(read(b, g, r1), fl(W, 1 / n)), r1), W)
  const r2 = red("b")
  const ss = compute(ctx.name("var"), [N, G], (b, g) => {
    const d = sub(read(b, g, r2), at(mean, b, g))
    return sum(mul(d, d), r2)
  }, W)
  const param = (t: TeTensor, ch: Expr): Expr => {
    const len = t.shape.reduce((p, d) => p * d, 1)
    const k = len === C ? ch : len === G ? floordiv(ch, c(per)) : len === 1 ? c(0) : none(`${ctx.node.op} parameter of ${len} values`)
    return cast(W, at(t, ...(t.shape.length === 0 ? [] : [...t.shape.slice(0, -1).map(() => c(0)), k])))
  }
  const dtype = x.dtype
  return [
    mean,
    ss,
    compute(ctx.name(), x.shape, (...i) => {
      const g = per === 1 ? i[1] : floordiv(i[1], c(per))
      const inv = div(fl(W, 1), call("sqrt", add(div(at(ss, i[0], g), fl(W, n)), fl(W, eps))))
      const norm = mul(sub(cast(W, at(x, ...i)), at(mean, i[0], g)), inv)
      return cast(dtype, add(mul(norm, param(scale, i[1])), param(bias, i[1])))
    }, dtype),
  ]
}

const instanceNorm: OpCompute = (ctx) => (inp(ctx, 0).shape.length < 3 ? none("InstanceNormalization without spatial dims") : groupNormWith(ctx, inp(ctx, 0).shape[1]))
const groupNorm: OpCompute = (ctx) => groupNormWith(ctx, num(ctx.attrs.num_groups, 0))

const lrn: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  if (x.shape.length < 2) return none(`LRN of rank ${x.shape.length}`)
  const size = num(ctx.attrs.size, 0)
  const alpha = num(ctx.attrs.alpha, 0.0001)
  const beta = num(ctx.attrs.beta, 0.75)
  const bias = num(ctx.attrs.bias, 1)
  const C = x.shape[1]
  const lo = Math.floor((size - 1) / 2)
  const W: DType = "float64"
  const r = reduceAxis(size, `${ctx.name()}.w`)
  const sq = compute(ctx.name("sq"), x.shape, (...i) => {
    const ch = add(sub(i[1], c(lo)), r.var)
    const inside = and(ge(ch, c(0)), le(ch, c(C - 1)))
    const v = cast(W, at(x, i[0], ch, ...i.slice(2)))
    return sum(select(inside, mul(v, v), fl(W, 0)), [r])
  }, W)
  return [
    sq,
    compute(ctx.name(), x.shape, (...i) => cast(x.dtype, div(cast(W, at(x, ...i)), call("pow", add(fl(W, bias), mul(fl(W, alpha / size), at(sq, ...i))), fl(W, beta)))), x.dtype),
  ]
}

/** LpNormalization (p = 1, 2) along one axis; a zero vector stays zero. */
const lpNorm: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const p = num(ctx.attrs.p, 2)
  if (p !== 1 && p !== 2) return none(`LpNormalization with p=${p}`)
  const rank = x.shape.length
  if (rank === 0) return none("LpNormalization of a scalar")
  const axis = normAxis(num(ctx.attrs.axis, -1), rank)
  const W: DType = "float64"
  const r = reduceAxis(x.shape[axis], `${ctx.name()}.r`)
  const acc = compute(ctx.name("acc"), x.shape.map((d, k) => (k === axis ? 1 : d)), (...i) => {
    const v = cast(W, at(x, ...i.map((e, q) => (q === axis ? r.var : e))))
    return sum(p === 1 ? call("fabs", v) : mul(v, v), [r])
  }, W)
  return [
    acc,
    compute(ctx.name(), x.shape, (...i) => {
      const a = at(acc, ...i.map((e, q) => (q === axis ? c(0) : e)))
      const norm = p === 1 ? a : call("sqrt", a)
      return cast(x.dtype, select(eq(norm, fl(W, 0)), fl(W, 0), div(cast(W, at(x, ...i)), norm)))
    }, x.dtype),
  ]
}

/** MeanVarianceNormalization over an axis set: (x − mean) / (σ + 1e-9) (opset 1: across_channels / normalize_variance). */
const mvn: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const rank = x.shape.length
  const legacy = ctx.opset < 9
  const axes = legacy
    ? (num(ctx.attrs.across_channels, 0) ? [1, 2, 3] : [2, 3]).filter((a) => a < rank)
    : (ints(ctx.attrs.axes) ?? [0, 2, 3]).map((a) => normAxis(a, rank))
  const normalize = !legacy || num(ctx.attrs.normalize_variance, 1) !== 0
  const W: DType = "float64"
  const statShape = x.shape.map((d, k) => (axes.includes(k) ? 1 : d))
  const count = axes.reduce((p, a) => p * x.shape[a], 1)
  const red = (tag: string) => axes.map((a) => reduceAxis(x.shape[a], `${ctx.name()}.${tag}${a}`))
  const full = (i: readonly Expr[], rs: readonly IterVar[]) => i.map((e, k) => (axes.includes(k) ? rs[axes.indexOf(k)].var : e))
  const statAt = (i: readonly Expr[]) => i.map((e, k) => (axes.includes(k) ? c(0) : e))
  const r1 = red("a")
  const mean = compute(ctx.name("mean"), statShape, (...i) => sum(cast(W, at(x, ...full(i, r1))), r1), W)
  const r2 = red("b")
  const sq = compute(ctx.name("sq"), statShape, (...i) => {
    const d = sub(cast(W, at(x, ...full(i, r2))), div(at(mean, ...i), fl(W, count)))
    return sum(mul(d, d), r2)
  }, W)
  return [
    mean,
    sq,
    compute(ctx.name(), x.shape, (...i) => {
      const d = sub(cast(W, at(x, ...i)), div(at(mean, ...statAt(i)), fl(W, count)))
      return cast(x.dtype, normalize ? div(d, add(call("sqrt", div(at(sq, ...statAt(i)), fl(W, count))), fl(W, 1e-9))) : d)
    }, x.dtype),
  ]
}

/** RMSNormalization: x / √(mean(x²) + ε) · scale over the dims from `axis` on. */
const rmsNorm: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const scale = inp(ctx, 1)
  const rank = x.shape.length
  const axis = normAxis(num(ctx.attrs.axis, -1), rank)
  const eps = num(ctx.attrs.epsilon, 1e-5)
  const lead = x.shape.slice(0, axis)
  const inner = x.shape.slice(axis)
  const n = inner.reduce((p, d) => p * d, 1)
  const W: DType = "float64"
  const rs = inner.map((d, k) => reduceAxis(d, `${ctx.name()}.q${k}`))
  const sq = compute(ctx.name("sq"), lead.length ? lead : [1], (...i) => {
    const v = cast(W, at(x, ...(lead.length ? i : []), ...rs.map((r) => r.var)))
    return sum(mul(v, v), rs)
  }, W)
  return [
    sq,
    compute(ctx.name(), x.shape, (...i) => {
      const inv = div(fl(W, 1), call("sqrt", add(div(at(sq, ...(lead.length ? i.slice(0, axis) : [c(0)])), fl(W, n)), fl(W, eps))))
      return cast(x.dtype, mul(mul(cast(W, at(x, ...i)), inv), cast(W, bread(scale, i))))
    }, x.dtype),
  ]
}

export const NORMALIZATIONS: Record<string, OpCompute> = {
  LayerNormalization: layerNorm,
  RMSNormalization: rmsNorm,
  InstanceNormalization: instanceNorm,
  GroupNormalization: groupNorm,
  LRN: lrn,
  LpNormalization: lpNorm,
  MeanVarianceNormalization: mvn,
}
