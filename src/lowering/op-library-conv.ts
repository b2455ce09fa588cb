// Windows beyond the 2-D NCHW computes in op-library.ts: Conv of any spatial rank (1-D, 3-D;
// grouped and depthwise too), ConvTranspose and the (global) pools of any spatial rank, with the reference's window
// arithmetic (src/ast/graph/ops/nn-common.ts, nn-conv-transpose.ts) for pads, auto_pad,
// output_padding and output_shape.
import { padsOf, stepsOf, windowOf, type WindowAttrs } from "../ast/graph/ops/nn-common.js"
import { add, and, c, call, cast, div, eq, floordiv, floormod, ge, lt, max, min, mul, select, sub, type Expr } from "../ast/te/expr.js"
import { at, compute, dtypeRange, maxReduce, reduceAxis, sum } from "../ast/te/tensor.js"
import { fl, inp, ints, none, num, shapeOf, type OpCompute } from "./op-library-common.js"

const inRange = (e: Expr, n: number): Expr => and(ge(e, c(0)), lt(e, c(n)))

/** Conv over any spatial rank: out[n, o, y…] = Σ_{c, k…} x[n, g·Cg + c, y·s − p + k·d] · w[o, c, k…]. */
export const convNd: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const w = inp(ctx, 1)
  const b = ctx.inputs[2]
  const sp = x.shape.length - 2
  if (sp < 1) return none(`Conv of rank ${x.shape.length}`)
  const Cg = w.shape[1]
  const kernel = w.shape.slice(2)
  const group = num(ctx.attrs.group, 1)
  const win = windowOf(x.shape.slice(2), kernel, ctx.attrs as unknown as WindowAttrs)
  const out = shapeOf(ctx.outputs[0])
  const opg = w.shape[0] / group
  const dtype = ctx.outputs[0].dtype
  const rc = reduceAxis(Cg, `${ctx.name()}.rc`)
  const rk = kernel.map((k, j) => reduceAxis(k, `${ctx.name()}.rk${j}`))
  const conv = compute(ctx.name(b ? "conv" : undefined), out, (n, o, ...ys) => {
    const ci = group === 1 ? rc.var : add(mul(floordiv(o, c(opg)), c(Cg)), rc.var)
    const pos = ys.map((y, j) => add(sub(mul(y, c(win.strides[j])), c(win.padBegin[j])), mul(rk[j].var, c(win.dilations[j]))))
    const inside = pos.reduce<Expr>((acc, p, j) => and(acc, inRange(p, win.input[j])), c(1, "bool"))
    const pixel = select(inside, at(x, n, ci, ...pos), fl(dtype, 0))
    return sum(mul(pixel, at(w, o, rc.var, ...rk.map((r) => r.var))), [rc, ...rk])
  }, dtype, "conv_nd")
  if (!b) return [conv]
  return [conv, compute(ctx.name(), out, (n, o, ...ys) => add(at(conv, n, o, ...ys), at(b, o)), dtype)]
}

/** Begin padding of each spatial dim of ConvTranspose, as the reference derives it. */
const transposePads = (a: Record<string, unknown>, input: readonly number[], kernel: readonly number[]): number[] => {
  const rank = input.length
  const { strides, dilations } = stepsOf(a as unknown as WindowAttrs, rank)
  const autoPad = (a.auto_pad as string | undefined) ?? "NOTSET"
  const outPadding = ints(a.output_padding) ?? []
  const outputShape = ints(a.output_shape) ?? []
  return input.map((d, i) => {
    const span = (kernel[i] - 1) * dilations[i] + 1
    const full = strides[i] * (d - 1) + (outPadding.length ? (outPadding[i] ?? 0) : 0) + span
    if (autoPad === "SAME_UPPER" || autoPad === "SAME_LOWER") {
      const o = outputShape.length ? outputShape.slice(-rank)[i] : d * strides[i]
      const total = full - o
      const half = Math.floor(total / 2)
      return autoPad === "SAME_UPPER" ? half : total - half
    }
    return padsOf(autoPad === "VALID" ? undefined : ints(a.pads), rank).begin[i]
  })
}

/**
 * ConvTranspose: out[n, m, o…] = Σ_{c, k…} x[n, g·Cg + c, i…] · w[g·Cg + c, m mod Mg, k…] where
 * o + p − k·d = i·s for an input pixel i.
 */
export const convTranspose: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const w = inp(ctx, 1)
  const b = ctx.inputs[2]
  const sp = x.shape.length - 2
  if (sp < 1) return none(`ConvTranspose of rank ${x.shape.length}`)
  const group = num(ctx.attrs.group, 1)
  const C = x.shape[1]
  const Cg = C / group
  const Mg = w.shape[1]
  const input = x.shape.slice(2)
  const kernel = w.shape.slice(2)
  const { strides, dilations } = stepsOf(ctx.attrs as unknown as WindowAttrs, sp)
  const begin = transposePads(ctx.attrs, input, kernel)
  const out = shapeOf(ctx.outputs[0])
  const dtype = ctx.outputs[0].dtype
  const rc = reduceAxis(Cg, `${ctx.name()}.rc`)
  const rk = kernel.map((k, j) => reduceAxis(k, `${ctx.name()}.rk${j}`))
  const conv = compute(ctx.name(b ? "convt" : undefined), out, (n, m, ...os) => {
    const ci = group === 1 ? rc.var : add(mul(floordiv(m, c(Mg)), c(Cg)), rc.var)
    const t = os.map((o, j) => sub(add(o, c(begin[j])), mul(rk[j].var, c(dilations[j]))))
    const pos = t.map((tj, j) => (strides[j] === 1 ? tj : floordiv(tj, c(strides[j]))))
    const inside = t.reduce<Expr>((acc, tj, j) => {
      const ok = and(ge(tj, c(0)), lt(pos[j], c(input[j])))
      return and(acc, strides[j] === 1 ? ok : and(ok, eq(floormod(tj, c(strides[j])), c(0))))
    }, c(1, "bool"))
    const pixel = select(inside, at(x, n, ci, ...pos), fl(dtype, 0))
    return sum(mul(pixel, at(w, ci, group === 1 ? m : floormod(m, c(Mg)), ...rk.map((r) => r.var))), [rc, ...rk])
  }, dtype, "conv_transpose")
  if (!b) return [conv]
  return [conv, compute(ctx.name(), out, (n, m, ...os) => add(at(conv, n, m, ...os), at(b, m)), dtype)]
}

const ceilDiv = (a: Expr, d: number): Expr => floordiv(add(a, c(d - 1)), c(d))

/**
 * MaxPool / AveragePool over any spatial rank (the 2-D compute in op-library.ts serves NCHW):
 * the reference's window (nn-common windowOf, ceil_mode included) and its divisors — the taps
 * inside the input, or inside the padded input with count_include_pad.
 */
export const poolNd =
  (kind: "max" | "avg" | "lp", blocked = false): OpCompute =>
  (ctx) => {
    const x = inp(ctx, 0)
    if (ctx.node.outputs.length > 1 && ctx.node.outputs[1] !== "") return none("MaxPool's Indices output")
    // blocked (PoolNCHWc): [N, C/b, ...spatial, b], the channel lane innermost
    const sp = x.shape.length - (blocked ? 3 : 2)
    if (sp < 1) return none(`pooling of rank ${x.shape.length}`)
    const kernel = ints(ctx.attrs.kernel_shape) ?? none("no kernel_shape")
    const win = windowOf(x.shape.slice(2, 2 + sp), kernel, ctx.attrs as unknown as WindowAttrs, num(ctx.attrs.ceil_mode, 0) !== 0)
    const out = shapeOf(ctx.outputs[0])
    const dtype = x.dtype
    const rk = kernel.map((k, j) => reduceAxis(k, `${ctx.name()}.rk${j}`))
    /** The spatial output indices and the trailing lane index (blocked) of an output index. */
    const split = (rest: readonly Expr[]) => ({ ys: blocked ? rest.slice(0, -1) : rest, lane: blocked ? rest.slice(-1) : [] })
    const window = (rest: readonly Expr[]) => {
      const { ys, lane } = split(rest)
      const pos = ys.map((y, j) => add(sub(mul(y, c(win.strides[j])), c(win.padBegin[j])), mul(rk[j].var, c(win.dilations[j]))))
      return { pos: [...pos, ...lane], inside: pos.reduce<Expr>((acc, p, j) => and(acc, inRange(p, win.input[j])), c(1, "bool")) }
    }
    if (kind === "max")
      return [
        compute(ctx.name(), out, (n, ch, ...rest) => {
          const { pos, inside } = window(rest)
          return maxReduce(select(inside, at(x, n, ch, ...pos), fl(dtype, dtypeRange(dtype)[0])), rk)
        }, dtype, "pool"),
      ]
    if (kind === "lp") {
      // Σ |x|^p over the taps inside the input, then the p-th root (float64)
      const p = num(ctx.attrs.p, 2)
      const acc = compute(ctx.name("acc"), out, (n, ch, ...rest) => {
        const { pos, inside } = window(rest)
        return sum(select(inside, call("pow", call("fabs", cast("float64", at(x, n, ch, ...pos))), c(p, "float64")), c(0, "float64")), rk)
      }, "float64", "pool")
      return [acc, compute(ctx.name(), out, (...i) => cast(dtype, call("pow", at(acc, ...i), c(1 / p, "float64"))), dtype)]
    }
    const includePad = num(ctx.attrs.count_include_pad, 0) !== 0
    const total = compute(ctx.name("sum"), out, (n, ch, ...rest) => {
      const { pos, inside } = window(rest)
      return sum(select(inside, at(x, n, ch, ...pos), fl(dtype, 0)), rk)
    }, dtype, "pool")
    return [
      total,
      compute(ctx.name(), out, (n, ch, ...rest) => {
        // per dim, as the reference's taps(): [lo, hi) inside the input, `padded` inside the padded input
        const counts = split(rest).ys.map((y, j) => {
          const [k, d, input] = [kernel[j], win.dilations[j], win.input[j]]
          const start = sub(mul(y, c(win.strides[j])), c(win.padBegin[j]))
          if (includePad) return max(c(0), min(c(k), ceilDiv(sub(c(input + win.padEnd[j]), start), d)))
          const lo = min(c(k), max(c(0), ceilDiv(sub(c(0), start), d)))
          const hi = max(lo, min(c(k), ceilDiv(sub(c(input), start), d)))
          return sub(hi, lo)
        })
        return div(at(total, n, ch, ...rest), cast(dtype, counts.reduce((a, b) => mul(a, b))))
      }, dtype),
    ]
  }

/** GlobalMaxPool / GlobalAveragePool over any spatial rank. */
export const globalPoolNd =
  (kind: "max" | "avg" | "lp"): OpCompute =>
  (ctx) => {
    const x = inp(ctx, 0)
    const spatial = x.shape.slice(2)
    const rk = spatial.map((d, j) => reduceAxis(d, `${ctx.name()}.r${j}`))
    const out = shapeOf(ctx.outputs[0])
    const read = (n: Expr, ch: Expr) => at(x, n, ch, ...rk.map((r) => r.var))
    if (kind === "max") return [compute(ctx.name(), out, (n, ch) => maxReduce(read(n, ch), rk), x.dtype, "global_pool")]
    if (kind === "lp") {
      const p = num(ctx.attrs.p, 2)
      const acc = compute(ctx.name("acc"), out, (n, ch) => sum(call("pow", call("fabs", cast("float64", read(n, ch))), c(p, "float64")), rk), "float64", "global_pool")
      return [acc, compute(ctx.name(), out, (...i) => cast(x.dtype, call("pow", at(acc, ...i), c(1 / p, "float64"))), x.dtype)]
    }
    const count = spatial.reduce((a, b) => a * b, 1)
    const s = compute(ctx.name("sum"), out, (n, ch) => sum(read(n, ch), rk), x.dtype, "global_pool")
    return [s, compute(ctx.name(), out, (...i) => div(at(s, ...i), fl(x.dtype, count)), x.dtype)]
  }
