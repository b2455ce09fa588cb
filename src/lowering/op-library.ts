// The operator library: a TE compute per graph op, from the op's decoded attributes and its input
// tensors. A fused group becomes one TE program (its nodes' computes chained); ops without a
// compute here (or a configuration one declines with NoComputeError) run through the named fallback,
// their reference kernel — see `computeFor`. The 2-D NCHW convolution, pooling, softmax and blocked
// computes live here; the rest by family in op-library-*.ts (MatMul, Gemm, DensePack: -dense;
// reshapes, transposes, concatenation, layout transforms: -tensor).
import { resolveNode } from "../ast/graph/evaluate.js"
import type { Node } from "../ast/graph/graph.js"
import {
  add,
  and,
  c,
  call,
  cast,
  div,
  floordiv,
  floormod,
  ge,
  lt,
  max,
  min,
  mul,
  select,
  sub,
  type Expr,
} from "../ast/te/expr.js"
import { at, compute, dtypeRange, maxReduce, reduceAxis, sum, type ComputeTensor, type TeTensor } from "../ast/te/tensor.js"
import { bread, binary, fl, inp, ints, isFloatDtype, none, num, shapeOf, unary, type OpCompute, type OpComputeCtx } from "./op-library-common.js"
import { BINARY_MATH, materialize, UNARY_MATH } from "./op-library-math.js"
import { TENSOR_MOVES } from "./op-library-tensor.js"
import { REDUCTION_SCANS, REDUCTIONS } from "./op-library-reduce.js"
import { NORMALIZATIONS } from "./op-library-norm.js"
import { convNd, convTranspose, globalPoolNd, poolNd } from "./op-library-conv.js"
import { RESIZES } from "./op-library-resize.js"
import { QUANT } from "./op-library-quant.js"
import { QUANT_INT } from "./op-library-quant-int.js"
import { CONTRIB_QUANT } from "./op-library-quant-contrib.js"
import { MICROSOFT_DOMAIN } from "../ast/graph/ops/index.js"
import { LOSSES } from "./op-library-loss.js"
import { attention, rotaryEmbedding, swiglu } from "./op-library-attention.js"
import { gridSample } from "./op-library-grid.js"
import { einsum } from "./op-library-einsum.js"
import { convWinogradNCHWc } from "./op-library-winograd.js"
import { DENSE } from "./op-library-dense.js"

export { NoComputeError, type OpComputeCtx } from "./op-library-common.js"

const ELEMENTWISE: Record<string, OpCompute> = {
  Relu: unary((x) => max(x, fl(x.dtype, 0))),
  Sigmoid: unary((x) => call("sigmoid", x)),
  Tanh: unary((x) => call("tanh", x)),
  Exp: unary((x) => call("exp", x)),
  Log: unary((x) => call("log", x)),
  Sqrt: unary((x) => call("sqrt", x)),
  Abs: unary((x) => call("fabs", x)),
  Neg: unary((x) => call("neg", x)),
  Erf: unary((x) => call("erf", x)),
  Floor: unary((x) => call("floor", x)),
  Ceil: unary((x) => call("ceil", x)),
  Reciprocal: unary((x) => div(fl(x.dtype, 1), x)),
  Identity: unary((x) => x),
  Dropout: (ctx) => (ctx.node.outputs.length > 1 && ctx.node.outputs[1] !== "" ? none("Dropout's mask output") : unary((x) => x)(ctx)),
  LeakyRelu: unary((x, ctx) => select(lt(x, fl(x.dtype, 0)), mul(x, fl(x.dtype, num(ctx.attrs.alpha, 0.01))), x)),
  HardSigmoid: unary((x, ctx) => max(fl(x.dtype, 0), min(fl(x.dtype, 1), add(mul(x, fl(x.dtype, num(ctx.attrs.alpha, 0.2))), fl(x.dtype, num(ctx.attrs.beta, 0.5)))))),
  HardSwish: unary((x) => mul(x, max(fl(x.dtype, 0), min(fl(x.dtype, 1), add(mul(x, fl(x.dtype, 1 / 6)), fl(x.dtype, 0.5)))))),
  Elu: unary((x, ctx) => select(lt(x, fl(x.dtype, 0)), mul(fl(x.dtype, num(ctx.attrs.alpha, 1)), sub(call("exp", x), fl(x.dtype, 1))), x)),
  Gelu: unary((x, ctx) =>
    ctx.attrs.approximate === "tanh"
      ? mul(mul(x, fl(x.dtype, 0.5)), add(fl(x.dtype, 1), call("tanh", mul(fl(x.dtype, Math.sqrt(2 / Math.PI)), add(x, mul(fl(x.dtype, 0.044715), mul(x, mul(x, x))))))))
      : mul(mul(x, fl(x.dtype, 0.5)), add(fl(x.dtype, 1), call("erf", mul(x, fl(x.dtype, Math.SQRT1_2)))))),
  Add: binary(add),
  Sub: binary(sub),
  Mul: binary(mul),
  Div: binary(div),
  // an integer base: the power wraps like repeated multiplication in the type (NumPy's integer
  // power; the evaluator squares modulo 2^bits), which a double pow cast back cannot give past
  // 2^53 (nor C's cast of an out-of-range double, undefined): the reference kernel computes it
  Pow: (ctx) => (isFloatDtype(ctx.outputs[0].dtype) ? binary((a, b) => call("pow", a, cast(a.dtype, b)))(ctx) : none(`integer Pow (${ctx.outputs[0].dtype}) wraps modulo 2^bits`)),
  PRelu: (ctx) => {
    const x = inp(ctx, 0)
    const s = inp(ctx, 1)
    // a 1-D slope of C values applies on the channel axis (as exporters and the reference kernel read it)
    const perChannel = s.shape.length === 1 && x.shape.length > 2 && s.shape[0] === x.shape[1] && s.shape[0] !== x.shape[x.shape.length - 1]
    return [
      compute(ctx.name(), shapeOf(ctx.outputs[0]), (...i) => {
        const v = bread(x, i)
        const slope = perChannel ? at(s, i[1]) : bread(s, i)
        return select(lt(v, fl(v.dtype, 0)), mul(v, slope), v)
      }, x.dtype),
    ]
  },
  Clip: (ctx) => {
    const x = inp(ctx, 0)
    // a bound from a constant input is baked in as a literal (the emitters' one-instruction min / max);
    // a NaN bound is no bound, as in the evaluator's comparisons (the emitters' min / max would
    // propagate it into every element); a float bound read at run time is compared as the evaluator
    // does (`literal`: min / max are exact, no NaN to meet)
    const bound = (k: number, attr: unknown): { readonly e: Expr; readonly literal: boolean } | undefined => {
      const t = ctx.inputs[k]
      const known = ctx.constants[k]
      const literal = (v: number) => (Number.isNaN(v) ? undefined : { e: fl(x.dtype, v), literal: true })
      if (t) return known && known.length === 1 && isFloatDtype(x.dtype) ? literal(Number(known[0])) : { e: bread(t, []), literal: !isFloatDtype(x.dtype) }
      return attr !== undefined ? literal(attr as number) : undefined
    }
    const lo = bound(1, ctx.attrs.min)
    const hi = bound(2, ctx.attrs.max)
    return [
      compute(ctx.name(), shapeOf(ctx.outputs[0]), (...i) => {
        let e = bread(x, i)
        if (lo) e = lo.literal ? max(e, lo.e) : select(lt(e, lo.e), lo.e, e)
        if (hi) e = hi.literal ? min(e, hi.e) : select(lt(hi.e, e), hi.e, e)
        return e
      }, x.dtype),
    ]
  },
}

/** Spatial output index math shared by Conv and pooling: the pads [top, left, bottom, right], auto_pad resolved. */
const pads2d = (ctx: OpComputeCtx, kernel: readonly number[], inHW: readonly number[], outHW: readonly number[], strides: readonly number[], dil: readonly number[]): number[] => {
  const autoPad = (ctx.attrs.auto_pad as string | undefined) ?? "NOTSET"
  if (autoPad === "NOTSET") return ((ctx.attrs.pads as number[] | undefined) ?? [0, 0, 0, 0]).slice(0, 4)
  if (autoPad === "VALID") return [0, 0, 0, 0]
  const total = [0, 1].map((k) => Math.max(0, (outHW[k] - 1) * strides[k] + (kernel[k] - 1) * dil[k] + 1 - inHW[k]))
  const begin = total.map((t) => (autoPad === "SAME_UPPER" ? Math.floor(t / 2) : Math.ceil(t / 2)))
  return [...begin, ...total.map((t, k) => t - begin[k])]
}

const conv2d: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const w = inp(ctx, 1)
  const b = ctx.inputs[2]
  if (x.shape.length !== 4) return convNd(ctx)
  const [, , H, W] = x.shape
  const [O, Cg, KH, KW] = w.shape
  const group = num(ctx.attrs.group, 1)
  const strides = steps2d(ctx.attrs.strides)
  const dil = steps2d(ctx.attrs.dilations)
  const out = shapeOf(ctx.outputs[0])
  const [pt, pl] = pads2d(ctx, [KH, KW], [H, W], [out[2], out[3]], strides, dil)
  const dtype = ctx.outputs[0].dtype
  const rc = reduceAxis(Cg, `${ctx.name()}.rc`)
  const ry = reduceAxis(KH, `${ctx.name()}.ry`)
  const rx = reduceAxis(KW, `${ctx.name()}.rx`)
  const opg = O / group
  const conv = compute(ctx.name(b ? "conv" : undefined), out, (n, o, y, xx) => {
    const ci = group === 1 ? rc.var : add(mul(floordiv(o, c(opg)), c(Cg)), rc.var)
    const iy = add(sub(mul(y, c(strides[0])), c(pt)), mul(ry.var, c(dil[0])))
    const ix = add(sub(mul(xx, c(strides[1])), c(pl)), mul(rx.var, c(dil[1])))
    const inside = and(and(ge(iy, c(0)), lt(iy, c(H))), and(ge(ix, c(0)), lt(ix, c(W))))
    const pixel = select(inside, at(x, n, ci, iy, ix), fl(dtype, 0))
    return sum(mul(pixel, at(w, o, rc.var, ry.var, rx.var)), [rc, ry, rx])
  }, dtype, "conv2d_nchw")
  if (!b) return [conv]
  return [conv, compute(ctx.name(), out, (n, o, y, xx) => add(at(conv, n, o, y, xx), at(b, o)), dtype)]
}

/**
 * A 2-D window's strides or dilations: absent or empty means ones, as the evaluator reads them (an
 * empty list read as given left the kernel's steps undefined: NaN on js, an invalid module on wasm).
 */
const steps2d = (v: unknown): number[] => {
  const xs = ints(v)
  return xs && xs.length > 0 ? xs : [1, 1]
}

/**
 * An integer MaxPool with padding: the input copied into a padded plane first (the padding the
 * type's least value, which no max picks over a real element), the window then read from it
 * without bounds tests. The tests made each tap's strided load conditional, which the C compiler
 * does not vectorize (no masked byte gather): ResNet-18 int8's 3×3 / 2 pool took ~6 ms scalar,
 * the padded copy's rows are contiguous (masked loads) and the window's taps plain strided loads.
 * (Float pools keep the tests: on c the layout rewrite's PoolNCHWc takes them.)
 */
/** The padded plane's rows are whole multiples of this many elements (AVX-512's 16 int32, SIMD128's 16 bytes). */
const POOL_ROW_LANES = 16

const maxPoolPadded = (ctx: OpComputeCtx, x: TeTensor, kernel: readonly number[], strides: readonly number[], dil: readonly number[], [pt, pl]: readonly number[], ry: ReturnType<typeof reduceAxis>, rx: ReturnType<typeof reduceAxis>): ComputeTensor[] => {
  const [N, C, H, W] = x.shape
  const out = shapeOf(ctx.outputs[0])
  const least = fl(x.dtype, dtypeRange(x.dtype)[0])
  // the rows and columns the windows reach (past the input's end with ceil_mode, short of it where the last stride does not reach)
  const Hp = (out[2] - 1) * strides[0] + (kernel[0] - 1) * dil[0] + 1
  // (its rows rounded up to whole vectors, POOL_ROW_LANES: the copy's row loop then has no scalar
  // tail — 113 → 128 bytes at ResNet-18's pool, its copy alone 0.10 → 0.025 ms in a C model)
  const Wp = Math.ceil(((out[3] - 1) * strides[1] + (kernel[1] - 1) * dil[1] + 1) / POOL_ROW_LANES) * POOL_ROW_LANES
  // (kept in memory: the base schedule would inline a plain compute back into the window's reads)
  const pad = materialize(ctx.name("padded"), [N, C, Hp, Wp], (n, ch, r, q) => {
    const iy = sub(r, c(pt))
    const ix = sub(q, c(pl))
    return select(and(and(ge(iy, c(0)), lt(iy, c(H))), and(ge(ix, c(0)), lt(ix, c(W)))), at(x, n, ch, iy, ix), least)
  }, x.dtype)
  return [
    pad,
    compute(ctx.name(), out, (n, ch, y, xx) =>
      maxReduce(at(pad, n, ch, add(mul(y, c(strides[0])), mul(ry.var, c(dil[0]))), add(mul(xx, c(strides[1])), mul(rx.var, c(dil[1])))), [ry, rx]), x.dtype, "pool"),
  ]
}

const pool2d =
  (kind: "max" | "avg"): OpCompute =>
  (ctx) => {
    const x = inp(ctx, 0)
    if (x.shape.length !== 4) return poolNd(kind)(ctx)
    if (ctx.node.outputs.length > 1 && ctx.node.outputs[1] !== "") return none("MaxPool's Indices output")
    const [, , H, W] = x.shape
    const kernel = ctx.attrs.kernel_shape as number[]
    const strides = steps2d(ctx.attrs.strides)
    const dil = steps2d(ctx.attrs.dilations)
    const out = shapeOf(ctx.outputs[0])
    const [pt, pl, pb, pr] = pads2d(ctx, kernel, [H, W], [out[2], out[3]], strides, dil)
    const dtype = x.dtype
    const ry = reduceAxis(kernel[0], `${ctx.name()}.ry`)
    const rx = reduceAxis(kernel[1], `${ctx.name()}.rx`)
    const coords = (y: Expr, xx: Expr) => {
      const iy = add(sub(mul(y, c(strides[0])), c(pt)), mul(ry.var, c(dil[0])))
      const ix = add(sub(mul(xx, c(strides[1])), c(pl)), mul(rx.var, c(dil[1])))
      return { iy, ix, inside: and(and(ge(iy, c(0)), lt(iy, c(H))), and(ge(ix, c(0)), lt(ix, c(W)))) }
    }
    if (kind === "max" && !isFloatDtype(dtype) && pt + pl + pb + pr > 0) return maxPoolPadded(ctx, x, kernel, strides, dil, [pt, pl], ry, rx)
    if (kind === "max")
      return [
        compute(ctx.name(), out, (n, ch, y, xx) => {
          const { iy, ix, inside } = coords(y, xx)
          return maxReduce(select(inside, at(x, n, ch, iy, ix), fl(dtype, dtypeRange(dtype)[0])), [ry, rx])
        }, dtype, "pool"),
      ]
    const includePad = num(ctx.attrs.count_include_pad, 0) !== 0
    const total = compute(ctx.name("sum"), out, (n, ch, y, xx) => {
      const { iy, ix, inside } = coords(y, xx)
      return sum(select(inside, at(x, n, ch, iy, ix), fl(dtype, 0)), [ry, rx])
    }, dtype, "pool")
    return [
      total,
      compute(ctx.name(), out, (n, ch, y, xx) => {
        if (includePad) {
          // the window clipped to the padded input (ceil_mode windows may run past the padding)
          const y0 = sub(mul(y, c(strides[0])), c(pt))
          const x0 = sub(mul(xx, c(strides[1])), c(pl))
          const hy = sub(min(add(y0, c((kernel[0] - 1) * dil[0] + 1)), c(H + pb)), max(y0, c(-pt)))
          const hx = sub(min(add(x0, c((kernel[1] - 1) * dil[1] + 1)), c(W + pr)), max(x0, c(-pl)))
          return div(at(total, n, ch, y, xx), cast(dtype, mul(hy, hx)))
        }
        const y0 = sub(mul(y, c(strides[0])), c(pt))
        const x0 = sub(mul(xx, c(strides[1])), c(pl))
        const cnt = (o: Expr, k: number, d: number, lim: number) => {
          // taps o + j·d inside [0, lim) for j < k
          const first = max(c(0), floordiv(add(sub(c(0), o), c(d - 1)), c(d)))
          const last = min(c(k - 1), floordiv(sub(c(lim - 1), o), c(d)))
          return max(c(0), add(sub(last, first), c(1)))
        }
        return div(at(total, n, ch, y, xx), cast(dtype, mul(cnt(y0, kernel[0], dil[0], H), cnt(x0, kernel[1], dil[1], W))))
      }, dtype),
    ]
  }

const globalPool =
  (kind: "max" | "avg"): OpCompute =>
  (ctx) => {
    const x = inp(ctx, 0)
    if (x.shape.length !== 4) return globalPoolNd(kind)(ctx)
    const [N, C, H, W] = x.shape
    const ry = reduceAxis(H, `${ctx.name()}.ry`)
    const rx = reduceAxis(W, `${ctx.name()}.rx`)
    if (kind === "max") return [compute(ctx.name(), [N, C, 1, 1], (n, ch) => maxReduce(at(x, n, ch, ry.var, rx.var), [ry, rx]), x.dtype, "global_pool")]
    const s = compute(ctx.name("sum"), [N, C, 1, 1], (n, ch) => sum(at(x, n, ch, ry.var, rx.var), [ry, rx]), x.dtype, "global_pool")
    return [s, compute(ctx.name(), [N, C, 1, 1], (n, ch, y, xx) => div(at(s, n, ch, y, xx), fl(x.dtype, H * W)), x.dtype)]
  }

const batchNorm: OpCompute = (ctx) => {
  if (num(ctx.attrs.training_mode, 0)) return none("BatchNormalization in training mode")
  if (ctx.node.outputs.slice(1).some((o) => o !== "")) return none("BatchNormalization's running statistics outputs")
  const x = inp(ctx, 0)
  const [scale, bias, mean, variance] = [1, 2, 3, 4].map((k) => inp(ctx, k))
  const eps = num(ctx.attrs.epsilon, 1e-5)
  const dtype = x.dtype
  // a parameter of one value applies to every channel, as the evaluator reads it (bind allows C
  // values or one); C values in a higher-rank tensor (e.g. [C, 1]) are not read here
  const count = (t: typeof x) => t.shape.reduce((a, b) => a * b, 1)
  const C = x.shape.length > 1 ? x.shape[1] : 1
  for (const t of [scale, bias, mean, variance]) if (count(t) !== 1 && (t.shape.length !== 1 || count(t) !== C)) return none(`BatchNormalization parameter of shape [${t.shape.join(", ")}] for ${C} channels`)
  const param = (t: typeof x, ch: Expr) => (count(t) === 1 ? at(t, ...t.shape.map(() => c(0))) : at(t, ch))
  return [
    compute(ctx.name(), x.shape, (...i) => {
      const ch = i.length > 1 ? i[1] : c(0)
      const inv = div(param(scale, ch), call("sqrt", add(param(variance, ch), fl(dtype, eps))))
      return add(mul(sub(bread(x, i), param(mean, ch)), inv), param(bias, ch))
    }, dtype),
  ]
}

const softmaxLike =
  (log: boolean): OpCompute =>
  (ctx) => {
    const x = inp(ctx, 0)
    const rank = x.shape.length
    // before opset 13 the input is coerced to 2-D at `axis` (default 1): every dim from axis on is
    // one row; from opset 13 the rows run along the one axis `axis` (default -1)
    const legacy = ctx.opset < 13
    const axis0 = num(ctx.attrs.axis, legacy ? 1 : -1)
    const axis = axis0 < 0 ? axis0 + rank : axis0
    const reduced = x.shape.map((_, k) => (legacy ? k >= axis : k === axis))
    const kept = x.shape.filter((_, k) => !reduced[k])
    const statShape = kept.length ? kept : [1]
    const dtype = x.dtype
    const red = (tag: string) => x.shape.flatMap((d, k) => (reduced[k] ? [reduceAxis(d, `${ctx.name()}.${tag}${k}`)] : []))
    /** The full index from a stat index and the reduce vars. */
    const full = (i: readonly Expr[], rs: readonly { var: Expr }[]) => {
      let q = 0
      let r = 0
      return x.shape.map((_, k) => (reduced[k] ? rs[r++].var : kept.length ? i[q++] : c(0)))
    }
    const statIdx = (i: readonly Expr[]) => (kept.length ? i.filter((_, k) => !reduced[k]) : [c(0)])
    const k1 = red("a")
    const k2 = red("b")
    const mx = compute(ctx.name("max"), statShape, (...i) => maxReduce(at(x, ...full(i, k1)), k1), dtype)
    const ex = compute(ctx.name("exp"), x.shape, (...i) => call("exp", sub(at(x, ...i), at(mx, ...statIdx(i)))), dtype)
    const sm = compute(ctx.name("sum"), statShape, (...i) => sum(at(ex, ...full(i, k2)), k2), dtype)
    return [
      mx,
      ex,
      sm,
      compute(ctx.name(), x.shape, (...i) =>
        log ? sub(sub(at(x, ...i), at(mx, ...statIdx(i))), call("log", at(sm, ...statIdx(i)))) : div(at(ex, ...i), at(sm, ...statIdx(i))), dtype),
    ]
  }

const convNCHWc: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const w = inp(ctx, 1)
  const bias = ctx.inputs[2]
  const [, CB, H, W, ib] = x.shape
  const [, , KH, KW, wib, ob] = w.shape
  const group = num(ctx.attrs.group, 1)
  const strides = steps2d(ctx.attrs.strides)
  const dil = steps2d(ctx.attrs.dilations)
  const out = shapeOf(ctx.outputs[0])
  const [pt, pl] = pads2d(ctx, [KH, KW], [H, W], [out[2], out[3]], strides, dil)
  const dtype = ctx.outputs[0].dtype
  // depthwise: a filter per input channel (in_block == out_block, the kernel's input block 1);
  // grouped: each output block inside one group (its channels' filters read that group's inputs)
  const depthwise = group !== 1 && wib === 1 && w.shape[1] === 1 && group === CB * ib && out[1] * ob === group
  const [inPer, outPer] = [(CB * ib) / group, (out[1] * ob) / group]
  if (group !== 1 && !depthwise && (inPer % ib !== 0 || outPer % ob !== 0 || wib !== ib))
    return none(`ConvNCHWc of ${group} groups: its blocks (in ${ib}, out ${ob}, kernel ${wib}) do not divide the ${inPer} input and ${outPer} output channels of a group`)
  const ic = reduceAxis(depthwise ? 1 : inPer, `${ctx.name()}.ic`)
  const ry = reduceAxis(KH, `${ctx.name()}.ry`)
  const rx = reduceAxis(KW, `${ctx.name()}.rx`)
  // the zero-padded input as a stage of its own (TVM's data_pad): inlined by default, a schedule may
  // compute it at root so the reduction's inner loops read without bounds tests. Along a kernel
  // of one tap at a stride (a 1×1 / 2 downsample) it holds only the pixels the conv reads, and the
  // conv reads it at stride 1: computed at root, a dense copy of a quarter of the input that every
  // channel tile reads again (as the int8 blocked conv's copy of its activations)
  const [ys, xs] = [KH === 1 ? strides[0] : 1, KW === 1 ? strides[1] : 1]
  const HP = ys > 1 ? out[2] : (out[2] - 1) * strides[0] + (KH - 1) * dil[0] + 1
  const WP = xs > 1 ? out[3] : (out[3] - 1) * strides[1] + (KW - 1) * dil[1] + 1
  const bounded = pt !== 0 || pl !== 0 || (HP - 1) * ys + 1 > H || (WP - 1) * xs + 1 > W
  const padded = !bounded && ys === 1 && xs === 1
    ? x
    : compute(ctx.name("pad"), [x.shape[0], CB, HP, WP, ib], (n, cb, y, xx, ci) => {
        const iy = sub(ys > 1 ? mul(y, c(ys)) : y, c(pt))
        const ix = sub(xs > 1 ? mul(xx, c(xs)) : xx, c(pl))
        if (!bounded) return at(x, n, cb, iy, ix, ci)
        const inside = and(and(ge(iy, c(0)), lt(iy, c(H))), and(ge(ix, c(0)), lt(ix, c(W))))
        return select(inside, at(x, n, cb, iy, ix, ci), fl(dtype, 0))
      }, x.dtype)
  const conv = compute(ctx.name(bias ? "conv" : undefined), out, (n, oc, y, xx, oi) => {
    const iy = add(mul(y, c(strides[0] / ys)), mul(ry.var, c(dil[0])))
    const ix = add(mul(xx, c(strides[1] / xs)), mul(rx.var, c(dil[1])))
    if (depthwise) {
      // channel oc·ob + oi reads its own input channel (in_block == out_block)
      return sum(mul(at(padded, n, oc, iy, ix, oi), at(w, oc, c(0), ry.var, rx.var, c(0), oi)), [ic, ry, rx])
    }
    // (grouped: output block oc lies in group oc / (outPer / ob), whose inputs start at block
    // group · inPer / ib)
    const block = group === 1 ? floordiv(ic.var, c(ib)) : add(mul(floordiv(oc, c(outPer / ob)), c(inPer / ib)), floordiv(ic.var, c(ib)))
    const pixel = at(padded, n, block, iy, ix, floormod(ic.var, c(ib)))
    return sum(mul(pixel, at(w, oc, floordiv(ic.var, c(wib)), ry.var, rx.var, floormod(ic.var, c(wib)), oi)), [ic, ry, rx])
  }, dtype, "conv2d_nchwc")
  const pre: ComputeTensor[] = padded.kind === "compute" ? [padded] : []
  if (!bias) return [...pre, conv]
  return [...pre, conv, compute(ctx.name(), out, (n, oc, y, xx, oi) => add(at(conv, n, oc, y, xx, oi), at(bias, add(mul(oc, c(ob)), oi))), dtype)]
}

export const OP_COMPUTES: Readonly<Record<string, OpCompute>> = {
  ...ELEMENTWISE,
  ...UNARY_MATH,
  ...BINARY_MATH,
  ...TENSOR_MOVES,
  Conv: conv2d,
  ConvNCHWc: convNCHWc,
  ConvWinogradNCHWc: convWinogradNCHWc,
  PoolNCHWc: (ctx) => poolNd(ctx.attrs.pool === "AveragePool" ? "avg" : "max", true)(ctx),
  ConvTranspose: convTranspose,
  MaxPool: pool2d("max"),
  AveragePool: pool2d("avg"),
  GlobalAveragePool: globalPool("avg"),
  GlobalMaxPool: globalPool("max"),
  LpPool: poolNd("lp"),
  GlobalLpPool: globalPoolNd("lp"),
  ...DENSE,
  BatchNormalization: batchNorm,
  Softmax: softmaxLike(false),
  LogSoftmax: softmaxLike(true),
  ...REDUCTIONS,
  ...REDUCTION_SCANS,
  ...NORMALIZATIONS,
  ...RESIZES,
  ...QUANT,
  ...QUANT_INT,
  ...LOSSES,
  Attention: attention,
  RotaryEmbedding: rotaryEmbedding,
  SwiGLU: swiglu,
  GridSample: gridSample,
  Einsum: einsum,
}

/** Computes of onnxruntime's com.microsoft ops (a name there means another op than in the ONNX domain). */
const DOMAIN_COMPUTES: Readonly<Record<string, Readonly<Record<string, OpCompute>>>> = { [MICROSOFT_DOMAIN]: CONTRIB_QUANT }

/** Is there a compute for this node (op, domain and configuration)? */
export const computeFor = (n: Node): OpCompute | undefined => {
  const table = Object.prototype.hasOwnProperty.call(DOMAIN_COMPUTES, n.domain) ? DOMAIN_COMPUTES[n.domain] : OP_COMPUTES
  return Object.prototype.hasOwnProperty.call(table, n.op) ? table[n.op] : undefined
}

/** Ops whose computes are their outputs, one each, in order (every other op computes its first output only). */
export const MULTI_OUTPUT: ReadonlySet<string> = new Set(["Split", "DynamicQuantizeLinear"])

export const attrsOf = (n: Node): Record<string, unknown> => resolveNode(n).attrs as Record<string, unknown>

