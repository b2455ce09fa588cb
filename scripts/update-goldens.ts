// The golden cases of the c target (fixed programs, fixed hand-written schedules — never tuned
// ones) and the command that regenerates golden/c/<case>.c — and golden/cuda/<case>.cu, the cuda
// target's (cuda-goldens.ts) — printing a diff summary to review.
//
// Regenerate:  UPDATE_GOLDENS=1 npx vitest run test/emit-c.test.ts
// (or bundle this file with esbuild and run it with node: it writes when run as the main module)
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { prng } from "../src/ast/graph/arbitrary.js"
import { resolveNode } from "../src/ast/graph/evaluate.js"
import { node } from "../src/ast/graph/graph.js"
import { fromArray, sizeOf, type Tensor } from "../src/ast/graph/tensor.js"
import * as S from "../src/ast/schedule/schedule.js"
import { add, and, c, call, div, f32, floordiv, floormod, ge, lt, max, mul, select, sub, type Expr } from "../src/ast/te/expr.js"
import { at, compute, maxReduce, placeholder, reduceAxis, sum, type ComputeTensor, type Placeholder } from "../src/ast/te/tensor.js"
import type { PrimFunc } from "../src/ast/tir/tir.js"
import { emitC } from "../src/emit/c/emit.js"
import { lowerSync } from "../src/lowering/lower.js"
import { baseSchedule } from "../src/lowering/lower-group.js"
import { convWinogradNCHWc } from "../src/lowering/op-library-winograd.js"
import { QUANT_INT } from "../src/lowering/op-library-quant-int.js"
import { int8DepthwiseTemplate } from "../src/lowering/templates/int8-depthwise.js"
import { int8DotPxTemplate, int8DotTemplate } from "../src/lowering/templates/int8-dot.js"
import { avx2Dot16x4, simd128Dot4x4, vnniDot16x4, vnniDotPx16x4 } from "../src/ast/te/intrinsic.js"
import { packInt8Conv, widenInt8Weights } from "../src/ast/graph/ops/int8-packed.js"
import { TESSERA_DOMAIN } from "../src/ast/graph/ops/index.js"
import { attr } from "../src/ast/graph/attrs.js"
import { winogradTemplate } from "../src/lowering/templates/winograd.js"
import { cpuTirPipeline } from "../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../src/lowering/tir/tir-pass.js"

export interface GoldenCase {
  readonly name: string
  readonly outputs: readonly ComputeTensor[]
  readonly inputs: ReadonlyMap<string, Tensor>
  readonly schedule: S.Schedule
  /** Intrinsics the c emitter renders itself, kept by the TIR pipeline (absent: none). */
  readonly keep?: ReadonlySet<string>
}

export const inputsFor = (seed: number, ps: readonly Placeholder[]): Map<string, Tensor> => {
  const rng = prng(seed)
  return new Map(ps.map((p) => [p.name, fromArray(p.dtype, p.shape, Array.from({ length: sizeOf(p.shape) }, () => rng.float(-1, 1)))] as const))
}

const inBounds = (idx: readonly Expr[], shape: readonly number[]): Expr => idx.map((e, k) => and(ge(e, c(0)), lt(e, c(shape[k])))).reduce((a, b) => and(a, b))

/** A zero-padded copy of the last two dims of `X` (inlined into its consumer by the schedules). */
export const pad2d = (X: Placeholder, pad: number, trailing = 0): ComputeTensor => {
  const r = X.shape.length - trailing
  const shape = X.shape.map((d, k) => (k === r - 2 || k === r - 1 ? d + 2 * pad : d))
  return compute("pad", shape, (...idx) => {
    const src = idx.map((e, k) => (k === r - 2 || k === r - 1 ? sub(e, c(pad)) : e))
    return select(inBounds([src[r - 2], src[r - 1]], [X.shape[r - 2], X.shape[r - 1]]), at(X, ...src), f32(0))
  })
}

/** conv2d in NCHW[4]c: x blocked by 4 (register tile), the 4 output channels vectorized, parallel over output blocks. */
const conv2dNchwc = (): GoldenCase => {
  const X = placeholder("X", [1, 2, 8, 8, 4])
  const W = placeholder("W", [2, 2, 3, 3, 4, 4])
  const P = pad2d(X, 1, 1)
  const ic = reduceAxis(8, "ic")
  const ry = reduceAxis(3, "ry")
  const rx = reduceAxis(3, "rx")
  const out = compute("conv", [1, 2, 8, 8, 4], (n, oc, y, x, oi) =>
    sum(mul(at(P, n, floordiv(ic.var, c(4)), add(y, ry.var), add(x, rx.var), floormod(ic.var, c(4))), at(W, oc, floordiv(ic.var, c(4)), ry.var, rx.var, floormod(ic.var, c(4)), oi)), [ic, ry, rx]),
  )
  let s = S.computeInline(S.createSchedule([out]), "pad")
  const xs = S.split(s, "conv", "conv.l", { factor: 4 })
  s = S.reorder(xs.schedule, "conv", ["conv.i", "conv.j", "conv.k", xs.outer, "ic", "ry", "rx", xs.inner, "conv.m"])
  s = S.parallel(s, "conv", "conv.j")
  s = S.unroll(s, "conv", xs.inner)
  s = S.vectorize(s, "conv", "conv.m")
  return { name: "conv2d_nchwc", outputs: [out], inputs: inputsFor(1, [X, W]), schedule: s }
}

/** Depthwise 3x3 conv, stride 1, pad 1: parallel over channels, rows split by 5, x vectorized. */
const depthwise = (): GoldenCase => {
  const X = placeholder("X", [1, 8, 10, 10])
  const W = placeholder("W", [8, 1, 3, 3])
  const P = pad2d(X, 1)
  const ry = reduceAxis(3, "ry")
  const rx = reduceAxis(3, "rx")
  const out = compute("dwconv", [1, 8, 10, 10], (n, ch, y, x) => sum(mul(at(P, n, ch, add(y, ry.var), add(x, rx.var)), at(W, ch, c(0), ry.var, rx.var)), [ry, rx]))
  let s = S.computeInline(S.createSchedule([out]), "pad")
  s = S.reorder(s, "dwconv", ["dwconv.i", "dwconv.j", "dwconv.k", "ry", "rx", "dwconv.l"])
  s = S.parallel(s, "dwconv", "dwconv.j")
  s = S.vectorize(s, "dwconv", "dwconv.l")
  return { name: "depthwise_conv2d", outputs: [out], inputs: inputsFor(2, [X, W]), schedule: s }
}

/** Dense C = A·B: 8x16 tiles, the reduction outside the tile, columns vectorized, row blocks parallel. */
const dense = (): GoldenCase => {
  const A = placeholder("A", [64, 32])
  const B = placeholder("B", [32, 48])
  const k = reduceAxis(32, "k")
  const out = compute("dense", [64, 48], (i, j) => sum(mul(at(A, i, k.var), at(B, k.var, j)), [k]))
  const t = S.tile(S.createSchedule([out]), "dense", "dense.i", "dense.j", 8, 16)
  let s = S.reorder(t.schedule, "dense", [t.xo, t.yo, "k", t.xi, t.yi])
  s = S.parallel(s, "dense", t.xo)
  s = S.vectorize(s, "dense", t.yi)
  return { name: "dense", outputs: [out], inputs: inputsFor(3, [A, B]), schedule: s }
}

/** relu(conv2d(X, W) + bias) of a 1x4x6x6 image, 8 3x3 filters, padding 1 (the c and cuda goldens' fused conv). */
export const convAddReluCompute = () => {
  const X = placeholder("X", [1, 4, 6, 6])
  const W = placeholder("W", [8, 4, 3, 3])
  const Bias = placeholder("bias", [8])
  const P = pad2d(X, 1)
  const rc = reduceAxis(4, "rc")
  const ry = reduceAxis(3, "ry")
  const rx = reduceAxis(3, "rx")
  const conv = compute("conv", [1, 8, 6, 6], (n, o, y, x) => sum(mul(at(P, n, rc.var, add(y, ry.var), add(x, rx.var)), at(W, o, rc.var, ry.var, rx.var)), [rc, ry, rx]))
  const out = compute("relu", [1, 8, 6, 6], (n, o, y, x) => max(add(at(conv, n, o, y, x), at(Bias, o)), f32(0)))
  return { X, W, Bias, out }
}

/** relu(conv2d(X, W) + bias): the conv computed per output row inside the fused elementwise stage. */
const convAddRelu = (): GoldenCase => {
  const { X, W, Bias, out } = convAddReluCompute()
  let s = S.computeInline(S.createSchedule([out]), "pad")
  s = S.computeAt(s, "conv", "relu", "relu.k")
  s = S.parallel(s, "relu", "relu.j")
  s = S.vectorize(s, "relu", "relu.l")
  return { name: "conv2d_add_relu", outputs: [out], inputs: inputsFor(4, [X, W, Bias]), schedule: s }
}

/** Softmax over rows: exp at root with its row max computed per row, the row sum per output row; rows parallel, columns split by 16 and vectorized. */
const softmax = (): GoldenCase => {
  const X = placeholder("X", [4, 32])
  const k1 = reduceAxis(32, "k1")
  const mx = compute("rowmax", [4], (i) => maxReduce(at(X, i, k1.var), [k1]))
  const ex = compute("exp", [4, 32], (i, j) => call("exp", sub(at(X, i, j), at(mx, i))))
  const k2 = reduceAxis(32, "k2")
  const sm = compute("rowsum", [4], (i) => sum(at(ex, i, k2.var), [k2]))
  const out = compute("softmax", [4, 32], (i, j) => div(at(ex, i, j), at(sm, i)))
  let s = S.computeAt(S.createSchedule([out]), "rowmax", "exp", "exp.i")
  s = S.computeAt(s, "rowsum", "softmax", "softmax.i")
  for (const st of ["exp", "softmax"]) {
    const js = S.split(s, st, `${st}.j`, { factor: 16 })
    s = S.parallel(js.schedule, st, `${st}.i`)
    s = S.vectorize(s, st, js.inner)
  }
  return { name: "softmax", outputs: [out], inputs: inputsFor(5, [X]), schedule: s }
}

/**
 * Winograd F(4×4, 3×3) conv in the blocked layout (ConvWinogradNCHWc's compute: 16 → 16 channels,
 * 8×8, pad 1, blocks of 8) under the Winograd template at a fixed config (2 tiles × 1 block).
 */
const conv2dWinograd = (): GoldenCase => {
  const X = placeholder("X", [1, 2, 8, 8, 8])
  const U = placeholder("U", [6, 6, 2, 16, 8])
  const made = convWinogradNCHWc({
    node: node("ConvWinogradNCHWc", ["X", "U"], ["conv2d_winograd"]),
    name: (suffix) => (suffix ? `wino_${suffix}` : "conv2d_winograd"),
    inputs: [X, U],
    outputs: [{ dtype: "float32", shape: [1, 2, 8, 8, 8] }],
    attrs: { in_block: 8, out_block: 8, pads: [1, 1, 1, 1] },
    constants: [undefined, undefined],
    opset: 13,
  })
  const outputs = [made[made.length - 1]]
  const schedule = winogradTemplate.apply(outputs, baseSchedule(outputs), { tile_p: 2, tile_oc: 1 })
  return { name: "conv2d_winograd", outputs, inputs: inputsFor(6, [X, U]), schedule }
}

export const GOLDEN_CASES: readonly (() => GoldenCase)[] = [conv2dNchwc, depthwise, dense, convAddRelu, softmax, conv2dWinograd]

/**
 * QLinearConv (u8 × s8, per-channel scales, 8 → 16 channels, 3×3, pad 1, 6×6) in the VNNI layout
 * under the int8 template at a fixed config (3 pixels × 1 block, unrolled), its dot kept as the
 * target's instruction: the VNNI dot (the c target's own) or SIMD128's 4-lane i16 dot (the wasm
 * target's). No js golden: js has neither.
 */
const conv2dInt8 = (dot: "vnni" | "avx2" | "simd128"): GoldenCase => {
  const name = `conv2d_int8_${dot}`
  const rng = prng(8)
  const ints = (name: string, dtype: "uint8" | "int8" | "int32", shape: number[], lo: number, hi: number): [string, Tensor] => [
    name,
    fromArray(dtype, shape, Array.from({ length: sizeOf(shape) }, () => rng.int(lo, hi))),
  ]
  const feeds: [string, Tensor][] = [
    ints("x", "uint8", [1, 8, 6, 6], 0, 255),
    ["x_scale", fromArray("float32", [], [0.021])],
    ["x_zp", fromArray("uint8", [], [119])],
    ints("w", "int8", [16, 8, 3, 3], -128, 127),
    ["w_scale", fromArray("float32", [16], Array.from({ length: 16 }, (_, k) => 0.003 + k / 4000))],
    ["w_zp", fromArray("int8", [16], new Array(16).fill(0))],
    ["y_scale", fromArray("float32", [], [0.17])],
    ["y_zp", fromArray("uint8", [], [9])],
    ints("bias", "int32", [16], -2000, 2000),
  ]
  const n = node("QLinearConv", feeds.map(([k]) => k), [name], { pads: attr.ints([1, 1, 1, 1]) })
  const made = QUANT_INT.QLinearConv({
    node: n,
    name: (suffix) => (suffix ? `q_${suffix}` : name),
    inputs: feeds.map(([k, t]) => placeholder(k, t.shape, t.dtype)),
    outputs: [{ dtype: "uint8", shape: [1, 16, 6, 6] }],
    attrs: { pads: [1, 1, 1, 1] },
    constants: feeds.map(([k, t]) => (k === "w_zp" ? (t.data as ArrayLike<number>) : undefined)),
    opset: 13,
  })
  const outputs = [made[made.length - 1]]
  const schedule = int8DotTemplate.apply(outputs, baseSchedule(outputs), { tile_px: 3, tile_blocks: 1, unroll: true, dot })
  return { name, outputs, inputs: new Map(feeds), schedule, keep: new Set([(dot === "vnni" ? vnniDot16x4 : dot === "avx2" ? avx2Dot16x4 : simd128Dot4x4).name]) }
}

const conv2dInt8Vnni = (): GoldenCase => conv2dInt8("vnni")
/** The same conv with the dot's AVX2 form (vpmaddubsw / vpmaddwd on the activation's 7 + 1 bits): what a c target without VNNI renders. */
const conv2dInt8Avx2 = (): GoldenCase => conv2dInt8("avx2")

/**
 * A QLinearConvPacked (int8, 8 → 12 channels, per-channel scales) with the output's pixels in the
 * dot's lanes (pixel_lanes) under its template at a fixed config: a `k`×`k` kernel over x
 * [1, 8, h, w] padded by `pad`, the output [1, 12, oh, ow].
 */
const int8PixelsCase = (name: string, k: number, pad: number, x: readonly [number, number], out: readonly [number, number], tilePv: number): GoldenCase => {
  const rng = prng(10)
  const ints = (name: string, dtype: "int8" | "int32", shape: number[], lo: number, hi: number): [string, Tensor] => [
    name,
    fromArray(dtype, shape, Array.from({ length: sizeOf(shape) }, () => rng.int(lo, hi))),
  ]
  const w = ints("w", "int8", [12, 8, k, k], -128, 127)[1]
  const { packed, colsum } = packInt8Conv(w, 0)
  const feeds: [string, Tensor][] = [
    ints("x", "int8", [1, 8, ...x], -128, 127),
    ["x_scale", fromArray("float32", [], [0.023])],
    ["x_zp", fromArray("int8", [], [-5])],
    ["w_packed", packed],
    ["w_scale", fromArray("float32", [12], Array.from({ length: 12 }, (_, k) => 0.003 + k / 5000))],
    ["colsum", colsum],
    ["y_scale", fromArray("float32", [], [0.13])],
    ["y_zp", fromArray("int8", [], [2])],
    ints("bias", "int32", [12], -2000, 2000),
  ]
  const n = { ...node("QLinearConvPacked", feeds.map(([k]) => k), [name], { kernel_shape: attr.ints([k, k]), ...(pad ? { pads: attr.ints([pad, pad, pad, pad]) } : {}), m: attr.int(12), pixel_lanes: attr.int(1) }), domain: TESSERA_DOMAIN }
  const made = QUANT_INT.QLinearConvPacked({
    node: n,
    name: (suffix) => (suffix ? `q_${suffix}` : name),
    inputs: feeds.map(([k, t]) => placeholder(k, t.shape, t.dtype)),
    outputs: [{ dtype: "int8", shape: [1, 12, ...out] }],
    attrs: { kernel_shape: [k, k], ...(pad ? { pads: [pad, pad, pad, pad] } : {}), m: 12, pixel_lanes: 1 },
    constants: feeds.map(() => undefined),
    opset: 13,
  })
  const outputs = [made[made.length - 1]]
  const schedule = int8DotPxTemplate.apply(outputs, baseSchedule(outputs), { tile_o: 4, tile_pv: tilePv, unroll: true, dot: "vnni" })
  return { name, outputs, inputs: new Map(feeds), schedule, keep: new Set([vnniDotPx16x4.name]) }
}

/** A 1×1 conv, 4×8 = 32 output pixels, at 4 channels × 2 pixel vectors, unrolled: the product computed at the requantization's tile. */
const conv2dInt8Pixels = (): GoldenCase => int8PixelsCase("conv2d_int8_pixels", 1, 0, [4, 8], [4, 8], 2)

/**
 * A 3×3 conv at stride 1, pad 1, 4×16 output pixels, over the padded rows' grid (18 wide: 70
 * pixels, 80 as whole vectors) at 4 channels × 1 pixel vector: the sums at root, compacted a
 * channel tile at a time before the requantization, which runs along the output's pixels.
 */
const conv2dInt8Grid = (): GoldenCase => int8PixelsCase("conv2d_int8_grid", 3, 1, [4, 16], [4, 16], 1)

/** Goldens of the wasm target alone (golden/wasm, test/emit-wasm.test.ts): the SIMD128 8-bit dot it renders itself. */
export const WASM_GOLDEN_CASES: readonly (() => GoldenCase)[] = [() => conv2dInt8("simd128")]

/** Goldens of the c target alone (intrinsics it renders itself). */

/**
 * A depthwise QLinearConv over 16 int8 channels (3×3, per-channel weight zero points and scales, a
 * bias) of an H × H input at a stride, pad 1, its compute the op library's `op` (QLinearConv; or
 * QLinearConvGrouped, its weights widened at compile time, with `attrs` such as channel_lanes)
 * under the int8 depthwise template at a fixed config.
 */
const int8DepthwiseCase = (name: string, op: "QLinearConv" | "QLinearConvGrouped", H: number, stride: number, extra: Record<string, ReturnType<typeof attr.int>>, config: Record<string, string | number | boolean>): GoldenCase => {
  const rng = prng(9)
  const ints = (name: string, dtype: "int8" | "int32", shape: number[], lo: number, hi: number): [string, Tensor] => [
    name,
    fromArray(dtype, shape, Array.from({ length: sizeOf(shape) }, () => rng.int(lo, hi))),
  ]
  const w = ints("w", "int8", [16, 1, 3, 3], -128, 127)
  const wzp = ints("w_zp", "int8", [16], -3, 3)
  const feeds: [string, Tensor][] = [
    ints("x", "int8", [1, 16, H, H], -128, 127),
    ["x_scale", fromArray("float32", [], [0.019])],
    ["x_zp", fromArray("int8", [], [-7])],
    w,
    ["w_scale", fromArray("float32", [16], Array.from({ length: 16 }, (_, k) => 0.004 + k / 3000))],
    wzp,
    ["y_scale", fromArray("float32", [], [0.11])],
    ["y_zp", fromArray("int8", [], [4])],
    ints("bias", "int32", [16], -900, 900),
    ...(op === "QLinearConvGrouped" ? [["", fromArray("int32", [], [0])], ["w16", widenInt8Weights(w[1], wzp[1])]] as [string, Tensor][] : []),
  ]
  const OH = Math.floor((H + 2 - 3) / stride) + 1
  const attrs = { group: attr.int(16), kernel_shape: attr.ints([3, 3]), strides: attr.ints([stride, stride]), pads: attr.ints([1, 1, 1, 1]), ...extra }
  const n = node(op, feeds.map(([k]) => k), [name], attrs, name, op === "QLinearConv" ? "" : TESSERA_DOMAIN)
  const made = QUANT_INT[op]({
    node: n,
    name: (suffix) => (suffix ? `dw_${suffix}` : name),
    inputs: feeds.map(([k, t]) => (k === "" ? undefined : placeholder(k, t.shape, t.dtype))),
    outputs: [{ dtype: "int8", shape: [1, 16, OH, OH] }],
    // (the attributes resolved as the lowering sees them: auto_pad NOTSET, so the pads count — the
    // int16 case's golden before 2026-11-27 passed them raw and had none)
    attrs: resolveNode(n).attrs as Record<string, unknown>,
    constants: feeds.map(([k, t]) => (k === "w_zp" ? (t.data as ArrayLike<number>) : undefined)),
    opset: 13,
  })
  const outputs = [made[made.length - 1]]
  const schedule = int8DepthwiseTemplate.apply(outputs, baseSchedule(outputs), config)
  return { name, outputs, inputs: new Map(feeds.filter(([k]) => k !== "")), schedule }
}

/** The int16 form: 9×9 → 5×5 at stride 2 (the channel's 25 pixels as one tile, the taps unrolled, the sums at the requantizing epilogue's tile). */
const conv2dInt8Depthwise = (): GoldenCase => int8DepthwiseCase("conv2d_int8_depthwise", "QLinearConv", 9, 2, {}, { tile_px: 25, unroll_kh: true, unroll_kw: true, plane: "root" })

/**
 * The channels-in-lanes form (channel_lanes 16: a 7×7 output, rows under half a vector): a block of
 * 16 channels at a time — its plane and weights, its sums (the channels the vector loop, the taps
 * unrolled inside), its requantized int32 values, then the narrowing a channel's row at a time.
 */
const conv2dInt8DepthwiseLanes = (): GoldenCase =>
  int8DepthwiseCase("conv2d_int8_depthwise_lanes", "QLinearConvGrouped", 7, 1, { channel_lanes: attr.int(16) }, { tile_px: 16, unroll_kh: true, unroll_kw: true, taps: "inside", epilogue: "int32" })

/** Goldens of the c target alone (intrinsics it renders itself; the int8 depthwise form, whose js / wasm goldens would only repeat its loops). */
export const C_GOLDEN_CASES: readonly (() => GoldenCase)[] = [conv2dInt8Vnni, conv2dInt8Avx2, conv2dInt8Pixels, conv2dInt8Grid, conv2dInt8Depthwise, conv2dInt8DepthwiseLanes]

/** The case lowered with the default CPU passes (keeping the intrinsics the case keeps), its function named after the case. */
export const goldenFunc = (g: GoldenCase): PrimFunc => ({ ...runTirSync(cpuTirPipeline(g.keep ? { keepIntrinsics: g.keep } : {}), lowerSync(g.schedule)), name: g.name })

/** A case's golden: the unit of its kernel, as an artifact ships it (the prelude is a golden of its own). */
export const goldenUnit = (g: GoldenCase): string => {
  const [, unit] = emitC([goldenFunc(g)], { libName: g.name }).units
  return unit.source
}

/** Every golden file's expected text, by file name: each case's unit, and the prelude header and runtime unit they share. */
export const renderGoldens = (): Map<string, string> => {
  const shared = emitC([])
  return new Map([
    ...[...GOLDEN_CASES, ...C_GOLDEN_CASES].map((mk) => mk()).map((g) => [`${g.name}.c`, goldenUnit(g)] as const),
    [shared.prelude.file, shared.prelude.source],
    ...shared.units.map((u) => [u.file, u.source] as const),
  ])
}

/** golden/c of the repository (run from its root, as vitest and npm scripts do). */
export const GOLDEN_DIR = path.resolve("golden", "c")

/** golden/cuda of the repository. */
export const CUDA_GOLDEN_DIR = path.resolve("golden", "cuda")

/** Writes the goldens `want` into `dir`; returns (and prints) one summary line per file (files ending in `exts` that no case writes: stale). */
const writeGoldens = (dir: string, want: ReadonlyMap<string, string>, exts: readonly string[], log: (line: string) => void): string[] => {
  mkdirSync(dir, { recursive: true })
  const lines: string[] = []
  for (const [name, text] of want) {
    const file = path.join(dir, name)
    const old = existsSync(file) ? readFileSync(file, "utf8") : undefined
    if (old === text) {
      lines.push(`unchanged ${name}`)
      continue
    }
    writeFileSync(file, text)
    if (old === undefined) lines.push(`added     ${name} (${text.split("\n").length} lines)`)
    else {
      const a = new Set(old.split("\n"))
      const b = new Set(text.split("\n"))
      const plus = [...b].filter((l) => !a.has(l)).length
      const minus = [...a].filter((l) => !b.has(l)).length
      lines.push(`changed   ${name} (+${plus} -${minus} lines)`)
    }
  }
  for (const f of readdirSync(dir)) if (exts.some((e) => f.endsWith(e)) && !want.has(f)) lines.push(`stale     ${f} (no case generates it: delete it)`)
  lines.forEach((l) => log(l))
  return lines
}

/** Writes the c goldens into `dir`; returns (and prints) one summary line per file. */
export const updateGoldens = (dir: string = GOLDEN_DIR, log: (line: string) => void = console.log): string[] => writeGoldens(dir, renderGoldens(), [".c", ".h"], log)

/** Writes the cuda goldens (cuda-goldens.ts) into `dir`. */
export const updateCudaGoldens = async (dir: string = CUDA_GOLDEN_DIR, log: (line: string) => void = console.log): Promise<string[]> => {
  const { renderCudaGoldens } = await import("./cuda-goldens.js")
  return writeGoldens(dir, renderCudaGoldens(), [".cu", ".cuh"], log)
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  updateGoldens()
  await updateCudaGoldens()
}
