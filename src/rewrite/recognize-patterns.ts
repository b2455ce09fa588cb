// Rules that recognise what exporters spell out op by op, and put back the single op:
// LayerNormalization (ReduceMean, Sub, Pow/Mul, ReduceMean, Add ε, Sqrt, Div, then scale and
// bias), Gelu (x · 0.5 · (1 + erf(x / √2))) and HardSwish (x · HardSigmoid(x), or
// x · Clip(x + 3, 0, 6) / 6). Each fires only when every intermediate value is read by the
// pattern alone, so nothing else loses a value it reads.
import { attr } from "../ast/graph/attrs.js"
import { resolveNode } from "../ast/graph/evaluate.js"
import type { Node } from "../ast/graph/graph.js"
import { allocate } from "../ast/graph/dtype.js"
import { tensor, type Tensor } from "../ast/graph/tensor.js"
import type { Rule, RuleCtx } from "./rules.js"

const near = (a: number, b: number, tol = 1e-5) => Math.abs(a - b) <= tol * Math.max(1, Math.abs(b))

/** The value of a scalar (or one-element) constant. */
const scalarOf = (ctx: RuleCtx, v: string): number | undefined => {
  const t = ctx.constant(v)
  return t && t.data.length === 1 ? t.data[0] : undefined
}

const internal = (ctx: RuleCtx, v: string) => ctx.consumers(v).length === 1 && !ctx.isOutput(v)

const producerOp = (ctx: RuleCtx, v: string, op: string): Node | undefined => {
  const p = ctx.producer(v)
  return p && p.op === op && p.domain === "" ? p : undefined
}

/** Axes a ReduceMean reduces (attribute or constant input), normalised; undefined if unknown. */
const reduceAxes = (ctx: RuleCtx, n: Node): number[] | undefined => {
  const rank = ctx.type(n.inputs[0])?.shape.length
  if (rank === undefined) return undefined
  const a = resolveNode(n).attrs as { axes?: readonly number[]; keepdims?: number }
  if (a.keepdims === 0) return undefined
  const axes = a.axes ?? (n.inputs[1] ? ctx.constant(n.inputs[1]) && Array.from(ctx.constant(n.inputs[1])!.data) : undefined)
  if (!axes) return undefined
  return axes.map((x) => (x < 0 ? x + rank : x)).sort((x, y) => x - y)
}

/** Trailing contiguous axes [k, …, rank-1] → k. */
const trailingAxis = (axes: readonly number[], rank: number): number | undefined =>
  axes.length > 0 && axes.every((x, i) => x === rank - axes.length + i) ? rank - axes.length : undefined

const filled = (dtype: Tensor["dtype"], shape: readonly number[], value: number): Tensor => {
  const n = shape.reduce((a, b) => a * b, 1)
  const d = allocate(dtype, n)
  d.fill(value)
  return tensor(dtype, shape, d)
}

/** Div(d, Sqrt(Add(ReduceMean(d²), ε))) with d = Sub(x, ReduceMean(x)) → LayerNormalization(x, 1, 0). */
export const recognizeLayerNorm: Rule = {
  name: "recognize-layer-norm",
  apply: (n, ctx) => {
    if (n.op !== "Div" || n.domain !== "") return undefined
    const [d, s] = n.inputs
    const sub = producerOp(ctx, d, "Sub")
    const sqrt = producerOp(ctx, s, "Sqrt")
    if (!sub || !sqrt || !internal(ctx, s)) return undefined
    const [x, m] = sub.inputs
    const mean1 = producerOp(ctx, m, "ReduceMean")
    if (!mean1 || mean1.inputs[0] !== x || !internal(ctx, m)) return undefined
    const add = producerOp(ctx, sqrt.inputs[0], "Add")
    if (!add || !internal(ctx, sqrt.inputs[0])) return undefined
    const epsSide = scalarOf(ctx, add.inputs[1]) !== undefined ? 1 : scalarOf(ctx, add.inputs[0]) !== undefined ? 0 : -1
    if (epsSide < 0) return undefined
    const eps = scalarOf(ctx, add.inputs[epsSide])!
    const varV = add.inputs[1 - epsSide]
    const mean2 = producerOp(ctx, varV, "ReduceMean")
    if (!mean2 || !internal(ctx, varV)) return undefined
    const sq = ctx.producer(mean2.inputs[0])
    if (!sq || !internal(ctx, mean2.inputs[0])) return undefined
    const squares = (sq.op === "Pow" && sq.inputs[0] === d && scalarOf(ctx, sq.inputs[1]) === 2) || (sq.op === "Mul" && sq.inputs[0] === d && sq.inputs[1] === d)
    if (!squares) return undefined
    // d is read by the square and the Div only (Mul(d, d) reads it twice)
    if (ctx.isOutput(d) || ctx.consumers(d).some((c) => c.name !== sq.name && c.name !== n.name)) return undefined
    const xt = ctx.type(x)
    if (!xt || !xt.shape.every((v) => typeof v === "number") || (xt.dtype !== "float32" && xt.dtype !== "float64")) return undefined
    const a1 = reduceAxes(ctx, mean1)
    const a2 = reduceAxes(ctx, mean2)
    if (!a1 || !a2 || a1.join() !== a2.join()) return undefined
    const axis = trailingAxis(a1, xt.shape.length)
    if (axis === undefined) return undefined
    const normShape = (xt.shape as number[]).slice(axis)
    const scale = ctx.fresh(`${n.name}_ln_scale`)
    const bias = ctx.fresh(`${n.name}_ln_bias`)
    return {
      nodes: [
        {
          name: ctx.fresh(`${n.name}_layernorm`),
          op: "LayerNormalization",
          domain: "",
          inputs: [x, scale, bias],
          outputs: [n.outputs[0]],
          attrs: { axis: attr.int(axis), epsilon: attr.float(eps) },
        },
      ],
      outputs: [n.outputs[0]],
      constants: new Map([
        [scale, filled(xt.dtype, normShape, 1)],
        [bias, filled(xt.dtype, normShape, 0)],
      ]),
    }
  },
}

/** Mul(LayerNormalization(x, s, b), g) → LayerNormalization(x, s·g, b·g); Add(LN(x, s, b), c) → LN(x, s, b + c). */
export const absorbIntoLayerNorm: Rule = {
  name: "absorb-affine-into-layer-norm",
  apply: (n, ctx) => {
    if ((n.op !== "Mul" && n.op !== "Add") || n.domain !== "") return undefined
    for (const side of [0, 1]) {
      const ln = producerOp(ctx, n.inputs[side], "LayerNormalization")
      const c = ctx.constant(n.inputs[1 - side])
      if (!ln || !c || !internal(ctx, n.inputs[side]) || ln.outputs.length > 1) continue
      const s = ctx.constant(ln.inputs[1])
      const b = ln.inputs[2] ? ctx.constant(ln.inputs[2]) : undefined
      if (!s || (ln.inputs[2] && !b)) continue
      // the constant must broadcast over the normalised dims only: shape equal to scale's (or a suffix of it)
      const fits = c.shape.length <= s.shape.length && c.shape.every((d, i) => d === s.shape[s.shape.length - c.shape.length + i] || d === 1)
      if (!fits || c.dtype !== s.dtype) continue
      const at = (t: Tensor, i: number) => {
        // broadcast read of c at flat index i of s's shape
        let idx = 0
        let stride = 1
        let rem = i
        const dims = s.shape
        const off = dims.length - t.shape.length
        const coords = new Array<number>(dims.length)
        for (let k = dims.length - 1; k >= 0; k--) {
          coords[k] = rem % dims[k]
          rem = Math.floor(rem / dims[k])
        }
        for (let k = t.shape.length - 1; k >= 0; k--) {
          idx += (t.shape[k] === 1 ? 0 : coords[k + off]) * stride
          stride *= t.shape[k]
        }
        return t.data[idx]
      }
      const newS = n.op === "Mul" ? tensor(s.dtype, s.shape, s.data.map((v, i) => v * at(c, i))) : s
      const bData = allocate(s.dtype, s.data.length)
      for (let i = 0; i < bData.length; i++) {
        const bv = b ? b.data[i] : 0
        bData[i] = n.op === "Mul" ? bv * at(c, i) : bv + at(c, i)
      }
      const sName = ctx.fresh(`${ln.inputs[1]}_absorbed`)
      const bName = ctx.fresh(`${ln.name}_bias_absorbed`)
      return {
        nodes: [{ ...ln, name: ctx.fresh(`${ln.name}_affine`), inputs: [ln.inputs[0], sName, bName], outputs: [n.outputs[0]] }],
        outputs: [n.outputs[0]],
        constants: new Map([
          [sName, newS],
          [bName, tensor(s.dtype, s.shape, bData)],
        ]),
      }
    }
    return undefined
  },
}

/**
 * The leaves of the tree of single-use Mul nodes rooted at `n` (one more than the tree's Mul
 * nodes), in order; undefined when there are more than `max`. Each pending value gives at least
 * one leaf, so the walk stops as soon as that many pass `max`: a chain of thousands of Muls costs
 * each of its nodes a few steps, not the whole chain (and no recursion, so no stack to overflow).
 */
const mulFactors = (ctx: RuleCtx, n: Node, max: number): string[] | undefined => {
  const out: string[] = []
  const stack = [...n.inputs].reverse()
  while (stack.length) {
    if (out.length + stack.length > max) return undefined
    const v = stack.pop()!
    const p = producerOp(ctx, v, "Mul")
    if (p && internal(ctx, v)) for (let k = p.inputs.length - 1; k >= 0; k--) stack.push(p.inputs[k])
    else out.push(v)
  }
  return out
}

/** x · 0.5 · (1 + erf(x / √2)) in any association → Gelu(x). */
export const recognizeGelu: Rule = {
  name: "recognize-gelu",
  apply: (n, ctx) => {
    if (n.op !== "Mul" || n.domain !== "") return undefined
    // three factors: a tree of two Muls
    const f = mulFactors(ctx, n, 3)
    if (f?.length !== 3) return undefined
    const half = f.findIndex((v) => near(scalarOf(ctx, v) ?? NaN, 0.5))
    const onePlus = f.findIndex((v) => {
      const add = producerOp(ctx, v, "Add")
      return !!add && internal(ctx, v) && add.inputs.some((i) => near(scalarOf(ctx, i) ?? NaN, 1)) && add.inputs.some((i) => !!producerOp(ctx, i, "Erf"))
    })
    if (half < 0 || onePlus < 0) return undefined
    const x = f.find((_, i) => i !== half && i !== onePlus)!
    const add = ctx.producer(f[onePlus])!
    const erfV = add.inputs.find((i) => !!producerOp(ctx, i, "Erf"))!
    const erf = ctx.producer(erfV)!
    if (!internal(ctx, erfV)) return undefined
    const scaled = erf.inputs[0]
    const div = producerOp(ctx, scaled, "Div")
    const mul = producerOp(ctx, scaled, "Mul")
    const ok =
      (div && div.inputs[0] === x && near(scalarOf(ctx, div.inputs[1]) ?? NaN, Math.SQRT2, 1e-4)) ||
      (mul && mul.inputs.includes(x) && mul.inputs.some((i) => near(scalarOf(ctx, i) ?? NaN, Math.SQRT1_2, 1e-4)))
    if (!ok || !internal(ctx, scaled)) return undefined
    const t = ctx.type(x)
    if (!t || !ctx.type(n.outputs[0]) || t.shape.join() !== ctx.type(n.outputs[0])!.shape.join()) return undefined
    return { nodes: [{ name: ctx.fresh(`${n.name}_gelu`), op: "Gelu", domain: "", inputs: [x], outputs: [n.outputs[0]], attrs: {} }], outputs: [n.outputs[0]] }
  },
}

/** x · HardSigmoid(x; 1/6, 0.5) → HardSwish(x); Div(x · Clip(x + 3, 0, 6), 6) → HardSwish(x). */
export const recognizeHardSwish: Rule = {
  name: "recognize-hard-swish",
  apply: (n, ctx) => {
    const replace = (x: string) => {
      const t = ctx.type(x)
      const o = ctx.type(n.outputs[0])
      if (!t || !o || t.shape.join() !== o.shape.join()) return undefined
      return { nodes: [{ name: ctx.fresh(`${n.name}_hardswish`), op: "HardSwish", domain: "", inputs: [x], outputs: [n.outputs[0]], attrs: {} }], outputs: [n.outputs[0]] }
    }
    if (n.domain !== "") return undefined
    if (n.op === "Mul") {
      for (const side of [0, 1]) {
        const hs = producerOp(ctx, n.inputs[side], "HardSigmoid")
        if (!hs || hs.inputs[0] !== n.inputs[1 - side] || !internal(ctx, n.inputs[side])) continue
        const a = resolveNode(hs).attrs as { alpha: number; beta: number }
        if (near(a.alpha, 1 / 6) && near(a.beta, 0.5)) return replace(hs.inputs[0])
      }
      return undefined
    }
    if (n.op === "Div" && near(scalarOf(ctx, n.inputs[1]) ?? NaN, 6)) {
      const mul = producerOp(ctx, n.inputs[0], "Mul")
      if (!mul || !internal(ctx, n.inputs[0])) return undefined
      for (const side of [0, 1]) {
        const clip = producerOp(ctx, mul.inputs[side], "Clip")
        const x = mul.inputs[1 - side]
        if (!clip || !internal(ctx, mul.inputs[side])) continue
        const lo = clip.inputs[1] ? scalarOf(ctx, clip.inputs[1]) : (resolveNode(clip).attrs as { min?: number }).min
        const hi = clip.inputs[2] ? scalarOf(ctx, clip.inputs[2]) : (resolveNode(clip).attrs as { max?: number }).max
        const add = producerOp(ctx, clip.inputs[0], "Add")
        if (lo !== 0 || hi !== 6 || !add || !internal(ctx, clip.inputs[0])) continue
        if (add.inputs.includes(x) && add.inputs.some((i) => scalarOf(ctx, i) === 3)) return replace(x)
      }
    }
    return undefined
  },
}

export const recognizePatternRules = [recognizeLayerNorm, absorbIntoLayerNorm, recognizeGelu, recognizeHardSwish] as const
