// Reductions and normalizations: the Reduce* family (axes from the attribute or a constant input,
// reduce-all by omission, noop_with_empty_axes), ArgMax/ArgMin (a max, then the first/last index
// that holds it; the first NaN wins), LayerNormalization, InstanceNormalization and LRN. Each
// matches its reference kernel in src/ast/graph/ops/{reduce,norm-*}.ts.
import type { DType } from "../ast/graph/dtype.js"
import { add, and, c, call, cast, div, eq, floordiv, ge, le, lt, mul, select, sub, bin, type Expr, type IterVar, type Var } from "../ast/te/expr.js"
import { at, commReducer, compute, maxReduce, minReduce, reduceAxis, reduceWith, sum, type ComputeTensor, type TeTensor } from "../ast/te/tensor.js"
import { bread, constInts, fl, inp, ints, isFloatDtype, none, normAxis, num, shapeOf, type OpCompute, type OpComputeCtx } from "./op-library-common.js"

const PROD = commReducer("prod", (a, b) => mul(a, b), () => 1)

type ReduceKind = "sum" | "sumsq" | "l1" | "l2" | "logsum" | "logsumexp" | "mean" | "prod" | "max" | "min"

/** The reduced axes (sorted, normalized), or undefined for "every element its own set" (noop). */
const reducedAxes = (ctx: OpComputeCtx, rank: number, inputFrom: number): number[] | undefined => {
  const attr = ints(ctx.attrs.axes)
  const hasInput = !!ctx.node.inputs[1]
  const axes = hasInput && (attr === undefined || ctx.opset >= inputFrom) ? constInts(ctx, 1, "axes") : attr
  if (!axes || axes.length === 0) return num(ctx.attrs.noop_with_empty_axes, 0) !== 0 ? undefined : Array.from({ length: rank }, (_, k) => k)
  return [...new Set(axes.map((a) => normAxis(a, rank)))].sort((a, b) => a - b)
}

/** The input index of a reduction: kept axes from the output index, reduced ones from the reduce vars. */
const inputIndex = (rank: number, axes: readonly number[], rs: readonly IterVar[], keep: boolean, i: readonly Expr[]): Expr[] => {
  const idx: Expr[] = []
  let q = 0
  for (let k = 0; k < rank; k++) {
    const r = axes.indexOf(k)
    if (r >= 0) {
      idx.push(rs[r].var)
      if (keep) q++
    } else idx.push(i[q++])
  }
  return idx
}

const elementwiseOf = (kind: ReduceKind, v: Expr): Expr => {
  switch (kind) {
    case "sumsq":
      return mul(v, v)
    case "l1":
      return call("fabs", v)
    case "l2":
      return call("sqrt", mul(v, v))
    case "logsum":
      return call("log", v)
    default:
      return v
  }
}

const reduceOp =
  (kind: ReduceKind, inputFrom = 18): OpCompute =>
  (ctx) => {
    const x = inp(ctx, 0)
    const rank = x.shape.length
    const dtype = ctx.outputs[0].dtype
    const out = shapeOf(ctx.outputs[0])
    const axes = reducedAxes(ctx, rank, inputFrom)
    if ((kind === "logsum" || kind === "logsumexp" || kind === "l2") && !isFloatDtype(dtype)) return none(`${ctx.node.op} of ${dtype}`)
    if (!axes) return [compute(ctx.name(), out, (...i) => elementwiseOf(kind, at(x, ...i)), dtype)]
    if (axes.length === 0) return none("a reduction of a scalar")
    const keep = num(ctx.attrs.keepdims, 1) === 1
    const axesVars = (tag: string) => axes.map((a) => reduceAxis(x.shape[a], `${ctx.name()}.${tag}${a}`))
    const read = (rs: readonly IterVar[], i: readonly Var[]) => at(x, ...inputIndex(rank, axes, rs, keep, i))
    const count = axes.reduce((p, a) => p * x.shape[a], 1)
    if (kind === "logsumexp") {
      const r1 = axesVars("m")
      const mx = compute(ctx.name("max"), out, (...i) => maxReduce(read(r1, i), r1), dtype)
      const r2 = axesVars("s")
      const finite = (m: Expr) => lt(call("fabs", m), fl(dtype, Infinity))
      const s = compute(ctx.name("sum"), out, (...i) => {
        const m = at(mx, ...i)
        const v = read(r2, i)
        return sum(call("exp", select(finite(m), sub(v, m), v)), r2)
      }, dtype)
      return [mx, s, compute(ctx.name(), out, (...i) => {
        const m = at(mx, ...i)
        const l = call("log", at(s, ...i))
        return select(finite(m), add(l, m), l)
      }, dtype)]
    }
    const rs = axesVars("r")
    const needsFinish = kind === "l2" || kind === "logsum" || kind === "mean"
    const red = compute(ctx.name(needsFinish ? "red" : undefined), out, (...i) => {
      const v = read(rs, i)
      switch (kind) {
        case "max":
          return maxReduce(v, rs)
        case "min":
          return minReduce(v, rs)
        case "prod":
          return reduceWith(PROD)(v, rs)
        case "sumsq":
        case "l2":
          return sum(mul(v, v), rs)
        case "l1":
          return sum(call("fabs", v), rs)
        default:
          return sum(v, rs)
      }
    }, dtype)
    if (!needsFinish) return [red]
    return [red, compute(ctx.name(), out, (...i) => {
      const a = at(red, ...i)
      return kind === "l2" ? call("sqrt", a) : kind === "logsum" ? call("log", a) : div(a, fl(dtype, count))
    }, dtype)]
  }

/** ArgMax / ArgMin: the extreme value, then the first index holding it (or the last with select_last_index); a NaN wins at its first index. */
const argOp =
  (largest: boolean): OpCompute =>
  (ctx) => {
    const x = inp(ctx, 0)
    const rank = x.shape.length
    const axis = normAxis(num(ctx.attrs.axis, 0), rank)
    const keep = num(ctx.attrs.keepdims, 1) === 1
    const last = num(ctx.attrs.select_last_index, 0) !== 0
    const out = shapeOf(ctx.outputs[0])
    const dim = x.shape[axis]
    const axisVar = (tag: string) => reduceAxis(dim, `${ctx.name()}.${tag}`)
    const read = (r: IterVar, i: readonly Var[]) => at(x, ...inputIndex(rank, [axis], [r], keep, i))
    const r0 = axisVar("ext")
    const ext = compute(ctx.name("ext"), out, (...i) => (largest ? maxReduce : minReduce)(read(r0, i), [r0]), x.dtype)
    const isNaN = (v: Expr) => (isFloatDtype(v.dtype) ? bin("ne", v, v) : c(0, "bool"))
    const r1 = axisVar("first")
    const first = compute(ctx.name("first"), out, (...i) => {
      const v = read(r1, i)
      return minReduce(select(bin("or", eq(v, at(ext, ...i)), isNaN(v)), r1.var, c(dim)), [r1])
    }, "int32")
    if (!last) return [ext, first, compute(ctx.name(), out, (...i) => cast("int64", at(first, ...i)), "int64")]
    const r2 = axisVar("last")
    const lastEq = compute(ctx.name("last"), out, (...i) => maxReduce(select(eq(read(r2, i), at(ext, ...i)), r2.var, c(-1)), [r2]), "int32")
    return [
      ext,
      first,
      lastEq,
      compute(ctx.name(), out, (...i) => cast("int64", select(isNaN(at(ext, ...i)), at(first, ...i), at(lastEq, ...i))), "int64"),
    ]
  }

/** Mean and 1/√(var + ε) over the trailing dims from `axis` (float64), then the affine map. */
const normStats = (ctx: OpComputeCtx, x: TeTensor, lead: readonly number[], inner: readonly number[], eps: number): [ComputeTensor, ComputeTensor] => {
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
  void eps
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
  const [mean, ss] = normStats(ctx, x, lead, inner, eps)
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

export const REDUCTIONS: Record<string, OpCompute> = {
  ReduceSum: reduceOp("sum", 13),
  ReduceMean: reduceOp("mean"),
  ReduceMax: reduceOp("max"),
  ReduceMin: reduceOp("min"),
  ReduceProd: reduceOp("prod"),
  ReduceL1: reduceOp("l1"),
  ReduceL2: reduceOp("l2"),
  ReduceSumSquare: reduceOp("sumsq"),
  ReduceLogSum: reduceOp("logsum"),
  ReduceLogSumExp: reduceOp("logsumexp"),
  ArgMax: argOp(true),
  ArgMin: argOp(false),
  LayerNormalization: layerNorm,
  InstanceNormalization: instanceNorm,
  GroupNormalization: groupNorm,
  LRN: lrn,
}

/** CumSum / CumProd along a constant axis: each output a masked reduction over the axis. */
const scanOp =
  (prod: boolean): OpCompute =>
  (ctx) => {
    const x = inp(ctx, 0)
    const rank = x.shape.length
    const axis = normAxis((constInts(ctx, 1, "axis") ?? none("no axis"))[0], rank)
    const excl = num(ctx.attrs.exclusive, 0) !== 0
    const rev = num(ctx.attrs.reverse, 0) !== 0
    const r = reduceAxis(x.shape[axis], `${ctx.name()}.s`)
    return [
      compute(ctx.name(), x.shape, (...i) => {
        const k = i[axis]
        const take = rev ? (excl ? lt(k, r.var) : le(k, r.var)) : excl ? lt(r.var, k) : le(r.var, k)
        const v = at(x, ...i.map((e, q) => (q === axis ? r.var : e)))
        return prod ? reduceWith(PROD)(select(take, v, fl(x.dtype, 1)), [r]) : sum(select(take, v, fl(x.dtype, 0)), [r])
      }, x.dtype),
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

export const SCANS_AND_NORMS: Record<string, OpCompute> = {
  CumSum: scanOp(false),
  CumProd: scanOp(true),
  LpNormalization: lpNorm,
  MeanVarianceNormalization: mvn,
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

/** Hardmax: 1 at the first maximum of each row (the coerced 2-D row before opset 13, one axis after). */
const hardmax: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const rank = x.shape.length
  const legacy = ctx.opset < 13
  const axis = normAxis(num(ctx.attrs.axis, legacy ? 1 : -1), rank)
  const reduced = x.shape.map((_, k) => (legacy ? k >= axis : k === axis))
  const kept = x.shape.filter((_, k) => !reduced[k])
  const statShape = kept.length ? kept : [1]
  const statIdx = (i: readonly Expr[]) => (kept.length ? i.filter((_, k) => !reduced[k]) : [c(0)])
  const red = (tag: string) => x.shape.flatMap((d, k) => (reduced[k] ? [reduceAxis(d, `${ctx.name()}.${tag}${k}`)] : []))
  const full = (i: readonly Expr[], rs: readonly IterVar[]) => {
    let q = 0
    let r = 0
    return x.shape.map((_, k) => (reduced[k] ? rs[r++].var : kept.length ? i[q++] : c(0)))
  }
  /** The flat position within the row (row-major over the reduced dims). */
  const flat = (idx: readonly Expr[]) => x.shape.reduce<Expr>((acc, d, k) => (reduced[k] ? add(mul(acc, c(d)), idx[k]) : acc), c(0))
  const r1 = red("m")
  // the reference's scan: strictly greater replaces, so NaN never wins and the first maximum stays
  const mx = compute(ctx.name("max"), statShape, (...i) => maxReduce(select(bin("ne", at(x, ...full(i, r1)), at(x, ...full(i, r1))), fl(x.dtype, -Infinity), at(x, ...full(i, r1))), r1), x.dtype)
  const r2 = red("f")
  const first = compute(ctx.name("first"), statShape, (...i) => {
    const idx = full(i, r2)
    return minReduce(select(eq(at(x, ...idx), at(mx, ...i)), flat(idx), c(2 ** 30)), r2)
  }, "int32")
  return [
    mx,
    first,
    compute(ctx.name(), x.shape, (...i) => {
      const f = at(first, ...statIdx(i))
      // a row starting with NaN, or of NaNs only (nothing equals the max): the reference keeps index 0
      const x0 = at(x, ...i.map((e, k) => (reduced[k] ? c(0) : e)))
      const at0 = bin("or", bin("ne", x0, x0), eq(f, c(2 ** 30)))
      return select(eq(select(at0, c(0), f), flat(i)), fl(x.dtype, 1), fl(x.dtype, 0))
    }, x.dtype),
  ]
}

export const MORE_NORMS: Record<string, OpCompute> = { RMSNormalization: rmsNorm, Hardmax: hardmax }
