// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (log-softmax over the class axis, then the
// same gather): the target picks each position's class in the index expression; per-class
// weights, ignore_index and none/sum/mean reductions as the reference (norm-loss.ts) computes them.
import type { DType } from "../ast/graph/dtype.js"
import { add, c, call, cast, div, eq, max, min, mul, select, sub, type Expr } from "../ast/te/expr.js"
import { at, compute, maxReduce, reduceAxis, sum, type ComputeTensor } from "../ast/te/tensor.js"
import { inp, none, shapeOf, type OpCompute } from "./op-library-common.js"

const W: DType = "float64"

const lossOp =
  (softmax: boolean): OpCompute =>
  (ctx) => {
    if (ctx.node.outputs.slice(1).some((o) => o !== "")) return none("SoftmaxCrossEntropyLoss's log_prob output")
    const x = inp(ctx, 0)
    const target = inp(ctx, 1)
    const weight = ctx.inputs[2]
    const [N, C] = x.shape
    const spatial = x.shape.slice(2)
    const posShape = [N, ...spatial]
    const reduction = (ctx.attrs.reduction as string | undefined) ?? "mean"
    const ignore = ctx.attrs.ignore_index as number | undefined
    const stages: ComputeTensor[] = []
    // log-softmax statistics over the classes: lse[n, d…] = max + log Σ exp(x − max)
    let lse: ComputeTensor | undefined
    if (softmax) {
      const r1 = reduceAxis(C, `${ctx.name()}.c1`)
      const mx = compute(ctx.name("max"), posShape, (n, ...d) => maxReduce(cast(W, at(x, n, r1.var, ...d)), [r1]), W)
      const r2 = reduceAxis(C, `${ctx.name()}.c2`)
      const s = compute(ctx.name("sum"), posShape, (n, ...d) => sum(call("exp", sub(cast(W, at(x, n, r2.var, ...d)), at(mx, n, ...d))), [r2]), W)
      lse = compute(ctx.name("lse"), posShape, (...i) => add(at(mx, ...i), call("log", at(s, ...i))), W)
      stages.push(mx, s, lse)
    }
    /** Loss and weight of one position (0 and 0 where the target is ignored). */
    const term = (pos: readonly Expr[]): { loss: Expr; w: Expr } => {
      const t = cast("int32", at(target, ...pos))
      const ignored = ignore === undefined ? c(0, "bool") : eq(t, c(ignore))
      // clamped into [0, C): the executor refuses a target out of range before the kernel runs;
      // the clamp keeps the kernel inside its buffers where nothing checked
      const k = select(ignored, c(0), min(max(t, c(0)), c(C - 1)))
      const [n, ...d] = pos
      const v = cast(W, at(x, n, k, ...d))
      const logp = lse ? sub(v, at(lse, ...pos)) : v
      const w = weight ? cast(W, at(weight, k)) : c(1, W)
      return { loss: select(ignored, c(0, W), mul(call("neg", logp), w)), w: select(ignored, c(0, W), w) }
    }
    const dtype = ctx.outputs[0].dtype
    if (reduction === "none") return [...stages, compute(ctx.name(), shapeOf(ctx.outputs[0]), (...i) => cast(dtype, term(i).loss), dtype)]
    const rs = posShape.map((d, q) => reduceAxis(d, `${ctx.name()}.p${q}`))
    const pos = rs.map((r) => r.var)
    const total = compute(ctx.name("total"), [1], () => sum(term(pos).loss, rs), W)
    stages.push(total)
    const weighted = weight !== undefined || ignore !== undefined
    let denom: Expr = c(posShape.reduce((a, b) => a * b, 1), W)
    if (reduction === "mean" && weighted) {
      const rw = posShape.map((d, q) => reduceAxis(d, `${ctx.name()}.w${q}`))
      const wsum = compute(ctx.name("wsum"), [1], () => sum(term(rw.map((r) => r.var)).w, rw), W)
      stages.push(wsum)
      denom = at(wsum, c(0))
    }
    const value = reduction === "sum" ? at(total, c(0)) : div(at(total, c(0)), denom)
    const out = shapeOf(ctx.outputs[0])
    if (out.length !== 0) return none(`loss output of shape [${out.join(", ")}]`)
    return [...stages, compute(ctx.name(), [], () => cast(dtype, value), dtype)]
  }

export const LOSSES: Record<string, OpCompute> = { NegativeLogLikelihoodLoss: lossOp(false), SoftmaxCrossEntropyLoss: lossOp(true) }
