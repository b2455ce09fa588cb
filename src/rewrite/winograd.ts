// rewrite.WinogradConv: blocked 3×3 stride-1 convolutions (ConvNCHWc, group 1, constant weights,
// at least MIN_CHANNELS in and out) become ConvWinogradNCHWc, F(4×4, 3×3) or F(2×2, 3×3) for
// small images (see MIN_TILES), with the kernel
// transform U = G g Gᵀ folded into a constant here, at compile time. The input and output
// transforms stay in the op (its compute and its schedule template). A graph rewrite, not a
// schedule knob: the op has other inputs (U instead of the kernel) and its own stages.
import { attr } from "../ast/graph/attrs.js"
import { resolveNode } from "../ast/graph/evaluate.js"
import type { Graph } from "../ast/graph/graph.js"
import { bindMemo, bindSync } from "../ast/graph/infer.js"
import { TESSERA_DOMAIN } from "../ast/graph/ops/index.js"
import { windowOf, type AutoPad } from "../ast/graph/ops/nn-common.js"
import { WINOGRAD_M, winogradKernel } from "../ast/graph/ops/winograd.js"
import { eliminateDeadCodeSync } from "./eliminate-dead-code.js"
import { graphPass, type GraphPass } from "./pass.js"
import { rewriteToFixedPoint, type Rule, type RuleSet } from "./rules.js"

/**
 * Input and output channels below which a conv stays direct: the transforms cost O(channels) per
 * tile and the products O(in · out), so narrow convs gain little (and ONNX's small conformance
 * convs keep their exact direct sums).
 */
export const MIN_CHANNELS = 16

/**
 * Output tiles below which a transform is not used: F(4×4)'s U holds 36 / 9 = 4× the kernel's
 * weights, and with few tiles to reuse them the products stream U from memory. ResNet-18's 7×7
 * layers (4 tiles of 4×4, 512 channels, U 38 MB) ran no faster than direct; its 14×14 layers
 * (16 tiles) about 1.7× faster. Under 16 tiles of 4×4 the conv takes F(2×2) (16 tiles of 2×2 on
 * 7×7, U 16/9 of the kernel), under 16 of those it stays direct.
 */
export const MIN_TILES = 16

/** What the choice of transform reads of the target. */
export interface WinogradTarget {
  /**
   * Input tiles one register block of the products holds (the conv template's accumulator cap,
   * from the target's vector registers). F(4×4) needs more tiles than that: with one block or
   * fewer, each vector of U is loaded once for at most a block of FMAs, and an inference streams U
   * (4× the kernel's weights) from memory for few products. ResNet-50's 14×14 layers (256
   * channels, 16 tiles of 4×4, 16 accumulators on AVX-512) took 7.7–8.4 ms for the five in the
   * end-to-end run with F(4×4) (U 9.4 MB each; 5.5–5.8 ms timed alone, U in cache) and 5.7–5.8 ms
   * with F(2×2) (49 tiles, U 4.2 MB); its 28×28 layers (49 tiles of 4×4) stay faster with
   * F(4×4): 0.76–0.86 ms against 1.06–1.15 ms each (Zen 4, 1 thread).
   */
  readonly registerTiles?: number
}

const convToWinograd = (target: WinogradTarget): Rule => ({
  name: "conv-to-winograd",
  apply: (n, ctx) => {
    if (n.op !== "ConvNCHWc" || n.domain !== TESSERA_DOMAIN) return undefined
    const w = ctx.constant(n.inputs[1])
    const x = ctx.type(n.inputs[0])
    const y = ctx.type(n.outputs[0])
    // (a ConvNCHWc's kernel is 6-D: [O/ob, I/ib, KH, KW, ib, ob], its type inference says so)
    if (!w || !x || !y || x.dtype !== "float32") return undefined
    const a = resolveNode(n).attrs as { group: number; in_block: number; out_block: number; strides?: readonly number[]; dilations?: readonly number[]; pads?: readonly number[]; auto_pad: AutoPad }
    const [OB, IB, KH, KW, ib, ob] = w.shape
    if (a.group !== 1 || KH !== 3 || KW !== 3) return undefined
    if (a.strides?.some((s) => s !== 1) || a.dilations?.some((d) => d !== 1)) return undefined
    if (IB * ib < MIN_CHANNELS || OB * ob < MIN_CHANNELS) return undefined
    const [H, W] = [x.shape[2], x.shape[3]]
    const [OH, OW] = [y.shape[2], y.shape[3]]
    if (![x.shape[0], H, W, OH, OW].every((d) => typeof d === "number")) return undefined
    // F(4×4) where its tiles are enough to reuse its kernel, else F(2×2) (7×7 images), else direct
    const tiles = (m: number) => Math.ceil((OH as number) / m) * Math.ceil((OW as number) / m) * (x.shape[0] as number)
    const m = tiles(WINOGRAD_M) >= minTiles4(target) ? 4 : tiles(2) >= MIN_TILES ? 2 : undefined
    if (m === undefined) return undefined
    // explicit [top, left, bottom, right] padding, auto_pad resolved as Conv's shape inference does
    const win = windowOf([H as number, W as number], [3, 3], { auto_pad: a.auto_pad, pads: a.pads, strides: a.strides, dilations: a.dilations, kernel_shape: undefined })
    const pads = [...win.padBegin, ...win.padEnd]
    const uName = ctx.fresh(`${n.inputs[1]}_winograd`)
    const out = ctx.fresh(`${n.outputs[0]}_winograd`)
    return {
      nodes: [
        {
          name: ctx.fresh(`${n.name}_winograd`),
          op: "ConvWinogradNCHWc",
          domain: TESSERA_DOMAIN,
          inputs: [n.inputs[0], uName, ...n.inputs.slice(2)],
          outputs: [out],
          attrs: { in_block: attr.int(a.in_block), out_block: attr.int(a.out_block), pads: attr.ints(pads) },
        },
      ],
      outputs: [out],
      constants: new Map([[uName, winogradKernel(w, m)]]),
    }
  },
})

/** Output tiles of 4×4 from which a conv takes F(4×4): MIN_TILES, and more than one register block of the products. */
export const minTiles4 = (target: WinogradTarget): number => Math.max(MIN_TILES, (target.registerTiles ?? 0) + 1)

/** The pass's rules (one), for a target. */
export const winogradRulesFor = (target: WinogradTarget): RuleSet => [convToWinograd(target)]

/** The pass's rules with no target (F(4×4) from MIN_TILES tiles). */
export const winogradRules: RuleSet = winogradRulesFor({})

export const winogradConvSync = (graph: Graph, target: WinogradTarget = {}): Graph => {
  // (one memo for the pass's binds: each binds the last one's graph, or a few nodes changed)
  const memo = bindMemo()
  const g = bindSync(graph, undefined, { memo })
  const rewritten = rewriteToFixedPoint(g, winogradRulesFor(target), undefined, memo).graph
  return bindSync(eliminateDeadCodeSync(rewritten), undefined, { memo })
}

/** The pass for a target (after alterLayout, which makes the blocked convolutions it reads). */
export const winogradConvFor = (target: WinogradTarget): GraphPass => graphPass("rewrite.WinogradConv", 3, (g) => winogradConvSync(g, target))

/** The pass with no target. */
export const winogradConv: GraphPass = winogradConvFor({})
