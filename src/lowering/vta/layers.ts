// A partitioned graph's VTA layers (rewrite/vta-partition.ts) as VTA programs: each conv through
// conv2d.ts (its default schedule for the configuration, with the bias and clip epilogue), each
// residual add through add.ts (1 to 4 virtual threads too); the weights packed OIHW16o16i and the biases as accumulator rows at
// compile time, in the program's DRAM image. The activations' regions are filled at run time.
import type { VtaDerived } from "../../ast/vta/config.js"
import type { DramLayout } from "../../ast/vta/dram-image.js"
import type { VtaInsn } from "../../ast/vta/isa.js"
import type { VtaLayer } from "../../rewrite/vta-partition.js"
import { lowerAdd } from "./add.js"
import { defaultConv2dSchedule, lowerConv2d, VtaScheduleError, withTensors, type VtaConv2d, type VtaConv2dSchedule } from "./conv2d.js"
import { blocksOf, packBias, packWeights } from "./pack.js"

export interface VtaLayerProgram {
  readonly layer: VtaLayer
  /** Virtual threads, 1 to 4. */
  readonly vthreads: number
  readonly insns: readonly VtaInsn[]
  readonly layout: DramLayout
  /** The DRAM image with micro-ops, packed weights and biases in place. */
  readonly dram: Uint8Array
  /** The graph values the program reads, each with the DRAM region it goes to (packed NCHW1n16c). */
  readonly inputs: readonly { readonly value: string; readonly region: string }[]
  /** The result's region ("out"), its channels and spatial size (packed). */
  readonly output: { readonly value: string; readonly region: string; readonly c: number; readonly h: number; readonly w: number }
  /** The schedule, in words (for inspect and the manifest). */
  readonly schedule: string
  /** The packed weights (OIHW16o16i) of a conv, for the artifact. */
  readonly packedWeights?: Int8Array
}

/** The conv2d.ts layer of a partitioned conv. */
export const convLayerOf = (d: VtaDerived, l: Extract<VtaLayer, { kind: "conv" }>): VtaConv2d => ({
  ci: blocksOf(l.c, d.blockIn),
  co: blocksOf(l.m, d.blockOut),
  h: l.h,
  w: l.w,
  kh: l.kh,
  kw: l.kw,
  stride: l.stride,
  pad: l.pad,
  shift: l.shift,
  clipLo: l.clipLo,
  ...(l.bias ? { bias: true } : {}),
})

/** The layer's program with `vthreads` virtual threads; a layer no schedule fits is a VtaScheduleError (thrown). */
export const compileVtaLayer = (d: VtaDerived, l: VtaLayer, vthreads: number): VtaLayerProgram => {
  if (l.kind === "add") {
    const p = lowerAdd(d, { entries: blocksOf(l.c, d.blockIn) * l.h * l.w, clipLo: l.clipLo, vthreads })
    return {
      layer: l, vthreads, insns: p.insns, layout: p.layout, dram: p.dram,
      inputs: [{ value: l.inputs[0], region: "a" }, { value: l.inputs[1], region: "b" }],
      output: { value: l.output, region: "out", c: l.c, h: l.h, w: l.w },
      schedule: `${p.chunks} chunks of ${p.chunk} entries, ${vthreads > 1 ? `${vthreads} virtual threads` : "serial"}`,
    }
  }
  return compileVtaConv(d, l, defaultConv2dSchedule(d, convLayerOf(d, l), vthreads))
}

/** A conv layer's program under a given schedule (a tuned one: `tessera tune --target vta`); one that does not fit is a VtaScheduleError (thrown). */
export const compileVtaConv = (d: VtaDerived, l: Extract<VtaLayer, { kind: "conv" }>, s: VtaConv2dSchedule): VtaLayerProgram => {
  const x = convLayerOf(d, l)
  const p = lowerConv2d(d, x, s)
  const vthreads = s.vthreads
  const weights = packWeights(d.blockOut, d.blockIn, l.m, l.c, l.kh, l.kw, l.weights.data as ArrayLike<number>)
  const bias = l.bias ? packBias(d.blockOut, l.m, l.bias) : undefined
  const dram = withTensors(p, new Int8Array(0), weights, bias)
  return {
    layer: l, vthreads, insns: p.insns, layout: p.layout, dram,
    inputs: [{ value: l.input, region: "data" }],
    output: { value: l.output, region: "out", c: l.m, h: l.oh, w: l.ow },
    schedule: `tiles ${s.tileOh} rows x ${s.tileCo} channel blocks${s.tileCi !== undefined && s.tileCi !== x.ci ? ` x ${s.tileCi} input blocks a step` : ""}${s.order === "oh-co" ? ", rows outer" : ""}, ${s.vthreads} virtual thread${s.vthreads > 1 ? "s" : ""}`,
    packedWeights: weights,
  }
}

/** The partition's `fits` check: a schedule with one virtual thread must fit (more are tried when compiling). */
export const vtaFits = (d: VtaDerived) => (l: VtaLayer): string | undefined => {
  try {
    compileVtaLayer(d, l, 1)
    return undefined
  } catch (e) {
    if (e instanceof VtaScheduleError) return e.reason
    throw e
  }
}

/** The virtual threads compileVtaLayerBest tries: conv2d.ts's 1 to 4. */
export const VTA_LAYER_VTHREADS = [1, 2, 3, 4] as const

/**
 * The layer's program with 1 to 4 virtual threads (a conv with conv2d.ts's default schedule for
 * that many, an add with add.ts's largest chunks for that many slots), whichever `cycles` (the simulator's deterministic count) says is fastest, the fewer threads
 * on a tie; the ones no schedule fits are skipped, one must fit. (More threads split every buffer
 * into more slots: smaller tiles, and a deep layer's weights may no longer stay resident, so more
 * can lose.)
 */
export const compileVtaLayerBest = (d: VtaDerived, l: VtaLayer, cycles: (p: VtaLayerProgram) => number): VtaLayerProgram => {
  const one = compileVtaLayer(d, l, 1)
  let best = { p: one, cycles: cycles(one) }
  for (const v of VTA_LAYER_VTHREADS.slice(1)) {
    let p: VtaLayerProgram
    try {
      p = compileVtaLayer(d, l, v)
    } catch (e) {
      if (!(e instanceof VtaScheduleError)) throw e
      continue
    }
    const n = cycles(p)
    if (n < best.cycles) best = { p, cycles: n }
  }
  return best.p
}
