// The VTA accelerator's configuration as data, and every size derived from it the way VTA's
// include/vta/hw_spec_const.h derives them (apache/tvm-vta): element widths, matrix widths, buffer
// depths and the bit widths of the instruction fields that index those buffers.
//
// The default is VTA's published configuration (config/vta_config.json): int8 inputs and weights,
// int32 accumulators, BATCH 1, BLOCK 16 (a 1×16 · 16×16 GEMM core), micro-op buffer 32 KiB, input
// 32 KiB, weight 256 KiB, accumulator 128 KiB, and a 64-bit memory bus.
import { Data } from "effect"
import type { VtaAttrs } from "../target.js"

/** The free parameters, as logarithms base 2 like vta_config.json's LOG_* keys. */
export interface VtaConfig {
  readonly logInpWidth: number
  readonly logWgtWidth: number
  readonly logAccWidth: number
  readonly logBatch: number
  readonly logBlock: number
  readonly logUopBuffSize: number
  readonly logInpBuffSize: number
  readonly logWgtBuffSize: number
  readonly logAccBuffSize: number
  /** log2 of the AXI bus width in bits (pkg_config.py's fpga_log_axi_bus_width): 6 = 64 bits. */
  readonly logBusWidth: number
  /** The accelerator's clock in MHz (pkg_config.py's fpga_freq: 100 on the pynq and de10nano boards, VTA's default target). */
  readonly clockMhz: number
}

/** config/vta_config.json, plus the 64-bit bus of VTA's simulator and Pynq targets. */
export const defaultVtaConfig: VtaConfig = {
  logInpWidth: 3,
  logWgtWidth: 3,
  logAccWidth: 5,
  logBatch: 0,
  logBlock: 4,
  logUopBuffSize: 15,
  logInpBuffSize: 15,
  logWgtBuffSize: 18,
  logAccBuffSize: 17,
  logBusWidth: 6,
  clockMhz: 100,
}

/** A configuration VTA cannot be built with: a derived depth below one, a field wider than its word. */
export class VtaConfigError extends Data.TaggedError("VtaConfigError")<{ readonly reason: string }> {
  override get message(): string {
    return `VTA configuration: ${this.reason}`
  }
}

/** Fixed ISA constants of hw_spec_const.h (not derived from the configuration). */
export const VTA_ISA = {
  insBits: 128,
  uopBits: 32,
  opcodeBits: 3,
  aluOpcodeBits: 3,
  memIdBits: 3,
  sramAddrBits: 16,
  dramAddrBits: 32,
  sizeBits: 16,
  strideBits: 16,
  padBits: 4,
  loopIterBits: 14,
  aluImmBits: 16,
  mulArgBits: 8,
} as const

/** Everything hw_spec_const.h derives, in bits, bytes and buffer entries. */
export interface VtaDerived {
  readonly config: VtaConfig
  readonly batch: number
  readonly blockIn: number
  readonly blockOut: number
  readonly inpWidth: number
  readonly wgtWidth: number
  readonly accWidth: number
  /** Output (store) elements are as wide as inputs: LOG_OUT_WIDTH = LOG_INP_WIDTH. */
  readonly outWidth: number
  readonly busBytes: number
  /** Bytes of one buffer entry: a BATCH×BLOCK_IN input row, a BLOCK_OUT×BLOCK_IN weight block, … */
  readonly inpElemBytes: number
  readonly wgtElemBytes: number
  readonly accElemBytes: number
  readonly outElemBytes: number
  readonly uopElemBytes: number
  readonly insElemBytes: number
  /** Buffer depths in entries, and their logarithms (the widths of the fields that index them). */
  readonly uopDepth: number
  readonly inpDepth: number
  readonly wgtDepth: number
  readonly accDepth: number
  /** The output buffer shares the accumulator's depth (VTA_OUT_BUFF_DEPTH = ACC depth). */
  readonly outDepth: number
  readonly logUopDepth: number
  readonly logInpDepth: number
  readonly logWgtDepth: number
  readonly logAccDepth: number
  /** The ALU's shift operand width (VTA_SHR_ARG_BIT_WIDTH = LOG_ACC_WIDTH). */
  readonly shrArgBits: number
}

const need = (ok: boolean, reason: string): void => {
  if (!ok) throw new VtaConfigError({ reason })
}

/** Derives the sizes of hw_spec_const.h; a configuration that cannot exist is a VtaConfigError. */
export const deriveVta = (config: VtaConfig): VtaDerived => {
  need(Number.isFinite(config.clockMhz) && config.clockMhz > 0, `clockMhz = ${config.clockMhz} is not a positive clock`)
  for (const [k, v] of Object.entries(config)) if (k !== "clockMhz") need(Number.isInteger(v) && v >= 0 && v <= 30, `${k} = ${v} is not an integer in [0, 30]`)
  need(config.logInpWidth === 3 && config.logWgtWidth === 3, "inputs and weights must be 8-bit (LOG_INP_WIDTH = LOG_WGT_WIDTH = 3): the simulator reads them as int8")
  need(config.logAccWidth === 5, "accumulators must be 32-bit (LOG_ACC_WIDTH = 5): the simulator computes in int32")
  need(config.logBusWidth >= 3, "the bus must be at least 8 bits wide")
  const logInsBits = 7
  const logUopBits = 5
  const logUopDepth = config.logUopBuffSize - logUopBits + 3
  const logWgtDepth = config.logWgtBuffSize - config.logBlock - config.logBlock - config.logWgtWidth + 3
  const logInpDepth = config.logInpBuffSize - config.logBatch - config.logBlock - config.logInpWidth + 3
  const logAccDepth = config.logAccBuffSize - config.logBatch - config.logBlock - config.logAccWidth + 3
  for (const [name, d] of [["micro-op", logUopDepth], ["weight", logWgtDepth], ["input", logInpDepth], ["accumulator", logAccDepth]] as const) {
    need(d >= 0, `the ${name} buffer holds less than one entry (log2 depth ${d})`)
  }
  const batch = 1 << config.logBatch
  const block = 1 << config.logBlock
  const inpWidth = 1 << config.logInpWidth
  const wgtWidth = 1 << config.logWgtWidth
  const accWidth = 1 << config.logAccWidth
  const d: VtaDerived = {
    config,
    batch,
    blockIn: block,
    blockOut: block,
    inpWidth,
    wgtWidth,
    accWidth,
    outWidth: inpWidth,
    busBytes: (1 << config.logBusWidth) / 8,
    inpElemBytes: (inpWidth * batch * block) / 8,
    wgtElemBytes: (wgtWidth * block * block) / 8,
    accElemBytes: (accWidth * batch * block) / 8,
    outElemBytes: (inpWidth * batch * block) / 8,
    uopElemBytes: (1 << logUopBits) / 8,
    insElemBytes: (1 << logInsBits) / 8,
    uopDepth: 2 ** logUopDepth,
    inpDepth: 2 ** logInpDepth,
    wgtDepth: 2 ** logWgtDepth,
    accDepth: 2 ** logAccDepth,
    outDepth: 2 ** logAccDepth,
    logUopDepth,
    logInpDepth,
    logWgtDepth,
    logAccDepth,
    shrArgBits: config.logAccWidth,
  }
  // SRAM base fields are 16 bits: every buffer must be addressable by them.
  for (const [name, depth] of [["micro-op", d.uopDepth], ["input", d.inpDepth], ["weight", d.wgtDepth], ["accumulator", d.accDepth]] as const) {
    need(depth <= 2 ** VTA_ISA.sramAddrBits, `the ${name} buffer's ${depth} entries exceed the ${VTA_ISA.sramAddrBits}-bit SRAM address of memory instructions`)
  }
  return d
}

/**
 * The configuration of a `VtaAttrs` target record (src/ast/target.ts), which keeps BLOCK_IN and
 * BLOCK_OUT apart: VTA's hw_spec.h has one BLOCK, so they must agree. The bus is not in that record.
 */
export const vtaConfigOfAttrs = (a: VtaAttrs, logBusWidth = defaultVtaConfig.logBusWidth, clockMhz = defaultVtaConfig.clockMhz): VtaConfig => {
  need(a.logBlockIn === a.logBlockOut, `BLOCK_IN (2^${a.logBlockIn}) and BLOCK_OUT (2^${a.logBlockOut}) differ: VTA's ISA has one BLOCK`)
  return {
    logInpWidth: a.logInpWidth,
    logWgtWidth: a.logWgtWidth,
    logAccWidth: a.logAccWidth,
    logBatch: a.logBatch,
    logBlock: a.logBlockIn,
    logUopBuffSize: a.logUopBuffSize,
    logInpBuffSize: a.logInpBuffSize,
    logWgtBuffSize: a.logWgtBuffSize,
    logAccBuffSize: a.logAccBuffSize,
    logBusWidth,
    clockMhz,
  }
}
