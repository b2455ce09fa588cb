// Pass 5, dependency-token insertion (TVM's CoProcSync for VTA's three modules), on the unrolled
// stream: every instruction's reads and writes (SRAM entries per buffer, DRAM bytes; a GEMM or ALU
// over the ranges its micro-ops and loops reach) are known, so each hazard between two modules —
// a read after a write, a write after a read or a write — is found, within an iteration or across
// iterations alike (loop-carried dependencies are ordinary ones once the loops are unrolled).
// For each of the four queues A→B, B's instructions are visited in order; for the latest A
// instruction before it that it conflicts with, A pushes (when it ends) and B pops (before it
// starts) — unless an earlier pop of that queue already waited for a push at or after it. Tokens
// carry no identity (the k-th pop takes the k-th push), and pushes and pops are both placed in
// program order, so each pop takes exactly the push it was placed for; the program order is a
// schedule every token admits, so no deadlock. Load and store share no queue: a conflict between
// them is a VtaTirError.
import type { VtaDerived } from "../../../ast/vta/config.js"
import { elemBytesOf } from "../../../ast/vta/dram-image.js"
import type { VtaDeps, VtaInsn, VtaUop } from "../../../ast/vta/isa.js"
import { VtaTirError } from "./ir.js"

type VtaModule = "load" | "compute" | "store"
type VtaQueue = "load→compute" | "compute→load" | "compute→store" | "store→compute"

/** The module an instruction runs on, as VTA's fetch routes it (the simulator's moduleOf). */
const moduleOf = (insn: VtaInsn): VtaModule =>
  insn.op === "LOAD" && (insn.memType === "inp" || insn.memType === "wgt") ? "load" : insn.op === "STORE" ? "store" : "compute"

interface Span {
  readonly space: string
  readonly lo: number
  /** Exclusive. */
  readonly hi: number
}

interface Access {
  readonly reads: Span[]
  readonly writes: Span[]
}

/** The spans an instruction reads and writes. */
export const accessOf = (d: VtaDerived, insn: VtaInsn, uops: readonly VtaUop[]): Access => {
  const reads: Span[] = []
  const writes: Span[] = []
  const span = (space: string, lo: number, n: number) => ({ space, lo, hi: lo + n })
  if (insn.op === "LOAD" || insn.op === "STORE") {
    const kind = insn.memType
    const eb = elemBytesOf(d, kind)
    const dramElems = insn.ySize > 0 && insn.xSize > 0 ? (insn.ySize - 1) * insn.xStride + insn.xSize : 0
    const dram = span("dram", insn.dramBase * eb, dramElems * eb)
    if (insn.op === "LOAD") {
      const rows = insn.yPad0 + insn.ySize + insn.yPad1
      const cols = insn.xPad0 + insn.xSize + insn.xPad1
      writes.push(span(kind, insn.sramBase, rows * cols))
      if (dramElems > 0) reads.push(dram)
    } else {
      reads.push(span("acc", insn.sramBase, insn.ySize * insn.xSize))
      if (dramElems > 0) writes.push(dram)
    }
  } else if (insn.op === "GEMM" || insn.op === "ALU") {
    reads.push(span("uop", insn.uopBgn, insn.uopEnd - insn.uopBgn))
    const reach = (base: number, fo: number, fi: number) => base + (insn.iterOut - 1) * fo + (insn.iterIn - 1) * fi
    const range = (space: string, pick: (u: VtaUop) => number, fo: number, fi: number): Span | undefined => {
      if (insn.iterOut === 0 || insn.iterIn === 0 || insn.uopEnd <= insn.uopBgn) return undefined
      let lo = Infinity
      let hi = -Infinity
      for (let k = insn.uopBgn; k < insn.uopEnd; k++) {
        const b = pick(uops[k])
        lo = Math.min(lo, b)
        hi = Math.max(hi, reach(b, fo, fi) + 1)
      }
      return { space, lo, hi }
    }
    const acc = range("acc", (u) => u.dst, insn.dstFactorOut, insn.dstFactorIn)
    if (acc) {
      writes.push(acc)
      if (insn.op === "ALU" || !insn.reset) reads.push(acc)
    }
    if (insn.op === "GEMM" && !insn.reset) {
      const inp = range("inp", (u) => u.src, insn.srcFactorOut, insn.srcFactorIn)
      const wgt = range("wgt", (u) => u.wgt, insn.wgtFactorOut, insn.wgtFactorIn)
      if (inp) reads.push(inp)
      if (wgt) reads.push(wgt)
    }
    if (insn.op === "ALU" && !insn.useImm) {
      const src = range("acc", (u) => u.src, insn.srcFactorOut, insn.srcFactorIn)
      if (src) reads.push(src)
    }
  }
  return { reads, writes }
}

const overlap = (a: readonly Span[], b: readonly Span[]): boolean => a.some((x) => b.some((y) => x.space === y.space && x.lo < y.hi && y.lo < x.hi))
export const conflict = (a: Access, b: Access): boolean => overlap(a.writes, b.reads) || overlap(a.writes, b.writes) || overlap(a.reads, b.writes)

/** The four queues: producer A, consumer B, and the flags A pushes and B pops. */
export const QUEUES: readonly { readonly queue: VtaQueue; readonly a: VtaModule; readonly b: VtaModule; readonly push: keyof VtaDeps; readonly pop: keyof VtaDeps }[] = [
  { queue: "load→compute", a: "load", b: "compute", push: "pushNext", pop: "popPrev" },
  { queue: "compute→load", a: "compute", b: "load", push: "pushPrev", pop: "popNext" },
  { queue: "compute→store", a: "compute", b: "store", push: "pushNext", pop: "popPrev" },
  { queue: "store→compute", a: "store", b: "compute", push: "pushPrev", pop: "popNext" },
]

export interface Token {
  readonly queue: VtaQueue
  /** The instructions that push and pop it. */
  readonly push: number
  readonly pop: number
}

export const insertTokens = (d: VtaDerived, insns: readonly VtaInsn[], uops: readonly VtaUop[]): { insns: VtaInsn[]; tokens: Token[] } => {
  const acc = insns.map((i) => accessOf(d, i, uops))
  const mod = insns.map(moduleOf)
  const deps: VtaDeps[] = insns.map((i) => ({ ...i.deps }))
  const tokens: Token[] = []
  for (const q of QUEUES) {
    let covered = -1
    for (let i = 0; i < insns.length; i++) {
      if (mod[i] !== q.b) continue
      for (let a = i - 1; a > covered; a--) {
        if (mod[a] !== q.a || !conflict(acc[a], acc[i])) continue
        deps[a] = { ...deps[a], [q.push]: true }
        deps[i] = { ...deps[i], [q.pop]: true }
        tokens.push({ queue: q.queue, push: a, pop: i })
        covered = a
        break
      }
    }
  }
  // load and store have no queue between them: they must not conflict at all
  const loads = insns.flatMap((_, k) => (mod[k] === "load" ? [k] : []))
  const stores = insns.flatMap((_, k) => (mod[k] === "store" ? [k] : []))
  for (const s of stores)
    for (const l of loads)
      if (conflict(acc[l], acc[s])) throw new VtaTirError({ pass: "insert-tokens", reason: `instructions ${l} (load) and ${s} (store) touch the same memory, and load and store share no token queue` })
  return { insns: insns.map((insn, k) => ({ ...insn, deps: deps[k] }) as VtaInsn), tokens }
}

/** The stream with one token taken out (its push and its pop): what the law checks is needed. */
export const withoutToken = (insns: readonly VtaInsn[], t: Token): VtaInsn[] => {
  const q = QUEUES.find((x) => x.queue === t.queue)!
  return insns.map((insn, k) => (k === t.push ? { ...insn, deps: { ...insn.deps, [q.push]: false } } : k === t.pop ? { ...insn, deps: { ...insn.deps, [q.pop]: false } } : insn) as VtaInsn)
}

/**
 * Whether instruction `to` starts only after `from` ends in every timing of the stream: a chain of
 * program order within a module and tokens (the k-th push of a queue met by its k-th pop) leads
 * from one to the other. What a token is for: without it, its push's and pop's instructions are
 * unordered (the law checks every inserted token is needed so).
 */
export const orderedBy = (insns: readonly VtaInsn[], from: number, to: number): boolean => {
  const mod = insns.map(moduleOf)
  const next = insns.map(() => [] as number[])
  const last = new Map<VtaModule, number>()
  insns.forEach((_, k) => {
    const p = last.get(mod[k])
    if (p !== undefined) next[p].push(k)
    last.set(mod[k], k)
  })
  for (const q of QUEUES) {
    const pushes = insns.flatMap((insn, k) => (mod[k] === q.a && insn.deps[q.push] ? [k] : []))
    const pops = insns.flatMap((insn, k) => (mod[k] === q.b && insn.deps[q.pop] ? [k] : []))
    pops.forEach((b, k) => {
      if (k < pushes.length) next[pushes[k]].push(b)
    })
  }
  const seen = new Set([from])
  const todo = [from]
  while (todo.length) {
    const k = todo.pop()!
    for (const n of next[k]) {
      if (n === to) return true
      if (!seen.has(n)) {
        seen.add(n)
        todo.push(n)
      }
    }
  }
  return false
}
