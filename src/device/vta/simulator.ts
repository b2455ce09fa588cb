// VTA's simulator: fetch routes the instruction stream to three modules — load (input and weight
// LOADs), compute (GEMM, ALU, micro-op and accumulator LOADs, FINISH) and store (STOREs) — which
// run concurrently, each in its own instruction order, and meet only through four one-bit token
// queues (load→compute, compute→load, compute→store, store→compute), with VTA's semantics:
//
//   module   pop_prev          pop_next          push_prev         push_next
//   load     —                 compute→load      —                 load→compute
//   compute  load→compute      store→compute     compute→load      compute→store
//   store    compute→store     —                 store→compute     —
//
// An instruction pops its tokens before it runs and pushes after it finishes. The simulation is a
// discrete-event one over the cycle model (cycle-model.ts): among the modules whose next
// instruction has its tokens, the one that can start earliest runs next (ties: load, compute,
// store); it reads the buffers when it starts and its writes land when it ends (execute.ts). Two
// instructions of different modules that run at overlapping cycles and touch the same buffer
// entries (or DRAM bytes), one of them writing, are a race — a missing token — and a VtaRaceError
// naming both, where the hardware's answer would depend on timing. When
// no module can go on and instructions remain, the run is a VtaDeadlockError naming the
// instruction. Pure: a fresh copy of DRAM and zeroed SRAM in, DRAM and statistics out.
import { Effect } from "effect"
import { deriveVta, type VtaConfig, type VtaConfigError, type VtaDerived } from "../../ast/vta/config.js"
import { formatInsn } from "../../ast/vta/disasm.js"
import { layoutOf, type VtaInsn } from "../../ast/vta/isa.js"
import { VTA_CYCLE_MODEL, type VtaCycleModel } from "./cycle-model.js"
import { VtaDeadlockError, VtaIllegalInsnError, VtaRaceError, type VtaModule, type VtaQueue, type VtaSimError } from "./errors.js"
import { executeInsn, freshState, type VtaRange, type VtaState } from "./execute.js"

export const VTA_MODULES: readonly VtaModule[] = ["load", "compute", "store"]
export const VTA_QUEUES: readonly VtaQueue[] = ["load→compute", "compute→load", "compute→store", "store→compute"]

/** The module fetch sends an instruction to (VTA's fetch: LOADs of inp/wgt to load, STOREs to store, the rest to compute). */
export const moduleOf = (insn: VtaInsn): VtaModule =>
  insn.op === "STORE" ? "store" : insn.op === "LOAD" && (insn.memType === "inp" || insn.memType === "wgt") ? "load" : "compute"

type Flag = "popPrev" | "popNext" | "pushPrev" | "pushNext"
const QUEUE_OF: Record<VtaModule, Record<Flag, VtaQueue | undefined>> = {
  load: { popPrev: undefined, popNext: "compute→load", pushPrev: undefined, pushNext: "load→compute" },
  compute: { popPrev: "load→compute", popNext: "store→compute", pushPrev: "compute→load", pushNext: "compute→store" },
  store: { popPrev: "compute→store", popNext: undefined, pushPrev: "store→compute", pushNext: undefined },
}

export interface VtaModuleStats {
  readonly insns: number
  /** Cycles running instructions. */
  readonly busy: number
  /** Cycles with an instruction fetched but waiting for a token. */
  readonly stall: number
  /** The rest of the run: nothing fetched yet, or nothing left. */
  readonly idle: number
}

export interface VtaStats {
  readonly totalCycles: number
  readonly modules: Readonly<Record<VtaModule, VtaModuleStats>>
  /** DRAM bytes moved per buffer (inp, wgt, acc, uop loaded; out stored; insn fetched). */
  readonly bytes: Readonly<Record<"inp" | "wgt" | "acc" | "uop" | "out" | "insn", number>>
  /** GEMM micro-op iterations that multiply (each BATCH·BLOCK_IN·BLOCK_OUT multiply-adds), and those that reset. */
  readonly gemmOps: number
  readonly gemmResetOps: number
  readonly aluOps: number
  /** Cycles the GEMM core multiplies (non-reset GEMM iterations × II). */
  readonly gemmBusy: number
  /** gemmBusy / totalCycles. */
  readonly utilization: number
  /** Tokens pushed and never popped, per queue. */
  readonly tokensLeft: Readonly<Record<VtaQueue, number>>
}

export interface VtaRun {
  readonly dram: Uint8Array
  readonly stats: VtaStats
  /** Each instruction's module, start and end cycle, in program order. */
  readonly timeline: readonly { readonly module: VtaModule; readonly start: number; readonly end: number }[]
}

interface ModuleState {
  readonly name: VtaModule
  readonly program: number[]
  next: number
  clock: number
  busy: number
  stall: number
}

const checkFlags = (index: number, insn: VtaInsn, module: VtaModule): void => {
  for (const f of ["popPrev", "popNext", "pushPrev", "pushNext"] as const) {
    if (insn.deps[f] && QUEUE_OF[module][f] === undefined) {
      throw new VtaIllegalInsnError({ index, insn: formatInsn(insn), reason: `the ${module} module has no ${f} queue` })
    }
  }
}

export interface VtaRunOptions {
  /**
   * False: GEMM and ALU skip their arithmetic (the accumulators keep whatever they held), for a
   * tuner that needs only the cycles. Timing never depends on the data: the statistics, the
   * timeline and every typed error are those of the full run (a law checks it); the DRAM is not.
   */
  readonly functional?: boolean
}

/** Runs a program on a DRAM image; a program VTA cannot run is a typed error, thrown. */
export const runVtaSync = (d: VtaDerived, insns: readonly VtaInsn[], dram: Uint8Array, model: VtaCycleModel = VTA_CYCLE_MODEL, options: VtaRunOptions = {}): VtaRun => {
  const functional = options.functional ?? true
  layoutOf(d) // the configuration must be encodable
  const s: VtaState = freshState(d, dram)
  const modules: ModuleState[] = VTA_MODULES.map((name) => ({ name, program: [], next: 0, clock: 0, busy: 0, stall: 0 }))
  const byName = Object.fromEntries(modules.map((m) => [m.name, m])) as Record<VtaModule, ModuleState>
  insns.forEach((insn, k) => {
    const m = moduleOf(insn)
    checkFlags(k, insn, m)
    byName[m].program.push(k)
  })
  const arrival = (k: number): number => model.dmaLatency + Math.ceil(((k + 1) * d.insElemBytes) / d.busBytes)
  const queues = Object.fromEntries(VTA_QUEUES.map((q) => [q, [] as number[]])) as Record<VtaQueue, number[]>
  const heads = Object.fromEntries(VTA_QUEUES.map((q) => [q, 0])) as Record<VtaQueue, number>
  const timeline: { module: VtaModule; start: number; end: number }[] = new Array(insns.length)
  const bytes = { inp: 0, wgt: 0, acc: 0, uop: 0, out: 0, insn: insns.length * d.insElemBytes }
  let gemmOps = 0
  let gemmResetOps = 0
  let aluOps = 0
  /** Writes of instructions still running, applied in the order they end. */
  const inFlight: { end: number; seq: number; module: VtaModule; commit: () => void; reads: readonly VtaRange[]; writes: readonly VtaRange[] }[] = []
  const overlap = (a: readonly VtaRange[], b: readonly VtaRange[]): VtaRange | undefined => {
    for (const x of a) for (const y of b) if (x.space === y.space && x.lo < y.hi && y.lo < x.hi) return { space: x.space, lo: Math.max(x.lo, y.lo), hi: Math.min(x.hi, y.hi) }
    return undefined
  }
  const applyUntil = (t: number): void => {
    inFlight.sort((a, b) => a.end - b.end || a.seq - b.seq)
    while (inFlight.length > 0 && inFlight[0].end <= t) inFlight.shift()!.commit()
  }

  /** The queues the module's next instruction pops, or undefined when it has none left. */
  const pops = (m: ModuleState): VtaQueue[] | undefined => {
    if (m.next >= m.program.length) return undefined
    const insn = insns[m.program[m.next]]
    return (["popPrev", "popNext"] as const).filter((f) => insn.deps[f]).map((f) => QUEUE_OF[m.name][f]!)
  }

  for (;;) {
    let best: { m: ModuleState; start: number; ready: number } | undefined
    let pending = false
    for (const m of modules) {
      const need = pops(m)
      if (need === undefined) continue
      pending = true
      if (need.some((q) => heads[q] >= queues[q].length)) continue
      const ready = Math.max(m.clock, arrival(m.program[m.next]))
      const start = need.reduce((t, q) => Math.max(t, queues[q][heads[q]]), ready)
      if (best === undefined || start < best.start) best = { m, start, ready }
    }
    if (best === undefined) {
      if (!pending) break
      const blocked = modules.flatMap((m) => {
        const need = pops(m)
        const q = need?.find((q) => heads[q] >= queues[q].length)
        return q === undefined ? [] : [{ m, k: m.program[m.next], q }]
      })
      const first = blocked.reduce((a, b) => (b.k < a.k ? b : a))
      throw new VtaDeadlockError({
        index: first.k,
        insn: formatInsn(insns[first.k]),
        module: first.m.name,
        queue: first.q,
        blocked: blocked.map((b) => `${b.m.name} #${b.k} waits on ${b.q}`),
      })
    }
    const { m, start, ready } = best
    const k = m.program[m.next]
    const insn = insns[k]
    for (const q of pops(m)!) heads[q]++
    applyUntil(start)
    const eff = executeInsn(d, model, s, k, insn, functional)
    const end = start + eff.cycles
    for (const y of inFlight) {
      if (y.module === m.name) continue
      const hit = overlap(eff.writes, [...y.reads, ...y.writes]) ?? overlap(eff.reads, y.writes)
      if (hit) throw new VtaRaceError({ index: k, insn: formatInsn(insn), other: y.seq, otherInsn: formatInsn(insns[y.seq]), ...hit, cycle: start })
    }
    inFlight.push({ end, seq: k, module: m.name, commit: eff.commit, reads: eff.reads, writes: eff.writes })
    if (insn.deps.pushPrev) queues[QUEUE_OF[m.name].pushPrev!].push(end)
    if (insn.deps.pushNext) queues[QUEUE_OF[m.name].pushNext!].push(end)
    m.stall += start - ready
    m.busy += eff.cycles
    m.clock = end
    m.next++
    timeline[k] = { module: m.name, start, end }
    if (eff.buffer !== undefined) bytes[eff.buffer] += eff.bytes
    gemmOps += eff.gemmOps
    gemmResetOps += eff.gemmResetOps
    aluOps += eff.aluOps
  }

  applyUntil(Infinity)
  const totalCycles = modules.reduce((t, m) => Math.max(t, m.clock), insns.length === 0 ? 0 : arrival(insns.length - 1))
  const stat = (m: ModuleState): VtaModuleStats => ({ insns: m.program.length, busy: m.busy, stall: m.stall, idle: totalCycles - m.busy - m.stall })
  const gemmBusy = gemmOps * model.gemmII
  return {
    dram: s.dram,
    timeline,
    stats: {
      totalCycles,
      modules: { load: stat(byName.load), compute: stat(byName.compute), store: stat(byName.store) },
      bytes,
      gemmOps,
      gemmResetOps,
      aluOps,
      gemmBusy,
      utilization: totalCycles === 0 ? 0 : gemmBusy / totalCycles,
      tokensLeft: Object.fromEntries(VTA_QUEUES.map((q) => [q, queues[q].length - heads[q]])) as Record<VtaQueue, number>,
    },
  }
}

const SIM_ERROR_TAGS = new Set(["VtaDeadlockError", "VtaRaceError", "VtaSramAddressError", "VtaDramAddressError", "VtaIllegalInsnError", "VtaConfigError"])

/** The simulator at a stage boundary: its typed errors in the error channel (anything else is a defect). */
export const runVta = (config: VtaConfig, insns: readonly VtaInsn[], dram: Uint8Array, model: VtaCycleModel = VTA_CYCLE_MODEL): Effect.Effect<VtaRun, VtaSimError | VtaConfigError> =>
  Effect.suspend(() => {
    try {
      return Effect.succeed(runVtaSync(deriveVta(config), insns, dram, model))
    } catch (e) {
      if (typeof e === "object" && e !== null && SIM_ERROR_TAGS.has((e as { _tag?: string })._tag ?? "")) return Effect.fail(e as VtaSimError | VtaConfigError)
      throw e
    }
  })
