// An int8 conv2d with its requantize epilogue on VTA: the layer and its TE (conv2d-layer.ts), and
// its VTA program under a schedule — by default through the TIR pass pipeline
// (src/lowering/vta/tir/: the schedule's TIR, DMA injection, ALU matching, micro-op folding,
// virtual-thread expansion, emission, dependency tokens; docs/vta.md, "The TIR passes"), or by
// the direct generator (conv2d-generator.ts), which it matches bit for bit and, at the default
// schedules of ResNet-18's layers, in cycles or better.
import type { VtaDerived } from "../../ast/vta/config.js"
import { lowerConv2dGenerator } from "./conv2d-generator.js"
import { checkConv2dSchedule, type VtaConv2d, type VtaConv2dProgram, type VtaConv2dSchedule } from "./conv2d-layer.js"
import { lowerConv2dTir } from "./tir/pipeline.js"

export * from "./conv2d-layer.js"
export { lowerConv2dGenerator } from "./conv2d-generator.js"

/** Which lowering writes the program: the TIR passes (the default) or the direct generator. */
export type VtaConv2dPath = "passes" | "generator"

/** The layer's VTA program under the schedule; a tile that does not fit is a VtaScheduleError. */
export const lowerConv2d = (d: VtaDerived, x: VtaConv2d, s: VtaConv2dSchedule, path: VtaConv2dPath = "passes"): VtaConv2dProgram => {
  if (path === "generator") return lowerConv2dGenerator(d, x, s)
  checkConv2dSchedule(d, x, s)
  return lowerConv2dTir(d, x, s)
}
