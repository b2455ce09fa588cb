// What the CPU-like targets (c, wasm, js) share: the graph passes for a vector width (the blocked
// NCHW{c}c layout and Winograd convolution when the target has vectors) and the schedule templates
// at the target's defaults.
import { oneChunkMaxBytes, parallelMinBytes } from "../lowering/tir/serial-small-kernels.js"
import { ISA_FUSED_MULTIPLY_ADD, ISA_VECTOR_REGISTERS, type Target } from "../ast/target.js"
import { defaultSchedule } from "../lowering/templates/template-for.js"
import { accumulatorCap } from "../lowering/templates/common.js"
import type { ScheduleFn } from "../lowering/lower-group.js"
import { alterLayout, defaultPasses, sequential, type GraphPass } from "../rewrite/index.js"
import { winogradConvFor } from "../rewrite/winograd.js"
import { MAX_VECTORIZED } from "../ast/schedule/schedule.js"
import { cpuTirPipeline } from "../lowering/tir/cpu-pipeline.js"
import type { TirPass } from "../lowering/tir/tir-pass.js"
import type { TunedLookup } from "./backend.js"
import type { ScheduleTarget } from "../lowering/templates/template.js"
import { avx2Dot16x4, simd128Dot4x4, vnniDot16x4, vnniDotChannels16x4, vnniDotPx16x4, vnniDotWindows } from "../ast/te/intrinsic.js"

/**
 * The default passes, then (with 2+ lanes) the blocked layout of that many lanes (and constant
 * weights of matrix products in column panels of their register tile's width) and Winograd
 * convolution, its F(4×4) from more input tiles than one register block of the products holds
 * (the conv templates' accumulator cap, from the target's vector registers).
 */
export const cpuGraphPasses = (target: Target<"c" | "js" | "wasm">): GraphPass => {
  const lanes = target.attrs.vectorLanes
  const registerTiles = accumulatorCap(ISA_VECTOR_REGISTERS[target.attrs.isa])
  // (the register file too: a constant weight is packed in panels of the matmul register tile's width;
  // and the 8-bit dot: a 1×1 int8 conv's pixels-in-lanes form where the target's dot has it)
  const { fmaUnits, fmaLatency, vectorRegisters } = scheduleTarget(target)
  const { int8Dot } = scheduleTarget(target)
  const layout = { vectorLanes: lanes, fmaUnits, fmaLatency, vectorRegisters, l2Bytes: target.attrs.l2Bytes, ...(int8Dot ? { int8Dot } : {}), ...(target.attrs.fmaUnitsByLanes ? { fmaUnitsByLanes: target.attrs.fmaUnitsByLanes } : {}) }
  return lanes > 1 ? sequential("rewrite.Target", [defaultPasses, alterLayout(layout), winogradConvFor({ registerTiles })]) : defaultPasses
}

/** Each group's CPU template, at the target's defaults unless tuned. */
export const cpuSchedules = (target: Target<"c" | "js" | "wasm">, tuned?: TunedLookup): ScheduleFn =>
  defaultSchedule(scheduleTarget(target), tuned)

/** What the CPU templates size their tiles from: lanes, cores, FMA pipes × latency, vector registers, the L1's and L2's bytes. */
export const scheduleTarget = (target: Target<"c" | "js" | "wasm">): ScheduleTarget => ({
  vectorLanes: Math.max(target.attrs.vectorLanes, 1),
  cores: target.attrs.cores,
  l1Bytes: target.attrs.l1Bytes,
  l2Bytes: target.attrs.l2Bytes,
  fmaUnits: target.attrs.fmaUnits,
  fmaLatency: target.attrs.fmaLatency,
  vectorRegisters: ISA_VECTOR_REGISTERS[target.attrs.isa],
  ...(int8DotOf(target) ? { int8Dot: int8DotOf(target) } : {}),
  ...(ISA_FUSED_MULTIPLY_ADD[target.attrs.isa] ? {} : { fusedMultiplyAdd: false }),
  ...(target.kind === "c" ? {} : { outerLoopVectorizer: false }),
  // (the c emitter's requantizing stores take AVX-512: -march=native on a host whose record says avx512)
  ...(target.kind === "c" && target.attrs.isa === "avx512" ? { requantizeStores: true } : {}),
})

/**
 * The 8-bit dot the target's emitter renders: c's VNNI where its record has it, else its AVX2 form
 * (vpmaddubsw / vpmaddwd) where the record's ISA has AVX2 (avx2, or avx512 without VNNI), wasm's
 * SIMD128 i16 dot; none (the loops the C compiler or the engine takes) on js, c without AVX2.
 */
const int8DotOf = (target: Target<"c" | "js" | "wasm">): "vnni" | "avx2" | "simd128" | undefined => {
  if (target.kind === "c") return target.attrs.vnni ? "vnni" : target.attrs.isa === "avx2" || target.attrs.isa === "avx512" ? "avx2" : undefined
  return target.kind === "wasm" && target.attrs.isa === "simd128" ? "simd128" : undefined
}

const DOT_INTRINSICS = { vnni: [vnniDot16x4, vnniDotPx16x4, vnniDotChannels16x4, ...vnniDotWindows], avx2: [avx2Dot16x4], simd128: [simd128Dot4x4] } as const

/**
 * The CPU targets' TIR pipeline: vectorized loops up to the vectorize primitive's limit kept (the
 * emitters' vector code); the 8-bit dot the emitter renders (c's VNNI where its record has it,
 * wasm's SIMD128 dot) stays one intrinsic statement.
 */
export const cpuTir = (target: Target<"c" | "js" | "wasm">): TirPass<unknown> => {
  const dot = int8DotOf(target)
  return cpuTirPipeline({
    maxVectorLanes: MAX_VECTORIZED,
    ...(dot ? { keepIntrinsics: new Set(DOT_INTRINSICS[dot].map((d) => d.name)) } : {}),
    // (V8 issues a straight-line region's loads ahead of its arithmetic: serialize-unshared-unrolls.ts)
    ...(target.kind === "wasm" ? { unrollSharedOnly: true } : {}),
    // (a kernel whose data a core's L1 takes per core: its parallel region costs more than it gives)
    parallelMinBytes: parallelMinBytes(target.attrs.cores, target.attrs.l1Bytes),
    // (c: a kernel whose data the cores' L2s hold runs short regions: one chunk a thread, its claims' cache-line transfers fewer)
    ...(target.kind === "c" ? { oneChunkMaxBytes: oneChunkMaxBytes(target.attrs.cores, target.attrs.l2Bytes) } : {}),
    // (c: a param larger than the record's L1 is not cached when a network runs its kernel — the
    // kernels before it read more than the L2; its parallel loops' next slabs prefetched)
    ...(target.kind === "c" ? { prefetch: { minBytes: target.attrs.l1Bytes, maxSlabBytes: target.attrs.l2Bytes } } : {}),
  })
}
