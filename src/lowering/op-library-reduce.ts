// Reductions: the Reduce* family (axes from the attribute or a constant input, reduce-all by
// omission, noop_with_empty_axes), ArgMax/ArgMin (a max, then the first/last index that holds it;
// the first NaN wins), CumSum/CumProd and Hardmax. Each matches its reference kernel in
// src/ast/graph/ops/{reduce,reduce-softmax}.ts. The normalizations live in op-library-norm.ts.
import { add, c, call, cast, div, eq, le, lt, mul, select, sub, bin, type Expr, type IterVar, type Var } from "../ast/te/expr.js"
import { at, commReducer, compute, maxReduce, minReduce, reduceAxis, reduceWith, sum } from "../ast/te/tensor.js"
import { constInts, fl, inp, ints, isFloatDtype, none, normAxis, num, shapeOf, type OpCompute, type OpComputeCtx } from "./op-library-common.js"

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
    const keep = num(ctx.attrs.keepdims, 1) !== 0
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
    const keep = num(ctx.attrs.keepdims, 1) !== 0
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

export const REDUCTION_SCANS: Record<string, OpCompute> = { CumSum: scanOp(false), CumProd: scanOp(true), Hardmax: hardmax }
