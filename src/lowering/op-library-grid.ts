// GridSample (N-d; nearest, linear, cubic; zeros, border, reflection padding) as the reference
// (misc-grid.ts) computes it: each grid point's source coordinate per dim (kept in memory: the
// taps read it many times), then the K^r taps with their weights, all in float64.
import type { DType } from "../ast/graph/dtype.js"
import { add, and, c, call, cast, div, eq, floormod, ge, gt, lt, max, min, mul, or, select, sub, type Expr } from "../ast/te/expr.js"
import { at, compute, reduceAxis, sum } from "../ast/te/tensor.js"
import { inp, none, num, shapeOf, type OpCompute } from "./op-library-common.js"

const W: DType = "float64"
const f = (x: number): Expr => c(x, W)

/** Reflects x into [lo, hi] by the near border until it lies inside (the reference's reflect). */
const reflect = (x: Expr, lo: number, hi: number): Expr => {
  const rng = hi - lo
  const side = (dx: Expr, near: number, far: number) => {
    const n = call("floor", div(dx, f(rng)))
    const r = sub(dx, mul(n, f(rng)))
    return select(eq(floormod(n, f(2)), f(0)), near === lo ? add(f(lo), r) : sub(f(hi), r), far === lo ? add(f(lo), r) : sub(f(hi), r))
  }
  return select(lt(x, f(lo)), side(sub(f(lo), x), lo, hi), select(gt(x, f(hi)), side(sub(x, f(hi)), hi, lo), x))
}

/** Keys' cubic weights (A = −0.75) of the four taps around a point `t` past the left one. */
const cubicWeights = (t: Expr): Expr[] => {
  const a = -0.75
  const x = call("fabs", t)
  const x1 = add(x, f(1))
  const y = sub(f(1), x)
  const z = sub(f(2), x)
  return [
    sub(mul(add(mul(sub(mul(f(a), x1), f(5 * a)), x1), f(8 * a)), x1), f(4 * a)),
    add(mul(mul(sub(mul(f(a + 2), x), f(a + 3)), x), x), f(1)),
    add(mul(mul(sub(mul(f(a + 2), y), f(a + 3)), y), y), f(1)),
    sub(mul(add(mul(sub(mul(f(a), z), f(5 * a)), z), f(8 * a)), z), f(4 * a)),
  ]
}

export const gridSample: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const grid = inp(ctx, 1)
  const r = x.shape.length - 2
  const m = (ctx.attrs.mode as string | undefined) ?? "linear"
  const mode = m === "bilinear" ? "linear" : m === "bicubic" ? "cubic" : m
  if (mode !== "nearest" && mode !== "linear" && mode !== "cubic") return none(`GridSample mode '${m}'`)
  const pad = (ctx.attrs.padding_mode as string | undefined) ?? "zeros"
  const align = num(ctx.attrs.align_corners, 0) !== 0
  const dims = x.shape.slice(2)
  if (pad === "reflection" && align && dims.some((d) => d === 1)) return none("reflection padding of a one-pixel dim with align_corners")
  const outSp = grid.shape.slice(1, -1)
  const lo = dims.map(() => (align ? 0 : -0.5))
  const hi = dims.map((d) => (align ? d - 1 : d - 0.5))
  // the source coordinate of each grid point per dim (the grid lists the innermost dim first)
  const one = reduceAxis(1, `${ctx.name()}.one`)
  const coord = compute(ctx.name("coord"), [grid.shape[0], ...outSp, r], (n, ...rest) => {
    const p = rest.slice(0, -1)
    const dim = rest[rest.length - 1]
    let e: Expr = f(0)
    // a select over the dims picks this dim's formula
    for (let k = r - 1; k >= 0; k--) {
      const d = dims[k]
      const nv = cast(W, at(grid, n, ...p, c(r - 1 - k)))
      let v = align ? mul(div(add(nv, f(1)), f(2)), f(d - 1)) : div(sub(mul(add(nv, f(1)), f(d)), f(1)), f(2))
      if (mode === "nearest") v = call("round", v)
      const outside = or(lt(v, f(lo[k])), gt(v, f(hi[k])))
      if (pad === "border") v = select(outside, min(max(v, f(0)), f(d - 1)), v)
      else if (pad === "reflection") v = reflect(v, lo[k], hi[k])
      e = k === r - 1 ? v : select(eq(dim, c(k)), v, e)
    }
    return sum(add(e, mul(cast(W, one.var), f(0))), [one])
  }, W)
  /** The clamped index of integer position i along dim k, and whether it reads a pixel (zeros padding). */
  const pixel = (i: Expr, k: number): { idx: Expr; ok: Expr } => {
    const d = dims[k]
    if (pad === "zeros") return { idx: min(max(cast("int32", i), c(0)), c(d - 1)), ok: and(ge(i, f(0)), lt(i, f(d))) }
    if (pad === "border") return { idx: cast("int32", min(max(i, f(0)), f(d - 1))), ok: c(1, "bool") }
    return { idx: min(max(cast("int32", reflect(i, lo[k], hi[k])), c(0)), c(d - 1)), ok: c(1, "bool") }
  }
  const dtype = x.dtype
  return [
    coord,
    compute(ctx.name(), shapeOf(ctx.outputs[0]), (n, ch, ...p) => {
      const taps = dims.map((_, k) => {
        const v = at(coord, n, ...p, c(k))
        if (mode === "nearest") return [{ ...pixel(cast(W, cast("int32", v)), k), w: f(1) }]
        const x0 = call("floor", v)
        const t = sub(v, x0)
        if (mode === "linear")
          return [
            { ...pixel(x0, k), w: sub(f(1), t) },
            { ...pixel(add(x0, f(1)), k), w: t },
          ]
        return cubicWeights(t).map((w, q) => ({ ...pixel(add(x0, f(q - 1)), k), w }))
      })
      let combos: { idx: Expr[]; ok: Expr; w: Expr }[] = [{ idx: [], ok: c(1, "bool"), w: f(1) }]
      for (const tk of taps) combos = combos.flatMap((cb) => tk.map((t) => ({ idx: [...cb.idx, t.idx], ok: and(cb.ok, t.ok), w: mul(cb.w, t.w) })))
      let acc: Expr = f(0)
      for (const cb of combos) acc = add(acc, select(cb.ok, mul(cb.w, cast(W, at(x, n, ch, ...cb.idx))), f(0)))
      return cast(dtype, acc)
    }, dtype),
  ]
}
