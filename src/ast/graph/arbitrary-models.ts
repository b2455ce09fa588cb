// The model-like generator: graphs made of the motifs real networks are made of, on the sizes and
// parameters where rewrite bugs show. A case starts from a stem — an image [N, C, H, W] (channels
// 3 to 32, several vector blocks), tokens [B, T, D] (float, or embedded from int64 ids) or features
// [N, K] — and applies `budget` motifs that fit the current activation: convolutional
// (conv-BN-activation, residual, squeeze-excite, pooling, broadcasts, a classifier head, patches
// to tokens), transformer (attention, MLP, LayerNorm, token pooling), dense (Gemm chains,
// exporter-style Linear), and any-rank (siblings, multi-output ops on activations and constants,
// bool gates); low-precision islands and Cast siblings on the float input become extra outputs.
import * as fc from "fast-check"
import { graphBuilder, prng, randomTensor, type GraphBuilder, type GraphCase, type Val } from "./arbitrary-builder.js"
import {
  MODEL_CHANNELS,
  channelBroadcast,
  convBnAct,
  fitsImage,
  head,
  pool,
  residual,
  squeezeExcite,
  toTokens,
} from "./arbitrary-motifs-image.js"
import { attention, embed, fitsFeatures, fitsTokens, gemm, layerNorm, linear, mlp, poolTokens } from "./arbitrary-motifs-seq.js"
import {
  castSiblings,
  dropoutMask,
  layerNormStats,
  lowPrecision,
  siblings,
  splitActivation,
  splitWeights,
  topK,
  topKConstant,
  whereGate,
} from "./arbitrary-motifs-shared.js"
import { sizeOf } from "./tensor.js"

type Fits = (x: Val) => boolean
interface Motif {
  readonly fits: Fits
  readonly apply: (b: GraphBuilder, x: Val) => Val
}
const anyFloat: Fits = (x) => x.dtype === "float32" && x.shape.length >= 2 && sizeOf(x.shape) <= 8192
const imageWith = (pred: Fits): Fits => (x) => fitsImage(x) && pred(x)

/** The motifs by name (the `motifs` option picks among them). */
export const MOTIFS = {
  "conv-bn-act": { fits: fitsImage, apply: (b, x) => convBnAct(b, x) },
  residual: { fits: imageWith((x) => x.shape[1] <= 32), apply: residual },
  "squeeze-excite": { fits: imageWith((x) => x.shape[1] >= 4), apply: squeezeExcite },
  pool: { fits: imageWith((x) => x.shape[2] >= 2 && x.shape[3] >= 2), apply: pool },
  broadcast: { fits: fitsImage, apply: channelBroadcast },
  head: { fits: fitsImage, apply: head },
  "to-tokens": { fits: imageWith((x) => x.shape[1] >= 4 && x.shape[2] * x.shape[3] <= 64), apply: toTokens },
  attention: { fits: fitsTokens, apply: attention },
  mlp: { fits: fitsTokens, apply: mlp },
  "layer-norm": { fits: (x) => fitsTokens(x) || fitsFeatures(x), apply: layerNorm },
  "pool-tokens": { fits: fitsTokens, apply: poolTokens },
  gemm: { fits: fitsFeatures, apply: gemm },
  linear: { fits: (x) => fitsFeatures(x) || fitsTokens(x), apply: (b, x) => linear(b, x, b.rng.pick([8, 16, 24])) },
  siblings: { fits: anyFloat, apply: siblings },
  split: { fits: anyFloat, apply: splitActivation },
  "split-weights": { fits: (x) => fitsImage(x) || fitsTokens(x) || fitsFeatures(x), apply: splitWeights },
  topk: { fits: anyFloat, apply: topK },
  "topk-constant": { fits: anyFloat, apply: topKConstant },
  "dropout-mask": { fits: anyFloat, apply: dropoutMask },
  "layer-norm-stats": { fits: anyFloat, apply: layerNormStats },
  where: { fits: anyFloat, apply: whereGate },
} satisfies Record<string, Motif>
export type MotifName = keyof typeof MOTIFS
export const MOTIF_NAMES = Object.keys(MOTIFS) as MotifName[]

/** How often each motif is drawn (relative), so convolutional and attention blocks dominate as in real models. */
const WEIGHT: { readonly [K in MotifName]: number } = {
  "conv-bn-act": 5, residual: 3, "squeeze-excite": 1, pool: 3, broadcast: 2, head: 1, "to-tokens": 1, attention: 4, mlp: 3,
  "layer-norm": 2, "pool-tokens": 1, gemm: 4, linear: 2, siblings: 4, split: 2, "split-weights": 2, topk: 1, "topk-constant": 1,
  "dropout-mask": 1, "layer-norm-stats": 1, where: 1,
}

export type Stem = "image" | "tokens" | "ids" | "features"

export interface ModelGenOptions {
  /** Motifs the generator may use (default: all). */
  readonly motifs?: readonly MotifName[]
  /** Stems it may start from (default: all, images most often). */
  readonly stems?: readonly Stem[]
  /** Add the float16 / int8 / int64 islands and Cast siblings on the input as extra outputs (default true). */
  readonly islands?: boolean
  /** Channel counts of images and convs (default MODEL_CHANNELS: 3 to 32, several blocks of 4, 8 and 16 lanes). */
  readonly channels?: readonly number[]
  /** The image stem's height and width range (default [5, 12]). */
  readonly imageSize?: readonly [number, number]
  readonly opset?: number
}

const stemOf = (b: GraphBuilder, stem: Stem, [lo, hi]: readonly [number, number]): Val => {
  const { rng } = b
  const N = rng.int(1, 2)
  switch (stem) {
    case "image": {
      const shape = [N, rng.pick([3, ...b.channels]), rng.int(lo, hi), rng.int(lo, hi)]
      return b.input("x", randomTensor(rng, shape))
    }
    case "tokens":
      return b.input("x", randomTensor(rng, [N, rng.int(2, 8), rng.pick([8, 16, 24, 32])]))
    case "ids":
      return embed(b, N, rng.int(2, 8), rng.pick([8, 16, 24, 32]))
    default:
      return b.input("x", randomTensor(rng, [rng.int(1, 4), rng.pick([8, 16, 24, 32, 48])]))
  }
}

/** Builds one model-like graph of `budget` motifs from `seed`. */
export const buildModelGraph = (seed: number, budget: number, options: ModelGenOptions = {}): GraphCase => {
  const rng = prng(seed)
  const opset = options.opset ?? 18
  const b = graphBuilder(rng, opset, options.channels ?? MODEL_CHANNELS)
  const stems = options.stems ?? ["image", "image", "image", "tokens", "ids", "features"]
  const stemKind = rng.pick(stems)
  const stem = stemOf(b, stemKind, options.imageSize ?? [5, 12])
  const allowed = (options.motifs ?? MOTIF_NAMES).filter((m) => m in MOTIFS)
  const side: Val[] = []
  let x = stem
  for (let i = 0; i < budget; i++) {
    const fit = allowed.filter((m) => MOTIFS[m].fits(x))
    if (!fit.length) break
    let r = rng.next() * fit.reduce((s, m) => s + WEIGHT[m], 0)
    const m = fit.find((k) => (r -= WEIGHT[k]) < 0) ?? fit[fit.length - 1]
    const y = MOTIFS[m].apply(b, x)
    // an activation on the way may be an output too (a feature map a detector reads)
    if (y !== x && rng.next() < 0.1 && x !== stem) side.push(x)
    x = y
  }
  // the islands read the float input itself (not the embedded ids: a computed value)
  const input = stemKind === "ids" ? undefined : stem
  if ((options.islands ?? true) && input && rng.next() < 0.3) side.push(rng.next() < 0.7 ? lowPrecision(b, input) : castSiblings(b, input))
  if (x === stem) x = b.op1("Relu", [x])
  return b.finish(`model_${seed}_${budget}`, [x, ...side], opset)
}

/** fast-check arbitrary of model-like graph cases (1 to `maxMotifs` motifs, default 6). */
export const arbModelGraphCase = (options: ModelGenOptions & { readonly maxMotifs?: number } = {}): fc.Arbitrary<GraphCase> =>
  fc
    .tuple(fc.integer({ min: 0, max: 0x7fffffff }), fc.integer({ min: 1, max: options.maxMotifs ?? 6 }))
    .map(([seed, budget]) => buildModelGraph(seed, budget, options))
