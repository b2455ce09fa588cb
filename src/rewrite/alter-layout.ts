// rewrite.AlterLayout: for CPU targets, 2-D convolutions move to the blocked layout NCHW{c}c
// (block from the target's vector width; a grouped conv's within its groups), with layout
// transforms at the boundaries; elementwise neighbours (activations, bias and residual adds,
// scale/shift), max / average pooling (global pooling too) and concatenation over the channels
// move into the blocked layout too (channels the block does not divide padded with zero lanes),
// and adjacent transforms compose (inverse ones cancel; one block to another in one pass); a dense
// layer of a few rows takes its weight in column panels (DensePack), a product of more rows over a
// constant weight in panels of its register tile's width (MatMulPacked; both in pack-dense.ts).
// Weights are re-laid at compile time (a constant in, a constant out), so foldConstants leaves no
// transform on them.
import { attr } from "../ast/graph/attrs.js"
import { resolveNode } from "../ast/graph/evaluate.js"
import type { Graph, Node } from "../ast/graph/graph.js"
import { bindMemo, bindSync } from "../ast/graph/infer.js"
import { blockOf, packKernel, packNCHWc } from "../ast/graph/ops/layout.js"
import { TESSERA_DOMAIN } from "../ast/graph/ops/index.js"
import { allocate } from "../ast/graph/dtype.js"
import { sizeOf, tensor, type Tensor } from "../ast/graph/tensor.js"
import type { RegisterFile } from "../ast/register-tile.js"
import { eliminateDeadCodeSync } from "./eliminate-dead-code.js"
import { denseToPacked } from "./pack-dense.js"
import { int8ConvToPackedFor, int8GroupedToPackedFor, int8MatmulToPacked, type Int8LayoutTarget } from "./pack-int8.js"
import { graphPass, type GraphPass } from "./pass.js"
import { rewriteToFixedPoint, type Rule, type RuleCtx } from "./rules.js"

/**
 * What the layout rewrite reads of the target record: its vector lanes (the blocks), FMA pipes
 * per width (the padded blocks), and the register file (a packed weight's panels: the matmul
 * register tile's columns, from lanes, FMA pipes × latency and registers).
 */
export interface LayoutTarget extends RegisterFile, Int8LayoutTarget {
  /** fp32 lanes of the widest vector unit (AVX-512: 16, AVX2: 8, SIMD128: 4). */
  readonly vectorLanes: number
  /** FMA pipes per vector width (fp32 lanes → pipes), as the target record measured them; absent: the same at every width. */
  readonly fmaUnitsByLanes?: Readonly<Record<string, number>>
}

/** The largest block ≤ lanes that divides `c` (1 when none does). */
export const chooseBlock = (c: number, lanes: number): number => {
  for (let b = lanes; b > 1; b = Math.floor(b / 2)) if (c % b === 0) return b
  return 1
}

/** FMA pipes for vectors of `lanes` fp32: the record's at the narrowest width it has that holds them (1 where it has none). */
const unitsAt = (target: LayoutTarget, lanes: number): number => {
  const byLanes = Object.entries(target.fmaUnitsByLanes ?? {}).map(([l, u]) => [Number(l), u] as const).sort((a, b) => a[0] - b[0])
  if (!byLanes.length) return 1
  return (byLanes.find(([l]) => l >= lanes) ?? byLanes[byLanes.length - 1])[1]
}

/**
 * The block of a value that vectorized ops write (a blocked conv's output, and the elementwise ops
 * and pools after it), the channels padded to a whole number of blocks where it does not divide
 * them: of lanes, lanes/2, … 1, the one with the fewest cycles — a writer issues ⌈C/b⌉ vector FMAs
 * a pixel over the pipes the target has at that width, and a conv that reads the value reduces
 * over the ⌈C/b⌉·b padded channels instead of C — the larger block on a tie. Zen 4 (2 pipes at 8
 * lanes, 1 at 16): 58 channels → 16 (64), 116 → 8 (120), 232 → 8, 24 → 8; with as many pipes at
 * 16 lanes as at 8, 24 → 16 (32: two vectors a pixel where blocks of 8 take three).
 */
export const paddedBlock = (c: number, target: LayoutTarget): number => {
  let best = 1
  let bestCost = Infinity
  for (let b = Math.max(1, target.vectorLanes); b >= 1; b = Math.floor(b / 2)) {
    const blocks = Math.ceil(c / b)
    const cost = (blocks / unitsAt(target, b)) * ((blocks * b) / c)
    if (cost < bestCost - 1e-9) [best, bestCost] = [b, cost]
    if (b === 1) break
  }
  return best
}

const layoutName = (b: number) => (b === 0 ? "NCHW" : `NCHW${b}c`)

/** A transform between NCHW and NCHW{b}c; `channels` where the block does not divide them (the NCHW side's count). */
const transformNode = (ctx: { fresh: (b: string) => string }, input: string, output: string, src: number, dst: number, channels = 0): Node => ({
  name: ctx.fresh(`layout_${layoutName(src)}_to_${layoutName(dst)}`),
  op: "LayoutTransform",
  domain: TESSERA_DOMAIN,
  inputs: [input],
  outputs: [output],
  attrs: { src_layout: attr.str(layoutName(src)), dst_layout: attr.str(layoutName(dst)), ...(channels % Math.max(src, dst) !== 0 ? { channels: attr.int(channels) } : {}) },
})

/** A node that is a LayoutTransform: its source and destination blocks (one of them 0: NCHW), its input, and the padded NCHW channel count (0: none). */
const asTransform = (n: Node | undefined): { src: number; dst: number; input: string; channels: number } | undefined => {
  if (!n || n.op !== "LayoutTransform" || n.domain !== TESSERA_DOMAIN) return undefined
  const a = resolveNode(n).attrs as { src_layout: string; dst_layout: string; channels: number }
  return { src: blockOf(a.src_layout), dst: blockOf(a.dst_layout), input: n.inputs[0], channels: a.channels }
}

/**
 * Ops that keep a padded block's extra lanes zero, so a value may stay blocked and padded through
 * them (a conv reading it multiplies those lanes by zero weights, and a transform back to a padded
 * block after them is the identity): f(0) = 0.
 */
const ZERO_KEEPING = new Set(["Relu", "Tanh", "LeakyRelu", "HardSwish", "Elu", "Selu", "Neg", "Abs", "Erf", "Sqrt", "Gelu", "Mish", "Swish"])

/** A Clip whose constant bounds hold 0 (min ≤ 0 ≤ max; a bound left out holds it). */
const clipKeepsZero = (n: Node, constant: (v: string) => Tensor | undefined): boolean => {
  const a = resolveNode(n).attrs as { min?: number; max?: number }
  const bound = (i: number, fromAttr: number | undefined): number | undefined => {
    const v = n.inputs[i]
    if (v === undefined || v === "") return fromAttr
    const t = constant(v)
    return t && t.data.length === 1 ? Number(t.data[0]) : NaN
  }
  const lo = bound(1, a.min)
  const hi = bound(2, a.max)
  return !(lo !== undefined && !(lo <= 0)) && !(hi !== undefined && !(hi >= 0))
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b))

/**
 * The convs convToBlocked takes: 2-D, float32 of static shape, constant weights; group 1,
 * depthwise, or grouped (`grouped`: a group's input and output channels, whose common divisors are
 * the blocks that keep every output block reading whole input blocks of its own group).
 */
const blockableConv = (n: Node, type: (v: string) => { readonly dtype: string; readonly shape: readonly (number | string)[] } | undefined, constant: (v: string) => Tensor | undefined) => {
  if (n.op !== "Conv" || n.domain !== "") return undefined
  const x = type(n.inputs[0])
  const w = constant(n.inputs[1])
  // (a bound Conv's weight has the input's rank and C / group channels a filter)
  if (!x || !w || x.shape.length !== 4 || !x.shape.every((d) => typeof d === "number")) return undefined
  if (x.dtype !== "float32") return undefined
  const a = resolveNode(n).attrs as { group: number }
  const C = x.shape[1] as number
  const O = w.shape[0]
  const depthwise = a.group === C && O === C
  const grouped = a.group !== 1 && !depthwise ? gcd(C / a.group, O / a.group) : 0
  const y = type(n.outputs[0])?.shape ?? []
  // (its output pixels: one where it is a matrix-vector product, a squeeze-excite's)
  const pixels = y.length === 4 && typeof y[2] === "number" && typeof y[3] === "number" ? y[2] * y[3] : 0
  return { C, O, w, depthwise, grouped, pixels }
}

/**
 * The values vectorized ops write: a blockable conv's output of more than one pixel, and what an elementwise op that
 * keeps zeros (on such values and constants) or a pool makes of them. These take paddedBlock
 * (their writers run on it, and the rules below keep them blocked); the rest, a network's image
 * among them, chooseBlock (a conv only reduces over them: padding would be extra work).
 */
const vectorWritten = (g: Graph, target: LayoutTarget): Set<string> => {
  const out = new Set<string>()
  const type = (v: string) => g.valueTypes.get(v) ?? g.inputs.find((i) => i.name === v)?.type
  const constant = (v: string) => g.initializers.get(v)
  for (const n of g.nodes) {
    if (n.domain !== "" || target.vectorLanes < 2) continue
    const ins = n.inputs.filter((v) => v !== "" && !g.initializers.has(v))
    const fromWritten = ins.length > 0 && ins.every((v) => out.has(v))
    const keeps =
      (blockableConv(n, type, constant)?.pixels ?? 0) > 1 ||
      (fromWritten && (ZERO_KEEPING.has(n.op) || (n.op === "Clip" && clipKeepsZero(n, constant)) || ["MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool"].includes(n.op))) ||
      (fromWritten && ["Add", "Sub", "Mul"].includes(n.op)) ||
      (fromWritten && n.op === "Concat" && type(n.outputs[0])?.shape.length === 4) ||
      (fromWritten && n.op === "Div" && g.initializers.has(n.inputs[1]))
    if (keeps) out.add(n.outputs[0])
  }
  return out
}

/**
 * Conv (2-D, constant weights; group 1, depthwise or grouped) → transforms around ConvNCHWc: its
 * output in paddedBlock, its input in the block the value takes (vectorWritten), the weights (and a
 * constant bias) zero-padded to whole blocks; a grouped conv's one block in and out, the largest
 * that divides a group's input and output channels (RegNet's groups of 8), unpadded. (A sweep hands a conv its input under the name an earlier
 * conversion in the same sweep gave it: `written` takes the new names as they are made.)
 */
const convToBlocked = (target: LayoutTarget, written: Set<string>): Rule => ({
  name: "conv-to-nchwc",
  apply: (n, ctx) => {
    const conv = blockableConv(n, ctx.type, ctx.constant)
    if (!conv) return undefined
    const { C, O, w, depthwise, grouped, pixels } = conv
    const bias = n.inputs[2] ? ctx.constant(n.inputs[2]) : undefined
    // a padded output needs its bias padded too: a computed one keeps the block that divides; one
    // pixel (a matrix-vector product) reads its weights once, and padding them is all it would buy
    const padded = pixels > 1 ? paddedBlock(O, target) : chooseBlock(O, target.vectorLanes)
    const ob0 = O % padded === 0 || !n.inputs[2] || bias ? padded : chooseBlock(O, target.vectorLanes)
    // (a depthwise conv has as many filters as channels: one block in and out; a grouped one's
    // block divides its groups, so it is never padded)
    const ib = grouped ? chooseBlock(grouped, target.vectorLanes) : depthwise ? ob0 : written.has(n.inputs[0]) ? paddedBlock(C, target) : chooseBlock(C, target.vectorLanes)
    const ob = grouped || depthwise ? ib : ob0
    if (ib === 1 && ob === 1) return undefined
    const wName = ctx.fresh(`${n.inputs[1]}_OIHW${depthwise ? 1 : ib}i${ob}o`)
    const packed = depthwise ? packKernel(w, 1, ob) : packKernel(w, ib, ob)
    const xb = ctx.fresh(`${n.inputs[0]}_${layoutName(ib)}`)
    const yb = ctx.fresh(`${n.outputs[0]}_${layoutName(ob)}`)
    const y = ctx.fresh(`${n.outputs[0]}_nchw`)
    if (written.has(n.outputs[0])) written.add(y)
    const Opad = Math.ceil(O / ob) * ob
    // (a depthwise conv over the padded channels: one group a channel)
    const convAttrs = { ...n.attrs, in_block: attr.int(ib), out_block: attr.int(ob), ...(depthwise ? { group: attr.int(Opad) } : {}) }
    const constants = new Map([[wName, packed]])
    const rest = n.inputs.slice(2)
    if (bias && Opad !== O) {
      const bName = ctx.fresh(`${n.inputs[2]}_padded`)
      const data = allocate(bias.dtype, Opad)
      data.set(bias.data as never)
      constants.set(bName, tensor(bias.dtype, [Opad], data))
      rest[0] = bName
    }
    return {
      nodes: [
        transformNode(ctx, n.inputs[0], xb, 0, ib, C),
        { name: ctx.fresh(`${n.name}_nchwc`), op: "ConvNCHWc", domain: TESSERA_DOMAIN, inputs: [xb, wName, ...rest], outputs: [yb], attrs: convAttrs },
        transformNode(ctx, yb, y, ob, 0, O),
      ],
      outputs: [y],
      constants,
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
    // (padded: the NCHW value's channels, so its extra lanes are dropped and the new ones zero)
    const y = ctx.fresh(`${n.outputs[0]}_${layoutName(outer.dst)}`)
    return { nodes: [transformNode(ctx, inner.input, y, inner.src, outer.dst, inner.channels || outer.channels)], outputs: [y] }
  },
}

// (not Identity: the rule engine keeps a graph output's name with an Identity after a rewrite;
// moving that through the layout again would add another each sweep, to the iteration limit)
const UNARY = new Set(["Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "HardSwish", "Elu", "Selu", "Softplus", "Neg", "Abs", "Exp", "Erf", "Sqrt", "Gelu", "Mish", "Swish"])

/** The blocked block of a value that is LayoutTransform(b→NCHW)(y): y, b, and its NCHW channels where b does not divide them (0: it does). */
const fromBlocked = (v: string, ctx: RuleCtx): { y: string; b: number; channels: number } | undefined => {
  const t = asTransform(ctx.producer(v))
  return t && t.dst === 0 ? { y: t.input, b: t.src, channels: t.channels } : undefined
}

/** U(unblock(y)) → unblock(U(y)) for elementwise U (Clip too: its bounds are scalars, which broadcast alike in either layout). */
const unaryThroughLayout: Rule = {
  name: "elementwise-through-layout",
  apply: (n, ctx) => {
    if (n.domain !== "" || !(UNARY.has(n.op) || n.op === "Clip")) return undefined
    const src = fromBlocked(n.inputs[0], ctx)
    if (!src) return undefined
    // (a padded block's extra lanes stay zero only through an op that keeps zeros)
    if (src.channels && !(ZERO_KEEPING.has(n.op) || (n.op === "Clip" && clipKeepsZero(n, ctx.constant)))) return undefined
    const yb = ctx.fresh(`${n.outputs[0]}_${layoutName(src.b)}`)
    const y = ctx.fresh(`${n.outputs[0]}_nchw`)
    return {
      nodes: [{ ...n, inputs: [src.y, ...n.inputs.slice(1)], outputs: [yb] }, transformNode(ctx, yb, y, src.b, 0, src.channels)],
      outputs: [y],
    }
  },
}

/**
 * A per-channel or scalar constant for an NCHW value, re-laid for NCHW{b}c (undefined if it is
 * neither). Where b does not divide the channels it is per-channel (a scalar repeated), its extra
 * lanes `fill`.
 */
const relayConstant = (c: Tensor, channels: number, b: number, fill: number): Tensor | undefined => {
  const padded = channels % b !== 0
  // (one element broadcasts alike in either layout: the caller has ruled out one that adds a dim)
  if (sizeOf(c.shape) === 1 && !padded) return c
  if (sizeOf(c.shape) === 1) return packNCHWc(tensor(c.dtype, [1, channels, 1, 1], allocate(c.dtype, channels).fill(c.data[0] as never)), b, fill)
  // more than one element, all along C: [C, 1, 1] or [1, C, 1, 1] (it broadcasts against the C
  // channels of a 4-D value)
  const [n, , h, w] = [1, 1, 1, 1, ...c.shape].slice(-4)
  if (n !== 1 || h !== 1 || w !== 1) return undefined
  return packNCHWc(tensor(c.dtype, [1, channels, 1, 1], c.data), b, fill)
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
    if (lb && rb && lb.b === rb.b && lb.channels === rb.channels) {
      // (padded: 0 / 0 is no zero)
      if (lb.channels && n.op === "Div") return undefined
      return { nodes: [{ ...n, inputs: [lb.y, rb.y], outputs: [yb] }, transformNode(ctx, yb, y, lb.b, 0, lb.channels)], outputs: [y] }
    }
    const blk = lb ?? rb
    if (!blk) return undefined
    const side = lb ? 0 : 1
    // (padded: a constant over a padded divisor is no zero; a padded divisor constant's lanes are 1)
    if (blk.channels && n.op === "Div" && side === 1) return undefined
    const c = ctx.constant(n.inputs[1 - side])
    const xt = ctx.type(n.inputs[side])
    if (!c || !xt || !xt.shape.every((d, i) => d === out.shape[i])) return undefined
    const relaid = relayConstant(c, out.shape[1] as number, blk.b, n.op === "Div" ? 1 : 0)
    if (!relaid) return undefined
    const cName = ctx.fresh(`${n.inputs[1 - side]}_${layoutName(blk.b)}`)
    const inputs = side === 0 ? [blk.y, cName] : [cName, blk.y]
    return {
      nodes: [{ ...n, inputs, outputs: [yb] }, transformNode(ctx, yb, y, blk.b, 0, blk.channels)],
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
        transformNode(ctx, yb, y, src.b, 0, src.channels),
      ],
      outputs: [y],
    }
  },
}

/**
 * Concat over the channels (axis 1 of a 4-D value) of unblock(y₁), …, unblock(yₙ) of one block that
 * divides each one's channels → unblock(Concat(y₁, …, yₙ)) over axis 1 of the blocked layout (its
 * blocks), where that block is the join's own (paddedBlock: a conv reading it takes it as it is):
 * SqueezeNet's fire modules join their two expand convs so, and the pooling and the conv after
 * them read the join blocked.
 */
const concatThroughLayout = (target: LayoutTarget): Rule => ({
  name: "concat-through-layout",
  apply: (n, ctx) => {
    if (n.domain !== "" || n.op !== "Concat" || n.inputs.length < 2) return undefined
    const out = ctx.type(n.outputs[0])
    const axis = (resolveNode(n).attrs as { axis: number }).axis
    if (!out || out.shape.length !== 4 || (axis !== 1 && axis !== -3)) return undefined
    const srcs = n.inputs.map((v) => fromBlocked(v, ctx))
    const b = srcs[0]?.b
    if (!srcs.every((s) => s && s.b === b && !s.channels) || paddedBlock(out.shape[1] as number, target) !== b) return undefined
    const yb = ctx.fresh(`${n.outputs[0]}_${layoutName(b!)}`)
    const y = ctx.fresh(`${n.outputs[0]}_nchw`)
    return {
      nodes: [{ ...n, inputs: srcs.map((s) => s!.y), outputs: [yb], attrs: { ...n.attrs, axis: attr.int(1) } }, transformNode(ctx, yb, y, b!, 0)],
      outputs: [y],
    }
  },
})

export const alterLayoutSync = (graph: Graph, target: LayoutTarget): Graph => {
  // (one memo for the pass's binds: each binds the last one's graph, or a few nodes changed)
  const memo = bindMemo()
  const g = bindSync(graph, undefined, { memo })
  // convolutions first, then neighbours and cancellation to a fixed point
  const converted = rewriteToFixedPoint(g, [convToBlocked(target, vectorWritten(g, target)), denseToPacked(target), int8ConvToPackedFor(target), int8GroupedToPackedFor(target), int8MatmulToPacked], undefined, memo).graph
  const moved = rewriteToFixedPoint(converted, [composeTransforms, unaryThroughLayout, binaryThroughLayout, poolThroughLayout, concatThroughLayout(target)], undefined, memo).graph
  return bindSync(eliminateDeadCodeSync(moved), undefined, { memo })
}

/** The pass for a CPU target with `vectorLanes` fp32 lanes. */
export const alterLayout = (target: LayoutTarget): GraphPass => graphPass("rewrite.AlterLayout", 3, (g) => alterLayoutSync(g, target))
