// The VTA simulator's typed errors: a program the accelerator cannot run is one of these, never a
// wrong answer (VTA's own functional simulator spins forever on a deadlock and wraps addresses).
import { Data } from "effect"

/** The four one-bit dependency token queues between VTA's modules. */
export type VtaQueue = "load→compute" | "compute→load" | "compute→store" | "store→compute"
export type VtaModule = "load" | "compute" | "store"

/** No module can go on: `insn` pops a token from `queue`, which is empty and that nothing left will push. */
export class VtaDeadlockError extends Data.TaggedError("VtaDeadlockError")<{
  readonly index: number
  readonly insn: string
  readonly module: VtaModule
  readonly queue: VtaQueue
  /** Every module's blocked instruction, as "module #index waits on queue". */
  readonly blocked: readonly string[]
}> {
  override get message(): string {
    return `VTA deadlock: instruction ${this.index} (${this.insn}) in the ${this.module} module pops a ${this.queue} token that is never pushed; blocked: ${this.blocked.join("; ")}`
  }
}

/**
 * Two modules touch the same buffer entries (or DRAM bytes) at overlapping times and one of them
 * writes: a missing dependency token. The hardware's answer would depend on timing; here it is
 * this error, naming both instructions.
 */
export class VtaRaceError extends Data.TaggedError("VtaRaceError")<{
  readonly index: number
  readonly insn: string
  readonly other: number
  readonly otherInsn: string
  readonly space: "uop" | "inp" | "wgt" | "acc" | "dram"
  readonly lo: number
  readonly hi: number
  readonly cycle: number
}> {
  override get message(): string {
    return `VTA race at cycle ${this.cycle}: instruction ${this.index} (${this.insn}) and instruction ${this.other} (${this.otherInsn}), still running, both touch ${this.space} [${this.lo}, ${this.hi}) and one writes — a dependency token is missing`
  }
}

/** An on-chip buffer index outside the buffer (the hardware would wrap it silently). */
export class VtaSramAddressError extends Data.TaggedError("VtaSramAddressError")<{
  readonly index: number
  readonly insn: string
  readonly buffer: "uop" | "inp" | "wgt" | "acc" | "out"
  readonly entry: number
  readonly depth: number
}> {
  override get message(): string {
    return `VTA instruction ${this.index} (${this.insn}): ${this.buffer} buffer entry ${this.entry} is outside its ${this.depth} entries`
  }
}

/** A DRAM byte range outside the memory the program was given. */
export class VtaDramAddressError extends Data.TaggedError("VtaDramAddressError")<{
  readonly index: number
  readonly insn: string
  readonly byteAddress: number
  readonly bytes: number
  readonly dramBytes: number
}> {
  override get message(): string {
    return `VTA instruction ${this.index} (${this.insn}): DRAM bytes [${this.byteAddress}, ${this.byteAddress + this.bytes}) are outside its ${this.dramBytes} bytes`
  }
}

/** An instruction no VTA module runs as written: a dependency flag its module has no queue for, a store with padding, … */
export class VtaIllegalInsnError extends Data.TaggedError("VtaIllegalInsnError")<{
  readonly index: number
  readonly insn: string
  readonly reason: string
}> {
  override get message(): string {
    return `VTA instruction ${this.index} (${this.insn}): ${this.reason}`
  }
}

export type VtaSimError = VtaDeadlockError | VtaRaceError | VtaSramAddressError | VtaDramAddressError | VtaIllegalInsnError
