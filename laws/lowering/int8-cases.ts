// The int8 products' cases for the laws of the int8 template (int8-dot.law.ts) and of the wasm
// target's 8-bit dot (laws/emit/wasm-int8-dot.law.ts): an op of the blocked form (its compute from
// the op library) on random shapes, zero points, signedness, strides and padding, with random inputs.
import * as fc from "fast-check"
import { attr, type AttrValue } from "../../src/ast/graph/attrs.js"
import { resolveNode } from "../../src/ast/graph/evaluate.js"
import { packInt8Conv, packInt8ConvTaps } from "../../src/ast/graph/ops/int8-packed.js"
import { TESSERA_DOMAIN } from "../../src/ast/graph/ops/index.js"
import { node } from "../../src/ast/graph/graph.js"
import { fromArray, type Tensor } from "../../src/ast/graph/tensor.js"
import type { DType } from "../../src/ast/graph/dtype.js"
import { placeholder, type ComputeTensor } from "../../src/ast/te/tensor.js"
import { OP_COMPUTES } from "../../src/lowering/op-library.js"
import type { OpCompute } from "../../src/lowering/op-library-common.js"

export interface Spec {
  /** (QLinearConvPackedPx: QLinearConvPacked with pixel_lanes, its kernel 1×1; QLinearConvPackedGrid: with pixel_lanes, its kernel K×K; QLinearConvPackedTaps: the grid with the dot's 4 bytes along the kernel's width, dot_kw) */
  /** (QLinearConvPackedLanes: QLinearConvPacked with channel_lanes 16, its requantized values in blocks of 16 channels) */
  readonly op: "QLinearConv" | "QLinearConvPacked" | "QLinearConvPackedLanes" | "QLinearConvPackedPx" | "QLinearConvPackedGrid" | "QLinearConvPackedTaps" | "ConvInteger" | "QLinearMatMul" | "MatMulInteger"
  readonly x: DType
  readonly w: DType
  readonly dims: readonly number[]
  readonly seed: number
  /** a conv's dilation (1 where absent) */
  readonly dilation?: number
}

/** A seeded integer stream (an LCG): the int8 laws' inputs. */
export const stream = (seed: number) => {
  let s = (seed >>> 0) || 1
  return (lo: number, hi: number) => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0
    return lo + ((s >>> 8) % (hi - lo + 1))
  }
}
/** The values of an 8-bit type. */
export const range = (d: DType): [number, number] => (d === "int8" ? [-128, 127] : [0, 255])

/** The op's TE (its compute from the op library) and random inputs: weight zero points the blocked form takes. */
export const build = (spec: Spec, table: Partial<Record<string, OpCompute>> = OP_COMPUTES): { outputs: ComputeTensor[]; feeds: Map<string, Tensor> } => {
  const taps = spec.op === "QLinearConvPackedTaps"
  const px = spec.op === "QLinearConvPackedPx" || spec.op === "QLinearConvPackedGrid" || taps
  const lanes = spec.op === "QLinearConvPackedLanes"
  const sp: Spec = px ? { ...spec, op: "QLinearConvPacked", dims: spec.op === "QLinearConvPackedPx" ? spec.dims.map((d, k) => (k === 4 ? 1 : d)) : spec.dims } : lanes ? { ...spec, op: "QLinearConvPacked" } : spec
  const r = stream(sp.seed)
  const conv = sp.op.includes("Conv")
  const [C, M, H, W, K, stride, pad, rows] = sp.dims
  const xShape = conv ? [1, C, H, W] : [rows, C]
  const wShape = conv ? [M, C, K, K] : [C, M]
  const wzp = sp.w === "uint8" ? 128 : 0
  const t = (name: string, dtype: DType, shape: number[], lo: number, hi: number): [string, Tensor] => [
    name,
    fromArray(dtype, shape, Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => r(lo, hi))),
  ]
  const f = (name: string, v: number): [string, Tensor] => [name, fromArray("float32", [], [Math.fround(v)])]
  const vals: [string, Tensor][] = [t("x", sp.x, xShape, ...range(sp.x)), t("w", sp.w, wShape, ...range(sp.w)), t("xzp", sp.x, [], range(sp.x)[0] + 5, range(sp.x)[1] - 5), ["wzp", fromArray(sp.w, [], [wzp])]]
  const q = sp.op.startsWith("QLinear")
  const order = q
    ? [vals[0], f("xs", 0.013 + r(0, 9) / 1000), vals[2], vals[1], ["ws", fromArray("float32", [M], Array.from({ length: M }, () => Math.fround(0.002 + r(0, 99) / 10000)))] as [string, Tensor], vals[3], f("ys", 0.05 + r(0, 20) / 100), t("yzp", sp.x, [], range(sp.x)[0] + 20, range(sp.x)[1] - 20), ...(conv ? [t("b", "int32", [M], -3000, 3000)] : [])]
    : vals
  // (QLinearConvPacked: the weights packed at compile time, their column sums in w_zero_point's place)
  if (sp.op === "QLinearConvPacked") {
    const { packed, colsum } = (taps ? packInt8ConvTaps : packInt8Conv)(vals[1][1], wzp)
    order[3] = ["wp", packed]
    order[5] = ["cs", colsum]
  }
  const dil = sp.dilation ?? 1
  const reach = dil * (K - 1) + 1
  const outDims = conv ? [1, M, Math.floor((H + 2 * pad - reach) / stride) + 1, Math.floor((W + 2 * pad - reach) / stride) + 1] : [rows, M]
  const outType: DType = q ? sp.x : "int32"
  const attrs: Record<string, AttrValue> = conv ? { kernel_shape: attr.ints([K, K]), strides: attr.ints([stride, stride]), pads: attr.ints([pad, pad, pad, pad]), ...(dil !== 1 ? { dilations: attr.ints([dil, dil]) } : {}), ...(sp.op === "QLinearConvPacked" ? { m: attr.int(M) } : {}), ...(px ? { pixel_lanes: attr.int(1) } : {}), ...(taps ? { dot_kw: attr.int(K) } : {}), ...(lanes ? { channel_lanes: attr.int(16) } : {}) } : {}
  const n = { ...node(sp.op, order.map(([name]) => name), ["y"], attrs), domain: sp.op === "QLinearConvPacked" ? TESSERA_DOMAIN : "" }
  const inputs = order.map(([name, v]) => placeholder(name, v.shape, v.dtype))
  const made = (table[sp.op] ?? OP_COMPUTES[sp.op])({
    node: n,
    attrs: resolveNode(n).attrs as Record<string, unknown>,
    inputs,
    outputs: [{ dtype: outType, shape: outDims }],
    name: (suffix) => (suffix ? `y_${suffix}` : "y"),
    constants: order.map(([name, v]) => (name === "wzp" ? (v.data as ArrayLike<number>) : undefined)),
    opset: 19,
  })
  return { outputs: [made[made.length - 1]], feeds: new Map(order) }
}

export const arbSpec: fc.Arbitrary<Spec> = fc.record({
  op: fc.constantFrom("QLinearConv" as const, "QLinearConvPacked" as const, "ConvInteger" as const, "QLinearMatMul" as const, "MatMulInteger" as const),
  x: fc.constantFrom<DType>("int8", "uint8"),
  w: fc.constantFrom<DType>("int8", "uint8"),
  // C, M, H, W, K, stride, pad, rows
  // (M whole blocks of 16 often: a conv's epilogue then runs in the product's lane order)
  dims: fc.tuple(fc.integer({ min: 1, max: 9 }), fc.oneof(fc.integer({ min: 1, max: 35 }), fc.constantFrom(16, 32)), fc.integer({ min: 3, max: 7 }), fc.integer({ min: 3, max: 9 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 2 }), fc.integer({ min: 0, max: 1 }), fc.integer({ min: 1, max: 6 })),
  seed: fc.nat(),
})

/** Convs with the channels in the dot's lanes and their requantized values in blocks of 16 (QLinearConvPacked's channel_lanes): M whole blocks, kernels 1–3, strided, padded. */
export const arbLanesSpec: fc.Arbitrary<Spec> = fc
  .tuple(arbSpec, fc.constantFrom(16, 32))
  .map(([sp, M]) => ({ ...sp, op: "QLinearConvPackedLanes" as const, dims: sp.dims.map((d, k) => (k === 1 ? M : d)) }))

/** 1×1 convs in the pixels-in-lanes form (QLinearConvPacked's pixel_lanes): output pixels whole vectors of 16, strided, padded. */
export const arbPxSpec: fc.Arbitrary<Spec> = fc
  .record({
    x: fc.constantFrom<DType>("int8", "uint8"),
    w: fc.constantFrom<DType>("int8", "uint8"),
    C: fc.integer({ min: 1, max: 13 }),
    M: fc.integer({ min: 1, max: 40 }),
    // the output's rows × columns: 16 · k pixels
    // ([7, 16]: 7 vectors, a tile past a vector loop's widest — the default's where 28²'s 49 vectors are, pxTileDefault)
    out: fc.constantFrom([4, 4], [2, 8], [8, 4], [4, 12], [1, 16], [8, 8], [7, 16]),
    stride: fc.integer({ min: 1, max: 2 }),
    pad: fc.integer({ min: 0, max: 1 }),
    seed: fc.nat(),
  })
  .map(({ x, w, C, M, out: [oh, ow], stride, pad, seed }) => ({
    op: "QLinearConvPackedPx" as const,
    x,
    w,
    // the input whose 1×1 conv at this stride and padding has that output
    dims: [C, M, (oh - 1) * stride + 1 - 2 * pad, (ow - 1) * stride + 1 - 2 * pad, 1, stride, pad, 1],
    seed,
  }))
  .filter((sp) => sp.dims[2] >= 1 && sp.dims[3] >= 1)

/**
 * A K×K conv's dims (C, M, H, W, K, stride, pad, 1): the input whose conv at this stride, dilation
 * and padding has an oh × ow output, and up to stride − 1 rows and columns more (from `extra`), which
 * no window reaches.
 */
const gridDims = (C: number, M: number, K: number, stride: number, dilation: number, oh: number, ow: number, pad: number, extra: number): number[] => {
  const reach = dilation * (K - 1) + 1 - 2 * pad
  return [C, M, (oh - 1) * stride + reach + (extra % stride), (ow - 1) * stride + reach + (Math.floor(extra / 3) % stride), K, stride, pad, 1]
}

/** K×K convs in the pixels-in-lanes form over the padded rows' grid, or their stride phases' (QLinearConvPacked's pixel_lanes): kernels 1–3 (1×1 over pixels that are not whole vectors: the grid of the output's rows, one phase), strides 1–3, dilations 1–2, padded or not, outputs from 1 to 20 columns, inputs up to a stride − 1 past the last window. */
export const arbGridSpec: fc.Arbitrary<Spec> = fc
  .record({
    x: fc.constantFrom<DType>("int8", "uint8"),
    w: fc.constantFrom<DType>("int8", "uint8"),
    C: fc.integer({ min: 1, max: 9 }),
    M: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.constant(16)),
    K: fc.integer({ min: 1, max: 3 }),
    stride: fc.oneof(fc.constant(1), fc.integer({ min: 2, max: 3 })),
    dilation: fc.integer({ min: 1, max: 2 }),
    oh: fc.integer({ min: 1, max: 5 }),
    ow: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.constant(16)),
    pad: fc.integer({ min: 0, max: 1 }),
    extra: fc.nat(),
    seed: fc.nat(),
  })
  .map(({ x, w, C, M, K, stride, dilation, oh, ow, pad, extra, seed }) => ({
    op: "QLinearConvPackedGrid" as const,
    x,
    w,
    dims: gridDims(C, M, K, stride, dilation, oh, ow, pad, extra),
    dilation,
    seed,
  }))
  .filter((sp) => sp.dims[2] >= 1 && sp.dims[3] >= 1)

/** K×K convs in the pixels-in-lanes form with the dot's 4 bytes along the kernel's width (QLinearConvPacked's dot_kw): few channels, kernels 2–7 (one or two groups of 4 taps, the last cut short), strides 1, 2 and 4 and dilations 1–2 where the stride divides 4 · dilation, padded or not. */
export const arbTapsSpec: fc.Arbitrary<Spec> = fc
  .record({
    x: fc.constantFrom<DType>("int8", "uint8"),
    w: fc.constantFrom<DType>("int8", "uint8"),
    C: fc.integer({ min: 1, max: 4 }),
    M: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.constant(16)),
    K: fc.integer({ min: 2, max: 7 }),
    stride: fc.constantFrom(1, 2, 4),
    dilation: fc.integer({ min: 1, max: 2 }),
    oh: fc.integer({ min: 1, max: 4 }),
    ow: fc.oneof(fc.integer({ min: 1, max: 18 }), fc.constant(16)),
    pad: fc.integer({ min: 0, max: 3 }),
    extra: fc.nat(),
    seed: fc.nat(),
  })
  .filter(({ stride, dilation }) => (4 * dilation) % stride === 0)
  .map(({ x, w, C, M, K, stride, dilation, oh, ow, pad, extra, seed }) => ({
    op: "QLinearConvPackedTaps" as const,
    x,
    w,
    dims: gridDims(C, M, K, stride, dilation, oh, ow, pad, extra),
    dilation,
    seed,
  }))
  .filter((sp) => sp.dims[2] >= 1 && sp.dims[3] >= 1)
