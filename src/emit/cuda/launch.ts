// A PrimFunc as CUDA launches (TVM's SplitHostDevice): its top-level allocations become workspace
// buffers in device memory (they outlive one launch) — except shared-memory ones, which lowering
// hoists to the top as one buffer per block and which go inside their launch's block loops — and
// each top-level statement under them one launch, in order — a group's root stages (a softmax's max, sum and output) depend on each other
// through global memory, which only the end of a launch makes visible to every block. A launch is
// its blockIdx loops (outermost, each of constant extent: the grid) around a body whose threadIdx
// loops give the block; a statement of the body outside every threadIdx loop ran once per block in
// the evaluator, so it runs on one thread here, between barriers (a threadIdx loop of extent 1 for
// each thread dimension the launch has, which the evaluator reads the same way). Pure.
import { c, collect, v } from "../../ast/te/expr.js"
import type { ThreadTag } from "../../ast/schedule/stage.js"
import { mapStmt, seq, someStmt, type Buffer, type PrimFunc, type Stmt } from "../../ast/tir/tir.js"
import { EmitError } from "../emit-error.js"

export type Dim3 = readonly [number, number, number]

export interface Launch {
  /** The `__global__` function's name: the PrimFunc's, or `<name>_<i>` when it has several launches. */
  readonly name: string
  readonly grid: Dim3
  readonly block: Dim3
  /** Its code: the PrimFunc's params then its workspace buffers (global), over the launch's statement. */
  readonly func: PrimFunc
}

export interface KernelLaunches {
  /** The PrimFunc's name. */
  readonly name: string
  /** Its top-level allocations, in device memory for the whole sequence of launches. */
  readonly workspace: readonly Buffer[]
  readonly launches: readonly Launch[]
}

const DIM = { x: 0, y: 1, z: 2 } as const
const BLOCK_TAGS = ["blockIdx.x", "blockIdx.y", "blockIdx.z"] as const
const THREAD_TAGS = ["threadIdx.x", "threadIdx.y", "threadIdx.z"] as const

export const isBlockLoop = (s: Stmt): boolean => s.kind === "for" && s.forKind === "thread" && (s.thread?.startsWith("blockIdx") ?? false)
export const isThreadLoop = (s: Stmt): boolean => s.kind === "for" && s.forKind === "thread" && (s.thread?.startsWith("threadIdx") ?? false)

/** Whether `s` reads or writes buffer `name`. */
const uses = (s: Stmt, name: string): boolean => {
  let used = false
  mapStmt(
    s,
    (x) => {
      if ((x.kind === "store" && x.buffer === name) || (x.kind === "intrinsic" && [x.output, ...x.inputs].some((r) => r.buffer === name))) used = true
      return undefined
    },
    (e) => {
      if (!used && collect(e, (y) => y.kind === "read" && y.source === name).length) used = true
      return e
    },
  )
  return used
}

/** The largest constant extent of the loops bound to each tag in `s` (1 where none is). */
const dims = (s: Stmt, tags: readonly ThreadTag[], fail: (why: string) => never): [number, number, number] => {
  const out: [number, number, number] = [1, 1, 1]
  someStmt(s, (x) => {
    if (x.kind !== "for" || x.forKind !== "thread" || !x.thread) return false
    const k = tags.indexOf(x.thread)
    if (k < 0) return false
    if (x.extent.kind !== "const" || x.min.kind !== "const" || x.min.value !== 0) fail(`the ${x.thread} loop ${x.var.name} does not run over [0, constant): a launch needs its extent`)
    out[k] = Math.max(out[k], x.extent.value)
    return false
  })
  return out
}

/**
 * The body with every statement outside all threadIdx loops (and holding none) run by one thread,
 * between barriers: where the launch has threads, the evaluator ran it once per block.
 */
const oneThread = (s: Stmt, block: Dim3, bound: ReadonlySet<string>, fresh: () => string): Stmt => {
  const unbound = THREAD_TAGS.filter((t) => block[DIM[t.slice(-1) as "x"]] > 1 && !bound.has(t))
  if (unbound.length === 0) return s
  if (!someStmt(s, isThreadLoop)) {
    if (s.kind === "barrier") return s
    const wrapped = unbound.reduce<Stmt>((body, tag) => ({ kind: "for", var: v(fresh()), min: c(0), extent: c(1), forKind: "thread", thread: tag, body }), s)
    return seq([{ kind: "barrier" }, wrapped, { kind: "barrier" }])
  }
  const rec = (x: Stmt) => oneThread(x, block, bound, fresh)
  switch (s.kind) {
    case "seq":
      return seq(s.body.map(rec))
    case "for":
      return isThreadLoop(s) ? { ...s, body: oneThread(s.body, block, new Set([...bound, s.thread!]), fresh) } : { ...s, body: rec(s.body) }
    case "allocate":
    case "let":
      return { ...s, body: rec(s.body) }
    case "if":
      return { ...s, then: rec(s.then), ...(s.else ? { else: rec(s.else) } : {}) }
    default:
      return s
  }
}

/** The launches of a PrimFunc (throws EmitError when a statement cannot be one). */
export const splitLaunches = (f: PrimFunc): KernelLaunches => {
  const fail = (reason: string): never => {
    throw new EmitError({ target: "cuda", kernel: f.name, reason })
  }
  const workspace: Buffer[] = []
  const perBlock: Buffer[] = []
  const regions: Stmt[] = []
  const peel = (s: Stmt): void => {
    if (s.kind === "allocate") {
      if (s.buffer.scope === "shared") perBlock.push(s.buffer)
      else workspace.push({ ...s.buffer, scope: "global" })
      return peel(s.body)
    }
    if (s.kind === "seq") return s.body.forEach(peel)
    regions.push(s)
  }
  peel(f.body)
  const names = new Set([...f.params.map((p) => p.name)])
  for (const w of workspace) {
    if (names.has(w.name)) fail(`the workspace buffer ${JSON.stringify(w.name)} shadows another buffer`)
    names.add(w.name)
  }
  // each block's shared buffers: in the one launch that uses them (a later launch cannot see them)
  const sharedOf = regions.map((r) => perBlock.filter((b) => uses(r, b.name)))
  for (const b of perBlock) {
    const users = sharedOf.filter((bs) => bs.includes(b)).length
    if (users > 1) fail(`the shared buffer ${JSON.stringify(b.name)} is used by ${users} launches: shared memory lasts one launch`)
  }
  let counter = 0
  const launches = regions.map((r, i): Launch => {
    // the grid: the blockIdx loops around the launch's statement, none below it
    let inner = r
    while (isBlockLoop(inner)) inner = (inner as Extract<Stmt, { kind: "for" }>).body
    if (someStmt(inner, isBlockLoop)) fail(`a blockIdx loop below another statement of its launch (launch ${i}): blocks are the outermost loops`)
    if (someStmt(r, (x) => x.kind === "for" && x.forKind === "vthread")) fail(`a vthread loop reached emission (launch ${i}): lowering.InjectVirtualThread runs first`)
    const grid = dims(r, BLOCK_TAGS, fail)
    const block = dims(r, THREAD_TAGS, fail)
    const inBlock = (s: Stmt): Stmt => sharedOf[i].reduceRight<Stmt>((body, buffer) => ({ kind: "allocate", buffer, body }), oneThread(s, block, new Set(), () => `tessera_one${counter++}`))
    const rebuild = (s: Stmt): Stmt => (isBlockLoop(s) ? { ...(s as Extract<Stmt, { kind: "for" }>), body: rebuild((s as Extract<Stmt, { kind: "for" }>).body) } : inBlock(s))
    const name = regions.length === 1 ? f.name : `${f.name}_${i}`
    return { name, grid, block, func: { name, params: [...f.params, ...workspace], body: rebuild(r) } }
  })
  return { name: f.name, workspace, launches }
}
