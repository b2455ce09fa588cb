// The conv2d's pass pipeline: the schedule's TIR (schedule.ts), then DMA injection, ALU matching,
// micro-op folding, virtual-thread expansion, emission (flatten.ts), redundant LOADs dropped
// (drop-loads.ts) and dependency tokens — the
// stages kept so that each pass's law can run its input and its output.
import type { VtaDerived } from "../../../ast/vta/config.js"
import { layoutDram, type DramLayout } from "../../../ast/vta/dram-image.js"
import { encodeUops, noDeps, type VtaInsn, type VtaUop } from "../../../ast/vta/isa.js"
import { outSize, type VtaConv2d, type VtaConv2dProgram, type VtaConv2dSchedule } from "../conv2d-layer.js"
import { dropRedundantLoads } from "./drop-loads.js"
import { flattenVFunc } from "./flatten.js"
import { injectDma } from "./inject-dma.js"
import { injectVirtualThreads } from "./inject-vthread.js"
import { insertTokens, type Token } from "./insert-tokens.js"
import type { VFunc } from "./ir.js"
import { foldUops } from "./fold-uops.js"
import { matchAlu } from "./match-alu.js"
import { scheduleConv2dTir } from "./schedule.js"

export interface Conv2dTirStages {
  readonly schedule: VFunc
  readonly dma: VFunc
  readonly alu: VFunc
  readonly folded: VFunc
  readonly vthreads: VFunc
}

/** The passes over VTA's TIR, in order, each named (as in traces and the laws) and kept in its stage. */
export const VTA_TIR_PASSES = [
  // copy loop nests between DRAM and a scope → 2-D LOAD / STORE with pads
  { name: "vta.InjectDma", stage: "dma", run: injectDma },
  // elementwise epilogue statements → in-place ALU ops, one pass each
  { name: "vta.MatchAlu", stage: "alu", run: matchAlu },
  // loop nests around a GEMM / ALU intrinsic → a micro-op kernel and its two loop levels
  { name: "vta.FoldUops", stage: "folded", run: foldUops },
  // vthread loops → the threads' statements interleaved, each its own slot of every buffer
  { name: "vta.InjectVirtualThread", stage: "vthreads", run: injectVirtualThreads },
] as const satisfies readonly { readonly name: string; readonly stage: keyof Conv2dTirStages; readonly run: (f: VFunc) => VFunc }[]

export const conv2dTirStages = (d: VtaDerived, x: VtaConv2d, s: VtaConv2dSchedule): Conv2dTirStages => {
  const schedule = scheduleConv2dTir(d, x, s)
  const stages: Record<string, VFunc> = { schedule }
  let f = schedule
  for (const pass of VTA_TIR_PASSES) stages[pass.stage] = f = pass.run(f)
  return stages as unknown as Conv2dTirStages
}

/** The layer's DRAM image layout for `uops` micro-ops (the regions lowerConv2d's programs have). */
export const conv2dLayout = (d: VtaDerived, x: VtaConv2d, uops: number): DramLayout => {
  const { oh, ow } = outSize(x)
  return layoutDram(d, [
    { name: "uop", kind: "uop", elems: uops },
    { name: "data", kind: "inp", elems: x.ci * x.h * x.w },
    { name: "kernel", kind: "wgt", elems: x.co * x.ci * x.kh * x.kw },
    { name: "out", kind: "out", elems: x.co * oh * ow },
    ...(x.bias ? [{ name: "bias", kind: "acc" as const, elems: x.co }] : []),
  ])
}

export interface Conv2dTirProgram extends VtaConv2dProgram {
  readonly uops: readonly VtaUop[]
  readonly tokens: readonly Token[]
}

/** Emits a VFunc after the passes: flattened (twice: the micro-op count fixes the layout), tokens, FINISH. */
export const emitConv2d = (d: VtaDerived, x: VtaConv2d, f: VFunc, tiles: number): Conv2dTirProgram => {
  const count = flattenVFunc(d, f, conv2dLayout(d, x, d.uopDepth)).uops.length
  const layout = conv2dLayout(d, x, count)
  const flat = flattenVFunc(d, f, layout)
  const { insns, tokens } = insertTokens(d, dropRedundantLoads(d, flat.insns), flat.uops)
  const dram = new Uint8Array(layout.bytes)
  dram.set(encodeUops(d, flat.uops), layout.regions.get("uop")!.byteOffset)
  const all: VtaInsn[] = [...insns, { op: "FINISH", deps: noDeps }]
  return { insns: all, layout, dram, tiles, uops: flat.uops, tokens }
}

/** The layer's VTA program through the pass pipeline (the same knobs and DRAM regions as lowerConv2d). */
export const lowerConv2dTir = (d: VtaDerived, x: VtaConv2d, s: VtaConv2dSchedule): Conv2dTirProgram => {
  const { oh } = outSize(x)
  const tiles = Math.ceil(oh / s.tileOh) * (x.co / s.tileCo)
  return emitConv2d(d, x, conv2dTirStages(d, x, s).vthreads, tiles)
}
