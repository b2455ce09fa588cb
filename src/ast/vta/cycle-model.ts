// VTA's cycle model, in ONE place (documented in docs/vta.md): every simulator run that is compared
// with another uses this record unchanged. It is part of the target's description, beside the
// configuration (src/ast/vta/config.ts), so that the lowering can derive a schedule's defaults from
// it (the epilogue's chunk size, src/lowering/vta/conv2d-layer.ts) as the simulator times with it;
// src/device/vta/cycle-model.ts re-exports it.
//
// - Fetch reads the instruction stream over the bus: instruction k is in its module's queue
//   `dmaLatency + ⌈(k+1)·16 / busBytes⌉` cycles after the start (the queues are deep enough never
//   to stall fetch).
// - A DMA (LOAD of any buffer, STORE) costs `dmaLatency` plus ⌈bytes / busBytes⌉ cycles for the
//   DRAM bytes it moves, plus `padEntryCycles` per buffer entry it zero-fills for padding.
// - GEMM issues one micro-op iteration per `gemmII` cycles (VTA's pipeline II 1), reset or not.
// - ALU issues one micro-op iteration per `aluII` cycles (II 2: it reads two accumulator rows).
// - FINISH costs `finishCycles`. Popping and pushing tokens is free; a module waits for a token
//   only until the cycle its producer finished the instruction that pushed it.
export interface VtaCycleModel {
  readonly dmaLatency: number
  readonly padEntryCycles: number
  readonly gemmII: number
  readonly aluII: number
  readonly finishCycles: number
}

export const VTA_CYCLE_MODEL: VtaCycleModel = {
  dmaLatency: 64,
  padEntryCycles: 1,
  gemmII: 1,
  aluII: 2,
  finishCycles: 1,
}

export const dmaCycles = (m: VtaCycleModel, busBytes: number, bytes: number, padEntries: number): number =>
  m.dmaLatency + Math.ceil(bytes / busBytes) + padEntries * m.padEntryCycles
