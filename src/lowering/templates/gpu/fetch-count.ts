// How many elements a block stores into shared memory per reduction step (the cooperative fetches
// of the tiled GPU schedules), counted by the TIR evaluator on the function as emitted (after the
// cuda TIR pipeline): its blockIdx loops cut to their first block, every statement that neither
// stores into a shared buffer nor holds a barrier left out (the compute: what a fetch stores and
// where depends on loop variables alone), a counter bumped after every store into a shared
// buffer, run on zero inputs. A step is one iteration of the loops around the
// fetches' barriers (the outer reduction loops), counted on the function as lowered (before the
// pipeline partitions or unrolls any of them).
// TVM's schedules fetch a block's tiles once a step for all of its threads and virtual threads
// (Chen et al. 2018 §4.3); a schedule whose virtual threads each re-fetch their own tile stores
// several times the shared tiles' elements a step.
import { add, c, read } from "../../../ast/te/expr.js"
import { evaluatePrimFunc } from "../../../ast/tir/evaluate.js"
import { mapStmt, seq, type Buffer, type PrimFunc, type Stmt } from "../../../ast/tir/tir.js"
import { sizeOf } from "../../../ast/graph/tensor.js"

export interface FetchCount {
  /** Element stores into shared memory by block 0's threads over the whole kernel. */
  readonly stores: number
  /** Reduction steps: the product of the serial loops around the first barrier of the lowered function (0: no barrier). */
  readonly steps: number
  /** stores / steps. */
  readonly perStep: number
  /** Elements of the shared buffers the kernel allocates (one block's tiles). */
  readonly sharedElements: number
}

const COUNTER = "__shared_stores"

/** Block 0's shared-memory stores per reduction step: `emitted` run, its steps counted on `lowered` (the same schedule before the TIR pipeline). */
export const sharedFetchesPerStep = (lowered: PrimFunc, emitted: PrimFunc): FetchCount => {
  const f = emitted
  const shared = new Map<string, Buffer>()
  const collectShared = (s: Stmt): void => {
    if (s.kind === "allocate") {
      if (s.buffer.scope === "shared") shared.set(s.buffer.name, s.buffer)
      collectShared(s.body)
    } else if (s.kind === "for" || s.kind === "let") collectShared(s.body)
    else if (s.kind === "seq") s.body.forEach(collectShared)
    else if (s.kind === "if") {
      collectShared(s.then)
      if (s.else) collectShared(s.else)
    }
  }
  collectShared(f.body)
  const bump: Stmt = { kind: "store", buffer: COUNTER, indices: [c(0)], value: add(read(COUNTER, [c(0)], "float32"), c(1, "float32")) }
  const body = mapStmt(fetchesOnly(f.body, shared) ?? seq([]), (s) => {
    if (s.kind === "store" && shared.has(s.buffer)) return seq([s, bump])
    if (s.kind === "for" && s.thread?.startsWith("blockIdx")) return { ...s, min: c(0), extent: c(1) }
    return undefined
  })
  const counter: Buffer = { name: COUNTER, dtype: "float32", shape: [1], scope: "global" }
  const out = evaluatePrimFunc({ ...f, params: [...f.params, counter], body }, new Map())
  const stores = out.get(COUNTER)!.data[0]
  const steps = stepsOf(lowered.body, 1) ?? 0
  const sharedElements = [...shared.values()].reduce((n, b) => n + sizeOf(b.shape), 0)
  return { stores, steps, perStep: steps ? stores / steps : 0, sharedElements }
}

/** The statement with only its stores into shared buffers, its barriers and what encloses them (undefined: none). */
const fetchesOnly = (s: Stmt, shared: ReadonlyMap<string, Buffer>): Stmt | undefined => {
  switch (s.kind) {
    case "store":
      return shared.has(s.buffer) ? s : undefined
    case "barrier":
      return s
    case "for":
    case "let":
    case "allocate": {
      const body = fetchesOnly(s.body, shared)
      return body && { ...s, body }
    }
    case "seq": {
      const body = s.body.flatMap((b) => fetchesOnly(b, shared) ?? [])
      return body.length ? seq(body) : undefined
    }
    case "if": {
      const then = fetchesOnly(s.then, shared)
      const otherwise = s.else && fetchesOnly(s.else, shared)
      return then || otherwise ? { ...s, then: then ?? seq([]), ...(otherwise ? { else: otherwise } : {}) } : undefined
    }
    default:
      return undefined
  }
}

/** The product of the serial (not thread-bound) loop extents around the first barrier. */
const stepsOf = (s: Stmt, outer: number): number | undefined => {
  switch (s.kind) {
    case "barrier":
      return outer
    case "for": {
      const serial = s.forKind !== "thread" && s.forKind !== "vthread"
      return stepsOf(s.body, serial && s.extent.kind === "const" ? outer * s.extent.value : outer)
    }
    case "allocate":
    case "let":
      return stepsOf(s.body, outer)
    case "seq":
      for (const b of s.body) {
        const n = stepsOf(b, outer)
        if (n !== undefined) return n
      }
      return undefined
    case "if":
      return stepsOf(s.then, outer) ?? (s.else ? stepsOf(s.else, outer) : undefined)
    default:
      return undefined
  }
}

