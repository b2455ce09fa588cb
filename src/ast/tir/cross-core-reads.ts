// Which core reads what another core wrote: a PrimFunc run with its parallel loops split as the c
// target's OpenMP `schedule(static)` splits them over `cores` threads (contiguous chunks, the first
// extent mod cores threads one iteration more; a parallel loop inside another runs in its thread),
// every store's element marked with the thread that wrote it, every read of an element some
// parallel loop wrote counted local or remote. A static figure of a schedule's partitioning,
// independent of timing noise: where a kernel's stages split the data alike, a core reads back
// what it wrote (from its own L2); where they split it along different loops, half of it (two
// cores) comes from the other core's. Values are not computed (reads return 0), so this is for
// kernels whose control flow does not depend on data (all the CPU templates' kernels).
import { evalExpr } from "../te/eval-expr.js"
import type { PrimFunc, Stmt } from "./tir.js"

/** Which thread stored each element of a buffer (its indices joined by commas); -1 outside every parallel loop. */
export type Writers = ReadonlyMap<string, ReadonlyMap<string, number>>

export interface CrossCoreReads {
  /** Reads of elements a parallel loop stored (by any thread), per buffer. */
  readonly reads: ReadonlyMap<string, number>
  /** Those of them stored by another thread than the reader, per buffer. */
  readonly remote: ReadonlyMap<string, number>
  /** Who stored each element of every buffer but the local ones: a kernel's outputs, for the next kernel's `given`. */
  readonly writers: Writers
}

/** The thread OpenMP's static schedule gives iteration `i` of `extent` over `cores` threads. */
export const staticOwner = (i: number, extent: number, cores: number): number => {
  const q = Math.floor(extent / cores)
  const r = extent % cores
  // the first r threads take q + 1 iterations, the rest q
  return i < r * (q + 1) ? Math.floor(i / (q + 1)) : r + Math.floor((i - r * (q + 1)) / Math.max(q, 1))
}

/**
 * Runs `f`'s loop nest over `cores` threads as the c target splits it and counts the reads of
 * elements a parallel loop stored in global memory (params and global intermediates; a thread's
 * local buffers are its own), and of those the reads of another thread's elements. `given`: who
 * stored the elements of some params before the call (the writers of the kernel that produced
 * them, renamed to this kernel's params), so a chain of kernels is counted across their seams.
 */
export const crossCoreReads = (f: PrimFunc, cores: number, given: Writers = new Map()): CrossCoreReads => {
  const writer = new Map<string, Map<string, number>>([...given].map(([b, m]) => [b, new Map(m)] as const))
  const reads = new Map<string, number>()
  const remote = new Map<string, number>()
  const env = new Map<string, number>()
  // (a thread's own scratch: local buffers are neither marked nor counted)
  const local = new Set<string>()
  let thread = -1 // -1: outside every parallel loop
  const read = (source: string, idx: readonly number[]): number => {
    const w = writer.get(source)?.get(idx.join(","))
    if (w !== undefined && w >= 0 && thread >= 0) {
      reads.set(source, (reads.get(source) ?? 0) + 1)
      if (w !== thread) remote.set(source, (remote.get(source) ?? 0) + 1)
    }
    return 0
  }
  const ev = (e: Parameters<typeof evalExpr>[0]) => evalExpr(e, env, read)
  const exec = (s: Stmt): void => {
    switch (s.kind) {
      case "for": {
        const min = ev(s.min)
        const ext = ev(s.extent)
        const outer = s.forKind === "parallel" && thread < 0
        for (let i = 0; i < ext; i++) {
          env.set(s.var.name, min + i)
          if (outer) thread = staticOwner(i, ext, cores)
          exec(s.body)
        }
        if (outer) thread = -1
        env.delete(s.var.name)
        return
      }
      case "seq":
        for (const b of s.body) exec(b)
        return
      case "store": {
        const idx = s.indices.map(ev)
        ev(s.value)
        if (local.has(s.buffer)) return
        const m = writer.get(s.buffer) ?? new Map<string, number>()
        writer.set(s.buffer, m)
        m.set(idx.join(","), thread)
        return
      }
      case "if":
        if (ev(s.cond)) exec(s.then)
        else if (s.else) exec(s.else)
        return
      case "let":
        env.set(s.var.name, ev(s.value))
        exec(s.body)
        env.delete(s.var.name)
        return
      case "allocate":
        if (s.buffer.scope === "local") local.add(s.buffer.name)
        exec(s.body)
        return
      case "evaluate":
        ev(s.value)
        return
      default:
        return
    }
  }
  exec(f.body)
  return { reads, remote, writers: writer }
}
