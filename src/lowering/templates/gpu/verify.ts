// Static checks of a lowered GPU function (TVM's VerifyGPUCode, and a race check of its own): every
// root loop nest is one kernel launch whose threads per block (the product of its threadIdx
// extents) and shared bytes fit the target record (a nest without thread loops that writes one
// element, a rank-0 result, is a kernel of one thread), every store runs inside a threadIdx loop and
// every local (register) buffer is allocated inside one, no
// barrier sits under a condition (it must be block-uniform), and between two barriers no shared
// buffer is written by one statement and read or written at other indices by another (a read of
// another thread's element before the barrier that publishes it).
import { collect, exprKey, type Expr } from "../../../ast/te/expr.js"
import type { Buffer, PrimFunc, Stmt } from "../../../ast/tir/tir.js"
import { sizeOf } from "../../../ast/graph/tensor.js"
import type { GpuLimits } from "./limits.js"
import type * as S from "../../../ast/schedule/schedule.js"

/**
 * The virtual threads a thread of the schedule's kernels runs, at most over its stages: the
 * product of a stage's vthread-bound loops, times those of the stage it is attached into that
 * enclose the attachment (lowering.InjectVirtualThread gives each virtual thread its section of
 * the register tile and its copy of the updates, so this is how many the emitted kernel holds).
 */
export const vthreadsOf = (s: S.Schedule): number => {
  const memo = new Map<string, number>()
  /** Virtual threads around a stage's body, down to leaf position `upTo` (exclusive; all: its length). */
  const around = (name: string, upTo?: number): number => {
    const st = s.stages.get(name)
    if (!st) return 1
    const own = st.leaf.slice(0, upTo ?? st.leaf.length).reduce((p, a) => p * (st.annotations.get(a)?.kind === "vthread" ? st.axes.get(a)!.extent : 1), 1)
    return own * (st.attach.kind === "at" ? outside(st.attach.stage, st.attach.axis) : 1)
  }
  const outside = (name: string, axis: string): number => {
    const key = `${name}\0${axis}`
    if (!memo.has(key)) memo.set(key, around(name, (s.stages.get(name)?.leaf.indexOf(axis) ?? -1) + 1))
    return memo.get(key)!
  }
  return Math.max(1, ...[...s.stages.keys()].map((n) => around(n)))
}

/** One kernel (a root loop nest): its launch and what it uses. */
export interface GpuKernelStats {
  /** Product of the blockIdx extents, and of the threadIdx extents (the largest loop per tag). */
  readonly blocks: number
  readonly threads: number
  readonly sharedBytes: number
  /** 32-bit words of local (register) buffers one thread holds at once, at most. */
  readonly localWords: number
}

export interface GpuVerifyResult {
  readonly kernels: readonly GpuKernelStats[]
  /** What breaks a limit or a rule (empty: it verifies). */
  readonly problems: readonly string[]
}

export const BYTES: Record<string, number> = { float64: 8, int64: 8, uint64: 8, float16: 2, bfloat16: 2, int16: 2, uint16: 2, int8: 1, uint8: 1, bool: 1 }
const bytesOf = (b: Buffer) => sizeOf(b.shape) * (BYTES[b.dtype] ?? 4)

const reads = (e: Expr) => collect(e, (x) => x.kind === "read") as Extract<Expr, { kind: "read" }>[]

/** Reads in a statement's own expressions (not its children's). */
const ownReads = (s: Stmt): Extract<Expr, { kind: "read" }>[] => {
  switch (s.kind) {
    case "store":
      return [...s.indices.flatMap(reads), ...reads(s.value)]
    case "if":
      return reads(s.cond)
    case "for":
      return [...reads(s.min), ...reads(s.extent)]
    case "let":
    case "evaluate":
      return reads(s.value)
    default:
      return []
  }
}

export const verifyGpuFunc = (f: PrimFunc, limits: GpuLimits): GpuVerifyResult => {
  const problems: string[] = []
  const shared = new Map<string, Buffer>()
  let body = f.body
  while (body.kind === "allocate") {
    if (body.buffer.scope === "shared") shared.set(body.buffer.name, body.buffer)
    body = body.body
  }
  const nests = body.kind === "seq" ? body.body : [body]
  const kernels = nests.map((nest, k): GpuKernelStats => {
    const extents = new Map<string, number>()
    const usedShared = new Set<string>()
    let localWords = 0
    // walk: thread extents, local words live at once (a buffer allocated inside vthread loops once
    // per virtual thread: InjectVirtualThread gives each its section), stores outside threads,
    // barriers under conditions
    const walk = (s: Stmt, inThread: boolean, underIf: boolean, local: number, vt = 1): void => {
      for (const r of ownReads(s)) if (shared.has(r.source)) usedShared.add(r.source)
      switch (s.kind) {
        case "for": {
          const thread = s.thread && s.thread !== "vthread" ? s.thread : undefined
          if (thread && s.extent.kind === "const") extents.set(thread, Math.max(extents.get(thread) ?? 1, s.extent.value))
          else if (thread) problems.push(`kernel ${k}: loop ${s.var.name} bound to ${thread} has a non-constant extent`)
          walk(s.body, inThread || !!thread?.startsWith("threadIdx"), underIf, local, s.forKind === "vthread" && s.extent.kind === "const" ? vt * s.extent.value : vt)
          return
        }
        case "seq":
          for (const b of s.body) walk(b, inThread, underIf, local, vt)
          return
        case "store":
          if (shared.has(s.buffer)) usedShared.add(s.buffer)
          if (!inThread) problems.push(`kernel ${k}: the store to ${s.buffer} runs outside every threadIdx loop (every thread of the block would run it)`)
          return
        case "if":
          walk(s.then, inThread, true, local, vt)
          if (s.else) walk(s.else, inThread, true, local, vt)
          return
        case "allocate": {
          const words = s.buffer.scope === "local" ? Math.ceil(bytesOf(s.buffer) / 4) * vt : 0
          if (s.buffer.scope === "global") problems.push(`kernel ${k}: a global buffer ${s.buffer.name} is allocated inside the kernel`)
          // (a local buffer is a thread's registers: outside the thread loops every thread would hold its own copy of what the block shares)
          if (s.buffer.scope === "local" && !inThread) problems.push(`kernel ${k}: the local buffer ${s.buffer.name} is allocated outside every threadIdx loop`)
          localWords = Math.max(localWords, local + words)
          walk(s.body, inThread, underIf, local + words, vt)
          return
        }
        case "let":
          walk(s.body, inThread, underIf, local, vt)
          return
        case "barrier":
          if (underIf) problems.push(`kernel ${k}: a barrier under a condition (not block-uniform)`)
          return
        default:
          return
      }
    }
    walk(nest, false, false, 0)
    // a nest without thread loops whose stores all write one element (a rank-0 result: nothing to
    // bind a thread to) is a one-thread kernel
    const scalar = !["threadIdx.x", "threadIdx.y", "threadIdx.z"].some((t) => extents.has(t)) && storesScalar(nest)
    if (scalar) problems.splice(0, problems.length, ...problems.filter((p) => !p.startsWith(`kernel ${k}: the store to `)))
    const threads = ["threadIdx.x", "threadIdx.y", "threadIdx.z"].reduce((p, t) => p * (extents.get(t) ?? 1), 1)
    const blocks = ["blockIdx.x", "blockIdx.y", "blockIdx.z"].reduce((p, t) => p * (extents.get(t) ?? 1), 1)
    const sharedBytes = [...usedShared].reduce((n, b) => n + bytesOf(shared.get(b)!), 0)
    if (!scalar && !extents.has("threadIdx.x") && !extents.has("threadIdx.y") && !extents.has("threadIdx.z")) problems.push(`kernel ${k}: no loop is bound to threadIdx`)
    if (threads > limits.maxThreads) problems.push(`kernel ${k}: ${threads} threads per block, over the limit of ${limits.maxThreads}`)
    if (sharedBytes > limits.sharedBytes) problems.push(`kernel ${k}: ${sharedBytes} bytes of shared memory per block, over the limit of ${limits.sharedBytes}`)
    if (localWords * threads > limits.registers) problems.push(`kernel ${k}: ${localWords} local words × ${threads} threads, over the ${limits.registers} registers of a block`)
    problems.push(...sharedRaces(nest, shared, k))
    return { blocks, threads, sharedBytes, localWords }
  })
  return { kernels, problems }
}

/**
 * Shared-memory races between barriers: the statements of a phase (between two barriers, a
 * loop's body counted twice for the wrap-around to its next iteration) that write a shared buffer,
 * and those that read it; a phase where one statement writes it and another reads or writes it
 * at other indices is a race (the same indices: the same thread's own element, as an update
 * after its init).
 */
const sharedRaces = (nest: Stmt, shared: ReadonlyMap<string, Buffer>, k: number): string[] => {
  const problems = new Set<string>()
  type Access = { readonly stmt: Stmt; readonly key: string; readonly write: boolean }
  let phase = new Map<string, Access[]>()
  const note = (buffer: string, a: Access) => {
    if (!shared.has(buffer)) return
    const prev = phase.get(buffer) ?? []
    for (const p of prev)
      if (p.stmt !== a.stmt && (p.write || a.write) && p.key !== a.key)
        problems.add(`kernel ${k}: shared ${buffer} is ${p.write ? "written" : "read"} and ${a.write ? "written" : "read"} by different statements between two barriers`)
    phase.set(buffer, [...prev, a])
  }
  const visit = (s: Stmt): void => {
    for (const r of ownReads(s)) note(r.source, { stmt: s, key: r.indices.map(exprKey).join(","), write: false })
    switch (s.kind) {
      case "for":
        visit(s.body)
        if (s.extent.kind !== "const" || s.extent.value > 1) visit(s.body)
        return
      case "seq":
        s.body.forEach(visit)
        return
      case "store":
        note(s.buffer, { stmt: s, key: s.indices.map(exprKey).join(","), write: true })
        return
      case "if":
        visit(s.then)
        if (s.else) visit(s.else)
        return
      case "allocate":
      case "let":
        visit(s.body)
        return
      case "barrier":
        phase = new Map()
        return
      default:
        return
    }
  }
  visit(nest)
  return [...problems]
}

/** Whether every store of a statement writes a buffer at constant indices (one element: a scalar result). */
const storesScalar = (s: Stmt): boolean => {
  switch (s.kind) {
    case "store":
      return s.indices.every((i) => i.kind === "const")
    case "for":
    case "allocate":
    case "let":
      return storesScalar(s.body)
    case "seq":
      return s.body.every(storesScalar)
    case "if":
      return storesScalar(s.then) && (!s.else || storesScalar(s.else))
    default:
      return true
  }
}
