// The golden cases of the cuda target: fixed programs under fixed, hand-written GPU schedules
// (never the rule set's or a tuned one, so a change of the rules leaves them), each rendered as its
// launches and `__global__` functions: golden/cuda/<case>.cu, and the prelude they share,
// golden/cuda/tessera_cuda_prelude.cuh. Regenerated with the c target's (update-goldens.ts).
//   conv2d            NCHW 3x3, pad 1: output pixels over blocks and threads, the reduction serial per thread
//   depthwise_conv2d  3x3 per channel: blocks per channel, threads over pixels
//   dense             64x32 · 32x48: 8x8 tiles of blocks, A and B fetched into shared memory by the
//                     block's threads at each step of the reduction, barriers around the use
//   softmax           rows: the row max and row sum at root (launches of their own, workspace buffers)
//   conv2d_add_relu   relu(conv + bias): the conv computed at each thread's output pixel (a thread-local array)
//   row_sum_shuffle, dense_float4, conv1x1_fetch_widths: the GPU rules' own schedules (warp shuffles;
//                     float4 fetches; a float4 fetch beside a scalar one in one kernel)
//   conv2d_fp16, dense_fp16: conv2d and dense_float4 with every param a half (`--precision fp16`,
//                     lowering.HalfStorage): the conv's sum in a float32 twin copied out by a launch
//                     of its own, the dense's fetches as 8-byte loads of four halves into float32 tiles
import * as S from "../src/ast/schedule/schedule.js"
import { add, c, call, div, f32, max, mul, sub } from "../src/ast/te/expr.js"
import { at, compute, maxReduce, placeholder, reduceAxis, sum } from "../src/ast/te/tensor.js"
import { cudaAttrs, cudaAttrsForArch } from "../src/ast/target.js"
import { gpuTemplate } from "../src/lowering/templates/gpu/index.js"
import type { PrimFunc } from "../src/ast/tir/tir.js"
import { emitCuda } from "../src/emit/cuda/emit.js"
import { CUDA_PRELUDE } from "../src/emit/cuda/prelude.js"
import { lowerSync } from "../src/lowering/lower.js"
import { cudaTirPipeline } from "../src/lowering/tir/cuda-pipeline.js"
import { runTirSync } from "../src/lowering/tir/tir-pass.js"
import { halfStorage } from "../src/lowering/tir/half-storage.js"
import { convAddReluCompute, inputsFor, pad2d, type GoldenCase } from "./update-goldens.js"
import { sharedTiledMatmul } from "../src/ast/te/arbitrary-schedule.js"
import { crossThreadReduce } from "../src/lowering/templates/gpu/cross-thread-reduction.js"

/** A stage's data axes fused and split by `threads`: outer → blockIdx.x, inner → threadIdx.x. */
const bindFlat = (s0: S.Schedule, stage: string, threads: number): { schedule: S.Schedule; thread: string } => {
  const st = s0.stages.get(stage)!
  const data = st.leaf.filter((a) => st.axes.get(a)!.type === "data")
  let s = s0
  let fused = data[0]
  for (const next of data.slice(1)) ({ schedule: s, fused } = S.fuse(s, stage, fused, next))
  const sp = S.split(s, stage, fused, { factor: threads })
  return { schedule: S.bind(S.bind(sp.schedule, stage, sp.outer, "blockIdx.x"), stage, sp.inner, "threadIdx.x"), thread: sp.inner }
}

const conv2d = (): GoldenCase => {
  const X = placeholder("X", [1, 4, 8, 8])
  const W = placeholder("W", [8, 4, 3, 3])
  const P = pad2d(X, 1)
  const rc = reduceAxis(4, "rc")
  const ry = reduceAxis(3, "ry")
  const rx = reduceAxis(3, "rx")
  const out = compute("conv", [1, 8, 8, 8], (n, o, y, x) => sum(mul(at(P, n, rc.var, add(y, ry.var), add(x, rx.var)), at(W, o, rc.var, ry.var, rx.var)), [rc, ry, rx]))
  const s = S.computeInline(S.createSchedule([out]), "pad")
  return { name: "conv2d", outputs: [out], inputs: inputsFor(11, [X, W]), schedule: bindFlat(s, "conv", 64).schedule }
}

const depthwise = (): GoldenCase => {
  const X = placeholder("X", [1, 8, 10, 10])
  const W = placeholder("W", [8, 1, 3, 3])
  const P = pad2d(X, 1)
  const ry = reduceAxis(3, "ry")
  const rx = reduceAxis(3, "rx")
  const out = compute("dwconv", [1, 8, 10, 10], (n, ch, y, x) => sum(mul(at(P, n, ch, add(y, ry.var), add(x, rx.var)), at(W, ch, c(0), ry.var, rx.var)), [ry, rx]))
  let s = S.computeInline(S.createSchedule([out]), "pad")
  const yx = S.fuse(s, "dwconv", "dwconv.k", "dwconv.l")
  s = S.bind(S.bind(yx.schedule, "dwconv", "dwconv.j", "blockIdx.x"), "dwconv", yx.fused, "threadIdx.x")
  return { name: "depthwise_conv2d", outputs: [out], inputs: inputsFor(12, [X, W]), schedule: s }
}

const dense = (): GoldenCase => {
  const A = placeholder("A", [64, 32])
  const B = placeholder("B", [32, 48])
  const k = reduceAxis(32, "k")
  const out = compute("C", [64, 48], (i, j) => sum(mul(at(A, i, k.var), at(B, k.var, j)), [k]))
  const tile = 8
  const s = sharedTiledMatmul([out], tile, tile)
  return { name: "dense", outputs: [out], inputs: inputsFor(13, [A, B]), schedule: s }
}

const softmax = (): GoldenCase => {
  const X = placeholder("X", [4, 32])
  const k1 = reduceAxis(32, "k1")
  const mx = compute("rowmax", [4], (i) => maxReduce(at(X, i, k1.var), [k1]))
  const ex = compute("exp", [4, 32], (i, j) => call("exp", sub(at(X, i, j), at(mx, i))))
  const k2 = reduceAxis(32, "k2")
  const sm = compute("rowsum", [4], (i) => sum(at(ex, i, k2.var), [k2]))
  const out = compute("softmax", [4, 32], (i, j) => div(at(ex, i, j), at(sm, i)))
  let s = S.computeInline(S.createSchedule([out]), "exp")
  for (const st of ["rowmax", "rowsum", "softmax"]) s = bindFlat(s, st, 32).schedule
  return { name: "softmax", outputs: [out], inputs: inputsFor(14, [X]), schedule: s }
}

const convAddRelu = (): GoldenCase => {
  const { X, W, Bias, out } = convAddReluCompute()
  const s = S.computeInline(S.createSchedule([out]), "pad")
  const b = bindFlat(s, "relu", 96)
  return { name: "conv2d_add_relu", outputs: [out], inputs: inputsFor(15, [X, W, Bias]), schedule: S.computeAt(b.schedule, "conv", "relu", b.thread) }
}

/** A row sum over a long axis by the cross-thread rule: 128 threads (4 warps) a block, 2 rows a block, the partials summed by warp shuffles. */
const rowSumShuffle = (): GoldenCase => {
  const X = placeholder("X", [6, 300])
  const k = reduceAxis(300, "k")
  const out = compute("rowsum", [6], (i) => sum(at(X, i, k.var), [k]))
  return { name: "row_sum_shuffle", outputs: [out], inputs: inputsFor(16, [X]), schedule: crossThreadReduce(S.createSchedule([out]), "rowsum", 128, 2) }
}

/** A dense layer by the generated tiling rule at its defaults on one SM of sm_90: its shared tiles fetched cooperatively as float4 copies (rows of 16 and 64, multiples of 4). */
const denseFloat4 = (): GoldenCase => {
  const A = placeholder("A", [64, 64])
  const B = placeholder("B", [64, 64])
  const k = reduceAxis(64, "k")
  const out = compute("C", [64, 64], (i, j) => sum(mul(at(A, i, k.var), at(B, k.var, j)), [k]))
  const base = S.createSchedule([out])
  const t = gpuTemplate(cudaAttrs("9.0", 1), base)
  const knobs = t.space([out], base)
  return { name: "dense_float4", outputs: [out], inputs: inputsFor(17, [A, B]), schedule: t.apply([out], base, t.defaults(knobs, { vectorLanes: 1, cores: 1 })) }
}

/**
 * A 1x1 convolution by the generated tiling rule at its defaults on one SM of sm_90, its fetch
 * widths per buffer: the input's rows of 8 pixels fetched as float4 copies (proven aligned), the
 * weights' rows of one element as coalesced scalars.
 */
const conv1x1PerBuffer = (): GoldenCase => {
  const X = placeholder("X", [1, 16, 8, 8])
  const W = placeholder("W", [8, 16, 1, 1])
  const rc = reduceAxis(16, "rc")
  const out = compute("conv", [1, 8, 8, 8], (n, o, y, x) => sum(mul(at(X, n, rc.var, y, x), at(W, o, rc.var, c(0), c(0))), [rc]), "float32", "conv2d_nchw")
  const base = S.createSchedule([out])
  const t = gpuTemplate(cudaAttrs("9.0", 1), base)
  const knobs = t.space([out], base)
  return { name: "conv1x1_fetch_widths", outputs: [out], inputs: inputsFor(18, [X, W]), schedule: t.apply([out], base, t.defaults(knobs, { vectorLanes: 1, cores: 1 })) }
}

export const CUDA_GOLDEN_CASES: readonly (() => GoldenCase)[] = [conv2d, depthwise, dense, softmax, convAddRelu, rowSumShuffle, denseFloat4, conv1x1PerBuffer]

/** The GPU the goldens are emitted for: the default (sm_90). */
export const GOLDEN_CUDA_ATTRS = cudaAttrsForArch()

/** A golden case of the cuda target: fp16 ones have every param stored as halves (lowering.HalfStorage). */
export type CudaGoldenCase = GoldenCase & { readonly precision?: "fp16" }

/** conv2d and dense_float4 with halves in memory (`--precision fp16`). */
export const FP16_GOLDEN_CASES: readonly (() => CudaGoldenCase)[] = [
  () => ({ ...conv2d(), name: "conv2d_fp16", precision: "fp16" }),
  () => ({ ...denseFloat4(), name: "dense_fp16", precision: "fp16" }),
]

/** A case lowered with the cuda TIR pipeline, its function named after the case (fp16: its params halves). */
export const cudaGoldenFunc = (g: CudaGoldenCase): PrimFunc => {
  const f: PrimFunc = { ...runTirSync(cudaTirPipeline(GOLDEN_CUDA_ATTRS), lowerSync(g.schedule)), name: g.name }
  return g.precision === "fp16" ? halfStorage(f, new Set(f.params.map((p) => p.name)), GOLDEN_CUDA_ATTRS) : f
}

/** A case's golden: its launches (grid, block, shared bytes) as a comment, then its `__global__` functions. */
export const cudaGoldenText = (g: CudaGoldenCase): string => {
  const e = emitCuda([cudaGoldenFunc(g)], GOLDEN_CUDA_ATTRS)
  const launches = e.kernels.flatMap((k) => [
    ...k.workspace.map((b) => ` * workspace ${b.name}: ${b.dtype}[${b.shape.join("x")}]`),
    ...k.launches.map((l) => ` * ${l.symbol}<<<(${l.grid.join(", ")}), (${l.block.join(", ")})>>>, ${l.sharedBytes} bytes shared`),
  ])
  return [`/* Generated by Tessera (cuda target), golden case ${g.name}. Do not edit.`, ...launches, " */", "", ...e.functions.map((f) => `${f}\n`)].join("\n")
}

/** Every golden file of golden/cuda by name: each case's, and the prelude. */
export const renderCudaGoldens = (): Map<string, string> =>
  new Map([...[...CUDA_GOLDEN_CASES, ...FP16_GOLDEN_CASES].map((mk) => mk()).map((g) => [`${g.name}.cu`, cudaGoldenText(g)] as const), ["tessera_cuda_prelude.cuh", `${CUDA_PRELUDE}`]])

/** Cases as one translation unit (the prelude, half support where they have halves, their functions): what nvcc builds. */
export const cudaGoldenSource = (gs: readonly CudaGoldenCase[]): string => emitCuda(gs.map(cudaGoldenFunc), GOLDEN_CUDA_ATTRS).source
