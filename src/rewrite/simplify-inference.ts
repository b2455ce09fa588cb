// rewrite.SimplifyInference: the rewrites inference graphs want, as named rules run to a fixed
// point — BatchNormalization folded into a preceding Conv (or into a scale and shift), Dropout and
// Identity removed, algebraic identities (x*1, x+0, x-0, x/1, transpose pairs, reshape chains,
// casts to the same type), Gemm canonicalized (constant B pre-transposed, alpha/beta folded), and
// decomposed LayerNorm / Gelu / HardSwish put back together (recognize-patterns.ts).
import { attr } from "../ast/graph/attrs.js"
import { resolveNode } from "../ast/graph/evaluate.js"
import type { Dim, Node } from "../ast/graph/graph.js"
import { sizeOf, tensor, type Tensor } from "../ast/graph/tensor.js"
import { allocate } from "../ast/graph/dtype.js"
import { scaledMatrix, scaledRows } from "../ast/graph/deferred.js"
import { batchNormTraining } from "../ast/graph/ops/norm-channel.js"
import { graphPass } from "./pass.js"
import { rewriteToFixedPoint, type Rule, type RuleCtx, type RuleSet } from "./rules.js"
import { eliminateDeadCodeSync } from "./eliminate-dead-code.js"
import { recognizePatternRules } from "./recognize-patterns.js"

/** The node's decoded attributes (its op's codec with defaults applied). */
const attrsOf = <A>(n: Node): A => resolveNode(n).attrs as A

/** Whether the node that reads `v` is its only reader (and `v` no graph output). */
const onlyConsumer = (ctx: RuleCtx, v: string) => ctx.consumers(v).length === 1 && !ctx.isOutput(v)

const sameType = (ctx: RuleCtx, a: string, b: string) => {
  const ta = ctx.type(a)
  const tb = ctx.type(b)
  return !!ta && !!tb && ta.dtype === tb.dtype && ta.shape.length === tb.shape.length && ta.shape.every((d, i) => d === tb.shape[i])
}

/** A float32 or float64 tensor or type: what the folds below compute in (a float16 or integer fold would round again). */
const isFloat = <T extends { readonly dtype: string }>(t: T | undefined): t is T => !!t && (t.dtype === "float32" || t.dtype === "float64")

// (an empty t is all v too: a unit with no elements of the other operand's type leaves an empty x empty)
const allEqual = (t: Tensor | undefined, v: number) => !!t && t.data.every((x) => x === v)

/** x → x for a node that passes its first input through (graph outputs keep their node). */
const passThrough = (n: Node, ctx: RuleCtx) => (ctx.isOutput(n.outputs[0]) ? undefined : { nodes: [], outputs: [n.inputs[0]] })

export const removeIdentity: Rule = {
  name: "remove-identity",
  apply: (n, ctx) => (n.op === "Identity" ? passThrough(n, ctx) : undefined),
}

export const removeDropout: Rule = {
  name: "remove-dropout",
  apply: (n, ctx) => {
    if (n.op !== "Dropout") return undefined
    if (n.outputs.length > 1 && n.outputs[1] !== "") return undefined // the mask is used
    const training = n.inputs[2] ? ctx.constant(n.inputs[2]) : undefined
    if (n.inputs[2] && (!training || training.data[0] !== 0)) return undefined
    return passThrough(n, ctx)
  },
}

export const castToSameType: Rule = {
  name: "cast-to-same-type",
  apply: (n, ctx) => (n.op === "Cast" && sameType(ctx, n.inputs[0], n.outputs[0]) ? passThrough(n, ctx) : undefined),
}

/** x*1, 1*x, x+0, 0+x, x-0, x/1 where the constant does not broadcast x to a larger shape. */
export const algebraicIdentity: Rule = {
  name: "algebraic-identity",
  apply: (n, ctx) => {
    const unit: Record<string, { value: number; sides: readonly number[] }> = {
      Mul: { value: 1, sides: [0, 1] },
      Add: { value: 0, sides: [0, 1] },
      Sub: { value: 0, sides: [1] },
      Div: { value: 1, sides: [1] },
    }
    const u = unit[n.op]
    // (the four ops take exactly two inputs)
    if (!u || ctx.isOutput(n.outputs[0])) return undefined
    for (const side of u.sides) {
      const other = n.inputs[1 - side]
      if (allEqual(ctx.constant(n.inputs[side]), u.value) && sameType(ctx, other, n.outputs[0])) return { nodes: [], outputs: [other] }
    }
    return undefined
  },
}

const composePerm = (inner: readonly number[], outer: readonly number[]) => outer.map((p) => inner[p])

export const transposePair: Rule = {
  name: "transpose-pair",
  apply: (n, ctx) => {
    if (n.op !== "Transpose") return undefined
    const p = ctx.producer(n.inputs[0])
    if (!p || p.op !== "Transpose" || p.domain !== "") return undefined
    const rank = ctx.type(p.inputs[0])?.shape.length
    if (rank === undefined) return undefined
    const rev = (r: number) => Array.from({ length: r }, (_, i) => r - 1 - i)
    const inner = attrsOf<{ perm?: readonly number[] }>(p).perm ?? rev(rank)
    const outer = attrsOf<{ perm?: readonly number[] }>(n).perm ?? rev(rank)
    const perm = composePerm(inner, outer)
    if (perm.every((v, i) => v === i) && !ctx.isOutput(n.outputs[0])) return { nodes: [], outputs: [p.inputs[0]] }
    return { nodes: [{ ...n, inputs: [p.inputs[0]], attrs: { perm: attr.ints(perm) } }], outputs: n.outputs }
  },
}

export const reshapeChain: Rule = {
  name: "reshape-chain",
  apply: (n, ctx) => {
    if (n.op !== "Reshape" && n.op !== "Flatten" && n.op !== "Squeeze" && n.op !== "Unsqueeze") return undefined
    const p = ctx.producer(n.inputs[0])
    if (!p || p.domain !== "" || !["Reshape", "Flatten", "Squeeze", "Unsqueeze"].includes(p.op)) return undefined
    const out = ctx.type(n.outputs[0])
    if (!out || !out.shape.every((d) => typeof d === "number")) return undefined
    if (sameType(ctx, p.inputs[0], n.outputs[0]) && !ctx.isOutput(n.outputs[0])) return { nodes: [], outputs: [p.inputs[0]] }
    const shapeName = ctx.fresh(`${n.outputs[0]}_shape`)
    const shape = tensor("int64", [out.shape.length], Float64Array.from(out.shape as number[]))
    return {
      nodes: [{ name: n.name, op: "Reshape", domain: "", inputs: [p.inputs[0], shapeName], outputs: n.outputs, attrs: {} }],
      outputs: n.outputs,
      constants: new Map([[shapeName, shape]]),
    }
  },
}

interface BnAttrs {
  readonly epsilon: number
  readonly training_mode: number
}

/**
 * scale / sqrt(var + eps) and B - mean * that, per channel of the `channels` x has; undefined
 * unless all constant, in training mode (batch statistics), which is what the evaluator says it
 * is: the attribute from opset 14, and before it any statistics output, even an omitted ("") one;
 * and unless there is one statistic per channel (before opset 9, spatial=0 gives one per
 * activation: left alone).
 */
const bnScaleShift = (n: Node, ctx: RuleCtx, channels: Dim): { s: Float64Array; t: Float64Array } | undefined => {
  const a = attrsOf<BnAttrs>(n)
  if (batchNormTraining({ opset: ctx.opset, outputs: n.outputs.length, attrs: a })) return undefined
  const [scale, bias, mean, variance] = n.inputs.slice(1, 5).map((v) => ctx.constant(v))
  if (!scale || !bias || !mean || !variance || scale.data.length !== channels) return undefined
  const s = Float64Array.from(scale.data, (g, c) => g / Math.sqrt(variance.data[c] + a.epsilon))
  const t = Float64Array.from(bias.data, (b, c) => b - mean.data[c] * s[c])
  return { s, t }
}

export const foldBatchNormIntoConv: Rule = {
  name: "fold-batchnorm-into-conv",
  apply: (n, ctx) => {
    if (n.op !== "BatchNormalization") return undefined
    const conv = ctx.producer(n.inputs[0])
    if (!conv || conv.op !== "Conv" || conv.domain !== "" || !onlyConsumer(ctx, n.inputs[0])) return undefined
    const w = ctx.constant(conv.inputs[1])
    const b = ctx.constant(conv.inputs[2])
    if (!isFloat(w) || (conv.inputs[2] && !b)) return undefined
    const st = bnScaleShift(n, ctx, w.shape[0])
    if (!st) return undefined
    // output channel o's weights scaled by s[o]; its bias b[o]·s[o] + t[o]
    // (deferred: AlterLayout's pack reads through the fold, so the folded OIHW weights are never written)
    const w2 = scaledRows(w, st.s)
    const b2 = allocate(w.dtype, w.shape[0]).map((_, o) => (b ? b.data[o] : 0) * st.s[o] + st.t[o])
    const wName = ctx.fresh(`${conv.inputs[1]}_bn`)
    const bName = ctx.fresh(`${conv.name}_bias_bn`)
    return {
      nodes: [{ ...conv, name: ctx.fresh(`${conv.name}_bn`), inputs: [conv.inputs[0], wName, bName], outputs: [n.outputs[0]] }],
      outputs: [n.outputs[0]],
      constants: new Map([
        [wName, w2],
        [bName, tensor(w.dtype, [w.shape[0]], b2)],
      ]),
    }
  },
}

export const batchNormToScaleShift: Rule = {
  name: "batchnorm-to-scale-shift",
  apply: (n, ctx) => {
    if (n.op !== "BatchNormalization") return undefined
    const x = ctx.type(n.inputs[0])
    // (under rank 2 there is no channel dim: x.shape[1] is undefined, and no statistics' length equals it)
    if (!isFloat(x)) return undefined
    const st = bnScaleShift(n, ctx, x.shape[1])
    if (!st) return undefined
    const shape = [st.s.length, ...new Array(x.shape.length - 2).fill(1)]
    const sName = ctx.fresh(`${n.name}_scale`)
    const tName = ctx.fresh(`${n.name}_shift`)
    const mid = ctx.fresh(`${n.outputs[0]}_scaled`)
    return {
      nodes: [
        { name: ctx.fresh(`${n.name}_mul`), op: "Mul", domain: "", inputs: [n.inputs[0], sName], outputs: [mid], attrs: {} },
        { name: ctx.fresh(`${n.name}_add`), op: "Add", domain: "", inputs: [mid, tName], outputs: [n.outputs[0]], attrs: {} },
      ],
      outputs: [n.outputs[0]],
      constants: new Map([
        [sName, tensor(x.dtype, shape, allocate(x.dtype, st.s.length).map((_, i) => st.s[i]))],
        [tName, tensor(x.dtype, shape, allocate(x.dtype, st.t.length).map((_, i) => st.t[i]))],
      ]),
    }
  },
}

interface GemmAttrs {
  readonly alpha: number
  readonly beta: number
  readonly transA: number
  readonly transB: number
}

/** Gemm with a constant B: B stored untransposed with alpha folded in; a constant C with beta folded in. */
export const canonicalizeGemm: Rule = {
  name: "canonicalize-gemm",
  apply: (n, ctx) => {
    if (n.op !== "Gemm") return undefined
    const a = attrsOf<GemmAttrs>(n)
    const b = ctx.constant(n.inputs[1])
    const c = ctx.constant(n.inputs[2])
    // the constants to fold, where there is work
    const bFold = isFloat(b) && (a.transB !== 0 || a.alpha !== 1) ? b : undefined
    const cFold = isFloat(c) && a.beta !== 1 ? c : undefined
    if (!bFold && !cFold) return undefined
    const constants = new Map<string, Tensor>()
    const inputs = [...n.inputs]
    const attrs = { ...n.attrs }
    if (bFold) {
      const scaled = scaledMatrix(bFold, a.alpha, a.transB !== 0)
      const name = ctx.fresh(`${n.inputs[1]}_canon`)
      constants.set(name, scaled)
      inputs[1] = name
      attrs.transB = attr.int(0)
      attrs.alpha = attr.float(1)
    }
    if (cFold) {
      const name = ctx.fresh(`${n.inputs[2]}_canon`)
      constants.set(name, tensor(cFold.dtype, cFold.shape, cFold.data.map((x) => x * a.beta)))
      inputs[2] = name
      attrs.beta = attr.float(1)
    }
    return { nodes: [{ ...n, inputs, attrs }], outputs: n.outputs, constants }
  },
}

/**
 * A rule about ONNX-domain ops, applied to those only: a node of another domain (tessera's,
 * com.microsoft's) may share an ONNX op's name and mean something else.
 */
const onnxDomainOnly = (r: Rule): Rule => ({ name: r.name, apply: (n, ctx) => (n.domain === "" || n.domain === "ai.onnx" ? r.apply(n, ctx) : undefined) })

export const simplifyInferenceRules: RuleSet = [
  ...[removeIdentity, removeDropout, castToSameType, algebraicIdentity, transposePair, reshapeChain, foldBatchNormIntoConv, batchNormToScaleShift, canonicalizeGemm].map(onnxDomainOnly),
  ...recognizePatternRules,
]

export const simplifyInferenceSync = (g: Parameters<typeof rewriteToFixedPoint>[0]) =>
  eliminateDeadCodeSync(rewriteToFixedPoint(g, simplifyInferenceRules).graph)

export const simplifyInference = graphPass("rewrite.SimplifyInference", 1, simplifyInferenceSync)
