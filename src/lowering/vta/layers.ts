// A partitioned graph's VTA layers (rewrite/vta-partition.ts) as VTA programs: each conv through
// conv2d.ts (its default schedule for the configuration, with the bias and clip epilogue), each
// residual add through add.ts; the weights packed OIHW16o16i and the biases as accumulator rows at
// compile time, in the program's DRAM image. The activations' regions are filled at run time.
import type { VtaDerived } from "../../ast/vta/config.js"
import type { DramLayout } from "../../ast/vta/dram-image.js"
import type { VtaInsn } from "../../ast/vta/isa.js"
import type { VtaLayer } from "../../rewrite/vta-partition.js"
import { lowerAdd } from "./add.js"
import { defaultConv2dSchedule, lowerConv2d, VtaScheduleError, withTensors, type VtaConv2d } from "./conv2d.js"
import { blocksOf, packBias, packWeights } from "./pack.js"

export interface VtaLayerProgram {
  readonly layer: VtaLayer
  readonly vthreads: 1 | 2
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
export const compileVtaLayer = (d: VtaDerived, l: VtaLayer, vthreads: 1 | 2): VtaLayerProgram => {
  if (l.kind === "add") {
    const p = lowerAdd(d, { entries: blocksOf(l.c, d.blockIn) * l.h * l.w, clipLo: l.clipLo })
    return {
      layer: l, vthreads: 1, insns: p.insns, layout: p.layout, dram: p.dram,
      inputs: [{ value: l.inputs[0], region: "a" }, { value: l.inputs[1], region: "b" }],
      output: { value: l.output, region: "out", c: l.c, h: l.h, w: l.w },
      schedule: `${p.chunks} chunks, serial`,
    }
  }
  const x = convLayerOf(d, l)
  const s = defaultConv2dSchedule(d, x, vthreads)
  const p = lowerConv2d(d, x, s)
  const weights = packWeights(d.blockOut, d.blockIn, l.m, l.c, l.kh, l.kw, l.weights.data as ArrayLike<number>)
  const bias = l.bias ? packBias(d.blockOut, l.m, l.bias) : undefined
  const dram = withTensors(p, new Int8Array(0), weights, bias)
  return {
    layer: l, vthreads, insns: p.insns, layout: p.layout, dram,
    inputs: [{ value: l.input, region: "data" }],
    output: { value: l.output, region: "out", c: l.m, h: l.oh, w: l.ow },
    schedule: `tiles ${s.tileOh} rows x ${s.tileCo} channel blocks, ${s.vthreads} virtual thread${s.vthreads > 1 ? "s" : ""}`,
    packedWeights: weights,
  }
}

/** The partition's `fits` check: a schedule with one virtual thread must fit (two are tried first when compiling). */
export const vtaFits = (d: VtaDerived) => (l: VtaLayer): string | undefined => {
  try {
    compileVtaLayer(d, l, 1)
    return undefined
  } catch (e) {
    if (e instanceof VtaScheduleError) return e.reason
    throw e
  }
}

/**
 * The layer's program with one or two virtual threads, whichever `cycles` (the simulator's
 * deterministic count) says is faster; one when no schedule for two fits. (Two halve every buffer:
 * with the default tiles, a deep layer's weights then no longer stay resident, and two can lose.)
 */
export const compileVtaLayerBest = (d: VtaDerived, l: VtaLayer, cycles: (p: VtaLayerProgram) => number): VtaLayerProgram => {
  const one = compileVtaLayer(d, l, 1)
  if (l.kind !== "conv") return one
  let two: VtaLayerProgram
  try {
    two = compileVtaLayer(d, l, 2)
  } catch (e) {
    if (!(e instanceof VtaScheduleError)) throw e
    return one
  }
  return cycles(two) < cycles(one) ? two : one
}
