// rewrite.AlterLayout: for CPU targets, 2-D convolutions move to the blocked layout NCHW{c}c
// (block from the target's vector width; a grouped conv's within its groups), with layout
// transforms at the boundaries; elementwise neighbours (activations, bias and residual adds,
// scale/shift) and max / average pooling (global pooling too) move into the blocked layout too,
// and adjacent transforms compose (inverse ones cancel; one block to another in one pass); a dense
// layer of a few rows takes its weight in column panels (DensePack). Weights are re-laid at compile
// time (a constant in, a constant out), so foldConstants leaves no transform on them.
import { attr } from "../ast/graph/attrs.js"
import { resolveNode } from "../ast/graph/evaluate.js"
import type { Graph, Node } from "../ast/graph/graph.js"
import { bindSync } from "../ast/graph/infer.js"
import { blockOf, packDense, packKernel, packNCHWc } from "../ast/graph/ops/layout.js"
import { TESSERA_DOMAIN } from "../ast/graph/ops/index.js"
import { sizeOf, tensor, type Tensor } from "../ast/graph/tensor.js"
import { eliminateDeadCodeSync } from "./eliminate-dead-code.js"
import { graphPass, type GraphPass } from "./pass.js"
import { rewriteToFixedPoint, type Rule, type RuleCtx } from "./rules.js"

export interface LayoutTarget {
  /** fp32 lanes of the widest vector unit (AVX-512: 16, AVX2: 8, SIMD128: 4). */
  readonly vectorLanes: number
}

/** The largest block ≤ lanes that divides `c` (1 when none does). */
export const chooseBlock = (c: number, lanes: number): number => {
  for (let b = lanes; b > 1; b = Math.floor(b / 2)) if (c % b === 0) return b
  return 1
}

const layoutName = (b: number) => (b === 0 ? "NCHW" : `NCHW${b}c`)

const transformNode = (ctx: { fresh: (b: string) => string }, input: string, output: string, src: number, dst: number): Node => ({
  name: ctx.fresh(`layout_${layoutName(src)}_to_${layoutName(dst)}`),
  op: "LayoutTransform",
  domain: TESSERA_DOMAIN,
  inputs: [input],
  outputs: [output],
  attrs: { src_layout: attr.str(layoutName(src)), dst_layout: attr.str(layoutName(dst)) },
})

/** A node that is a LayoutTransform: its source and destination blocks (one of them 0: NCHW), its input. */
const asTransform = (n: Node | undefined): { src: number; dst: number; input: string } | undefined => {
  if (!n || n.op !== "LayoutTransform" || n.domain !== TESSERA_DOMAIN) return undefined
  const a = resolveNode(n).attrs as { src_layout: string; dst_layout: string }
  return { src: blockOf(a.src_layout), dst: blockOf(a.dst_layout), input: n.inputs[0] }
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b))

/**
 * Conv (2-D, constant weights; group 1, depthwise, or grouped with the block dividing each group's
 * input and output channels) → transforms around ConvNCHWc.
 */
const convToBlocked = (target: LayoutTarget): Rule => ({
  name: "conv-to-nchwc",
  apply: (n, ctx) => {
    if (n.op !== "Conv" || n.domain !== "") return undefined
    const x = ctx.type(n.inputs[0])
    const w = ctx.constant(n.inputs[1])
    // (a bound Conv's weight has the input's rank and C / group channels a filter)
    if (!x || !w || x.shape.length !== 4 || !x.shape.every((d) => typeof d === "number")) return undefined
    if (x.dtype !== "float32") return undefined
    const a = resolveNode(n).attrs as { group: number }
    const C = x.shape[1] as number
    const O = w.shape[0]
    const depthwise = a.group === C && O === C
    // grouped (not depthwise): blocks within a group's channels, input and output alike, so every
    // output block reads whole input blocks of its own group (RegNet's groups of 8 channels)
    const grouped = a.group !== 1 && !depthwise
    const ib = chooseBlock(grouped ? gcd(C / a.group, O / a.group) : C, target.vectorLanes)
    // (a depthwise conv has as many filters as channels: one block in and out)
    const ob = grouped ? ib : chooseBlock(O, target.vectorLanes)
    if (ib === 1 && ob === 1) return undefined
    const wName = ctx.fresh(`${n.inputs[1]}_OIHW${depthwise ? 1 : ib}i${ob}o`)
    const packed = depthwise ? packKernel(w, 1, ob) : packKernel(w, ib, ob)
    const xb = ctx.fresh(`${n.inputs[0]}_${layoutName(ib)}`)
    const yb = ctx.fresh(`${n.outputs[0]}_${layoutName(ob)}`)
    const y = ctx.fresh(`${n.outputs[0]}_nchw`)
    const convAttrs = { ...n.attrs, in_block: attr.int(ib), out_block: attr.int(ob) }
    return {
      nodes: [
        transformNode(ctx, n.inputs[0], xb, 0, ib),
        { name: ctx.fresh(`${n.name}_nchwc`), op: "ConvNCHWc", domain: TESSERA_DOMAIN, inputs: [xb, wName, ...n.inputs.slice(2)], outputs: [yb], attrs: convAttrs },
        transformNode(ctx, yb, y, ob, 0),
      ],
      outputs: [y],
      constants: new Map([[wName, packed]]),
    }
  },
})

/** The widest batch a packed dense layer is made for: its weights are read once per row block. */
const DENSE_PACK_MAX_ROWS = 8

/**
 * Gemm (canonical: no transposes, alpha 1, beta 1; constant float32 B [K, N]) of a few rows →
 * DensePack over B in column panels of one vector (TVM's dense_pack). With B [K, N] a column tile
 * reads a short stretch of every row, 4 KB apart; from panels it reads a few sequential streams.
 * MobileNetV2's 1280 → 1000 classifier, weights from memory, AVX-512: 0.41 → 0.23 ms (a C
 * microbenchmark of both loops). Only for 8 or more lanes (the c target on AVX2 / AVX-512).
 */
const denseToPacked = (target: LayoutTarget): Rule => ({
  name: "dense-to-packed",
  apply: (n, ctx) => {
    if (n.op !== "Gemm" || n.domain !== "" || target.vectorLanes < 8) return undefined
    const a = resolveNode(n).attrs as { alpha: number; beta: number; transA: number; transB: number }
    if (a.transA || a.transB || a.alpha !== 1 || (a.beta !== 1 && n.inputs[2])) return undefined
    const x = ctx.type(n.inputs[0])
    const w = ctx.constant(n.inputs[1])
    if (!x || !w || x.dtype !== "float32") return undefined
    // (A [M, K] and B [K, N]: neither is transposed)
    const M = x.shape[0]
    const N = w.shape[1]
    if (typeof M !== "number" || M > DENSE_PACK_MAX_ROWS || N < 2 * target.vectorLanes) return undefined
    const wName = ctx.fresh(`${n.inputs[1]}_NK${target.vectorLanes}n`)
    const y = ctx.fresh(`${n.outputs[0]}_packed`)
    return {
      nodes: [{ name: ctx.fresh(`${n.name}_pack`), op: "DensePack", domain: TESSERA_DOMAIN, inputs: [n.inputs[0], wName, ...n.inputs.slice(2)], outputs: [y], attrs: { n: attr.int(N) } }],
      outputs: [y],
      constants: new Map([[wName, packDense(w, target.vectorLanes)]]),
    }
  },
})

/**
 * LayoutTransform(a→b) then LayoutTransform(b→c): the identity where c is a (inverse transforms
 * cancel), else one transform a→c (a conv's blocks of 16 to a grouped conv's blocks of 8 in one
 * pass, not through NCHW).
 */
export const composeTransforms: Rule = {
  name: "compose-layout-transforms",
  apply: (n, ctx) => {
    const outer = asTransform(n)
    if (!outer) return undefined
    // (the outer transform reads the inner one's output, so inner.dst is outer.src)
    const inner = asTransform(ctx.producer(n.inputs[0]))
    if (!inner) return undefined
    // (a graph output keeps its name: the rule engine writes it with an Identity)
    if (inner.src === outer.dst) return { nodes: [], outputs: [inner.input] }
    const y = ctx.fresh(`${n.outputs[0]}_${layoutName(outer.dst)}`)
    return { nodes: [transformNode(ctx, inner.input, y, inner.src, outer.dst)], outputs: [y] }
  },
}

// (not Identity: the rule engine keeps a graph output's name with an Identity after a rewrite;
// moving that through the layout again would add another each sweep, to the iteration limit)
const UNARY = new Set(["Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "HardSwish", "Elu", "Selu", "Softplus", "Neg", "Abs", "Exp", "Erf", "Sqrt", "Gelu", "Mish", "Swish"])

/** The blocked block of a value that is LayoutTransform(b→NCHW)(y): y and b. */
const fromBlocked = (v: string, ctx: RuleCtx): { y: string; b: number } | undefined => {
  const t = asTransform(ctx.producer(v))
  return t && t.dst === 0 ? { y: t.input, b: t.src } : undefined
}

/** U(unblock(y)) → unblock(U(y)) for elementwise U (Clip too: its bounds are scalars, which broadcast alike in either layout). */
const unaryThroughLayout: Rule = {
  name: "elementwise-through-layout",
  apply: (n, ctx) => {
    if (n.domain !== "" || !(UNARY.has(n.op) || n.op === "Clip")) return undefined
    const src = fromBlocked(n.inputs[0], ctx)
    if (!src) return undefined
    const yb = ctx.fresh(`${n.outputs[0]}_${layoutName(src.b)}`)
    const y = ctx.fresh(`${n.outputs[0]}_nchw`)
    return {
      nodes: [{ ...n, inputs: [src.y, ...n.inputs.slice(1)], outputs: [yb] }, transformNode(ctx, yb, y, src.b, 0)],
      outputs: [y],
    }
  },
}

/** A per-channel or scalar constant for an NCHW value, re-laid for NCHW{b}c (undefined if it is neither). */
const relayConstant = (c: Tensor, channels: number, b: number): Tensor | undefined => {
  // (one element broadcasts alike in either layout: the caller has ruled out one that adds a dim)
  if (sizeOf(c.shape) === 1) return c
  // more than one element, all along C: [C, 1, 1] or [1, C, 1, 1] (it broadcasts against the C
  // channels of a 4-D value)
  const [n, , h, w] = [1, 1, 1, 1, ...c.shape].slice(-4)
  if (n !== 1 || h !== 1 || w !== 1) return undefined
  return packNCHWc(tensor(c.dtype, [1, channels, 1, 1], c.data), b)
}

/**
 * Add/Sub/Mul/Div of unblock(a) and unblock(b) (same block: they broadcast over N, H and W in the
 * blocked layout as in NCHW, a squeeze-excite's [N, C, 1, 1] too), or of unblock(a) and a
 * per-channel constant.
 */
const binaryThroughLayout: Rule = {
  name: "broadcast-through-layout",
  apply: (n, ctx) => {
    if (n.domain !== "" || !["Add", "Sub", "Mul", "Div"].includes(n.op)) return undefined
    const [l, r] = n.inputs
    const lb = fromBlocked(l, ctx)
    const rb = fromBlocked(r, ctx)
    const yb = ctx.fresh(`${n.outputs[0]}_blocked`)
    const y = ctx.fresh(`${n.outputs[0]}_nchw`)
    // (an unblocked operand is 4-D: the output is too where it has the operand's shape, as the
    // constant case checks; two unblocked operands give a 4-D output)
    const out = ctx.type(n.outputs[0])!
    if (lb && rb && lb.b === rb.b) {
      return { nodes: [{ ...n, inputs: [lb.y, rb.y], outputs: [yb] }, transformNode(ctx, yb, y, lb.b, 0)], outputs: [y] }
    }
    const blk = lb ?? rb
    if (!blk) return undefined
    const side = lb ? 0 : 1
    const c = ctx.constant(n.inputs[1 - side])
    const xt = ctx.type(n.inputs[side])
    if (!c || !xt || !xt.shape.every((d, i) => d === out.shape[i])) return undefined
    const relaid = relayConstant(c, out.shape[1] as number, blk.b)
    if (!relaid) return undefined
    const cName = ctx.fresh(`${n.inputs[1 - side]}_${layoutName(blk.b)}`)
    const inputs = side === 0 ? [blk.y, cName] : [cName, blk.y]
    return {
      nodes: [{ ...n, inputs, outputs: [yb] }, transformNode(ctx, yb, y, blk.b, 0)],
      outputs: [y],
      constants: new Map([[cName, relaid]]),
    }
  },
}

/**
 * MaxPool / AveragePool (2-D, no Indices output) of unblock(y) → unblock(PoolNCHWc(y)); a global
 * pool (static spatial dims) is the pool whose window is the whole image, so it moves too and the
 * blocked tensor is not converted back before it (MobileNetV2's and ResNet's heads).
 */
const poolThroughLayout: Rule = {
  name: "pool-through-layout",
  apply: (n, ctx) => {
    const global = n.op === "GlobalAveragePool" || n.op === "GlobalMaxPool"
    if (n.domain !== "" || (n.op !== "MaxPool" && n.op !== "AveragePool" && !global)) return undefined
    if (n.outputs.length > 1 && n.outputs[1] !== "") return undefined
    const src = fromBlocked(n.inputs[0], ctx)
    if (!src) return undefined
    // (an unblocked value is [N, C, H, W] of static dims: only convs of a static input are blocked;
    // storage_order only orders the Indices, which are not asked for)
    const [h, w] = ctx.type(n.inputs[0])!.shape.slice(2) as number[]
    const yb = ctx.fresh(`${n.outputs[0]}_${layoutName(src.b)}`)
    const y = ctx.fresh(`${n.outputs[0]}_nchw`)
    const { storage_order: _, ...plain } = n.attrs
    const rest = global ? { kernel_shape: attr.ints([h, w]) } : plain
    const pool = global ? (n.op === "GlobalAveragePool" ? "AveragePool" : "MaxPool") : n.op
    return {
      nodes: [
        { name: ctx.fresh(`${n.name}_nchwc`), op: "PoolNCHWc", domain: TESSERA_DOMAIN, inputs: [src.y], outputs: [yb], attrs: { ...rest, pool: attr.str(pool) } },
        transformNode(ctx, yb, y, src.b, 0),
      ],
      outputs: [y],
    }
  },
}

export const alterLayoutSync = (graph: Graph, target: LayoutTarget): Graph => {
  const g = bindSync(graph)
  // convolutions first, then neighbours and cancellation to a fixed point
  const converted = rewriteToFixedPoint(g, [convToBlocked(target), denseToPacked(target)]).graph
  const moved = rewriteToFixedPoint(converted, [composeTransforms, unaryThroughLayout, binaryThroughLayout, poolThroughLayout]).graph
  return bindSync(eliminateDeadCodeSync(moved))
}

/** The pass for a CPU target with `vectorLanes` fp32 lanes. */
export const alterLayout = (target: LayoutTarget): GraphPass => graphPass("rewrite.AlterLayout", 3, (g) => alterLayoutSync(g, target))
